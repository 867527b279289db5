"""Builds datamove's compiled CPU core (``datamove._native``) with the system C++ compiler.

setuptools' ``Extension`` is the whole build: C++17 files in ``src/native``, no code
generator, no build tool beyond the compiler that builds Python's own
extensions, so ``pip install .`` works wherever CPython's headers and a C++17
compiler are. The files compile side by side, one job per core: each word
width's kernels are a file of their own (``word1.cpp`` ... ``word16.cpp``, and
``wide.cpp`` for the 32- to 128-byte words of windows); ``planner.cpp`` compiles
the planner's four parts (``src/native/planner/``) as one, ``runtime.cpp`` the
runtime's three (``src/native/runtime/``: the program's parser, the thread pool,
the Python module).

Where the core cannot be built (no C++ compiler, or one that fails), the
install still succeeds without it, with one warning line in the build log, and
datamove runs on its NumPy engine. ``DATAMOVE_BUILD_CORE`` chooses:
``auto`` (the default: build it if it can be), ``required`` (a failed build
fails the install: wheels and CI use it) or ``skip`` (do not try)::

    DATAMOVE_BUILD_CORE=required pip install .
"""

import glob
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

SOURCES = sorted(glob.glob("src/native/*.cpp"))
# The order the files compile in (distutils sorts them by name): the longest first, so that no long file is left
# to run alone at the end; seconds of compiler time each on the 2-core machine (GCC 12, -O3), word4 18.7, word8
# 17.3, word2 16.2, word1 16.0, word16 13.9, wide 13.6, planner 8.3, runtime 4.7. A file not named here goes first.
LONGEST_FIRST = ("word4", "word8", "word2", "word1", "word16", "wide", "planner", "runtime")
# planner.cpp's and runtime.cpp's parts are included by them, not compiled on their own
HEADERS = sorted(glob.glob("src/native/*.hpp") + glob.glob("src/native/planner/*.cpp") + glob.glob("src/native/runtime/*.cpp"))


_BUILD_CORE = ("auto", "required", "skip")


def _build_core():
    """``DATAMOVE_BUILD_CORE``: whether to build the core, and whether failing to is an error."""
    value = os.environ.get("DATAMOVE_BUILD_CORE", "").strip().lower() or "auto"
    if value not in _BUILD_CORE:
        sys.exit(f"error: DATAMOVE_BUILD_CORE must be one of {', '.join(_BUILD_CORE)}, got {value!r}")
    return value


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _parallel_compile(compiler):
    """``compiler.compile`` with one thread per core, each running the compiler on one file.

    distutils compiles an extension's files one after the other; the word files take about
    as long each, so on two cores the build takes half the time. With GCC, the kernels' files
    (those that begin with ``#include "run_rows.hpp"``) read that header precompiled (:func:`_precompiled`).
    """
    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
        kernels = {obj for obj, (src, _) in build.items() if _first_include(src) == "run_rows.hpp"}
        pool = ThreadPoolExecutor(max(1, min(_cores(), len(objects))))
        header = pool.submit(_precompiled, compiler, kernels and output_dir, cc_args, extra_postargs)

        def one(obj):
            src, ext = build[obj]
            args = cc_args
            if obj in kernels:
                args = header.result() + cc_args  # (the other files compile meanwhile: the planner first)
            compiler._compile(obj, src, ext, args, extra_postargs, pp_opts)

        with pool:
            # the files that need no precompiled header first, while it is made; then the kernels; longest first
            order = sorted(build, key=lambda obj: (obj in kernels, _longest_first(build[obj][0])))
            list(pool.map(one, order))  # list: raises the first compile error
        return objects

    compiler.compile = compile


def _longest_first(path):
    name = os.path.splitext(os.path.basename(path))[0]
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else -1


def _first_include(path):
    """The file the first ``#include "..."`` of a source names (None where it has none)."""
    with open(path, encoding="utf-8") as source:
        for line in source:
            found = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
            if found:
                return found[1]
    return None


def _precompiled(compiler, folder, cc_args, extra_postargs):
    """The arguments that make a file read ``run_rows.hpp`` precompiled, or none.

    The kernels' six files each spent 1.1-1.7 s of their 13-19 s parsing it (2-core AMD EPYC, GCC 12); read
    precompiled (2.5 s, once, while the other files compile) they make the same code, byte for byte. GCC only,
    on Linux: anything else, or a precompile that fails, and the files parse the header as before.
    """
    driver = os.path.basename((getattr(compiler, "compiler_so_cxx", None) or compiler.compiler_so)[0])
    if not folder or not sys.platform.startswith("linux") or "clang" in driver or not ("g++" in driver or "gcc" in driver
                                                                                       or driver in ("c++", "cc")):
        return []
    folder = os.path.join(folder, "precompiled")
    os.makedirs(folder, exist_ok=True)
    stub = os.path.join(folder, "run_rows_first.hpp")  # (run_rows.hpp itself as the main file warns of its #pragma once)
    with open(stub, "w", encoding="utf-8") as out:
        out.write('#include "run_rows.hpp"\n')
    compiler.language_map = {**compiler.language_map, ".hpp": "c++"}  # (the C++ driver, as for the .cpp files)
    try:
        compiler._compile(stub + ".gch", stub, ".hpp", ["-x", "c++-header"] + cc_args, extra_postargs, [])
    except (CCompilerError, ExecError, OSError):
        return []
    return ["-I", folder, "-include", "run_rows_first.hpp", "-Winvalid-pch"]


def _reason(exc):
    """A failed build's cause in a line: setuptools' message holds the whole compiler command.

    >>> _reason(Exception("Command '['false', '-O3', '-c', 'src/native/a.cpp', '-o', 'a.o']' returned non-zero exit status 1."))
    "the compiler 'false' failed on src/native/a.cpp (exit status 1)"
    """
    text = str(exc)
    found = re.search(r"Command '\['([^']*)'.*?'-c', '([^']*)'.*exit status (-?\d+)", text)
    if found:
        return f"the compiler {found[1]!r} failed on {found[2]} (exit status {found[3]})"
    return text if len(text) <= 300 else text[:300] + " ..."


class BuildExt(build_ext):
    def build_extensions(self):
        if self.compiler.compiler_type == "msvc":
            flags = ["/O2", "/std:c++17"]
        else:
            # -O3 vectorizes the block tiles; no -march: the module runs on any CPU of its architecture.
            # -fno-wrapv undoes the -fwrapv of Python's own CFLAGS, which setuptools passes first: with
            # signed overflow defined to wrap, GCC may not assume the loops' signed indices never wrap, and
            # some kernels ran slower (channels-last DepthToSpace 16 channels into 4, 64 MiB: 1.14-1.39x the
            # copy floor built with it, 0.99-1.06x without, same source, in turns). The core relies on no
            # signed overflow.
            flags = ["-O3", "-g0", "-std=c++17", "-fno-wrapv", "-fno-strict-aliasing", "-fvisibility=hidden",
                     "-fno-exceptions"]
            if hasattr(self.compiler, "_setup_compile") and hasattr(self.compiler, "_compile"):
                _parallel_compile(self.compiler)
        for ext in self.extensions:
            ext.extra_compile_args = flags
            if sys.platform.startswith("linux"):
                ext.extra_link_args = ["-pthread"]
        super().build_extensions()

    def build_extension(self, ext):
        if _build_core() == "skip":
            return self._without_core("DATAMOVE_BUILD_CORE=skip")
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            if not ext.optional:  # DATAMOVE_BUILD_CORE=required
                raise
            self._without_core(_reason(exc))

    @staticmethod
    def _without_core(reason):
        # One line, so that it stands out in pip's log (pip install -v shows it); the extension is optional,
        # so setuptools then installs the package without it (an editable install copies nothing).
        print(f"WARNING: datamove's compiled core (datamove._native) was not built ({reason}); datamove is "
              "installed without it and runs on its NumPy engine, slower on large arrays. To build it, install a "
              "C++17 compiler and Python's headers and reinstall; DATAMOVE_BUILD_CORE=required makes this an error.",
              file=sys.stderr, flush=True)


setup(
    ext_modules=[Extension("datamove._native", SOURCES, include_dirs=["src/native"], depends=HEADERS, language="c++",
                           optional=_build_core() != "required")],
    cmdclass={"build_ext": BuildExt},
)
