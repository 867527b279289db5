"""The GPU engine: each call one launch of a Triton kernel, on PyTorch CUDA tensors and CuPy arrays.

The op becomes one masked strided move (:mod:`datamove.plans.moves`) and
:func:`~datamove.engines.triton_kernels.move_kernel` runs it: every input
byte read once, every output byte written once, SpaceToBatch's zeros written
without reading, BatchToSpace's crop never read. Items travel as unsigned
words, so every dtype works (bool, float8, bfloat16, complex128, ...).

* PyTorch: a tensor that needs a gradient goes through the custom ops
  ``torch.ops.datamove.<op>`` (see :mod:`datamove.pytorch.custom_ops`), whose backward is
  the adjoint op on the same kernel and whose fake implementation takes its
  shape from :mod:`datamove.shapes`, so autograd and ``torch.compile`` see
  one op; other tensors call the kernel directly.
  Under ``torch.compile`` datamove's functions become these ops
  (:func:`datamove.dispatch.torch_calls.compiled_call`).
* CuPy arrays are viewed as tensors through DLPack (no copy) and the kernel
  runs on CuPy's current stream.
* On CPU tensors the engine runs only under Triton's interpreter
  (``TRITON_INTERPRET=1`` set before the first call): that is how the kernel
  is tested without a GPU.

Triton is imported on the first call that runs here, never by ``import datamove``.

>>> import os, torch, datamove as dm                      # doctest: +SKIP
>>> x = torch.arange(16.0, device="cuda").reshape(1, 1, 4, 4)  # doctest: +SKIP
>>> dm.space_to_depth(x, "blocks_first", 2).shape          # doctest: +SKIP
torch.Size([1, 4, 2, 2])
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import sys
from typing import Any, Dict, Optional, Tuple

from .. import opset
from ..arrays.caches import BoundedCache
from ..arrays import libraries
from ..arrays.libraries import overlap, span as _span
from ..plans import moves
from ..pytorch import layout as torch_layout

__all__ = ["TRITON_MIN_BYTES", "available", "can_take", "apply", "run", "into", "Planned", "configure"]

from .route import TRITON_MIN_BYTES  # the route table's threshold, re-exported

# Tile elements per program, by word width (4-16 KiB per program; larger tiles measured no faster).
_TILE = {1: 4096, 2: 4096, 4: 4096, 8: 2048}
_WARPS = 8
_WORD_DTYPES = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
_TABLES: "BoundedCache[Any]" = BoundedCache(512)


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Whether Triton is installed (checked without importing it)."""
    return importlib.util.find_spec("triton") is not None


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _torch_of(array: Any) -> Any:
    """``array`` as a torch tensor (CuPy through DLPack, no copy), or None."""
    library = libraries.of(array)
    if library is libraries.TORCH:
        return array
    if library is libraries.CUPY and importlib.util.find_spec("torch") is not None:
        import torch

        return torch.from_dlpack(array)
    return None


def _is_cupy(array: Any) -> bool:
    return libraries.of(array) is libraries.CUPY


def can_take(array: Any) -> bool:
    """A PyTorch or CuPy array on a CUDA device (on the CPU: only under ``TRITON_INTERPRET=1``)."""
    torch = sys.modules.get("torch")
    if torch is None or not available():
        return False
    if libraries.of(array) not in (libraries.TORCH, libraries.CUPY):
        return False
    tensor = _torch_of(array)
    if tensor.layout != torch.strided or tensor.is_quantized or libraries.TORCH.lazy(tensor):
        return False
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):  # subclasses and functorch wrappers
        return False
    if tensor.device.type == "cuda":
        return True
    return tensor.device.type == "cpu" and _interpreted()


def run(call: Any, data: Any, out: Any) -> Any:
    """The engine protocol (:mod:`datamove.engines`): ``call`` on ``data`` into ``out`` (checked), or a new array."""
    return apply(call.op, call.params, data, out, call.out_shape)


# ------------------------------------------------------------------ launching


def _words(tensor: Any, word: int) -> Any:
    """A flat tensor of ``word``-byte integers over ``tensor``'s memory, starting at its first element."""
    import torch

    dtype = getattr(torch, _WORD_DTYPES[word])
    start = tensor.storage_offset() * tensor.element_size()
    count = _span(tensor) * tensor.element_size() // word
    return torch.empty(0, dtype=dtype, device=tensor.device).set_(tensor.untyped_storage(), start // word, (count,), (1,))


def _alignment(*tensors: Any) -> int:
    """The largest power of two up to 16 dividing every tensor's address and byte offset in its storage."""
    bits = 16
    for t in tensors:
        bits |= t.data_ptr() | (t.storage_offset() * t.element_size())
    return bits & -bits


def _table(m: moves.Move, device: Any) -> Any:
    import torch

    key = (m.outer, m.conditions, str(device))
    table = _TABLES.get(key)
    if table is None:
        values = [v for dim in m.outer for v in dim]
        for off, lim, wr, wa, wc, coefs in m.conditions:
            values += [off, lim, wr, wa, wc, *coefs]
        table = torch.tensor(values or [0], dtype=torch.int64, device=device)
        _TABLES.put(key, table)
    return table


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def configure(m: moves.Move, alignment: int, wide: bool) -> Tuple[int, Tuple[int, ...], Dict[str, Any]]:
    """How ``move_kernel`` runs non-empty move ``m``: ``(programs, scalar arguments after the table, constexprs)``.

    Pure (no device, no tensor): the launch and the ahead-of-time compile test share it.
    """
    import triton.language as tl

    tile = _TILE[m.word]
    bc = min(_pow2(m.ext_c), tile)
    ba = min(_pow2(m.ext_a), max(1, tile // bc))
    br = min(_pow2(m.ext_r), max(1, tile // (bc * ba)))
    tiles = (-(-m.ext_r // br), -(-m.ext_a // ba), -(-m.ext_c // bc))
    src_rows = m.src_a == 1 and m.src_c == m.ext_a == ba  # (c, a) one contiguous run in src
    dst_rows = m.dst_c == 1 and m.dst_a == m.ext_c == bc  # (a, c) one contiguous run in dst
    split = src_rows and ba == 2
    join = dst_rows and bc == 2 and not split
    # narrow items in pairs travel as words of twice the width: both sides' steps must be even
    packed = m.word <= 2 and (split or join) and alignment % (2 * m.word) == 0 and (
        (split and m.src0 % 2 == 0 and m.src_r % 2 == 0 and all(s % 2 == 0 for _, s, _ in m.outer))
        or (join and not m.conditions and m.dst0 % 2 == 0 and m.dst_r % 2 == 0 and all(d % 2 == 0 for _, _, d in m.outer)))
    scalars = (m.ext_r, m.src_r, m.dst_r, m.ext_a, m.src_a, m.dst_a, m.ext_c, m.src_c, m.dst_c, *tiles, m.src0, m.dst0)
    pair = {1: tl.uint16, 2: tl.uint32}.get(m.word, tl.uint64)
    constants = dict(
        OUTER=len(m.outer), NCOND=len(m.conditions), FILL=m.fill, WIDE=wide,
        BR=br, BA=ba, BC=bc, SRC_ROWS=src_rows, DST_ROWS=dst_rows, SAME=m.src_c == 1,
        SPLIT=split, JOIN=join, PACKED=packed, PAIR=pair, BITS=8 * m.word,
    )
    return math.prod(tiles) * math.prod(e for e, _, _ in m.outer), scalars, constants


class _Launch:
    """A planned launch: the move and everything the kernel call needs but the two tensors."""

    def __init__(self, m: moves.Move, alignment: int, device: Any, wide: bool) -> None:
        self.move = m
        self.word_dtype = None
        if m.empty:
            return
        import torch

        from .triton_kernels import move_kernel

        self.kernel = move_kernel
        self.word_dtype = getattr(torch, _WORD_DTYPES[m.word])
        programs, scalars, constants = configure(m, alignment, wide)
        self.grid = (programs,)
        self.args = (_table(m, device), *scalars)
        self.constants = dict(constants, num_warps=_WARPS)

    def words(self, tensor: Any) -> Any:
        """``tensor``'s memory as the kernel's words, from its first element."""
        if tensor.element_size() == self.move.word:
            return tensor if tensor.dtype == self.word_dtype else tensor.view(self.word_dtype)
        return _words(tensor, self.move.word)

    def __call__(self, data: Any, out: Any) -> Any:
        """Write the move of ``data`` into ``out`` (tensors of the shapes, strides and alignment planned)."""
        if self.move.empty:
            if out.numel():  # SpaceToBatch of an empty input: all padding
                out.zero_()
            return out
        self.kernel[self.grid](self.words(data), self.words(out), *self.args, **self.constants)
        return out


_LAUNCHES: "BoundedCache[_Launch]" = BoundedCache(512)


def _launch(op: str, params: Dict[str, Any], data: Any, out: Any, alignment: int) -> _Launch:
    """The planned launch of ``op`` from ``data`` into ``out`` (kept per shapes, strides, width, alignment, device)."""
    key = (op, tuple(sorted(params.items())), data.shape, data.stride(), out.shape, out.stride(),
           data.element_size(), alignment, data.device)
    launch = _LAUNCHES.get(key)
    if launch is None:
        m = moves.move(op, params, tuple(data.shape), data.stride(), tuple(out.shape), out.stride(),
                       data.element_size(), alignment)
        # offsets inside a tile need 64 bits past 2**31 words
        span = max(_span(data) * data.element_size(), _span(out) * out.element_size()) // max(m.word, 1)
        launch = _Launch(m, alignment, data.device, span + abs(m.src0) + abs(m.dst0) >= 2 ** 31 - 1)
        _LAUNCHES.put(key, launch)
    return launch


def into(op: str, params: Dict[str, Any], data: Any, out: Any) -> Any:
    """Write ``op(data)`` into the tensor ``out`` (right shape and dtype, no overlap) with one launch."""
    return _launch(op, params, data, out, _alignment(data, out))(data, out)


class Planned:
    """Repeated calls of ``op`` on tensors of one shape, strides, dtype and device (a recipe's GPU path).

    A call that records no gradient launches straight away: no validation,
    no planning, no key of shapes. Its launch is kept per alignment of the
    two tensors (and ``out``'s strides, for ``out=`` of the checked shape and
    dtype). A call that records a gradient, or whose ``out`` overlaps the
    input, takes :func:`apply`.
    """

    def __init__(self, op: str, params: Dict[str, Any], like: Any, shape: Tuple[int, ...]) -> None:
        import torch

        self.op, self.params, self.shape = op, params, shape
        self.grad_enabled = torch.is_grad_enabled
        # a fresh output in the input's memory format (the recipe's inputs all have like's strides)
        self.contiguous = torch_layout.memory_format(like) == torch.contiguous_format
        self.launches: Dict[Any, _Launch] = {}

    def __call__(self, data: Any, out: Any = None) -> Any:
        if data.requires_grad and self.grad_enabled():
            return apply(self.op, self.params, data, out, self.shape)
        if out is None:
            out = data.new_empty(self.shape) if self.contiguous else torch_layout.empty(self.shape, data)
            alignment = key = _alignment(data, out)
        elif overlap(data, out):
            return apply(self.op, self.params, data, out, self.shape)  # reads a copy of the input
        else:
            alignment = _alignment(data, out)
            key = (alignment, out.stride())
        launch = self.launches.get(key)
        if launch is None:
            if len(self.launches) > 64:
                self.launches.clear()
            launch = self.launches[key] = _launch(self.op, self.params, data, out, alignment)
        return launch(data, out)


def _out_shape(op: str, params: Dict[str, Any], shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The output shape, by ``datamove.rules.shapes`` (which raises DataMoveError on bad input)."""
    return tuple(opset.OPS[op].shape_rule(shape, *opset.OPS[op].args(params)))


def fresh(op: str, params: Dict[str, Any], data: Any, shape: Optional[Tuple[int, ...]] = None) -> Any:
    """``op`` on tensor ``data`` into a new tensor in its memory format (validated by the shape rule if no ``shape``)."""
    if shape is None:
        shape = _out_shape(op, params, tuple(data.shape))
    return into(op, params, data, torch_layout.empty(shape, data))


# ------------------------------------------------------------------ the entry


def apply(op: str, params: Dict[str, Any], data: Any, out: Optional[Any], shape: Optional[Tuple[int, ...]] = None) -> Any:
    """Run validated ``op`` on a torch tensor or CuPy array ``data``; ``out`` checked by the caller.

    ``shape``: the output shape, when the caller knows it.
    """
    import torch

    cupy = _is_cupy(data)
    tensor = _torch_of(data)
    target = _torch_of(out) if out is not None else None
    if cupy:
        import cupy as cp

        stream = torch.cuda.ExternalStream(cp.cuda.get_current_stream().ptr, device=tensor.device)
        with torch.cuda.stream(stream):
            result = _apply_torch(op, params, tensor, target, shape)
        return out if out is not None else cp.from_dlpack(result)
    return _apply_torch(op, params, tensor, target, shape)


def _apply_torch(op: str, params: Dict[str, Any], tensor: Any, out: Optional[Any], shape: Optional[Tuple[int, ...]] = None) -> Any:
    import torch

    recording = torch.is_grad_enabled()
    if recording and (tensor.requires_grad or (out is not None and out.requires_grad)):
        from ..pytorch import custom_ops as torch_ops  # the custom op (autograd's node), whose body comes back here

        result = torch_ops.custom_ops()[op](tensor, *torch_ops.op_args(op, params))
        if out is None:
            return result
        out.copy_(result)
        return out
    if tensor.requires_grad:
        tensor = tensor.detach()
    if out is None:
        return fresh(op, params, tensor, shape)
    if libraries.TORCH.lazy(out):  # PyTorch's copy_ writes its values, the kernel only bits
        out.copy_(fresh(op, params, tensor, shape))
        return out
    if overlap(tensor, out):
        tensor = tensor.clone()  # a permutation cannot be done in place
    with torch.no_grad():
        into(op, params, tensor, out)
    return out
