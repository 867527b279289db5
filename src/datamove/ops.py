"""The four operations: validate (``shapes``), then run the call's recipe (``recipes``), which an engine executes.

A call is keyed (op, parameters, the input's layout and library); a repeated
call finds its :class:`~datamove.dispatch.recipes.Recipe` and skips everything but the
copy. A new one is validated by the shape rule, becomes a
:class:`~datamove.engines.call.Call`, and its recipe is made with the path the route
table gives (:mod:`datamove.engines.route`). Everything is checked before any memory
is touched, so bad input never leaves a partial write in ``out``.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable, Dict, Hashable, Optional, SupportsIndex, Tuple, cast

import numpy as np

from .dispatch import foreign, recipes, tensorflow as tensorflow_ops
from .arrays import libraries
from .rules import params, shapes
from .pytorch import custom_ops as torch_ops
from .engines import route
from .engines.call import Call
from .engines.native import engine as native_engine
from .rules.dims import INT64_MAX
from .errors import DataMoveError, brief, number
from .arrays.outputs import (LINE_FROM as _LINE_FROM, allocate as _allocate, check_out as _check_out,
                             refuse_masked as _refuse_masked)
from .rules.types import ArrayT, DataFormat, Engine, IntVector, Mode

__all__ = ["batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space"]

# A repeated call with the same shapes skips validation and planning (see datamove.dispatch.recipes).
_RECIPES = recipes.RECIPES
#: The core's repeated calls (``src/native/runtime/repeat.cpp``): a NumPy call whose kept recipe has run on the
#: core (its op, parameters as given, engine, input layout and dtype; out's layout) is run again there
#: without a Python frame between here and the copy; any other returns None. None without the core.
_repeated = native_engine.repeated_calls()


def _tensor_repeat(op: str, data: Any, mode: Any, block_size: Any, data_format: Any, engine: Any) -> Any:
    """A PyTorch tensor's repeated depth call without ``out=`` by its recipe's own path
    (:class:`datamove.dispatch.recipes.TorchRecipe`'s ``fast``: the core by the tensor's address, or PyTorch's op),
    with no step between: the result, or None (no such recipe, parameters not in the recipes' exact form,
    channels last, or a tensor torch.compile or torch.jit traces, which takes the custom op)."""
    torch = sys.modules.get("torch")
    if (torch is None or type(data) is not torch.Tensor or type(mode) is not str or type(block_size) is not int
            or type(engine) is not str or data_format != "channels_first"
            or torch.compiler.is_compiling() or torch._C._is_tracing()):
        return None
    # (recipes.key's with libraries._Torch.key's fields, inline as NumPy's are: a call less, 0.7 us of a 4 KiB
    # call's 8; tests/test_torch_repeats.py holds the two equal)
    recipe = _RECIPES.get((op, mode, block_size, engine, torch.Tensor, data.shape, data.stride(), data.dtype,
                           data.device, data.is_conj(), data.is_neg()))
    fast = getattr(recipe, "fast", None)
    return None if fast is None else fast(data)


def _as_array(data: Any) -> Any:
    if isinstance(data, np.ndarray):
        if type(data) is not np.ndarray:
            _refuse_masked(data, "data")
        return data
    if data is None or isinstance(data, (str, bytes, dict, set)):
        raise TypeError(f"data must be an array, got {type(data).__name__} {brief(data)}")
    if libraries.foreign(data):
        return libraries.checked(data)  # not converted: datamove.dispatch.foreign runs it in its own library
    try:
        return np.asarray(data)
    except Exception as exc:
        raise TypeError(f"data must be an array, could not convert {type(data).__name__}: {exc}") from None


_require = params.required


def _check_size(shape: Tuple[int, ...], dtype: Any) -> None:
    """An output no array can hold is a DataMoveError on every path (NumPy says ValueError, PyTorch RuntimeError)."""
    nbytes = math.prod(shape) * getattr(dtype, "itemsize", 1)
    if nbytes > INT64_MAX:
        raise DataMoveError(f"the output shape {shape} of dtype {dtype} would take {number(nbytes)} bytes, "
                            "more than an array can hold (2**63 - 1)")


#: The keys of calls made once by the core in one call (:func:`~datamove.engines.native.engine.first_call`),
#: whose recipe the key's next call makes: a shape seen once costs no recipe. (A first call into a new array,
#: by the core's ``first``, is kept in the core's own table, which says when its next call is the recipe's:
#: :func:`_first`.) A plain dict (its get and set are atomic), forgotten whole at the recipes' bound.
_SEEN: Dict[Hashable, bool] = {}


def _run(op: str, resolved: shapes.Resolved, data: Any, out: Any, engine: Any, recipe_key: Any) -> Any:
    """A validated call: its recipe made (and kept under ``recipe_key``), then run; or, the first time a NumPy
    array's key is seen, planned and run by the compiled core in one call, the recipe left to the key's next."""
    out_shape = _static(resolved)
    _check_size(out_shape, getattr(data, "dtype", None))
    call = Call(op, resolved.params, tuple(data.shape), out_shape)
    seen = recipe_key is not None and _SEEN.pop(recipe_key, False)
    if not seen and route.first_on_core(engine, type(data) is np.ndarray and (out is None or type(out) is np.ndarray)):
        if out is not None:
            _check_out(out, out_shape, data.dtype)
        done = native_engine.first_call(call, data, out)
        if done is not None:
            _seen(recipe_key)
            return done
    recipe = recipes.make(recipe_key, call, data, engine)
    if seen and isinstance(recipe, recipes.Recipe):
        recipe.called = True  # (its first call was the core's: a recipe that moves to the core does so now)
    return recipe(data, out)


def _seen(recipe_key: Optional[Hashable]) -> None:
    """``recipe_key``'s first call was the core's: its next, where the core does not repeat it, makes the
    recipe (``_SEEN``)."""
    if recipe_key is not None:
        if len(_SEEN) >= _RECIPES.maxsize:
            _SEEN.clear()
        _SEEN[recipe_key] = True


def _first(op: str, recipe_key: Hashable, data: Any, a: Any, b: Any, c: Any, engine: str, out: Any = None) -> Any:
    """A NumPy array's first call of a layout (depth ops channels first), into a new array or an ``out=``
    ndarray: the rules' straight path (:func:`datamove.rules.shapes.static_depth_shape`,
    :func:`~datamove.rules.shapes.static_space_shape`) and the core in one call, its program kept there, nothing
    else made (:func:`_run` makes a ``Resolved``, a ``Call`` and a recipe); None, nothing done, for any call
    that path does not take, which :func:`_run` then validates and runs. ``(a, b, c)``: ``(mode, block_size,
    "channels_first")`` or ``(block_shape, begin, end)``. An ``out=`` is checked here as :func:`_run` checks
    it; one that shares memory with ``data`` is :func:`_run`'s (which copies ``data`` first)."""
    core = native_engine._native  # (the one native_engine runs: a test may put a recording or another level's)
    if core is None or not route.first_on_core(engine, out is None or type(out) is np.ndarray):
        return None  # (data is an exact ndarray: the callers' doors ask)
    depth = op == "space_to_depth" or op == "depth_to_space"
    out_shape = (shapes.static_depth_shape(op == "space_to_depth", data.shape, a, b) if depth
                 else shapes.static_space_shape(op, data.shape, a, b, c))
    if out_shape is None:
        return None
    if depth:
        nbytes = data.nbytes  # (the output holds the input's items, in another order)
    else:
        _check_size(out_shape, data.dtype)  # (pads may make it any size)
        nbytes = math.prod(out_shape) * data.itemsize
    allocate = None if nbytes < _LINE_FROM else _allocate  # (the call's new results: a large one on a line)
    if out is not None:
        _check_out(out, out_shape, data.dtype)
        if np.may_share_memory(data, out):
            return None
        # the core's first() into out=: planned, lowered and run in one C call, its program kept there for
        # repeats into outs of these strides (the checks above passed for them)
        return core.first(op, data, a, b, c, out_shape, allocate, engine, out)
    # the core's first(): allocated, planned, lowered and run in one C call, its program kept there for the
    # call's repeats
    done = core.first(op, data, a, b, c, out_shape, allocate, engine)
    if done is False:  # the core keeps this call already, and its repeat did not take it: the recipe's turn
        _seen(recipe_key)
        return None
    return done


def _channels_last(function: Callable[..., Any], data: Any, mode: Any, block_size: Any, data_format: Any, out: Any,
                   engine: Any) -> Any:
    """A depth op on ``[N, D_1, ..., D_K, C]`` data: the channels-first op on views that move the last axis to 1.

    The result is allocated channels-last and written through such a view, so
    the data is moved once, as channels-first data is.
    """
    data_format = params.data_format_arg(data_format)
    if data_format == "channels_first":
        return function(data, mode, block_size, out=out, engine=engine)
    resolve = shapes.resolve_space_to_depth if function is space_to_depth else shapes.resolve_depth_to_space
    traced = foreign.compiling(data)  # a torch.Tensor (asked first: Dynamo cannot trace libraries' cache)
    library = libraries.TORCH if traced else (libraries.of(data) or libraries.NUMPY)  # (a list: NumPy's)
    if library is libraries.NUMPY:
        data = _as_array(data)
    elif getattr(data, "ndim", None) is None:
        raise TypeError(f"data must be an array, got {type(data).__name__} {brief(data)}")
    _require(mode=mode, block_size=block_size)
    shape = tuple(data.shape)
    # every rule, on the axes as given; traced sizes stay symbolic (no out_shape): the channels-first op checks them
    out_shape = () if traced else _static(resolve(shape, mode, block_size, data_format))
    rank = len(shape)
    first = (0, rank - 1, *range(1, rank - 1))  # channels-last -> channels-first, as a view
    if library is libraries.NUMPY:
        _check_size(out_shape, data.dtype)
        if out is None:
            out = _allocate(out_shape, data.dtype)
        else:
            _check_out(out, out_shape, data.dtype)
        function(data.transpose(first), mode, block_size, out=out.transpose(first), engine=engine)
        return out
    back = (0, *range(2, rank), 1)
    if library is libraries.TORCH:
        if out is None and not traced and not (data.requires_grad and _grad_enabled()):
            import torch

            _check_size(out_shape, data.dtype)
            out = torch.empty(out_shape, dtype=data.dtype, device=data.device)
        if out is not None:
            function(data.permute(first), mode, block_size, out=out.permute(first), engine=engine)
            return out
        return function(data.permute(first), mode, block_size, engine=engine).permute(back)
    from array_api_compat import array_namespace

    xp = array_namespace(data)
    moved = function(xp.permute_dims(data, first), mode, block_size,
                     out=None if out is None else xp.permute_dims(out, first), engine=engine)
    return out if out is not None else xp.permute_dims(moved, back)


def _grad_enabled() -> bool:
    return bool(sys.modules["torch"].is_grad_enabled())


def _static(resolved: shapes.Resolved) -> Tuple[int, ...]:
    """The output shape of a concrete input: every dim a plain int."""
    return cast(Tuple[int, ...], resolved.public())


def batch_to_space(data: ArrayT, block_shape: IntVector, crops_begin: IntVector, crops_end: IntVector,
                   *, out: Optional[ArrayT] = None, engine: Engine = "auto") -> ArrayT:
    """BatchToSpace-2: move blocks of the batch axis into the spatial axes, then crop.

    Parameters
    ----------
    data : array
        ``[batch, D_1, ..., D_{N-1}]``, rank >= 2, any dtype.
    block_shape : sequence of N ints or 1-D integer array
        Block size per axis, ``>= 1``; ``block_shape[0]`` (batch) must be 1.
        ``batch`` must be divisible by ``prod(block_shape)``.
    crops_begin, crops_end : sequence of N ints or 1-D integer array
        Elements to crop from the start / end of each axis, ``>= 0``, 0 for
        the batch axis, ``crops_begin[i] + crops_end[i] <= D_i * block_shape[i]``.
    out : array, optional
        Where to write the result: exactly the output shape and ``data.dtype``.
    engine : str, default "auto"
        ``"auto"`` or an engine name (see :mod:`datamove.engines`).

    Returns
    -------
    array of shape ``[batch / prod(block_shape), D_i * block_shape[i] - crops_begin[i] - crops_end[i], ...]``
        A new C-contiguous array, or ``out``.

    Raises
    ------
    DataMoveError
        A rule of the spec is broken; the message names argument, rule and values.
    TypeError
        A parameter of the wrong type (floats, bools, ...).

    See Also
    --------
    space_to_batch : the inverse (pads = crops).
    datamove.shapes.batch_to_space : the output shape without the data.

    Examples
    --------
    TensorFlow's example (4) of ``batch_to_space``, in OpenVINO's form:

    >>> import numpy as np, datamove as dm
    >>> x = np.array([0, 1, 3, 0, 9, 11, 0, 2, 4, 0, 10, 12,
    ...               0, 5, 7, 0, 13, 15, 0, 6, 8, 0, 14, 16]).reshape(8, 1, 3, 1)
    >>> dm.batch_to_space(x, [1, 2, 2, 1], [0, 0, 2, 0], [0, 0, 0, 0])[..., 0]
    array([[[ 1,  2,  3,  4],
            [ 5,  6,  7,  8]],
    <BLANKLINE>
           [[ 9, 10, 11, 12],
            [13, 14, 15, 16]]])
    """
    if type(data) is np.ndarray and _repeated is not None:  # (a tensor torch.compile traces never asks the core)
        done = _repeated("batch_to_space", data, block_shape, crops_begin, crops_end, out, engine)
        if done is not None:
            return done
    library = None
    if type(data) is not np.ndarray:
        # (a tensor torch.compile traces is no TensorFlow tensor; asked first, as Dynamo cannot trace libraries' cache)
        if foreign.compiling(data):  # traced by torch.compile: the custom op
            return foreign.compiled_call("batch_to_space", (block_shape, crops_begin, crops_end), data, out)
        library = libraries.of(data)
        if library is not libraries.TORCH and libraries.tensorflow(data):  # TensorFlow's ops: graphs, XLA
            return tensorflow_ops.call("batch_to_space", data, (block_shape, crops_begin, crops_end), None, out, engine)
    recipe_key = recipes.space_key("batch_to_space", block_shape, crops_begin, crops_end, data, engine, library)
    recipe = _RECIPES.get(recipe_key)
    if recipe is not None:
        return recipe(data, out)
    if type(data) is np.ndarray and recipe_key is not None:
        done = _first("batch_to_space", recipe_key, data, block_shape, crops_begin, crops_end, engine, out)
        if done is not None:
            return done
    _require(block_shape=block_shape, crops_begin=crops_begin, crops_end=crops_end)
    data = _as_array(data)
    resolved = shapes.resolve_batch_to_space(data.shape, block_shape, crops_begin, crops_end)
    return _run("batch_to_space", resolved, data, out, engine, recipe_key)


def space_to_batch(data: ArrayT, block_shape: IntVector, pads_begin: IntVector, pads_end: IntVector,
                   *, out: Optional[ArrayT] = None, engine: Engine = "auto") -> ArrayT:
    """SpaceToBatch-2: zero-pad the spatial axes, then move blocks of them into the batch axis.

    Parameters
    ----------
    data : array
        ``[batch, D_1, ..., D_{N-1}]``, rank >= 2, any dtype.
    block_shape : sequence of N ints or 1-D integer array
        Block size per axis, ``>= 1``; ``block_shape[0]`` (batch) must be 1;
        each divides ``D_i + pads_begin[i] + pads_end[i]``.
    pads_begin, pads_end : sequence of N ints or 1-D integer array
        Zeros to add at the start / end of each axis, ``>= 0``, 0 for batch.
    out, engine : see :func:`batch_to_space`.

    Returns
    -------
    array of shape ``[batch * prod(block_shape), (D_i + pads_begin[i] + pads_end[i]) / block_shape[i], ...]``
        The output batch index is ``(b_1, ..., b_{N-1}, n)`` row-major: block
        offsets outermost, as in TensorFlow. Padding is the dtype's zero.

    Examples
    --------
    >>> import numpy as np, datamove as dm
    >>> x = np.arange(1, 5).reshape(1, 4)
    >>> dm.space_to_batch(x, [1, 2], [0, 1], [0, 1])
    array([[0, 2, 4],
           [1, 3, 0]])
    """
    if type(data) is np.ndarray and _repeated is not None:  # (a tensor torch.compile traces never asks the core)
        done = _repeated("space_to_batch", data, block_shape, pads_begin, pads_end, out, engine)
        if done is not None:
            return done
    library = None
    if type(data) is not np.ndarray:
        # (a tensor torch.compile traces is no TensorFlow tensor; asked first, as Dynamo cannot trace libraries' cache)
        if foreign.compiling(data):  # traced by torch.compile: the custom op
            return foreign.compiled_call("space_to_batch", (block_shape, pads_begin, pads_end), data, out)
        library = libraries.of(data)
        if library is not libraries.TORCH and libraries.tensorflow(data):  # TensorFlow's ops: graphs, XLA
            return tensorflow_ops.call("space_to_batch", data, (block_shape, pads_begin, pads_end), None, out, engine)
    recipe_key = recipes.space_key("space_to_batch", block_shape, pads_begin, pads_end, data, engine, library)
    recipe = _RECIPES.get(recipe_key)
    if recipe is not None:
        return recipe(data, out)
    if type(data) is np.ndarray and recipe_key is not None:
        done = _first("space_to_batch", recipe_key, data, block_shape, pads_begin, pads_end, engine, out)
        if done is not None:
            return done
    _require(block_shape=block_shape, pads_begin=pads_begin, pads_end=pads_end)
    data = _as_array(data)
    resolved = shapes.resolve_space_to_batch(data.shape, block_shape, pads_begin, pads_end)
    return _run("space_to_batch", resolved, data, out, engine, recipe_key)


def space_to_depth(data: ArrayT, mode: Mode, block_size: SupportsIndex = 1, *,
                   data_format: DataFormat = "channels_first", out: Optional[ArrayT] = None,
                   engine: Engine = "auto") -> ArrayT:
    """SpaceToDepth-1: move ``block_size``-blocks of every spatial axis into the depth axis.

    Parameters
    ----------
    data : array
        ``[N, C, D_1, ..., D_K]``, rank >= 3, each ``D_i`` divisible by ``block_size``.
    mode : {"blocks_first", "depth_first"}
        Output depth gathered as ``[block_size, ..., block_size, C]``
        (blocks_first; ONNX's and TensorFlow's order) or
        ``[C, block_size, ..., block_size]`` (depth_first; PyTorch's pixel_unshuffle).
    block_size : int, default 1
    data_format : {"channels_first", "channels_last"}, default "channels_first"
        Where the channels are: ``[N, C, D_1, ..., D_K]`` (the spec's) or
        ``[N, D_1, ..., D_K, C]`` (Keras' and TensorFlow's NHWC), for both
        the data and the result. Channels-last data is read and written in
        place (a view change, no transpose pass), at the same speed.
    out, engine : see :func:`batch_to_space`.

    Returns
    -------
    array of shape ``[N, C * block_size ** K, D_1 / block_size, ..., D_K / block_size]``
        (channels-last: ``[N, D_1 / block_size, ..., D_K / block_size, C * block_size ** K]``)

    Examples
    --------
    >>> import numpy as np, datamove as dm
    >>> x = np.arange(8).reshape(1, 2, 4)
    >>> dm.space_to_depth(x, "blocks_first", 2)[0]
    array([[0, 2],
           [4, 6],
           [1, 3],
           [5, 7]])
    >>> dm.space_to_depth(x, "depth_first", 2)[0]
    array([[0, 2],
           [1, 3],
           [4, 6],
           [5, 7]])

    Channels last, as Keras writes images (``[N, H, W, C]``):

    >>> image = np.arange(16).reshape(1, 2, 4, 2)
    >>> dm.space_to_depth(image, "depth_first", 2, data_format="channels_last").shape
    (1, 1, 2, 8)
    """
    if type(data) is np.ndarray:
        if _repeated is not None:  # (a tensor torch.compile traces never asks the core)
            done = _repeated("space_to_depth", data, mode, block_size, data_format, out, engine)
            if done is not None:
                return done
    elif out is None:
        done = _tensor_repeat("space_to_depth", data, mode, block_size, data_format, engine)
        if done is not None:
            return done
    traced = False
    library = None
    if type(data) is not np.ndarray:
        # (a tensor torch.compile traces is no TensorFlow tensor; asked first, as Dynamo cannot trace libraries' cache)
        traced = foreign.compiling(data)
        if not traced:
            library = libraries.of(data)
            if library is not libraries.TORCH and libraries.tensorflow(data):  # TensorFlow's ops: graphs, XLA
                return tensorflow_ops.call("space_to_depth", data, (mode, block_size), data_format, out, engine)
    if data_format != "channels_first":
        return _channels_last(space_to_depth, data, mode, block_size, data_format, out, engine)
    recipe_key: Optional[Hashable]
    if traced:  # traced by torch.compile: the custom op, one node of the graph
        return foreign.compiled_call("space_to_depth", (mode, block_size), data, out)
    if type(data) is np.ndarray and type(mode) is str and type(block_size) is int and type(engine) is str:
        recipe_key = ("space_to_depth", mode, block_size, engine, data.shape, data.strides, data.dtype)  # NUMPY.key inline
    elif library is libraries.TORCH and type(mode) is str and type(block_size) is int and type(engine) is str:
        found = library.key(data)  # (recipes.key's, without its second libraries.of and its exact())
        recipe_key = None if found is None else ("space_to_depth", mode, block_size, engine, *found)
    else:
        recipe_key = recipes.key("space_to_depth", (mode, block_size), data, engine)
    recipe = _RECIPES.get(recipe_key)
    if recipe is not None:
        return recipe(data, out)
    if type(data) is np.ndarray and recipe_key is not None:
        done = _first("space_to_depth", recipe_key, data, mode, block_size, "channels_first", engine, out)
        if done is not None:
            return done
    _require(mode=mode, block_size=block_size)
    data = _as_array(data)
    resolved = shapes.resolve_space_to_depth(data.shape, mode, block_size)
    return _run("space_to_depth", resolved, data, out, engine, recipe_key)


def depth_to_space(data: ArrayT, mode: Mode, block_size: SupportsIndex = 1, *,
                   data_format: DataFormat = "channels_first", out: Optional[ArrayT] = None,
                   engine: Engine = "auto") -> ArrayT:
    """DepthToSpace-1: move blocks of the depth axis into every spatial axis.

    The inverse of :func:`space_to_depth` with the same mode and block size.

    Parameters
    ----------
    data : array
        ``[N, C, D_1, ..., D_K]``, rank >= 3, ``C`` divisible by ``block_size ** K``.
    mode : {"blocks_first", "depth_first"}
        Input depth read as ``[block_size, ..., block_size, C']`` (blocks_first,
        ONNX DCR, TensorFlow) or ``[C', block_size, ..., block_size]``
        (depth_first, ONNX CRD, PyTorch's pixel_shuffle).
    block_size : int, default 1
    data_format : {"channels_first", "channels_last"}, default "channels_first"
        ``[N, C, D_1, ..., D_K]`` or ``[N, D_1, ..., D_K, C]``, for the data
        and the result (see :func:`space_to_depth`).
    out, engine : see :func:`batch_to_space`.

    Returns
    -------
    array of shape ``[N, C / block_size ** K, D_1 * block_size, ..., D_K * block_size]``
        (channels-last: ``[N, D_1 * block_size, ..., D_K * block_size, C / block_size ** K]``)

    Examples
    --------
    >>> import numpy as np, datamove as dm
    >>> x = np.arange(4).reshape(1, 4, 1, 1)
    >>> dm.depth_to_space(x, "depth_first", 2)[0, 0]
    array([[0, 1],
           [2, 3]])
    """
    if type(data) is np.ndarray:
        if _repeated is not None:  # (a tensor torch.compile traces never asks the core)
            done = _repeated("depth_to_space", data, mode, block_size, data_format, out, engine)
            if done is not None:
                return done
    elif out is None:
        done = _tensor_repeat("depth_to_space", data, mode, block_size, data_format, engine)
        if done is not None:
            return done
    traced = False
    library = None
    if type(data) is not np.ndarray:
        # (a tensor torch.compile traces is no TensorFlow tensor; asked first, as Dynamo cannot trace libraries' cache)
        traced = foreign.compiling(data)
        if not traced:
            library = libraries.of(data)
            if library is not libraries.TORCH and libraries.tensorflow(data):  # TensorFlow's ops: graphs, XLA
                return tensorflow_ops.call("depth_to_space", data, (mode, block_size), data_format, out, engine)
    if data_format != "channels_first":
        return _channels_last(depth_to_space, data, mode, block_size, data_format, out, engine)
    recipe_key: Optional[Hashable]
    if traced:  # traced by torch.compile: the custom op, one node of the graph
        return foreign.compiled_call("depth_to_space", (mode, block_size), data, out)
    if type(data) is np.ndarray and type(mode) is str and type(block_size) is int and type(engine) is str:
        recipe_key = ("depth_to_space", mode, block_size, engine, data.shape, data.strides, data.dtype)  # NUMPY.key inline
    elif library is libraries.TORCH and type(mode) is str and type(block_size) is int and type(engine) is str:
        found = library.key(data)  # (recipes.key's, without its second libraries.of and its exact())
        recipe_key = None if found is None else ("depth_to_space", mode, block_size, engine, *found)
    else:
        recipe_key = recipes.key("depth_to_space", (mode, block_size), data, engine)
    recipe = _RECIPES.get(recipe_key)
    if recipe is not None:
        return recipe(data, out)
    if type(data) is np.ndarray and recipe_key is not None:
        done = _first("depth_to_space", recipe_key, data, mode, block_size, "channels_first", engine, out)
        if done is not None:
            return done
    _require(mode=mode, block_size=block_size)
    data = _as_array(data)
    resolved = shapes.resolve_depth_to_space(data.shape, mode, block_size)
    return _run("depth_to_space", resolved, data, out, engine, recipe_key)


def _custom_op_body(op: str, args: Tuple[Any, ...], data: Any) -> Any:
    """The body of ``torch.ops.datamove.<op>`` (:mod:`datamove.pytorch.custom_ops`): the GPU kernel where it runs
    (validated by the shape rule), else this module's eager call."""
    from .engines import triton_engine

    if triton_engine.can_take(data):
        return triton_engine.fresh(op, torch_ops.op_params(op, args), data)
    function: Callable[..., Any] = globals()[op]
    return function(data.detach(), *args)


torch_ops.set_body(_custom_op_body)
tensorflow_ops.as_python(batch_to_space, space_to_batch, space_to_depth, depth_to_space)
