"""Write the example IRs of this folder with the real OpenVINO (``openvino.save_model``).

The models are the examples of the specs (``shared/specs``): the 2-D and 5-D
BatchToSpace, SpaceToBatch and SpaceToDepth. Each has one f32 Parameter named
``data`` and one Result whose tensor is named ``output``; the operations'
parameters are i64 Consts. ``batch_to_space_2d_wrong.xml`` is the 2-D model
with its recorded output dims edited to be wrong, for ``datamove check``.

Run from the repository root: ``python examples/ir/make_examples.py``.
"""

from __future__ import annotations

import pathlib

import numpy as np
import openvino as ov
from openvino import opset15 as opset

HERE = pathlib.Path(__file__).resolve().parent


def _model(name, shape, build):
    data = opset.parameter(shape, ov.Type.f32, name="data")
    node = build(data)
    node.output(0).set_names({"output"})
    return ov.Model([opset.result(node)], [data], name)


def _i64(values):
    return opset.constant(np.array(values, np.int64))


MODELS = {
    "batch_to_space_2d": ([10, 2], lambda x: opset.batch_to_space(x, _i64([1, 5]), _i64([0, 2]), _i64([0, 0]))),
    "batch_to_space_5d": ([48, 3, 3, 1, 3], lambda x: opset.batch_to_space(
        x, _i64([1, 2, 4, 3, 1]), _i64([0, 0, 1, 0, 0]), _i64([0, 0, 1, 0, 0]))),
    "space_to_batch": ([2, 6, 10, 3, 3], lambda x: opset.space_to_batch(
        x, _i64([1, 2, 4, 3, 1]), _i64([0, 0, 1, 0, 0]), _i64([0, 0, 1, 0, 0]))),
    "space_to_depth": ([5, 7, 4, 6], lambda x: opset.space_to_depth(x, "blocks_first", 2)),
}


def main() -> None:
    for name, (shape, build) in MODELS.items():
        ov.save_model(_model(name, shape, build), HERE / f"{name}.xml", compress_to_fp16=False)
    # The same 2-D model with the BatchToSpace output recorded as [2, 9] instead of [2, 8].
    text = (HERE / "batch_to_space_2d.xml").read_text()
    head, layer, tail = text.partition('type="BatchToSpace"')
    output = tail.index("<output>")
    tail = tail[:output] + tail[output:].replace("<dim>8</dim>", "<dim>9</dim>", 1)
    (HERE / "batch_to_space_2d_wrong.xml").write_text(head + layer + tail)
    (HERE / "batch_to_space_2d_wrong.bin").write_bytes((HERE / "batch_to_space_2d.bin").read_bytes())
    for path in sorted(HERE.glob("*.xml")):
        print(path.relative_to(HERE.parent.parent))


if __name__ == "__main__":
    main()
