"""The compiled core built with AddressSanitizer and UndefinedBehaviorSanitizer, run by tests/test_core_safety.py
in a process of its own with the sanitizer runtime preloaded (``python sanitizer_cases.py CORE.so``), at the
level DATAMOVE_ISA names: any out-of-bounds access, overflow or other undefined behaviour aborts it.

It runs the native tests' tile sweep and random calls (tests/test_native_engine.py's ``_sweep``: plain and
streamed), the guard-page cases' calls, repeated calls through the core's own table (runtime/repeat.cpp), and
the safety tests' crafted programs (each refused before a byte moves), all against the sanitized core, bit
for bit against the NumPy engine. Prints the level, the calls, the repeated calls and the programs refused.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(path: str) -> int:
    import ctypes

    from datamove.engines.native import engine as native_engine

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
    repeats = _repeats(core)
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
    print(core.ISA, compared, repeats, refused)
    return 0


def _repeats(core) -> int:
    """Repeated calls through the sanitized core's own table (runtime/repeat.cpp): each call made until its
    programs are kept, then again at every alignment and into out= at every alignment, bit for bit against
    the NumPy engine; and a program kept that does not fit its arrays, refused."""
    import datamove as dm
    from datamove import ops
    from datamove.dispatch import recipes
    from datamove.engines.native import threads
    from datamove.engines.native import engine as native_engine

    native_engine.setup_repeats(core)
    assert core.repeat_facts() == (True, True), core.repeat_facts()
    ops._repeated = core.repeated
    recipes.RECIPES.clear()
    rng = np.random.default_rng(7)
    calls = [("space_to_depth", ("blocks_first", 2), (1, 4, 16, 16)), ("depth_to_space", ("depth_first", 2), (1, 16, 8, 8)),
             ("space_to_depth", ("depth_first", 3), (2, 3, 9, 12)),
             ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]), (4, 4, 8, 8)),
             ("space_to_batch", ([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]), (1, 4, 16, 16)),
             ("space_to_batch", ([1, 2, 2], [0, 1, 1], [0, 1, 1]), (2, 30, 30)),
             # (many small images with pads: a program with tables of its own, which the core keeps with it)
             ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), (64, 8, 10, 10))]
    compared = 0
    for op, args, shape in calls:
        for dtype in (np.uint8, np.int16, np.float32, np.float64):
            base = rng.integers(0, 100, size=shape).astype(dtype)
            want = getattr(dm, op)(base, *args, engine="numpy")
            buffer = np.zeros(base.nbytes + 64, np.uint8)
            outs = np.zeros(want.nbytes + 64, np.uint8)
            for offset in range(0, 65, base.itemsize):
                data = buffer[offset:offset + base.nbytes].view(dtype).reshape(shape)
                data[...] = base
                out = outs[offset:offset + want.nbytes].view(dtype).reshape(want.shape)
                for _ in range(3):
                    assert np.array_equal(getattr(dm, op)(data, *args), want), (op, dtype, offset)
                    assert np.array_equal(getattr(dm, op)(data, *args, out=out), want), (op, dtype, offset)
                    compared += 2
    _threads_with_the_table_emptied(rng)
    recipes.RECIPES.clear()  # (the table with them: nothing kept for the program below to hide behind)
    native_engine.STREAM_BYTES = 1 << 62  # (its stream mode, 0: none planned for another in its place)
    op, args, shape = calls[0]
    x = np.zeros(shape, np.float32)
    out = np.zeros((1, 16, 8, 8), np.float32)
    assert core.remember(op, *args, "channels_first", "auto", x, out, b"\x01" + bytes(7), 0, np.empty)
    try:
        core.repeated(op, x, *args, "channels_first", out, "auto")
    except ValueError:
        pass
    else:
        raise AssertionError("a kept program that does not fit its arrays ran")
    recipes.RECIPES.clear()
    return compared


def _threads_with_the_table_emptied(rng) -> None:
    """Threads making first calls and repeats of the same shapes, of 64 KiB and more (run with the GIL
    released: first() and repeated() hold their entry and program across the run), while one empties the
    core's table: a use of what the emptying freed would be the sanitizer's to report."""
    import datamove as dm
    from concurrency import run_threads  # (tests/, this script's folder)
    from datamove.dispatch import recipes

    inputs = [rng.integers(0, 99, size=(1, 8, 64, 32 * k)).astype(np.float32) for k in (2, 3, 4)]
    wants = [dm.space_to_depth(x, "blocks_first", 2, engine="numpy") for x in inputs]
    wrong = []

    def work(i):
        for round_ in range(40):
            if i == 0 and round_ % 4 == 0:
                recipes.RECIPES.clear()
            k = (i + round_) % len(inputs)
            if not np.array_equal(dm.space_to_depth(inputs[k], "blocks_first", 2), wants[k]):
                wrong.append((i, round_))

    run_threads(work, 4)
    assert not wrong, wrong


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
