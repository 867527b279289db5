"""Arrays of every library: recognise them, pick the path, give the result back in their kind.

``datamove.ops`` validates and plans from ``data.shape`` alone, then hands any
array that is not a NumPy array (and NumPy arrays with ``engine="array_api"``)
to :func:`run`. Two paths:

* **zero copy**: a PyTorch CPU tensor that needs no gradient (and, with
  ``engine="numpy"``/``"native"``, any CPU array exposing DLPack) is viewed as a
  NumPy array over the same memory (dtypes NumPy lacks, such as bfloat16 and
  float8, reinterpreted as integers of the same width) and runs on the NumPy
  or native engine exactly as a NumPy array does; the result comes back as a
  tensor over the NumPy result's memory (``torch.from_numpy``), and ``out=``
  is written through its own NumPy view.
* **generic**: everything else that ``array_api_compat`` knows (PyTorch with
  autograd or on CUDA, JAX, CuPy, Dask, ``array_api_strict``) goes through
  :mod:`datamove.engines.array_api_engine`, which keeps the library, device,
  laziness and differentiability.

No framework is imported here: libraries are recognised by the modules the
caller has already imported (``sys.modules``), and ``array_api_compat`` is
imported only when a non-NumPy array arrives.

``out=`` takes an array of the caller's library, device, output shape and
dtype. PyTorch tensors are written in place (``copy_``, so autograd records
it), CuPy and ``array_api_strict`` arrays by item assignment. JAX arrays are
immutable and Dask arrays lazy: ``out=`` with them raises :class:`TypeError`
(use the returned array; with Dask, ``dask.array.store(result, target)``
streams it into any array-like target, e.g. a ``np.memmap``).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from . import engines, route
from .engines import torch_layout
from .errors import DataMoveError, brief
from .outputs import unaliased

__all__ = ["is_foreign", "checked", "library", "numpy_view", "facts", "run", "compiling", "compiled_call"]

# torch dtypes NumPy has (Tensor.numpy() gives them as themselves)
_TORCH_NUMPY = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)
# the rest (bfloat16, float8_*, complex32, ...) travel as integers of their width
_TORCH_WORDS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _dask_array_type() -> Optional[type]:
    module = sys.modules.get("dask.array")
    return None if module is None else module.Array


def is_foreign(data: Any) -> bool:
    """True for an array of a library other than NumPy (never converted with ``np.asarray``)."""
    if hasattr(data, "__array_namespace__") or hasattr(data, "__dlpack__"):
        return True
    dask_type = _dask_array_type()
    return dask_type is not None and isinstance(data, dask_type)


def checked(data: Any) -> Any:
    """``data``, after checking that it is dense and its shape known (a Dask array may have NaN dims)."""
    _check_dense(data, "data")
    for i, dim in enumerate(data.shape):
        if dim is None or (isinstance(dim, float) and dim != dim):
            raise DataMoveError(
                f"data.shape[{i}] is unknown ({dim}) in data.shape = {tuple(data.shape)}: "
                "the operations need concrete sizes (for Dask, call data.compute_chunk_sizes() first)"
            )
    return data


def _check_dense(array: Any, name: str) -> None:
    """A PyTorch tensor must be strided: sparse layouts and nested tensors have no strides, or no one shape."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(array, torch.Tensor) and (array.is_nested or array.layout != torch.strided):
        if array.is_nested:
            got = "a nested tensor: pad it with .to_padded_tensor(0), or call once per component"
        else:
            got = f"a tensor of layout {array.layout}: convert it with .to_dense() first"
        raise TypeError(f"{name} must be a dense (strided) tensor, got {got}")


def library(array: Any) -> str:
    """The name of ``array``'s kind in messages: ``"torch.Tensor"``, ``"jax.Array"``, ``"numpy.ndarray"``, ..."""
    if isinstance(array, np.ndarray):
        return "numpy.ndarray"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(array, torch.Tensor):
        return "torch.Tensor"
    dask_type = _dask_array_type()
    if dask_type is not None and isinstance(array, dask_type):
        return "dask.array.Array"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(array, jax.Array):
        return "jax.Array"
    module = type(array).__module__.split(".")[0]
    return f"{module}.{type(array).__qualname__}"


def compiling(data: Any) -> bool:
    """True while ``torch.compile``, ``torch.export`` or ``torch.jit.trace`` traces a call on a tensor."""
    torch = sys.modules.get("torch")
    return (torch is not None and isinstance(data, torch.Tensor)
            and (torch.compiler.is_compiling() or torch._C._is_tracing()))


def compiled_call(op: str, args: Tuple[Any, ...], data: Any, out: Any) -> Any:
    """The call as the custom op ``torch.ops.datamove.<op>``, which a compiled graph keeps whole
    (under ``torch.jit.trace``: as PyTorch ops, :func:`datamove.torch_onnx.traced`).

    Validation happens in the op's fake implementation (``datamove.shapes``), at trace time.
    """
    torch = sys.modules["torch"]
    from . import torch_onnx

    if not torch.compiler.is_dynamo_compiling() and (  # Dynamo (torch.compile) cannot trace these questions
            torch._C._is_tracing() or (torch_onnx.exporting() and not torch_onnx.ready())):
        # torch.jit.trace, torch.onnx.export(dynamo=False), or an ONNX export without datamove's
        # translations in its library: PyTorch's own ops
        return torch_onnx.traced(op, args, data, out)
    if not hasattr(torch.ops.datamove, op):
        raise DataMoveError(
            "torch.ops.datamove is not registered yet and torch.compile cannot trace its registration: "
            "import torch before datamove, or make one datamove call on a tensor before compiling"
        )
    from . import torch_ops

    result = getattr(torch.ops.datamove, op)(data, *torch_ops.custom_op_args(op, args))
    if out is None:
        return result
    out.copy_(result)
    return out


def _is_cupy(array: Any) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(array, cupy.ndarray)


def _nbytes(array: Any) -> int:
    try:
        return int(getattr(array, "nbytes", 0))
    except Exception:  # an array whose size is not known yet (a lazy one with unknown chunks)
        return 0


def _is_torch(array: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(array, torch.Tensor)


def _torch_needs_grad(tensor: Any) -> bool:
    return bool(tensor.requires_grad) and sys.modules["torch"].is_grad_enabled()


def numpy_view(array: Any) -> Optional[np.ndarray]:
    """A NumPy array over ``array``'s memory (no copy), or None when there is none.

    None for arrays off the CPU, PyTorch tensors that need a gradient (a
    view would cut them off the graph), tensors under a transform or with
    a lazy conjugate/negative bit, tracers, lazy arrays.
    """
    if _is_torch(array):
        return _torch_view(array)
    if isinstance(array, np.ndarray) or not hasattr(array, "__dlpack__"):
        return None
    try:
        if array.__dlpack_device__()[0] != 1:  # kDLCPU
            return None
        return np.from_dlpack(array)
    except Exception:  # no DLPack export for this one (a tracer, an exotic dtype): generic path
        return None


def _torch_view(tensor: Any) -> Optional[np.ndarray]:
    torch = sys.modules["torch"]
    if (
        _torch_needs_grad(tensor)
        or type(tensor) not in (torch.Tensor, torch.nn.Parameter)
        or tensor.device.type != "cpu"
        or tensor.layout != torch.strided
        or tensor.is_quantized
        or tensor.is_conj()
        or tensor.is_neg()
    ):
        return None
    try:
        tensor = tensor.detach()
        name = str(tensor.dtype).rpartition(".")[2]
        if name not in _TORCH_NUMPY:
            word = _TORCH_WORDS.get(tensor.element_size())
            if word is None:
                return None
            tensor = tensor.view(getattr(torch, word))
        return tensor.numpy()
    except (RuntimeError, TypeError):  # e.g. a functorch-wrapped tensor
        return None


def _check_engine(engine: Any) -> None:
    if not isinstance(engine, str):
        raise TypeError(f"engine must be a string, got {type(engine).__name__} {brief(engine)}")
    if engine != "auto" and engine not in engines.ENGINES:
        raise DataMoveError(f"engine must be 'auto' or one of {list(engines.ENGINES)}, got {brief(engine)}")


def _check_out(data: Any, out: Any, shape: Tuple[int, ...]) -> None:
    kind, out_kind = library(data), library(out)
    if kind == "jax.Array":
        raise TypeError("out= cannot be used with JAX arrays: they are immutable; use the returned array")
    if kind == "dask.array.Array":
        raise TypeError(
            "out= cannot be used with Dask arrays: they are lazy; use the returned array "
            "(dask.array.store(result, target) writes it into a np.memmap or any array-like target)"
        )
    if out_kind != kind:
        raise TypeError(f"out must be a {kind} like data, got {out_kind}")
    _check_dense(out, "out")
    if tuple(out.shape) != shape:
        raise DataMoveError(f"out.shape must be the output shape {shape}, got {tuple(out.shape)}")
    if out.dtype != data.dtype:
        raise DataMoveError(f"out.dtype must be data.dtype = {data.dtype}, got {out.dtype}")
    import array_api_compat

    if array_api_compat.device(out) != array_api_compat.device(data):
        raise DataMoveError(
            f"out.device must be data.device = {array_api_compat.device(data)}, got {array_api_compat.device(out)}"
        )
    if _is_torch(out) and out.is_leaf and _torch_needs_grad(out):
        raise DataMoveError("out is a leaf tensor that requires grad: PyTorch cannot write into it in place")
    if _is_torch(out) and any(s == 0 and n > 1 for n, s in zip(out.shape, out.stride())):
        # PyTorch's own rule for written-to tensors (an expanded tensor): else the last write wins, silently
        raise DataMoveError(
            f"out must not repeat elements, got out.stride() = {tuple(out.stride())} with stride 0 along an axis "
            f"of size > 1 (out.shape = {tuple(out.shape)}): more than one element would share one memory location"
        )


def _from_numpy(result: np.ndarray, like: Any) -> Any:
    """The NumPy engine's ``result`` as an array of ``like``'s library."""
    if _is_torch(like):
        torch = sys.modules["torch"]
        tensor = torch.from_numpy(result)
        return tensor if tensor.dtype == like.dtype else tensor.view(like.dtype)
    if hasattr(like, "__array_namespace__") or _able_namespace(like):
        from .engines import array_api_engine

        return array_api_engine.namespace(like).asarray(result)  # a copy into the library's memory
    return result  # an object that only speaks DLPack: NumPy is the nearest kind


def _able_namespace(array: Any) -> bool:
    from .engines import array_api_engine

    return array_api_engine.can_take(array)


def _run_on_view(plan: Any, view: np.ndarray, data: Any, out: Any, engine: str) -> Any:
    """The NumPy path of ``datamove.ops`` on NumPy views of foreign arrays."""
    execute = engines.select(engine, view)
    if out is None and _is_torch(data) and torch_layout.memory_format(data) != sys.modules["torch"].contiguous_format:
        out = torch_layout.empty(plan.out_shape, data)  # channels-last in, channels-last out (a fresh tensor)
        execute(plan, view, numpy_view(out))
        return out
    if out is None:
        result = np.empty(plan.out_shape, view.dtype)
        return _from_numpy(execute(plan, view, result), data)
    target = numpy_view(out)
    if target is None or not target.flags.writeable:
        result = np.empty(plan.out_shape, view.dtype)
        _write(out, _from_numpy(execute(plan, view, result), data))
        return out
    execute(plan, unaliased(view, target), target)
    return out


def _write(out: Any, result: Any) -> None:
    if _is_torch(out):
        out.copy_(result)
    else:
        out[...] = result


def facts(data: Any, engine: str = "auto", out: Any = None, view: Any = False) -> route.Facts:
    """The facts :func:`datamove.route.route` decides ``data``'s path from (``view``: its NumPy view, if known).

    >>> import numpy as np
    >>> from datamove import route
    >>> route.able(facts(np.zeros(3)))
    ['numpy', 'native', 'array_api']
    """
    from .engines import array_api_engine, triton_engine

    if view is False:
        view = data if isinstance(data, np.ndarray) else numpy_view(data)
    device = getattr(data, "device", None)
    return route.Facts(
        library(data), engine, view=view is not None, namespace=array_api_engine.can_take(data),
        triton=triton_engine.can_take(data), cuda=getattr(device, "type", None) == "cuda" or _is_cupy(data),
        nbytes=_nbytes(data),
        out_view=out is None or not _is_torch(out) or numpy_view(out) is not None,
    )


def run(op: str, params: Dict[str, Any], plan: Any, data: Any, out: Any, engine: Any, check_numpy_out: Callable[..., None]) -> Any:
    """Execute validated ``op`` on ``data`` of any library; ``datamove.ops`` calls this.

    ``plan`` is the op's plan (for the zero-copy path), ``params`` its
    resolved parameters (for the generic path), ``check_numpy_out`` the ops'
    check of a NumPy ``out``.
    """
    _check_engine(engine)
    shape = tuple(plan.out_shape)
    from .engines import array_api_engine

    if isinstance(data, np.ndarray):  # engine="array_api" on NumPy
        engines.select(engine, data)  # the standard's dtypes only; else the error naming the engines that can
        if out is not None:
            check_numpy_out(out, shape, data.dtype)
        result = array_api_engine.apply(op, params, data)
        if out is None:
            return np.ascontiguousarray(result)
        np.copyto(out, result, casting="no")
        return out

    if out is not None:
        _check_out(data, out, shape)
    from .engines import triton_engine

    view = numpy_view(data)
    path = route.route(facts(data, engine, out, view))
    if path.engine == "triton":
        return triton_engine.apply(op, params, data, out)  # CUDA arrays: one fused kernel
    if path.through_view:
        assert view is not None
        return _run_on_view(plan, view, data, out, path.engine)
    result = array_api_engine.apply(op, params, data)
    if out is None:
        return result
    _write(out, result)
    return out
