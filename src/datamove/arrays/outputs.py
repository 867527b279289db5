"""NumPy outputs: the checks of ``out=``, the result's allocation, and the input copied when it overlaps ``out``.

One place for what every NumPy path needs (:mod:`datamove.dispatch.numpy_calls`, the recipes
of :mod:`datamove.dispatch.recipes`, the zero-copy views of :mod:`datamove.dispatch.foreign`).

>>> import numpy as np
>>> check_out(np.empty((2, 3)), (2, 3), np.dtype(np.float64))
>>> check_out(np.empty((3, 2)), (2, 3), np.dtype(np.float64))
Traceback (most recent call last):
    ...
datamove.errors.DataMoveError: out.shape must be the output shape (2, 3), got (3, 2)
>>> x = np.arange(4); unaliased(x, x[::-1]) is x
False
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any, Callable, List, Tuple

import numpy as np

from .caches import renew_lock_after_fork
from ..errors import DataMoveError, number
from ..rules.dims import INT64_MAX

__all__ = ["check_out", "check_size", "refuse_masked", "allocate", "unaliased"]


def check_size(shape: Tuple[int, ...], dtype: Any) -> None:
    """An output no array can hold is a DataMoveError on every path (NumPy says ValueError, PyTorch RuntimeError).

    >>> check_size((2**40, 2**40), np.dtype(np.float32))
    Traceback (most recent call last):
        ...
    datamove.errors.DataMoveError: the output shape (1099511627776, 1099511627776) of dtype float32 would take 4835703278458516698824704 bytes, more than an array can hold (2**63 - 1)
    """
    nbytes = math.prod(shape) * getattr(dtype, "itemsize", 1)
    if nbytes > INT64_MAX:
        raise DataMoveError(f"the output shape {shape} of dtype {dtype} would take {number(nbytes)} bytes, "
                            "more than an array can hold (2**63 - 1)")


def refuse_masked(value: Any, name: str) -> None:
    ma = sys.modules.get("numpy.ma")  # no masked array exists before numpy.ma is imported
    if ma is not None and isinstance(value, ma.MaskedArray):
        hint = ("move the data and the mask separately (numpy.ma.getdata(data), numpy.ma.getmaskarray(data))"
                if name == "data" else "pass numpy.ma.getdata(out) to write into its data")
        raise TypeError(f"{name} is a masked array, whose mask the operation would not move: {hint}")


def check_out(out: Any, shape: Tuple[int, ...], dtype: np.dtype[Any]) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray like data, got {type(out).__name__}")
    if out.shape != shape:
        raise DataMoveError(f"out.shape must be the output shape {shape}, got {out.shape}")
    if out.dtype != dtype:
        raise DataMoveError(f"out.dtype must be data.dtype = {dtype}, got {out.dtype}")
    flags = out.flags  # (a new object each time it is asked for: once, on every call into out=)
    if not flags.writeable:
        raise DataMoveError("out must be writeable, got a read-only array")
    if type(out) is not np.ndarray:
        refuse_masked(out, "out")
    if not flags.c_contiguous and not flags.f_contiguous:
        _check_no_self_overlap(out)


def _check_no_self_overlap(out: np.ndarray[Any, Any]) -> None:
    """Refuse an ``out`` whose elements may overlap (a zero stride: ``np.broadcast_to``, ``as_strided``).

    Its axes, sorted by stride, must each step past everything the smaller
    ones span: then no two elements share a byte (the last write would win).
    """
    if out.size == 0:
        return
    span = out.itemsize
    for stride, size, axis in sorted((abs(s), n, i) for i, (n, s) in enumerate(zip(out.shape, out.strides)) if n > 1):
        if stride < span:
            raise DataMoveError(
                f"out's elements overlap: axis {axis} of size {size} has stride {out.strides[axis]} bytes "
                f"(out.strides = {out.strides}, itemsize {out.itemsize}); give an array that owns its elements"
            )
        span = stride * (size - 1) + span


#: Results from this many bytes start on a cache line (64 bytes), where NumPy's own large arrays start
#: 16 bytes into one (malloc's header): then a tile's pieces cover whole lines and can be streamed
#: past the cache (see ``src/native/runtime/program.cpp``, ``streams``). SpaceToBatch uint8 with a 4 x 4 block, 128 MiB:
#: 0.87x the copy floor on a line, 1.2x off it.
LINE_FROM = 1 << 20
LINE = 64

#: Buffers of results up to this many bytes (and the line's slack) are kept for the next call once nothing
#: refers to them.
#: A new buffer's pages are faulted in and zeroed by the kernel on their first write, which is most of
#: what an allocating call costs over one into ``out=`` (32 MiB float32 SpaceToDepth, 2 threads, medians
#: of 40 calls: 5.8-7.0 ms into new memory, 2.4-2.9 ms reused). glibc keeps freed blocks below 32 MiB
#: for reuse, but not larger ones. (64.1 MiB 5-D SpaceToDepth: 17-20 ms allocating, 7-8 ms into out=.)
POOL_MAX_BYTES = 128 << 20
#: How many buffers the pool holds, in use or idle: two, so ``y = op(x)`` in a loop (the last ``y``
#: still alive during the call) alternates between them. Idle, it holds at most 2 * POOL_MAX_BYTES.
POOL_SLOTS = 2


def _refs(buffers: List[np.ndarray[Any, Any]], i: int) -> int:
    return sys.getrefcount(buffers[i])


#: What :func:`_refs` counts for a buffer that only the pool holds: no result, and no view of one, is alive
#: (each holds its buffer as its ``base``). Measured, not assumed, so another interpreter cannot make a
#: buffer still in use look idle.
_IDLE = _refs([np.empty(1, np.uint8)], 0)


class _Pool:
    """The buffers of recent large results, each reused once the caller has let go of it.

    A buffer is idle when only the pool refers to it (reference counts; every view of a result holds
    the buffer). A request takes the smallest idle buffer that fits it with less than its own size to
    spare; otherwise the idle buffers are freed first, so a new buffer never sits beside unused ones,
    and the oldest past :data:`POOL_SLOTS` are forgotten (freed when their results are). Each buffer is
    kept with the offset of its first byte on a line (found once: ``__array_interface__`` costs a dict).

    >>> pool = _Pool()
    >>> a, start = pool.take(1000)
    >>> b, _ = pool.take(1000)
    >>> a is b, (a.__array_interface__["data"][0] + start) % LINE
    (False, 0)
    >>> a_address = a.ctypes.data; del a
    >>> pool.take(1000)[0].ctypes.data == a_address
    True
    """

    def __init__(self) -> None:
        self._buffers: List[np.ndarray[Any, Any]] = []
        self._starts: List[int] = []
        self._lock = threading.Lock()
        renew_lock_after_fork(self)

    def take(self, nbytes: int) -> Tuple[np.ndarray[Any, Any], int]:
        """A buffer of ``nbytes`` bytes or a little more (uint8), kept for reuse up to ``POOL_MAX_BYTES + LINE``,
        and the offset in it of its first byte on a line (:data:`LINE`)."""
        with self._lock:
            buffers, starts = self._buffers, self._starts
            best = -1
            for i in range(len(buffers)):
                if _refs(buffers, i) == _IDLE and nbytes <= buffers[i].size < 2 * nbytes and (
                        best < 0 or buffers[i].size < buffers[best].size):
                    best = i
            if best >= 0:
                raw, start = buffers.pop(best), starts.pop(best)
            else:
                kept = [i for i in range(len(buffers)) if _refs(buffers, i) != _IDLE]
                buffers[:], starts[:] = [buffers[i] for i in kept], [starts[i] for i in kept]
                raw = np.empty(nbytes, np.uint8)
                start = -raw.__array_interface__["data"][0] % LINE
                if nbytes > POOL_MAX_BYTES + LINE:
                    return raw, start
                del buffers[:max(0, len(buffers) + 1 - POOL_SLOTS)], starts[:max(0, len(starts) + 1 - POOL_SLOTS)]
            buffers.append(raw)
            starts.append(start)
            return raw, start


_pool = _Pool()


def allocator(nbytes: int) -> Callable[[Tuple[int, ...], Any], np.ndarray[Any, Any]]:
    """What :func:`allocate` comes to for a result of ``nbytes``: ``np.empty`` itself when small (its rule,
    without its call: 1 us less on a small call), else ``allocate``.

    >>> allocator(64) is np.empty, allocator(LINE_FROM) is allocate
    (True, True)
    """
    return np.empty if nbytes < LINE_FROM else allocate


def allocate(shape: Tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    """A new C-contiguous array for a result, on a cache line when large; an output too big for NumPy is a
    DataMoveError.

    From 1 MiB to ``POOL_MAX_BYTES`` (128 MiB) its memory may be that of an earlier result that nothing
    refers to any more, whose pages are already in place (``_Pool``).

    >>> allocate((1024, 1024), np.float32).__array_interface__["data"][0] % 64
    0
    """
    try:
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize * math.prod(shape)
        if nbytes < LINE_FROM or dtype.hasobject or nbytes > sys.maxsize - LINE:
            return np.empty(shape, dtype)
        raw, start = _pool.take(nbytes + LINE)
        result: np.ndarray[Any, Any] = np.ndarray(shape, dtype, raw, start)  # (a view of raw, which it holds)
        return result
    except ValueError as exc:  # "array is too big"
        raise DataMoveError(f"the output shape {shape} of dtype {dtype} is too big: {exc}") from None


def unaliased(data: np.ndarray[Any, Any], out: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``data``, or a copy of it when it may share memory with ``out``: a permutation cannot be done in place."""
    return data.copy() if np.may_share_memory(data, out) else data
