"""TensorFlow's semantics: ``tf.batch_to_space``, ``tf.space_to_batch``, ``tf.nn.space_to_depth``, ``tf.nn.depth_to_space``.

Each function checks TensorFlow's arguments in TensorFlow's terms, then calls
one core op:

- ``batch_to_space`` / ``space_to_batch`` (BatchToSpaceND / SpaceToBatchND):
  ``input = [batch] + spatial (M dims) + remaining``; the core op gets
  ``block_shape = [1] + block_shape + [1, ...]`` and the crops/paddings as
  begin/end vectors with zeros for the batch and the remaining dims.
- ``space_to_depth`` / ``depth_to_space``: TensorFlow's channel order is
  DCR, i.e. ``mode="blocks_first"``, in both data formats; NHWC is the core
  ops' ``data_format="channels_last"`` (read and written in place, no copy).

TensorFlow's own tensors and variables (eager, or symbolic inside
``tf.function``, with ``jit_compile=True`` too) run on TensorFlow's ops
(see ``datamove.dispatch.tensorflow``) and give a ``tf.Tensor``; a dim unknown
while tracing skips the checks below that need it, and the core op checks
it when the graph runs.

Not copied from TensorFlow's CPU kernels: their dtype limits (no bool,
complex or string for the ND ops), their limit of 4 non-trivial block dims,
and NCHW running only on GPU. Everything TensorFlow's op definitions reject
(``block_size < 2``, negative crops, ...) is rejected here too, with a
:class:`~datamove.DataMoveError` that names the argument, the rule and the
values.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, List, SupportsIndex, Tuple, Union

import numpy as np

from ..arrays import libraries
from .. import ops
from ..dispatch import tensorflow as tensorflow_ops
from ..errors import DataMoveError
from ..rules.params import int_vector
from ..rules.types import ArrayT, IntPairs, IntVector, TensorFlowDataFormat
from ._common import as_array, positive_int, product, reshape, shape_of

__all__ = ["batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space"]

DATA_FORMATS: Tuple[TensorFlowDataFormat, ...] = ("NHWC", "NCHW")


def _is_scalar(value: Any) -> bool:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return tuple(value.shape) == ()
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return False  # int_vector reports the bool
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _pairs(value: Any, name: str) -> Tuple[List[Tuple[int, int]], Tuple[int, ...]]:
    """``crops`` / ``paddings`` as a list of (begin, end) and the shape it came in."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be an [M, 2] integer array or nested sequence, got {type(value).__name__} {value!r}")
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        try:
            array = np.asarray(value)
        except Exception as exc:
            raise TypeError(f"{name} could not be read as a host integer array: {exc}") from None
        if array.dtype.kind not in "iu":
            raise TypeError(f"{name} must have an integer dtype (int32 or int64 in TensorFlow), got {array.dtype}")
        if array.ndim != 2 or array.shape[1] != 2:
            return [], tuple(array.shape)
        return [(int(a), int(b)) for a, b in array.tolist()], tuple(array.shape)
    try:
        rows = list(value)
    except TypeError:
        raise TypeError(f"{name} must be an [M, 2] integer array or nested sequence, got {type(value).__name__} {value!r}") from None
    if any(_is_scalar(row) for row in rows):
        return [], (len(rows),)  # 1-D: reported as a shape error
    pairs = []
    for i, row in enumerate(rows):
        items = int_vector(row, f"{name}[{i}]")
        if items is None:
            raise TypeError(f"{name}[{i}] must be a pair of integers [begin, end], got None")
        if len(items) != 2:
            return [], (len(rows), len(items))
        pairs.append((items[0], items[1]))
    return pairs, (len(rows), 2)


def _shape(data: Any) -> Tuple[Any, ...]:
    """``data``'s shape as Python ints; a TensorFlow tensor's dims not known while tracing are ``None``."""
    if not libraries.tensorflow(data):
        return shape_of(data)
    if data.shape.rank is None:
        raise DataMoveError(f"input has an unknown rank (shape {data.shape}): the rank must be known while tracing")
    return tuple(data.shape.as_list())


def _nd_args(input: Any, block_shape: Any, pairs_arg: Any,
             pairs_name: str) -> Tuple[Any, Tuple[int, ...], Tuple[int, ...], List[Tuple[int, int]]]:
    """Validate the ND ops' arguments; return (data, shape, block, pairs) with ``len(block) == M``."""
    data = as_array(input)
    shape = _shape(data)
    pairs, pairs_shape = _pairs(pairs_arg, pairs_name)
    if _is_scalar(block_shape):
        # TensorFlow's batch_to_space turns an int into [b, b]; here it is b for each of the M rows of crops/paddings.
        size = positive_int(block_shape, "block_shape")
        block: Tuple[int, ...] = (size,) * pairs_shape[0] if len(pairs_shape) == 2 and pairs_shape[1] == 2 else (size, size)
    else:
        block = int_vector(block_shape, "block_shape")  # type: ignore[assignment]
    m = len(block)
    if pairs_shape != (m, 2):
        got = "[" + ", ".join(str(d) for d in pairs_shape) + "]"
        raise DataMoveError(f"{pairs_name} must have shape [M, 2] = [{m}, 2] (M = len(block_shape)), got {got}")
    if len(shape) < 1 + m:
        raise DataMoveError(
            f"input must have rank >= 1 + M = {1 + m} (the batch and the M = {m} spatial dims of block_shape), "
            f"got rank {len(shape)}, shape {list(shape)}"
        )
    for i, b in enumerate(block):
        if b < 1:
            raise DataMoveError(f"block_shape[{i}] = {b} must be >= 1")
    for i, pair in enumerate(pairs):
        for j, v in enumerate(pair):
            if v < 0:
                raise DataMoveError(f"{pairs_name}[{i}, {j}] = {v} must be >= 0")
    return data, shape, block, pairs


def _core_vectors(rank: int, block: Tuple[int, ...],
                  pairs: List[Tuple[int, int]]) -> Tuple[List[int], List[int], List[int]]:
    """The core op's block_shape, begin and end: batch axis first, remaining dims last."""
    rest = [1] * (rank - 1 - len(block))
    zeros = [0] * (rank - 1 - len(block))
    return ([1, *block, *rest], [0, *(p[0] for p in pairs), *zeros], [0, *(p[1] for p in pairs), *zeros])


def _with_two_axes(data: Any, shape: Tuple[int, ...]) -> Tuple[Any, bool]:
    # The core ops need rank >= 2; TensorFlow allows [batch] alone (M = 0).
    if len(shape) >= 2:
        return data, False
    if libraries.tensorflow(data):
        return _tf().expand_dims(data, -1), True
    return reshape(data, shape + (1,)), True


def _without_last_axis(result: Any) -> Any:
    if libraries.tensorflow(result):
        return _tf().squeeze(result, -1)
    return reshape(result, shape_of(result)[:1])


def _tf() -> Any:
    import sys

    return sys.modules["tensorflow"]  # a tensor of it is in hand


def batch_to_space(input: ArrayT, block_shape: Union[IntVector, SupportsIndex], crops: IntPairs) -> ArrayT:
    """``tf.batch_to_space`` (BatchToSpaceND): move blocks of the batch into the M spatial dims, then crop.

    Parameters
    ----------
    input : array
        ``[batch] + spatial_shape + remaining_shape``, ``spatial_shape`` of M
        dims; any dtype.
    block_shape : sequence of M ints, 1-D integer array, or int
        Block per spatial dim, ``>= 1``; ``batch`` divisible by their product.
        An int ``b`` means ``b`` for every spatial dim (``M`` from ``crops``).
    crops : [M, 2] integer array or nested sequence
        ``crops[i] = [crop_start, crop_end] >= 0`` for spatial dim ``i``
        (input dim ``i + 1``), with
        ``crop_start + crop_end <= block_shape[i] * input.shape[i + 1]``.

    Returns
    -------
    array
        ``[batch / prod(block_shape), input.shape[i + 1] * block_shape[i] -
        crop_start[i] - crop_end[i], ..., remaining_shape]``, bit for bit
        TensorFlow's result.

    Raises
    ------
    DataMoveError
        A rule of TensorFlow's op broken; the message names it in TensorFlow's terms.
    TypeError
        A non-integer ``block_shape`` / ``crops``, or an input that is not an array.

    See Also
    --------
    space_to_batch : the inverse (``paddings = crops``).
    datamove.batch_to_space : the core op (OpenVINO's BatchToSpace-2).

    Examples
    --------
    TensorFlow's example (4): input ``[8, 1, 3, 1]``, ``block_shape = [2, 2]``,
    ``crops = [[0, 0], [2, 0]]``.

    >>> import numpy as np
    >>> from datamove.compat import tensorflow as tf
    >>> x = np.array([0, 1, 3, 0, 9, 11, 0, 2, 4, 0, 10, 12,
    ...               0, 5, 7, 0, 13, 15, 0, 6, 8, 0, 14, 16]).reshape(8, 1, 3, 1)
    >>> y = tf.batch_to_space(x, [2, 2], [[0, 0], [2, 0]])
    >>> y.shape
    (2, 2, 4, 1)
    >>> y[..., 0]
    array([[[ 1,  2,  3,  4],
            [ 5,  6,  7,  8]],
    <BLANKLINE>
           [[ 9, 10, 11, 12],
            [13, 14, 15, 16]]])

    The dims after the M spatial ones are left alone (here M = 1, two trailing dims):

    >>> tf.batch_to_space(np.zeros((6, 2, 5, 7)), [3], [[1, 2]]).shape
    (2, 3, 5, 7)
    """
    data, shape, block, crops_ = _nd_args(input, block_shape, crops, "crops")
    if shape[0] is not None and shape[0] % product(block):
        raise DataMoveError(
            f"input.shape[0] = {shape[0]} (the batch) must be divisible by prod(block_shape) = {product(block)}"
        )
    for i, ((start, end), b) in enumerate(zip(crops_, block)):
        if shape[i + 1] is not None and start + end > shape[i + 1] * b:
            raise DataMoveError(
                f"crops[{i}, 0] + crops[{i}, 1] = {start + end} exceeds "
                f"input.shape[{i + 1}] * block_shape[{i}] = {shape[i + 1]} * {b} = {shape[i + 1] * b}"
            )
    data, flat = _with_two_axes(data, shape)
    result = ops.batch_to_space(data, *_core_vectors(max(len(shape), 2), block, crops_))
    return _without_last_axis(result) if flat else result


def space_to_batch(input: ArrayT, block_shape: Union[IntVector, SupportsIndex], paddings: IntPairs) -> ArrayT:
    """``tf.space_to_batch`` (SpaceToBatchND): zero-pad the M spatial dims, then move blocks of them into the batch.

    Parameters
    ----------
    input : array
        ``[batch] + spatial_shape + remaining_shape``, ``spatial_shape`` of M
        dims; any dtype.
    block_shape : sequence of M ints, 1-D integer array, or int
        Block per spatial dim, ``>= 1``, dividing
        ``input.shape[i + 1] + pad_start[i] + pad_end[i]``. An int ``b`` means
        ``b`` for every spatial dim (``M`` from ``paddings``).
    paddings : [M, 2] integer array or nested sequence
        ``paddings[i] = [pad_start, pad_end] >= 0`` for spatial dim ``i``.

    Returns
    -------
    array
        ``[batch * prod(block_shape), (input.shape[i + 1] + pad_start[i] +
        pad_end[i]) / block_shape[i], ..., remaining_shape]``; the output batch
        index is ``(block offsets..., n)`` row-major, and padding is the dtype's zero.

    Raises
    ------
    DataMoveError
        A rule of TensorFlow's op broken; the message names it in TensorFlow's terms.
    TypeError
        A non-integer ``block_shape`` / ``paddings``, or an input that is not an array.

    See Also
    --------
    batch_to_space : the inverse (``crops = paddings``).
    datamove.space_to_batch : the core op (OpenVINO's SpaceToBatch-2).

    Examples
    --------
    The inverse of TensorFlow's ``batch_to_space`` example (3):

    >>> import numpy as np
    >>> from datamove.compat import tensorflow as tf
    >>> x = np.arange(1, 17).reshape(1, 4, 4, 1)
    >>> y = tf.space_to_batch(x, [2, 2], [[0, 0], [0, 0]])
    >>> y.shape
    (4, 2, 2, 1)
    >>> y[..., 0].tolist()
    [[[1, 3], [9, 11]], [[2, 4], [10, 12]], [[5, 7], [13, 15]], [[6, 8], [14, 16]]]

    Padding, and a block over the first spatial dim only:

    >>> tf.space_to_batch(np.array([[1, 2, 3]]), [2], [[1, 0]])
    array([[0, 2],
           [1, 3]])
    """
    data, shape, block, paddings_ = _nd_args(input, block_shape, paddings, "paddings")
    for i, ((start, end), b) in enumerate(zip(paddings_, block)):
        if shape[i + 1] is None:
            continue
        padded = shape[i + 1] + start + end
        if padded % b:
            raise DataMoveError(
                f"input.shape[{i + 1}] + paddings[{i}, 0] + paddings[{i}, 1] = {shape[i + 1]} + {start} + {end} "
                f"= {padded} must be divisible by block_shape[{i}] = {b}"
            )
    data, flat = _with_two_axes(data, shape)
    result = ops.space_to_batch(data, *_core_vectors(max(len(shape), 2), block, paddings_))
    return _without_last_axis(result) if flat else result


def _format(data_format: Any) -> TensorFlowDataFormat:
    if not isinstance(data_format, str):
        raise TypeError(f"data_format must be a string, 'NHWC' or 'NCHW', got {type(data_format).__name__} {data_format!r}")
    if data_format == "NCHW_VECT_C":
        raise DataMoveError(
            "data_format 'NCHW_VECT_C' (TensorFlow's qint8 layout [N, C/4, H, W, 4]) is not supported; "
            "use 'NHWC' or 'NCHW'"
        )
    if data_format not in DATA_FORMATS:
        hint = f" (did you mean {data_format.upper()!r}?)" if data_format.upper() in DATA_FORMATS else ""
        raise DataMoveError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}{hint}")
    return data_format


def _depth_args(input: Any, block_size: Any,
                data_format: Any) -> Tuple[Any, Tuple[int, ...], int, TensorFlowDataFormat]:
    data_format = _format(data_format)
    size = positive_int(block_size, "block_size", 2, " (TensorFlow's rule)")
    data = as_array(input)
    shape = _shape(data)
    if len(shape) != 4:
        raise DataMoveError(f"input must be 4-D ({data_format}), got rank {len(shape)}, shape {list(shape)}")
    return data, shape, size, data_format


def _in_format(op: Callable[..., Any], data: Any, size: int, data_format: TensorFlowDataFormat) -> Any:
    """The core op in TensorFlow's data format: NHWC is the core's ``data_format="channels_last"``."""
    return op(data, "blocks_first", size, data_format="channels_last" if data_format == "NHWC" else "channels_first")


def space_to_depth(input: ArrayT, block_size: SupportsIndex, data_format: TensorFlowDataFormat = "NHWC") -> ArrayT:
    """``tf.nn.space_to_depth``: move ``block_size`` x ``block_size`` blocks of H, W into the depth.

    Parameters
    ----------
    input : array
        4-D, ``[N, H, W, C]`` (NHWC) or ``[N, C, H, W]`` (NCHW), ``H`` and ``W``
        divisible by ``block_size``; any dtype.
    block_size : int
        ``>= 2`` (TensorFlow's rule).
    data_format : {"NHWC", "NCHW"}, default "NHWC"
        ``"NCHW_VECT_C"`` raises :class:`~datamove.DataMoveError`.

    Returns
    -------
    array
        ``[N, H/bs, W/bs, C·bs²]`` (NHWC) or ``[N, C·bs², H/bs, W/bs]`` (NCHW);
        the new depth is ordered ``(block row, block column, C)``: the core
        op's ``"blocks_first"`` mode.

    Raises
    ------
    DataMoveError
        Not 4-D, ``block_size < 2``, H or W not divisible, an unknown ``data_format``.
    TypeError
        A non-integer ``block_size`` or non-string ``data_format``.

    See Also
    --------
    depth_to_space : the inverse.
    datamove.space_to_depth : the core op, here with ``mode="blocks_first"``.

    Examples
    --------
    TensorFlow's example: a ``[1, 2, 2, 1]`` input, ``block_size = 2``.

    >>> import numpy as np
    >>> from datamove.compat import tensorflow as tf
    >>> tf.space_to_depth(np.array([[[[1], [2]], [[3], [4]]]]), 2)
    array([[[[1, 2, 3, 4]]]])
    >>> x = np.arange(16).reshape(1, 1, 4, 4)
    >>> tf.space_to_depth(x, 2, data_format="NCHW")[0, :, 0, 0]
    array([0, 1, 4, 5])
    """
    data, shape, size, data_format = _depth_args(input, block_size, data_format)
    if data_format == "NHWC":
        n, h, w, c = shape
        names = ("input.shape[1] = H", "input.shape[2] = W")
    else:
        n, c, h, w = shape
        names = ("input.shape[2] = H", "input.shape[3] = W")
    for name, dim in zip(names, (h, w)):
        if dim is not None and dim % size:
            raise DataMoveError(f"{name} = {dim} must be divisible by block_size = {size} ({data_format})")
    return _in_format(ops.space_to_depth, data, size, data_format)


def depth_to_space(input: ArrayT, block_size: SupportsIndex, data_format: TensorFlowDataFormat = "NHWC") -> ArrayT:
    """``tf.nn.depth_to_space``: move blocks of the depth into ``block_size`` x ``block_size`` spatial blocks.

    Parameters
    ----------
    input : array
        4-D, ``[N, H, W, C]`` (NHWC) or ``[N, C, H, W]`` (NCHW), ``C``
        divisible by ``block_size ** 2``; any dtype.
    block_size : int
        ``>= 2`` (TensorFlow's rule).
    data_format : {"NHWC", "NCHW"}, default "NHWC"
        ``"NCHW_VECT_C"`` raises :class:`~datamove.DataMoveError`.

    Returns
    -------
    array
        ``[N, H·bs, W·bs, C/bs²]`` (NHWC) or ``[N, C/bs², H·bs, W·bs]`` (NCHW);
        the depth is read as ``(block row, block column, C')`` (DCR): the core
        op's ``"blocks_first"`` mode.

    Raises
    ------
    DataMoveError
        Not 4-D, ``block_size < 2``, C not divisible, an unknown ``data_format``.
    TypeError
        A non-integer ``block_size`` or non-string ``data_format``.

    See Also
    --------
    space_to_depth : the inverse.
    datamove.depth_to_space : the core op, here with ``mode="blocks_first"``.

    Examples
    --------
    TensorFlow's example: a ``[1, 1, 1, 4]`` input, ``block_size = 2``.

    >>> import numpy as np
    >>> from datamove.compat import tensorflow as tf
    >>> tf.depth_to_space(np.array([[[[1, 2, 3, 4]]]]), 2)[..., 0]
    array([[[1, 2],
            [3, 4]]])
    >>> tf.depth_to_space(np.zeros((1, 12, 5, 5)), 2, data_format="NCHW").shape
    (1, 3, 10, 10)
    """
    data, shape, size, data_format = _depth_args(input, block_size, data_format)
    if data_format == "NHWC":
        n, h, w, c = shape
        name = "input.shape[3] = C"
    else:
        n, c, h, w = shape
        name = "input.shape[1] = C"
    if c is not None and c % (size * size):
        raise DataMoveError(f"{name} = {c} must be divisible by block_size**2 = {size * size} ({data_format})")
    return _in_format(ops.depth_to_space, data, size, data_format)


tensorflow_ops.as_python(batch_to_space, space_to_batch, space_to_depth, depth_to_space)
