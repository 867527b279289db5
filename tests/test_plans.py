"""Plans: the destination views and fills cover every output element exactly once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from datamove.plans import views as plans
from datamove import shapes
from strategies import depth_case, space_batch_case


def _coverage(shape, views):
    """How often each element of an array of ``shape`` is touched by ``views``."""
    counts = np.zeros(shape, np.int64)
    for view in views:
        index = [np.full(view.shape, s) for s in view.start]
        grid = np.indices(view.shape)
        for k, (axis, _, step) in enumerate(view.dims):
            index[axis] = index[axis] + grid[k] * step
        for axis, ix in enumerate(index):  # every index in bounds: no engine may write outside
            assert ((0 <= ix) & (ix < shape[axis])).all()
        np.add.at(counts, tuple(index), 1)
    return counts


def _check_pairs(plan):
    for src, dst in plan.copies:
        assert src.shape == dst.shape
        assert all(count > 0 for count in src.shape)  # empty copies are dropped


@settings(max_examples=200, deadline=None)
@given(space_batch_case(max_size=2000))
def test_space_to_batch_writes_every_output_element_once(case):
    shape, block, begin, end = case
    out_shape = shapes.space_to_batch(shape, block, begin, end)
    plan = plans.space_to_batch(shape, out_shape, tuple(block), tuple(begin), tuple(end))
    _check_pairs(plan)
    written = _coverage(out_shape, [dst for _, dst in plan.copies] + list(plan.fills))
    assert (written == 1).all()
    assert (_coverage(shape, [src for src, _ in plan.copies]) == 1).all()
    # the fills are exactly the padding: as many elements as the output has beyond the data
    filled = sum(math.prod(view.shape) for view in plan.fills)
    assert filled == math.prod(out_shape) - math.prod(shape)


@settings(max_examples=200, deadline=None)
@given(space_batch_case(max_size=2000))
def test_batch_to_space_reads_only_the_uncropped_elements(case):
    out_shape, block, begin, end = case
    in_shape = shapes.space_to_batch(out_shape, block, begin, end)
    plan = plans.batch_to_space(in_shape, out_shape, tuple(block), tuple(begin), tuple(end))
    _check_pairs(plan)
    assert plan.fills == ()
    assert (_coverage(out_shape, [dst for _, dst in plan.copies]) == 1).all()
    read = _coverage(in_shape, [src for src, _ in plan.copies])
    assert read.max(initial=0) <= 1 and read.sum() == math.prod(out_shape)


@settings(max_examples=200, deadline=None)
@given(depth_case(max_size=2000))
def test_depth_plans_are_one_copy_touching_everything_once(case):
    shape, mode, size = case
    out_shape = shapes.space_to_depth(shape, mode, size)
    for plan, src_shape, dst_shape in (
        (plans.space_to_depth(shape, out_shape, mode, size), shape, out_shape),
        (plans.depth_to_space(out_shape, shape, mode, size), out_shape, shape),
    ):
        _check_pairs(plan)
        assert len(plan.copies) == (1 if math.prod(shape) else 0)
        assert (_coverage(dst_shape, [dst for _, dst in plan.copies]) == (1 if math.prod(shape) else 0)).all()
        assert (_coverage(src_shape, [src for src, _ in plan.copies]) == (1 if math.prod(shape) else 0)).all()


def test_crop_splits_an_axis_into_at_most_three_pieces():
    # crops 1 and 2 on a block-4 axis of length 3*4: a head row, full rows, a tail row.
    plan = plans.batch_to_space((4, 3), (1, 9), (1, 4), (0, 1), (0, 2))
    assert len(plan.copies) == 3
    assert [src.shape for src, _ in plan.copies] == [(1, 1, 3), (1, 1, 4), (1, 1, 2)]


def test_plans_are_cached():
    args = ((2, 4, 4, 4), (2, 16, 2, 2), "depth_first", 2)
    assert plans.space_to_depth(*args) is plans.space_to_depth(*args)


def _window_indices(view, trailing, lo, hi, block):
    """Element indices of ``view`` whose window-axis position t = d * B + b lies in [lo, hi), plus the mask
    (the window axis's dims (d, b) come before ``trailing`` dims)."""
    index = [np.full(view.shape, s) for s in view.start]
    grid = np.indices(view.shape)
    for k, (axis, _, step) in enumerate(view.dims):
        index[axis] = index[axis] + grid[k] * step
    t = grid[-2 - trailing] * block + grid[-1 - trailing]
    return index, (lo <= t) & (t < hi)


def _apply_windows(plan, data, out_shape, block):
    """Execute ``plan.windows`` and ``plan.window_fills`` in NumPy, counting writes."""
    out = np.full(out_shape, -1, np.int64)
    writes = np.zeros(out_shape, np.int64)
    for window in plan.windows:
        axis = max(i for i, b in enumerate(block) if b > 1)  # the window axis
        assert window.trailing == 2 * (len(block) - 1 - axis)
        src_index, inside = _window_indices(window.src, window.trailing, window.lo, window.hi, block[axis])
        dst_index, _ = _window_indices(window.dst, window.trailing, window.lo, window.hi, block[axis])
        if window.space == "src":  # S2B: every position written, zeros outside the window
            for axis, ix in enumerate(dst_index):
                assert ((0 <= ix) & (ix < out_shape[axis])).all()
            src_in = tuple(np.where(inside, ix, 0) for ix in src_index)
            for axis, ix in enumerate(src_in):
                assert ((0 <= ix) & (ix < data.shape[axis])).all()
            out[tuple(dst_index)] = np.where(inside, data[src_in], 0)
            np.add.at(writes, tuple(dst_index), 1)
        else:  # B2S: only the window is written
            for axis, ix in enumerate(src_index):
                assert ((0 <= ix) & (ix < data.shape[axis])).all()
            dst_in = tuple(ix[inside] for ix in dst_index)
            out[dst_in] = data[tuple(ix[inside] for ix in src_index)]
            np.add.at(writes, dst_in, 1)
    for view in plan.window_fills:
        index = [np.full(view.shape, s) for s in view.start]
        grid = np.indices(view.shape)
        for k, (axis, _, step) in enumerate(view.dims):
            index[axis] = index[axis] + grid[k] * step
        out[tuple(index)] = 0
        np.add.at(writes, tuple(index), 1)
    return out, writes


@settings(max_examples=200, deadline=None)
@given(space_batch_case(max_size=2000))
def test_windows_do_the_same_work(case):
    import reference as ref

    shape, block, begin, end = case
    data = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    out_shape = shapes.space_to_batch(shape, block, begin, end)
    plan = plans.space_to_batch(shape, out_shape, tuple(block), tuple(begin), tuple(end))
    if plan.windows:
        out, writes = _apply_windows(plan, data, out_shape, block)
        assert (writes == 1).all() and np.array_equal(out, ref.space_to_batch(data, block, begin, end))
    batched = ref.space_to_batch(data, block, begin, end)
    back = plans.batch_to_space(out_shape, shape, tuple(block), tuple(begin), tuple(end))
    if back.windows:
        out, writes = _apply_windows(back, batched, shape, block)
        assert (writes == 1).all() and np.array_equal(out, data)


@pytest.mark.parametrize("shape, block, begin, end", [
    ((2, 5, 7, 3), (1, 2, 3, 1), (0, 1, 2, 0), (0, 0, 0, 0)),  # TensorFlow's NHWC: the channels after the window axis
    ((1, 3, 4, 2, 3), (1, 2, 2, 1, 1), (0, 1, 0, 0, 0), (0, 0, 2, 0, 0)),  # two whole axes after it
    ((2, 4, 6, 3), (1, 2, 2, 1), (0, 0, 0, 0), (0, 0, 0, 0)),  # no pads
])
def test_windows_before_whole_axes(shape, block, begin, end):
    """Axes without blocks, pads or crops after the last blocked axis ride along as ``trailing`` dims of its
    windows (each position a pixel of their items); a pad on them leaves the copies alone (no windows)."""
    import reference as ref

    data = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    out_shape = shapes.space_to_batch(shape, block, begin, end)
    plan = plans.space_to_batch(shape, out_shape, block, begin, end)
    axis = max(i for i, b in enumerate(block) if b > 1)
    assert plan.windows and all(w.trailing == 2 * (len(shape) - 1 - axis) for w in plan.windows)
    out, writes = _apply_windows(plan, data, out_shape, block)
    assert (writes == 1).all() and np.array_equal(out, ref.space_to_batch(data, block, begin, end))
    back = plans.batch_to_space(out_shape, shape, block, begin, end)
    assert back.windows
    out, writes = _apply_windows(back, ref.space_to_batch(data, block, begin, end), shape, block)
    assert (writes == 1).all() and np.array_equal(out, data)
    padded_after = list(end)
    padded_after[-1] = 1
    assert not plans.space_to_batch(shape, shapes.space_to_batch(shape, block, begin, padded_after), block, begin,
                                    tuple(padded_after)).windows
