"""The NumPy engine: executes a plan with one strided ``np.copyto`` per view pair.

Each element is reinterpreted as an unsigned integer (or raw bytes) of its
width, so every dtype is moved bit for bit (NaN payloads, -0.0, ml_dtypes'
bfloat16/float8/int4, strings, datetimes, structured) and only object arrays
go through NumPy's reference-counting copy.

>>> import numpy as np
>>> from datamove.plans import views as plans
>>> data = np.arange(4).reshape(4, 1)
>>> plan = plans.batch_to_space((4, 1), (1, 4), (1, 4), (0, 0), (0, 0))
>>> out = np.empty(plan.out_shape, data.dtype)
>>> execute(plan, data, out).tolist()
[[0, 1, 2, 3]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..arrays.outputs import allocate
from ..plans.views import Plan, View, check_arrays

if TYPE_CHECKING:
    from .call import Call

__all__ = ["run", "execute", "can_take"]

_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def can_take(array: object) -> bool:
    return isinstance(array, np.ndarray)


def _raw(array: np.ndarray) -> np.ndarray:
    """The same memory with items as unsigned ints / raw bytes of the same width."""
    if array.dtype.hasobject:
        return array
    size = array.dtype.itemsize
    return array.view(_UINTS.get(size) or np.dtype(f"V{size}"))


def _strided(array: np.ndarray, view: View, writeable: bool) -> np.ndarray:
    # Slicing moves the data pointer to view.start (valid: the view is non-empty).
    base = array[tuple(slice(s, None) for s in view.start)]
    strides = tuple(step * array.strides[axis] for axis, _, step in view.dims)
    return as_strided(base, view.shape, strides, subok=False, writeable=writeable)


def run(call: Call, data: np.ndarray, out: Any) -> np.ndarray:
    """The engine protocol (:mod:`datamove.engines`): ``call`` on ``data`` into ``out``, or a new array."""
    return execute(call.plan, data, allocate(call.out_shape, data.dtype) if out is None else out)


def execute(plan: Plan, data: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write ``plan`` applied to ``data`` into ``out`` (shape ``plan.out_shape``, dtype of data)."""
    check_arrays(plan, data, out)  # (the views below are made from raw memory: a wrong plan runs past them)
    if data.dtype.itemsize == 0:
        return out
    source, target = _raw(data), _raw(out)
    for src, dst in plan.copies:
        np.copyto(_strided(target, dst, True), _strided(source, src, False), casting="no")
    if plan.fills:
        zero = np.zeros((), target.dtype)
        for view in plan.fills:
            _strided(target, view, True)[...] = zero
    return out
