"""Builds datamove's compiled CPU core (``datamove._native``) with the system C++ compiler.

setuptools' ``Extension`` is the whole build: one C++ file, no code generator,
no build tool beyond the compiler that builds Python's own extensions, so
``pip install .`` works wherever CPython's headers and a C++17 compiler are.
"""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def build_extensions(self):
        if self.compiler.compiler_type == "msvc":
            flags = ["/O2", "/std:c++17"]
        else:
            # -O3 vectorizes the block tiles; no -march: the module runs on any CPU of its architecture
            flags = ["-O3", "-g0", "-std=c++17", "-fno-strict-aliasing", "-fvisibility=hidden", "-fno-exceptions"]
        for ext in self.extensions:
            ext.extra_compile_args = flags
            if sys.platform.startswith("linux"):
                ext.extra_link_args = ["-pthread"]
        super().build_extensions()


setup(
    ext_modules=[Extension("datamove._native", ["src/datamove/_native.cpp"], language="c++")],
    cmdclass={"build_ext": BuildExt},
)
