"""The array-API engine: the specs' reshape/transpose/reshape formulas, written once against ``xp``.

It runs on any array that ``array_api_compat.array_namespace`` knows
(NumPy, PyTorch CPU/CUDA, JAX, CuPy, Dask, ``array_api_strict``) and uses only
what the standard has: ``reshape``, ``permute_dims``, basic slicing (crops),
``zeros`` and ``concat`` (pads; JAX has no item assignment). So the result is
an array of the input's library on the input's device, PyTorch and JAX
differentiate through it (the backward of reshape/permute/slice/concat is the
adjoint op: ``space_to_batch`` with pads = crops for ``batch_to_space``, the
other mode-matched depth op for the depth ops), ``jax.jit`` traces it with the
parameters static, and Dask keeps it lazy, chunk by chunk (``dask.array``'s
reshape rechunks the split axes to block multiples itself).

Interface. Plans describe the output as strided views, which the standard
cannot express, so this engine is *functional*: it works from the operation's
name and its resolved parameters and returns a new array::

    apply(op, params, data) -> array

``op`` is one of the four names, ``params`` the normalised dict of
``datamove.rules.shapes.resolve_*(...).params`` (Python ints and strings), ``data``
an already validated array. The dispatch calls it for every array that is
not a NumPy array (through :mod:`datamove.dispatch.foreign`) and for NumPy arrays with
``engine="array_api"``, through the engines' protocol ``run(call, data, out)``.

>>> import numpy as np
>>> x = np.arange(8).reshape(1, 2, 4)
>>> apply("space_to_depth", {"mode": "blocks_first", "block_size": 2}, x)[0].tolist()
[[0, 2], [4, 6], [1, 3], [5, 7]]
>>> apply("space_to_batch", {"block_shape": (1, 2), "pads_begin": (0, 1), "pads_end": (0, 1)},
...       np.arange(1, 5).reshape(1, 4)).tolist()
[[0, 2, 4], [1, 3, 0]]
"""

from __future__ import annotations

import math
import sys
from typing import Any, Dict, List, Sequence, Tuple

from ..pytorch import layout as torch_layout

__all__ = ["apply", "can_take", "run", "namespace"]


def namespace(array: Any) -> Any:
    """The array-API namespace of ``array`` (``array_api_compat`` is imported here, on first use)."""
    import array_api_compat

    return array_api_compat.array_namespace(array)


def can_take(array: Any) -> bool:
    """Whether ``array_api_compat`` knows a namespace for ``array``."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(array, numpy.ndarray):
        # The standard's dtypes only (objects, strings, structured, ml_dtypes stay with the
        # NumPy engines); answered without importing array_api_compat: asked on every NumPy call.
        return array.dtype.kind in "biufc"
    try:
        namespace(array)
    except TypeError:
        return False
    return True


def run(call: Any, data: Any, out: Any) -> Any:
    """The engine protocol (:mod:`datamove.engines`): ``call`` on ``data``, written into ``out`` if given."""
    result = apply(call.op, call.params, data)
    if out is None:
        return result
    from ..arrays import libraries

    libraries.of(out).write(out, result)  # type: ignore[union-attr]
    return out


# --------------------------------------------------------------- the formulas


def _batch_to_space(xp: Any, data: Any, block_shape: Sequence[int], crops_begin: Sequence[int], crops_end: Sequence[int]) -> Any:
    # BatchToSpace-2, steps 1-4 of the spec.
    batch, dims = data.shape[0], tuple(data.shape[1:])
    blocks = tuple(block_shape[1:])
    m = len(blocks)
    new_batch = batch // math.prod(blocks)
    x = xp.reshape(data, blocks + (new_batch,) + dims)
    perm: List[int] = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    x = xp.permute_dims(x, tuple(perm))
    full = (new_batch,) + tuple(d * b for d, b in zip(dims, blocks))
    x = xp.reshape(x, full)
    if any(crops_begin) or any(crops_end):
        x = x[tuple(slice(b, n - e) for b, n, e in zip(crops_begin, full, crops_end))]
    return x


def _pad(xp: Any, data: Any, pads_begin: Sequence[int], pads_end: Sequence[int]) -> Any:
    """Zero padding with ``zeros`` + ``concat`` (no item assignment: JAX has none)."""
    x = data
    for axis, (before, after) in enumerate(zip(pads_begin, pads_end)):
        if not before and not after:
            continue
        parts = []
        for width in (before, after):
            shape = list(x.shape)
            shape[axis] = width
            parts.append(_zeros(xp, x, tuple(shape), axis) if width else None)
        x = xp.concat([p for p in (parts[0], x, parts[1]) if p is not None], axis=axis)
    return x


def _zeros(xp: Any, like: Any, shape: Tuple[int, ...], axis: int) -> Any:
    dask_array = sys.modules.get("dask.array")
    if dask_array is not None and isinstance(like, dask_array.Array):
        # The neighbour's chunks along the other axes: concat then needs no rechunk.
        chunks = list(like.chunks)
        chunks[axis] = (shape[axis],)
        return dask_array.zeros(shape, dtype=like.dtype, chunks=tuple(chunks))
    device = _device(like)
    if device is None:
        return xp.zeros(shape, dtype=like.dtype)
    return xp.zeros(shape, dtype=like.dtype, device=device)


def _device(array: Any) -> Any:
    try:
        import array_api_compat

        return array_api_compat.device(array)
    except Exception:  # a tracer under jax.jit has no device: use the default one
        return None


def _space_to_batch(xp: Any, data: Any, block_shape: Sequence[int], pads_begin: Sequence[int], pads_end: Sequence[int]) -> Any:
    # SpaceToBatch-2: zero-pad, then the inverse steps of BatchToSpace.
    x = _pad(xp, data, pads_begin, pads_end)
    batch, padded = x.shape[0], tuple(x.shape[1:])
    blocks = tuple(block_shape[1:])
    m = len(blocks)
    split = (batch,) + tuple(v for p, b in zip(padded, blocks) for v in (p // b, b))
    x = xp.reshape(x, split)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    x = xp.permute_dims(x, tuple(perm))
    return xp.reshape(x, (batch * math.prod(blocks),) + tuple(p // b for p, b in zip(padded, blocks)))


def _space_to_depth(xp: Any, data: Any, mode: str, block_size: int) -> Any:
    # SpaceToDepth-1, the spec's three steps.
    n, c, *dims = data.shape
    k = len(dims)
    x = xp.reshape(data, (n, c) + tuple(v for d in dims for v in (d // block_size, block_size)))
    if mode == "blocks_first":
        perm = [0] + [3 + 2 * i for i in range(k)] + [1] + [2 + 2 * i for i in range(k)]
    else:
        perm = [0, 1] + [3 + 2 * i for i in range(k)] + [2 + 2 * i for i in range(k)]
    x = xp.permute_dims(x, tuple(perm))
    return xp.reshape(x, (n, c * block_size**k) + tuple(d // block_size for d in dims))


def _depth_to_space(xp: Any, data: Any, mode: str, block_size: int) -> Any:
    # DepthToSpace-1, the spec's three steps.
    n, c, *dims = data.shape
    k = len(dims)
    new_c = c // block_size**k
    if mode == "blocks_first":
        x = xp.reshape(data, (n,) + (block_size,) * k + (new_c,) + tuple(dims))
        perm = [0, k + 1]
        for i in range(k):
            perm += [k + 2 + i, 1 + i]
    else:
        x = xp.reshape(data, (n, new_c) + (block_size,) * k + tuple(dims))
        perm = [0, 1]
        for i in range(k):
            perm += [k + 2 + i, 2 + i]
    x = xp.permute_dims(x, tuple(perm))
    return xp.reshape(x, (n, new_c) + tuple(d * block_size for d in dims))


_FORMULAS = {
    "batch_to_space": lambda xp, x, p: _batch_to_space(xp, x, p["block_shape"], p["crops_begin"], p["crops_end"]),
    "space_to_batch": lambda xp, x, p: _space_to_batch(xp, x, p["block_shape"], p["pads_begin"], p["pads_end"]),
    "space_to_depth": lambda xp, x, p: _space_to_depth(xp, x, p["mode"], p["block_size"]),
    "depth_to_space": lambda xp, x, p: _depth_to_space(xp, x, p["mode"], p["block_size"]),
}


def apply(op: str, params: Dict[str, Any], data: Any, xp: Any = None) -> Any:
    """``op`` with resolved ``params`` applied to ``data``: a new array of ``data``'s library and device.

    Parameters
    ----------
    op : {"batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space"}
    params : dict
        The normalised parameters of ``datamove.rules.shapes.resolve_<op>``.
    data : array
        Already validated against ``params``.
    xp : namespace, optional
        ``data``'s array-API namespace (found with ``array_api_compat`` if not given).

    Returns
    -------
    array
        Never a view of ``data`` (a reshape that moved nothing is copied), so
        writing into it leaves ``data`` alone; C-contiguous for NumPy and
        CuPy, in ``data``'s memory format for PyTorch (:mod:`.torch_layout`;
        BatchToSpace's crop is copied out of the uncropped result).
    """
    if xp is None:
        xp = namespace(data)
    dask_array = sys.modules.get("dask.array")
    if dask_array is not None and isinstance(data, dask_array.Array) and math.prod(data.shape) == 0:
        # dask's reshape cannot split or merge empty axes: the empty result, shaped by NumPy
        import numpy

        shape = _FORMULAS[op](numpy, numpy.empty(data.shape, numpy.bool_), params).shape
        return dask_array.zeros(shape, dtype=data.dtype, chunks=-1)
    result = _FORMULAS[op](xp, data, params)
    return _unaliased(xp, result, data)


def _unaliased(xp: Any, result: Any, data: Any) -> Any:
    """``result``, copied if it shares memory with ``data`` (a reshape chain that moved nothing) or is not laid out
    as :func:`apply` promises (C-contiguous; a PyTorch tensor in ``data``'s memory format)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(result, torch.Tensor):
        layout = torch_layout.memory_format(data)
        if result.numel() and result.untyped_storage().data_ptr() == data.untyped_storage().data_ptr():
            return result.clone(memory_format=layout)
        return result.contiguous(memory_format=layout)
    numpy = sys.modules.get("numpy")
    cupy = sys.modules.get("cupy")
    for module in (numpy, cupy):
        if module is not None and isinstance(result, module.ndarray):
            if module.may_share_memory(result, data) or not result.flags.c_contiguous:
                return module.array(result, order="C", copy=True)
            return result
    if type(result).__module__.startswith("array_api_strict"):
        inner, source = getattr(result, "_array", None), getattr(data, "_array", None)
        if inner is None or source is None or numpy is None or numpy.may_share_memory(inner, source):
            return xp.asarray(result, copy=True)
        return result
    return result  # JAX and Dask arrays are immutable: sharing is harmless
