"""The compiled core built with AddressSanitizer and UndefinedBehaviorSanitizer, run by tests/test_core_safety.py
in a process of its own with the sanitizer runtime preloaded (``python sanitizer_cases.py CORE.so``), at the
level DATAMOVE_ISA names: any out-of-bounds access, overflow or other undefined behaviour aborts it.

It runs the native tests' tile sweep and random calls (tests/test_native_engine.py's ``_sweep``: plain and
streamed), the guard-page cases' calls, and the safety tests' crafted programs (each refused before a byte
moves), all against the sanitized core, bit for bit against the NumPy engine. Prints the level and the calls.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(path: str) -> int:
    import ctypes

    from datamove.engines import native_engine

    # the sanitizer's runtime is in the process (preloaded), and the core is built against it
    assert hasattr(ctypes.CDLL(None), "__asan_init"), "AddressSanitizer's runtime is not loaded"

    spec = importlib.util.spec_from_file_location("datamove._native", path)
    core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core)
    native_engine.core()
    native_engine._native = core  # every call of the native engine goes to the sanitized core

    import test_native_engine as native_tests  # (its helpers only: no test runs on import)
    import guard_page_cases

    compared = 0
    for stream in (1 << 62, 0):
        native_engine.STREAM_BYTES = stream
        compared += native_tests._sweep(core)
    # the guard-page cases against plain heap memory, which AddressSanitizer guards with its redzones
    guard_page_cases.guarded = lambda nbytes, at_end: np.empty(nbytes, np.uint8)
    compared += guard_page_cases.count_calls()
    refused = 0
    import test_core_safety as safety
    for name in sorted(safety.FITTING):
        step, src_words, dst_words = safety.FITTING[name]
        src, dst = safety._arrays(src_words, dst_words)
        core.run(safety._program(step), src, dst, 1, 0)
        pattern, word, block, lo, hi, src0, dst0, loops = step
        for s, d in [(src0, dst0 - 1), (src0, dst0 + 1), (src0 - 1, dst0), (src0 + 1, dst0)]:
            try:
                core.run(safety._program((pattern, word, block, lo, hi, s, d, loops)), src, dst, 1, 0)
            except ValueError:
                refused += 1
    print(core.ISA, compared, refused)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
