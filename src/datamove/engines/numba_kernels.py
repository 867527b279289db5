"""The compiled kernels: strided copies and zero fills over flat word arrays.

Every kernel walks a loop nest (see :mod:`datamove.engines.strided`) the same
way: the outer loops, flattened, and chunks of loop 3 form the tasks, shared
among the threads in contiguous ranges; loops 3 and 2 run inside a task, and
loops 1 and 0 are the inner tile. The
tile is specialised by its *pattern*:

* ``CONTIGUOUS``: loop 0 contiguous on both sides (a ``memcpy`` per row);
* ``GATHER`` with block ``B``: the input is contiguous over (loop 0, loop 1)
  with loop 1 the block offset, the output gets ``B`` contiguous rows
  (SpaceToDepth, SpaceToBatch);
* ``SCATTER`` with block ``B``: the mirror image (DepthToSpace, BatchToSpace);
* ``STRIDED``: anything else;
* ``GATHER_WINDOW`` / ``SCATTER_WINDOW``: SpaceToBatch's / BatchToSpace's
  last axis in whole blocks (loop 0 the block index ``d``, loop 1 the
  offset ``b``), keeping positions ``lo <= t = d * B + b < hi`` of the
  contiguous "space" row: SpaceToBatch writes zeros outside (its padding, in
  the same pass), BatchToSpace skips them (its crop). The blocks wholly
  inside run as GATHER / SCATTER tiles; only the edge blocks test ``t``.

``B`` is a compile-time constant, so LLVM turns the tile into wide loads,
shuffles and wide stores: that is what brings a permutation to the speed of a
copy. Loads and stores go through ``inbounds`` pointer arithmetic, so
indices need no negative-index check and loops vectorize.

Importing this module imports Numba; ``cache=True`` keeps the machine code on
disk, so a new process loads it instead of compiling.
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

__all__ = ["CONTIGUOUS", "GATHER", "SCATTER", "STRIDED", "FILL", "GATHER_WINDOW", "SCATTER_WINDOW", "BLOCKS", "kernel"]

CONTIGUOUS, GATHER, SCATTER, STRIDED, FILL, GATHER_WINDOW, SCATTER_WINDOW = range(7)
#: The block sizes with specialised GATHER / SCATTER tiles.
BLOCKS = (2, 3, 4)

_OPTIONS = dict(parallel=True, cache=True, nogil=True, boundscheck=False)


@intrinsic
def _load(typingctx, array, index):
    """``array[index]`` through an ``inbounds`` pointer: no wraparound, no bounds check."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.load(builder.gep(data, [args[1]], inbounds=True))

    return array.dtype(array, types.intp), codegen


@intrinsic
def _store(typingctx, array, index, value):
    """``array[index] = value`` through an ``inbounds`` pointer."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        builder.store(args[2], builder.gep(data, [args[1]], inbounds=True))
        return context.get_dummy_value()

    return types.void(array, types.intp, array.dtype), codegen


@numba.njit(cache=True)
def _offsets(outer, row, src_start, dst_start):
    """Start offsets of outer iteration ``row`` (row-major over the outer loops)."""
    a = src_start
    b = dst_start
    rest = np.int64(row)
    for k in range(outer.shape[0] - 1, -1, -1):
        count = outer[k, 0]
        quotient = rest // count
        index = rest - quotient * count
        rest = quotient
        a += index * outer[k, 1]
        b += index * outer[k, 2]
    return a, b


def _make(pattern: int, block: int):
    # ``pattern`` and ``block`` are closure constants: Numba compiles them in,
    # and its cache keys on them.
    @numba.njit(**_OPTIONS)
    def run(src, src_start, dst, dst_start, outer, loop3, chunk, loop2, loop1, loop0, value, threads, lo, hi):
        rows = np.int64(1)
        for k in range(outer.shape[0]):
            rows *= outer[k, 0]
        n3, s3, d3 = loop3[0], loop3[1], loop3[2]
        n2, s2, d2 = loop2[0], loop2[1], loop2[2]
        n1, s1, d1 = loop1[0], loop1[1], loop1[2]
        n0, s0, d0 = loop0[0], loop0[1], loop0[2]
        chunks = (n3 + chunk - 1) // chunk
        total = rows * chunks
        workers = max(1, min(threads, total))
        for worker in numba.prange(workers):
            for task in range(total * worker // workers, total * (worker + 1) // workers):
                row = task // chunks
                first = (task - row * chunks) * chunk
                a3, b3 = _offsets(outer, row, src_start, dst_start)
                for m in range(first * n2, min(n3, first + chunk) * n2):
                    # loops 3 and 2 walked as one: m = index3 * n2 + index2
                    index3 = m // n2
                    index2 = m - index3 * n2
                    ak = a3 + index3 * s3 + index2 * s2
                    bk = b3 + index3 * d3 + index2 * d2
                    if pattern == GATHER:
                        for i in range(n0):
                            for j in range(block):
                                _store(dst, bk + j * d1 + i, _load(src, ak + i * block + j))
                    elif pattern == SCATTER:
                        for i in range(n0):
                            for j in range(block):
                                _store(dst, bk + i * block + j, _load(src, ak + j * s1 + i))
                    elif pattern == GATHER_WINDOW or pattern == SCATTER_WINDOW:
                        size = block if block else n1
                        inner_first = min(n0, (lo + size - 1) // size)  # blocks [inner_first, inner_last) lie inside
                        inner_last = max(inner_first, min(n0, hi // size))
                        for edge in range(2):  # the blocks before and after the inside ones
                            for i in range(0 if edge == 0 else inner_last, inner_first if edge == 0 else n0):
                                for j in range(size):
                                    t = i * size + j
                                    if pattern == GATHER_WINDOW:
                                        if lo <= t < hi:
                                            _store(dst, bk + j * d1 + i * d0, _load(src, ak + t))
                                        else:
                                            _store(dst, bk + j * d1 + i * d0, value)
                                    elif lo <= t < hi:
                                        _store(dst, bk + t, _load(src, ak + j * s1 + i * s0))
                        if pattern == GATHER_WINDOW and d0 == 1:
                            for i in range(inner_first, inner_last):
                                for j in range(size):
                                    _store(dst, bk + j * d1 + i, _load(src, ak + i * size + j))
                        elif pattern == GATHER_WINDOW:
                            for i in range(inner_first, inner_last):
                                for j in range(size):
                                    _store(dst, bk + j * d1 + i * d0, _load(src, ak + i * size + j))
                        elif s0 == 1:
                            for i in range(inner_first, inner_last):
                                for j in range(size):
                                    _store(dst, bk + i * size + j, _load(src, ak + j * s1 + i))
                        else:
                            for i in range(inner_first, inner_last):
                                for j in range(size):
                                    _store(dst, bk + i * size + j, _load(src, ak + j * s1 + i * s0))
                    elif pattern == CONTIGUOUS:
                        for j in range(n1):
                            aj = ak + j * s1
                            bj = bk + j * d1
                            for i in range(n0):
                                _store(dst, bj + i, _load(src, aj + i))
                    elif pattern == FILL:
                        for j in range(n1):
                            bj = bk + j * d1
                            if d0 == 1:
                                for i in range(n0):
                                    _store(dst, bj + i, value)
                            else:
                                for i in range(n0):
                                    _store(dst, bj + i * d0, value)
                    else:
                        for j in range(n1):
                            aj = ak + j * s1
                            bj = bk + j * d1
                            for i in range(n0):
                                _store(dst, bj + i * d0, _load(src, aj + i * s0))

    return run


@lru_cache(maxsize=None)
def kernel(pattern: int, block: int = 0):
    """The kernel for a tile ``pattern`` (and ``block``, for GATHER / SCATTER).

    Its arguments: ``(src, src_start, dst, dst_start, outer, loop3, chunk,
    loop2, loop1, loop0, value, threads, lo, hi)``; ``outer`` is an ``(m, 3)`` int64 array of
    ``(count, src stride, dst stride)`` rows, the loops are such rows, strides
    in words. ``value`` is the fill value (FILL and GATHER_WINDOW; FILL ignores
    ``src``); ``lo, hi`` the window (the WINDOW patterns only).
    """
    return _make(pattern, block)
