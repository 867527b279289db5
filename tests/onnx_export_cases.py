"""Models that call datamove export to ONNX with both of PyTorch's exporters, to standard ops only,
and onnxruntime's result equals PyTorch's bit for bit (datamove.pytorch.onnx).

Run by tests/test_onnx_export.py in a process of its own: ``torch.export`` imports Triton, which aborts a
process that has loaded TensorFlow's or jaxlib's LLVM (as the rest of the suite does).
"""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import datamove  # noqa: E402
from datamove.plans import formulas  # noqa: E402
from datamove import nn
from datamove.pytorch import custom_ops as torch_ops
from datamove.compat import onnx as compat_onnx  # noqa: E402
from datamove.compat import tensorflow as compat_tensorflow  # noqa: E402
from datamove.compat import torch as compat_torch  # noqa: E402

# The exporters and the opsets tested: TorchScript's lowest and highest; the dynamo exporter's own
# (its functions are written for 18: it converts lower ones up to 18) and the newest onnxruntime runs.
TORCHSCRIPT_OPSETS = (7, 20)
DYNAMO_OPSETS = (18, 25)
EXPORTS = [("torchscript", o) for o in TORCHSCRIPT_OPSETS] + [("dynamo", o) for o in DYNAMO_OPSETS]


class Call(torch.nn.Module):
    """``forward(x)`` is ``datamove.<op>(x, *args, **kwargs)``."""

    def __init__(self, op: str, *args, **kwargs) -> None:
        super().__init__()
        self.op, self.args, self.kwargs = op, args, kwargs

    def forward(self, x):
        return getattr(datamove, self.op)(x, *self.args, **self.kwargs)


def export(model, x, exporter, opset, tmp_path, **kwargs):
    """The ONNX model ``torch.onnx.export`` writes, checked by onnx's checker."""
    path = tmp_path / f"{exporter}{opset}.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(model, (x,), str(path), dynamo=exporter == "dynamo", opset_version=opset, **kwargs)
        finally:
            logging.disable(logging.NOTSET)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    return proto, path


def run_onnx(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def same_bits(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def standard_only(proto) -> set:
    """The op types of ``proto``, asserting every node is in the default ONNX domain and no function is defined."""
    assert not proto.functions, [f.name for f in proto.functions]
    assert {o.domain for o in proto.opset_import} <= {"", "ai.onnx"}, list(proto.opset_import)
    assert all(n.domain in ("", "ai.onnx") for n in proto.graph.node)
    return {n.op_type for n in proto.graph.node}


DEPTH = [
    (op, mode, shape, size)
    for op, shapes in (("depth_to_space", [(2, 8, 3, 5), (1, 16, 2, 3, 2), (2, 6, 5)]),
                       ("space_to_depth", [(2, 3, 4, 6), (1, 2, 4, 2, 6), (2, 3, 8)]))
    for mode in ("blocks_first", "depth_first")
    for shape, size in zip(shapes, (2, 2, 2))
] + [("depth_to_space", "depth_first", (1, 18, 2, 2), 3), ("space_to_depth", "blocks_first", (1, 2, 6, 3), 3)]

SPACE = [
    ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]), (8, 3, 3, 3)),
    ("batch_to_space", ([1, 1, 2, 3], [0, 0, 0, 0], [0, 0, 0, 0]), (6, 2, 2, 2)),
    ("batch_to_space", ([1, 2, 1, 2, 2], [0, 1, 0, 0, 1], [0, 0, 0, 1, 2]), (8, 2, 3, 2, 3)),
    ("space_to_batch", ([1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 2]), (2, 3, 4, 4)),
    ("space_to_batch", ([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]), (1, 2, 4, 6)),
    ("space_to_batch", ([1, 2, 2, 1, 2], [0, 1, 0, 0, 1], [0, 1, 2, 0, 1]), (2, 2, 2, 3, 2)),
]

CASES = [pytest.param(Call(op, mode, size), shape, id=f"{op}-{mode}-{len(shape)}d-b{size}")
         for op, mode, shape, size in DEPTH]
CASES += [pytest.param(Call(op, *args), shape, id=f"{op}-{len(shape)}d-{'+'.join(map(str, args[0]))}"
                       f"{'-edges' if any(args[1] + args[2]) else ''}") for op, args, shape in SPACE]


@pytest.mark.parametrize("exporter,opset", EXPORTS)
@pytest.mark.parametrize("model,shape", CASES)
def test_export_matches_pytorch_bit_for_bit(model, shape, exporter, opset, tmp_path):
    x = torch.randn(*shape)
    want = model(x).numpy()
    proto, path = export(model, x, exporter, opset, tmp_path)
    assert proto.opset_import[0].version == opset
    ops = standard_only(proto)
    assert same_bits(run_onnx(path, x.numpy()), want)
    # a new input of the same shape: nothing of x was baked into the model
    y = torch.randn(*shape)
    assert same_bits(run_onnx(path, y.numpy()), model(y).numpy())
    if exporter == "dynamo":
        # the translation chosen: ONNX's own op where it has the mode (4-D), the spec's formula otherwise
        name = model.op
        native = len(shape) == 4 and (name == "depth_to_space" or (name == "space_to_depth" and model.args[0] == "blocks_first"))
        expected = {"depth_to_space": {"DepthToSpace"}, "space_to_depth": {"SpaceToDepth"}}.get(name) if native else None
        if expected is None:
            expected = {"Reshape", "Transpose"}
            if name == "batch_to_space" and any(model.args[1] + model.args[2]):
                expected.add("Slice")
            if name == "space_to_batch" and any(model.args[1] + model.args[2]):
                expected.add("Pad")
        assert ops == expected


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int64, torch.int32, torch.int8,
                                   torch.uint8, torch.bool])
def test_export_every_dtype(dtype, exporter, tmp_path):
    # onnxruntime's DepthToSpace/SpaceToDepth kernels take a few types: the others get the formula
    model = torch.nn.Sequential(Call("space_to_batch", [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2]),
                                Call("depth_to_space", "blocks_first", 2),
                                Call("space_to_depth", "blocks_first", 2))
    x = (torch.randn(2, 4, 4, 4) * 50).to(dtype)
    opset = 20 if exporter == "torchscript" else 18
    proto, path = export(model, x, exporter, opset, tmp_path)
    standard_only(proto)
    assert same_bits(run_onnx(path, x.numpy()), model(x).numpy())


@pytest.mark.parametrize("exporter,opset", [("torchscript", 17), ("dynamo", 18)])
def test_export_nn_modules_between_convolutions(exporter, opset, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), nn.SpaceToDepth("blocks_first", 2), torch.nn.ReLU(),
        nn.SpaceToBatch([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), torch.nn.Conv2d(32, 32, 3),
        nn.BatchToSpace([1, 1, 2, 2], [0, 0, 0, 1], [0, 0, 1, 0]), torch.nn.Conv2d(32, 12, 1),
        nn.DepthToSpace("depth_first", 2), nn.DepthToSpace("blocks_first", 1),
    ).eval()
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        want = model(x).numpy()
    proto, path = export(model, x, exporter, opset, tmp_path)
    assert "Conv" in standard_only(proto)
    # the convolutions are computed by onnxruntime: equal to rounding (the data movement is exact above)
    np.testing.assert_allclose(run_onnx(path, x.numpy()), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("exporter,opset", [("torchscript", 20), ("dynamo", 18)])
@pytest.mark.parametrize("op,mode", [("space_to_depth", "depth_first"), ("depth_to_space", "blocks_first"),
                                     ("depth_to_space", "depth_first")])
def test_export_channels_last(op, mode, exporter, opset, tmp_path):
    model = Call(op, mode, 2, data_format="channels_last")
    x = torch.randn(2, 4, 6, 8)
    proto, path = export(model, x, exporter, opset, tmp_path)
    standard_only(proto)
    assert same_bits(run_onnx(path, x.numpy()), model(x).numpy())


@pytest.mark.parametrize("model,shape", [
    (Call("depth_to_space", "blocks_first", 2), (3, 8, 2, 3)),
    (Call("space_to_depth", "depth_first", 2), (3, 2, 4, 2, 4)),
    (Call("batch_to_space", [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]), (8, 2, 3, 3)),
    (Call("space_to_batch", [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2]), (3, 2, 4, 4)),
], ids=["d2s-dcr-4d", "s2d-crd-5d", "b2s-crops", "s2b-pads"])
def test_dynamo_export_with_a_dynamic_batch(model, shape, tmp_path):
    x = torch.randn(*shape)
    batch = torch.export.Dim("batch", max=64)
    proto, path = export(model, x, "dynamo", 18, tmp_path, dynamic_shapes={"x": {0: batch}})
    standard_only(proto)
    for n in ({"batch_to_space": 4}.get(model.op, 1) * k for k in (1, 2, 5)):
        y = torch.randn(n, *shape[1:])
        assert same_bits(run_onnx(path, y.numpy()), model(y).numpy())


def test_translation_table_for_custom_translation_table(tmp_path):
    table = torch_ops.translation_table()
    assert set(table) == {getattr(torch.ops.datamove, op).default
                          for op in ("batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space")}
    model = Call("depth_to_space", "depth_first", 2)
    x = torch.randn(1, 8, 2, 2)
    proto, path = export(model, x, "dynamo", 18, tmp_path, custom_translation_table=table)
    assert standard_only(proto) == {"DepthToSpace"}
    assert same_bits(run_onnx(path, x.numpy()), model(x).numpy())


def test_jit_trace_records_pytorch_ops():
    model = Call("space_to_batch", [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])
    x = torch.randn(2, 3, 4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch.jit.TracerWarning)  # no warning reaches the user
        traced = torch.jit.trace(model, (x,))
    assert "datamove::" not in str(traced.graph)
    y = torch.randn(2, 3, 4, 6)
    assert torch.equal(traced(y), model(y))


def test_traced_call_is_validated_like_any_other():
    with pytest.raises(datamove.DataMoveError, match="block_size"):
        torch.jit.trace(Call("depth_to_space", "blocks_first", 3), (torch.randn(1, 8, 2, 2),))
    with pytest.raises(datamove.DataMoveError, match="mode"):
        torch.jit.trace(Call("space_to_depth", "blocks-first", 2), (torch.randn(1, 2, 2, 2),))


def test_traced_out_and_block_of_one_are_not_views():
    x = torch.randn(1, 2, 2, 2)
    out = torch.empty(1, 2, 2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.trace(lambda t: datamove.depth_to_space(t, "blocks_first", 1, out=out), (x,))
        result = torch.jit.trace(lambda t: datamove.depth_to_space(t, "blocks_first", 1), (x,))(x)
    assert torch.equal(out, x)
    assert result.data_ptr() != x.data_ptr() and torch.equal(result, x)


@pytest.mark.parametrize("order", ["datamove-first", "onnxscript-first", "nn-first"])
def test_dynamo_export_in_a_fresh_process(order, tmp_path):
    # however the process met datamove, torch and onnxscript, the export works, to standard ops
    imports = {"datamove-first": "import datamove, torch",
               "onnxscript-first": "import torch, onnxscript, datamove",
               "nn-first": "import datamove.nn, torch, datamove"}[order]
    script = textwrap.dedent(f"""
        {imports}
        import warnings, logging, io, contextlib, onnx, onnxruntime as ort, numpy as np
        warnings.simplefilter("ignore"); logging.disable(logging.WARNING)
        class M(torch.nn.Module):
            def forward(self, x):
                return datamove.depth_to_space(datamove.space_to_batch(x, [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]),
                                               "blocks_first", 2)
        x = torch.randn(1, 4, 2, 2)
        for i in range(2):
            path = r"{tmp_path}/m%d.onnx" % i
            with contextlib.redirect_stdout(io.StringIO()):
                torch.onnx.export(M(), (x,), path, dynamo=True)
            proto = onnx.load(path)
            assert all(n.domain == "" for n in proto.graph.node) and not proto.functions
            got = ort.InferenceSession(path).run(None, {{"x": x.numpy()}})[0]
            assert np.array_equal(got, M()(x).numpy())
            print(sorted({{n.op_type for n in proto.graph.node}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = result.stdout.split("\n")[:2]
    assert "Pad" in first and "Reshape" in first
    if order != "datamove-first":  # datamove's translations in the exporter's library from the first export
        assert "DepthToSpace" in first
    assert "DepthToSpace" in second or order == "datamove-first"


def test_formula_steps_agree_with_the_ops():
    rng = np.random.default_rng(0)
    for op, mode, shape, size in DEPTH:
        x = rng.integers(0, 100, shape)
        params = {"mode": mode, "block_size": size}
        assert np.array_equal(formulas.run(formulas.steps(op, params, shape), x), getattr(datamove, op)(x, mode, size))
    for op, args, shape in SPACE:
        x = rng.integers(0, 100, shape)
        names = ("crops_begin", "crops_end") if op == "batch_to_space" else ("pads_begin", "pads_end")
        params = {"block_shape": args[0], names[0]: args[1], names[1]: args[2]}
        s = formulas.steps(op, params, shape)
        assert s.out_shape == getattr(datamove.shapes, op)(shape, *args)
        assert np.array_equal(formulas.run(s, x), getattr(datamove, op)(x, *args))


COMPAT = [
    ("torch.pixel_shuffle-5d", lambda x: compat_torch.pixel_shuffle(x, 2), (2, 3, 8, 4, 4)),
    ("torch.pixel_unshuffle", lambda x: compat_torch.pixel_unshuffle(x, 2), (1, 3, 4, 4)),
    ("onnx.depth_to_space-CRD", lambda x: compat_onnx.depth_to_space(x, 2, mode="CRD"), (1, 8, 3, 3)),
    ("tensorflow.space_to_batch", lambda x: compat_tensorflow.space_to_batch(x, [2, 2], [[0, 0], [1, 1]]), (1, 4, 4, 3)),
    ("tensorflow.depth_to_space-NHWC", lambda x: compat_tensorflow.depth_to_space(x, 2), (1, 3, 3, 8)),
]


class Lambda(torch.nn.Module):
    def __init__(self, function) -> None:
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


@pytest.mark.parametrize("exporter,opset", [("torchscript", 17), ("dynamo", 18)])
@pytest.mark.parametrize("name,function,shape", COMPAT, ids=[c[0] for c in COMPAT])
def test_export_the_compat_front_ends(name, function, shape, exporter, opset, tmp_path):
    # the front ends are reshapes and transposed views around one core call: they trace and export too
    x = torch.randn(*shape)
    proto, path = export(Lambda(function), x, exporter, opset, tmp_path)
    standard_only(proto)
    assert same_bits(run_onnx(path, x.numpy()), function(x).numpy())
