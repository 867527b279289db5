"""The op registry (datamove.opset) crossed with every layer that must know each operation.

Each check names the layer, so a fifth operation added to the registry is
reported with everything it still lacks: its shape rule and plan, the
function of each engine, the public function, the PyTorch module and custom
op, the ONNX translation, the command line and the IR.
"""

from __future__ import annotations

import numpy as np
import pytest

import datamove
import datamove.ir.model
import datamove.ir.reader
from datamove.cli import app as cli
from datamove.plans import formulas, views as plans
from datamove import opset
from datamove.rules import shapes
from datamove.pytorch import onnx as torch_onnx
from datamove.engines import array_api_engine
from datamove.plans import moves
from datamove.ir.verify import VERIFIED_TYPES

OPS = list(opset.OPS.values())
IDS = [op.name for op in OPS]

# a small valid call of each family: data shape and arguments
EXAMPLES = {
    "batch_to_space": ((8, 2, 3, 3), ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])),
    "space_to_batch": ((2, 2, 4, 5), ([1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 1])),
    "space_to_depth": ((2, 3, 4, 6), ("blocks_first", 2)),
    "depth_to_space": ((2, 8, 3, 5), ("depth_first", 2)),
}


def test_registry_is_consistent():
    assert opset.NAMES == tuple(opset.OPS) and len(set(opset.OPENVINO_TYPES)) == len(OPS)
    for op in OPS:
        assert opset.OPS[op.adjoint].adjoint == op.name, f"{op.name}: its adjoint's adjoint"
        assert opset.by_openvino_type(op.openvino_type) is op is opset.lookup(op.name) is opset.lookup(op.openvino_type)
        assert op.family in ("space", "depth") and op.opset.startswith("opset")
        assert op.params == (("block_shape", op.params[1], op.params[2]) if op.family == "space" else ("mode", "block_size"))
    assert opset.lookup("Convolution") is None


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_every_layer_knows_the_op(op):
    missing = []
    for where, has in [
        ("example in this test", op.name in EXAMPLES),
        ("shape rule datamove.rules.shapes", hasattr(shapes, op.name) and hasattr(shapes, f"resolve_{op.name}")),
        ("plan datamove.plans.views", hasattr(plans, op.name)),
        ("public function datamove.<op>", callable(getattr(datamove, op.name, None))),
        ("array-API engine formula", op.name in array_api_engine._FORMULAS),
        ("ONNX translation", op.name in torch_onnx.TRANSLATIONS),
        ("command line", op.name in cli.OPERATIONS and cli.OPENVINO_NAMES.get(op.openvino_type) == op.name),
        ("IR: runnable type", op.openvino_type in datamove.ir.model.RUNNABLE_TYPES),
        ("IR: port counts", op.openvino_type in datamove.ir.reader.PORT_COUNTS),
        ("verify", op.openvino_type in VERIFIED_TYPES),
    ]:
        if not has:
            missing.append(where)
    assert not missing, f"{op.name} lacks: {missing}"


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_every_path_computes_the_op_alike(op):
    shape, args = EXAMPLES[op.name]
    x = np.random.default_rng(0).integers(0, 1000, shape).astype(np.int32)
    want = getattr(datamove, op.name)(x, *args)
    assert want.shape == op.shape_rule(shape, *args)
    params = op.resolve(shape, *args).params
    assert op.args(params)[0] == (tuple(args[0]) if op.family == "space" else args[0])
    for engine in ("numpy", "native", "array_api"):
        assert np.array_equal(getattr(datamove, op.name)(x, *args, engine=engine), want), engine
    assert np.array_equal(formulas.run(formulas.steps(op.name, params, shape), x), want), "datamove.plans.formulas"
    # the GPU engine's move (run here by NumPy's strided views of the same description)
    m = moves.move(op.name, params, shape, tuple(s // 4 for s in x.strides), want.shape,
                   tuple(s // 4 for s in want.strides), 4, 16)
    assert m is not None
    # the adjoint undoes it with the same parameters (pads = crops); BatchToSpace's crop drops data, so for it
    # the adjoint is undone instead: batch_to_space(space_to_batch(y)) == y
    adjoint = getattr(datamove, op.adjoint)
    if op.name == "batch_to_space":
        assert np.array_equal(getattr(datamove, op.name)(adjoint(want, *args), *args), want)
    else:
        assert np.array_equal(adjoint(want, *args), x)


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_pytorch_module_and_custom_op(op):
    torch = pytest.importorskip("torch")
    from datamove import nn
    from datamove.pytorch import custom_ops as torch_ops

    shape, args = EXAMPLES[op.name]
    x = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
    want = getattr(datamove, op.name)(x, *args)
    assert torch.equal(getattr(nn, op.openvino_type)(*args)(x), want), "datamove.nn"
    # registered (calling it loads torch._dynamo, which imports Triton: that runs in tests/triton_cases.py's process)
    assert op.name in torch_ops.custom_ops() and hasattr(torch.ops.datamove, op.name)
    assert torch_ops.op_params(op.name, torch_ops.custom_op_args(op.name, args)) == op.kwargs(
        tuple(tuple(v) if isinstance(v, list) else v for v in args))
