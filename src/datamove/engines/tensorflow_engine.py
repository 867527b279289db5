"""TensorFlow tensors on TensorFlow's own ops, so ``tf.function``, XLA, gradients and SavedModel work.

A validated call (:mod:`datamove.dispatch.tensorflow` checks it with
:mod:`datamove.shapes` first) becomes one of TensorFlow's ops where it is
that op bit for bit, else the spec's pad/reshape/transpose/reshape/crop
(:func:`datamove.plans.formulas.follow`):

* ``tf.nn.space_to_depth`` / ``tf.nn.depth_to_space``: rank 4,
  ``channels_last`` (their CPU kernels take NHWC only), ``blocks_first``
  (TensorFlow's DCR order), ``block_size >= 2``;
* ``tf.space_to_batch_nd`` / ``tf.batch_to_space``: the dtypes of their CPU
  kernels (no bool, complex or string) and at most 4 block dims between the
  first and the last that move (their kernels' limit); the batch axis is
  OpenVINO's index 0, so ``block_shape[1:]`` and the crops/pads of axes
  ``1..`` are TensorFlow's arguments, and both put the block offsets
  outermost in the batch.

A dim unknown while a graph is traced stays unknown: sizes come from
``tf.shape`` (:func:`dims`), never from a Python int, and the spec's rules
that need it (a divisibility, a crop that must fit) become
``tf.debugging`` asserts that run with the graph (XLA drops asserts: there
an impossible size fails in the reshape).

>>> import tensorflow as tf
>>> x = tf.reshape(tf.range(8), (1, 2, 2, 2))
>>> apply("space_to_depth", {"mode": "depth_first", "block_size": 2}, x, "channels_last", (1, 1, 1, 8)).numpy().ravel()
array([0, 2, 4, 6, 1, 3, 5, 7], dtype=int32)
"""

from __future__ import annotations

import math
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..plans import formulas
from ..arrays import libraries

__all__ = ["can_take", "apply", "dims", "ND_DTYPES"]

#: The dtypes of the CPU kernels of SpaceToBatchND / BatchToSpaceND (TensorFlow 2.21, ``TF_CALL_REAL_NUMBER_TYPES``).
ND_DTYPES = frozenset(("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
                       "float16", "bfloat16", "float32", "float64"))
#: The highest rank of a string tensor that TensorFlow's CPU Transpose takes (past it, the process aborts).
STRING_MAX_RANK = 8
#: SpaceToBatchND / BatchToSpaceND refuse more block dims than this between the first and last that move.
ND_MAX_BLOCK_DIMS = 4


def can_take(array: Any) -> bool:
    """Whether ``array`` is a TensorFlow tensor or variable."""
    return libraries.tensorflow(array)


def dims(x: Any) -> List[Any]:
    """``x``'s dims: a Python int where the static shape knows it, else a scalar tensor of ``tf.shape(x)``."""
    tf = sys.modules["tensorflow"]
    static = x.shape.as_list()
    if None not in static:
        return list(static)
    dynamic = tf.shape(x)
    return [d if d is not None else dynamic[i] for i, d in enumerate(static)]


def apply(op: str, params: Dict[str, Any], data: Any, data_format: str, out_shape: Sequence[Optional[int]]) -> Any:
    """``op`` with validated ``params`` on ``data``: a new ``tf.Tensor``.

    ``out_shape`` is the output's shape as far as it is known (``None``: not
    known until the graph runs); it becomes the result's static shape.
    """
    tf = sys.modules["tensorflow"]
    sizes = dims(data)
    checks = _checks(tf, op, params, data.shape.as_list(), sizes, data_format)
    if checks:
        with tf.control_dependencies(checks):
            data = tf.identity(data)
    result = _own_op(tf, op, params, data, data_format)
    if result is None:
        result = _formula(tf, op, params, data, sizes, data_format)
    if not tf.executing_eagerly():
        result.set_shape(out_shape)  # what datamove.shapes knows, where the reshape's inference knows less
    return result


def _own_op(tf: Any, op: str, params: Dict[str, Any], data: Any, data_format: str) -> Any:
    """TensorFlow's own op where it is this call bit for bit, else None."""
    if op in ("space_to_depth", "depth_to_space"):
        size = params["block_size"]
        if data.shape.rank == 4 and data_format == "channels_last" and params["mode"] == "blocks_first" and size >= 2:
            return (tf.nn.space_to_depth if op == "space_to_depth" else tf.nn.depth_to_space)(data, size)
        return None
    block = params["block_shape"]
    begin, end = (params["pads_begin"], params["pads_end"]) if op == "space_to_batch" else (
        params["crops_begin"], params["crops_end"])
    moving = [i for i in range(1, len(block)) if block[i] != 1 or begin[i] or end[i]]
    if data.dtype.name not in ND_DTYPES or (moving and moving[-1] - moving[0] >= ND_MAX_BLOCK_DIMS):
        return None
    margins = [[begin[i], end[i]] for i in range(1, len(block))]
    if op == "space_to_batch":
        return tf.space_to_batch_nd(data, list(block[1:]), margins)
    return tf.batch_to_space(data, list(block[1:]), margins)


def _formula(tf: Any, op: str, params: Dict[str, Any], data: Any, sizes: List[Any], data_format: str,
             zero: Any = None) -> Any:
    """The spec's formula on TensorFlow's reshape/transpose/pad (padding with ``zero``, else the dtype's);
    channels-last data is moved to channels-first and back (XLA and Grappler fold the transposes into one)."""
    rank = len(sizes)
    last = data_format == "channels_last" and op in ("space_to_depth", "depth_to_space")
    first = (0, rank - 1, *range(1, rank - 1))
    if last:
        sizes = [sizes[i] for i in first]
    steps = formulas.steps(op, params, tuple(sizes))
    if data.dtype == tf.string and max(rank, len(steps.split)) > STRING_MAX_RANK:
        # TensorFlow's CPU Transpose aborts the process on strings past rank 8 (it copies them as bytes):
        # the positions of the items move instead, padding pointing past the last item, at an empty string
        count = tf.size(data, out_type=tf.int64)
        items = tf.concat([tf.reshape(data, [-1]), tf.constant([""])], 0)
        positions = tf.reshape(tf.range(count), tf.shape(data, out_type=tf.int64))
        return tf.gather(items, _formula(tf, op, params, positions, dims(positions), data_format, count))
    if zero is None:
        zero = "" if data.dtype == tf.string else tf.zeros((), data.dtype)
    if last:
        data = tf.transpose(data, first)
    result = formulas.follow(
        steps, data,
        lambda x, shape: tf.reshape(x, list(shape)),
        lambda x, perm: tf.transpose(x, list(perm)),
        lambda x, pairs: tf.pad(x, [list(p) for p in pairs], constant_values=zero),
    )
    if last:
        result = tf.transpose(result, (0, *range(2, rank), 1))
    return result


def _checks(tf: Any, op: str, params: Dict[str, Any], static: List[Optional[int]], sizes: List[Any],
            data_format: str) -> List[Any]:
    """Run-time asserts for the rules on dims unknown while tracing (the known ones ``datamove.shapes`` checked)."""
    if None not in static:
        return []
    found: List[Tuple[Any, Any, str]] = []  # (must be true, values shown, message)
    rank = len(static)
    if op in ("space_to_depth", "depth_to_space"):
        size = params["block_size"]
        channels, axes = (rank - 1, range(1, rank - 1)) if data_format == "channels_last" else (1, range(2, rank))
        if op == "space_to_depth":
            for i in axes:
                if static[i] is None and size > 1:
                    found.append((tf.equal(sizes[i] % size, 0), sizes[i],
                                  f"space_to_depth: data.shape[{i}] must be divisible by block_size = {size}"))
        elif static[channels] is None and size > 1:
            power = size ** (rank - 2)
            found.append((tf.equal(sizes[channels] % power, 0), sizes[channels],
                          f"depth_to_space: data.shape[{channels}] must be divisible by "
                          f"block_size ** {rank - 2} = {power}"))
    elif op == "batch_to_space":
        block, begin, end = params["block_shape"], params["crops_begin"], params["crops_end"]
        product = math.prod(block)
        if static[0] is None and product > 1:
            found.append((tf.equal(sizes[0] % product, 0), sizes[0],
                          f"batch_to_space: data.shape[0] must be divisible by the product of block_shape "
                          f"{list(block)} = {product}"))
        for i in range(1, rank):
            if static[i] is None and begin[i] + end[i]:
                found.append((sizes[i] * block[i] >= begin[i] + end[i], sizes[i],
                              f"batch_to_space: crops_begin[{i}] + crops_end[{i}] = {begin[i] + end[i]} must not "
                              f"exceed data.shape[{i}] * block_shape[{i}] (block_shape[{i}] = {block[i]})"))
    else:
        block, begin, end = params["block_shape"], params["pads_begin"], params["pads_end"]
        for i in range(1, rank):
            if static[i] is None and block[i] > 1:
                found.append((tf.equal((sizes[i] + begin[i] + end[i]) % block[i], 0), sizes[i],
                              f"space_to_batch: data.shape[{i}] + pads_begin[{i}] + pads_end[{i}] "
                              f"(= data.shape[{i}] + {begin[i] + end[i]}) must be divisible by "
                              f"block_shape[{i}] = {block[i]}"))
    return [tf.debugging.Assert(holds, [f"datamove: {message}; data.shape[...] =", value])
            for holds, value, message in found]
