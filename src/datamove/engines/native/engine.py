"""The native engine: each plan as one program of loop nests, run by the compiled core.

Python plans and lowers (:mod:`datamove.engines.native.strided`: merged dims,
widest word, loop order, tile kind); the extension module
``datamove._native`` (``src/native/``, built by ``pip install``)
runs the result over the arrays' memory with its own thread pool and the GIL
released. Every byte of the input that the output needs is read once and
every byte of the output written once, straight from ``data`` into ``out``:
no temporary arrays, no JIT. Items of any width move as words of 16, 8, 4, 2
or 1 bytes, so every dtype is copied bit for bit; object arrays, whose items
are references, go to the NumPy engine.

Outputs of :data:`STREAM_BYTES` or more are written with non-temporal stores
(where the CPU has them), as ``memcpy`` does past the last-level cache; their
scatter tiles of long rows read one block row at a time
(:func:`~datamove.engines.native.strided.fan_out_first`). From
:data:`REGISTER_STREAM_BYTES`, so are the programs whose every step streams
straight from registers.

>>> import numpy as np
>>> from datamove.plans import views as plans
>>> data = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
>>> plan = plans.space_to_depth(data.shape, (1, 4, 2), "blocks_first", 2)
>>> execute(plan, data, np.empty(plan.out_shape, data.dtype))[0].tolist()
[[0.0, 2.0], [4.0, 6.0], [1.0, 3.0], [5.0, 7.0]]
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import threads
from ...arrays.outputs import allocate, unaliased
from ...arrays.caches import BoundedCache
from ...plans.views import Plan, check_arrays, check_shapes
from . import core_format
from .. import numpy_engine

if TYPE_CHECKING:
    from ..call import Call

__all__ = ["run", "execute", "can_take", "core", "available", "warn_missing", "STREAM_BYTES", "program", "program_of",
           "first_call", "kernels", "Planned", "carries_tables"]


_native: Optional[ModuleType] = None
#: Why the core did not load (the ImportError's message), once a load has failed; None before, or if it loaded.
missing: Optional[str] = None
_warned = False


def core() -> ModuleType:
    """The extension module, loaded on the first call that needs it; a clear ImportError when it is missing.

    A failed load is tried once per process: later calls raise the same error at once.
    """
    global _native, STREAM_BYTES, RUN_MODES, missing
    if _native is not None:
        return _native
    if missing is None:
        try:
            from ... import _native as module
        except ImportError as exc:
            missing = str(exc) or type(exc).__name__
        else:
            if not core_format.PATTERNS:  # a core built from older sources than this Python side
                missing = "it predates this version's program format, exporting no PATTERNS"
            else:
                if STREAM_BYTES is None:
                    STREAM_BYTES = module.cache_bytes() or 1 << 25  # read in C++: sysfs from Python cost 0.5 ms of a first call
                RUN_MODES = (0, 1, 2) if getattr(module, "STAGED_STREAMS", True) else (0, 1, 1)
                setup_repeats(module)
                _native = module
                return module
    raise ImportError(
        f"datamove's compiled core (datamove._native) is missing or does not load ({missing}); engine='native' "
        "needs it (engine='auto' runs without it, on NumPy). Install a wheel of datamove built for this platform, "
        "or reinstall from source on a machine with a C++17 compiler and Python's headers: "
        "'DATAMOVE_BUILD_CORE=required pip install --force-reinstall --no-deps .' in the source tree "
        "('python -m datamove info' says whether it loaded)"
    )


def setup_repeats(module: ModuleType) -> None:
    """Tell a core (this one, or a test's build) where a repeated call's settings are, and how to read and
    make NumPy's arrays: probes of each kind it reads, np.empty, and NumPy's C API capsule, whose allocator
    makes a new result without np.empty's argument parsing (``src/native/runtime/repeat.cpp``)."""
    if not hasattr(module, "repeat_setup"):
        return
    strided = np.empty((3, 4, 5), np.int16)[::2, ::-1, 1:]
    readonly = np.arange(6.0).reshape(2, 3)
    readonly.flags.writeable = False
    probes = (np.empty((2, 3), np.float32), strided, readonly, np.empty((), np.uint8))
    module.repeat_setup(np.ndarray, threads.__dict__, globals(), probes, np.empty, _array_api())


def _array_api() -> Any:
    """NumPy's C API capsule (``_ARRAY_API``: what its headers' ``import_array`` reads), or None."""
    for name in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # NumPy 2, then 1
        try:
            return getattr(importlib.import_module(name), "_ARRAY_API", None)
        except ImportError:
            continue
    return None


def repeated_calls() -> Optional[Callable[..., Any]]:
    """The core's ``repeated(op, data, a, b, c, out, engine)`` (``src/native/runtime/repeat.cpp``): a call whose
    kept recipe has run on the core (:class:`Planned`, its ``repeats``) run again in one C call, its result
    returned; None, nothing written, for any other. None where the core does not load."""
    try:
        return core().repeated  # type: ignore[no-any-return]
    except (ImportError, AttributeError):
        return None


def handles() -> Tuple[Optional[Callable[..., Any]], Optional[Callable[..., Any]]]:
    """The core's ``handle(op, data, a, b, c, engine)`` and ``at(handle, address)``: a call that
    :func:`repeated_calls` would run, for inputs given by address (a PyTorch CPU tensor's ``data_ptr()``, of
    the layout of the ndarray ``data`` the handle was made from) into a new ndarray. ``(None, None)`` where
    the core does not load."""
    try:
        return core().handle, core().at
    except (ImportError, AttributeError):
        return None, None


def forget_repeats() -> None:
    """The calls the core keeps for ``repeated`` forgotten (with the recipes they came from)."""
    if _native is not None and hasattr(_native, "forget"):
        _native.forget()


def available() -> bool:
    """Whether the compiled core loads (tried once per process; datamove's import tries it)."""
    try:
        core()
    except ImportError:
        return False
    return True


def warn_missing() -> None:
    """Warn, once per process, that a large call runs on NumPy because the core is missing."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"datamove's compiled core is not loaded ({missing}): large arrays run on the NumPy engine, "
                      "several times slower; 'python -m datamove info' says why and how to build it",
                      RuntimeWarning, stacklevel=_caller_outside())


def _caller_outside() -> int:
    """The ``stacklevel`` that names, from the function calling this, the first frame outside datamove
    (the user's line: the call paths into the engines differ in depth)."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # src/datamove
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level

#: The steps' pattern ids by name, as the core exports them (:mod:`~datamove.engines.native.core_format`).
_PATTERNS: Dict[str, int] = core_format.PATTERNS

#: Output size from which stores go around the cache: the size of the
#: last-level cache this CPU shares (sysfs; else ``sysconf``; else 32 MiB).
#: Measured on the 2-core machine (32 MiB L3): S2D with ``out=`` at 32 MiB is
#: 0.82x the copy floor with plain stores, 0.67x streamed; at 8 MiB 0.80x
#: plain but 2.1x streamed (the output would have stayed in cache).
STREAM_BYTES: Optional[int] = None  # set when the core loads

#: The core's stream mode for each of :func:`streamed`'s (the program is lowered for the latter): outputs of
#: :data:`STREAM_BYTES` or more run with their L1-staged steps streamed too (the core's stream=2) where the
#: core's ``STAGED_STREAMS`` says that pays (its level has AVX-512's whole-line kernels), else as from
#: :data:`REGISTER_STREAM_BYTES` (stream=1: without them, staged streaming cost more than plain stores).
RUN_MODES = (0, 1, 2)

#: Output size from which, below :data:`STREAM_BYTES`, the programs whose steps stream straight from
#: registers (copies, fills, scatters of 4-, 8- and 16-byte words in blocks of 2 or 4, and, where the
#: CPU has AVX-512, gathers and SpaceToBatch's windows a whole line at a time; scatters staging rows of
#: 240 bytes and more, and windows of 32-byte pixels and more staging rows of 4 KiB, count as these; other
#: steps, at most an eighth of the output, stored plainly or streamed as they can) are streamed too. A
#: last-level cache larger than this is shared with cores other programs (or, in a virtual machine,
#: other machines) hold: on a 2-core Intel Xeon VM with a 300 MiB L3, 64 and 128 MiB cases took
#: 0.69-1.11x the copy floor streamed this way against 0.91-1.63x plain (same process, in turns), while
#: steps staged through an L1 buffer read 1.19-1.61x streamed against 1.08-1.49x plain, and stay plain.
REGISTER_STREAM_BYTES = 32 << 20

# A nest whose rows (the loops around its tile) are fewer than this has its tile cut (see _split), so that
# the threads (up to 16, each taking up to 4 pieces) can share it: its innermost loop into chunks of
# _CHUNK_WORDS, or of fewer words, none under _CHUNK_BYTES, where that leaves too few rows.
_MIN_ROWS = core_format.MIN_ROWS
_CHUNK_WORDS = core_format.CHUNK_WORDS
_CHUNK_BYTES = core_format.CHUNK_BYTES
# (Steps under this are left whole: the core gives a thread at least 256 KiB of a job.)
_SHARED_BYTES = core_format.SHARED_BYTES


def can_take(array: object) -> bool:
    return isinstance(array, np.ndarray) and not array.dtype.hasobject


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
    from .strided import fan_out_first, lower_fill, lower_window

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


def streamed(out: np.ndarray) -> int:
    """How the core writes ``out``: 2 around the cache where the CPU can (from :data:`STREAM_BYTES`), 1 the
    same where every step streams straight from registers (from :data:`REGISTER_STREAM_BYTES`), 0 plainly."""
    if STREAM_BYTES is None:
        core()
    size = out.nbytes
    return 2 if size >= (STREAM_BYTES or 0) else int(size >= REGISTER_STREAM_BYTES)


def program(plan: Plan, data: np.ndarray, out: np.ndarray, addresses: Optional[Tuple[int, int]] = None,
            stream: Optional[int] = None) -> bytes:
    """``plan`` on these arrays as the compiled core's program (see ``src/native/common.hpp``).

    Kept per (plan, layouts, item size, alignments, streamed): a repeated call skips the lowering.
    ``addresses``: the arrays' lowest addresses, and ``stream``: :func:`streamed`, when the caller has
    them. Streamed, scatter tiles read in passes (:func:`~datamove.engines.native.strided.fan_out_first`).
    """
    if addresses is None:
        from .strided import _address

        addresses = (_address(data), _address(out))
    if stream is None:
        stream = streamed(out)
    key = (plan, data.shape, data.strides, out.strides, data.dtype.itemsize, addresses[0] % 64, addresses[1] % 64, stream)
    found = _PROGRAMS.get(key)
    if found is not None:
        return found
    # (the Python lowering, imported when a program is first made: 0.5 ms of `import datamove` otherwise)
    from .strided import _lowest_offset, fan_out_first, lower, lower_fill
    from .units import lower_units

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


#: The planner's op ids and modes, as the core exports them (``src/native/plan.hpp``).
_OPS = core_format.OPS
_MODES = core_format.MODES


def _core_args(call: "Call") -> Tuple[Any, ...]:
    """A call's op and parameters as the core's ``program`` and ``call`` take them."""
    params = call.params
    mode = params.get("mode")
    if mode is not None:
        return (_OPS[call.op], (), (), (), _MODES[mode], params["block_size"])
    begin, end = ("crops_begin", "crops_end") if call.op == "batch_to_space" else ("pads_begin", "pads_end")
    return (_OPS[call.op], params["block_shape"], params[begin], params[end], 0, 1)  # (no mode: 0, block 1)


#: Whether calls are planned by the core (False: by :func:`program`, the Python side's lowering, which the
#: tests hold the core's to bit for bit, and set to reach steps the core would choose otherwise).
CORE_PLANS = True


def program_of(call: "Call", data: np.ndarray, out: np.ndarray, addresses: Optional[Tuple[int, int]] = None,
               stream: Optional[int] = None) -> bytes:
    """The program of a validated ``call`` on these arrays: planned and lowered by the core, in microseconds
    (``src/native/plan.hpp``), or, where its planner takes none, by :func:`program` from the call's plan.
    ``addresses`` and ``stream`` as :func:`program` takes them."""
    native = _native or core()
    if stream is None:
        stream = streamed(out)
    found: Optional[bytes] = native.program(*_core_args(call), data, out, stream) if CORE_PLANS else None
    return program(call.plan, data, out, addresses, stream) if found is None else found


def first_call(call: "Call", data: np.ndarray, out: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """A validated call of a shape not seen before, planned, lowered and run by the core in one call
    (``_native.call``), into ``out`` (checked by the caller) or a new array; None, with nothing written,
    where the core is not loaded, its planner takes none, or the items are references.

    No recipe, no Python plan and no program kept: a workload whose shapes vary pays this on every call."""
    if _native is None:  # (nor its op ids)
        return None
    return first_run(_core_args(call), call.out_shape, data, out)


def kernels(call: "Call", data: np.ndarray, out: np.ndarray) -> List[Tuple[str, str, str, Optional[int]]]:
    """Which of the core's kernels move a validated ``call`` from ``data`` into ``out``, as the core chooses
    them once for each step of the call's program: ``(pattern, kernel, then, table)`` a step. ``kernel``
    takes the step's runs of tiles; a run it cannot take (cut short by a thread's range, or its output off the
    alignment the kernel stores at) goes to ``then``, else tile by tile; ``table``, where not None, is the
    mode of the table of units that takes the step's whole units first. The map of the kernels, and the
    cases that justify each: ``src/native/runtime.hpp`` and docs/design.rst.

    >>> from datamove.engines.call import Call
    >>> nhwc = lambda shape: np.zeros(shape, np.float32).transpose(0, 3, 1, 2)  # channels innermost
    >>> call = Call("depth_to_space", {"mode": "blocks_first", "block_size": 2}, (1, 64, 4, 4), (1, 16, 8, 8))
    >>> kernels(call, nhwc((1, 4, 4, 64)), nhwc((1, 8, 8, 16)))  # rows of 16 channels, 64 bytes each
    [('contiguous', 'contiguous_runs', 'tiles', None)]
    """
    native = core()
    stream = streamed(out)
    chosen: List[Tuple[str, str, str, Optional[int]]] = native.kernels(program_of(call, data, out, stream=stream),
                                                                      native.lowest(out), RUN_MODES[stream])
    return chosen


def first_run(args: Tuple[Any, ...], out_shape: Tuple[int, ...], data: np.ndarray, out: Optional[np.ndarray],
              new: Callable[[Tuple[int, ...], Any], np.ndarray] = allocate) -> Optional[np.ndarray]:
    """What :func:`first_call` does, from the core's arguments for the call (:func:`_core_args`); ``new``
    allocates the result where ``out`` is None."""
    native = _native
    dtype = data.dtype
    if native is None or not CORE_PLANS or dtype.hasobject or not dtype.itemsize:
        return None
    if out is None:
        out = new(out_shape, dtype)
    else:
        data = unaliased(data, out)
    size = out.nbytes
    if size == 0:
        return out
    stream = 2 if size >= (STREAM_BYTES or 0) else int(size >= REGISTER_STREAM_BYTES)  # streamed(out)'s
    if native.call(*args, data, out, threads.get_num_threads(), stream, RUN_MODES[stream]):
        return out
    return None


_MAX_PROGRAMS = 256
#: Bytes the kept programs may hold together: a program carrying units' tables is up to 2 MiB.
_MAX_PROGRAM_BYTES = 64 << 20
_PROGRAMS: "BoundedCache[bytes]" = BoundedCache(_MAX_PROGRAMS, _MAX_PROGRAM_BYTES)


class Planned:
    """One plan on inputs of one layout (shape, strides, dtype: a recipe's key), run by the core with its
    programs kept here, so that a repeated call costs the core's run and no lowering or key of the plan.

    ``planned(data, out)`` writes into ``out`` (checked by the caller: the plan's output shape and data's
    dtype) and returns it, ``data`` copied first where it may share memory with ``out`` (as
    :func:`~datamove.arrays.outputs.unaliased` decides; asked only where their bounds overlap, which is
    ``np.may_share_memory``'s own test, from the addresses and extents the call has anyway);
    ``planned.fresh(data, out)`` the same into a C-contiguous ``out`` the caller has just allocated. A program depends on more than the layout: the arrays' alignments (the widest word,
    the lines streamed), ``out``'s strides (``out=`` may be any view), and whether the output is streamed
    (its size against :data:`STREAM_BYTES`, read at each call): those are its key here. The thread count is
    read at each call too (``datamove.set_num_threads``); no program depends on it.

    >>> from datamove.engines.call import Call
    >>> data = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    >>> planned = Planned(Call("space_to_depth", {"mode": "blocks_first", "block_size": 2}, (1, 2, 4), (1, 4, 2)))
    >>> planned(data, np.empty((1, 4, 2), np.float32))[0].tolist()
    [[0.0, 2.0], [4.0, 6.0], [1.0, 3.0], [5.0, 7.0]]
    """

    __slots__ = ("call", "programs", "reach", "repeats")

    #: Programs one plan keeps (alignments of both arrays, out's layouts), newest kept.
    MAX_PROGRAMS = 32

    def __init__(self, call: "Call", repeats: Optional[Tuple[Any, ...]] = None) -> None:
        self.call = call
        self.programs: "BoundedCache[Any]" = BoundedCache(self.MAX_PROGRAMS)
        self.reach = 0  # the bytes data spans from its lowest address (its layout's: the same for every call)
        # (op, a, b, c, engine, allocate) of a kept recipe's call, as datamove.ops passes it to the core's
        # repeated(): each program run here is handed to the core for the call's repeats (repeat.cpp)
        self.repeats = repeats

    def fresh(self, data: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Into ``out``, a C-contiguous array of the plan's output shape: its strides need no key."""
        native = _native or core()
        src, dst, size = native.lowest(data), native.lowest(out), out.nbytes
        stream = 2 if size >= (STREAM_BYTES or 0) else int(size >= REGISTER_STREAM_BYTES)  # streamed(out)'s
        key = (src & 63) << 8 | (dst & 63) << 2 | stream  # (an int: the cheapest key to hash)
        found = self.programs.get(key)
        if found is None:
            found = self._made(key, data, out, src, dst, stream)
            if found is None:
                return out
            found = self.programs.put(key, found)
        native.run(found, data, out, threads.get_num_threads(), RUN_MODES[stream])
        self._remember(native, data, out, found, stream)
        return out

    def __call__(self, data: np.ndarray, out: np.ndarray) -> np.ndarray:
        native = _native or core()
        src, dst, size = native.lowest(data), native.lowest(out), out.nbytes
        stream = 2 if size >= (STREAM_BYTES or 0) else int(size >= REGISTER_STREAM_BYTES)
        key = ((src & 63) << 8 | (dst & 63) << 2 | stream, out.strides)
        found = self.programs.get(key)
        if found is None:
            made = self._made(key, data, out, src, dst, stream)
            if made is None:
                return out
            found = self.programs.put(key, (made, _extent(out)))  # out's extent: its layout's, as the key
        made, reach = found
        if src < dst + reach and dst < src + self.reach:
            copy = unaliased(data, out)
            if copy is not data:  # a copy of another layout than the one planned: the general path
                return run(self.call, copy, out)
        native.run(made, data, out, threads.get_num_threads(), RUN_MODES[stream])
        self._remember(native, data, out, made, stream)
        return out

    def _remember(self, native: ModuleType, data: np.ndarray, out: np.ndarray, program: bytes, stream: int) -> None:
        """A kept recipe's program, just run: handed to the core for the call's repeats (``repeat.cpp``)."""
        if self.repeats is not None:
            op, a, b, c, engine, allocate = self.repeats
            native.remember(op, a, b, c, engine, data, out, program, stream, allocate)

    def _made(self, key: Any, data: np.ndarray, out: np.ndarray, src: int, dst: int, stream: int) -> Optional[bytes]:
        """The program for a new key (None for an empty output: nothing to run)."""
        check_shapes(self.call.in_shape, self.call.out_shape, data, out)
        if out.size == 0:
            return None
        self.reach = _extent(data)
        return program_of(self.call, data, out, (src, dst), stream)


def _extent(array: np.ndarray) -> int:
    """The bytes ``array`` spans from its lowest address to the end of its highest item (0 when empty)."""
    if array.size == 0:
        return 0
    return int(array.itemsize + sum((n - 1) * abs(s) for n, s in zip(array.shape, array.strides)))


def carries_tables(found: bytes) -> bool:
    """Whether a program is a UNITS step given with its tables (:func:`~datamove.engines.native.units.lower_units`):
    the core checks and makes them again at every run, a cost in proportion to the tables."""
    return len(found) >= 16 and int.from_bytes(found[8:16], sys.byteorder, signed=True) == _PATTERNS["units"]


def run(call: Call, data: np.ndarray, out: Any) -> np.ndarray:
    """The engine protocol (:mod:`datamove.engines`): ``call`` on ``data`` into ``out``, or a new array,
    planned by the core (:func:`program_of`)."""
    result: np.ndarray = allocate(call.out_shape, data.dtype) if out is None else out
    check_shapes(call.in_shape, call.out_shape, data, result)
    _execute(lambda: call.plan, lambda addresses, stream: program_of(call, data, result, addresses, stream), data, result)
    return result


def execute(plan: Plan, data: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write ``plan`` applied to ``data`` into ``out`` (shape ``plan.out_shape``, dtype of data), lowered by
    the Python side (:func:`program`).

    A plan made for other shapes or item sizes is refused (a DataMoveError), and the core refuses any
    program reaching outside either array's memory (a ValueError): neither is ever run past an array.
    """
    check_arrays(plan, data, out)
    _execute(lambda: plan, lambda addresses, stream: program(plan, data, out, addresses, stream), data, out)
    return out


def _execute(plan_of: Callable[[], Plan], program_for: Callable[[Tuple[int, int], int], bytes], data: np.ndarray,
             out: np.ndarray) -> None:
    """What :func:`run` and :func:`execute` do once they have checked the arrays: references on NumPy (the
    plan), any other items by the core (``program_for(addresses, stream)``)."""
    if data.dtype.hasobject or data.dtype.itemsize == 0:
        numpy_engine.execute(plan_of(), data, out)
        return
    if out.size == 0:
        return
    native = _native or core()
    addresses = (native.lowest(data), native.lowest(out))  # strided._address's, in a tenth of the time
    stream = streamed(out)
    # (the program as streamed outputs have it; the core stores its L1-staged steps plainly where they pay
    # no better streamed: RUN_MODES)
    native.run(program_for(addresses, stream), data, out, threads.get_num_threads(), RUN_MODES[stream])
