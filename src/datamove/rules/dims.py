"""Dimensions for shape inference: static ints, unknown (``None``) and intervals.

A dim is an ``int`` (static), ``None`` (unknown: any size ``>= 0``) or
``Dim(lo, hi)``, the closed interval ``lo..hi`` (``hi=None``: unbounded).
Internally the rules work on ``(lo, hi)`` pairs; :func:`to_dim` turns a pair
back into the simplest public form, so a static result is a plain ``int``.

>>> Dim(2, 8)
Dim(2, 8)
>>> str(Dim(4, None)), str(Dim(3, 3)), Dim(3, 3) == 3
('4..', '3', True)
"""

from __future__ import annotations

import operator
import re
from typing import Iterable, Optional, Tuple, Union

from ..errors import DataMoveError, brief, traced

__all__ = ["Dim", "DimLike", "INT64_MAX", "Interval", "as_interval", "to_dim", "format_dim", "format_shape", "parse_dim"]

#: Largest value a dimension, a block product or a parameter may take (OpenVINO's int64).
INT64_MAX = 2**63 - 1

#: ``(lo, hi)`` with ``hi is None`` meaning unbounded.
Interval = Tuple[int, Optional[int]]


def _index(value: object, name: str) -> int:
    """``value`` as a Python int; bools and non-integers raise TypeError."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise TypeError(f"{name} must be an integer, got bool {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__} {brief(value)}{traced(value)}"
        ) from None


class Dim:
    """An interval dimension ``lo..hi`` (``hi=None``: no upper bound).

    Parameters
    ----------
    lo : int
        Smallest possible size, ``>= 0``.
    hi : int or None
        Largest possible size (``>= lo``), or ``None`` for unbounded.

    Examples
    --------
    >>> Dim(4, 8), Dim(4), Dim(0, None)
    (Dim(4, 8), Dim(4, None), Dim(0, None))
    >>> Dim(5, 5) == 5
    True
    """

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int = 0, hi: Optional[int] = None) -> None:
        lo = _index(lo, "Dim.lo")
        if hi is not None:
            hi = _index(hi, "Dim.hi")
        if lo < 0:
            raise DataMoveError(f"Dim.lo must be >= 0, got {lo}")
        if hi is not None and hi < lo:
            raise DataMoveError(f"Dim.hi must be >= Dim.lo, got Dim({lo}, {hi})")
        if max(lo, hi or 0) > INT64_MAX:
            raise DataMoveError(f"Dim({lo}, {hi}) does not fit in int64")
        self.lo: int = lo
        self.hi: Optional[int] = hi

    @property
    def is_static(self) -> bool:
        return self.lo == self.hi

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dim):
            return (self.lo, self.hi) == (other.lo, other.hi)
        if isinstance(other, int) and not isinstance(other, bool):
            return self.lo == self.hi == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.lo) if self.is_static else hash((Dim, self.lo, self.hi))

    def __repr__(self) -> str:
        return f"Dim({self.lo}, {self.hi})"

    def __str__(self) -> str:
        return format_dim(self)


DimLike = Union[int, None, Dim]


def as_interval(dim: object, name: str) -> Interval:
    """The ``(lo, hi)`` pair of a dim; ``name`` is used in error messages."""
    if dim is None:
        return (0, None)
    if isinstance(dim, Dim):
        return (dim.lo, dim.hi)
    value = _index(dim, name)
    if value < 0:
        raise DataMoveError(
            f"{name} must be >= 0, got {value} (write None for an unknown dim, "
            "Dim(lo, hi) for an interval)"
        )
    if value > INT64_MAX:
        raise DataMoveError(f"{name} = {value} does not fit in int64")
    return (value, value)


def to_dim(interval: Interval) -> DimLike:
    """The simplest public form of ``(lo, hi)``: int, ``None`` or ``Dim``."""
    lo, hi = interval
    if lo == hi:
        return lo
    if lo == 0 and hi is None:
        return None
    return Dim(lo, hi)


def format_dim(dim: object) -> str:
    """``3``, ``?``, ``2..8`` or ``4..``: the notation of the command line."""
    if dim is None:
        return "?"
    if isinstance(dim, Dim):
        if dim.is_static:
            return str(dim.lo)
        if dim.lo == 0 and dim.hi is None:
            return "?"
        return f"{dim.lo}..{'' if dim.hi is None else dim.hi}"
    if isinstance(dim, tuple):
        return format_dim(to_dim(dim))
    return str(dim)


def format_shape(shape: Optional[Iterable[object]]) -> str:
    """A shape (dims or ``(lo, hi)`` pairs) in the command-line notation; ``[...]`` for an unknown rank.

    >>> format_shape((2, 8)), format_shape((Dim(4, None), (0, None))), format_shape(None)
    ('[2, 8]', '[4.., ?]', '[...]')
    """
    if shape is None:
        return "[...]"
    return "[" + ", ".join(format_dim(d) for d in shape) + "]"


# At most 20 digits: a longer number is past int64 anyway, and is refused before int() reads it.
_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")
_INTERVAL = re.compile(r"([0-9]{0,20})\s*\.\.\s*([0-9]{0,20}|\?)")


def parse_dim(text: str, what: str = "dim") -> DimLike:
    """One dim as OpenVINO writes it: ``3``, ``?``/``-1`` (unknown), ``2..8``, ``4..``, ``..8``.

    The inverse of :func:`format_dim`; the command line and the IR reader
    both read dims with it. Raises :class:`DataMoveError` naming ``what``.

    >>> parse_dim("3"), parse_dim("?"), parse_dim("-1"), parse_dim("2..8"), parse_dim("4.."), parse_dim(" ..8 ")
    (3, None, None, Dim(2, 8), Dim(4, None), Dim(0, 8))
    """
    text = text.strip()
    if text in ("?", "-1"):
        return None
    interval = _INTERVAL.fullmatch(text)
    if interval:
        low = int(interval[1]) if interval[1] else 0
        high = int(interval[2]) if interval[2] not in ("", "?") else None
        if high is not None and high < low:
            raise DataMoveError(f"{what}: {brief(text)} is empty: its upper bound {high} is below its lower bound {low}")
        try:
            return low if high == low else Dim(low, high)
        except DataMoveError as exc:  # past int64
            raise DataMoveError(f"{what}: {exc}") from None
    if not text:
        raise DataMoveError(f"{what} is empty (write ? for an unknown dim)")
    if not _INTEGER.fullmatch(text):
        raise DataMoveError(f"{what}: {brief(text)} is not a dim (write 3, ?, 2..8, 4.. or ..8)")
    value = int(text)
    if value < 0:
        raise DataMoveError(f"{what}: {value} is negative (write ? or -1 for an unknown dim)")
    if value > INT64_MAX:
        raise DataMoveError(f"{what}: {value} does not fit in int64")
    return value
