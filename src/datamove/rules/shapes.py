"""Shape inference and validation: the rules of the four operations, once.

Users call them as :mod:`datamove.shapes`, this module's public face. The
operations call the private ``resolve_*`` functions, which also return the
normalised parameters, so every rule and message lives here. The rules follow
OpenVINO's shape inference (``src/core/shape_inference/include/*_shape_inference.hpp``)
except where it is unsound; ``docs/guide/converters.rst`` lists the differences.

>>> resolve_space_to_depth((1, 2, 4, 4), "blocks_first", 2).public()
(1, 8, 2, 2)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, Dict, NamedTuple, Optional, SupportsIndex, Tuple, Union

from .dims import INT64_MAX, Dim, Interval, as_interval, format_dim, format_shape, to_dim
from ..errors import DataMoveError, brief, number
from .params import data_format_arg, int_scalar, int_vector, mode_arg
from .types import DataFormat, IntVector, Mode, Shape, ShapeLike

__all__ = ["batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space", "Dim"]

_UNKNOWN: Interval = (0, None)


class Resolved(NamedTuple):
    """An inferred output shape (as intervals) with the normalised parameters."""

    shape: Optional[Tuple[Interval, ...]]
    params: Dict[str, Any]  # the normalised parameters, by name (tuples of ints, an int, a mode, or None)
    static: Optional[Tuple[int, ...]] = None  # the shape as plain ints, where a static call's straight path made it

    def public(self) -> Shape:
        if self.static is not None:
            return self.static
        if self.shape is None:
            return None
        return tuple([d[0] if d[0] == d[1] else to_dim(d) for d in self.shape])  # (a static dim: its int)


# ----------------------------------------------------------------- helpers


def _fmt(interval: Interval) -> str:
    return format_dim(interval)


def _data_shape(data_shape: object, minimum_rank: int, op: str) -> Optional[Tuple[Interval, ...]]:
    if data_shape is None:
        return None
    if type(data_shape) is tuple:  # an array's own shape: plain ints, each its own interval, no names to build
        for d in data_shape:
            if type(d) is not int or not 0 <= d <= INT64_MAX:
                break
        else:
            if len(data_shape) >= minimum_rank:
                return tuple([(d, d) for d in data_shape])
    # A sequence (tuple, list, torch.Size) or a 1-D array: a set or an iterator has no axis order.
    is_array = hasattr(data_shape, "shape") and hasattr(data_shape, "dtype")
    if isinstance(data_shape, (str, bytes)) or not (isinstance(data_shape, Sequence) or is_array):
        raise TypeError(f"data shape must be a sequence of dims or None, got {type(data_shape).__name__} "
                        f"{brief(data_shape)}")
    try:
        dims = list(data_shape)  # type: ignore[call-overload]
    except TypeError:  # a 0-d array
        raise TypeError(
            f"data shape must be a sequence of dims or None, got {type(data_shape).__name__} {brief(data_shape)}"
        ) from None
    shape = tuple(as_interval(d, f"data.shape[{i}]") for i, d in enumerate(dims))
    if len(shape) < minimum_rank:
        raise DataMoveError(
            f"{op}: data must have rank >= {minimum_rank}, got rank {len(shape)} "
            f"(data.shape = {format_shape(shape)})"
        )
    return shape


def _check_lengths(rank: Optional[int], **vectors: Optional[Tuple[int, ...]]) -> None:
    """Each known vector has one entry per data axis (or, rank unknown, they agree and allow rank >= 2)."""
    known = {name: v for name, v in vectors.items() if v is not None}
    if rank is not None:
        for name, v in known.items():
            if len(v) != rank:
                raise DataMoveError(
                    f"{name} must have one entry per data axis: len({name}) = {len(v)}, data rank = {rank}"
                )
    elif len({len(v) for v in known.values()}) > 1:
        lengths = ", ".join(f"len({n}) = {len(v)}" for n, v in known.items())
        raise DataMoveError(f"{', '.join(known)} must have the same length, got {lengths}")
    else:
        for name, v in known.items():
            if len(v) < 2:
                raise DataMoveError(
                    f"len({name}) = {len(v)} would make the data rank {len(v)}, but the data must have rank >= 2"
                )


def _check_block_shape(block_shape: Optional[Tuple[int, ...]]) -> None:
    if block_shape is None:
        return
    for i, b in enumerate(block_shape):
        if b < 1:
            raise DataMoveError(f"block_shape[{i}] must be >= 1, got {b} (block_shape = {brief(list(block_shape))})")
    if block_shape and block_shape[0] != 1:
        raise DataMoveError(
            f"block_shape[0] must be 1, got {block_shape[0]}: index 0 is the batch axis, which the spec "
            "says has no block (OpenVINO's shape inference and CPU plugin disagree on what it would mean)"
        )
    if math.prod(block_shape) > INT64_MAX:
        raise DataMoveError(f"the product of block_shape = {number(math.prod(block_shape))} does not fit in int64")


def _check_margins(name: str, kind: str, values: Optional[Tuple[int, ...]]) -> None:
    """crops_* / pads_*: non-negative, and 0 on the batch axis."""
    if values is None:
        return
    for i, v in enumerate(values):
        if v < 0:
            raise DataMoveError(f"{name}[{i}] must be >= 0, got {v} ({name} = {brief(list(values))})")
    if values and values[0] != 0:
        raise DataMoveError(
            f"{name}[0] must be 0, got {values[0]}: index 0 is the batch axis, which the spec says is never "
            f"{kind} (OpenVINO's shape inference ignores it while its CPU plugin applies it)"
        )


def _multiply(d: Interval, k: int, what: str, axis: int = 0) -> Interval:
    """``d * k`` for ``k >= 0``; an upper bound past int64 becomes unbounded (OpenVINO's clip_times).
    (``what``, formatted with ``i=axis``, names the product in the message.)"""
    lo, hi = d
    lo *= k
    if lo > INT64_MAX:
        raise DataMoveError(f"{what.format(i=axis)} = {lo} does not fit in int64")
    if hi is not None:
        hi *= k
        if hi > INT64_MAX:
            hi = None
    return (lo, hi)


def _add(d: Interval, c: int, what: str, axis: int = 0) -> Interval:
    lo, hi = d
    lo += c
    if lo > INT64_MAX:
        raise DataMoveError(f"{what.format(i=axis)} = {lo} does not fit in int64")
    if hi is not None:
        hi += c
        if hi > INT64_MAX:
            hi = None
    return (lo, hi)


def _divide(d: Interval, k: int, what: str, divisor: Union[str, Callable[[], str]], axis: int = 0) -> Interval:
    """``d / k`` exactly: the multiples of ``k`` in ``d``, divided. None fits: error (``what`` and ``divisor``,
    formatted with ``i=axis``, name the dividend and ``k``; ``divisor`` a callable when the name costs
    something to build)."""
    lo, hi = d
    if k == 1:
        return d
    q_lo = -(-lo // k)
    q_hi = None if hi is None else hi // k
    if q_hi is not None and q_lo > q_hi:
        what = what.format(i=axis)
        divisor = divisor() if callable(divisor) else divisor.format(i=axis)
        if lo == hi:
            raise DataMoveError(f"{what} = {lo} is not divisible by {divisor} = {k}")
        raise DataMoveError(f"{what} = {_fmt(d)} contains no multiple of {divisor} = {k}")
    return (q_lo, q_hi)


def _crop(d: Interval, c: int, i: int) -> Interval:
    """``d - c`` where ``d`` (axis ``i`` of the uncropped output) must be at least ``c``: out of range is an
    error, never 0."""
    lo, hi = d
    if hi is not None and c > hi:
        bound = f"= {hi}" if lo == hi else f"<= {hi} (it is {_fmt(d)})"
        raise DataMoveError(f"crops_begin[{i}] + crops_end[{i}] = {c} exceeds data.shape[{i}] * block_shape[{i}] {bound}")
    return (max(lo - c, 0), None if hi is None else hi - c)


# ----------------------------------------------------------------- static calls, straight


# An array's call (plain int dims, parameters of plain ints) is checked here first with the rules below as
# plain integer arithmetic, in a few microseconds: a new shape's first call pays it. Anything these do not
# pass, they leave to the rules (None), which raise with the message: a rule broken is always reported by
# the interval code, and tests/test_shapes.py holds the two to one result on valid and broken calls.


_ROOT_INT64_MAX = math.isqrt(INT64_MAX)  # the largest block whose square is an int64


def _plain(values: Any, rank: int, low: int) -> bool:
    """``values`` is a list or tuple of ``rank`` plain ints from ``low`` to INT64_MAX."""
    if (type(values) is not tuple and type(values) is not list) or len(values) != rank:
        return False
    for v in values:
        if type(v) is not int or not low <= v <= INT64_MAX:
            return False
    return True


def static_space_shape(op: str, shape: Tuple[int, ...], block: Any, begin: Any, end: Any) -> Optional[Tuple[int, ...]]:
    """The output shape of a valid static BatchToSpace (``op`` "batch_to_space") or SpaceToBatch call (its
    crops or pads as ``begin`` and ``end``): plain int dims and parameters (lists or tuples), every rule
    met; None for any other call, which the interval rules then resolve (or refuse, with the message).

    >>> static_space_shape("space_to_batch", (1, 2, 4, 6), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 0])
    (4, 2, 3, 3)
    >>> static_space_shape("batch_to_space", (3, 2, 4, 6), [1, 1, 2, 1], [0, 0, 0, 0], [0, 0, 0, 0]) is None
    True
    """
    rank = len(shape)
    if (rank < 2 or not _plain(shape, rank, 0) or not _plain(block, rank, 1) or not _plain(begin, rank, 0)
            or not _plain(end, rank, 0) or block[0] != 1 or begin[0] or end[0]):
        return None
    product = math.prod(block)
    if product > INT64_MAX:
        return None
    out = [0] * rank
    if op == "batch_to_space":
        if shape[0] % product:
            return None
        out[0] = shape[0] // product
        for i in range(1, rank):
            full = shape[i] * block[i]
            if full > INT64_MAX or begin[i] + end[i] > full:
                return None
            out[i] = full - begin[i] - end[i]
    else:
        out[0] = shape[0] * product
        if out[0] > INT64_MAX:
            return None
        for i in range(1, rank):
            padded = shape[i] + begin[i] + end[i]
            if padded > INT64_MAX or padded % block[i]:
                return None
            out[i] = padded // block[i]
    return tuple(out)


def _static_space(op: str, shape: Tuple[int, ...], block: Any, begin: Any, end: Any) -> Optional[Resolved]:
    """resolve_batch_to_space / resolve_space_to_batch of a valid static call; None for anything else."""
    out = static_space_shape(op, shape, block, begin, end)
    if out is None:
        return None
    names = ("crops_begin", "crops_end") if op == "batch_to_space" else ("pads_begin", "pads_end")
    return Resolved(tuple([(d, d) for d in out]), {"block_shape": tuple(block), names[0]: tuple(begin), names[1]: tuple(end)},
                    out)


def static_depth_shape(space_to_depth: bool, shape: Tuple[int, ...], mode: Any, size: Any) -> Optional[Tuple[int, ...]]:
    """The output shape of a valid static SpaceToDepth (``space_to_depth``) or DepthToSpace call, channels
    first: plain int dims and parameters, every rule met; None for any other call, which the interval rules
    then resolve (or refuse, with the message). The rules' straight path, as plain integer arithmetic.

    >>> static_depth_shape(True, (1, 2, 4, 6), "blocks_first", 2), static_depth_shape(True, (1, 2, 3, 6), "blocks_first", 2)
    ((1, 8, 2, 3), None)
    """
    if type(size) is not int or type(mode) is not str or (mode != "blocks_first" and mode != "depth_first"):
        return None
    rank = len(shape)
    if rank == 4:  # images, the common case: the rules below, written out for two spatial dims (three times as fast)
        n, c, h, w = shape
        if type(n) is not int or type(c) is not int or type(h) is not int or type(w) is not int:
            return None
        every = n | c | h | w  # (one test for four: negative if one is, above INT64_MAX if one is)
        if every < 0 or every > INT64_MAX or not 1 <= size <= _ROOT_INT64_MAX:  # (size * size at most INT64_MAX)
            return None
        power = size * size
        if space_to_depth:
            if h % size or w % size:
                return None
            c *= power
            return None if c > INT64_MAX else (n, c, h // size, w // size)
        if c % power:
            return None
        h *= size
        w *= size
        return None if h > INT64_MAX or w > INT64_MAX else (n, c // power, h, w)
    if rank < 3 or not 1 <= size <= INT64_MAX or not _plain(shape, rank, 0):
        return None
    spatial = rank - 2
    if size > 1 and spatial >= 63:
        return None
    power = size**spatial
    if power > INT64_MAX:
        return None
    rest = shape[2:]
    if space_to_depth:  # (only the depth grows)
        for d in rest:
            if d % size:
                return None
        depth = shape[1] * power
        return None if depth > INT64_MAX else (shape[0], depth, *[d // size for d in rest])
    if shape[1] % power:
        return None
    grown = [d * size for d in rest]  # (only the spatial dims grow)
    return None if max(grown) > INT64_MAX else (shape[0], shape[1] // power, *grown)


def _static_depth(space_to_depth: bool, shape: Tuple[int, ...], mode: Any, size: Any) -> Optional[Resolved]:
    """resolve_space_to_depth / resolve_depth_to_space (channels first) of a valid static call; None else."""
    out = static_depth_shape(space_to_depth, shape, mode, size)
    if out is None:
        return None
    return Resolved(tuple([(d, d) for d in out]), {"mode": mode, "block_size": size}, out)


# ----------------------------------------------------------------- BatchToSpace-2


def resolve_batch_to_space(data_shape: ShapeLike, block_shape: Optional[IntVector], crops_begin: Optional[IntVector],
                           crops_end: Optional[IntVector]) -> Resolved:
    if type(data_shape) is tuple:
        found = _static_space("batch_to_space", data_shape, block_shape, crops_begin, crops_end)
        if found is not None:
            return found
    shape = _data_shape(data_shape, 2, "batch_to_space")
    rank = None if shape is None else len(shape)
    block = int_vector(block_shape, "block_shape", rank)
    begin = int_vector(crops_begin, "crops_begin", rank)
    end = int_vector(crops_end, "crops_end", rank)
    _check_lengths(None if shape is None else len(shape), block_shape=block, crops_begin=begin, crops_end=end)
    _check_block_shape(block)
    _check_margins("crops_begin", "cropped", begin)
    _check_margins("crops_end", "cropped", end)
    params = {"block_shape": block, "crops_begin": begin, "crops_end": end}
    if shape is None:
        return Resolved(None, params)

    if block is None:
        out = [_UNKNOWN]
    else:
        product = math.prod(block)
        out = [_divide(shape[0], product, "data.shape[0]", lambda: f"the product of block_shape {brief(list(block))}")]
    for i in range(1, len(shape)):
        if begin is None or end is None:
            out.append(_UNKNOWN)
            continue
        if block is None:  # B_i >= 1 unknown: D_i * [1, inf)
            lo, hi = shape[i]
            full: Interval = (lo, None if hi != 0 else 0)
        else:
            full = _multiply(shape[i], block[i], "data.shape[{i}] * block_shape[{i}]", i)
        out.append(_crop(full, begin[i] + end[i], i))
    return Resolved(tuple(out), params)


def batch_to_space(data_shape: ShapeLike, block_shape: Optional[IntVector], crops_begin: Optional[IntVector],
                   crops_end: Optional[IntVector]) -> Shape:
    """Output shape of BatchToSpace-2.

    ``[batch / prod(block_shape), D_i * block_shape[i] - crops_begin[i] - crops_end[i], ...]``

    Parameters
    ----------
    data_shape : sequence of dims, or None
        ``[batch, D_1, ..., D_{N-1}]``, rank >= 2.
    block_shape, crops_begin, crops_end : sequence of N ints, or None
        ``block_shape[i] >= 1``, crops ``>= 0``; index 0 (batch) must be 1 / 0.

    Returns
    -------
    tuple of dims, or None for an unknown rank.

    Raises
    ------
    DataMoveError
        A rule of the spec is broken (rank, lengths, values, divisibility, crops).
    TypeError
        A parameter is not made of integers.

    Examples
    --------
    The spec's 5-D example:

    >>> batch_to_space((48, 3, 3, 1, 3), [1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0])
    (2, 6, 10, 3, 3)
    >>> batch_to_space((Dim(4, 17), 5), [1, 2], [0, 3], [0, 0])
    (Dim(2, 8), 7)
    """
    return resolve_batch_to_space(data_shape, block_shape, crops_begin, crops_end).public()


# ----------------------------------------------------------------- SpaceToBatch-2


def resolve_space_to_batch(data_shape: ShapeLike, block_shape: Optional[IntVector], pads_begin: Optional[IntVector],
                           pads_end: Optional[IntVector]) -> Resolved:
    if type(data_shape) is tuple:
        found = _static_space("space_to_batch", data_shape, block_shape, pads_begin, pads_end)
        if found is not None:
            return found
    shape = _data_shape(data_shape, 2, "space_to_batch")
    rank = None if shape is None else len(shape)
    block = int_vector(block_shape, "block_shape", rank)
    begin = int_vector(pads_begin, "pads_begin", rank)
    end = int_vector(pads_end, "pads_end", rank)
    _check_lengths(None if shape is None else len(shape), block_shape=block, pads_begin=begin, pads_end=end)
    _check_block_shape(block)
    _check_margins("pads_begin", "padded", begin)
    _check_margins("pads_end", "padded", end)
    params = {"block_shape": block, "pads_begin": begin, "pads_end": end}
    if shape is None:
        return Resolved(None, params)

    if block is None:
        out = [_UNKNOWN]
    else:
        out = [_multiply(shape[0], math.prod(block), "data.shape[0] * prod(block_shape)")]
    for i in range(1, len(shape)):
        if block is None or begin is None or end is None:
            out.append(_UNKNOWN)
            continue
        what = "data.shape[{i}] + pads_begin[{i}] + pads_end[{i}]"
        padded = _add(shape[i], begin[i] + end[i], what, i)
        out.append(_divide(padded, block[i], what, "block_shape[{i}]", i))
    return Resolved(tuple(out), params)


def space_to_batch(data_shape: ShapeLike, block_shape: Optional[IntVector], pads_begin: Optional[IntVector],
                   pads_end: Optional[IntVector]) -> Shape:
    """Output shape of SpaceToBatch-2.

    ``[batch * prod(block_shape), (D_i + pads_begin[i] + pads_end[i]) / block_shape[i], ...]``

    Parameters
    ----------
    data_shape : sequence of dims, or None
        ``[batch, D_1, ..., D_{N-1}]``, rank >= 2.
    block_shape, pads_begin, pads_end : sequence of N ints, or None
        ``block_shape[i] >= 1`` dividing ``D_i + pads_begin[i] + pads_end[i]``;
        pads ``>= 0``; index 0 (batch) must be 1 / 0.

    Examples
    --------
    The spec's example:

    >>> space_to_batch((2, 6, 10, 3, 3), [1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0])
    (48, 3, 3, 1, 3)
    """
    return resolve_space_to_batch(data_shape, block_shape, pads_begin, pads_end).public()


# ----------------------------------------------------------------- SpaceToDepth-1 / DepthToSpace-1


def _depth_common(op: str, data_shape: object, mode: object,
                  block_size: object) -> Tuple[Optional[Tuple[Interval, ...]], Dict[str, Any]]:
    shape = _data_shape(data_shape, 3, op)
    mode = mode_arg(mode)
    size = int_scalar(block_size, "block_size")
    if size is not None and size < 1:
        raise DataMoveError(f"block_size must be >= 1, got {size}")
    spatial = None if shape is None else len(shape) - 2
    # size >= 2 overflows int64 from the 63rd power on: never compute a huge power for a message
    if size is not None and spatial is not None and size > 1 and (spatial >= 63 or size**spatial > INT64_MAX):
        power = f"about 2 ** {int(spatial * math.log2(size))}" if spatial >= 63 else number(size**spatial)
        raise DataMoveError(f"block_size ** {spatial} = {power} does not fit in int64 (block_size = {size})")
    return shape, {"mode": mode, "block_size": size}


def _depth_axes(rank: int, data_format: str) -> Tuple[int, range]:
    """The channel axis and the spatial axes of a depth op's data."""
    if data_format == "channels_last":
        return rank - 1, range(1, rank - 1)
    return 1, range(2, rank)


def resolve_space_to_depth(data_shape: ShapeLike, mode: Optional[Mode], block_size: Optional[SupportsIndex] = 1,
                           data_format: DataFormat = "channels_first") -> Resolved:
    if type(data_shape) is tuple and data_format == "channels_first":
        found = _static_depth(True, data_shape, mode, block_size)
        if found is not None:
            return found
    data_format = data_format_arg(data_format)
    shape, params = _depth_common("space_to_depth", data_shape, mode, block_size)
    size = params["block_size"]
    if shape is None:
        return Resolved(None, params)
    if size is None:
        return Resolved((shape[0],) + (_UNKNOWN,) * (len(shape) - 1), params)
    spatial = len(shape) - 2
    channels, axes = _depth_axes(len(shape), data_format)
    out = list(shape)
    out[channels] = _multiply(shape[channels], size**spatial, f"data.shape[{channels}] * block_size ** {spatial}")
    for i in axes:
        out[i] = _divide(shape[i], size, "data.shape[{i}]", "block_size", i)
    return Resolved(tuple(out), params)


def space_to_depth(data_shape: ShapeLike, mode: Optional[Mode], block_size: Optional[SupportsIndex] = 1,
                   data_format: DataFormat = "channels_first") -> Shape:
    """Output shape of SpaceToDepth-1: ``[N, C * block_size ** K, D_1 / block_size, ...]``.

    Parameters
    ----------
    data_shape : sequence of dims, or None
        ``[N, C, D_1, ..., D_K]``, rank >= 3; every ``D_i`` divisible by ``block_size``.
    mode : {"blocks_first", "depth_first"} or None
        Does not change the shape, but is validated.
    block_size : int, default 1
    data_format : {"channels_first", "channels_last"}, default "channels_first"
        ``channels_last``: the channels are the last axis, ``[N, D_1, ..., D_K, C]``
        in and ``[N, D_1 / block_size, ..., C * block_size ** K]`` out.

    Examples
    --------
    The spec's example:

    >>> space_to_depth((5, 7, 4, 6), "blocks_first", 2)
    (5, 28, 2, 3)
    >>> space_to_depth((5, 4, 6, 7), "blocks_first", 2, data_format="channels_last")
    (5, 2, 3, 28)
    """
    return resolve_space_to_depth(data_shape, mode, block_size, data_format).public()


def resolve_depth_to_space(data_shape: ShapeLike, mode: Optional[Mode], block_size: Optional[SupportsIndex] = 1,
                           data_format: DataFormat = "channels_first") -> Resolved:
    if type(data_shape) is tuple and data_format == "channels_first":
        found = _static_depth(False, data_shape, mode, block_size)
        if found is not None:
            return found
    data_format = data_format_arg(data_format)
    shape, params = _depth_common("depth_to_space", data_shape, mode, block_size)
    size = params["block_size"]
    if shape is None:
        return Resolved(None, params)
    if size is None:
        return Resolved((shape[0],) + (_UNKNOWN,) * (len(shape) - 1), params)
    spatial = len(shape) - 2
    channels, axes = _depth_axes(len(shape), data_format)
    out = list(shape)
    out[channels] = _divide(shape[channels], size**spatial, f"data.shape[{channels}]", f"block_size ** {spatial}")
    for i in axes:
        out[i] = _multiply(shape[i], size, "data.shape[{i}] * block_size", i)
    return Resolved(tuple(out), params)


def depth_to_space(data_shape: ShapeLike, mode: Optional[Mode], block_size: Optional[SupportsIndex] = 1,
                   data_format: DataFormat = "channels_first") -> Shape:
    """Output shape of DepthToSpace-1: ``[N, C / block_size ** K, D_1 * block_size, ...]``.

    Parameters
    ----------
    data_shape : sequence of dims, or None
        ``[N, C, D_1, ..., D_K]``, rank >= 3; ``C`` divisible by ``block_size ** K``.
    mode : {"blocks_first", "depth_first"} or None
    block_size : int, default 1
    data_format : {"channels_first", "channels_last"}, default "channels_first"
        ``channels_last``: ``[N, D_1, ..., D_K, C]``, the channels last.

    Examples
    --------
    >>> depth_to_space((1, 12, 2, 3), "depth_first", 2)
    (1, 3, 4, 6)
    >>> depth_to_space((Dim(2, 10), Dim(81, 82), Dim(3, 7)), "blocks_first", 3)
    (Dim(2, 10), 27, Dim(9, 21))
    >>> depth_to_space((1, 2, 3, 12), "depth_first", 2, data_format="channels_last")
    (1, 4, 6, 3)
    """
    return resolve_depth_to_space(data_shape, mode, block_size, data_format).public()
