"""The Numba engine: each view pair of a plan as one compiled, all-core loop nest.

Every byte of the input that the output needs is read once and every byte of
the output written once, straight from ``data`` into ``out``: no temporary
arrays. SpaceToBatch writes zeros only into its padding. Items of any width
move as words of 8, 4, 2 or 1 bytes (see :mod:`datamove.engines.strided`),
so every dtype is copied bit for bit; object arrays, whose items are
references, go to the NumPy engine.

The number of threads is Numba's: ``NUMBA_NUM_THREADS`` or
``numba.set_num_threads``.

>>> import numpy as np
>>> from datamove import plans
>>> data = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
>>> plan = plans.space_to_depth(data.shape, (1, 4, 2), "blocks_first", 2)
>>> execute(plan, data, np.empty(plan.out_shape, data.dtype))[0].tolist()
[[0.0, 2.0], [4.0, 6.0], [1.0, 3.0], [5.0, 7.0]]
"""

from __future__ import annotations

import numpy as np

from ..plans import Plan
from . import numpy_engine
from .strided import LoopNest, lower, lower_fill, word_view

__all__ = ["execute", "can_take"]

# Words of work per task (a task is a chunk of loop 2 for one outer row), and
# tasks per thread wanted, so threads share the work evenly.
_TASK_WORDS = 1 << 14
_TASKS_PER_THREAD = 8


def can_take(array: object) -> bool:
    return isinstance(array, np.ndarray) and not array.dtype.hasobject


def _calls(nest: LoopNest, threads: int):
    """Yield the kernel arguments ``(outer, loop2, chunk, loop1, loop0, src shift, dst shift)``.

    The innermost three loops are written out in the kernels; the rest are
    ``outer`` rows. A lone long innermost loop is cut into chunks so the
    threads can share it (the remainder is a second call).
    """
    loops = [list(l) for l in nest.loops]
    while len(loops) < 3:
        loops.insert(0, [1, 0, 0])
    n0, s0, d0 = loops[-1]
    if _count(loops[:-1]) < _TASKS_PER_THREAD * threads and n0 >= 2 * _TASK_WORDS and nest.pattern in ("contiguous", "strided", "fill"):
        chunks, rest = divmod(n0, _TASK_WORDS)
        head = loops[:-1] + [[chunks, _TASK_WORDS * s0, _TASK_WORDS * d0], [_TASK_WORDS, s0, d0]]
        yield from _calls(nest._replace(loops=tuple(map(tuple, head))), threads)
        if rest:
            tail = loops[:-1] + [[rest, s0, d0]]
            for call in _calls(nest._replace(loops=tuple(map(tuple, tail))), threads):
                yield call[:-2] + (call[-2] + chunks * _TASK_WORDS * s0, call[-1] + chunks * _TASK_WORDS * d0)
        return
    outer, loop2, loop1, loop0 = loops[:-3], loops[-3], loops[-2], loops[-1]
    rows = _count(outer)
    chunk = max(1, min(loop2[0], _TASK_WORDS // max(1, loop1[0] * loop0[0])))
    while chunk > 1 and rows * -(-loop2[0] // chunk) < _TASKS_PER_THREAD * threads:
        chunk = (chunk + 1) // 2
    yield (
        np.array(outer, dtype=np.int64).reshape(-1, 3),
        np.array(loop2, dtype=np.int64),
        chunk,
        np.array(loop1, dtype=np.int64),
        np.array(loop0, dtype=np.int64),
        0,
        0,
    )


def _count(loops) -> int:
    total = 1
    for loop in loops:
        total *= loop[0]
    return total


_PATTERNS = {"contiguous": 0, "gather": 1, "scatter": 2, "strided": 3}


def execute(plan: Plan, data: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write ``plan`` applied to ``data`` into ``out`` (shape ``plan.out_shape``, dtype of data)."""
    if data.dtype.hasobject or data.dtype.itemsize == 0:
        return numpy_engine.execute(plan, data, out)
    from . import numba_kernels as kernels

    threads = kernels.numba.get_num_threads()
    for src, dst in plan.copies:
        nest = lower(data, out, src, dst)
        source, target = word_view(data, nest.word), word_view(out, nest.word)
        run = kernels.kernel(_PATTERNS[nest.pattern], nest.block)
        for outer, loop2, chunk, loop1, loop0, a, b in _calls(nest, threads):
            run(source, nest.src_start + a, target, nest.dst_start + b, outer, loop2, chunk, loop1, loop0, target.dtype.type(0), threads)
    for view in plan.fills:
        nest = lower_fill(out, view)
        target = word_view(out, nest.word)
        run = kernels.kernel(kernels.FILL)
        for outer, loop2, chunk, loop1, loop0, _, b in _calls(nest, threads):
            run(target, 0, target, nest.dst_start + b, outer, loop2, chunk, loop1, loop0, target.dtype.type(0), threads)
    return out
