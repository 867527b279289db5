"""The native engine: each call as one program of loop nests, planned, lowered and run by the compiled core.

The extension module ``datamove._native`` (``src/native/``, built by ``pip install``) takes the call (op,
parameters, both arrays' shapes, strides, item size and addresses), plans and lowers it in C++ (merged dims,
widest word, loop order, tile kind, a kernel per step) and runs the program over the arrays' memory with its
own thread pool and the GIL released. Every byte of the input that the output needs is read once and every
byte of the output written once, straight from ``data`` into ``out``: no temporary arrays, no JIT. Items of
any width move as words of 16, 8, 4, 2 or 1 bytes, so every dtype is copied bit for bit; object arrays, whose
items are references, and the rare calls the core's planner refuses (:func:`program_of`) go to the NumPy
engine.

Outputs of :data:`STREAM_BYTES` or more are written with non-temporal stores (where the CPU has them), as
``memcpy`` does past the last-level cache; from :data:`REGISTER_STREAM_BYTES`, so are the programs whose every
step streams straight from registers.

>>> import numpy as np
>>> from datamove.engines.call import Call
>>> call = Call("space_to_depth", {"mode": "blocks_first", "block_size": 2}, (1, 2, 4), (1, 4, 2))
>>> run(call, np.arange(8, dtype=np.float32).reshape(1, 2, 4), None)[0].tolist()
[[0.0, 2.0], [4.0, 6.0], [1.0, 3.0], [5.0, 7.0]]
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

import numpy as np

from . import threads
from ...arrays.outputs import allocate, unaliased
from ...arrays.caches import BoundedCache
from ...plans.views import check_shapes
from . import core_format
from .. import numpy_engine

if TYPE_CHECKING:
    from ..call import Call

__all__ = ["run", "can_take", "core", "available", "warn_missing", "STREAM_BYTES", "program_of", "first_call", "kernels",
           "Planned"]


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

def can_take(array: object) -> bool:
    return isinstance(array, np.ndarray) and not array.dtype.hasobject


def streamed(out: np.ndarray) -> int:
    """How the core writes ``out``: 2 around the cache where the CPU can (from :data:`STREAM_BYTES`), 1 the
    same where every step streams straight from registers (from :data:`REGISTER_STREAM_BYTES`), 0 plainly."""
    if STREAM_BYTES is None:
        core()
    size = out.nbytes
    return 2 if size >= (STREAM_BYTES or 0) else int(size >= REGISTER_STREAM_BYTES)


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


#: Whether the core plans calls. False: it plans none, and every call runs on the NumPy engine, unless
#: :func:`program_of` is replaced (the tests put their Python twin of the core's planner there, tests/lowering,
#: to reach steps the core would not choose). The core reads it too, for its first and repeated calls.
CORE_PLANS = True


def program_of(call: "Call", data: np.ndarray, out: np.ndarray, stream: Optional[int] = None) -> Optional[bytes]:
    """The program of a validated ``call`` on these arrays, planned and lowered by the core in microseconds
    (``src/native/plan.hpp``); None where its planner takes none (a plan of over 65,536 views, a rank over 16, a
    layout whose lowering would overflow): the NumPy engine then runs the call. ``stream``: :func:`streamed`."""
    native = _native or core()
    if stream is None:
        stream = streamed(out)
    found: Optional[bytes] = native.program(*_core_args(call), data, out, stream) if CORE_PLANS else None
    return found


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
    mode of the table of units that takes the step's whole units first; none where the core plans none (the
    NumPy engine runs such calls). The map of the kernels, and the
    cases that justify each: ``src/native/runtime.hpp`` and docs/design.rst.

    >>> from datamove.engines.call import Call
    >>> nhwc = lambda shape: np.zeros(shape, np.float32).transpose(0, 3, 1, 2)  # channels innermost
    >>> call = Call("depth_to_space", {"mode": "blocks_first", "block_size": 2}, (1, 64, 4, 4), (1, 16, 8, 8))
    >>> kernels(call, nhwc((1, 4, 4, 64)), nhwc((1, 8, 8, 16)))  # rows of 16 channels, 64 bytes each
    [('contiguous', 'contiguous_runs', 'tiles', None)]
    """
    native = core()
    stream = streamed(out)
    program = program_of(call, data, out, stream)
    if program is None:  # (the NumPy engine's: no kernel of the core's)
        return []
    chosen: List[Tuple[str, str, str, Optional[int]]] = native.kernels(program, native.lowest(out), RUN_MODES[stream])
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
            found = self._made(data, out, stream)
            if found is None:
                return self._unplanned(data, out)
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
            made = self._made(data, out, stream)
            if made is None:
                return self._unplanned(data, out)
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

    def _made(self, data: np.ndarray, out: np.ndarray, stream: int) -> Optional[bytes]:
        """The program for a new key; None for an empty output, or where the core plans none."""
        check_shapes(self.call.in_shape, self.call.out_shape, data, out)
        if out.size == 0:
            return None
        self.reach = _extent(data)
        return program_of(self.call, data, out, stream)

    def _unplanned(self, data: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The call on the NumPy engine, where :meth:`_made` made no program (asked again at each such call:
        the core refuses at once, from its count of the plan's views)."""
        if out.size:
            numpy_engine.execute(self.call.plan, unaliased(data, out), out)
        return out


def _extent(array: np.ndarray) -> int:
    """The bytes ``array`` spans from its lowest address to the end of its highest item (0 when empty)."""
    if array.size == 0:
        return 0
    return int(array.itemsize + sum((n - 1) * abs(s) for n, s in zip(array.shape, array.strides)))


def run(call: Call, data: np.ndarray, out: Any) -> np.ndarray:
    """The engine protocol (:mod:`datamove.engines`): ``call`` on ``data`` into ``out``, or a new array,
    planned by the core (:func:`program_of`); references, and calls the core plans none of, on NumPy."""
    result: np.ndarray = allocate(call.out_shape, data.dtype) if out is None else out
    check_shapes(call.in_shape, call.out_shape, data, result)
    if result.size == 0:
        return result
    if not data.dtype.hasobject and data.dtype.itemsize:
        native = _native or core()
        stream = streamed(result)
        program = program_of(call, data, result, stream)
        if program is not None:
            # (the program as streamed outputs have it; the core stores its L1-staged steps plainly where they
            # pay no better streamed: RUN_MODES)
            native.run(program, data, result, threads.get_num_threads(), RUN_MODES[stream])
            return result
    numpy_engine.execute(call.plan, data, result)
    return result
