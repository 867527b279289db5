"""Recipes: what a repeated call with the same shapes needs, computed once.

A call is validated, planned and lowered the first time; the result is kept
as a :class:`Recipe`, keyed by the operation, its parameters (exact Python
ints and strings only, so ``True`` or ``2.0`` never reuse a recipe made for
``1`` or ``2``), and the input's type, shape, strides and dtype. The next call
with the same key skips everything but the copy: for a small array, an
``np.copyto`` between two views built straight on the arrays' buffers, with
the dims merged, which costs no more than NumPy's own
reshape/transpose/reshape idiom. (A NumPy call the compiled core takes is kept
by the core itself from its first run, a first call into a new array included, and
repeated there before any Python step: ``src/native/runtime/repeat.cpp``; such a
call makes a recipe only where the core's table does not take it.)

>>> import numpy as np, datamove as dm
>>> from datamove.dispatch import recipes
>>> x = np.arange(16.0).reshape(1, 1, 4, 4)
>>> first = dm.space_to_depth(x, "blocks_first", 2, engine="numpy")
>>> again = dm.space_to_depth(x, "blocks_first", 2, engine="numpy")   # from the recipe
>>> ("space_to_depth", "blocks_first", 2, "numpy", x.shape, x.strides, x.dtype) in recipes.RECIPES
True
>>> bool((first == again).all())
True
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable, Hashable, List, Optional, Tuple

import numpy as np

from .. import engines
from ..opset import DEPTH_OPS
from ..arrays import libraries
from ..engines import route
from ..arrays.caches import BoundedCache
from ..engines.call import Call
from ..arrays.outputs import allocate, allocator, check_out, unaliased
from ..engines.native import engine as native_engine
from ..pytorch import layout as torch_layout
from ..engines.loops import merged, merged_fill
from ..plans.views import Plan

__all__ = ["Recipe", "TorchRecipe", "ForeignRecipe", "RECIPES", "exact", "key", "kept"]

_MAX = 512


class _Recipes(BoundedCache[Any]):
    """The recipes; emptied, the calls the core keeps from them for their repeats go too (``repeat.cpp``),
    so that a test that empties them to change a routing rule meets no call kept under the old one."""

    def clear(self) -> None:
        super().clear()
        native_engine.forget_repeats()


#: The recipes, most recently made last; ``RECIPES.get(key)`` finds one.
RECIPES: "BoundedCache[Any]" = _Recipes(_MAX)
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# (shape, strides, offset in bytes) of a view over a buffer, in words
_Strided = Tuple[Tuple[int, ...], Tuple[int, ...], int]


def exact(value: Any) -> Optional[Hashable]:
    """``value`` as a hashable key if it is a list or tuple of exact ints, an int or a str; else None."""
    kind = type(value)
    if kind is int or kind is str:
        return value
    if kind is list or kind is tuple:
        for item in value:  # a plain loop: the cheapest test on a hot path
            if type(item) is not int:
                return None
        return tuple(value)
    return None


# dtypes whose reshape/permute/cat PyTorch implements on every device (not float8, uint16-64, complex32)
_TORCH_PLAIN = frozenset(("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                          "float32", "float64", "complex64", "complex128"))


def key(op: str, args: Tuple[Any, ...], data: Any, engine: Any,
        library: Optional[libraries.Library] = None) -> Optional[Hashable]:
    """The recipe key of a call on an array of ``library`` (``libraries.of(data)`` unless given): the op, its parameters
    (:func:`exact`), the engine and the adapter's key (type, shape, strides, dtype, device, ...); None when
    the call cannot use a recipe (a parameter not in exact form, an array the adapter does not key, an array
    of no library or NumPy's: :mod:`datamove.dispatch.numpy_calls` builds NumPy's inline, equal to
    ``(op, *args, engine, *libraries.NUMPY.key(data))``, which ``tests/test_recipes.py`` holds it to).
    """
    if library is None:
        library = libraries.of(data)
    if library is None or library is libraries.NUMPY or type(engine) is not str:
        return None
    if op in DEPTH_OPS:
        mode, block_size = args
        if type(mode) is not str or type(block_size) is not int:
            return None
        parts: Tuple[Any, ...] = (mode, block_size)
    else:
        block_shape, begin, end = args
        parts = (exact(block_shape), exact(begin), exact(end))
        if parts[0] is None or parts[1] is None or parts[2] is None:
            return None
    found = library.key(data)
    return None if found is None else (op, *parts, engine, *found)


def kept(recipe_key: Optional[Hashable], recipe: Any) -> Any:
    """``recipe``, kept under ``recipe_key`` for the key's repeats (not kept when it is None)."""
    return recipe if recipe_key is None else RECIPES.put(recipe_key, recipe)


class ForeignRecipe:
    """A validated call on arrays of one library, type, shape and dtype (CuPy, JAX, Dask, array-API arrays).

    ``recipe(data, out)`` skips validation and goes straight to the dispatcher,
    :func:`datamove.dispatch.foreign.run` (``out=`` checked there).
    """

    def __init__(self, call: Call, engine: str) -> None:
        self.call, self.engine = call, engine

    def __call__(self, data: Any, out: Any) -> Any:
        from . import foreign

        return foreign.run(self.call, data, out, self.engine)


class TorchRecipe(ForeignRecipe):
    """A validated call on PyTorch tensors of one shape, strides, dtype and device.

    ``recipe(data, out)`` skips validation and planning. The route table
    decides, once, what the recipe keeps (:mod:`datamove.engines.route`): tensors for
    the GPU engine go straight to it (:class:`~datamove.engines.triton_engine.Planned`);
    CPU tensors of the contiguous format and NumPy's dtypes, without ``out=``,
    go to the compiled core from their third call, from the tensor's address
    (:func:`_torch_core`); small tensors of PyTorch's common dtypes
    (:func:`datamove.engines.route.own_ops`) take PyTorch's own ops until then (and
    where the core does not load, and on CUDA): ``pixel_shuffle``/``pixel_unshuffle``
    where they are the op; where the output is one strided view of the input,
    that view copied by ``clone`` (a gradient-recording call takes the specs'
    reshape/permute formula instead); else the formula. Every other call takes
    the dispatcher, :func:`datamove.dispatch.foreign.run`. ``fast`` is the path a call
    without ``out=`` takes (None: the dispatcher's), which :mod:`datamove.ops`
    calls straight away for SpaceToDepth and DepthToSpace.
    """

    def __init__(self, call: Call, data: Any, engine: str) -> None:
        super().__init__(call, engine)
        from ..pytorch import custom_ops as torch_ops

        torch_ops.custom_ops()  # for torch.compile later (see datamove.dispatch.torch_calls.compiled_call)
        self.fast: Optional[Callable[[Any], Any]] = None
        self.gpu: Optional[Callable[[Any, Any], Any]] = None
        self.shape = call.out_shape
        facts = engines.facts(data, engine)
        path = route.route(facts).engine
        torch = sys.modules["torch"]
        if path == "triton":
            from ..engines import triton_engine

            # the GPU engine, straight away (out= checked here, or by run() when anything is off)
            self.gpu = triton_engine.Planned(call.op, call.params, data, call.out_shape)
            return
        contiguous = torch_layout.memory_format(data) == torch.contiguous_format  # (else: keep channels-last)
        dtype = str(data.dtype).rpartition(".")[2]
        own, core = route.tensor_repeats(
            facts, _small_result(call, data.element_size()),
            own_op_takes=contiguous and data.device.type in ("cpu", "cuda") and dtype in _TORCH_PLAIN,
            core_takes=(contiguous and data.device.type == "cpu" and type(data) is torch.Tensor
                        and not libraries.TORCH.lazy(data) and dtype in libraries.NUMPY_DTYPES_OF_TORCH))
        if own:
            self.fast = _torch_formula(call, data)
        if core:
            # the core from the second call (PyTorch's own op, or the dispatcher, the first)
            self.fast = _torch_core(call, data, self.fast or self._dispatched, engine)

    def _dispatched(self, data: Any) -> Any:
        return ForeignRecipe.__call__(self, data, None)

    def __call__(self, data: Any, out: Any) -> Any:
        if self.gpu is not None and (out is None or libraries.TORCH.out_ready(data, out, self.shape)):
            return self.gpu(data, out)
        if out is None and self.fast is not None:
            return self.fast(data)
        return super().__call__(data, out)


def _small_result(call: Call, itemsize: int) -> bool:
    """Whether a path may pad the input (SpaceToBatch) into a temporary the size of the result: PyTorch's
    own ops (:data:`datamove.engines.route.TEMPORARY_MAX_BYTES`)."""
    return math.prod(call.out_shape) * itemsize <= route.TEMPORARY_MAX_BYTES


def _torch_formula(call: Call, data: Any) -> Callable[[Any], Any]:
    import torch
    import torch.nn.functional as F

    from ..engines import array_api_engine

    op, params, plan = call.op, call.params, call.plan
    size = params.get("block_size")
    if _pixel_shuffle(call, data):
        # PyTorch's own op is exactly this one (and returns a new tensor, in the input's memory format); it
        # costs less than the core on the tensor's NumPy view: [1, 4, 16, 16] float32 depth_first, 6.8 us
        # against 10.1 (into np.empty, then torch.from_numpy) and 12.3 (into torch.empty's NumPy view), in turns
        return (lambda x: F.pixel_unshuffle(x, size)) if op == "space_to_depth" else (lambda x: F.pixel_shuffle(x, size))
    xp = array_api_engine.namespace(data)
    formula = lambda x: array_api_engine.apply(op, params, x, xp)  # noqa: E731 - differentiable
    if not data.numel():
        return formula
    gather = _gather(plan, data.stride())
    before = after = None
    if gather is None and op == "batch_to_space":
        # the uncropped result (one view of the input, cloned), then its crop copied out
        full = _whole_blocks(op, params["block_shape"], tuple(data.shape))
        gather = _gather(full, data.stride())
        kept, steps = plan.out_shape, _c_strides(full.out_shape)
        start = sum(b * s for b, s in zip(params["crops_begin"], steps))
        after = lambda y: y.as_strided(kept, steps, start).contiguous()  # noqa: E731 - the crop
    elif gather is None and op == "space_to_batch":
        # the input zero-padded by F.pad (C-contiguous), then one view of that, cloned
        lo, hi = params["pads_begin"], params["pads_end"]
        padded = tuple(d + b + e for d, b, e in zip(data.shape, lo, hi))
        gather = _gather(_whole_blocks(op, params["block_shape"], padded), _c_strides(padded))
        widths = tuple(w for i in range(len(padded) - 1, 0, -1) for w in (lo[i], hi[i]))
        before = lambda x: torch.constant_pad_nd(x, widths, 0).contiguous()  # noqa: E731 - F.pad's own op
    if gather is None:
        return formula
    shape, strides, offset = gather
    out_shape, contiguous, recording = plan.out_shape, torch.contiguous_format, torch.is_grad_enabled

    def strided(x: Any) -> Any:
        if x.requires_grad and recording():
            return formula(x)
        if before is not None:
            x = before(x)
        y = x.as_strided(shape, strides, x.storage_offset() + offset).clone(memory_format=contiguous)
        return y.view(out_shape) if after is None else after(y)

    return strided


def _pixel_shuffle(call: Call, data: Any) -> bool:
    """Whether PyTorch's ``pixel_unshuffle`` / ``pixel_shuffle`` is exactly the call's op."""
    return (call.op in ("space_to_depth", "depth_to_space") and call.params["mode"] == "depth_first"
            and data.ndim == 4 and call.params["block_size"] > 1 and data.numel() > 0)


def _torch_core(call: Call, data: Any, first: Callable[[Any], Any], engine: str) -> Callable[[Any], Any]:
    """A CPU tensor's repeated call on the compiled core, its result a tensor over a new NumPy array. The
    first call, and any call autograd records, takes ``first`` (PyTorch's own op or the dispatcher: no
    lowering); the second runs on the tensor's NumPy view, its program kept as the NumPy call's
    (:func:`_repeats`), and takes the core's handle of it; from the third the core runs it from the tensor's
    address alone (``_native.at``: no NumPy view, whose making cost 2 us). SpaceToDepth depth_first of a
    [1, 4, 16, 16] float32 tensor through :mod:`datamove.ops`: 13.6 us through ``pixel_unshuffle`` (6.1 us
    alone), 8.8 us this way, on the 2-core AMD EPYC (``torch.from_numpy`` 1.7 us and the tensor's key 1.6
    us of it); [4, 16, 32, 32] 134 -> 31 us, as the dispatcher's Python steps go."""
    torch = sys.modules["torch"]
    keep = _repeats(call, engine, np.empty)
    planned = native_engine.Planned(call, keep)
    repeated = native_engine.repeated_calls()
    make_handle, at = native_engine.handles()
    op, a, b, c = keep[:4]
    shape, dtype = call.out_shape, data.detach().numpy().dtype
    from_numpy, recording, empty = torch.from_numpy, torch.is_grad_enabled, np.empty
    seen = [False]
    handle: List[Any] = [None]  # the core's handle of the kept call, from the second call's end

    def run(x: Any) -> Any:
        if x.requires_grad:
            if recording():
                return first(x)
            x = x.detach()
        if not seen[0]:
            seen[0] = True
            return first(x)
        if handle[0] is not None:  # the input by its address: no NumPy view made
            done = at(handle[0], x.data_ptr())
            if done is not None:
                return from_numpy(done)
        view = x.numpy()
        done = None if repeated is None else repeated(op, view, a, b, c, None, engine)
        if done is None:
            done = planned.fresh(view, empty(shape, dtype))
        if handle[0] is None and make_handle is not None:
            handle[0] = make_handle(op, view, a, b, c, engine)  # (None where the core keeps no program for it)
        return from_numpy(done)

    return run


def _whole_blocks(op: str, block_shape: Tuple[int, ...], shape: Tuple[int, ...]) -> Plan:
    """The plan of BatchToSpace without crops, or SpaceToBatch without pads, of an input of ``shape``."""
    from ..plans import views as plans

    zeros = (0,) * len(shape)
    if op == "batch_to_space":
        out = (shape[0] // math.prod(block_shape),) + tuple(d * b for d, b in zip(shape[1:], block_shape[1:]))
        return plans.batch_to_space(shape, out, block_shape, zeros, zeros)
    out = (shape[0] * math.prod(block_shape),) + tuple(d // b for d, b in zip(shape[1:], block_shape[1:]))
    return plans.space_to_batch(shape, out, block_shape, zeros, zeros)


def _c_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The strides, in items, of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _gather(plan: Plan, stride: Tuple[int, ...]) -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...], int]]:
    """The one strided view of the input (shape, strides and offset in items) whose C-order copy is the output.

    None unless the plan is one copy, no fills, whose output side is the
    whole output in C order (SpaceToDepth, DepthToSpace; BatchToSpace and
    SpaceToBatch without crops or pads).

    >>> from datamove.plans import views as plans
    >>> _gather(plans.space_to_depth((1, 1, 4), (1, 2, 2), "blocks_first", 2), (4, 4, 1))
    ((2, 2), (1, 2), 0)
    """
    if len(plan.copies) != 1 or plan.fills:
        return None
    src, dst = plan.copies[0]
    out_strides = _c_strides(plan.out_shape)
    if any(b * s for b, s in zip(dst.start, out_strides)):
        return None
    dst_steps = [s * out_strides[axis] for axis, _, s in dst.dims]
    order = sorted((j for j, (_, n, _) in enumerate(dst.dims) if n != 1), key=lambda j: -dst_steps[j])
    if not _is_c_order(tuple(dst.dims[j][1] for j in order), tuple(dst_steps[j] for j in order), 1):
        return None
    shape = tuple(src.dims[j][1] for j in order)
    strides = tuple(src.dims[j][2] * stride[src.dims[j][0]] for j in order)
    return shape, strides, sum(b * s for b, s in zip(src.start, stride))


def _gather_bytes(plan: Plan, shape: Tuple[int, ...], itemsize: int) -> Optional[_Strided]:
    """:func:`_gather` over a C-contiguous input of ``shape``, in bytes: ``(shape, strides, offset)``."""
    found = _gather(plan, _c_strides(shape))
    if found is None:
        return None
    view_shape, steps, start = found
    return view_shape, tuple(s * itemsize for s in steps), start * itemsize


class Recipe:
    """A planned call: the output's shape and dtype, and how to fill it.

    ``recipe(data, out)`` runs it: ``out=`` is checked, and ``data`` copied
    where it overlaps ``out``, here (every NumPy call is run by a recipe, kept
    or not). Three ways, fixed when the recipe is made:

    * *gather*: one copy whose output side is the output in C order, and no
      fills: the output is ``view.copy()`` of one strided view of ``data``;
    * *direct*: ``np.copyto`` between views built on both buffers, then fills;
    * *engine*: the engine's ``run(call, data, out)`` (layouts without a
      buffer; recipes that are not kept);
    * *core*: the compiled core, its programs kept by the recipe
      (:class:`~datamove.engines.native.engine.Planned`): the native
      engine's calls, and, from their second call, the kept recipes of
      ``engine="auto"`` from :data:`~datamove.engines.route.REPEAT_NATIVE_MIN_BYTES`
      (a repeated call has paid for its lowering once; the core's run then
      costs less than NumPy's strided copy).
    """

    def __init__(self, call: Call, data: np.ndarray, engine: engines.Engine, facts: route.Facts,
                 kept: bool = True) -> None:
        self.call = call
        self.out_shape = call.out_shape
        self.dtype = data.dtype
        self.run = engine.run
        plain = not data.dtype.hasobject and data.dtype.itemsize > 0
        # a small result is np.empty's, called straight (allocator)
        self.empty = allocator(math.prod(self.out_shape) * self.dtype.itemsize)
        self.core: Optional[native_engine.Planned] = None
        asked = facts.engine
        self.repeats = _repeats(call, asked, self.empty) if kept else None
        if engine is native_engine and plain:
            self.core = native_engine.Planned(call, self.repeats)
        # moves to the core on its second call (see _core_from_now); the first, which makes it, is NumPy's
        self.called = False
        self.core_later = (kept and plain and engine is not native_engine and data.size > 0
                           and route.repeats_on_core(facts))
        self.copies: Optional[List[Tuple[Any, _Strided, _Strided]]] = None
        self.fills: List[Tuple[Any, _Strided]] = []
        self.gather: Optional[Tuple[Any, _Strided, bool]] = None
        self.two_step: Optional[Callable[[np.ndarray], np.ndarray]] = None
        # Views on buffers need a C-contiguous input and plain items; worth making for a recipe that is kept.
        if (kept and engine is engines.get("numpy") and data.flags.c_contiguous and not data.dtype.hasobject
                and data.dtype.itemsize):
            # Crops or pads: the two-step path, when it can, and nothing else planned or lowered (it takes
            # every call). Its temporary is the uncropped result (the input's size) or the padded input (the
            # output's): small ones only.
            if (call.op in ("batch_to_space", "space_to_batch") and self.dtype.kind in "biufcmM" and data.size
                    and route.two_step(facts, math.prod(call.out_shape) * data.itemsize,
                                       any(call.args[1]) or any(call.args[2]))):
                self.two_step = _two_step(data, call.op, *call.args)
                if self.two_step is not None:
                    return
            if self._read_off(call.plan, data):
                return
            self._direct(call.plan, data)

    def _read_off(self, plan: Plan, data: np.ndarray) -> bool:
        """The gather path read off the plan, without lowering it, where lowering could not improve it.

        That is one copy and no fills, plain items, and a gather view whose innermost dim is strided
        (SpaceToDepth and DepthToSpace of channels-first data): lowering only merges dims, which NumPy's
        copy merges itself, and widens words, which needs a contiguous innermost run. A new shape's
        first call skips the lowering (a small SpaceToDepth's recipe: 67 -> 18 us).
        """
        if len(plan.copies) != 1 or plan.fills or self.dtype.kind not in "biufcmM" or not data.size:
            return False
        itemsize = self.dtype.itemsize
        found = _gather_bytes(plan, data.shape, itemsize)
        if found is None or not found[0] or found[1][-1] == itemsize:
            return False
        shape, strides, offset = found
        view = np.ndarray(shape, self.dtype, data, offset, strides)
        self.gather = (self.dtype, found, np.may_share_memory(view.reshape(self.out_shape), data))
        self.copies = [(self.dtype, found, (shape, tuple(s * itemsize for s in _c_strides(shape)), 0))]
        return True

    def _direct(self, plan: Plan, data: np.ndarray) -> None:
        """The plan's copies and fills as views of few, wide dims (:func:`~datamove.engines.loops.merged`), in
        the output's order; and the gather path where one copy writes the whole output in C order."""
        out = _c_layout(self.out_shape, self.dtype)
        plain = self.dtype.kind in "biufcmM"  # copied bit for bit as themselves, no view needed
        self.copies = []
        for src, dst in plan.copies:
            nest = merged(data, out, src, dst)
            word = nest.word
            loops = sorted(nest.loops, key=lambda l: -l[2])  # output order
            shape = tuple(l[0] for l in loops) or (1,)
            src_strides = tuple(l[1] * word for l in loops) or (0,)
            dst_strides = tuple(l[2] * word for l in loops) or (0,)
            item = self.dtype if plain and word == self.dtype.itemsize else _WORDS[word]
            self.copies.append((item, (shape, src_strides, nest.src_start * word), (shape, dst_strides, nest.dst_start * word)))
            if len(plan.copies) == 1 and not plan.fills and nest.dst_start == 0 and _is_c_order(shape, dst_strides, word):
                # reshape() of a view it cannot reshape in place copies it in C order: the result,
                # in one call. A view it can reshape in place (C-contiguous, or a transposed one
                # the output's shape keeps) would come back aliasing data, so it gets copy() first.
                view = np.ndarray(shape, item, data, nest.src_start * word, src_strides)
                copy_first = item is not self.dtype or np.may_share_memory(view.reshape(self.out_shape), data)
                self.gather = (item, (shape, src_strides, nest.src_start * word), copy_first)
        for view in plan.fills:
            nest = merged_fill(out, view)
            word = nest.word
            loops = sorted(nest.loops, key=lambda l: -l[2])
            shape = tuple(l[0] for l in loops) or (1,)
            self.fills.append((_WORDS[word], (shape, tuple(l[2] * word for l in loops) or (0,), nest.dst_start * word)))

    def _core_from_now(self) -> native_engine.Planned:
        """A kept recipe's second call: the core runs this recipe from now on, programs that carry tables
        too (small SpaceToBatch with pads), whose repeats the core runs alone with their tables made once
        (``repeat.cpp``): float32, ``[1, 4, 16, 16]`` 12-14 -> 3.7 us, ``[4, 4, 32, 32]`` 32-37 -> 17 us,
        ``[8, 16, 14, 14]`` 67-71 -> 39 us against NumPy's two steps (2-core AMD EPYC, in turns)."""
        self.core_later = False
        # (no program made here: Planned makes it at its first call, for that call's alignments; where the
        # core plans none, Planned runs the call on the NumPy engine)
        self.core = native_engine.Planned(self.call, self.repeats)
        return self.core

    def __call__(self, data: np.ndarray, out: Any) -> np.ndarray:
        core = self.core
        if core is None and self.core_later:
            if self.called:
                core = self._core_from_now()
            self.called = True
        if core is not None:
            if out is None:
                return core.fresh(data, self.empty(self.out_shape, self.dtype))
            check_out(out, self.out_shape, self.dtype)
            return core(data, out)  # (data copied there where it overlaps out)
        if out is None:
            if self.two_step is not None:
                return self.two_step(data)
            if self.gather is not None:
                item, (shape, strides, offset), copy_first = self.gather
                if not copy_first:
                    return np.ndarray(shape, item, data, offset, strides).reshape(self.out_shape)
                result = np.ndarray(shape, item, data, offset, strides).copy()
                if item is not self.dtype:
                    result = result.reshape(-1).view(np.uint8).view(self.dtype)
                return result.reshape(self.out_shape)
            if self.copies is None:
                return self.run(self.call, data, None)  # type: ignore[no-any-return]
            out = allocate(self.out_shape, self.dtype)
        else:
            check_out(out, self.out_shape, self.dtype)
            data = unaliased(data, out)
            if self.copies is not None and not out.flags.c_contiguous:
                return self.run(self.call, data, out)  # type: ignore[no-any-return]
            if self.two_step is not None:  # small: a third copy beats one NumPy call per piece
                np.copyto(out, self.two_step(data))
                return out
        if self.copies is None:
            return self.run(self.call, data, out)  # type: ignore[no-any-return]
        for item, (shape, strides, offset), (dst_shape, dst_strides, dst_offset) in self.copies:
            np.copyto(np.ndarray(dst_shape, item, out, dst_offset, dst_strides), np.ndarray(shape, item, data, offset, strides))
        for item, (shape, strides, offset) in self.fills:
            np.ndarray(shape, item, out, offset, strides).fill(0)
        return out


def _repeats(call: Call, asked: str, allocate: Callable[..., np.ndarray]) -> Tuple[Any, ...]:
    """A kept recipe's call as :mod:`datamove.ops` hands it to the core's ``repeated`` (op, a, b, c, engine),
    and the allocator of its results: what its :class:`~datamove.engines.native.engine.Planned` gives the
    core with each program it runs, so that the call's repeats run in one C call (``repeat.cpp``)."""
    if call.op in ("space_to_depth", "depth_to_space"):
        return (call.op, *call.args, "channels_first", asked, allocate)
    return (call.op, *call.args, asked, allocate)


def _two_step(data: np.ndarray, op: str, block_shape: Tuple[int, ...], begin: Tuple[int, ...], end: Tuple[int, ...]):
    """For a small call with crops or pads: two NumPy calls instead of one per piece.

    BatchToSpace: the uncropped result (one strided view of the input,
    copied by ``reshape``), then the cropped part of it copied out.
    SpaceToBatch: the input copied into a zeroed padded array, then the
    padded array's one strided view copied by ``reshape``. (The temporary is
    small: this path is for inputs below :data:`~datamove.engines.NATIVE_MIN_BYTES` and results up to
    :data:`~datamove.engines.route.TEMPORARY_MAX_BYTES`.)
    """
    if op == "batch_to_space":
        source_shape = data.shape
        plan = _whole_blocks(op, block_shape, source_shape)
        full_shape = plan.out_shape
        crop = tuple(slice(b, n - e) for b, n, e in zip(begin, full_shape, end))
    else:
        source_shape = tuple(d + b + e for d, b, e in zip(data.shape, begin, end))
        plan = _whole_blocks(op, block_shape, source_shape)
        full_shape = plan.out_shape
        inside = tuple(slice(b, b + d) for b, d in zip(begin, data.shape))
    gather = _gather_bytes(plan, source_shape, data.dtype.itemsize)
    if gather is None:
        return None
    shape, strides, offset = gather
    dtype = data.dtype
    if op == "batch_to_space":
        def run(data: np.ndarray) -> np.ndarray:
            full = np.ndarray(shape, dtype, data, offset, strides).reshape(full_shape)
            return full[crop].copy()
    else:
        def run(data: np.ndarray) -> np.ndarray:
            padded = np.zeros(source_shape, dtype)
            padded[inside] = data
            result = np.ndarray(shape, dtype, padded, offset, strides).reshape(full_shape)
            return result if result.flags.c_contiguous else result.copy()  # a view when nothing moved
    return run


def _is_c_order(shape: Tuple[int, ...], strides: Tuple[int, ...], word: int) -> bool:
    step = word
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n != 1 and stride != step:
            return False
        step *= n
    return True


def _c_layout(shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array of ``shape`` as far as strides go, backed by one item (for lowering only)."""
    strides = []
    step = dtype.itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    item = np.zeros(1, np.dtype(f"V{dtype.itemsize}"))  # the same width, any dtype (ml_dtypes included)
    return np.lib.stride_tricks.as_strided(item, shape, tuple(reversed(strides)))
