"""Plans: each operation's output described as strided views of its input.

A plan is pure data, computed from the concrete shapes and parameters only,
and shared by every engine. It holds

* ``copies``: pairs ``(src, dst)`` of :class:`View` over one common index
  space; executing the plan means ``dst[...] = src[...]`` for each pair;
* ``fills``: views of the output to set to zero (SpaceToBatch's padding).

Together the ``dst`` views and the fills cover every output element exactly
once, so an engine reads each input byte once and writes each output byte once.

A :class:`View` maps an index ``(k_0, ..., k_m)`` of the copy's index space to
the array element ``start + sum_j k_j * step_j`` along axis ``axis_j``: a
split, permuted, sliced view, expressed without strides so the plan does not
depend on memory layout. An engine turns it into strides.

>>> plan = space_to_depth((1, 1, 4), (1, 2, 2), "blocks_first", 2)
>>> plan.copies[0][0].dims   # src: n, then the block offset b, channel c, position q
((0, 1, 1), (2, 2, 1), (1, 1, 1), (2, 2, 2))
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Any, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..errors import DataMoveError

__all__ = ["View", "Window", "Plan", "check_arrays", "check_shapes", "batch_to_space", "space_to_batch", "space_to_depth",
           "depth_to_space"]


class View(NamedTuple):
    """Element ``k`` of the index space is ``array[start + sum_j k_j * step_j e_{axis_j}]``."""

    start: Tuple[int, ...]  # one entry per array axis
    dims: Tuple[Tuple[int, int, int], ...]  # (axis, count, step) per index-space dim

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(count for _, count, _ in self.dims)


class Window(NamedTuple):
    """A copy over whole blocks of the window axis that keeps only positions ``lo <= t < hi``.

    The window axis is the last axis with a block over 1. ``src`` and ``dst``
    have its two index dims ``(d, b)`` last, or just before ``trailing`` dims
    of the axes after it; ``t = d * B + b`` counts positions along that axis
    of the "space" tensor from the start of the whole blocks. SpaceToBatch
    (``space == "src"``) reads ``data[t - lo]`` there and writes zeros outside
    the window, so its padding along the window axis is written in the same
    pass; BatchToSpace (``space == "dst"``) writes ``out[t - lo]`` and skips
    what is cropped. The ``space`` view's start along the window axis is
    ``-lo`` (it may be
    negative: an engine only touches positions inside the window).
    """

    src: View
    dst: View
    lo: int
    hi: int
    space: str
    # Index dims after the window axis's (d, b): the axes after it (blocks of 1, neither padded nor
    # cropped), two dims each. Each position is then a run of items, a pixel (TensorFlow's NHWC).
    trailing: int = 0


class Plan(NamedTuple):
    out_shape: Tuple[int, ...]
    copies: Tuple[Tuple[View, View], ...]
    fills: Tuple[View, ...]
    # The same work with the last axis in windows (see Window), for engines
    # that take them: ``windows`` and ``window_fills`` together replace
    # ``copies`` and ``fills``. Empty when the op has no such form.
    windows: Tuple[Window, ...] = ()
    window_fills: Tuple[View, ...] = ()
    # What the plan computes, for engines that lower some ops another way (the native engine's tables of
    # small images): ``("space_to_batch", block_shape, pads_begin, pads_end)`` or ``("batch_to_space",
    # block_shape, crops_begin, crops_end)``; empty for the others.
    source: Tuple[Any, ...] = ()
    # The input's shape the plan was made for (engines check that the arrays they are given match it).
    in_shape: Tuple[int, ...] = ()


def check_arrays(plan: Plan, data: Any, out: Any) -> None:
    """Refuse arrays that ``plan`` was not made for: the engines that execute plans over raw memory
    (strided views, the compiled core) would otherwise read or write past them.

    >>> import numpy as np
    >>> plan = space_to_depth((1, 1, 4), (1, 2, 2), "blocks_first", 2)
    >>> check_arrays(plan, np.zeros((1, 1, 4)), np.zeros((1, 2, 2)))
    >>> check_arrays(plan, np.zeros((1, 1, 6)), np.zeros((1, 2, 2)))
    Traceback (most recent call last):
        ...
    datamove.errors.DataMoveError: a plan for input (1, 1, 4) and output (1, 2, 2) cannot run on data of shape (1, 1, 6) (float64) into out of shape (1, 2, 2) (float64)
    """
    check_shapes(plan.in_shape, plan.out_shape, data, out)


def check_shapes(in_shape: Tuple[int, ...], out_shape: Tuple[int, ...], data: Any, out: Any) -> None:
    """:func:`check_arrays` for a plan of ``in_shape`` and ``out_shape`` (a call the core plans itself)."""
    if data.shape != in_shape or out.shape != out_shape or out.dtype.itemsize != data.dtype.itemsize:
        raise DataMoveError(
            f"a plan for input {in_shape} and output {out_shape} cannot run on data of shape "
            f"{data.shape} ({data.dtype}) into out of shape {out.shape} ({out.dtype})")


class _Piece(NamedTuple):
    """A rectangle of positions ``f = d * block + b`` inside ``[lo, hi)``.

    ``d`` runs over ``d0 .. d0 + d_count``, ``b`` over ``b0 .. b0 + b_count``,
    and ``f - lo = offset + (d - d0) * block + (b - b0)``; either
    ``d_count == 1`` or ``b`` covers the whole block, so that is one-to-one.
    """

    d0: int
    d_count: int
    b0: int
    b_count: int
    offset: int


def _pieces(lo: int, hi: int, block: int) -> List[_Piece]:
    """Split ``[lo, hi)`` into at most three rectangles in ``(d, b)``: head, full rows, tail."""
    pieces = []
    f = lo
    if f < hi and f % block:
        d, b = divmod(f, block)
        end = min(hi, (d + 1) * block)
        pieces.append(_Piece(d, 1, b, end - f, f - lo))
        f = end
    rows = (hi - f) // block
    if rows:
        pieces.append(_Piece(f // block, rows, 0, block, f - lo))
        f += rows * block
    if f < hi:
        pieces.append(_Piece(f // block, 1, 0, hi - f, f - lo))
    return pieces


def _batch_steps(block_shape: Sequence[int], batch: int) -> List[int]:
    """Step along the blocked batch axis of block offset ``b_i`` (batch = (b_1, ..., b_M, n), row-major)."""
    steps = []
    inner = batch
    for b in reversed(block_shape[1:]):
        steps.append(inner)
        inner *= b
    return steps[::-1]


def _space_batch_views(rank: int, batch: int, block_shape: Sequence[int],
                       region_pieces: Sequence[Sequence[_Piece]]) -> Iterator[Tuple[View, View]]:
    """Views pairing the "space" tensor (S2B input, B2S output) with the "batch" tensor.

    ``region_pieces[i - 1]`` splits the positions ``f = d * B_i + b`` of axis
    ``i`` that hold data; the space index of ``f`` is its offset in that range
    (``f - crops_begin[i]`` or ``f - pads_begin[i]``).
    Yields ``(space_view, batch_view)`` per combination of pieces.
    """
    steps = _batch_steps(block_shape, batch)
    for combo in itertools.product(*region_pieces):
        if any(p.d_count == 0 or p.b_count == 0 for p in combo) or batch == 0:
            continue
        space_start = [0] * rank
        batch_start = [0] * rank
        space_dims = [(0, batch, 1)]
        batch_dims = [(0, batch, 1)]
        for i, piece in enumerate(combo, start=1):
            space_start[i] = piece.offset
            batch_start[i] = piece.d0
            batch_start[0] += piece.b0 * steps[i - 1]
            space_dims += [(i, piece.d_count, block_shape[i]), (i, piece.b_count, 1)]
            batch_dims += [(i, piece.d_count, 1), (0, piece.b_count, steps[i - 1])]
        yield View(tuple(space_start), tuple(space_dims)), View(tuple(batch_start), tuple(batch_dims))


def _windows(rank: int, batch: int, block_shape: Sequence[int], region_pieces: Sequence[Sequence[_Piece]],
             regions: Sequence[Tuple[int, int]], counts: Sequence[int], space: str) -> Tuple[Tuple[Window, ...], int]:
    """Windows: the pieces of every axis but the window axis, times its whole blocks; and that axis.

    The window axis is the last with a block over 1 (0: none); the axes after it must be whole (their
    region ``[0, count)``). ``counts[i - 1]`` whole blocks of axis ``i``, positions ``regions[i - 1]`` kept.
    """
    axis = max((i for i in range(1, rank) if block_shape[i] > 1), default=0)
    if axis == 0 or batch == 0 or any(regions[i - 1] != (0, counts[i - 1]) for i in range(axis + 1, rank)):
        # (a last axis without blocks is one piece of the copies already, a long run when it is
        # contiguous: windows of one item each would cost a tile per item; with blocks on an axis
        # before it, each position is a pixel of those items: TensorFlow's NHWC space_to_batch_nd)
        return (), 0
    lo, hi = regions[axis - 1]
    if counts[axis - 1] == 0 or hi <= lo:
        return (), 0
    whole = _Piece(0, counts[axis - 1], 0, block_shape[axis], -lo)
    pieces = list(region_pieces[:axis - 1]) + [[whole]] + list(region_pieces[axis:])
    trailing = 2 * (rank - 1 - axis)
    windows = []
    for space_view, batch_view in _space_batch_views(rank, batch, block_shape, pieces):
        if space == "src":
            windows.append(Window(space_view, batch_view, lo, hi, space, trailing))
        else:
            windows.append(Window(batch_view, space_view, lo, hi, space, trailing))
    return tuple(windows), axis


@lru_cache(maxsize=256)
def batch_to_space(data_shape: Tuple[int, ...], out_shape: Tuple[int, ...], block_shape: Tuple[int, ...],
                   crops_begin: Tuple[int, ...], crops_end: Tuple[int, ...]) -> Plan:
    """Plan of BatchToSpace-2: ``out[n, d*B + b - CB]`` comes from ``data[(b, n), d]``, cropped.

    >>> p = batch_to_space((4, 1), (1, 2), (1, 4), (0, 1), (0, 1))
    >>> src, dst = p.copies[0]   # one piece: positions f in [1, 3) are d=0, b=1..2
    >>> src.start, src.shape, dst.start, dst.shape
    ((1, 0), (1, 1, 2), (0, 0), (1, 1, 2))
    """
    batch = out_shape[0]
    region = [(crops_begin[i], crops_begin[i] + out_shape[i]) for i in range(1, len(out_shape))]
    pieces = [_pieces(lo, hi, block_shape[i]) for i, (lo, hi) in enumerate(region, start=1)]
    copies = tuple(
        (src, dst)
        for dst, src in _space_batch_views(len(out_shape), batch, block_shape, pieces)
    )
    windows, _ = _windows(len(out_shape), batch, block_shape, pieces, region, data_shape[1:], "dst")
    return Plan(tuple(out_shape), copies, (), windows, (),
                ("batch_to_space", tuple(block_shape), tuple(crops_begin), tuple(crops_end)), tuple(data_shape))


@lru_cache(maxsize=256)
def space_to_batch(data_shape: Tuple[int, ...], out_shape: Tuple[int, ...], block_shape: Tuple[int, ...],
                   pads_begin: Tuple[int, ...], pads_end: Tuple[int, ...]) -> Plan:
    """Plan of SpaceToBatch-2: ``out[(b, n), q]`` is ``data[n, q*B + b - PB]``, or 0 in the padding.

    >>> p = space_to_batch((1, 2), (3, 1), (1, 3), (0, 1), (0, 0))
    >>> len(p.copies), len(p.fills)
    (1, 1)
    """
    batch = data_shape[0]
    rank = len(data_shape)
    region = [(pads_begin[i], pads_begin[i] + data_shape[i]) for i in range(1, rank)]
    inside = [_pieces(lo, hi, block_shape[i]) for i, (lo, hi) in enumerate(region, start=1)]
    copies = tuple(_space_batch_views(rank, batch, block_shape, inside))

    # The padding is the complement of the data region: a slab per axis i where
    # axis i lies outside the region, the axes before it inside, those after anywhere.
    fills = []
    fill_axes = []  # the axis each fill pads
    steps = _batch_steps(block_shape, batch)
    for axis in range(1, rank):
        full_length = out_shape[axis] * block_shape[axis]
        lo, hi = region[axis - 1]
        outside = _pieces(0, lo, block_shape[axis]) + _pieces(hi, full_length, block_shape[axis])
        choices = (
            inside[: axis - 1]
            + [outside]
            + [_pieces(0, out_shape[j] * block_shape[j], block_shape[j]) for j in range(axis + 1, rank)]
        )
        for combo in itertools.product(*choices):
            if batch == 0 or any(p.d_count == 0 or p.b_count == 0 for p in combo):
                continue
            start = [0] * rank
            dims = [(0, batch, 1)]
            for i, piece in enumerate(combo, start=1):
                start[i] = piece.d0
                start[0] += piece.b0 * steps[i - 1]
                dims += [(i, piece.d_count, 1), (0, piece.b_count, steps[i - 1])]
            fills.append(View(tuple(start), tuple(dims)))
            fill_axes.append(axis)
    windows, window_axis = _windows(rank, batch, block_shape, inside, region, out_shape[1:], "src")
    # With windows the window axis's padding is written by them: keep the fills
    # of the other axes, those whose slab leaves the window axis whole.
    window_fills = tuple(f for f, axis in zip(fills, fill_axes) if axis != window_axis) if windows else ()
    return Plan(tuple(out_shape), copies, tuple(fills), windows, window_fills,
                ("space_to_batch", tuple(block_shape), tuple(pads_begin), tuple(pads_end)), tuple(data_shape))


def _depth_views(space_shape: Tuple[int, ...], depth_shape: Tuple[int, ...], mode: str,
                 block_size: int) -> Optional[Tuple[View, View]]:
    """``(space_view, depth_view)`` for SpaceToDepth (space = input) / DepthToSpace (space = output).

    The depth axis splits as ``(b_1, ..., b_K, c)`` for blocks_first and
    ``(c, b_1, ..., b_K)`` for depth_first; each space axis as ``(q_i, b_i)``.
    """
    rank = len(space_shape)
    spatial = rank - 2
    channels = space_shape[1]
    if math.prod(space_shape) == 0:
        return None
    zeros = (0,) * rank
    block_steps = [block_size ** (spatial - 1 - k) for k in range(spatial)]
    if mode == "blocks_first":
        channel_step, block_steps = 1, [s * channels for s in block_steps]
        order: List[Union[int, str]] = [*range(spatial), "c"]
    else:
        channel_step = block_size**spatial
        order = ["c", *range(spatial)]
    space_dims = [(0, space_shape[0], 1)]
    depth_dims = [(0, space_shape[0], 1)]
    for k in order:
        if isinstance(k, str):  # "c", the channel
            space_dims.append((1, channels, 1))
            depth_dims.append((1, channels, channel_step))
        else:
            space_dims.append((2 + k, block_size, 1))
            depth_dims.append((1, block_size, block_steps[k]))
    for k in range(spatial):
        space_dims.append((2 + k, depth_shape[2 + k], block_size))
        depth_dims.append((2 + k, depth_shape[2 + k], 1))
    return View(zeros, tuple(space_dims)), View(zeros, tuple(depth_dims))


@lru_cache(maxsize=256)
def space_to_depth(data_shape: Tuple[int, ...], out_shape: Tuple[int, ...], mode: str, block_size: int) -> Plan:
    """Plan of SpaceToDepth-1: one copy, input split ``D_i -> (q_i, b_i)``, output depth split by mode."""
    views = _depth_views(data_shape, out_shape, mode, block_size)
    return Plan(tuple(out_shape), () if views is None else (views,), (), in_shape=tuple(data_shape))


@lru_cache(maxsize=256)
def depth_to_space(data_shape: Tuple[int, ...], out_shape: Tuple[int, ...], mode: str, block_size: int) -> Plan:
    """Plan of DepthToSpace-1: the inverse of :func:`space_to_depth`, same views swapped."""
    views = _depth_views(out_shape, data_shape, mode, block_size)
    return Plan(tuple(out_shape), () if views is None else ((views[1], views[0]),), (), in_shape=tuple(data_shape))
