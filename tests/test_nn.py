"""``datamove.nn``: the four operations as stateless PyTorch modules.

Each module against its functional op (every dtype family, 4-D and 5-D), in
``nn.Sequential`` with a convolution, its (empty) state, its repr, every
construction error (the op's own message), gradients, channels-last data,
``torch.compile(fullgraph=True)``, pickling, and that ``import datamove``
still does not import PyTorch.
"""

from __future__ import annotations

import copy
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

import datamove as dm
from datamove import DataMoveError

torch = pytest.importorskip("torch", reason="torch (2.13.0 CPU, a test extra) is not installed")
from datamove import nn as dnn  # noqa: E402 - after the skip: it imports torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
          torch.int64, torch.int8, torch.uint8, torch.bool]

# (module class, its arguments, the functional op, input shape): 4-D and 5-D, both modes, blocks, crops, pads
CASES = [
    (dnn.SpaceToDepth, ("blocks_first", 2), "space_to_depth", (2, 3, 4, 6)),
    (dnn.SpaceToDepth, ("depth_first", 3), "space_to_depth", (1, 2, 3, 6)),
    (dnn.SpaceToDepth, ("blocks_first", 2), "space_to_depth", (2, 3, 2, 4, 6)),
    (dnn.SpaceToDepth, ("depth_first", 2), "space_to_depth", (1, 2, 4, 2, 2)),
    (dnn.DepthToSpace, ("blocks_first", 2), "depth_to_space", (2, 12, 2, 3)),
    (dnn.DepthToSpace, ("depth_first", 3), "depth_to_space", (1, 18, 2, 1)),
    (dnn.DepthToSpace, ("blocks_first", 2), "depth_to_space", (1, 16, 2, 1, 3)),
    (dnn.DepthToSpace, ("depth_first", 2), "depth_to_space", (2, 8, 1, 2, 2)),
    (dnn.SpaceToBatch, ([1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 3]), "space_to_batch", (2, 3, 4, 3)),
    (dnn.SpaceToBatch, ([1, 2, 1, 2, 2], [0, 1, 0, 0, 1], [0, 1, 0, 2, 1]), "space_to_batch", (2, 2, 3, 2, 2)),
    (dnn.BatchToSpace, ([1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 2]), "batch_to_space", (12, 3, 2, 2)),
    (dnn.BatchToSpace, ([1, 2, 1, 2, 2], [0, 1, 0, 0, 2], [0, 0, 0, 3, 1]), "batch_to_space", (16, 2, 3, 2, 2)),
]


def case_id(case):
    return f"{case[0].__name__}-{'x'.join(map(str, case[3]))}-{case[1][0]}"


def random_tensor(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randint(-100 if dtype.is_signed else 0, 100, shape, generator=g, dtype=dtype)


def bits(tensor):
    """The tensor's bytes, so NaN and -0.0 compare too (bfloat16/complex have no NumPy twin: viewed as ints)."""
    t = tensor.contiguous()
    return t.view(torch.uint8).numpy().tobytes() if t.dtype is not torch.bool else t.numpy().tobytes()


# ------------------------------------------------------------------ the module is the op


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_module_equals_the_functional_op(case, dtype):
    cls, args, op, shape = case
    x = random_tensor(shape, dtype)
    got = cls(*args)(x)
    expected = getattr(dm, op)(x, *args)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.shape == expected.shape
    assert bits(got) == bits(expected)
    if dtype in (torch.float32, torch.int64, torch.bool):  # and the NumPy result, bit for bit
        assert bits(got) == getattr(dm, op)(x.numpy(), *args).tobytes()


def test_depth_first_modules_are_pixel_shuffle_and_unshuffle():
    x = random_tensor((2, 3, 6, 4), torch.float32)
    assert torch.equal(dnn.SpaceToDepth("depth_first", 2)(x), torch.nn.PixelUnshuffle(2)(x))
    y = random_tensor((2, 18, 2, 3), torch.float32)
    assert torch.equal(dnn.DepthToSpace("depth_first", 3)(y), torch.nn.PixelShuffle(3)(y))


def test_parameters_are_normalised_to_python_ints():
    m = dnn.BatchToSpace(np.array([1, 2, 2]), torch.tensor([0, 1, 0]), range(3))
    assert (m.block_shape, m.crops_begin, m.crops_end) == ((1, 2, 2), (0, 1, 0), (0, 1, 2))
    assert all(type(v) is int for v in m.block_shape + m.crops_begin + m.crops_end)
    s = dnn.SpaceToDepth("blocks_first", np.int64(2))
    assert type(s.block_size) is int and s.block_size == 2


# ------------------------------------------------------------------ in a network


def test_sequential_conv_depth_to_space_space_to_depth_round_trip():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 12, 3, padding=1)
    up = dnn.DepthToSpace("blocks_first", 2)
    model = torch.nn.Sequential(conv, up, dnn.SpaceToDepth("blocks_first", 2))
    x = torch.randn(2, 3, 5, 7)
    assert up(conv(x)).shape == (2, 3, 10, 14)
    y = model(x)
    assert torch.equal(y, conv(x))  # the two modules undo each other exactly
    # gradients reach the convolution's weights as without them
    weights = torch.randn_like(y)
    (y * weights).sum().backward()
    with_modules = conv.weight.grad.clone()
    conv.zero_grad()
    (conv(x) * weights).sum().backward()
    assert torch.equal(conv.weight.grad, with_modules)


def test_sub_pixel_head_matches_pixel_shuffle():
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(4, 27, 3, padding=1)
    x = torch.randn(1, 4, 6, 6)
    ours = torch.nn.Sequential(conv, dnn.DepthToSpace("depth_first", 3))
    theirs = torch.nn.Sequential(conv, torch.nn.PixelShuffle(3))
    assert ours(x).shape == (1, 3, 18, 18) and torch.equal(ours(x), theirs(x))


def test_space_to_batch_then_batch_to_space_with_a_conv_between():
    # dilated convolution as SpaceToBatch -> conv -> BatchToSpace (TensorFlow's atrous trick)
    torch.manual_seed(2)
    conv = torch.nn.Conv2d(2, 2, 3, bias=False)
    block, pads, crops = [1, 1, 2, 2], [0, 0, 2, 2], [0, 0, 0, 0]
    model = torch.nn.Sequential(dnn.SpaceToBatch(block, pads, pads), conv, dnn.BatchToSpace(block, crops, crops))
    dilated = torch.nn.Conv2d(2, 2, 3, bias=False, dilation=2, padding=0)
    dilated.weight = conv.weight
    x = torch.randn(1, 2, 8, 8)
    expected = dilated(torch.nn.functional.pad(x, (2, 2, 2, 2)))
    torch.testing.assert_close(model(x), expected)


# ------------------------------------------------------------------ state and repr

MODULES = [
    dnn.SpaceToDepth("blocks_first", 2),
    dnn.DepthToSpace("depth_first", 3, data_format="channels_last"),
    dnn.SpaceToBatch([1, 2, 2], [0, 1, 0], [0, 1, 2]),
    dnn.BatchToSpace([1, 2, 2], [0, 1, 0], [0, 0, 1]),
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: type(m).__name__)
def test_stateless(module):
    assert module.state_dict() == {}
    assert list(module.parameters()) == [] and list(module.buffers()) == [] and list(module.children()) == []
    module.load_state_dict({})  # nothing to load, nothing missing


def test_a_model_state_dict_is_only_its_layers():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 1), dnn.DepthToSpace("blocks_first", 2))
    assert list(model.state_dict()) == ["0.weight", "0.bias"]
    clone = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 1), dnn.DepthToSpace("blocks_first", 2))
    clone.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 2, 2)
    assert torch.equal(clone(x), model(x))


def test_extra_repr():
    assert repr(dnn.SpaceToDepth("blocks_first", 2)) == "SpaceToDepth(mode='blocks_first', block_size=2)"
    assert repr(dnn.DepthToSpace("depth_first", 3)) == "DepthToSpace(mode='depth_first', block_size=3)"
    assert repr(dnn.SpaceToDepth("depth_first", 2, data_format="channels_last")) == (
        "SpaceToDepth(mode='depth_first', block_size=2, data_format='channels_last')")
    assert dnn.DepthToSpace("blocks_first", 4, "channels_last").extra_repr() == (
        "mode='blocks_first', block_size=4, data_format='channels_last'")
    assert repr(dnn.SpaceToBatch([1, 2], [0, 1], [0, 1])) == "SpaceToBatch(block_shape=(1, 2), pads_begin=(0, 1), pads_end=(0, 1))"
    assert repr(dnn.BatchToSpace(np.array([1, 1, 2]), (0, 0, 1), [0, 0, 0])) == (
        "BatchToSpace(block_shape=(1, 1, 2), crops_begin=(0, 0, 1), crops_end=(0, 0, 0))")


def test_repr_in_a_sequential():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 12, 1),
        dnn.DepthToSpace("blocks_first", 2),
        dnn.SpaceToBatch([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]),
    )
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Conv2d(3, 12, kernel_size=(1, 1), stride=(1, 1))\n"
        "  (1): DepthToSpace(mode='blocks_first', block_size=2)\n"
        "  (2): SpaceToBatch(block_shape=(1, 1, 2, 2), pads_begin=(0, 0, 0, 0), pads_end=(0, 0, 0, 0))\n"
        ")"
    )


# ------------------------------------------------------------------ construction errors

# (construct, exception, message regex, the op call that must fail with the same message, or None when the
# op's message needs the data's rank)
X4 = np.zeros((4, 2, 4, 4))
ERRORS = [
    (lambda: dnn.SpaceToDepth("DCR", 2), DataMoveError,
     r"^mode must be 'blocks_first' or 'depth_first', got 'DCR' \(ONNX's DCR is 'blocks_first'\)$",
     lambda: dm.space_to_depth(X4, "DCR", 2)),
    (lambda: dnn.DepthToSpace("Depth_First", 2), DataMoveError, r"did you mean 'depth_first'\?",
     lambda: dm.depth_to_space(X4, "Depth_First", 2)),
    (lambda: dnn.SpaceToDepth(1, 2), TypeError, r"^mode must be a string",
     lambda: dm.space_to_depth(X4, 1, 2)),
    (lambda: dnn.DepthToSpace(None, 2), TypeError, r"^mode is required",
     lambda: dm.depth_to_space(X4, None, 2)),
    (lambda: dnn.SpaceToDepth("blocks_first", 0), DataMoveError, r"^block_size must be >= 1, got 0$",
     lambda: dm.space_to_depth(X4, "blocks_first", 0)),
    (lambda: dnn.DepthToSpace("depth_first", -2), DataMoveError, r"^block_size must be >= 1, got -2$",
     lambda: dm.depth_to_space(X4, "depth_first", -2)),
    (lambda: dnn.SpaceToDepth("blocks_first", 2.0), TypeError, r"^block_size must be an integer, got float 2.0$",
     lambda: dm.space_to_depth(X4, "blocks_first", 2.0)),
    (lambda: dnn.DepthToSpace("blocks_first", True), TypeError, r"^block_size must be an integer, got bool True$",
     lambda: dm.depth_to_space(X4, "blocks_first", True)),
    (lambda: dnn.SpaceToDepth("blocks_first", None), TypeError, r"^block_size is required",
     lambda: dm.space_to_depth(X4, "blocks_first", None)),
    (lambda: dnn.SpaceToDepth("blocks_first", 2, data_format="NHWC"), DataMoveError,
     r"^data_format must be 'channels_first' or 'channels_last', got 'NHWC' \(NHWC is 'channels_last'\)$",
     lambda: dm.space_to_depth(X4, "blocks_first", 2, data_format="NHWC")),
    (lambda: dnn.DepthToSpace("blocks_first", 2, data_format="channels_middle"), DataMoveError,
     r"^data_format must be 'channels_first' or 'channels_last', got 'channels_middle'$",
     lambda: dm.depth_to_space(X4, "blocks_first", 2, data_format="channels_middle")),
    (lambda: dnn.DepthToSpace("blocks_first", 2, data_format=None), TypeError,
     r"^data_format must be a string, 'channels_first' or 'channels_last'",
     lambda: dm.depth_to_space(X4, "blocks_first", 2, data_format=None)),
    (lambda: dnn.BatchToSpace([2, 2], [0, 0], [0, 0]), DataMoveError,
     r"^block_shape\[0\] must be 1, got 2: index 0 is the batch axis",
     lambda: dm.batch_to_space(np.zeros((4, 4)), [2, 2], [0, 0], [0, 0])),
    (lambda: dnn.SpaceToBatch([1, 0], [0, 0], [0, 0]), DataMoveError,
     r"^block_shape\[1\] must be >= 1, got 0 \(block_shape = \[1, 0\]\)$",
     lambda: dm.space_to_batch(np.zeros((4, 4)), [1, 0], [0, 0], [0, 0])),
    (lambda: dnn.BatchToSpace([1, 2], [0, -1], [0, 0]), DataMoveError,
     r"^crops_begin\[1\] must be >= 0, got -1 \(crops_begin = \[0, -1\]\)$",
     lambda: dm.batch_to_space(np.zeros((4, 4)), [1, 2], [0, -1], [0, 0])),
    (lambda: dnn.BatchToSpace([1, 2], [0, 0], [1, 0]), DataMoveError,
     r"^crops_end\[0\] must be 0, got 1: index 0 is the batch axis, which the spec says is never cropped",
     lambda: dm.batch_to_space(np.zeros((4, 4)), [1, 2], [0, 0], [1, 0])),
    (lambda: dnn.SpaceToBatch([1, 2], [0, 0], [0, -2]), DataMoveError,
     r"^pads_end\[1\] must be >= 0, got -2 \(pads_end = \[0, -2\]\)$",
     lambda: dm.space_to_batch(np.zeros((4, 4)), [1, 2], [0, 0], [0, -2])),
    (lambda: dnn.SpaceToBatch([1, 2], [3, 0], [0, 0]), DataMoveError,
     r"^pads_begin\[0\] must be 0, got 3: index 0 is the batch axis, which the spec says is never padded",
     lambda: dm.space_to_batch(np.zeros((4, 4)), [1, 2], [3, 0], [0, 0])),
    (lambda: dnn.SpaceToBatch({1, 2}, [0, 0], [0, 0]), TypeError,
     r"^block_shape must be a sequence of integers, got set",
     lambda: dm.space_to_batch(np.zeros((4, 4)), {1, 2}, [0, 0], [0, 0])),
    (lambda: dnn.BatchToSpace([1, 2.0], [0, 0], [0, 0]), TypeError, r"^block_shape\[1\] must be an integer, got float 2.0$",
     lambda: dm.batch_to_space(np.zeros((4, 4)), [1, 2.0], [0, 0], [0, 0])),
    (lambda: dnn.BatchToSpace([1, 2], None, [0, 0]), TypeError, r"^crops_begin is required",
     lambda: dm.batch_to_space(np.zeros((4, 4)), [1, 2], None, [0, 0])),
    (lambda: dnn.SpaceToBatch(np.zeros((2, 2), np.int64), [0, 0], [0, 0]), DataMoveError,
     r"^block_shape must be 1-D, got an array of shape \(2, 2\)$",
     lambda: dm.space_to_batch(np.zeros((4, 4)), np.zeros((2, 2), np.int64), [0, 0], [0, 0])),
    # the rank is not known yet: the lengths must agree and allow rank >= 2
    (lambda: dnn.BatchToSpace([1, 2], [0, 0], [0, 0, 0]), DataMoveError,
     r"^block_shape, crops_begin, crops_end must have the same length, got len\(block_shape\) = 2, "
     r"len\(crops_begin\) = 2, len\(crops_end\) = 3$", None),
    (lambda: dnn.SpaceToBatch([1], [0], [0]), DataMoveError,
     r"^len\(block_shape\) = 1 would make the data rank 1, but the data must have rank >= 2$", None),
]


@pytest.mark.parametrize("construct, error, message, op_call", ERRORS, ids=range(len(ERRORS)))
def test_construction_errors(construct, error, message, op_call):
    with pytest.raises(error, match=message) as raised:
        construct()
    if op_call is not None:  # the operation's own message, word for word
        with pytest.raises(error) as from_op:
            op_call()
        assert str(raised.value) == str(from_op.value)


def test_rules_that_need_the_data_are_checked_on_each_input():
    with pytest.raises(DataMoveError, match=r"^data.shape\[3\] = 5 is not divisible by block_size = 2$"):
        dnn.SpaceToDepth("blocks_first", 2)(torch.zeros(1, 1, 4, 5))
    with pytest.raises(DataMoveError, match=r"^block_shape must have one entry per data axis: len\(block_shape\) = 2, data rank = 3$"):
        dnn.BatchToSpace([1, 2], [0, 0], [0, 0])(torch.zeros(2, 2, 2))
    with pytest.raises(DataMoveError, match=r"crops_begin\[1\] \+ crops_end\[1\] = 7 exceeds data.shape\[1\] \* block_shape\[1\] = 6"):
        dnn.BatchToSpace([1, 2], [0, 4], [0, 3])(torch.zeros(4, 3))


# ------------------------------------------------------------------ gradients

GRAD_MODULES = [
    (dnn.SpaceToDepth("blocks_first", 2), (2, 3, 4, 2)),
    (dnn.SpaceToDepth("depth_first", 2, data_format="channels_last"), (1, 2, 4, 2, 3)),
    (dnn.DepthToSpace("depth_first", 2), (1, 8, 2, 1, 2)),
    (dnn.DepthToSpace("blocks_first", 3, data_format="channels_last"), (2, 1, 2, 9)),
    (dnn.SpaceToBatch([1, 2, 3], [0, 1, 0], [0, 1, 1]), (2, 2, 5)),
    (dnn.BatchToSpace([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]), (8, 2, 2, 3)),
]


@pytest.mark.parametrize("module, shape", GRAD_MODULES, ids=lambda v: repr(v) if isinstance(v, torch.nn.Module) else "")
def test_gradcheck(module, shape):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    y = module(x)
    assert y.requires_grad and y.grad_fn is not None
    assert torch.autograd.gradcheck(module, (x,))
    assert torch.autograd.gradgradcheck(module, (x,))


# ------------------------------------------------------------------ channels last


def _channels_last_reference(cls, mode, size, x):
    """The channels-first module between permutes: channels to axis 1 and back."""
    rank = x.dim()
    first = cls(mode, size)(x.permute(0, rank - 1, *range(1, rank - 1)))
    return first.permute(0, *range(2, rank), 1)


@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
@pytest.mark.parametrize("shape, size", [((2, 4, 6, 3), 2), ((1, 6, 3, 3, 2), 3), ((2, 2, 4, 2, 3), 2)],
                         ids=["4d", "5d-b3", "5d-b2"])
def test_channels_last_is_the_channels_first_module_between_permutes(shape, size, mode):
    x = random_tensor(shape, torch.float32, seed=3)
    s2d = dnn.SpaceToDepth(mode, size, data_format="channels_last")
    y = s2d(x)
    assert bits(y) == bits(_channels_last_reference(dnn.SpaceToDepth, mode, size, x).contiguous())
    assert y.shape[-1] == shape[-1] * size ** (len(shape) - 2)
    d2s = dnn.DepthToSpace(mode, size, data_format="channels_last")
    z = d2s(y)
    assert bits(z) == bits(_channels_last_reference(dnn.DepthToSpace, mode, size, y).contiguous())
    assert torch.equal(z, x)
    assert bits(y) == bits(dm.space_to_depth(x, mode, size, data_format="channels_last"))


# ------------------------------------------------------------------ torch.compile
# torch.compile imports Triton (when installed, as in the test extras), which aborts a process that has loaded
# TensorFlow's, jaxlib's or OpenVINO's LLVM (see test_triton_engine.py): the checks run in a fresh interpreter.


def _in_a_fresh_process(check):
    """Run ``check`` (a function of this file) in a new interpreter that imports datamove before torch."""
    code = ("import sys, datamove; assert 'torch' not in sys.modules; sys.path.insert(0, 'tests'); "
            f"import test_nn; test_nn.{check.__name__}(); print('checked')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                            cwd=pathlib.Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    assert result.stdout.strip().endswith("checked")


def _compiled_equals_eager(model, x, backend):
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    y = compiled(a)
    expected = model(b)
    assert y.shape == expected.shape and torch.equal(y.detach(), expected.detach())
    weights = torch.randn_like(expected)
    (y * weights).sum().backward()
    (expected * weights).sum().backward()
    assert torch.equal(a.grad, b.grad)
    return compiled


def _check_compile_space_to_depth_and_batch_to_space():
    # datamove was imported before torch here: importing datamove.nn registered torch.ops.datamove.*
    model = torch.nn.Sequential(
        dnn.SpaceToDepth("blocks_first", 2),
        dnn.BatchToSpace([1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 0, 0]),
    )
    x = torch.randn(4, 3, 4, 6, dtype=torch.float64)
    compiled = _compiled_equals_eager(model, x, "aot_eager")
    # one graph, holding datamove's custom ops, one node each
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("aot_eager")
    torch.compile(model, fullgraph=True, backend=counter)(x)
    assert counter.frame_count == 1
    targets = {str(node.target).removesuffix(".default") for graph in counter.graphs for node in graph.graph.nodes
               if node.op == "call_function"}
    assert {"datamove.space_to_depth", "datamove.batch_to_space"} <= targets, targets
    assert torch.equal(compiled(x), model(x))


def _check_compile_inductor_all_four_and_channels_last():
    # no arithmetic in the model (a convolution's compiled kernel may round differently): results are exact
    model = torch.nn.Sequential(
        dnn.DepthToSpace("depth_first", 2),
        dnn.SpaceToBatch([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]),
        dnn.BatchToSpace([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2]),
        dnn.SpaceToDepth("blocks_first", 2),
    )
    _compiled_equals_eager(model, torch.randn(2, 12, 4, 6, dtype=torch.float64), "inductor")
    channels_last = torch.nn.Sequential(dnn.SpaceToDepth("depth_first", 2, data_format="channels_last"),
                                        dnn.DepthToSpace("blocks_first", 2, data_format="channels_last"))
    _compiled_equals_eager(channels_last, torch.randn(2, 4, 6, 3, dtype=torch.float64), "inductor")


def test_compile_fullgraph_space_to_depth_and_batch_to_space():
    _in_a_fresh_process(_check_compile_space_to_depth_and_batch_to_space)


@pytest.mark.slow
def test_compile_fullgraph_inductor_all_four_and_channels_last():
    _in_a_fresh_process(_check_compile_inductor_all_four_and_channels_last)


# ------------------------------------------------------------------ import, pickling, copies


def test_import_datamove_does_not_import_torch():
    code = ("import sys, datamove; assert 'torch' not in sys.modules; from datamove import *; "
            "assert 'torch' not in sys.modules, 'star import'; "
            "m = datamove.nn.SpaceToDepth('blocks_first', 2); "  # the lazy attribute loads it
            "assert 'torch' in sys.modules and datamove.nn is sys.modules['datamove.nn']; print(m)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "SpaceToDepth(mode='blocks_first', block_size=2)"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: type(m).__name__)
def test_pickle_and_deepcopy(module):
    shape = {dnn.SpaceToDepth: (1, 2, 4, 4), dnn.DepthToSpace: (1, 3, 3, 18),
             dnn.SpaceToBatch: (1, 2, 2), dnn.BatchToSpace: (4, 3, 2)}[type(module)]
    x = random_tensor(shape, torch.float32, seed=4)
    for other in (pickle.loads(pickle.dumps(module)), copy.deepcopy(module), copy.copy(module)):
        assert type(other) is type(module) and other is not module
        assert repr(other) == repr(module)
        assert torch.equal(other(x), module(x))


def test_a_whole_model_saves_and_loads():
    import io

    model = torch.nn.Sequential(torch.nn.Conv2d(2, 8, 1), dnn.DepthToSpace("blocks_first", 2))
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    x = torch.randn(1, 2, 3, 3)
    assert repr(loaded) == repr(model) and torch.equal(loaded(x), model(x))


# ------------------------------------------------------------------ spatial_dims: (*, C, H, W) as PixelShuffle


@pytest.mark.parametrize("shape", [(3, 8, 12), (2, 3, 8, 4), (2, 3, 2, 4, 6), (0, 3, 4, 4)], ids=["chw", "nchw", "2-lead", "empty"])
def test_spatial_dims_takes_any_leading_dims_as_pixel_unshuffle(shape):
    x = random_tensor(shape, torch.float32, seed=5)
    s2d = dnn.SpaceToDepth("depth_first", 2, spatial_dims=2)
    y = s2d(x)
    assert bits(y) == bits(torch.nn.functional.pixel_unshuffle(x, 2))
    d2s = dnn.DepthToSpace("depth_first", 2, spatial_dims=2)
    assert bits(d2s(y)) == bits(torch.nn.functional.pixel_shuffle(y, 2)) and torch.equal(d2s(y), x)
    assert repr(s2d) == "SpaceToDepth(mode='depth_first', block_size=2, spatial_dims=2)"


def test_without_spatial_dims_a_chw_image_follows_the_spec_rank_rule():
    # documented on the layers: dim 0 the batch, dim 1 the channels, the rest spatial
    image = torch.zeros(3, 64, 64)
    assert dnn.SpaceToDepth("depth_first", 2)(image).shape == (3, 128, 32)
    assert dnn.SpaceToDepth("depth_first", 2, spatial_dims=2)(image).shape == (12, 32, 32)


def test_spatial_dims_channels_last_and_one_spatial_dim():
    x = random_tensor((2, 3, 4, 6, 5), torch.float32, seed=6)  # (*, H, W, C)
    y = dnn.SpaceToDepth("blocks_first", 2, data_format="channels_last", spatial_dims=2)(x)
    assert bits(y) == bits(torch.stack([dm.space_to_depth(t, "blocks_first", 2, data_format="channels_last") for t in x]))
    rows = random_tensor((4, 6), torch.float32, seed=7)  # (C, L): no batch dim
    assert torch.equal(dnn.SpaceToDepth("depth_first", 2, spatial_dims=1)(rows),
                       dm.space_to_depth(rows[None], "depth_first", 2)[0])


@pytest.mark.parametrize("cls", [dnn.SpaceToDepth, dnn.DepthToSpace])
def test_spatial_dims_rules(cls):
    with pytest.raises(dm.DataMoveError, match="spatial_dims must be >= 1.*got 0"):
        cls("depth_first", 2, spatial_dims=0)
    with pytest.raises(TypeError, match="spatial_dims must be an int or None, got float 2.0"):
        cls("depth_first", 2, spatial_dims=2.0)
    with pytest.raises(TypeError, match="spatial_dims must be an int or None, got bool"):
        cls("depth_first", 2, spatial_dims=True)
    with pytest.raises(dm.DataMoveError, match=r"with spatial_dims=2 the input must have rank >= 3.*got rank 2, shape \[4, 4\]"):
        cls("depth_first", 2, spatial_dims=2)(torch.zeros(4, 4))
