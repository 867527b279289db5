"""The JAX engine: each call one Pallas kernel, on JAX arrays (GPU kernels; on the CPU, Pallas' interpreter).

The op becomes one masked strided move (:mod:`datamove.plans.moves`, the
Triton engine's plan) and :func:`~datamove.engines.pallas_kernels.move_call`
runs it: every input byte read once, every output byte written once. Items
travel as unsigned words of their width (bool as ``uint8``; complex as its two
float parts), so every dtype of JAX but the sub-byte ones (int4, float4, ...)
works, NaN payloads and all.

* ``jax.jit``: shapes are static; the kernel is built per shape and dtype,
  and an eager call runs a jitted function kept per shape (no retrace).
* ``jax.grad``: a ``jax.custom_vjp`` whose backward is the adjoint op
  (SpaceToBatch with pads = crops for BatchToSpace and back, the other depth
  op with the same mode and size) through the same kernel, so gradients of
  any order stay one pass each. Forward mode (``jax.jvp``) is not defined
  for a ``custom_vjp``.
* ``jax.vmap``: Pallas batches the kernel (one more grid axis).

Where it runs: the route table (:mod:`datamove.engines.route`) picks it under
``engine="auto"`` only for a JAX array on a GPU of at least
``PALLAS_MIN_BYTES``; ``engine="pallas"`` forces it on any JAX array. Off a
GPU (a CPU array, or a tracer under ``jax.jit`` when JAX's default backend is
not a GPU) the kernel runs in Pallas' interpreter: bit for bit the GPU's
result, slowly (for tests). JAX and Pallas are imported on the first call
that runs here, never by ``import datamove``.

>>> import jax.numpy as jnp, datamove as dm
>>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
>>> dm.space_to_depth(x, "blocks_first", 2, engine="pallas")[0, :, 0, 0].tolist()
[0.0, 1.0, 4.0, 5.0]
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any, Callable, Dict, Tuple

import numpy as np

from ..arrays import libraries
from .. import opset
from .route import PALLAS_MIN_BYTES  # the route table's threshold, re-exported
from ..plans import moves

__all__ = ["PALLAS_MIN_BYTES", "can_take", "run", "apply", "interpreted"]

# JAX's sub-byte dtypes (ml_dtypes): no whole word per item
_SUB_BYTE = frozenset(("int2", "uint2", "int4", "uint4", "float4_e2m1fn"))
_WORDS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
# The kernel's indices are 32-bit: every array, counted in words, and one past its end must fit.
_MAX_WORDS = 2 ** 31 - 2


def _jax() -> Any:
    return sys.modules.get("jax")


def can_take(array: Any) -> bool:
    """A JAX array (or tracer) of a dtype of whole bytes, under 2**31 words, on at most one device."""
    jax = _jax()
    if jax is None or not isinstance(array, jax.Array):
        return False
    dtype = np.dtype(array.dtype)
    if dtype.name in _SUB_BYTE or dtype.itemsize not in _WORDS and dtype.kind != "c":
        return False
    if math.prod(array.shape) * dtype.itemsize // _word(dtype) > _MAX_WORDS:
        return False
    if isinstance(array, jax.core.Tracer):
        return True  # under a transformation: where it runs is jit's choice
    try:
        return len(array.devices()) == 1  # a sharded array: XLA's own ops, which keep its sharding
    except Exception:  # a deleted or donated array: let the array-API engine say so
        return False


def interpreted(array: Any) -> bool:
    """Whether the kernel runs in Pallas' interpreter for ``array``: everywhere but a GPU (a tracer: unless
    JAX's default backend, where jit runs it, is a GPU)."""
    return not libraries.JAX.cuda(array)


def run(call: Any, data: Any, out: Any) -> Any:
    """The engine protocol (:mod:`datamove.engines`): ``call`` on ``data``, a new array (JAX arrays take no ``out=``).

    An output of 2**31 words or more (SpaceToBatch's pads can make one from a smaller input) runs on the
    array-API engine.
    """
    assert out is None, "JAX arrays are immutable: the dispatcher refuses out="
    if math.prod(call.out_shape) * np.dtype(data.dtype).itemsize // _word(np.dtype(data.dtype)) > _MAX_WORDS:
        from . import array_api_engine  # SpaceToBatch's pads made the output too large for 32-bit indices

        return array_api_engine.run(call, data, out)
    return apply(call.op, call.params, data)


def apply(op: str, params: Dict[str, Any], data: Any) -> Any:
    """Validated ``op`` with resolved ``params`` on the JAX array ``data``: differentiable, jit- and vmap-able."""
    return _differentiable(op, _frozen(params), interpreted(data))(data)


def _frozen(params: Dict[str, Any]) -> Tuple[Tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items()))


@functools.lru_cache(maxsize=256)
def _differentiable(op: str, params: Tuple[Tuple[str, Any], ...], interpret: bool) -> Callable[[Any], Any]:
    """``op`` as a ``jax.custom_vjp`` whose backward is its adjoint through the same kernel."""
    import jax

    entry = opset.OPS[op]
    adjoint = opset.OPS[entry.adjoint]
    # the adjoint takes the same values (pads = crops; the same mode and size) under its own names
    adjoint_params = _frozen(dict(zip(adjoint.params, entry.args(dict(params)))))

    @jax.custom_vjp
    def moved(x: Any) -> Any:
        return _forward(op, params, x.shape, np.dtype(x.dtype), interpret)(x)

    def forward(x: Any) -> Tuple[Any, None]:
        return moved(x), None  # linear: the backward needs nothing of the input

    def backward(_: None, grad: Any) -> Tuple[Any]:
        if grad.dtype == jax.dtypes.float0:  # an integer input: its cotangent is float0 zeros
            shape = adjoint.shape_rule(tuple(grad.shape), *adjoint.args(dict(adjoint_params)))
            return (np.zeros(shape, jax.dtypes.float0),)
        return (_differentiable(entry.adjoint, adjoint_params, interpret)(grad),)

    moved.defvjp(forward, backward)
    return moved


@functools.lru_cache(maxsize=512)
def _forward(op: str, params: Tuple[Tuple[str, Any], ...], shape: Tuple[int, ...], dtype: np.dtype,
             interpret: bool) -> Callable[[Any], Any]:
    """A jitted function of an array of ``shape`` and ``dtype``: its words, the kernel, the result's dtype."""
    import jax
    import jax.numpy as jnp

    from . import pallas_kernels

    values = dict(params)
    out_shape = tuple(opset.OPS[op].shape_rule(shape, *opset.OPS[op].args(values)))
    word = _word(dtype)
    m = moves.move(op, values, shape, _c_strides(shape), out_shape, _c_strides(out_shape), dtype.itemsize,
                   alignment=word)  # no wider words: JAX has no free reshape-and-bitcast of a strided run
    per_item = dtype.itemsize // word
    n_src, n_dst = math.prod(shape) * per_item, math.prod(out_shape) * per_item
    unsigned = jnp.dtype(_WORDS[word])
    kernel = None if m.empty else pallas_kernels.move_call(m, n_src, n_dst, unsigned, interpret)

    def moved(x: Any) -> Any:
        words = _to_words(jax, jnp, x, unsigned)
        if kernel is None:  # nothing to read: SpaceToBatch of an empty input is all padding
            result = jnp.zeros(n_dst, unsigned)
        else:
            result = kernel(words)
        return _from_words(jax, jnp, result, out_shape, dtype, unsigned)

    return jax.jit(moved)


def _word(dtype: np.dtype) -> int:
    """The kernel's word for ``dtype``: its width, or a complex number's part's."""
    return dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize


def _c_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """Row-major strides in items: a JAX array's logical layout."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _to_words(jax: Any, jnp: Any, x: Any, unsigned: Any) -> Any:
    """``x``'s items as flat unsigned words: bit casts (bool's 0/1 bytes as they are; complex as its parts)."""
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.uint8)
    elif jnp.issubdtype(x.dtype, jnp.complexfloating):
        x = jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)
    return jax.lax.bitcast_convert_type(x, unsigned).reshape(-1)


def _from_words(jax: Any, jnp: Any, words: Any, shape: Tuple[int, ...], dtype: np.dtype, unsigned: Any) -> Any:
    """The inverse of :func:`_to_words`: flat ``words`` as an array of ``shape`` and ``dtype``."""
    if dtype.kind == "b":
        return words.reshape(shape) != 0
    if dtype.kind == "c":
        parts = jax.lax.bitcast_convert_type(words.reshape(*shape, 2), jnp.dtype(f"float{8 * unsigned.itemsize}"))
        return jax.lax.complex(parts[..., 0], parts[..., 1])
    return jax.lax.bitcast_convert_type(words.reshape(shape), dtype)
