"""The compiled planner's units from tables (``src/native/planner/units.cpp``) held to
:func:`datamove.engines.native.units.lower_units`, bit for bit: over the shared random calls and layouts
(``tests/planner_cases.py``), and over calls drawn where units apply (SpaceToBatch with pads of small
images, channels-last BatchToSpace with crops, NCHW and channels-last, ranks 3-5, items of 4 and 8 bytes,
permuted, reversed, gapped and not dense outputs, units past SMALL_UNIT_WORDS, strides that reach past a
table's reach), counting the cases that took units so that no test passes on Nones alone.

``units_flat`` sees an array as the buffer protocol exports it, and NumPy exports a contiguous array's
strides cleaned up (an axis of length 1, or any axis of an empty array, gets the contiguous stride, not
``array.strides``' own), so each array is compared in the layout the buffer protocol gives (the same
memory, the strides the core reads): the Python side then sees what the core sees.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import planner_cases as cases
from datamove import shapes
from datamove.engines.native import core_format, engine as native_engine
from lowering import units
from lowering.strided import _lowest_offset

native = pytest.importorskip("datamove._native") if native_engine.available() else None
pytestmark = pytest.mark.skipif(native is None, reason="the compiled core is not loaded")


def _as_exported(array: np.ndarray) -> np.ndarray:
    """``array`` with the strides its buffer exports (what ``units_flat`` reads)."""
    return as_strided(array, strides=memoryview(array).strides)


def _expected(plan, data, out):
    item = data.dtype.itemsize
    steps = units.lower_units(plan, data, out, (-_lowest_offset(data) // item, -_lowest_offset(out) // item))
    if steps is None:
        return None
    return np.concatenate([[len(steps)]] + steps).astype(np.int64).tobytes()


def _check(plan, data, out):
    """Compares the two sides on one case; the unit's words where it took units, else 0."""
    data, out = _as_exported(data), _as_exported(out)
    expected = _expected(plan, data, out)
    found = native.units_flat(cases.encode_plan(plan).tobytes(), data, out)
    if expected != found:
        where = (plan.source, data.shape, data.strides, out.shape, out.strides, data.dtype)
        assert found is not None and expected is not None, (expected is None, found is None, where)
        e, f = np.frombuffer(expected, np.int64), np.frombuffer(found, np.int64)
        at = np.nonzero(e[:min(e.size, f.size)] != f[:min(e.size, f.size)])[0][:8]
        raise AssertionError((e.size, f.size, at.tolist(), e[at].tolist(), f[at].tolist(), e[:18].tolist(), where))
    return 0 if found is None else int(np.frombuffer(found, np.int64)[11])


def test_shared_random_cases():
    """planner_cases' random calls and layouts: as drawn (every item size), and again with items of 4
    and 8 bytes only (the only ones units take)."""
    rng = np.random.default_rng(20261128)
    took = 0
    for _ in range(1000):
        plan, data, out, _, _ = cases.random_case(rng)
        took += _check(plan, data, out) > 0
    for _ in range(1600):
        op, data_shape, args, out_shape = cases.random_call(rng)
        dtype = np.dtype(rng.choice(["f4", "f8", "i8", "u4"]))
        data = cases.random_array(rng, data_shape, dtype)
        out = cases.random_array(rng, out_shape, dtype, writable_zero=True)
        took += _check(cases.plan_of(op, data_shape, args, out_shape), data, out) > 0
    assert took > 100, took


# ------------------------------------------------------------------ cases drawn where units apply


def _padded(rng, n, b, pads):
    """pads (begin, end) taking an axis of n to a multiple of b (none where not `pads`)."""
    total = (-n) % b + (b * int(rng.integers(0, 2)) if pads else 0)
    if not pads:
        return 0, total  # (a multiple already, or a minimal end pad)
    begin = int(rng.integers(0, total + 1))
    return begin, total - begin


def _call(rng, large=False):
    """(op, data_shape, args, out_shape): SpaceToBatch with pads, BatchToSpace with crops, NCHW or
    channels-last; `large`: output images past SMALL_UNIT_WORDS (units up to UNIT_WORDS, or planes)."""
    while True:
        op = "space_to_batch" if rng.random() < (0.7 if large else 0.6) else "batch_to_space"
        rank = int(rng.integers(3, 6))
        last = rng.random() < (0.4 if large else 0.6)
        channel = rank - 1 if last else 1
        spatial = [a for a in range(1, rank) if a != channel]
        block, begin, end = [1] * rank, [0] * rank, [0] * rank
        space = [int(rng.integers(1, 4))] + [0] * (rank - 1)
        space[channel] = int(rng.choice([1, 2, 3, 4, 8, 16, 32, 48]))
        side = 41 if len(spatial) == 1 else 25 if len(spatial) == 2 else 9
        for a in spatial:
            block[a] = int(rng.choice([1, 2, 2, 3, 4]))
            n = int(rng.integers(1, side))
            if large:
                n = int(rng.integers(8, 24))
            pads = rng.random() < 0.8
            begin[a], end[a] = _padded(rng, n, block[a], pads)
            space[a] = n
        if rng.random() < 0.1:  # a blocked or padded channel axis now and then (no planes)
            block[channel] = 2
            begin[channel], end[channel] = _padded(rng, space[channel], 2, True)
        if math.prod(block) > core_format.MAX_PARTS:
            continue
        padded = [n + b + e for n, b, e in zip(space, begin, end)]
        if op == "space_to_batch":
            data_shape = tuple(space)
            args = (block, begin, end)
        else:  # the padded space tensor's SpaceToBatch is BatchToSpace's input; its pads are the crops
            data_shape = tuple(shapes.space_to_batch(tuple(padded), block, [0] * rank, [0] * rank))
            args = (block, begin, end)
        out_shape = tuple(int(s) for s in getattr(shapes, op)(data_shape, *args))
        elements = math.prod(padded) * (math.prod(block) if op == "space_to_batch" else 1)
        if elements > (1 << (18 if large else 17)) or elements == 0:
            continue
        unit = math.prod(out_shape[1:])
        if large and unit <= units.SMALL_UNIT_WORDS:  # (NCHW images past UNIT_WORDS too: planes)
            continue
        return op, data_shape, args, out_shape


def _data(rng, shape, dtype):
    kind = rng.integers(8)
    if kind < 4:
        return np.empty(shape, dtype)
    if kind == 4:  # strides past a table's reach (never read: the planner only plans)
        strides = list(np.empty(shape, dtype).strides)
        axis = int(rng.integers(len(shape)))
        strides[axis] *= int(rng.choice([1 << 12, 1 << 20, 1 << 26]))
        return as_strided(np.empty(1, dtype), shape, strides)
    return cases.random_array(rng, shape, dtype)


def _out(rng, shape, dtype):
    """An output: dense (C order, or its image's axes permuted and reversed), or not dense (gaps, the batch
    not outermost, planner_cases' random layouts)."""
    kind = rng.integers(8)
    rank = len(shape)
    if kind < 3:
        return np.empty(shape, dtype)
    if kind < 5:  # dense, the image's axes permuted in memory, some axes reversed (the batch too at times)
        order = [0] + list(1 + rng.permutation(rank - 1))
        array = np.empty([shape[a] for a in order], dtype).transpose(np.argsort(order))
        flips = tuple(slice(None, None, -1) if rng.random() < 0.3 else slice(None) for _ in range(rank))
        return array[flips]
    if kind == 5:  # gaps: a slice of a larger array
        axis = int(rng.integers(rank))
        big = list(shape)
        big[axis] += int(rng.integers(1, 3))
        return np.empty(big, dtype)[tuple(slice(0, n) for n in shape)]
    if kind == 6:  # the batch inside
        order = list(rng.permutation(rank))
        return np.empty([shape[a] for a in order], dtype).transpose(np.argsort(order))
    return cases.random_array(rng, shape, dtype, writable_zero=True)


def _drawn(seed, count, large=False):
    rng = np.random.default_rng(seed)
    took = large_units = 0
    for _ in range(count):
        op, data_shape, args, out_shape = _call(rng, large)
        dtype = np.dtype(rng.choice(["f4", "f8", "f4", "f8", "i4", "u2", "c16"]))
        unit = _check(cases.plan_of(op, data_shape, args, out_shape), _data(rng, data_shape, dtype),
                      _out(rng, out_shape, dtype))
        took += unit > 0
        large_units += unit > units.SMALL_UNIT_WORDS
    return took, large_units


def test_drawn_where_units_apply():
    took, _ = _drawn(1128, 1200)
    assert took > 300, took


def test_units_past_small_unit_words():
    took, large_units = _drawn(2811, 200, large=True)
    assert large_units > 20 and took > 30, (took, large_units)


@pytest.mark.parametrize("space, block, pads, took", [
    ((2, 32, 30, 30), (1, 1, 2, 2), (0, 0, 1, 1), 256),   # NCHW images of 8192 words: planes of 256
    ((1, 4, 16, 32), (1, 1, 2, 2), (0, 0, 1, 1), 612),    # images of 612 words
    ((2, 3, 2, 2), (1, 1, 2, 2), (0, 0, 1, 1), 12),       # units.py's example
    ((1, 20, 20, 48), (1, 2, 2, 1), (0, 1, 1, 0), 5808),  # channels-last images past SMALL_UNIT_WORDS
    ((1, 40, 40, 48), (1, 2, 2, 1), (0, 1, 1, 0), 0),     # past UNIT_WORDS (no planes channels-last)
])
def test_examples(space, block, pads, took):
    out_shape = shapes.space_to_batch(space, block, pads, pads)
    for dtype in ("f4", "f8"):
        plan = cases.plan_of("space_to_batch", space, (block, pads, pads), out_shape)
        assert _check(plan, np.empty(space, dtype), np.empty(out_shape, dtype)) == took
        back = cases.plan_of("batch_to_space", out_shape, (block, pads, pads), space)
        _check(back, np.empty(out_shape, dtype), np.empty(space, dtype))


def test_malformed_plans_and_layouts_do_not_crash():
    """Plans off their rules (blocks of 0 or negative, huge pads, ranks that disagree) and layouts of
    huge strides: None or a step, never a crash."""
    rng = np.random.default_rng(5)
    extremes = [0, -1, 1, 2, 64, 65, 1 << 31, -(1 << 31), 1 << 62, -(1 << 62), (1 << 63) - 1, -(1 << 63)]
    for _ in range(400):
        op, data_shape, args, out_shape = _call(rng)
        plan = cases.plan_of(op, data_shape, args, out_shape)
        flat = cases.encode_plan(plan)
        rank = len(data_shape)
        tail = flat.size - 3 * rank  # block, begin, end
        for _ in range(int(rng.integers(1, 4))):
            flat[tail + int(rng.integers(3 * rank))] = extremes[rng.integers(len(extremes))]
        dtype = np.dtype(rng.choice(["f4", "f8"]))
        data, out = np.empty(data_shape, dtype), np.empty(out_shape, dtype)
        if rng.random() < 0.5:
            strides = [int(np.clip(int(s) * int(rng.choice([1, 1, 1 << 40, -(1 << 50)])), -(1 << 62), 1 << 62))
                       for s in data.strides]
            data = as_strided(np.empty(1, dtype), data_shape, strides)
        if rng.random() < 0.3:  # arrays of another rank than the plan's
            out = out.reshape(-1)
        native.units_flat(flat.tobytes(), data, out)
