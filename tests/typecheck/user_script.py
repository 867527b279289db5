"""A user's script: every public function of datamove, called with NumPy arrays and PyTorch tensors.

``tests/test_typing.py`` type-checks it with ``mypy --strict`` and pyright in
strict mode (it must pass, every ``assert_type`` included), and runs it: the
types the checkers see are the types the calls return.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt
import torch

import datamove as dm
from datamove import DataMoveError, Dim, nn, shapes
from datamove.compat import onnx, tensorflow
from datamove.compat import torch as torch_compat
from datamove.ir import CheckReport, Layer, Mismatch, Model, read_model
from datamove.typing import DataFormat, DimLike, Mode, Shape

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ir"


def operations(x: npt.NDArray[np.float32], t: torch.Tensor) -> None:
    """NumPy in, NumPy out (the dtype kept); a tensor in, a tensor out."""
    y = assert_type(dm.space_to_depth(x, "blocks_first", 2), npt.NDArray[np.float32])
    assert type(y) is np.ndarray and y.dtype == np.float32 and y.shape == (1, 8, 2, 2)
    assert_type(dm.depth_to_space(y, "blocks_first", 2), npt.NDArray[np.float32])
    assert_type(dm.space_to_depth(x, "depth_first", 2, data_format="channels_last"), npt.NDArray[np.float32])
    assert_type(dm.depth_to_space(y, "depth_first", 1, out=np.empty_like(y), engine="numpy"), npt.NDArray[np.float32])
    assert_type(dm.space_to_batch(x, [1, 1, 2, 2], [0, 0, 0, 0], (0, 0, 0, 0)), npt.NDArray[np.float32])
    assert_type(dm.batch_to_space(x, np.array([1, 1, 1, 1]), [0, 0, 1, 0], [0, 0, 0, 1]), npt.NDArray[np.float32])

    u = assert_type(dm.space_to_depth(t, "depth_first", 2), torch.Tensor)
    assert isinstance(u, torch.Tensor) and tuple(u.shape) == (1, 8, 2, 2)
    assert_type(dm.depth_to_space(u, "depth_first", 2, engine="auto"), torch.Tensor)
    assert_type(dm.depth_to_space(u, "blocks_first", 2, data_format="channels_first", out=torch.empty(1, 2, 4, 4)),
                torch.Tensor)
    assert_type(dm.space_to_batch(t, [1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]), torch.Tensor)
    assert_type(dm.batch_to_space(t, [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]), torch.Tensor)

    # one generic signature over the array type (a misspelt literal is then named in mypy's message): nested
    # lists run too, but are typed as arrays only once numpy.asarray has made them one
    assert_type(dm.space_to_depth(np.asarray([[[[1, 2], [3, 4]]]]), "blocks_first", 2), npt.NDArray[Any])

    # a mode held in a variable: annotated with datamove.typing's alias
    mode: Mode = "depth_first"
    data_format: DataFormat = "channels_last"
    assert_type(dm.space_to_depth(x, mode, 2, data_format=data_format), npt.NDArray[np.float32])


class OtherArray:
    """Any other library's array (JAX, CuPy, Dask, ...): what the generic overload asks of it."""

    shape: Tuple[int, ...] = ()
    dtype: str = "float32"


def other_arrays(a: OtherArray) -> None:
    """Not run: the type of an array the checkers know only by its shape and dtype comes back."""
    assert_type(dm.space_to_depth(a, "blocks_first", 2), OtherArray)
    assert_type(dm.batch_to_space(a, [1, 2], [0, 0], [0, 0]), OtherArray)
    assert_type(tensorflow.depth_to_space(a, 2), OtherArray)


def shape_inference() -> None:
    assert_type(shapes.batch_to_space((10, 2), [1, 5], [0, 2], [0, 0]), Shape)
    assert_type(shapes.space_to_batch((2, Dim(3, None)), [1, 4], [0, 1], [0, 0]), Optional[Tuple[DimLike, ...]])
    out = shapes.space_to_depth((None, Dim(4, 8), 6, 6), "blocks_first", 2)
    assert out == (None, Dim(16, 32), 3, 3)
    assert_type(shapes.depth_to_space((1, 12, 2, 3), None, 2, data_format="channels_first"), Shape)
    assert_type(shapes.depth_to_space(None, "depth_first", None), Shape)
    if out is not None:
        first: DimLike = out[1]
        assert_type(first, DimLike)
    d = Dim(2, 8)
    assert_type(d.lo, int)
    assert_type(d.hi, Optional[int])
    assert_type(d.is_static, bool)
    assert_type(str(d), str)


def front_ends(x: npt.NDArray[np.float32], t: torch.Tensor) -> None:
    nhwc: npt.NDArray[np.float32] = np.zeros((1, 4, 4, 8), np.float32)
    assert_type(tensorflow.space_to_depth(nhwc, 2), npt.NDArray[np.float32])
    assert_type(tensorflow.depth_to_space(nhwc, 2, data_format="NHWC"), npt.NDArray[np.float32])
    assert_type(tensorflow.space_to_batch(nhwc, [2, 2], [[0, 0], [0, 0]]), npt.NDArray[np.float32])
    assert_type(tensorflow.batch_to_space(nhwc, 1, np.zeros((1, 2), np.int64)), npt.NDArray[np.float32])
    assert_type(tensorflow.space_to_depth(t, 2, data_format="NCHW"), torch.Tensor)
    assert_type(tensorflow.batch_to_space(t, [1, 1], [[0, 0], [0, 0]]), torch.Tensor)

    assert_type(onnx.space_to_depth(x, 2), npt.NDArray[np.float32])
    assert_type(onnx.depth_to_space(x, 1, mode="CRD"), npt.NDArray[np.float32])
    assert_type(onnx.space_to_depth(t, 2, "DCR"), torch.Tensor)
    assert_type(onnx.depth_to_space(t, 1), torch.Tensor)

    assert_type(torch_compat.pixel_unshuffle(x, 2), npt.NDArray[np.float32])
    assert_type(torch_compat.pixel_shuffle(x, 1), npt.NDArray[np.float32])
    assert_type(torch_compat.pixel_unshuffle(t, 2), torch.Tensor)
    assert_type(torch_compat.pixel_shuffle(t, 1), torch.Tensor)


def modules(t: torch.Tensor) -> None:
    s2d = nn.SpaceToDepth("blocks_first", 2)
    assert_type(s2d.mode, Mode)
    assert_type(s2d.block_size, int)
    assert_type(s2d.data_format, DataFormat)
    u = assert_type(s2d.forward(t), torch.Tensor)
    assert_type(nn.DepthToSpace("blocks_first", 2, data_format="channels_first").forward(u), torch.Tensor)
    s2b = nn.SpaceToBatch([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0])
    assert_type(s2b.block_shape, Tuple[int, ...])
    v = assert_type(s2b.forward(t), torch.Tensor)
    assert_type(nn.BatchToSpace([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]).forward(v), torch.Tensor)
    head = torch.nn.Sequential(torch.nn.Conv2d(2, 8, 1), nn.DepthToSpace("depth_first", 2))
    assert tuple(head(t).shape) == (1, 2, 8, 8)
    assert_type(dm.nn.SpaceToDepth, type[nn.SpaceToDepth])


def converters() -> None:
    p = assert_type(dm.channel_permutation("depth_to_space", 8, 2, from_mode="blocks_first", to_mode="depth_first"),
                    npt.NDArray[np.int64])
    assert p.tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    threads = assert_type(dm.get_num_threads(), int)
    assert_type(dm.set_num_threads(threads), None)


def openvino_ir() -> None:
    model = assert_type(read_model(EXAMPLES / "space_to_depth.xml"), Model)
    report = assert_type(model.check(), CheckReport)
    assert_type(report.ok, bool)
    assert_type(report.mismatches, List[Mismatch])
    assert report.ok
    data = np.ones((5, 7, 4, 6), np.float32)
    outputs = assert_type(model.run({"data": data}, engine="auto"), Dict[str, npt.NDArray[Any]])
    assert outputs["output"].shape == (5, 28, 2, 3)
    assert_type(model.parameters, List[Layer])
    assert_type(read_model(str(EXAMPLES / "batch_to_space_2d.xml")).check().ok, bool)


def errors(x: npt.NDArray[np.float32]) -> None:
    try:
        dm.space_to_depth(x, "blocks_first", 3)
    except DataMoveError as exc:
        assert isinstance(exc, ValueError)
    else:
        raise AssertionError("a block size that divides nothing was accepted")


def main() -> None:
    # (numpy's own reshape is partially unknown to pyright's strict mode: not used here)
    x = np.ones((1, 2, 4, 4), np.float32)
    t = torch.ones(1, 2, 4, 4)
    operations(x, t)
    shape_inference()
    front_ends(x, t)
    modules(t)
    converters()
    openvino_ir()
    errors(x)


if __name__ == "__main__":
    main()
