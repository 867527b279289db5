"""Recipes: what a repeated call with the same shapes needs, computed once.

A call is validated, planned and lowered the first time; the result is kept
as a :class:`Recipe`, keyed by the operation, its parameters (exact Python
ints and strings only, so ``True`` or ``2.0`` never reuse a recipe made for
``1`` or ``2``), and the input's type, shape, strides and dtype. The next call
with the same key skips everything but the copy: for a small array, an
``np.copyto`` between two views built straight on the arrays' buffers, with
the dims merged, which costs no more than NumPy's own
reshape/transpose/reshape idiom.

>>> import numpy as np, datamove as dm
>>> from datamove import recipes
>>> x = np.arange(16.0).reshape(1, 1, 4, 4)
>>> first = dm.space_to_depth(x, "blocks_first", 2)
>>> again = dm.space_to_depth(x, "blocks_first", 2)   # from the recipe
>>> recipes.depth_key("space_to_depth", "blocks_first", 2, x, "auto") in recipes.RECIPES
True
>>> bool((first == again).all())
True
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable, Hashable, List, Optional, Tuple

import numpy as np

from . import engines
from .caches import BoundedCache
from .outputs import allocate, unaliased
from .engines import torch_layout
from .errors import DataMoveError
from .plans import Plan

__all__ = ["Recipe", "TorchRecipe", "RECIPES", "depth_key", "space_key", "torch_key", "store", "store_torch"]

_MAX = 512
#: The recipes, most recently made last; ``RECIPES.get(key)`` finds one.
RECIPES: "BoundedCache[Any]" = BoundedCache(_MAX)
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


def depth_key(op: str, mode: Any, block_size: Any, data: Any, engine: Any) -> Optional[Hashable]:
    """The recipe key of a SpaceToDepth / DepthToSpace call, or None when it cannot use a recipe."""
    if type(data) is not np.ndarray or type(mode) is not str or type(block_size) is not int or type(engine) is not str:
        return None
    return (op, mode, block_size, engine, data.shape, data.strides, data.dtype)


def space_key(op: str, block_shape: Any, begin: Any, end: Any, data: Any, engine: Any) -> Optional[Hashable]:
    """The recipe key of a BatchToSpace / SpaceToBatch call, or None when it cannot use a recipe."""
    if type(data) is not np.ndarray:
        return torch_key(op, (block_shape, begin, end), data, engine)
    if type(engine) is not str:
        return None
    block_shape, begin, end = exact(block_shape), exact(begin), exact(end)
    if block_shape is None or begin is None or end is None:
        return None
    return (op, block_shape, begin, end, engine, data.shape, data.strides, data.dtype)


# dtypes whose reshape/permute/cat PyTorch implements on every device (not float8, uint16-64, complex32)
_TORCH_PLAIN = frozenset(("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                          "float32", "float64", "complex64", "complex128"))


def torch_key(op: str, args: Tuple[Any, ...], data: Any, engine: Any) -> Optional[Hashable]:
    """The recipe key of a call on a PyTorch tensor (its kind, shape, strides, dtype, device and lazy conjugate or
    negative bit: a conjugate view has the same strides as its base but other values), or None."""
    torch = sys.modules.get("torch")
    kind = type(data)
    if torch is None or (kind is not torch.Tensor and kind is not torch.nn.Parameter) or type(engine) is not str:
        return None
    parts = []
    for arg in args:
        part = exact(arg)
        if part is None:
            return None
        parts.append(part)
    try:
        return ("torch", op, *parts, engine, kind, data.shape, data.stride(), data.dtype, data.device, data.is_conj(), data.is_neg())
    except RuntimeError:  # sparse and nested tensors have no strides (datamove.arrays.checked says so)
        return None


class TorchRecipe:
    """A validated call on PyTorch tensors of one shape, strides, dtype and device.

    ``recipe(data, out, check_out)`` skips validation and planning. Tensors
    for the GPU engine go straight to it (:class:`~datamove.engines.triton_engine.Planned`).
    Small contiguous tensors of PyTorch's common dtypes without ``out=`` (below the GPU
    engine's threshold on CUDA, below the native engine's on the CPU) run
    PyTorch's own ops straight away: ``pixel_shuffle``/``pixel_unshuffle``
    where they are the op; where the output is one strided view of the input,
    that view copied by ``clone`` (a gradient-recording call takes the specs'
    reshape/permute formula instead); else the formula. So a small call costs
    about what PyTorch's op costs; every other call takes ``datamove.arrays.run``.
    """

    def __init__(self, op: str, params: dict, plan: Plan, data: Any, engine: str, run: Callable[[Any, Any], Any]) -> None:
        self.run = run
        self.fast: Optional[Callable[[Any], Any]] = None
        self.gpu: Optional[Callable[[Any, Any], Any]] = None
        self.shape = shape = tuple(plan.out_shape)
        from .engines import triton_engine

        wanted = engine == "auto" and triton_engine.wants(data)
        if wanted or (engine == "triton" and triton_engine.can_take(data)):
            # the GPU engine, straight away (out= checked here, or by run() when anything is off)
            self.gpu = triton_engine.Planned(op, params, data, shape)
        elif engine == "auto" and str(data.dtype).rpartition(".")[2] in _TORCH_PLAIN and (
            torch_layout.memory_format(data) == sys.modules["torch"].contiguous_format  # else: run() keeps channels-last
        ):
            if data.device.type == "cuda" or (
                data.device.type == "cpu" and data.numel() * data.element_size() < engines.NATIVE_MIN_BYTES
            ):
                self.fast = _torch_formula(op, params, plan, data)

    def __call__(self, data: Any, out: Any, check_out: Callable[..., None]) -> Any:
        if self.gpu is not None and (out is None or (
            type(out) is type(data) and out.shape == self.shape and out.dtype == data.dtype
            and out.device == data.device and not out.requires_grad and 0 not in out.stride()
            and not out.is_conj() and not out.is_neg()
        )):
            return self.gpu(data, out)
        if out is None and self.fast is not None:
            return self.fast(data)
        return self.run(data, out)


def _torch_formula(op: str, params: dict, plan: Plan, data: Any) -> Callable[[Any], Any]:
    import torch
    import torch.nn.functional as F

    from .engines import array_api_engine

    size = params.get("block_size")
    if op in ("space_to_depth", "depth_to_space") and params["mode"] == "depth_first" and data.ndim == 4 and size > 1 and data.numel():
        # PyTorch's own op is exactly this one (and returns a new tensor, in the input's memory format)
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


def _whole_blocks(op: str, block_shape: Tuple[int, ...], shape: Tuple[int, ...]) -> Plan:
    """The plan of BatchToSpace without crops, or SpaceToBatch without pads, of an input of ``shape``."""
    from . import plans

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

    >>> from datamove import plans
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


def store_torch(recipe_key: Hashable, op: str, params: dict, plan: Plan, data: Any, engine: str,
                run: Callable[[Any, Any], Any]) -> TorchRecipe:
    """Make, keep and return the recipe of a validated call on a PyTorch tensor."""
    from . import torch_ops

    torch_ops.custom_ops()  # for torch.compile later (see datamove.arrays.compiled_call)
    return _keep(recipe_key, TorchRecipe(op, params, plan, data, engine, run))


def _keep(recipe_key: Hashable, recipe: Any) -> Any:
    """Keep ``recipe`` under ``recipe_key``, forgetting the oldest past :data:`_MAX`; return it."""
    return RECIPES.put(recipe_key, recipe)


class Recipe:
    """A planned call: the output's shape and dtype, and how to fill it.

    ``recipe(data, out, check_out)`` runs it. Three ways, fixed when the
    recipe is made:

    * *gather*: one copy whose output side is the output in C order, and no
      fills: the output is ``view.copy()`` of one strided view of ``data``;
    * *direct*: ``np.copyto`` between views built on both buffers, then fills;
    * *engine*: the engine's ``execute(plan, data, out)`` (large arrays, the
      native engine; layouts without a buffer).
    """

    def __init__(self, plan: Plan, data: np.ndarray, engine: str, margins: Optional[Tuple[str, Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]] = None) -> None:
        self.out_shape = plan.out_shape
        self.dtype = data.dtype
        self.plan = plan
        self.execute = engines.select(engine, data)
        self.copies: Optional[List[Tuple[Any, _Strided, _Strided]]] = None
        self.fills: List[Tuple[Any, _Strided]] = []
        self.gather: Optional[Tuple[Any, _Strided, bool]] = None
        self.two_step: Optional[Callable[[np.ndarray], np.ndarray]] = None
        # Views on buffers need a C-contiguous input and plain items.
        if self.execute.__module__.endswith("numpy_engine") and data.flags.c_contiguous and not data.dtype.hasobject and data.dtype.itemsize:
            self._direct(plan, data)
            # the two-step path holds a temporary the size of the output: small arrays only
            if (self.gather is None and margins is not None and self.dtype.kind in "biufcmM" and data.size
                    and data.nbytes < engines.NATIVE_MIN_BYTES):
                self.two_step = _two_step(data, *margins)

    def _direct(self, plan: Plan, data: np.ndarray) -> None:
        from .engines.strided import lower, lower_fill

        out = _c_layout(self.out_shape, self.dtype)
        plain = self.dtype.kind in "biufcmM"  # copied bit for bit as themselves, no view needed
        self.copies = []
        for src, dst in plan.copies:
            nest = lower(data, out, src, dst, aligned=False)
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
            nest = lower_fill(out, view, aligned=False)
            word = nest.word
            shape = tuple(l[0] for l in nest.loops) or (1,)
            self.fills.append((_WORDS[word], (shape, tuple(l[2] * word for l in nest.loops) or (0,), nest.dst_start * word)))

    def __call__(self, data: np.ndarray, out: Any, check_out: Callable[..., None]) -> np.ndarray:
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
            out = allocate(self.out_shape, self.dtype)
        else:
            check_out(out, self.out_shape, self.dtype)
            data = unaliased(data, out)
            if self.copies is not None and not out.flags.c_contiguous:
                return self.execute(self.plan, data, out)
            if self.two_step is not None:  # small: a third copy beats one NumPy call per piece
                np.copyto(out, self.two_step(data))
                return out
        if self.copies is None:
            return self.execute(self.plan, data, out)
        for item, (shape, strides, offset), (dst_shape, dst_strides, dst_offset) in self.copies:
            np.copyto(np.ndarray(dst_shape, item, out, dst_offset, dst_strides), np.ndarray(shape, item, data, offset, strides))
        for item, (shape, strides, offset) in self.fills:
            np.ndarray(shape, item, out, offset, strides).fill(0)
        return out


def _two_step(data: np.ndarray, op: str, block_shape: Tuple[int, ...], begin: Tuple[int, ...], end: Tuple[int, ...]):
    """For a small call with crops or pads: two NumPy calls instead of one per piece.

    BatchToSpace: the uncropped result (one strided view of the input,
    copied by ``reshape``), then the cropped part of it copied out.
    SpaceToBatch: the input copied into a zeroed padded array, then the
    padded array's one strided view copied by ``reshape``. (The temporary is
    small: this path is for arrays below :data:`~datamove.engines.NATIVE_MIN_BYTES`.)
    """
    from .engines.strided import lower

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
    if len(plan.copies) != 1:
        return None
    source = _c_layout(source_shape, data.dtype)
    nest = lower(source, _c_layout(full_shape, data.dtype), *plan.copies[0], aligned=False)
    if nest.word != data.dtype.itemsize:
        return None
    loops = sorted(nest.loops, key=lambda l: -l[2])
    shape = tuple(l[0] for l in loops) or (1,)
    strides = tuple(l[1] * nest.word for l in loops) or (0,)
    offset = nest.src_start * nest.word
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


def store(recipe_key: Optional[Hashable], plan: Plan, data: np.ndarray, engine: str) -> Optional[Recipe]:
    """Make, keep and return the recipe of a validated call (None when it has no key)."""
    if recipe_key is None:
        return None
    margins = recipe_key[:4] if recipe_key[0] in ("batch_to_space", "space_to_batch") else None
    try:
        recipe = Recipe(plan, data, engine, margins)
    except DataMoveError:
        return None
    return _keep(recipe_key, recipe)
