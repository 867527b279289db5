"""What the three front ends share: taking the input, and reshape/transpose views.

The front ends only reshape and transpose (views, for NumPy); every element is
moved by one of the four core ops. Arrays of other libraries (PyTorch, JAX,
CuPy, Dask, array-API arrays: the ops' own test, :func:`datamove.arrays.libraries.foreign`)
are passed through untouched, so the core op decides who can take them and a
lazy Dask array stays lazy; their reshape/transpose goes through
``array_api_compat``, imported only then.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ..arrays import libraries
from ..errors import brief
from ..rules.params import int_scalar

__all__ = ["as_array", "shape_of", "reshape", "positive_int"]


def as_array(value: Any, name: str = "input") -> Any:
    """``value`` as an array: NumPy arrays and other libraries' arrays as they are, array-likes through NumPy."""
    if isinstance(value, np.ndarray):
        return value
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise TypeError(f"{name} must be an array, got {type(value).__name__} {brief(value)}")
    if libraries.foreign(value):  # PyTorch, JAX, CuPy, Dask (lazy: never computed here), array-API arrays
        return value  # the core op (and its engines) decide whether they can take it
    try:
        return np.asarray(value)
    except Exception as exc:
        raise TypeError(f"{name} must be an array, could not convert {type(value).__name__}: {exc}") from None


def shape_of(x: Any) -> Tuple[int, ...]:
    """``x.shape`` as a tuple of Python ints."""
    return tuple(int(d) for d in x.shape)


def reshape(x: Any, shape: Sequence[int]) -> Any:
    """``x`` reshaped (a view for contiguous NumPy input)."""
    shape = tuple(shape)
    if isinstance(x, np.ndarray):
        return x.reshape(shape)
    import array_api_compat

    return array_api_compat.array_namespace(x).reshape(x, shape)


def positive_int(value: Any, name: str, minimum: int = 1, why: str = "") -> int:
    """An integer argument ``>= minimum``: bools and floats raise TypeError, smaller values DataMoveError."""
    from ..errors import DataMoveError

    result: Optional[int] = int_scalar(value, name)
    if result is None:
        raise TypeError(f"{name} must be an integer, got None")
    if result < minimum:
        raise DataMoveError(f"{name} must be >= {minimum}{why}, got {result}")
    return result


def product(values: Sequence[int]) -> int:
    return math.prod(values)
