"""``datamove.ir.verify`` and ``datamove verify``: real models run in OpenVINO, their data-movement layers checked.

The models (tests/verify_models.py) are what OpenVINO's converter writes:
TensorFlow and PyTorch models converted by ``openvino.convert_model`` and
saved by ``openvino.save_model`` (in processes of their own), and small opset
graphs, one of them the SpaceToBatch case OpenVINO's CPU plugin gets wrong.

That case was found by a random search against ``datamove.space_to_batch``
(OpenVINO 2026.4.1, CPU, f32 inference, static shapes, constant parameters):
33 of 300 random cases differed (ranks 3-5, blocks 1-3, pads so the spec's
divisibility holds; float32, float16, int8, uint8, int32), 19 of 300 among
NCHW float32 cases with blocks on H and W, none of those with equal pads on
both sides; every case that differs has an output batch block that lies in
the padding. The test keeps the smallest such case (PEERS.md section 6).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import datamove
import datamove.ops
import verify_models as models
from datamove.cli.app import main
from datamove.errors import DataMoveError
from datamove.ir import LayerReport, VerifyReport, verify

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = pathlib.Path(__file__).resolve().parent


def _needs_openvino() -> None:
    pytest.importorskip("openvino", reason="OpenVINO (a test extra) is not installed")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("verify")


@pytest.fixture(scope="module")
def framework_models(folder):
    """The TensorFlow and PyTorch models, converted in two processes at once (about 4 s)."""
    _needs_openvino()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    runs = [subprocess.Popen([sys.executable, str(HERE / "verify_models.py"), str(folder), group],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
            for group in ("tensorflow", "torch")]
    built = {}
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
        built.update(json.loads(out.strip().splitlines()[-1]))
    return built


def _model(framework_models, name):
    info = framework_models[name]
    if "skip" in info:
        pytest.skip(info["skip"])
    rng = np.random.default_rng(0)
    inputs = {key: rng.standard_normal(shape).astype(np.float32) for key, shape in info["inputs"].items()}
    return info["xml"], inputs


def _save_inputs(tmp_path, inputs):
    arguments = []
    for name, array in inputs.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        arguments += ["-i", f"{name}={path}"]
    return arguments


# ----------------------------------------------------------------- real models


def test_tensorflow_reorg_space_to_depth(framework_models, tmp_path, capsys):
    xml, inputs = _model(framework_models, "tf_reorg")
    report = verify(xml, inputs)
    assert report.ok, str(report)
    (layer,) = report.layers
    assert (layer.type, layer.parameters) == ("SpaceToDepth", {"mode": "blocks_first", "block_size": 2})
    # the front end runs the NHWC model as NCHW between transposes
    assert (layer.input_shape, layer.output_shape, layer.dtype) == ((1, 8, 16, 16), (1, 32, 8, 8), "float32")
    assert report.total_layers > 5  # Convolution, Transpose, Relu... stay OpenVINO's
    assert main(["verify", xml, *_save_inputs(tmp_path, inputs)]) == 0
    out = capsys.readouterr().out
    assert f"equal: layer {layer.name!r} (SpaceToDepth; blocks_first, block_size 2): [1, 8, 16, 16] -> " \
           "[1, 32, 8, 8] float32" in out
    assert out.rstrip().endswith("OK: every data-movement layer equals datamove's result")


def test_tensorflow_dilated_convolution(framework_models):
    xml, inputs = _model(framework_models, "tf_dilated")
    report = verify(xml, inputs)
    assert report.ok, str(report)
    assert [layer.type for layer in report.layers] == ["SpaceToBatch", "BatchToSpace"]
    spread, merge = report.layers
    assert spread.parameters == {"block_shape": [1, 1, 2, 2], "pads_begin": [0, 0, 2, 2], "pads_end": [0, 0, 2, 2]}
    assert (spread.input_shape, spread.output_shape) == ((1, 8, 16, 16), (4, 8, 10, 10))
    assert merge.parameters["block_shape"] == [1, 1, 2, 2]
    assert (merge.input_shape, merge.output_shape) == ((4, 8, 8, 8), (1, 8, 16, 16))
    assert all(layer.elements > 0 and layer.mismatches == 0 for layer in report.layers)


def test_pytorch_pixel_shuffle_through_onnx(framework_models):
    xml, inputs = _model(framework_models, "torch_upscaler_onnx")
    report = verify(xml, inputs)
    assert report.ok, str(report)
    (layer,) = report.layers
    assert (layer.type, layer.parameters) == ("DepthToSpace", {"mode": "depth_first", "block_size": 2})
    assert (layer.input_shape, layer.output_shape) == ((1, 12, 8, 8), (1, 3, 16, 16))


def test_pytorch_pixel_shuffle_converted_directly(framework_models):
    """OpenVINO's PyTorch front end writes PixelShuffle as Reshape/Transpose/Reshape (2026.4): nothing to verify."""
    xml, inputs = _model(framework_models, "torch_upscaler")
    report = verify(xml, inputs)
    assert report.ok, str(report)
    assert all(layer.type == "DepthToSpace" for layer in report.layers)
    if not report.layers:
        assert "nothing to verify" in str(report)


# ----------------------------------------------------------------- OpenVINO's SpaceToBatch bug


def _bug_data():
    return np.arange(1, 1 + math.prod(models.BUG_SHAPE), dtype=np.float32).reshape(models.BUG_SHAPE)


def _openvino_gets_the_bug_case_wrong() -> bool:
    """The case run on its own, without verify: does OpenVINO still differ from datamove?"""
    import openvino as ov

    opset = models._opset()
    data = opset.parameter(list(models.BUG_SHAPE), ov.Type.f32)
    constant = lambda values: opset.constant(np.array(values, np.int64))  # noqa: E731
    node = opset.space_to_batch(data, constant(models.BUG_BLOCK_SHAPE), constant(models.BUG_PADS_BEGIN),
                                constant(models.BUG_PADS_END))
    compiled = ov.Core().compile_model(ov.Model([node], [data]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled([_bug_data()])[0]
    return not np.array_equal(got, datamove.space_to_batch(_bug_data(), models.BUG_BLOCK_SHAPE,
                                                           models.BUG_PADS_BEGIN, models.BUG_PADS_END))


def test_openvino_space_to_batch_bug_is_reported(folder, tmp_path, capsys):
    _needs_openvino()
    if not _openvino_gets_the_bug_case_wrong():
        pytest.skip("this OpenVINO computes the SpaceToBatch case right: the mismatch path is covered by "
                    "test_a_layer_that_differs_is_reported")
    xml = models.space_to_batch_bug(folder)
    report = verify(xml, {"data": _bug_data()})
    assert not report.ok
    (layer,) = report.layers
    assert layer.name == "spread" and layer.type == "SpaceToBatch"
    assert layer.parameters == {"block_shape": [1, 1, 3, 1], "pads_begin": [0, 0, 0, 0], "pads_end": [0, 0, 2, 0]}
    assert (layer.input_shape, layer.output_shape, layer.elements) == ((1, 2, 1, 4), (3, 2, 1, 4), 24)
    # the second batch block is pure padding; OpenVINO copies the data's second half into it
    assert layer.mismatches == 4
    assert [(d.index, d.openvino, d.datamove) for d in layer.differences] == [
        ((1, 0, 0, i), 5.0 + i, 0.0) for i in range(4)]
    assert report.failed == [layer]

    arguments = ["verify", xml, *_save_inputs(tmp_path, {"data": _bug_data()})]
    assert main(arguments) == 1
    out = capsys.readouterr().out
    assert ("differs: layer 'spread' (SpaceToBatch; block_shape [1, 1, 3, 1], pads_begin [0, 0, 0, 0], "
            "pads_end [0, 0, 2, 0]): [1, 2, 1, 4] -> [3, 2, 1, 4] float32: 4 of 24 elements differ") in out
    assert "  at [1, 0, 0, 0]: OpenVINO 5.0, datamove 0.0" in out
    assert "FAILED: 1 of 1 data-movement layer differs from datamove's result" in out

    assert main([*arguments, "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False and document["device"] == "CPU"
    (entry,) = document["layers"]
    assert entry["mismatches"] == 4 and entry["ok"] is False and entry["problem"] is None
    assert entry["differences"][0] == {"index": [1, 0, 0, 0], "openvino": 5.0, "datamove": 0.0}


def test_a_layer_that_differs_is_reported(monkeypatch, tmp_path, capsys):
    """The mismatch path whatever OpenVINO's bugs: a datamove that adds 1 to one element disagrees with OpenVINO."""
    _needs_openvino()
    honest = datamove.ops.space_to_depth

    def off_by_one(data, *args, **kwargs):
        result = honest(data, *args, **kwargs).copy()
        result[0, 5, 1, 2] += 1
        return result

    monkeypatch.setattr(datamove.ops, "space_to_depth", off_by_one)
    x = np.arange(5 * 7 * 4 * 6, dtype=np.float32).reshape(5, 7, 4, 6)
    report = verify("examples/ir/space_to_depth.xml", {"data": x})
    (layer,) = report.layers
    assert not report.ok and layer.mismatches == 1
    (difference,) = layer.differences
    assert difference.index == (0, 5, 1, 2) and difference.datamove == difference.openvino + 1
    assert main(["verify", "examples/ir/space_to_depth.xml", *_save_inputs(tmp_path, {"data": x})]) == 1
    assert "1 of 840 elements differ" in capsys.readouterr().out


def test_a_layer_datamove_refuses_is_reported(folder):
    """OpenVINO runs SpaceToBatch with block_shape[0] = 2; the spec (and datamove) refuse it."""
    _needs_openvino()
    report = verify(models.batch_axis_block(folder), {"data": np.ones((2, 4), np.float32)})
    (layer,) = report.layers
    assert not layer.ok and layer.mismatches == 0
    assert layer.problem.startswith("datamove refuses what OpenVINO ran: block_shape[0] must be 1, got 2")
    assert "differs: layer 'batch_block' (SpaceToBatch; block_shape [2, 1]" in str(report)


# ----------------------------------------------------------------- graphs and element types


def test_chained_layers_and_parameters_given_at_run_time(folder):
    _needs_openvino()
    rng = np.random.default_rng(1)
    inputs = {"data": rng.integers(-128, 128, (2, 3, 4, 6)).astype(np.int8),
              "batch": rng.standard_normal((8, 3, 2)).astype(np.float32),
              "block": np.array([1, 2, 2]), "crops_begin": np.array([0, 1, 0]), "crops_end": np.array([0, 0, 1])}
    report = verify(models.chained(folder), inputs)
    assert report.ok, str(report)
    by_name = {layer.name: layer for layer in report.layers}
    assert set(by_name) == {"pack", "unpack", "merge"}
    assert by_name["merge"].parameters == {"block_shape": [1, 2, 2], "crops_begin": [0, 1, 0], "crops_end": [0, 0, 1]}
    assert by_name["merge"].output_shape == (2, 5, 3)
    assert (by_name["pack"].output_shape, by_name["unpack"].input_shape) == ((2, 12, 2, 3), (2, 12, 2, 3))
    assert by_name["unpack"].dtype == "int8"


def test_half_precision_bits(folder):
    """f16 with every bit pattern class (NaN payloads, -0.0, subnormals) and bf16 compare by bits."""
    _needs_openvino()
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(2)
    half = rng.integers(0, 2**16, (1, 8, 2, 3), dtype=np.uint16)
    half[0, :4, 0, 0] = [0x7E01, 0xFE00, 0x8000, 0x0001]  # quiet NaN with a payload, -NaN, -0.0, a subnormal
    inputs = {"half": half.view(np.float16), "brain": rng.standard_normal((1, 2, 4, 4)).astype(ml_dtypes.bfloat16)}
    report = verify(models.half_precision(folder), inputs)
    assert report.ok, str(report)
    assert sorted(layer.dtype for layer in report.layers) == ["bfloat16", "float16"]


def test_comparison_is_by_bits():
    from datamove.ir.verify import _compare

    def layer():
        return LayerReport("x", "SpaceToDepth", {}, (3,), (3,), "float32", elements=3)

    nan = np.array([np.nan, -0.0, 1.0], np.float32)
    same = layer()
    _compare(same, nan, nan.copy(), 5)
    assert same.ok
    other = nan.copy()
    other.view(np.uint32)[0] |= 1  # another NaN payload
    other[1] = 0.0
    differs = layer()
    _compare(differs, nan, other, 5)
    assert differs.mismatches == 2 and [d.index for d in differs.differences] == [(0,), (1,)]
    assert json.dumps(differs.to_dict(), allow_nan=False)  # NaN shown as a string
    assert "OpenVINO nan, datamove nan" in str(differs) and "OpenVINO 0.0, datamove -0.0" in str(differs)
    shaped = layer()
    _compare(shaped, nan, nan[:2], 5)
    assert shaped.problem == "OpenVINO's output is [2] float32, datamove's [3] float32"


def test_a_model_without_data_movement_layers(folder, tmp_path, capsys):
    _needs_openvino()
    xml = models.no_data_movement(folder)
    inputs = {"data": np.ones((1, 2, 4, 4), np.float32)}
    report = verify(xml, inputs)
    assert report.ok and report.layers == [] and isinstance(report, VerifyReport)
    assert str(report) == (f"model 'no_data_movement' ({xml}): no BatchToSpace, SpaceToBatch, SpaceToDepth or "
                           "DepthToSpace layer among its 5 layers: nothing to verify")
    arguments = ["verify", xml, *_save_inputs(tmp_path, inputs)]
    assert main(arguments) == 0
    assert "nothing to verify" in capsys.readouterr().out
    assert main([*arguments, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == []


# ----------------------------------------------------------------- bad input


@pytest.fixture
def good_input(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((5, 7, 4, 6), np.float32))
    return str(path)


@pytest.mark.parametrize("arguments, message", [
    (["-i", "nope={x}"], "input 'nope' is not a Parameter of the model; its inputs are 'data'"),
    ([], "missing input(s) 'data': every Parameter needs an array"),
    (["-i", "data={wrong_shape}"], "has shape [5, 7, 4, 5], which does not fit the Parameter's shape [5, 7, 4, 6]"),
    (["-i", "data={wrong_dtype}"], "has dtype float64, but the Parameter's element_type is f32 (float32)"),
    (["-i", "data={tmp}/missing.npy"], "missing.npy: No such file or directory"),
    (["-i", "data"], "-i 'data': write NAME=FILE.npy"),
    (["-i", "data={x}", "-i", "data={x}"], "-i 'data'=...: given twice"),
])
def test_bad_inputs_exit_2(arguments, message, tmp_path, good_input, capsys):
    np.save(tmp_path / "wrong_shape.npy", np.zeros((5, 7, 4, 5), np.float32))
    np.save(tmp_path / "wrong_dtype.npy", np.zeros((5, 7, 4, 6)))
    names = {"x": good_input, "tmp": tmp_path, "wrong_shape": tmp_path / "wrong_shape.npy",
             "wrong_dtype": tmp_path / "wrong_dtype.npy"}
    arguments = [a.format(**names) for a in arguments]
    assert main(["verify", "examples/ir/space_to_depth.xml", *arguments]) == 2
    err = capsys.readouterr().err
    assert err.startswith("datamove: error: ") and message in err and err.count("\n") == 1


def test_bad_inputs_from_python():
    x = np.zeros((5, 7, 4, 6), np.float32)
    with pytest.raises(DataMoveError, match="missing input"):
        verify("examples/ir/space_to_depth.xml", {})
    with pytest.raises(DataMoveError, match="does not fit"):
        verify("examples/ir/space_to_depth.xml", {"data": x[:, :, :2]})
    with pytest.raises(TypeError, match="inputs must be a mapping"):
        verify("examples/ir/space_to_depth.xml", [x])
    with pytest.raises(DataMoveError, match="cannot read|No such file"):
        verify("examples/ir/no_such_model.xml", {"data": x})


def test_unknown_device_is_one_line(good_input, capsys):
    _needs_openvino()
    with pytest.raises(DataMoveError, match=r"OpenVINO cannot run .* on 'NO_SUCH_DEVICE': .*not registered"):
        verify("examples/ir/space_to_depth.xml", {"data": np.zeros((5, 7, 4, 6), np.float32)},
               device="NO_SUCH_DEVICE")
    assert main(["verify", "examples/ir/space_to_depth.xml", "-i", f"data={good_input}",
                 "--device", "NO_SUCH_DEVICE"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_without_openvino(monkeypatch, good_input, capsys):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    with pytest.raises(DataMoveError, match="needs OpenVINO, which is not installed: pip install openvino"):
        verify("examples/ir/space_to_depth.xml", {"data": np.zeros((5, 7, 4, 6), np.float32)})
    assert main(["verify", "examples/ir/space_to_depth.xml", "-i", f"data={good_input}"]) == 2
    assert "pip install openvino" in capsys.readouterr().err


def test_import_does_not_import_openvino():
    code = ("import sys, datamove, datamove.ir, datamove.cli.app; datamove.cli.app.build_parser(); "
            "from datamove.ir import verify; import datamove.ir.verify; "
            "assert datamove.ir.verify is verify and callable(verify); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openvino', 'tensorflow', 'torch')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_help(capsys):
    assert main(["verify", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--device NAME" in out and "--json" in out and "exit status: 0" in out
    assert main(["--help"]) == 0
    assert "verify" in capsys.readouterr().out
