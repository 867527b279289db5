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
from .strided import LoopNest, _address, lower, lower_fill, lower_window, word_view

__all__ = ["execute", "can_take"]

# Words of work per task (a task is a chunk of loop 2 for one outer row), and
# tasks per thread wanted, so threads share the work evenly.
_TASK_WORDS = 1 << 14
_TASKS_PER_THREAD = 8


def can_take(array: object) -> bool:
    return isinstance(array, np.ndarray) and not array.dtype.hasobject


def _calls(nest: LoopNest, threads: int):
    """Yield the kernel arguments ``(outer, loop3, chunk, loop2, loop1, loop0, src shift, dst shift)``.

    The innermost four loops are written out in the kernels; the rest are
    ``outer`` rows. A lone long innermost loop is cut into chunks so the
    threads can share it (the remainder is a second call).
    """
    loops = [list(l) for l in nest.loops]
    while len(loops) < 4:
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
    outer, loop3, loop2, loop1, loop0 = loops[:-4], loops[-4], loops[-3], loops[-2], loops[-1]
    rows = _count(outer)
    chunk = max(1, min(loop3[0], _TASK_WORDS // max(1, loop2[0] * loop1[0] * loop0[0])))
    while chunk > 1 and rows * -(-loop3[0] // chunk) < _TASKS_PER_THREAD * threads:
        chunk = (chunk + 1) // 2
    yield (
        np.array(outer, dtype=np.int64).reshape(-1, 3),
        np.array(loop3, dtype=np.int64),
        chunk,
        np.array(loop2, dtype=np.int64),
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


_PATTERNS = {"contiguous": 0, "gather": 1, "scatter": 2, "strided": 3, "gather_window": 5, "scatter_window": 6}


def _program(plan: Plan, data: np.ndarray, out: np.ndarray, threads: int):
    """The kernel calls of ``plan`` on these arrays: ``[(word, pattern, block, is_fill, calls)]``.

    Kept per (plan, layouts, item size, alignments, threads), so a repeated
    call skips the lowering.
    """
    key = (plan, data.shape, data.strides, out.strides, data.dtype.itemsize, _address(data) % 8, _address(out) % 8, threads)
    program = _PROGRAMS.get(key)
    if program is None:
        program = _windowed(plan, data, out, threads) if plan.windows else None
    if program is None:
        program = []
        for src, dst in plan.copies:
            nest = lower(data, out, src, dst)
            calls = [call[:-2] + (nest.src_start + call[-2], nest.dst_start + call[-1]) for call in _calls(nest, threads)]
            program.append((nest.word, _PATTERNS[nest.pattern], nest.block, False, calls, 0, 0))
        for view in plan.fills:
            nest = lower_fill(out, view)
            calls = [call[:-2] + (0, nest.dst_start + call[-1]) for call in _calls(nest, threads)]
            program.append((nest.word, _FILL, 0, True, calls, 0, 0))
    if key not in _PROGRAMS:
        _PROGRAMS[key] = program
        if len(_PROGRAMS) > 256:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
    return program


def _windowed(plan: Plan, data: np.ndarray, out: np.ndarray, threads: int):
    """The program of ``plan.windows`` and ``plan.window_fills``, or None if a window cannot be lowered."""
    program = []
    for window in plan.windows:
        nest = lower_window(data, out, window)
        if nest is None:
            return None
        calls = [call[:-2] + (nest.src_start + call[-2], nest.dst_start + call[-1])
                 for call in _calls(LoopNest(nest.word, 0, 0, nest.loops, "window", nest.block), threads)]
        program.append((nest.word, _PATTERNS[nest.pattern], nest.block, False, calls, nest.lo, nest.hi))
    for view in plan.window_fills:
        nest = lower_fill(out, view)
        calls = [call[:-2] + (0, nest.dst_start + call[-1]) for call in _calls(nest, threads)]
        program.append((nest.word, _FILL, 0, True, calls, 0, 0))
    return program


_PROGRAMS: dict = {}
_FILL = 4


def warm_up() -> None:
    """Import Numba and load a kernel from its cache (compiling it if the cache is cold).

    The first kernel loaded pays for Numba's own set-up; the others then load
    in milliseconds.
    """
    from . import numba_kernels as kernels

    words = np.zeros(8, np.uint8)
    loop = np.array([1, 1, 1], np.int64)
    kernels.kernel(kernels.CONTIGUOUS)(words, 0, words, 4, np.zeros((0, 3), np.int64), loop, 1, loop, loop,
                                       np.array([4, 1, 1], np.int64), np.uint8(0), 1, 0, 0)


def execute(plan: Plan, data: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write ``plan`` applied to ``data`` into ``out`` (shape ``plan.out_shape``, dtype of data)."""
    if data.dtype.hasobject or data.dtype.itemsize == 0:
        return numpy_engine.execute(plan, data, out)
    from . import numba_kernels as kernels

    threads = kernels.numba.get_num_threads()
    for word, pattern, block, is_fill, calls, lo, hi in _program(plan, data, out, threads):
        target = word_view(out, word)
        source = target if is_fill else word_view(data, word)
        run = kernels.kernel(pattern, block)
        zero = target.dtype.type(0)
        for outer, loop3, chunk, loop2, loop1, loop0, a, b in calls:
            run(source, a, target, b, outer, loop3, chunk, loop2, loop1, loop0, zero, threads, lo, hi)
    return out
