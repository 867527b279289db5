"""Random calls and layouts for the compiled planner's tests (``src/native/plan.hpp``), and plans encoded as
the planner encodes them, so that its plans and programs can be held, bit for bit, to the Python side's
(:mod:`datamove.plans.views`, :func:`datamove.engines.native.engine.program`).

>>> from datamove.plans import views as plans
>>> encode_plan(plans.space_to_depth((1, 1, 4), (1, 2, 2), "blocks_first", 2))[:8].tolist()
[3, 1, 1, 4, 3, 1, 2, 2]
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from datamove.plans import views as plans
from datamove import shapes
from datamove.errors import DataMoveError
import lowering

OPS = ("batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space")  # the planner's op ids, in order
MODES = ("blocks_first", "depth_first")
#: Item sizes the cases draw: every word width, and odd ones (bytes moved as 1-byte words).
DTYPES = ("u1", "u2", "f4", "f8", "c16", "V3", "V6", "V12", "V24", "V32", "V64")


def _view(view: plans.View) -> List[int]:
    flat = [len(view.start), *view.start, len(view.dims)]
    for dim in view.dims:
        flat += list(dim)
    return flat


def encode_plan(plan: plans.Plan) -> np.ndarray:
    """``plan`` as the int64s of ``plan.hpp``'s ``encode``."""
    flat: List[int] = [len(plan.in_shape), *plan.in_shape, len(plan.out_shape), *plan.out_shape, len(plan.copies)]
    for src, dst in plan.copies:
        flat += _view(src) + _view(dst)
    flat.append(len(plan.fills))
    for view in plan.fills:
        flat += _view(view)
    flat.append(len(plan.windows))
    for w in plan.windows:
        flat += _view(w.src) + _view(w.dst) + [w.lo, w.hi, 0 if w.space == "src" else 1, w.trailing]
    flat.append(len(plan.window_fills))
    for view in plan.window_fills:
        flat += _view(view)
    if plan.source:
        op, block, begin, end = plan.source
        flat += [OPS.index(op), len(block), *block, *begin, *end]
    else:
        flat.append(-1)
    return np.array(flat, np.int64)


def planner_args(op: str, data_shape: Sequence[int], out_shape: Sequence[int], args: Sequence[Any]) -> Tuple[Any, ...]:
    """The arguments of ``_native.plan_flat`` for a call."""
    if op in ("space_to_depth", "depth_to_space"):
        mode, size = args
        return (OPS.index(op), tuple(data_shape), tuple(out_shape), (), (), (), MODES.index(mode), size)
    block, begin, end = args
    return (OPS.index(op), tuple(data_shape), tuple(out_shape), tuple(block), tuple(begin), tuple(end), 0, 1)


def random_call(rng: np.random.Generator, max_rank: int = 6, max_items: int = 1 << 14) -> Tuple[str, Tuple[int, ...], Tuple[Any, ...], Tuple[int, ...]]:
    """A valid call: ``(op, data_shape, args, out_shape)``; ranks 2-``max_rank``, blocks up to 4, every kind
    of pads and crops, empty axes now and then."""
    while True:
        op = OPS[rng.integers(4)]
        if op in ("space_to_depth", "depth_to_space"):
            rank = int(rng.integers(3, max_rank + 1))
            size = int(rng.choice([1, 2, 2, 2, 3, 4]))
            mode = MODES[rng.integers(2)]
            spatial = rank - 2
            shape = [int(rng.integers(1, 4)), int(rng.integers(1, 9))] + [
                size * int(rng.integers(1, 5 if spatial < 3 else 3)) for _ in range(spatial)]
            if op == "depth_to_space":
                shape = shapes.space_to_depth(tuple(shape), mode, size)  # its output: a valid input
            args: Tuple[Any, ...] = (mode, size)
        else:
            rank = int(rng.integers(2, max_rank + 1))
            block, begin, end, shape = [1], [0], [0], [int(rng.integers(1, 4))]
            for _ in range(rank - 1):
                b = int(rng.choice([1, 1, 2, 2, 3, 4]))
                padded = b * int(rng.integers(1, 6))
                d = int(rng.integers(0, padded + 1)) if rng.random() < 0.9 else padded
                pb = int(rng.integers(0, padded - d + 1))
                block.append(b), shape.append(d), begin.append(pb), end.append(padded - d - pb)
            if rng.random() < 0.3:  # no pads or crops at all
                shape = [s + b + e for s, b, e in zip(shape, begin, end)]
                begin, end = [0] * rank, [0] * rank
            if op == "batch_to_space":
                shape = list(shapes.space_to_batch(tuple(shape), block, begin, end))
            args = (block, begin, end)
        if math.prod(shape) * max(1, math.prod(args[0]) if op != "space_to_depth" and op != "depth_to_space" else 1) > max_items:
            continue
        try:
            out_shape = getattr(shapes, op)(tuple(shape), *args)
        except DataMoveError:
            continue
        return op, tuple(int(s) for s in shape), args, tuple(int(s) for s in out_shape)


def plan_of(op: str, data_shape: Tuple[int, ...], args: Sequence[Any], out_shape: Tuple[int, ...]) -> plans.Plan:
    """datamove.plans.views' plan of a call (the tuples its functions take)."""
    return getattr(plans, op)(data_shape, out_shape, *(tuple(a) if isinstance(a, list) else a for a in args))


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: Any, writable_zero: bool = False) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` in a random layout: C order, axes permuted in memory, reversed axes,
    gaps between items or rows, an offset from its buffer's start, unaligned to its item (1-byte buffers)."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    rank = len(shape)
    kind = rng.integers(6)
    # a parent with gaps: some axes twice as long, then stepped through
    gaps = [2 if kind == 3 and rng.random() < 0.5 else 1 for _ in range(rank)]
    parent_shape = tuple(n * g for n, g in zip(shape, gaps))
    order = list(range(rank))
    if kind in (1, 4):
        rng.shuffle(order)
    memory_shape = tuple(parent_shape[a] for a in order)
    count = math.prod(memory_shape)
    offset = int(rng.integers(0, 3)) * (1 if kind == 5 else dtype.itemsize)  # kind 5: off its item's alignment
    buffer = np.zeros(count * dtype.itemsize + offset + 64, np.uint8)
    if not writable_zero:
        buffer[:] = rng.integers(0, 256, buffer.size, dtype=np.uint8)
    start = offset
    base = np.ndarray(memory_shape, dtype, buffer, start)
    array = base.transpose(np.argsort(order))
    array = array[tuple(slice(None, None, g) for g in gaps)]
    if kind == 2 or kind == 4:
        flips = tuple(slice(None, None, -1) if rng.random() < 0.5 else slice(None) for _ in range(rank))
        array = array[flips]
    assert array.shape == shape
    # As the core sees it: NumPy exports a contiguous array's buffer with C strides of its own (on axes of
    # one item, and empty arrays), which the planner reads; the Python side reads array.strides.
    return np.lib.stride_tricks.as_strided(array, strides=memoryview(array).strides)


def random_case(rng: np.random.Generator, **limits: Any) -> Tuple[plans.Plan, np.ndarray, np.ndarray, int, Tuple[Any, ...]]:
    """A call with arrays: ``(plan, data, out, stream, plan_flat's arguments)``."""
    op, data_shape, args, out_shape = random_call(rng, **limits)
    dtype = np.dtype(DTYPES[rng.integers(len(DTYPES))])
    data = random_array(rng, data_shape, dtype)
    out = random_array(rng, out_shape, dtype, writable_zero=True)
    stream = int(rng.choice([0, 1, 2]))
    return plan_of(op, data_shape, args, out_shape), data, out, stream, planner_args(op, data_shape, out_shape, args)


def python_program(plan: plans.Plan, data: np.ndarray, out: np.ndarray, stream: int) -> Optional[bytes]:
    """The Python side's program for ``plan`` on these arrays, lowered for ``stream``."""
    return lowering.program(plan, data, out, stream=stream)
