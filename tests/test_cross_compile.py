"""The compiled core compiles for every platform its wheels are built for, checked here on any machine.

Every file of ``src/native`` is compiled (``-c -O0``: the compiler's whole front end and code generator, so
a target-feature error counts too) by zig's clang, from the ``ziglang`` package: one compiler that carries
the C and C++ headers of every target, so no SDK or container is needed. The targets: x86-64 Linux,
aarch64 Linux, x86-64 Windows (MinGW's headers: MSVC's are not redistributable) and aarch64 macOS.
``module.cpp`` includes this Python's own headers; for Windows its ``pyconfig.h`` (a Linux build's) is
adjusted as Windows' says (no ``sys/select.h``, a 4-byte ``long``, ``MS_WINDOWS``). A file that fails on
one target fails that target's test with the compiler's errors. Also: each target gets the instruction
set it is meant to (x86-64 its SIMD levels and streaming stores, aarch64 the portable path), and the CPU
detection MSVC compiles (``cpu.hpp``: cpuid and XCR0 read directly) builds in clang's MSVC mode and, run
here, agrees with GCC's builtins and the core's own level. Which platforms run the tests: x86-64 Linux.

Cost, on the 2-core AMD EPYC machine shared with other builds (load average 6-7), a fresh zig cache: 55-81 s
wall per target (x86-64 Windows the longest), 258 s for the file, 150 s of CPU time. A file of the word
kernels is most of it (about 7 s each at -O0).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from glob import glob
from pathlib import Path

import pytest

from datamove.engines.native import engine as native_engine

NATIVE = Path(__file__).resolve().parent.parent / "src" / "native"
TARGETS = ["x86_64-linux-gnu", "aarch64-linux-gnu", "x86_64-windows-gnu", "aarch64-macos"]
# -O0 without zig's default debug info and UBSan checks: the check is whether it compiles, not what it makes
FLAGS = ["-std=c++17", "-O0", "-g0", "-fno-sanitize=all", "-fno-exceptions"]

needs_zig = pytest.mark.skipif(importlib.util.find_spec("ziglang") is None,
                               reason="needs ziglang (the test extra: pip install -e '.[test]')")

# Compiled beside the core's files for each target: the instruction-set path its build takes.
_PATH_OF_TARGET = """
#include "common.hpp"
#if defined(__x86_64__)
static_assert(DM_HAVE_STREAM && dm::kLowestIsa == dm::IsaSse2, "x86-64 builds its SIMD levels and streaming stores");
#else
static_assert(!DM_HAVE_STREAM && dm::kLowestIsa == dm::IsaPortable, "other CPUs build the portable path");
#endif
"""


def _zig(target, source, out, includes, extra=()):
    """zig's clang on one file for ``target``: its errors (zig's own warnings left out), or ``""``."""
    command = [sys.executable, "-m", "ziglang", "c++", "-target", target, *FLAGS, *extra,
               *(f"-I{path}" for path in includes), "-c", str(source), "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode == 0:
        return ""
    errors = "".join(line for line in done.stderr.splitlines(True) if not line.startswith("zig: warning:"))
    return f"{Path(source).name} for {target} (exit status {done.returncode}):\n{errors[-3000:]}"


def _python_headers(target, where):
    """The include folders for Python.h on ``target``: this Python's, with a pyconfig.h for Windows in front."""
    include = sysconfig.get_paths()["include"]
    if "windows" not in target:
        return [include]
    # Python.h includes "pyconfig.h" from its own folder first: a copy of it beside the shim finds the shim
    where.mkdir(exist_ok=True)
    shutil.copy2(os.path.join(include, "Python.h"), where / "Python.h")
    (where / "pyconfig.h").write_text(
        f'#include "{Path(include, "pyconfig.h").as_posix()}"\n'
        "#undef HAVE_SYS_SELECT_H\n"
        "#undef SIZEOF_LONG\n#define SIZEOF_LONG 4\n"
        "#undef SIZEOF_WCHAR_T\n#define SIZEOF_WCHAR_T 2\n"
        "#define MS_WINDOWS 1\n#define MS_WIN64 1\n")
    return [str(where), include]


@needs_zig
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Python.h and its Windows shim assume a Linux build's")
@pytest.mark.parametrize("target", TARGETS)
def test_every_core_file_compiles_for(target, tmp_path):
    """Each file of src/native, and the instruction-set path the target builds, compiled for ``target``
    (the files side by side, one job per core)."""
    path_check = tmp_path / "path_of_target.cpp"
    path_check.write_text(_PATH_OF_TARGET)
    sources = sorted(glob(str(NATIVE / "*.cpp"))) + [str(path_check)]
    assert len(sources) >= 9, sources  # core, planner, wide, the word files, and the path check
    includes = _python_headers(target, tmp_path / "python") + [str(NATIVE)]
    jobs = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    with ThreadPoolExecutor(jobs) as pool:
        errors = list(pool.map(lambda source: _zig(target, source, tmp_path / (Path(source).stem + ".o"), includes),
                               sources))
    failed = [error for error in errors if error]
    assert not failed, "\n\n".join(failed)


_MSVC_CPU = """
#include "cpu.hpp"
#if defined(__GNUC__) || !defined(_MSC_VER)
#error "not MSVC's mode: the check would compile GCC's path"
#endif
bool has_any() {
    dm::cpu_relax();
    const dm::CpuFeatures has = dm::cpu_features();
    return has.ssse3 || has.avx2 || has.avx512f || has.avx512bw || has.avx512vbmi;
}
"""


@needs_zig
def test_the_cpu_detection_compiles_in_msvc_mode(tmp_path):
    """cpu.hpp's MSVC path (__cpuidex, _xgetbv) compiled by clang as MSVC would (x86_64-windows-msvc:
    _MSC_VER, no __GNUC__), freestanding, since zig carries no MSVC C library headers; the rest of the core
    needs those, so MSVC itself builds it only in the Windows wheel job."""
    source = tmp_path / "msvc_cpu.cpp"
    source.write_text(_MSVC_CPU)
    error = _zig("x86_64-windows-msvc", source, tmp_path / "msvc_cpu.o", [str(NATIVE)], ["-ffreestanding"])
    assert not error, error


_BOTH_WAYS = """
#include <cstdio>
#include "cpu.hpp"
int main() {
    const dm::CpuFeatures a = dm::cpu_features(), b = dm::cpuid_features();
    std::printf("%d%d%d%d%d %d%d%d%d%d\\n", a.ssse3, a.avx2, a.avx512f, a.avx512bw, a.avx512vbmi,
                b.ssse3, b.avx2, b.avx512f, b.avx512bw, b.avx512vbmi);
}
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or not sys.platform.startswith("linux"),
                    reason="cpuid on x86-64, the system compiler on Linux")
def test_the_msvc_cpu_detection_agrees_with_the_builtins_here(tmp_path):
    """cpuid_features (what MSVC's build asks), compiled by the system compiler and run on this machine,
    finds the features GCC's __builtin_cpu_supports finds, and so the level the core itself reports."""
    cxx = shlex.split(sysconfig.get_config_var("CXX") or "c++")
    if shutil.which(cxx[0]) is None:
        pytest.skip("no C++ compiler")
    source, program = tmp_path / "both_ways.cpp", tmp_path / "both_ways"
    source.write_text(_BOTH_WAYS)
    subprocess.run(cxx + ["-std=c++17", "-O1", f"-I{NATIVE}", str(source), "-o", str(program)], check=True,
                   capture_output=True, timeout=120)
    builtins, cpuid = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout.split()
    assert cpuid == builtins
    ssse3, avx2, avx512f, avx512bw, avx512vbmi = (flag == "1" for flag in cpuid)
    level = ("avx512" if avx512f and avx512bw and avx512vbmi else "avx512f" if avx512f else "avx2" if avx2
             else "ssse3" if ssse3 else "sse2")
    assert level == native_engine.core().CPU_ISA
