"""Every dim symbolic in PyTorch: torch.compile(dynamic=True), torch.export with Dims, both ONNX exporters with
dynamic dims, torch.jit.trace and torch.jit.script; the graphs take sizes they never saw (datamove.pytorch.custom_ops'
fake implementations, datamove.pytorch.onnx).

Run by tests/test_torch_symbolic.py in a process of its own: torch.compile and torch.export import Triton, which
aborts a process that has loaded TensorFlow's or jaxlib's LLVM (as the rest of the suite does).
"""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import datamove  # noqa: E402
from datamove import nn  # noqa: E402

# (module, the size traced or exported at, sizes it never saw): every dim changes, first sizes with no two dims
# equal (torch.compile's duck sizing would give two dims one symbol) and none 0 or 1 (sizes it specializes)
CASES = {
    "depth_to_space": (nn.DepthToSpace("blocks_first", 2), (2, 12, 3, 5), [(3, 8, 5, 2), (1, 4, 2, 3), (4, 16, 6, 7)]),
    "space_to_depth": (nn.SpaceToDepth("depth_first", 2), (2, 3, 4, 6), [(3, 2, 6, 8), (1, 5, 2, 2), (2, 1, 8, 4)]),
    "batch_to_space": (nn.BatchToSpace([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]), (8, 3, 2, 5),
                       [(4, 2, 5, 2), (12, 1, 2, 3), (16, 3, 4, 4)]),
    "space_to_batch": (nn.SpaceToBatch([1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 2]), (2, 3, 4, 7),
                       [(3, 2, 6, 4), (1, 1, 2, 1), (2, 4, 8, 10)]),
}
OPS = list(CASES)


def same_bits(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@contextlib.contextmanager
def quiet():
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


# ------------------------------------------------------------------ torch.compile(dynamic=True)


def graphs(model, shapes) -> int:
    """How many graphs ``torch.compile(model, dynamic=True)`` makes for inputs of ``shapes`` (each result checked)."""
    torch._dynamo.reset()
    made = []

    def backend(graph, example_inputs):
        made.append(graph)
        return graph.forward

    compiled = torch.compile(model, backend=backend, dynamic=True, fullgraph=True)
    for shape in shapes:
        x = torch.randn(*shape)
        assert torch.equal(compiled(x), model(x)), shape
    return len(made)


@pytest.mark.parametrize("op", OPS)
def test_compile_dynamic_makes_one_graph_across_sizes(op):
    model, shape, new = CASES[op]
    assert graphs(model, [shape] + [s for s in new if 1 not in s]) == 1


def test_compile_dynamic_channels_last_and_leading_dims():
    cl = nn.SpaceToDepth("depth_first", 2, data_format="channels_last")
    assert graphs(cl, [(2, 4, 6, 3), (3, 6, 8, 2), (2, 8, 2, 5)]) == 1
    lead = nn.DepthToSpace("depth_first", 2, spatial_dims=2)
    assert graphs(lead, [(2, 3, 8, 5, 7), (3, 5, 12, 6, 2), (4, 2, 16, 9, 3)]) == 1


def test_compiled_call_still_checks_divisibility_at_run_time():
    compiled = torch.compile(nn.SpaceToDepth("blocks_first", 2), backend="aot_eager", dynamic=True)
    compiled(torch.randn(2, 3, 4, 6))
    with pytest.raises(Exception, match=r"data.shape\[2\] = 5 is not divisible by block_size = 2"):
        compiled(torch.randn(2, 3, 5, 6))


# ------------------------------------------------------------------ torch.export


@pytest.mark.parametrize("op", OPS)
def test_export_with_a_dim_on_every_dim(op):
    model, shape, new = CASES[op]
    dims = {i: torch.export.Dim.DYNAMIC for i in range(len(shape))}
    program = torch.export.export(model, (torch.randn(*shape),), dynamic_shapes={"x": dims})
    out = [n for n in program.graph.nodes if n.op == "output"][0].args[0][0].meta["val"]
    assert all(not isinstance(d, int) for d in out.shape), out.shape  # no size of the example baked in
    # PyTorch's export assumes no dim is 0 or 1 (its layout checks leave that as a run-time assertion)
    new = [s for s in new if 1 not in s and 1 not in model(torch.zeros(s)).shape]
    assert new
    for s in new:
        x = torch.randn(*s)
        assert torch.equal(program.module()(x), model(x)), s


def test_export_with_named_dims_on_height_and_width():
    # a plain Dim: a size halved by the op must not be 1 for PyTorch's own layout checks, hence min=4
    model = nn.SpaceToDepth("depth_first", 2)
    h, w = torch.export.Dim("h", min=4), torch.export.Dim("w", min=4)
    program = torch.export.export(model, (torch.randn(2, 3, 4, 6),), dynamic_shapes={"x": {2: h, 3: w}})
    x = torch.randn(2, 3, 10, 8)
    assert torch.equal(program.module()(x), model(x))


# ------------------------------------------------------------------ ONNX, both exporters


def export_onnx(model, shape, exporter, path):
    x = torch.randn(*shape)
    rank = len(shape)
    with quiet():
        if exporter == "dynamo":
            dims = {i: torch.export.Dim.DYNAMIC for i in range(rank)}
            torch.onnx.export(model, (x,), str(path), dynamo=True, dynamic_shapes={"x": dims})
        else:
            torch.onnx.export(model, (x,), str(path), dynamo=False, input_names=["x"],
                              dynamic_axes={"x": list(range(rank))})
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    assert all(n.domain in ("", "ai.onnx") for n in proto.graph.node) and not proto.functions
    return proto


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize("op", OPS)
def test_onnx_export_with_every_dim_dynamic_takes_new_sizes(op, exporter, tmp_path):
    model, shape, new = CASES[op]
    proto = export_onnx(model, shape, exporter, tmp_path / "m.onnx")
    kinds = {n.op_type for n in proto.graph.node}
    if exporter == "dynamo" and op == "depth_to_space":
        assert kinds == {"DepthToSpace"}  # ONNX's own op, which takes any size
    else:
        assert "Shape" in kinds  # the reshapes' sizes read from the input when the model runs
    session = ort.InferenceSession(str(path := tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    for s in new:  # 3 sizes the export never saw, every dim changed
        x = torch.randn(*s)
        assert same_bits(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0], model(x).numpy()), (s, path)


# ------------------------------------------------------------------ TorchScript


@pytest.mark.parametrize("op", OPS)
def test_jit_trace_records_shape_arithmetic(op):
    model, shape, new = CASES[op]
    with quiet():
        traced = torch.jit.trace(model, (torch.randn(*shape),))
    assert "datamove::" not in str(traced.graph)
    for s in new:
        x = torch.randn(*s)
        assert torch.equal(traced(x), model(x)), s


def test_jit_script_of_a_model_holding_every_layer(tmp_path):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 12, 1), nn.DepthToSpace("depth_first", 2),
        nn.SpaceToBatch([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2]), nn.BatchToSpace([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2]),
        nn.SpaceToDepth("blocks_first", 2, spatial_dims=2), nn.DepthToSpace("blocks_first", 2, spatial_dims=2),
    ).eval()
    scripted = torch.jit.script(model)
    channels_last = torch.jit.script(torch.nn.Sequential(
        nn.SpaceToDepth("blocks_first", 2, data_format="channels_last"),
        nn.DepthToSpace("blocks_first", 2, data_format="channels_last", spatial_dims=2)))
    torch.jit.save(scripted, str(tmp_path / "m.pt"))
    loaded = torch.jit.load(str(tmp_path / "m.pt"))
    with torch.no_grad():
        for s in [(2, 3, 4, 6), (1, 3, 8, 2), (3, 3, 6, 10)]:
            x = torch.randn(*s)
            assert torch.equal(scripted(x), model(x)) and torch.equal(loaded(x), model(x)), s
    x = torch.randn(2, 4, 6, 3)
    assert torch.equal(channels_last(x), x)
    with pytest.raises(Exception, match=r"data.shape\[2\] = 3 is not divisible by block_size = 2"):
        torch.jit.script(nn.SpaceToDepth("blocks_first", 2))(torch.randn(1, 1, 3, 4))


# ------------------------------------------------------------------ quiet


def test_importing_datamove_nn_prints_nothing_and_dynamo_exports_stay_quiet(tmp_path):
    code = ("import torch, datamove, datamove.nn\n"
            "m = torch.nn.Linear(2, 2).eval()\n"
            f"torch.onnx.export(m, (torch.randn(1, 2),), r'{tmp_path / 'm.onnx'}', dynamo=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ERROR" not in done.stderr and "Unsupported type annotation" not in done.stderr, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-c", "import torch, datamove, datamove.nn, onnxscript"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr[-3000:]
