"""datamove.engines.loops: a plan's view pairs as merged loops of wide words, which the NumPy recipes copy by.

Over planner_cases' random calls and layouts (every item size, permuted, reversed and gapped strides, offsets
off the item's alignment), each copy and fill as ``merged`` / ``merged_fill`` loops, run as one strided NumPy
copy of words, writes the NumPy engine's bytes; and merging never leaves more loops than the views had dims.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import planner_cases as cases
from datamove.engines import loops, numpy_engine

_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.dtype("V16")}


def _words(array: np.ndarray, word: int, start: int, nest: tuple, side: int) -> np.ndarray:
    """``array``'s memory as a nest's words on one side (1: src, 2: dst), ``start`` words from its lowest
    address (the memory the array spans, read through ctypes: the array must outlive the view)."""
    low = array.ctypes.data + loops.lowest_offset(array)
    extent = array.itemsize + sum((n - 1) * abs(s) for n, s in zip(array.shape, array.strides))
    memory = np.frombuffer((ctypes.c_char * extent).from_address(low), np.uint8)
    shape = tuple(l[0] for l in nest) or (1,)
    strides = tuple(l[side] * word for l in nest) or (0,)
    return np.ndarray(shape, _WORDS[word], memory, start * word, strides)


@pytest.mark.parametrize("seed", range(4))
def test_merged_loops_copy_what_the_plan_says(seed):
    rng = np.random.default_rng(seed)
    compared = 0
    for _ in range(150):
        plan, data, out, _, _ = cases.random_case(rng)
        if data.dtype.itemsize == 0 or not data.size or not out.size:
            continue
        want = numpy_engine.execute(plan, data, np.zeros_like(out))
        got = out  # (zeros: random_case makes it so)
        for src, dst in plan.copies:
            nest = loops.merged(data, got, src, dst)
            assert nest.word in _WORDS and len(nest.loops) <= len(src.dims) + 1  # (the item's bytes: one more)
            _words(got, nest.word, nest.dst_start, nest.loops, 2)[...] = _words(data, nest.word, nest.src_start, nest.loops, 1)
        for view in plan.fills:
            nest = loops.merged_fill(got, view)
            _words(got, nest.word, nest.dst_start, nest.loops, 2)[...] = np.zeros((), _WORDS[nest.word])
        assert got.tobytes() == want.tobytes()
        compared += 1
    assert compared > 100
