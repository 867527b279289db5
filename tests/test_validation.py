"""Every rule of the specs, broken through the operations: the exception type and message."""

from __future__ import annotations

import re

import numpy as np
import pytest

import datamove as dm
from datamove import DataMoveError

X2 = np.zeros((4, 3), np.float32)
X4 = np.zeros((2, 8, 4, 6), np.float32)

B2S_RULES = [
    # (data, block_shape, crops_begin, crops_end, error, message)
    (np.zeros(4), [1], [0], [0], DataMoveError, "batch_to_space: data must have rank >= 2, got rank 1"),
    (np.zeros(()), [], [], [], DataMoveError, "rank >= 2, got rank 0"),
    (X2, [1, 2, 1], [0, 0], [0, 0], DataMoveError, r"len\(block_shape\) = 3, data rank = 2"),
    (X2, [1, 2], [0, 0, 0], [0, 0], DataMoveError, r"len\(crops_begin\) = 3, data rank = 2"),
    (X2, [1, 2], [0, 0], [0], DataMoveError, r"len\(crops_end\) = 1, data rank = 2"),
    (X2, [1, 0], [0, 0], [0, 0], DataMoveError, r"block_shape\[1\] must be >= 1, got 0"),
    (X2, [1, -2], [0, 0], [0, 0], DataMoveError, r"block_shape\[1\] must be >= 1, got -2"),
    (X2, [2, 1], [0, 0], [0, 0], DataMoveError, r"block_shape\[0\] must be 1, got 2: index 0 is the batch axis"),
    (X2, [1, 2], [0, -1], [0, 0], DataMoveError, r"crops_begin\[1\] must be >= 0, got -1"),
    (X2, [1, 2], [0, 0], [0, -3], DataMoveError, r"crops_end\[1\] must be >= 0, got -3"),
    (X2, [1, 2], [1, 0], [0, 0], DataMoveError, r"crops_begin\[0\] must be 0, got 1: index 0 is the batch axis"),
    (X2, [1, 2], [0, 0], [1, 0], DataMoveError, r"crops_end\[0\] must be 0, got 1"),
    (X2, [1, 3], [0, 0], [0, 0], DataMoveError,
     r"data.shape\[0\] = 4 is not divisible by the product of block_shape \[1, 3\] = 3"),
    (X2, [1, 2], [0, 4], [0, 3], DataMoveError,
     r"crops_begin\[1\] \+ crops_end\[1\] = 7 exceeds data.shape\[1\] \* block_shape\[1\] = 6"),
    (X2, [1, 2.0], [0, 0], [0, 0], TypeError, r"block_shape\[1\] must be an integer, got float 2.0"),
    (X2, [1, True], [0, 0], [0, 0], TypeError, r"block_shape\[1\] must be an integer, got bool"),
    (X2, np.array([1.0, 2.0]), [0, 0], [0, 0], TypeError, "block_shape must have an integer dtype, got float64"),
    (X2, np.array([True, True]), [0, 0], [0, 0], TypeError, "block_shape must have an integer dtype, got bool"),
    (X2, np.array([[1, 2]]), [0, 0], [0, 0], DataMoveError, r"block_shape must be 1-D, got an array of shape \(1, 2\)"),
    (X2, [[1, 2]], [0, 0], [0, 0], DataMoveError, "block_shape must be 1-D"),
    (X2, "12", [0, 0], [0, 0], TypeError, "block_shape must be a sequence of integers, got str"),
    (X2, 2, [0, 0], [0, 0], TypeError, "block_shape must be a sequence of integers, got int"),
    (X2, None, [0, 0], [0, 0], TypeError, "block_shape is required"),
    (X2, [1, 2**63], [0, 0], [0, 0], DataMoveError, r"block_shape\[1\] = 9223372036854775808 does not fit in int64"),
    (X2, np.array([1, 2**63], np.uint64), [0, 0], [0, 0], DataMoveError, "does not fit in int64"),
    (np.zeros((0, 1, 1, 1)), [1, 2**31, 2**31, 2], [0] * 4, [0] * 4, DataMoveError,
     "the product of block_shape = 9223372036854775808 does not fit in int64"),
]


@pytest.mark.parametrize("data, block, begin, end, error, match", B2S_RULES)
def test_batch_to_space_rules(data, block, begin, end, error, match):
    with pytest.raises(error, match=match):
        dm.batch_to_space(data, block, begin, end)


S2B_RULES = [
    (np.zeros(3), [1], [0], [0], DataMoveError, "space_to_batch: data must have rank >= 2, got rank 1"),
    (X2, [1, 2], [0, 0], [0], DataMoveError, r"len\(pads_end\) = 1, data rank = 2"),
    (X2, [1, 0], [0, 0], [0, 0], DataMoveError, r"block_shape\[1\] must be >= 1, got 0"),
    (X2, [3, 1], [0, 0], [0, 0], DataMoveError, r"block_shape\[0\] must be 1, got 3"),
    (X2, [1, 2], [0, -1], [0, 1], DataMoveError, r"pads_begin\[1\] must be >= 0, got -1"),
    (X2, [1, 2], [0, 1], [0, -1], DataMoveError, r"pads_end\[1\] must be >= 0, got -1"),
    (X2, [1, 1], [1, 0], [0, 0], DataMoveError, r"pads_begin\[0\] must be 0, got 1: index 0 is the batch axis, which the spec says is never padded"),
    (X2, [1, 1], [0, 0], [2, 0], DataMoveError, r"pads_end\[0\] must be 0, got 2"),
    (X2, [1, 2], [0, 0], [0, 0], DataMoveError,
     r"data.shape\[1\] \+ pads_begin\[1\] \+ pads_end\[1\] = 3 is not divisible by block_shape\[1\] = 2"),
    (X2, [1, 2], [0, 1.5], [0, 0], TypeError, r"pads_begin\[1\] must be an integer, got float"),
    (np.broadcast_to(np.zeros((1, 1), np.uint8), (2**61, 1)), [1, 4], [0, 0], [0, 3], DataMoveError,
     r"data.shape\[0\] \* prod\(block_shape\) = 9223372036854775808 does not fit in int64"),
    (X2, [1, 1], [0, 0], [0, 2**63 - 1], DataMoveError, "does not fit in int64"),
]


@pytest.mark.parametrize("data, block, begin, end, error, match", S2B_RULES)
def test_space_to_batch_rules(data, block, begin, end, error, match):
    with pytest.raises(error, match=match):
        dm.space_to_batch(data, block, begin, end)


DEPTH_RULES = [
    # (op, data, mode, block_size, error, message)
    ("space_to_depth", np.zeros((2, 4)), "blocks_first", 2, DataMoveError, "space_to_depth: data must have rank >= 3, got rank 2"),
    ("depth_to_space", np.zeros((2, 4)), "blocks_first", 2, DataMoveError, "depth_to_space: data must have rank >= 3, got rank 2"),
    ("space_to_depth", X4, "blocks_first", 0, DataMoveError, "block_size must be >= 1, got 0"),
    ("depth_to_space", X4, "depth_first", -2, DataMoveError, "block_size must be >= 1, got -2"),
    ("space_to_depth", X4, "blocks_first", 2.0, TypeError, "block_size must be an integer, got float"),
    ("depth_to_space", X4, "blocks_first", True, TypeError, "block_size must be an integer, got bool"),
    ("space_to_depth", X4, "blocks_first", None, TypeError, "block_size is required"),
    ("space_to_depth", X4, "blocks_first", 4, DataMoveError, r"data.shape\[3\] = 6 is not divisible by block_size = 4"),
    ("space_to_depth", X4, "depth_first", 3, DataMoveError, r"data.shape\[2\] = 4 is not divisible by block_size = 3"),
    ("depth_to_space", X4, "blocks_first", 4, DataMoveError, r"data.shape\[1\] = 8 is not divisible by block_size \*\* 2 = 16"),
    ("depth_to_space", np.zeros((1, 8, 1, 1, 1)), "depth_first", 2, None, None),
    ("depth_to_space", np.zeros((1, 8, 1, 1, 1, 1)), "depth_first", 2, DataMoveError, r"block_size \*\* 4 = 16"),
    ("space_to_depth", X4, "DCR", 2, DataMoveError, "mode must be 'blocks_first' or 'depth_first', got 'DCR' .ONNX's DCR is 'blocks_first'"),
    ("depth_to_space", X4, "crd", 2, DataMoveError, "ONNX's CRD is 'depth_first'"),
    ("depth_to_space", X4, "BLOCKS_FIRST", 2, DataMoveError, "did you mean 'blocks_first'"),
    ("space_to_depth", X4, "", 2, DataMoveError, "mode must be 'blocks_first' or 'depth_first', got ''"),
    ("space_to_depth", X4, 0, 2, TypeError, "mode must be a string"),
    ("depth_to_space", X4, None, 2, TypeError, "mode is required"),
    ("space_to_depth", X4, "blocks_first", 2**63, DataMoveError, "block_size = 9223372036854775808 does not fit in int64"),
    ("depth_to_space", np.zeros((1, 0, 3)), "blocks_first", 2**62, DataMoveError, r"data.shape\[2\] \* block_size = .* does not fit in int64"),
]


@pytest.mark.parametrize("op, data, mode, size, error, match", DEPTH_RULES)
def test_depth_rules(op, data, mode, size, error, match):
    if error is None:  # the valid neighbour of a broken case
        getattr(dm, op)(data, mode, size)
        return
    with pytest.raises(error, match=match):
        getattr(dm, op)(data, mode, size)


def test_data_errors():
    with pytest.raises(TypeError, match="data must be an array, got NoneType"):
        dm.space_to_depth(None, "blocks_first", 2)
    with pytest.raises(TypeError, match="data must be an array, got str"):
        dm.batch_to_space("abc", [1], [0], [0])


def test_engine_errors():
    x = np.zeros((1, 4, 2, 2))
    with pytest.raises(DataMoveError, match=re.escape("engine must be 'auto' or one of ['numpy', 'native', 'array_api', 'triton', 'pallas'], got 'cuda'")):
        dm.depth_to_space(x, "blocks_first", 2, engine="cuda")
    with pytest.raises(TypeError, match="engine must be a string"):
        dm.depth_to_space(x, "blocks_first", 2, engine=None)
    with pytest.raises(DataMoveError, match=re.escape("engine 'triton' cannot take a numpy.ndarray; engines that can: ['numpy', 'native'")):
        dm.depth_to_space(x, "blocks_first", 2, engine="triton")
    assert dm.depth_to_space(x, "blocks_first", 2, engine="numpy").shape == (1, 1, 4, 4)


def test_errors_are_value_errors():
    assert issubclass(DataMoveError, ValueError)
    with pytest.raises(ValueError):
        dm.batch_to_space(X2, [1, 3], [0, 0], [0, 0])


def test_validation_happens_before_the_engine_is_chosen():
    # A shape error wins over an engine error: the message is about the data.
    with pytest.raises(DataMoveError, match="not divisible"):
        dm.space_to_depth(X4, "blocks_first", 5, engine="numpy")
