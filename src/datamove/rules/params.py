"""Normalisation of the operations' parameters to plain Python ints.

Every public entry point (ops, shapes, front ends) passes its ``block_shape``,
``crops_*``, ``pads_*``, ``block_size`` and ``mode`` through here, so the type
rules and their messages exist once.

>>> int_vector([1, 2, 2], "block_shape")
(1, 2, 2)
>>> int_scalar(3, "block_size")
3
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, SupportsIndex, Tuple, cast, get_args, overload

from .dims import INT64_MAX, _index
from ..errors import DataMoveError, brief, number, traced
from .types import DataFormat, Mode

__all__ = ["MODES", "DATA_FORMATS", "int_vector", "int_scalar", "mode_arg", "data_format_arg", "required"]

#: The two modes of SpaceToDepth-1 / DepthToSpace-1 (:data:`datamove.typing.Mode`'s values).
MODES: Tuple[Mode, ...] = get_args(Mode)

#: Where the depth ops find the channels: ``[N, C, D_1, ...]`` (the spec's) or ``[N, D_1, ..., C]``.
DATA_FORMATS: Tuple[DataFormat, ...] = get_args(DataFormat)

# Other frameworks' names for the modes, to point users at ours.
_MODE_ALIASES = {"DCR": "blocks_first", "CRD": "depth_first"}


def _check_range(value: int, name: str) -> int:
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise DataMoveError(f"{name} = {number(value)} does not fit in int64")
    return value


def int_vector(value: object, name: str, limit: Optional[int] = None) -> Optional[Tuple[int, ...]]:
    """A 1-D integer parameter as a tuple of Python ints (``None`` stays ``None``).

    Accepts a sequence (list, tuple, range, ...) of Python or NumPy integers,
    or a 1-D integer array (anything with ``dtype`` and ``shape``, e.g.
    NumPy, PyTorch CPU, JAX). Sets, dicts and iterators raise
    :class:`TypeError`: their order is not the axes' order, or reading them
    could take without end. Booleans and floats raise :class:`TypeError`;
    other ranks and values outside int64 raise :class:`DataMoveError`.

    ``limit`` (the data's rank, when known) bounds the work: a longer vector
    raises before any item is read.

    >>> int_vector(range(3), "pads_end")
    (0, 1, 2)
    >>> int_vector({1, 2}, "block_shape")
    Traceback (most recent call last):
    ...
    TypeError: block_shape must be a sequence of integers, got set {1, 2} (a list, a tuple or a 1-D integer array: a set or a dict has no axis order)
    """
    if value is None:
        return None
    kind = type(value)
    if kind is not list and kind is not tuple:  # (the usual kinds: straight to the items)
        if isinstance(value, (str, bytes)):
            raise TypeError(f"{name} must be a sequence of integers, got {type(value).__name__} {brief(value)}")
        if hasattr(value, "dtype") and hasattr(value, "shape"):
            return _int_array(value, name, limit)
        if not isinstance(value, Sequence):
            raise TypeError(
                f"{name} must be a sequence of integers, got {type(value).__name__} {brief(value)} "
                "(a list, a tuple or a 1-D integer array: a set or a dict has no axis order)"
            )
    length = len(value)  # type: ignore[arg-type]
    if limit is not None and length > limit:
        _too_long(name, length, limit)
    result = []
    for i in range(length):
        item = value[i]  # type: ignore[index]
        if type(item) is int and -INT64_MAX - 1 <= item <= INT64_MAX:  # the usual item: no names to build
            result.append(item)
            continue
        if isinstance(item, (list, tuple)):
            raise DataMoveError(f"{name} must be 1-D, got a nested sequence at {name}[{i}] = {brief(item)}")
        result.append(_check_range(_index(item, f"{name}[{i}]"), f"{name}[{i}]"))
    return tuple(result)


def _int_array(value: Any, name: str, limit: Optional[int]) -> Tuple[int, ...]:
    """:func:`int_vector` of a 1-D integer array (NumPy, PyTorch CPU, JAX: anything with dtype and shape)."""
    import numpy as np

    shape = tuple(getattr(value, "shape", ()) or ())
    if limit is not None and len(shape) == 1 and isinstance(shape[0], int) and shape[0] > limit:
        _too_long(name, shape[0], limit)
    hint = traced(value)
    if hint:
        raise TypeError(f"{name} must be integers known while tracing, got {type(value).__name__}{hint}")
    try:
        array = np.asarray(value)
    except Exception as exc:  # e.g. a GPU tensor: say what to do
        raise TypeError(f"{name} could not be read as a host integer array: {exc}") from None
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {array.dtype}")
    if array.ndim != 1:
        raise DataMoveError(f"{name} must be 1-D, got an array of shape {array.shape}")
    if limit is not None and array.shape[0] > limit:
        _too_long(name, array.shape[0], limit)
    return tuple(_check_range(int(v), f"{name}[{i}]") for i, v in enumerate(array.tolist()))


def required(**values: object) -> None:
    """The operations' parameters are all required: ``None`` means "unknown" only in :mod:`datamove.rules.shapes`."""
    for name, value in values.items():
        if value is None:
            raise TypeError(f"{name} is required (None means 'unknown' only in datamove.rules.shapes)")


def _too_long(name: str, length: int, rank: int) -> None:
    raise DataMoveError(f"{name} must have one entry per data axis: len({name}) = {length}, data rank = {rank}")


@overload
def int_scalar(value: None, name: str) -> None: ...


@overload
def int_scalar(value: SupportsIndex, name: str) -> int: ...


@overload
def int_scalar(value: object, name: str) -> Optional[int]: ...


def int_scalar(value: object, name: str) -> Optional[int]:
    """An integer attribute (``block_size``) as a Python int; ``None`` stays ``None``."""
    if value is None:
        return None
    if type(value) is int and -INT64_MAX - 1 <= value <= INT64_MAX:  # the usual value: no checks to run
        return value
    return _check_range(_index(value, name), name)


def mode_arg(mode: object) -> Optional[Mode]:
    """Validate ``mode``: ``"blocks_first"`` or ``"depth_first"`` (``None``: unknown)."""
    if mode is None:
        return None
    if type(mode) is str and (mode == "blocks_first" or mode == "depth_first"):
        return cast(Mode, mode)
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, 'blocks_first' or 'depth_first', got {type(mode).__name__} {brief(mode)}")
    if mode not in MODES:
        hint = ""
        alias = _MODE_ALIASES.get(mode.upper())
        if alias:
            hint = f" (ONNX's {mode.upper()} is {alias!r})"
        elif mode.lower() in MODES:
            hint = f" (did you mean {mode.lower()!r}?)"
        raise DataMoveError(f"mode must be 'blocks_first' or 'depth_first', got {brief(mode)}{hint}")
    return mode


_FORMAT_ALIASES = {"NCHW": "channels_first", "NCDHW": "channels_first", "NCW": "channels_first",
                   "NHWC": "channels_last", "NDHWC": "channels_last", "NWC": "channels_last"}


def data_format_arg(data_format: object) -> DataFormat:
    """Validate ``data_format``: ``"channels_first"`` or ``"channels_last"``.

    >>> data_format_arg("channels_last")
    'channels_last'
    """
    if data_format == "channels_first":
        return "channels_first"
    if data_format == "channels_last":
        return "channels_last"
    if not isinstance(data_format, str):
        raise TypeError(f"data_format must be a string, 'channels_first' or 'channels_last', got "
                        f"{type(data_format).__name__} {brief(data_format)}")
    alias = _FORMAT_ALIASES.get(data_format.upper())
    hint = f" ({data_format.upper()} is {alias!r})" if alias else ""
    raise DataMoveError(f"data_format must be 'channels_first' or 'channels_last', got {brief(data_format)}{hint}")
