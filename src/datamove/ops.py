"""The four operations: the public functions, each the core's (or a tensor's recipe's) repeat of a kept call,
else the dispatch (:func:`datamove.dispatch.call`).

A repeated NumPy call the compiled core keeps runs in one C call from here
(``src/native/runtime/repeat.cpp``), and a repeated PyTorch depth call by its
recipe's own path (:func:`_tensor_repeat`); every other call goes to the
dispatch, which validates it (:mod:`datamove.rules.shapes`), keeps its recipe
(:mod:`datamove.dispatch.recipes`) and runs it on the engine the route table
gives (:mod:`datamove.engines.route`). Everything is checked before any memory
is touched, so bad input never leaves a partial write in ``out``.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, SupportsIndex, Tuple

import numpy as np

from . import dispatch
from .dispatch import recipes, tensorflow as tensorflow_ops
from .pytorch import custom_ops as torch_ops
from .engines.native import engine as native_engine
from .rules import params
from .rules.types import ArrayT, DataFormat, Engine, IntVector, Mode

__all__ = ["batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space"]

_RECIPES = recipes.RECIPES
#: The core's repeated calls (``src/native/runtime/repeat.cpp``): a NumPy call whose kept recipe has run on the
#: core (its op, parameters as given, engine, input layout and dtype; out's layout) is run again there
#: without a Python frame between here and the copy; any other returns None. None without the core.
_repeated = native_engine.repeated_calls()
#: An exact ndarray's steps (:class:`datamove.dispatch.numpy_calls.NumPyCalls`), called straight from here: a new
#: shape's first call spends a third of its time in Python, and ``dispatch.call``'s frame is 5% of it.
_numpy_run = dispatch.NUMPY.run
_require = params.required  # (datamove.nn's layers check their parameters with it)


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
    # (recipes.key's with libraries._Torch.key's fields, inline: a call less, 0.7 us of a 4 KiB call's 8;
    # tests/test_torch_repeats.py holds the two equal)
    recipe = _RECIPES.get((op, mode, block_size, engine, torch.Tensor, data.shape, data.stride(), data.dtype,
                           data.device, data.is_conj(), data.is_neg()))
    fast = getattr(recipe, "fast", None)
    return None if fast is None else fast(data)


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
    if type(data) is np.ndarray:
        if _repeated is not None:  # (a tensor torch.compile traces never asks the core)
            done = _repeated("batch_to_space", data, block_shape, crops_begin, crops_end, out, engine)
            if done is not None:
                return done
        return _numpy_run("batch_to_space", data, (block_shape, crops_begin, crops_end), None, out, engine)
    return dispatch.call("batch_to_space", data, (block_shape, crops_begin, crops_end), None, out, engine)


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
    if type(data) is np.ndarray:
        if _repeated is not None:  # (a tensor torch.compile traces never asks the core)
            done = _repeated("space_to_batch", data, block_shape, pads_begin, pads_end, out, engine)
            if done is not None:
                return done
        return _numpy_run("space_to_batch", data, (block_shape, pads_begin, pads_end), None, out, engine)
    return dispatch.call("space_to_batch", data, (block_shape, pads_begin, pads_end), None, out, engine)


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
        return _numpy_run("space_to_depth", data, (mode, block_size), data_format, out, engine)
    if out is None:
        done = _tensor_repeat("space_to_depth", data, mode, block_size, data_format, engine)
        if done is not None:
            return done
    return dispatch.call("space_to_depth", data, (mode, block_size), data_format, out, engine)


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
        return _numpy_run("depth_to_space", data, (mode, block_size), data_format, out, engine)
    if out is None:
        done = _tensor_repeat("depth_to_space", data, mode, block_size, data_format, engine)
        if done is not None:
            return done
    return dispatch.call("depth_to_space", data, (mode, block_size), data_format, out, engine)


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
