"""One adapter per array library: what datamove needs to know about NumPy, PyTorch, CuPy, JAX, Dask and the rest.

:func:`of` gives the :class:`Library` of an array, found by its type among
the modules the caller has already imported (``sys.modules``: no framework
is imported here) and cached per type, as ``einops`` and ``array_api_compat``
do. Each adapter knows how to

* name the array's kind in messages (:attr:`Library.name`);
* key a repeated call (:meth:`Library.key`: type, shape, strides, dtype, device);
* give a NumPy array over the same memory (:meth:`Library.view`, no copy);
* allocate a result in the array's memory format (:meth:`Library.empty`)
  and turn a NumPy result into the library's kind (:meth:`Library.from_numpy`);
* check ``out=`` (:meth:`Library.check_out`), copy an input that overlaps it
  (:meth:`Library.unaliased`) and write a result into it (:meth:`Library.write`).

The dispatch (:mod:`datamove.dispatch`: its steps for each kind of array, and
:func:`datamove.dispatch.foreign.run`) asks these questions once per call;
engines never do. Adding a library is one subclass and one line of
:func:`_recognise`.

>>> import numpy as np
>>> of(np.zeros(3)).name, of([1, 2]) is None
('numpy.ndarray', True)
>>> of(np.zeros(3)).key(np.zeros((2, 3), np.float32))
((2, 3), (12, 4), dtype('float32'))
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Tuple

import numpy as np

from . import outputs
from .caches import BoundedCache
from ..errors import DataMoveError

__all__ = ["Library", "of", "foreign", "name", "checked", "check_dense", "needs_grad", "overlap", "span", "tensorflow",
           "NUMPY", "TORCH", "CUPY", "JAX", "DASK", "ARRAY_API", "DLPACK", "TENSORFLOW", "TENSORFLOW_VARIABLE"]


class Library:
    """The questions datamove asks about one library's arrays; these defaults fit any array-API library."""

    #: The arrays' kind in messages: ``"torch.Tensor"``, ``"jax.Array"``, ...
    name = "array"
    #: ``out=`` can be written (False: immutable or lazy arrays, whose :meth:`check_out` says why).
    writable = True

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        """What a repeated call's recipe depends on besides the op: type, shape, dtype, device; None: never cached."""
        try:
            return (type(array), tuple(array.shape), array.dtype, _device(array))
        except Exception:  # a shape or device that cannot be read without computing (lazy arrays)
            return None

    def view(self, array: Any) -> Optional[np.ndarray]:
        """A NumPy array over ``array``'s memory (no copy), or None when there is none (off the CPU, lazy, ...)."""
        if not hasattr(array, "__dlpack__"):
            return None
        try:
            if array.__dlpack_device__()[0] != 1:  # kDLCPU
                return None
            return np.from_dlpack(array)
        except Exception:  # no DLPack export for this one (a tracer, an exotic dtype)
            return None

    def cuda(self, array: Any) -> bool:
        """Whether ``array`` lives on a CUDA device."""
        return getattr(getattr(array, "device", None), "type", None) == "cuda"

    def nbytes(self, array: Any) -> int:
        try:
            return int(getattr(array, "nbytes", 0))
        except Exception:  # a lazy array whose size is not known yet
            return 0

    def check_out(self, data: Any, out: Any, shape: Tuple[int, ...]) -> None:
        """Refuse an ``out`` of another library, shape, dtype or device than the call's result."""
        if of(out) is not self:
            raise TypeError(f"out must be a {self.name} like data, got {name(out)}")
        check_dense(out, "out")
        if tuple(out.shape) != shape:
            raise DataMoveError(f"out.shape must be the output shape {shape}, got {tuple(out.shape)}")
        if out.dtype != data.dtype:
            raise DataMoveError(f"out.dtype must be data.dtype = {data.dtype}, got {out.dtype}")
        if _device(out) != _device(data):
            raise DataMoveError(f"out.device must be data.device = {_device(data)}, got {_device(out)}")

    def unaliased(self, data: Any, out: Any) -> Any:
        """``data``, or a copy of it when it may share memory with ``out`` (a permutation cannot be done in place)."""
        return data

    def write(self, out: Any, result: Any) -> None:
        """Copy ``result`` (an array of this library, of ``out``'s shape and dtype) into ``out``."""
        out[...] = result

    def empty(self, shape: Tuple[int, ...], like: Any) -> Any:
        """A new result of ``shape`` in ``like``'s dtype, device and memory format, for a NumPy engine to write
        through :meth:`view`; None where a NumPy result converted by :meth:`from_numpy` is as good (or the
        only way)."""
        return None

    def from_numpy(self, result: np.ndarray, like: Any) -> Any:
        """A NumPy engine's ``result`` as an array of ``like``'s library (a copy into its memory)."""
        import array_api_compat

        return array_api_compat.array_namespace(like).asarray(result)


def _device(array: Any) -> Any:
    import array_api_compat  # only ever reached with a non-NumPy array in hand

    return array_api_compat.device(array)


class _NumPy(Library):
    name = "numpy.ndarray"

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        return (array.shape, array.strides, array.dtype)

    def view(self, array: Any) -> Optional[np.ndarray]:
        return array  # type: ignore[no-any-return]

    def cuda(self, array: Any) -> bool:
        return False

    def nbytes(self, array: Any) -> int:
        return int(array.nbytes)

    def check_out(self, data: Any, out: Any, shape: Tuple[int, ...]) -> None:
        outputs.check_out(out, shape, data.dtype)

    def unaliased(self, data: Any, out: Any) -> Any:
        return outputs.unaliased(data, out)

    def write(self, out: Any, result: Any) -> None:
        np.copyto(out, result, casting="no")

    def empty(self, shape: Tuple[int, ...], like: Any) -> Any:
        return outputs.allocate(shape, like.dtype)

    def from_numpy(self, result: np.ndarray, like: Any) -> Any:
        return result


#: torch dtypes NumPy has (Tensor.numpy() gives them as themselves)
NUMPY_DTYPES_OF_TORCH = _TORCH_NUMPY = frozenset((
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
))
# the rest (bfloat16, float8_*, complex32, ...) travel as integers of their width
_TORCH_WORDS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


class _Torch(Library):
    name = "torch.Tensor"

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        # a conjugate or negative view has its base's strides but other values (tests/test_recipes.py: tensors
        # of one shape that differ in one field never share a recipe)
        try:
            return (type(array), array.shape, array.stride(), array.dtype, array.device, array.is_conj(), array.is_neg())
        except RuntimeError:  # sparse and nested tensors have no strides (check_dense says so)
            return None

    @staticmethod
    def lazy(tensor: Any) -> bool:
        """A conjugate or negative view: its memory holds its base's values, not its own (PyTorch applies the
        bit lazily), so whatever reads or writes the memory itself (a NumPy view, the core, a GPU kernel)
        cannot take it as it is."""
        return bool(tensor.is_conj() or tensor.is_neg())

    def view(self, array: Any) -> Optional[np.ndarray]:
        torch = sys.modules["torch"]
        if (
            needs_grad(array)
            or type(array) not in (torch.Tensor, torch.nn.Parameter)
            or array.device.type != "cpu"
            or array.layout != torch.strided
            or array.is_quantized
            or self.lazy(array)
        ):
            return None
        try:
            tensor = array.detach()
            if str(tensor.dtype).rpartition(".")[2] not in _TORCH_NUMPY:
                word = _TORCH_WORDS.get(tensor.element_size())
                if word is None:
                    return None
                tensor = tensor.view(getattr(torch, word))
            return tensor.numpy()  # type: ignore[no-any-return]
        except (RuntimeError, TypeError):  # e.g. a functorch-wrapped tensor
            return None

    def nbytes(self, array: Any) -> int:
        return int(array.numel() * array.element_size())

    def check_out(self, data: Any, out: Any, shape: Tuple[int, ...]) -> None:
        super().check_out(data, out, shape)
        if out.is_leaf and needs_grad(out):
            raise DataMoveError("out is a leaf tensor that requires grad: PyTorch cannot write into it in place")
        if any(s == 0 and n > 1 for n, s in zip(out.shape, out.stride())):
            # PyTorch's own rule for written-to tensors (an expanded tensor): else the last write wins, silently
            raise DataMoveError(
                f"out must not repeat elements, got out.stride() = {tuple(out.stride())} with stride 0 along an "
                f"axis of size > 1 (out.shape = {tuple(out.shape)}): more than one element would share one memory "
                "location"
            )

    def out_ready(self, data: Any, out: Any, shape: Tuple[int, ...]) -> bool:
        """Whether ``out`` is one :meth:`check_out` takes for ``data``'s call of output ``shape`` and whose memory
        a kernel may write as it is (not :meth:`lazy`, no gradient, no repeated elements): the GPU recipe's
        test before it launches, every other ``out`` going to the checks. Never raises."""
        return (type(out) is type(data) and tuple(out.shape) == shape and out.dtype == data.dtype
                and out.device == data.device and not out.requires_grad and 0 not in out.stride()
                and not self.lazy(out))

    def unaliased(self, data: Any, out: Any) -> Any:
        return data.clone() if overlap(data, out) else data

    def write(self, out: Any, result: Any) -> None:
        out.copy_(result)  # recorded by autograd

    def empty(self, shape: Tuple[int, ...], like: Any) -> Any:
        from ..pytorch import layout as torch_layout

        if torch_layout.memory_format(like) == sys.modules["torch"].contiguous_format:
            return None  # torch.from_numpy of a NumPy result: cheaper than torch.empty and a view
        return torch_layout.empty(shape, like)  # channels-last in, channels-last out

    def from_numpy(self, result: np.ndarray, like: Any) -> Any:
        tensor = sys.modules["torch"].from_numpy(result)
        return tensor if tensor.dtype == like.dtype else tensor.view(like.dtype)


def needs_grad(tensor: Any) -> bool:
    """A PyTorch tensor whose use autograd records."""
    return bool(tensor.requires_grad) and bool(sys.modules["torch"].is_grad_enabled())


def span(tensor: Any) -> int:
    """Items from a PyTorch tensor's first element to its last, inclusive."""
    return int(sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))) + 1


def overlap(a: Any, b: Any) -> bool:
    """Whether two PyTorch tensors may share memory (the same storage and overlapping extents)."""
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return bool(a0 < b0 + span(b) * b.element_size() and b0 < a0 + span(a) * a.element_size())


class _CuPy(Library):
    name = "cupy.ndarray"

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        return (type(array), array.shape, array.strides, array.dtype, array.device.id)

    def cuda(self, array: Any) -> bool:
        return True

    def unaliased(self, data: Any, out: Any) -> Any:
        return data.copy() if sys.modules["cupy"].may_share_memory(data, out) else data


class _Immutable(Library):
    writable = False
    why = ""

    def check_out(self, data: Any, out: Any, shape: Tuple[int, ...]) -> None:
        raise TypeError(f"out= cannot be used with {self.why}")


class _Jax(_Immutable):
    name = "jax.Array"
    why = "JAX arrays: they are immutable; use the returned array"

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        # a tracer's shape and dtype are concrete under jax.jit; its device may not be asked
        return (type(array), array.shape, array.dtype)

    def cuda(self, array: Any) -> bool:
        # JAX's "gpu" platform (CUDA or ROCm); a tracer runs where jit puts it: JAX's default backend
        jax = sys.modules["jax"]
        if isinstance(array, jax.core.Tracer):
            return bool(jax.default_backend() == "gpu")
        try:
            return all(device.platform == "gpu" for device in array.devices())
        except Exception:  # a deleted or donated array (the engine that runs it says so)
            return False

    def nbytes(self, array: Any) -> int:
        return int(np.prod(array.shape, dtype=np.int64)) * int(np.dtype(array.dtype).itemsize)  # tracers too


class _Dask(_Immutable):
    name = "dask.array.Array"
    why = ("Dask arrays: they are lazy; use the returned array "
           "(dask.array.store(result, target) writes it into a np.memmap or any array-like target)")

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        return (type(array), array.shape, array.dtype)  # unknown (NaN) sizes never pass validation: never kept

    def nbytes(self, array: Any) -> int:
        return 0  # lazy: nothing is moved at call time


class _TensorFlow(_Immutable):
    """``tf.Tensor`` (eager or symbolic inside ``tf.function``) and ``tf.Variable``: the operations run them on
    TensorFlow's own ops (:mod:`datamove.dispatch.tensorflow`), never through a NumPy view, so graphs, XLA and
    gradients work."""

    name = "tf.Tensor"
    why = "TensorFlow tensors: they are immutable; use the returned tensor (variable.assign(result) stores it)"

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        return None  # no recipes: TensorFlow builds (or traces) its own ops on each call

    def view(self, array: Any) -> Optional[np.ndarray]:
        return None


def tensorflow(array: Any) -> bool:
    """Whether ``array`` is a TensorFlow tensor or variable (TensorFlow is never imported to answer)."""
    return isinstance(of(array), _TensorFlow)


class _ArrayApi(Library):
    """Any other array with ``__array_namespace__`` (``array_api_strict``, ``ndonnx``, ...)."""

    def unaliased(self, data: Any, out: Any) -> Any:
        inner, source = getattr(data, "_array", None), getattr(out, "_array", None)  # array_api_strict's NumPy
        if inner is not None and source is not None and np.may_share_memory(inner, source):
            return sys.modules["array_api_compat"].array_namespace(data).asarray(data, copy=True)
        return data


class _DLPack(Library):
    """An array that only speaks DLPack: viewed as NumPy on the CPU, its results NumPy arrays."""

    def key(self, array: Any) -> Optional[Tuple[Any, ...]]:
        return None  # nothing to key on that every such object has

    def check_out(self, data: Any, out: Any, shape: Tuple[int, ...]) -> None:
        if type(out) is not type(data):
            raise TypeError(f"out must be a {name(data)} like data, got {name(out)}")
        target = self.view(out)
        if target is None:
            raise TypeError(f"out must be a {name(data)} on the CPU, got one that gives no NumPy view")
        outputs.check_out(target, shape, target.dtype)

    def from_numpy(self, result: np.ndarray, like: Any) -> Any:
        return result  # NumPy is the nearest kind


NUMPY: Library = _NumPy()
TORCH = _Torch()  # (its own type: recipes and the GPU engine ask its lazy and out_ready)
CUPY: Library = _CuPy()
JAX: Library = _Jax()
DASK: Library = _Dask()
ARRAY_API: Library = _ArrayApi()
DLPACK: Library = _DLPack()
TENSORFLOW: Library = _TensorFlow()
TENSORFLOW_VARIABLE: Library = _TensorFlow()
TENSORFLOW_VARIABLE.name = "tf.Variable"

_BY_TYPE: "BoundedCache[Optional[Library]]" = BoundedCache(256)


def of(array: Any) -> Optional[Library]:
    """The adapter of ``array``'s library, or None for what is not an array of any (a list: ``np.asarray`` it)."""
    kind: Any = type(array)  # (a type is hashable; mypy says type[Any] is not)
    found = _BY_TYPE.get(kind, _UNKNOWN)
    if found is _UNKNOWN:
        found = _BY_TYPE.put(kind, _recognise(array, kind))
    return found


_UNKNOWN = Library()  # a type not seen yet


def _recognise(array: Any, kind: Any) -> Optional[Library]:
    if isinstance(array, type):  # a class (np.ndarray itself), not an array
        return None
    if issubclass(kind, np.ndarray):
        return NUMPY
    modules = sys.modules
    for module, attribute, library in (("torch", "Tensor", TORCH), ("cupy", "ndarray", CUPY),
                                       ("jax", "Array", JAX), ("dask.array", "Array", DASK)):
        found = modules.get(module)
        if found is not None and issubclass(kind, getattr(found, attribute)):
            return library
    tf = modules.get("tensorflow")
    if tf is not None and hasattr(tf, "Variable"):  # (a module still being imported has neither class yet)
        if issubclass(kind, tf.Tensor):
            return TENSORFLOW
        if issubclass(kind, tf.Variable):  # not a tf.Tensor: a variable reads as one in every TensorFlow op
            return TENSORFLOW_VARIABLE
    if hasattr(array, "__array_namespace__"):
        return _named(ARRAY_API, kind)
    if hasattr(array, "__dlpack__"):
        return _named(DLPACK, kind)
    return None


def _named(base: Library, kind: type) -> Library:
    """``base``'s adapter under the name of ``kind`` (``array_api_strict.Array``), for messages."""
    library = type(base)()
    library.name = _kind_name(kind)
    return library


def _kind_name(kind: type) -> str:
    """``"top_module.QualName"`` of a type, as messages name arrays of no known library."""
    return f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"


def foreign(array: Any) -> bool:
    """True for an array of a library other than NumPy (never converted with ``np.asarray``)."""
    library = of(array)
    return library is not None and library is not NUMPY


def name(array: Any) -> str:
    """The name of ``array``'s kind in messages: ``"torch.Tensor"``, ``"jax.Array"``, ``"numpy.ndarray"``, ..."""
    library = of(array)
    if library is not None:
        return library.name
    return _kind_name(type(array))


def check_dense(array: Any, name: str) -> None:
    """A PyTorch tensor must be strided: sparse layouts and nested tensors have no strides, or no one shape."""
    if of(array) is TORCH and (array.is_nested or array.layout != sys.modules["torch"].strided):
        if array.is_nested:
            got = "a nested tensor: pad it with .to_padded_tensor(0), or call once per component"
        else:
            got = f"a tensor of layout {array.layout}: convert it with .to_dense() first"
        raise TypeError(f"{name} must be a dense (strided) tensor, got {got}")


def checked(data: Any) -> Any:
    """``data``, after checking that it is dense and its shape known (a Dask array may have NaN dims)."""
    check_dense(data, "data")
    for i, dim in enumerate(data.shape):
        if dim is None or (isinstance(dim, float) and dim != dim):
            raise DataMoveError(
                f"data.shape[{i}] is unknown ({dim}) in data.shape = {tuple(data.shape)}: "
                "the operations need concrete sizes (for Dask, call data.compute_chunk_sizes() first)"
            )
    return data

