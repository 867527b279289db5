"""Builds datamove's compiled CPU core (``datamove._native``) with the system C++ compiler.

setuptools' ``Extension`` is the whole build: C++17 files in ``src/native``, no code
generator, no build tool beyond the compiler that builds Python's own
extensions, so ``pip install .`` works wherever CPython's headers and a C++17
compiler are. The files compile side by side, one job per core: each word
width's kernels are a file of their own (``word1.cpp`` ... ``word128.cpp``).
"""

import glob
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# the word files first: the longest (8-11 s each at -O3 on the 2-core machine), so none is left to run alone at the end
SOURCES = sorted(glob.glob("src/native/*.cpp"), key=lambda path: (not os.path.basename(path).startswith("word"), path))
HEADERS = sorted(glob.glob("src/native/*.hpp"))


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _parallel_compile(compiler):
    """``compiler.compile`` with one thread per core, each running the compiler on one file.

    distutils compiles an extension's files one after the other; the word files take about
    as long each, so on two cores the build takes half the time.
    """
    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj):
            if obj in build:
                src, ext = build[obj]
                compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(max(1, min(_cores(), len(objects)))) as pool:
            list(pool.map(one, objects))  # list: raises the first compile error
        return objects

    compiler.compile = compile


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


setup(
    ext_modules=[Extension("datamove._native", SOURCES, include_dirs=["src/native"], depends=HEADERS, language="c++")],
    cmdclass={"build_ext": BuildExt},
)
