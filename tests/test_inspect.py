"""datamove inspect MODEL.xml: what run expects and gives."""

from __future__ import annotations

import numpy as np

from datamove.cli.app import main

from ir_builders import IR


def inspect(capsys, *argv):
    status = main(["inspect", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_examples_say_what_run_expects(capsys, tmp_path):
    status, out, err = inspect(capsys, "examples/ir/batch_to_space_5d.xml")
    assert (status, err) == (0, "")
    assert "  data: [48, 3, 3, 1, 3] f32 (float32)\n" in out
    assert "  output: [2, 6, 10, 3, 3] f32 (float32)\n" in out
    assert out.rstrip().endswith("layers: 1 Parameter, 3 Const, 1 BatchToSpace, 1 Result")
    # what it says is enough to run the model
    np.save(tmp_path / "x.npy", np.zeros((48, 3, 3, 1, 3), np.float32))
    assert main(["run-model", "examples/ir/batch_to_space_5d.xml", "-i", f"data={tmp_path / 'x.npy'}",
                 "-o", str(tmp_path / "y.npz")]) == 0
    with np.load(tmp_path / "y.npz") as saved:
        assert saved["output"].shape == (2, 6, 10, 3, 3)


def test_intervals_converts_and_other_layers(capsys, tmp_path):
    ir = IR()
    data = ir.parameter("image", (1, 8, 6, 6), np.uint8)
    ir.layers[-1] = ir.layers[-1].replace('shape="1,8,6,6"', 'shape="?,4..8,6,6"')
    converted = ir.op("Convert", [data], {"destination_type": "f32"})
    s2d = ir.op("SpaceToDepth", [converted], {"mode": "blocks_first", "block_size": "2"}, output_name="packed")
    ir.result(s2d)
    ir.result(ir.op("Relu", [s2d], output_name="relu"))
    status, out, err = inspect(capsys, ir.write(tmp_path))
    assert (status, err) == (0, ""), err
    assert "  image: [?, 4..8, 6, 6] u8 (uint8)\n" in out
    assert "  packed: [?, 16..32, 3, 3] f32 (float32)\n" in out
    assert "layers: 1 Parameter, 1 Convert, 1 SpaceToDepth, 1 Relu, 2 Result" in out
    assert "'datamove run' cannot run it (layers of other types: Relu)" in out


def test_hostile_names_are_escaped_and_bad_files_are_one_error(capsys, tmp_path):
    ir = IR()
    ir.result(ir.parameter("x", (2, 2)), output_name="a&#10;datamove: error: fake")
    status, out, err = inspect(capsys, ir.write(tmp_path))
    assert status == 0 and "a\\ndatamove: error: fake: [2, 2] f32 (float32)" in out
    (tmp_path / "bad.xml").write_text("<net version='11'><layers>")
    status, out, err = inspect(capsys, tmp_path / "bad.xml")
    assert status == 2 and out == "" and err.startswith("datamove: error: ") and err.count("\n") == 1
