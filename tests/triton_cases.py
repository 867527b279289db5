"""The GPU engine's Triton kernel, bit for bit against the NumPy engine.

Run by tests/test_triton_engine.py in a process of its own (Triton cannot be
imported next to TensorFlow or jaxlib), or directly: ``pytest tests/triton_cases.py``.
Without a GPU (CI) the kernel runs under Triton's interpreter on CPU tensors
(``TRITON_INTERPRET=1``); with a CUDA device the same cases run on it, plus
large ones.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import datamove as dm  # noqa: E402
from datamove import engines
from datamove import DataMoveError  # noqa: E402
from datamove.engines import route
from datamove.pytorch import custom_ops as torch_ops
from datamove.engines import triton_engine  # noqa: E402
from test_moves import calls  # noqa: E402  (the same random calls as the Move's own test)

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
WIDTHS = [torch.bool, torch.uint8, torch.int16, torch.bfloat16, torch.float32, torch.int64, torch.complex128]
if hasattr(torch, "float8_e4m3fn"):
    WIDTHS.append(torch.float8_e4m3fn)


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")


def tensor_of(shape, dtype, seed):
    """Random bits of every width, as a tensor on DEVICE, and the same bytes as a NumPy array."""
    width = torch.empty((), dtype=dtype).element_size()
    raw = np.random.default_rng(seed).integers(0, 256, int(np.prod(shape)) * width, dtype=np.uint8)
    if dtype == torch.bool:
        raw = raw & 1
    words = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}[width]
    array = raw.view(words).reshape(shape)
    t = torch.from_numpy(raw.copy()).view(dtype).reshape(shape).to(DEVICE) if raw.size else torch.empty(shape, dtype=dtype, device=DEVICE)
    return t, array


def bits(t):
    flat = t.detach().cpu().reshape(-1)
    packed = torch.empty(flat.shape, dtype=flat.dtype)  # stride 1 (a size-1 view may keep another stride)
    return packed.copy_(flat).view(torch.uint8).numpy().tobytes()




@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls(), st.sampled_from(WIDTHS), st.sampled_from(["contiguous", "sliced", "permuted", "out"]))
def test_kernel_equals_the_numpy_engine(case, dtype, layout):
    op, shape, args = case
    data, array = tensor_of(shape, dtype, seed=len(shape))
    expected = getattr(dm, op)(array, *args)
    if layout == "sliced" and shape[-1]:  # every other element of a wider tensor
        wide, _ = tensor_of(shape[:-1] + [2 * shape[-1]], dtype, seed=1)
        wide[..., ::2] = data
        data = wide[..., ::2]
    elif layout == "permuted" and len(shape) >= 3:  # channels innermost in memory
        data = data.movedim(1, -1).contiguous().movedim(-1, 1)
    if layout == "out":
        out = torch.zeros(expected.shape[:-1] + (2 * expected.shape[-1],), dtype=dtype, device=DEVICE)[..., ::2]
        assert getattr(dm, op)(data, *args, out=out, engine="triton") is out
        got = out
    else:
        got = getattr(dm, op)(data, *args, engine="triton")
    assert type(got) is torch.Tensor and got.device == data.device and got.dtype == dtype
    assert tuple(got.shape) == expected.shape
    assert bits(got) == expected.tobytes()


def test_ranks_3_to_6_and_every_width_of_each_op():
    for rank in range(3, 7):
        for dtype in WIDTHS:
            shape = [8] + [2] * (rank - 1)
            data, array = tensor_of(shape, dtype, seed=rank)
            for op, args in [
                ("batch_to_space", ([1, 2] + [1] * (rank - 3) + [2], [0, 1] + [0] * (rank - 2), [0, 0] + [0] * (rank - 3) + [1])),
                ("space_to_batch", ([1, 2] + [1] * (rank - 3) + [2], [0, 1] + [0] * (rank - 2), [0, 1] + [0] * (rank - 3) + [2])),
                ("space_to_depth", ("blocks_first", 2)),
                ("depth_to_space", ("depth_first", 1)),
            ]:
                expected = getattr(dm, op)(array, *args)
                assert bits(getattr(dm, op)(data, *args, engine="triton")) == expected.tobytes(), (op, rank, dtype)


def test_block_two_pairs_and_block_four():
    # the register split/join paths (a or c of 2 items, packed into wider words when narrow)
    # and the transposed tile (4)
    for shape, op, args in [
        ((2, 3, 8, 16), "space_to_depth", ("blocks_first", 2)),
        ((2, 3, 8, 16), "space_to_depth", ("depth_first", 4)),
        ((2, 12, 4, 8), "depth_to_space", ("blocks_first", 2)),
        ((2, 48, 4, 8), "depth_to_space", ("depth_first", 4)),
        ((16, 3, 17, 9), "batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 3], [0, 0, 2, 0])),
        ((4, 3, 17, 9), "space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 3], [0, 0, 2, 2])),
    ]:
        for dtype in (torch.uint8, torch.bfloat16, torch.float32, torch.int64):  # 1- and 2-byte pairs are packed
            data, array = tensor_of(shape, dtype, seed=0)
            assert bits(getattr(dm, op)(data, *args, engine="triton")) == getattr(dm, op)(array, *args).tobytes(), (op, dtype)


def test_out_overlapping_the_input_is_read_first():
    data = torch.arange(16, dtype=torch.float32, device=DEVICE).reshape(1, 4, 2, 2)
    expected = dm.depth_to_space(data.cpu().numpy(), "blocks_first", 2)
    alias = data.view(1, 1, 4, 4)
    dm.depth_to_space(data, "blocks_first", 2, out=alias, engine="triton")
    assert np.array_equal(alias.cpu().numpy(), expected)


def test_gradients_through_the_engine():
    # small inputs: under the interpreter every call of the numerical Jacobian is a kernel run
    x = torch.randn(4, 1, 3, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    for fn in [
        lambda t: dm.batch_to_space(t, [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1], engine="triton"),
        lambda t: dm.space_to_batch(t, [1, 1, 1, 2], [0, 0, 0, 1], [0, 0, 1, 1], engine="triton"),
        lambda t: dm.space_to_depth(t.reshape(1, 4, 3, 2), "depth_first", 1, engine="triton"),
        lambda t: dm.depth_to_space(t.reshape(1, 4, 3, 2), "blocks_first", 2, engine="triton"),
    ]:
        assert torch.autograd.gradcheck(fn, (x,))
    # the backward of the backward is the op again
    assert torch.autograd.gradgradcheck(lambda t: dm.depth_to_space(t.reshape(1, 4, 3, 2), "depth_first", 2, engine="triton"), (x,))


def test_the_custom_ops_and_their_fake_shapes():
    ops = torch_ops.custom_ops()
    x = torch.randn(4, 3, 6, 4, device=DEVICE)
    assert torch.equal(ops["space_to_depth"](x, "blocks_first", 2), dm.space_to_depth(x, "blocks_first", 2, engine="triton"))
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fake = torch.empty(4, 3, 6, 4)
        assert tuple(torch.ops.datamove.space_to_depth(fake, "blocks_first", 2).shape) == (4, 12, 3, 2)
        assert tuple(torch.ops.datamove.batch_to_space(fake, [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]).shape) == (1, 3, 11, 7)


def test_torch_compile_keeps_the_custom_op_in_one_graph():
    torch_ops.custom_ops()
    x = torch.randn(2, 3, 4, 6, device=DEVICE, requires_grad=True)
    f = torch.compile(lambda t: torch.ops.datamove.space_to_depth(t, "blocks_first", 2) * 2, fullgraph=True, backend="aot_eager")
    y = f(x)
    y.sum().backward()
    assert torch.equal(y.detach(), 2 * dm.space_to_depth(x.detach(), "blocks_first", 2, engine="triton"))
    assert torch.equal(x.grad, torch.full_like(x, 2))


def test_torch_compile_traces_datamove_calls_into_one_graph():
    # torch was imported before datamove here, so torch.ops.datamove.* exist before tracing
    def f(x):
        y = dm.space_to_depth(x, "blocks_first", 2)
        return dm.batch_to_space(y.reshape(8, 3, 2, 3), [1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 0, 0]) * 2

    x = torch.randn(2, 3, 4, 6, dtype=torch.float64, device=DEVICE, requires_grad=True)
    y = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    y.sum().backward()
    eager = x.detach().clone().requires_grad_()
    f(eager).sum().backward()  # eager: autograd through PyTorch's own reshape/permute
    assert torch.equal(y.detach(), f(x.detach()))
    assert torch.equal(x.grad, eager.grad) and 0 < int((x.grad == 0).sum()) < x.numel()  # the cropped row has none


def test_bad_input_raises_the_numpy_error():
    x = torch.zeros(2, 3, 5, 4, device=DEVICE)
    for call in [
        lambda data: dm.space_to_depth(data, "blocks_first", 2, engine="triton"),
        lambda data: dm.batch_to_space(data, [1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0], engine="triton"),
        lambda data: dm.space_to_batch(data, [1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0], engine="triton"),
        lambda data: dm.depth_to_space(data, "sideways", 2, engine="triton"),
    ]:
        with pytest.raises(DataMoveError) as ours:
            call(x)
        with pytest.raises(DataMoveError) as numpy_error:
            call(x.cpu().numpy())
        assert str(ours.value) == str(numpy_error.value)
    with pytest.raises(DataMoveError, match=r"out.shape must be the output shape \(2, 12, 2, 2\), got \(2, 12, 2, 3\)"):
        dm.space_to_depth(torch.zeros(2, 3, 4, 4, device=DEVICE), "blocks_first", 2, out=torch.zeros(2, 12, 2, 3, device=DEVICE), engine="triton")
    for _ in range(2):  # the recipe's GPU path checks it too
        with pytest.raises(DataMoveError, match=r"out must not repeat elements"):
            dm.space_to_depth(torch.ones(2, 3, 4, 4, device=DEVICE), "blocks_first", 2,
                              out=torch.zeros(2, 12, 2, 1, device=DEVICE).expand(2, 12, 2, 2), engine="triton")


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(DataMoveError, match=r"engine 'triton' cannot take this torch.Tensor \(it takes PyTorch and CuPy arrays on a CUDA device"):
        dm.space_to_depth(torch.zeros(1, 1, 2, 2), "blocks_first", 2, engine="triton")
    # "auto" never picks it for CPU tensors
    assert route.route(engines.facts(torch.zeros(1 << 20))).engine != "triton"
    # the custom ops run datamove's CPU path there
    x = torch.randn(2, 3, 4, 6)
    assert torch.equal(torch_ops.custom_ops()["space_to_depth"](x, "blocks_first", 2), dm.space_to_depth(x, "blocks_first", 2))


def test_import_does_not_import_triton():
    code = "import sys, datamove, numpy as np; datamove.space_to_depth(np.zeros((1, 1, 2, 2)), 'blocks_first', 2); print('triton' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_auto_takes_large_cuda_tensors_and_matches_the_cpu():
    x = torch.randint(0, 255, (4, 64, 512, 512), dtype=torch.uint8, device="cuda")  # 64 MiB: TRITON_MIN_BYTES
    assert route.route(engines.facts(x)).engine == "triton"
    got = dm.space_to_depth(x, "blocks_first", 2)
    assert bits(got) == dm.space_to_depth(x.cpu().numpy(), "blocks_first", 2).tobytes()


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_cupy_arrays_run_on_the_kernel():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.randint(0, 255, (4, 64, 512, 512), dtype=cupy.uint8)  # 64 MiB: the kernel under "auto"
    expected = dm.space_to_depth(cupy.asnumpy(x), "blocks_first", 2)
    y = dm.space_to_depth(x, "blocks_first", 2)
    assert type(y) is cupy.ndarray and np.array_equal(cupy.asnumpy(y), expected)
    out = cupy.empty_like(y)
    assert dm.space_to_depth(x, "blocks_first", 2, out=out) is out and np.array_equal(cupy.asnumpy(out), expected)
    small = cupy.arange(24, dtype=cupy.float32).reshape(2, 1, 3, 4)
    got = dm.space_to_batch(small, [1, 1, 1, 2], [0, 0, 1, 0], [0, 0, 0, 0], engine="triton")
    assert np.array_equal(cupy.asnumpy(got), dm.space_to_batch(cupy.asnumpy(small), [1, 1, 1, 2], [0, 0, 1, 0], [0, 0, 0, 0]))


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_larger_than_a_gigabyte_on_the_gpu():
    x = torch.randint(0, 255, (2, 16, 8200, 4100), dtype=torch.uint8, device="cuda").view(torch.float32)  # 1.05 GB
    y = dm.batch_to_space(x, [1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 1, 0])
    expected = dm.batch_to_space(x.cpu().numpy(), [1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 1, 0])
    assert bits(y) == expected.tobytes()
    back = dm.space_to_batch(y, [1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 1, 0])
    assert torch.equal(back.view(torch.int32)[:, :, 1:-1], x.view(torch.int32)[:, :, 1:-1])


def test_repeated_calls_plan_one_launch_per_alignment():
    # one recipe, inputs of the same shape and strides at every byte offset: each alignment gets its own launch
    base = torch.arange(4 * 16 * 2 + 8, dtype=torch.uint8, device=DEVICE)
    for offset in (0, 1, 2, 4):
        data = base[offset: offset + 4 * 16 * 2].view(1, 4, 4, 8)
        expected = dm.space_to_depth(data.cpu().numpy(), "blocks_first", 2)
        for _ in range(2):
            got = dm.space_to_depth(data, "blocks_first", 2, engine="triton")
            assert bits(got) == expected.tobytes() and got.is_contiguous(), offset
    from datamove.dispatch import recipes

    planned = [r.gpu for k, r in recipes.RECIPES.items() if isinstance(r, recipes.TorchRecipe) and r.engine == "triton"
               and r.call.op == "space_to_depth" and r.call.in_shape == (1, 4, 4, 8) and torch.uint8 in k]
    assert len(planned) == 1 and sorted(planned[0].launches) == [1, 2, 4, 16]
    # the same recipe with out= and with a gradient to record takes the checked paths
    data = base[:128].view(1, 4, 4, 8).to(torch.float32).requires_grad_()
    y = dm.space_to_depth(data, "blocks_first", 2, engine="triton")
    y.backward(torch.ones_like(y))
    assert torch.equal(data.grad, torch.ones_like(data))
    out = torch.empty_like(y)
    assert dm.space_to_depth(data.detach(), "blocks_first", 2, out=out, engine="triton") is out and torch.equal(out, y)


def test_channels_last_in_channels_last_out_and_the_fake_agrees():
    data, array = tensor_of((2, 3, 4, 6), torch.float32, seed=3)
    data = data.contiguous(memory_format=torch.channels_last)
    expected = dm.space_to_depth(array, "blocks_first", 2)
    for _ in range(2):  # the second call from the recipe (triton_engine.Planned)
        got = dm.space_to_depth(data, "blocks_first", 2, engine="triton")
        assert got.is_contiguous(memory_format=torch.channels_last) and not got.is_contiguous()
        assert bits(got) == expected.tobytes()
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fake = torch.empty(2, 3, 4, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
        assert torch.ops.datamove.space_to_depth(fake, "blocks_first", 2).stride() == got.stride()


def test_lazy_conjugate_and_negative_views():
    # a conjugate view has its base's strides but other values: it never reuses the base's recipe,
    # and the kernel (which moves bits) never reads or writes one directly
    x = torch.randn(1, 2, 4, 4, dtype=torch.complex64, device=DEVICE)
    expected = dm.space_to_depth(x.cpu().numpy(), "blocks_first", 2)
    assert torch.equal(dm.space_to_depth(x, "blocks_first", 2, engine="triton").cpu(), torch.from_numpy(expected))
    with pytest.raises(DataMoveError, match=r"without a lazy conjugate or negative bit: call resolve_conj\(\)"):
        dm.space_to_depth(x.conj(), "blocks_first", 2, engine="triton")
    assert torch.equal(dm.space_to_depth(x.conj(), "blocks_first", 2).cpu(), torch.from_numpy(expected).conj())
    for _ in range(2):  # the second call from the recipe
        out = torch.zeros(1, 8, 2, 2, dtype=torch.complex64, device=DEVICE).conj()
        assert dm.space_to_depth(x, "blocks_first", 2, out=out, engine="triton") is out
        assert torch.equal(out.cpu(), torch.from_numpy(expected))
        negative = torch.zeros(1, 8, 2, 2, dtype=torch.complex64, device=DEVICE).conj().imag  # a negative view
        dm.space_to_depth(x.imag.contiguous(), "blocks_first", 2, out=negative, engine="triton")
        assert torch.equal(negative.cpu(), torch.from_numpy(expected.imag))


# ------------------------------------------------- compiled for a GPU, without one

# Every kernel path (split/join, packed pairs, contiguous runs, same order, the transposed tile,
# conditions that skip or fill, 64-bit offsets) at every word width, as (op, shape, args, item bytes, layout).
COMPILED = [
    ("space_to_depth", (2, 3, 8, 16), ("blocks_first", 2), 4, "c"),           # SPLIT
    ("space_to_depth", (2, 3, 8, 16), ("blocks_first", 2), 1, "c"),           # SPLIT, PACKED
    ("space_to_depth", (2, 3, 8, 16), ("depth_first", 4), 2, "c"),            # transposed tile
    ("space_to_depth", (2, 3, 8, 16), ("blocks_first", 2), 8, "nhwc"),        # channels innermost
    ("space_to_depth", (2, 4, 8, 8, 8), ("depth_first", 2), 4, "c"),          # 5-D
    ("depth_to_space", (2, 12, 4, 8), ("blocks_first", 2), 4, "c"),           # JOIN
    ("depth_to_space", (2, 12, 4, 8), ("depth_first", 2), 2, "c"),            # JOIN, PACKED
    ("depth_to_space", (2, 48, 4, 8), ("depth_first", 4), 8, "c"),
    ("batch_to_space", (16, 3, 17, 9), ([1, 1, 2, 2], [0, 0, 1, 3], [0, 0, 2, 0]), 4, "c"),   # skip crops
    ("batch_to_space", (64, 32, 256, 256), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), 4, "c"),
    ("batch_to_space", (12, 2, 3, 4), ([1, 2, 3, 1], [0, 1, 2, 0], [0, 0, 1, 0]), 1, "c"),
    ("space_to_batch", (4, 3, 17, 9), ([1, 1, 2, 2], [0, 0, 1, 3], [0, 0, 2, 2]), 4, "c"),    # fill pads
    ("space_to_batch", (16, 32, 510, 510), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), 2, "c"),
    ("space_to_batch", (2, 6), ([1, 2], [0, 1], [0, 1]), 8, "c"),
    ("space_to_depth", (1, 1, 65536, 65536), ("blocks_first", 2), 1, "c"),    # 4 GiB: 64-bit offsets
]


def _compile_for_hopper(op, shape, args, item, layout):
    """``move_kernel`` as Triton's JIT would specialise it for this call, compiled for sm_90 (PTX and cubin)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from datamove.rules import shapes
    from datamove.plans import moves
    from datamove.engines.triton_kernels import move_kernel

    def c_strides(dims):
        strides, step = [], 1
        for n in reversed(dims):
            strides.append(step)
            step *= n
        return tuple(reversed(strides))

    resolved = getattr(shapes, f"resolve_{op}")(shape, *args)
    out_shape = resolved.public()
    in_strides, out_strides = c_strides(shape), c_strides(out_shape)
    if layout == "nhwc":  # channels innermost in memory on both sides
        def nhwc(dims):
            inner = c_strides((dims[0],) + tuple(dims[2:]) + (dims[1],))
            return (inner[0], inner[-1]) + inner[1:-1]
        in_strides, out_strides = nhwc(shape), nhwc(out_shape)
    m = moves.move(op, resolved.params, tuple(shape), in_strides, tuple(out_shape), out_strides, item, 16)
    span = max(math.prod(shape), math.prod(out_shape)) * item // m.word
    programs, scalars, constants = triton_engine.configure(m, 16, span + abs(m.src0) + abs(m.dst0) >= 2 ** 31 - 1)
    word = {1: "u8", 2: "i16", 4: "i32", 8: "i64"}[m.word]
    names = move_kernel.arg_names
    signature = {"src": "*" + word, "dst": "*" + word, "table": "*i64"}
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}
    for name, value in zip(names[3:], scalars):  # as the JIT specialises ints: 1 as a constant, multiples of 16 marked
        if value == 1:
            constants[name] = 1
        else:
            signature[name] = "i32" if -2 ** 31 <= value < 2 ** 31 else "i64"
            if value % 16 == 0:
                attrs[(names.index(name),)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in constants})
    source = ASTSource(move_kernel, {name: signature[name] for name in names}, constants, attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": triton_engine._WARPS}), constants


@pytest.mark.parametrize("case", COMPILED, ids=[f"{c[0]}-{c[3]}B-{i}" for i, c in enumerate(COMPILED)])
def test_the_kernel_compiles_for_hopper(case, monkeypatch):
    # the interpreter runs the kernel's Python; this runs Triton's real compiler down to sm_90 machine code,
    # which rejects what the interpreter lets through (layouts, joins of masks, bitcasts, 64-bit offsets)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # before the kernel's module is first imported
    from triton.runtime.jit import JITFunction

    from datamove.engines.triton_kernels import move_kernel

    if not isinstance(move_kernel, JITFunction):
        pytest.skip("the kernel was imported under TRITON_INTERPRET=1 in this process (tests/test_triton_engine.py "
                    "runs this test in a process of its own)")
    kernel, constants = _compile_for_hopper(*case)
    ptx = kernel.asm["ptx"]
    assert ".entry move_kernel" in ptx and "st.global" in ptx and len(kernel.asm["cubin"]) > 1000
    if case[0] == "space_to_depth" and case[1][-1] == 65536:
        assert constants["WIDE"]
