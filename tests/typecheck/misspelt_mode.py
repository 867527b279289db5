"""Misspelt modes and data formats: each marked line must FAIL type checking (``tests/test_typing.py``).

Never run: at run time each call raises DataMoveError, naming the argument.
A line that must fail ends with ``# error: ARGUMENT="VALUE"``; the test asserts
that both checkers report an error on exactly these lines, naming the
argument or the misspelt value, and none elsewhere.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

import datamove as dm
from datamove import keras, nn, shapes
from datamove.compat import onnx, tensorflow


def misspelt(x: npt.NDArray[np.float32], t: torch.Tensor) -> None:
    dm.space_to_depth(x, "blocks-first", 2)  # error: mode="blocks-first"
    dm.depth_to_space(t, "depth-first", 2)  # error: mode="depth-first"
    dm.space_to_depth(x, "depth_first", 2, data_format="channel_last")  # error: data_format="channel_last"
    dm.batch_to_space(x, [1, 2], [0, 0], [0, 0], engine="cuda")  # error: engine="cuda"
    shapes.depth_to_space((1, 8, 2, 2), "DCR", 2)  # error: mode="DCR"
    shapes.space_to_depth((1, 2, 4, 4), "blocks_first", 2, data_format="NHWC")  # error: data_format="NHWC"
    onnx.depth_to_space(x, 2, mode="dcr")  # error: mode="dcr"
    tensorflow.space_to_depth(x, 2, data_format="NCHW_VECT_C")  # error: data_format="NCHW_VECT_C"
    nn.SpaceToDepth("blocks-first", 2)  # error: mode="blocks-first"
    keras.DepthToSpace("depth_first", 2, data_format="NHWC")  # error: data_format="NHWC"
    dm.space_to_depth(x, "blocks_first", 2)  # correct: no error here
