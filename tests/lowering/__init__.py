"""The tests' twin of the compiled core's planner: a plan lowered to the core's program in Python.

The core plans and lowers every call itself (``src/native/planner/``); this is the same lowering, line for
line, that it was ported from. The tests hold the core's programs to it bit for bit (tests/test_planner*.py),
and run hand-made plans through it (:func:`execute`, :func:`program`) to reach steps and kernels the core's
planner would not choose for a call. :func:`python_plans` makes datamove's own calls take it.

>>> import numpy as np
>>> from datamove.plans import views as plans
>>> data = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
>>> plan = plans.space_to_depth(data.shape, (1, 4, 2), "blocks_first", 2)
>>> execute(plan, data, np.empty(plan.out_shape, data.dtype))[0].tolist()
[[0.0, 2.0], [4.0, 6.0], [1.0, 3.0], [5.0, 7.0]]
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from datamove.arrays.caches import BoundedCache
from datamove.engines import numpy_engine
from datamove.engines.native import core_format, engine as native_engine, threads
from datamove.plans.views import Plan, check_arrays

from .strided import _address, _lowest_offset, fan_out_first, lower, lower_fill, lower_window
from .units import lower_units

if TYPE_CHECKING:
    from datamove.engines.call import Call

__all__ = ["program", "program_of", "execute", "carries_tables", "python_plans"]

#: The steps' pattern ids by name, as the core exports them (:mod:`~datamove.engines.native.core_format`).
_PATTERNS: Dict[str, int] = core_format.PATTERNS



# A nest whose rows (the loops around its tile) are fewer than this has its tile cut (see _split), so that
# the threads (up to 16, each taking up to 4 pieces) can share it: its innermost loop into chunks of
# _CHUNK_WORDS, or of fewer words, none under _CHUNK_BYTES, where that leaves too few rows.
_MIN_ROWS = core_format.MIN_ROWS
_CHUNK_WORDS = core_format.CHUNK_WORDS
_CHUNK_BYTES = core_format.CHUNK_BYTES
# (Steps under this are left whole: the core gives a thread at least 256 KiB of a job.)
_SHARED_BYTES = core_format.SHARED_BYTES




def _step(pattern: str, word: int, block: int, lo: int, hi: int, src_start: int, dst_start: int,
          loops: Sequence[Sequence[int]]) -> List[int]:
    loops = [list(l) for l in loops]
    while len(loops) < 2:
        loops.insert(0, [1, 0, 0])
    return [_PATTERNS[pattern], word, block, lo, hi, src_start, dst_start, len(loops)] + [x for l in loops for x in l]


def _split(pattern: str, word: int, block: int, src_start: int, dst_start: int,
           loops: Sequence[Sequence[int]]) -> List[List[int]]:
    """The steps of a nest, its tile cut into smaller ones when the rows (the loops around it) are too few
    to share among the threads: its rows (l1) where a copy, fill or transpose's tile holds nearly all of
    the step (a block of 1), then its innermost loop into chunks."""
    loops = [list(l) for l in loops]
    lo = hi = 0
    if pattern in ("gather2", "scatter2"):  # the tile's rows from two block loops: j2 becomes (lo, hi)
        j2, j1, i = loops[-3:]
        side = 2 if pattern == "gather2" else 1  # the rows' side: gather writes B rows, scatter reads them
        pattern, lo, hi = pattern[:-1], j1[0], j2[side]
        loops = loops[:-3] + [[block, j1[1], j1[2]], i]
    while len(loops) < 2:  # (l1 and l0 always: a chunk loop goes around l1, not in its place)
        loops.insert(0, [1, 0, 0])
    rows = 1
    for l in loops[:-2]:
        rows *= l[0]
    (n1, s1, d1), (n0, s0, d0) = loops[-2:]
    nests = [(src_start, dst_start, loops, rows)]
    if rows < _MIN_ROWS and pattern in ("contiguous", "fill", "strided") and n1 > 1 and rows * n1 * n0 * word >= _SHARED_BYTES:
        # (Taken whole, SpaceToDepth with block 1, 512 MiB: one thread, 126 ms/GiB with two asked for;
        # memcpy 64.) A copy's or fill's tiles become single rows; a transpose's keep enough rows to make
        # the threads' shares, a multiple of 16 where it writes whole rows one after another, so that the
        # core's AVX-512 transposes still take whole lines (strided_fits).
        per = 1 if pattern != "strided" else max(1, n1 * rows // _MIN_ROWS)
        if pattern == "strided" and d1 == n0 and d0 == 1 and (n0 % 16 == 0 or 16 % n0 == 0):
            per = per + 15 & ~15
        if per < n1:
            whole, rest = divmod(n1, per)
            nests = [(src_start, dst_start, loops[:-2] + [[whole, per * s1, per * d1], [per, s1, d1], loops[-1]], rows * whole)]
            if rest:
                nests.append((src_start + whole * per * s1, dst_start + whole * per * d1, loops[:-2] + [[rest, s1, d1], loops[-1]], rows))
    steps = []
    for src, dst, nest, count in nests:
        # chunks of _CHUNK_WORDS, or fewer words (whole lines, from _CHUNK_BYTES) where that makes the rows
        # too few
        size = -(-n0 * count // _MIN_ROWS) + 63 & ~63
        size = min(_CHUNK_WORDS, max(size, _CHUNK_BYTES // word))
        if count >= _MIN_ROWS or n0 < 2 * size:
            steps.append(_step(pattern, word, block, lo, hi, src, dst, nest))
            continue
        chunks, rest = divmod(n0, size)
        chunk = [chunks, size * s0, size * d0]
        steps.append(_step(pattern, word, block, lo, hi, src, dst, nest[:-2] + [chunk] + nest[-2:-1] + [[size, s0, d0]]))
        if rest:
            steps.append(_step(pattern, word, block, lo, hi, src + chunks * chunk[1], dst + chunks * chunk[2], nest[:-1] + [[rest, s0, d0]]))
    return steps


def _windowed(plan: Plan, data: np.ndarray[Any, Any], out: np.ndarray[Any, Any],
              addresses: Tuple[int, int], streamed: int) -> Optional[List[List[int]]]:
    """The steps of ``plan.windows`` and ``plan.window_fills``, or None if a window cannot be lowered."""
    steps = []
    for window in plan.windows:
        nest = lower_window(data, out, window, addresses)
        if nest is None:
            return None
        loops: Sequence[Sequence[int]] = nest.loops
        if streamed == 2 and nest.pattern == "scatter_window":
            lo, hi = max(nest.lo, 0), min(nest.hi, loops[-1][0] * (nest.block or loops[-2][0]))  # a tile's positions
            loops = fan_out_first(loops, nest.word, addresses[1] + (nest.dst_start + lo) * nest.word, (hi - lo) * nest.word)
        steps.append(_step(nest.pattern, nest.word, nest.block, nest.lo, nest.hi, nest.src_start, nest.dst_start, loops))
    for view in plan.window_fills:
        fill = lower_fill(out, view, widest=16, address=addresses[1])
        steps += _split("fill", fill.word, 0, 0, fill.dst_start, fill.loops)
    return steps




def program(plan: Plan, data: np.ndarray, out: np.ndarray, addresses: Optional[Tuple[int, int]] = None,
            stream: Optional[int] = None) -> bytes:
    """``plan`` on these arrays as the compiled core's program (see ``src/native/common.hpp``).

    Kept per (plan, layouts, item size, alignments, streamed): a repeated call skips the lowering.
    ``addresses``: the arrays' lowest addresses, and ``stream``: :func:`streamed`, when the caller has
    them. Streamed, scatter tiles read in passes (:func:`lowering.strided.fan_out_first`).
    """
    if addresses is None:
        addresses = (_address(data), _address(out))
    if stream is None:
        stream = native_engine.streamed(out)
    key = (plan, data.shape, data.strides, out.strides, data.dtype.itemsize, addresses[0] % 64, addresses[1] % 64, stream)
    found = _PROGRAMS.get(key)
    if found is not None:
        return found
    steps: Optional[List[Any]] = None
    if plan.source:  # SpaceToBatch and BatchToSpace of small images: units from tables
        item = data.dtype.itemsize
        steps = lower_units(plan, data, out, (-_lowest_offset(data) // item, -_lowest_offset(out) // item))
    if steps is None and plan.windows:
        steps = _windowed(plan, data, out, addresses, stream)
    if steps is None:
        steps = []
        for src, dst in plan.copies:
            copy = lower(data, out, src, dst, widest=16, addresses=addresses)
            loops: Sequence[Sequence[int]] = copy.loops
            if stream == 2 and copy.pattern == "scatter":
                loops = fan_out_first(loops, copy.word, addresses[1] + copy.dst_start * copy.word, loops[-1][0] * copy.block * copy.word)
            steps += _split(copy.pattern, copy.word, copy.block, copy.src_start, copy.dst_start, loops)
        for view in plan.fills:
            fill = lower_fill(out, view, widest=16, address=addresses[1])
            steps += _split("fill", fill.word, 0, 0, fill.dst_start, fill.loops)
    found = np.concatenate([np.array([len(steps)], np.int64)] + [np.asarray(s, np.int64) for s in steps]).tobytes()
    return _PROGRAMS.put(key, found)




def carries_tables(found: bytes) -> bool:
    """Whether a program is a UNITS step given with its tables (:func:`lowering.units.lower_units`):
    the core checks and makes them again at every run, a cost in proportion to the tables."""
    return len(found) >= 16 and int.from_bytes(found[8:16], sys.byteorder, signed=True) == _PATTERNS["units"]




def execute(plan: Plan, data: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write ``plan`` applied to ``data`` into ``out`` (shape ``plan.out_shape``, dtype of data), lowered by
    the Python side (:func:`program`), and run by the core.

    A plan made for other shapes or item sizes is refused (a DataMoveError), and the core refuses any
    program reaching outside either array's memory (a ValueError): neither is ever run past an array.
    """
    check_arrays(plan, data, out)
    if data.dtype.hasobject or data.dtype.itemsize == 0:
        return numpy_engine.execute(plan, data, out)
    if out.size:
        native = native_engine.core()
        stream = native_engine.streamed(out)
        native.run(program(plan, data, out, None, stream), data, out, threads.get_num_threads(), native_engine.RUN_MODES[stream])
    return out




_MAX_PROGRAMS = 256
#: Bytes the kept programs may hold together: a program carrying units' tables is up to 2 MiB.
_MAX_PROGRAM_BYTES = 64 << 20
_PROGRAMS: "BoundedCache[bytes]" = BoundedCache(_MAX_PROGRAMS, _MAX_PROGRAM_BYTES)


def program_of(call: "Call", data: np.ndarray, out: np.ndarray, stream: Optional[int] = None) -> bytes:
    """:func:`datamove.engines.native.engine.program_of`'s twin: the call's plan lowered here."""
    return program(call.plan, data, out, None, native_engine.streamed(out) if stream is None else stream)


def python_plans(monkeypatch: Any) -> None:
    """datamove's calls planned here, not by the core (``monkeypatch``: pytest's): the core's planner off
    (``CORE_PLANS``: its first and repeated calls plan none) and :func:`program_of` in its place."""
    monkeypatch.setattr(native_engine, "CORE_PLANS", False)
    monkeypatch.setattr(native_engine, "program_of", program_of)

