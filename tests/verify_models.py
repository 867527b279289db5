"""The IRs of tests/test_verify.py, written the way OpenVINO's converter writes them.

Two kinds:

- framework models, converted by ``openvino.convert_model`` and saved by
  ``openvino.save_model``: a TensorFlow "reorg" (``tf.nn.space_to_depth``
  between Conv2D layers), a TensorFlow dilated convolution spelled out as
  SpaceToBatchND / Conv2D / ReLU / BatchToSpaceND, and a PyTorch PixelShuffle
  upscaler (through ONNX, and directly). TensorFlow and PyTorch are imported
  only by ``python tests/verify_models.py FOLDER``, which the tests run in a
  process of its own (TensorFlow next to Triton or jaxlib in one process can
  abort, and importing both costs seconds);
- small graphs built with OpenVINO's opset API in the test process
  (:func:`opset_models`): the SpaceToBatch case OpenVINO's CPU plugin gets
  wrong, chained data-movement layers, parameters given at run time, bf16.

Measured with OpenVINO 2026.4.1: ``tf.nn.atrous_conv2d`` (and
``tf.nn.convolution`` with dilations) converts to a plain dilated Convolution
(the converter fuses SpaceToBatch / Convolution / BatchToSpace), so the dilated
model keeps a ReLU between the convolution and BatchToSpace, which stops the
fusion; and OpenVINO's PyTorch front end decomposes PixelShuffle into
Reshape / Transpose / Reshape, so the DepthToSpace model goes through
``torch.onnx.export`` (ONNX DepthToSpace, mode CRD: OpenVINO's depth_first).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import warnings
from typing import Any, Callable, Dict, Tuple

import numpy as np

#: The SpaceToBatch case OpenVINO 2026.4.1's CPU plugin computes wrongly (found by a
#: random search, see test_verify.py): the second batch block is pure padding, but
#: OpenVINO copies the data's second half into it (5, 6, 7, 8 where zeros belong).
BUG_SHAPE = (1, 2, 1, 4)
BUG_BLOCK_SHAPE = (1, 1, 3, 1)
BUG_PADS_BEGIN = (0, 0, 0, 0)
BUG_PADS_END = (0, 0, 2, 0)

SEED = 20260417


# ----------------------------------------------------------------- framework models (own process)


def tensorflow_models(folder: pathlib.Path) -> Dict[str, Any]:
    """The TensorFlow models, NHWC, converted and saved into ``folder``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import openvino as ov
    import tensorflow as tf

    rng = np.random.default_rng(SEED)

    def weights(*shape: int) -> Any:
        return tf.constant(rng.standard_normal(shape).astype(np.float32) / 4)

    first, packed, dilated = weights(3, 3, 3, 8), weights(3, 3, 32, 4), weights(3, 3, 8, 8)
    signature = [tf.TensorSpec([1, 16, 16, 3], tf.float32, name="image")]

    @tf.function(input_signature=signature)
    def reorg(image: Any) -> Any:
        """YOLOv2's passthrough layer: conv, space_to_depth, conv."""
        features = tf.nn.relu(tf.nn.conv2d(image, first, 1, "SAME"))
        return tf.nn.conv2d(tf.nn.space_to_depth(features, 2), packed, 1, "SAME")

    @tf.function(input_signature=signature)
    def dilated_conv(image: Any) -> Any:
        """A 3x3 convolution of dilation 2, as tf.nn.atrous_conv2d builds it, with its ReLU before BatchToSpace."""
        features = tf.nn.relu(tf.nn.conv2d(image, first, 1, "SAME"))
        spread = tf.space_to_batch_nd(features, [2, 2], [[2, 2], [2, 2]])
        convolved = tf.nn.relu(tf.nn.conv2d(spread, dilated, 1, "VALID"))
        return tf.batch_to_space(convolved, [2, 2], [[0, 0], [0, 0]])

    built = {}
    for name, function in (("tf_reorg", reorg), ("tf_dilated", dilated_conv)):
        path = folder / f"{name}.xml"
        ov.save_model(ov.convert_model(function), str(path))
        built[name] = {"xml": str(path), "inputs": {"image": [1, 16, 16, 3]}}
    return built


def upscaler() -> Any:
    """A super-resolution head: Conv2d to 3 * 2 * 2 channels, PixelShuffle(2), a Conv2d."""
    import torch

    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 12, 3, padding=1), torch.nn.PixelShuffle(2),
                               torch.nn.Conv2d(3, 3, 3, padding=1)).eval()


def torch_models(folder: pathlib.Path) -> Dict[str, Any]:
    """The PyTorch upscaler, through ONNX (DepthToSpace) and directly (OpenVINO decomposes PixelShuffle)."""
    import openvino as ov
    import torch

    model, example = upscaler(), torch.zeros(1, 3, 8, 8)
    onnx_path = folder / "torch_upscaler.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation: it is 10x faster here
        try:
            torch.onnx.export(model, (example,), str(onnx_path), input_names=["image"], output_names=["upscaled"],
                              dynamo=False)
        except Exception:  # a PyTorch without the TorchScript exporter
            torch.onnx.export(model, (example,), str(onnx_path), input_names=["image"], output_names=["upscaled"])
    built = {}
    path = folder / "torch_upscaler_onnx.xml"
    ov.save_model(ov.convert_model(str(onnx_path)), str(path))
    built["torch_upscaler_onnx"] = {"xml": str(path), "inputs": {"image": [1, 3, 8, 8]}}
    path = folder / "torch_upscaler.xml"
    ov.save_model(ov.convert_model(model, example_input=example), str(path))
    converted = ov.Core().read_model(str(path))
    built["torch_upscaler"] = {"xml": str(path), "inputs": {converted.inputs[0].get_any_name(): [1, 3, 8, 8]}}
    return built


GROUPS = {"tensorflow": (("tf_reorg", "tf_dilated"), tensorflow_models),
          "torch": (("torch_upscaler_onnx", "torch_upscaler"), torch_models)}


def main(argv: Any = None) -> int:
    """``python tests/verify_models.py FOLDER GROUP...``: build those models, print what was built as JSON.

    GROUP is ``tensorflow`` or ``torch`` (default: both). A framework that is
    not installed is reported as ``{"skip": reason}`` for each of its models.
    """
    folder, *groups = list(sys.argv[1:] if argv is None else argv)
    pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
    built: Dict[str, Any] = {}
    for group in groups or GROUPS:
        names, build = GROUPS[group]
        try:
            built.update(build(pathlib.Path(folder)))
        except ImportError as exc:
            built.update({name: {"skip": f"{exc.name or exc} is not installed"} for name in names})
    sys.stdout.write("\n" + json.dumps(built) + "\n")  # on a line of its own, after any library's chatter
    return 0


# ----------------------------------------------------------------- opset models (test process)


def _opset() -> Any:
    import importlib

    for name in ("openvino.opset15", "openvino.opset13", "openvino.runtime.opset13", "openvino.runtime.opset8"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("no OpenVINO opset module with SpaceToBatch-2")


def save(folder: pathlib.Path, name: str, build: Callable[[Any, Any], Tuple[list, list]]) -> str:
    """``build(ov, opset)`` gives (outputs, parameters); the model is saved as ``folder/NAME.xml``."""
    import openvino as ov

    outputs, parameters = build(ov, _opset())
    path = folder / f"{name}.xml"
    ov.save_model(ov.Model(outputs, parameters, name), str(path), compress_to_fp16=False)
    return str(path)


def space_to_batch_bug(folder: pathlib.Path) -> str:
    """Parameter -> SpaceToBatch (the case OpenVINO gets wrong) -> Result, and -> Convolution -> Result.

    The data feeds the layer straight from the Parameter, and the layer's
    output is already a Result: both ports are exposed without a new Result.
    """
    def build(ov: Any, opset: Any) -> Tuple[list, list]:
        data = opset.parameter(list(BUG_SHAPE), ov.Type.f32, name="data")
        constant = lambda values: opset.constant(np.array(values, np.int64))  # noqa: E731
        spread = opset.space_to_batch(data, constant(BUG_BLOCK_SHAPE), constant(BUG_PADS_BEGIN),
                                      constant(BUG_PADS_END))
        spread.set_friendly_name("spread")
        kernel = opset.constant(np.full((2, 2, 1, 1), 0.5, np.float32))
        mixed = opset.convolution(spread, kernel, [1, 1], [0, 0], [0, 0], [1, 1])
        return [spread, mixed], [data]

    return save(folder, "space_to_batch_bug", build)


def chained(folder: pathlib.Path) -> str:
    """int8 data: SpaceToDepth -> DepthToSpace -> Result (one layer's output is the next one's input),
    and a BatchToSpace whose block shape and crops are Parameters (known only at run time)."""
    def build(ov: Any, opset: Any) -> Tuple[list, list]:
        data = opset.parameter([2, 3, 4, 6], ov.Type.i8, name="data")
        packed = opset.space_to_depth(data, "depth_first", 2)
        packed.set_friendly_name("pack")
        unpacked = opset.depth_to_space(packed, "blocks_first", 2)
        unpacked.set_friendly_name("unpack")
        batch = opset.parameter([8, 3, 2], ov.Type.f32, name="batch")
        params = [opset.parameter([3], ov.Type.i64, name=name) for name in ("block", "crops_begin", "crops_end")]
        merged = opset.batch_to_space(batch, *params)
        merged.set_friendly_name("merge")
        return [unpacked, merged], [data, batch, *params]

    return save(folder, "chained", build)


def half_precision(folder: pathlib.Path) -> str:
    """f16 data (NaN payloads, -0.0) through DepthToSpace, and bf16 through SpaceToDepth."""
    def build(ov: Any, opset: Any) -> Tuple[list, list]:
        half = opset.parameter([1, 8, 2, 3], ov.Type.f16, name="half")
        spread = opset.depth_to_space(half, "depth_first", 2)
        spread.set_friendly_name("spread_f16")
        brain = opset.parameter([1, 2, 4, 4], ov.Type.bf16, name="brain")
        packed = opset.space_to_depth(brain, "blocks_first", 2)
        packed.set_friendly_name("pack_bf16")
        return [spread, packed], [half, brain]

    return save(folder, "half_precision", build)


def batch_axis_block(folder: pathlib.Path) -> str:
    """SpaceToBatch with block_shape[0] = 2: OpenVINO runs it, the spec (and datamove) say the batch has no block."""
    def build(ov: Any, opset: Any) -> Tuple[list, list]:
        data = opset.parameter([2, 4], ov.Type.f32, name="data")
        constant = lambda values: opset.constant(np.array(values, np.int64))  # noqa: E731
        node = opset.space_to_batch(data, constant([2, 1]), constant([0, 0]), constant([0, 0]))
        node.set_friendly_name("batch_block")
        return [node], [data]

    return save(folder, "batch_axis_block", build)


def no_data_movement(folder: pathlib.Path) -> str:
    """Parameter -> Convolution -> ReLU -> Result: none of the four layers."""
    def build(ov: Any, opset: Any) -> Tuple[list, list]:
        data = opset.parameter([1, 2, 4, 4], ov.Type.f32, name="data")
        kernel = opset.constant(np.ones((3, 2, 1, 1), np.float32))
        return [opset.relu(opset.convolution(data, kernel, [1, 1], [0, 0], [0, 0], [1, 1]))], [data]

    return save(folder, "no_data_movement", build)


if __name__ == "__main__":
    sys.exit(main())
