"""A PyTorch CPU tensor's repeated calls: the core from the tensor's address (``_native.handle``/``at``).

From the third call of a layout (shape, strides, dtype, device, lazy bits), a
CPU tensor's call runs on the core from ``tensor.data_ptr()`` into a new
tensor, with no NumPy view of the input (``datamove.dispatch.recipes._torch_core``),
SpaceToDepth and DepthToSpace through ``datamove.ops``' own door for tensors.
Each test here changes something a cached path could miss and compares the
results with the NumPy engine's, bit for bit. (About 10 s.)
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import datamove as dm
from datamove.arrays import libraries
from datamove import ops
from datamove.dispatch import recipes
from datamove.engines.native import engine as native_engine

from concurrency import run_threads, script_output

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not native_engine.available(), reason="needs the compiled core")

DTYPES = [getattr(torch, name) for name in sorted(libraries.NUMPY_DTYPES_OF_TORCH)] + [torch.bfloat16]


def _calls(rng, rank):
    """Random calls of every op on an input of ``rank`` (>= 3): (op, args, input shape)."""
    k = rank - 2
    block = int(rng.integers(1, 4))
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    spatial = [int(rng.integers(1, 4)) * block for _ in range(k)]
    yield "space_to_depth", (str(rng.choice(["blocks_first", "depth_first"])), block), (n, c, *spatial)
    yield "depth_to_space", (str(rng.choice(["blocks_first", "depth_first"])), block), (n, c * block**k, *spatial)
    blocks = [1, 1] + [int(b) for b in rng.integers(1, 3, size=k)]
    dims = [n * int(np.prod(blocks)), c] + [int(d) for d in rng.integers(1, 4, size=k)]
    begin = [0, 0] + [int(rng.integers(0, d * b)) for d, b in zip(dims[2:], blocks[2:])]
    end = [0, 0] + [int(rng.integers(0, d * b - s)) for d, b, s in zip(dims[2:], blocks[2:], begin[2:])]
    yield "batch_to_space", (blocks, begin, end), tuple(dims)
    spatial = [int(d) for d in rng.integers(1, 5, size=k)]
    begin = [0, 0] + [int(p) for p in rng.integers(0, 3, size=k)]
    end = [0, 0] + [(-(d + p)) % b for d, p, b in zip(spatial, begin[2:], blocks[2:])]
    yield "space_to_batch", (blocks, begin, end), (n, c, *spatial)


def _expected(op, args, tensor):
    view = tensor.detach().resolve_conj().resolve_neg()
    if view.dtype == torch.bfloat16:
        return getattr(dm, op)(view.float(), *args, engine="numpy").bfloat16()
    return torch.from_numpy(np.ascontiguousarray(getattr(dm, op)(view.numpy(), *args, engine="numpy")))


def _layouts(tensor):
    """The tensor itself, a view past its storage's first item (every alignment), and one whose last two
    axes are laid out transposed."""
    yield tensor
    flat = torch.empty(tensor.numel() + 3, dtype=tensor.dtype)
    shifted = flat[3:].view(tensor.shape)
    shifted.copy_(tensor)
    yield shifted
    if tensor.dim() >= 4:
        yield tensor.transpose(-1, -2).contiguous().transpose(-1, -2)


def _same(got, want):
    assert type(got) is torch.Tensor and got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.resolve_conj().resolve_neg(), want) or (
        want.is_floating_point() and torch.equal(got.isnan(), want.isnan()))


@pytest.mark.parametrize("seed", range(6))
def test_random_calls_every_dtype_and_layout_repeat_as_the_numpy_engine(seed):
    """Every op, ranks 3-5, every dtype the core moves (and bfloat16, which it does not), shifted and
    transposed layouts, four calls each: the core's repeats write what the NumPy engine writes."""
    rng = np.random.default_rng(seed)
    for rank in (3, 4, 5):
        for op, args, shape in _calls(rng, rank):
            for dtype in DTYPES[seed::3]:
                base = torch.from_numpy(rng.integers(-50, 50, size=shape).astype(np.int64)).to(dtype)
                for data in _layouts(base):
                    want = _expected(op, args, data)
                    for _ in range(4):
                        _same(getattr(dm, op)(data, *args), want)


@pytest.mark.parametrize("shape", [(1, 4, 4, 4), (1, 4, 16, 16), (2, 16, 32, 32), (4, 16, 64, 64)],
                         ids=["256 B", "4 KiB", "128 KiB", "1 MiB"])
@pytest.mark.parametrize("op", ["space_to_depth", "depth_to_space"])
def test_sizes_across_the_native_threshold_take_the_handle(op, shape, monkeypatch):
    """Below and above ``NATIVE_MIN_BYTES`` (PyTorch's own op first, the dispatcher first), both modes: from the
    third call every call is ``at``'s, from the input's address, and right."""
    recipes.RECIPES.clear()
    make, at = native_engine.handles()
    addresses = []

    def counted(handle, address):
        addresses.append(address)
        return at(handle, address)

    monkeypatch.setattr(native_engine, "handles", lambda: (make, counted))
    for mode in ("blocks_first", "depth_first"):
        data = torch.randn(*shape)
        want = _expected(op, (mode, 2), data)
        for k in range(5):
            _same(getattr(dm, op)(data, mode, 2), want)
        assert addresses[-3:] == [data.data_ptr()] * 3


def test_lazy_negative_and_conjugate_views_are_resolved():
    """A negative or conjugate view shares its base's memory and layout but not its values: never the base's
    handle (their keys differ), and their own calls take PyTorch's path."""
    base = torch.randn(1, 4, 8, 8)
    for _ in range(3):
        dm.space_to_depth(base, "blocks_first", 2)
    negative = torch._neg_view(base)
    assert negative.is_neg() and negative.data_ptr() == base.data_ptr()
    for _ in range(3):
        _same(dm.space_to_depth(negative, "blocks_first", 2), _expected("space_to_depth", ("blocks_first", 2), -base))
    complex_base = torch.randn(1, 4, 8, 8, dtype=torch.complex64)
    for _ in range(3):
        dm.depth_to_space(complex_base, "depth_first", 2)
    conjugate = complex_base.conj()
    for _ in range(3):
        got = dm.depth_to_space(conjugate, "depth_first", 2)
        assert torch.equal(got.resolve_conj(), _expected("depth_to_space", ("depth_first", 2), complex_base).conj())


def test_a_tensor_resized_in_place_is_a_new_layout():
    """The key is read at each call: a tensor whose shape changes in place between calls is another call."""
    data = torch.arange(64.0).reshape(1, 4, 4, 4)
    for _ in range(3):
        dm.space_to_depth(data, "depth_first", 2)
    data.resize_(1, 16, 2, 2)
    for _ in range(3):
        _same(dm.space_to_depth(data, "depth_first", 2), _expected("space_to_depth", ("depth_first", 2), data))


def test_gradients_and_no_grad_calls_around_the_handle():
    """A call autograd records keeps the differentiable path whenever it comes; under no_grad a tensor that
    requires grad takes the handle and gives a result that does not."""
    leaf = torch.rand(1, 4, 16, 16, requires_grad=True)
    for k in range(4):
        with torch.no_grad():
            quiet = dm.space_to_depth(leaf, "depth_first", 2)
        assert not quiet.requires_grad
        _same(quiet, _expected("space_to_depth", ("depth_first", 2), leaf))
        dm.space_to_depth(leaf, "depth_first", 2).pow(2).sum().backward()
        assert torch.allclose(leaf.grad, 2 * (k + 1) * leaf.detach())


def test_results_own_their_memory():
    """A result outlives its input, the recipes and the core's table; no two results share memory."""
    data = torch.randn(2, 8, 8, 8)
    results = [dm.depth_to_space(data, "blocks_first", 2) for _ in range(4)]
    want = _expected("depth_to_space", ("blocks_first", 2), data)
    del data
    recipes.RECIPES.clear()
    gc.collect()
    assert len({r.data_ptr() for r in results}) == 4
    for result in results:
        _same(result, want)
        result.add_(1)  # (writable, its own)


def test_threads_share_a_recipe_and_its_handle():
    """Eight threads repeat calls of one layout (small, and 1 MiB, which the core runs without the GIL) on
    tensors of their own while another empties the recipes now and then."""
    errors = []
    shapes = [(1, 4, 16, 16), (4, 16, 64, 64)]

    def work(i):
        try:
            for k in range(40):
                shape = shapes[(i + k) % 2]
                data = torch.full(shape, float(i)) + torch.arange(shape[-1], dtype=torch.float32)
                got = dm.space_to_depth(data, "blocks_first", 2)
                if not torch.equal(got, _expected("space_to_depth", ("blocks_first", 2), data)):
                    errors.append((i, k))
                if i == 0 and k % 10 == 9:
                    recipes.RECIPES.clear()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    run_threads(work)
    assert errors == []


def test_handles_refuse_what_is_not_theirs():
    """The core's handle functions: None where no call is kept or the input is no ndarray, a TypeError for
    what is no handle, None for address 0."""
    core = native_engine.core()
    recipes.RECIPES.clear()
    view = np.zeros((1, 4, 4, 4), np.float32)
    assert core.handle("space_to_depth", view, "blocks_first", 2, "channels_first", "auto") is None
    assert core.handle("space_to_depth", [1, 2], "blocks_first", 2, "channels_first", "auto") is None
    assert core.handle("no_such_op", view, "blocks_first", 2, "channels_first", "auto") is None
    with pytest.raises(TypeError):
        core.handle("space_to_depth", view)
    with pytest.raises((TypeError, ValueError)):
        core.at(object(), 1024)
    with pytest.raises(TypeError):
        core.at(None)
    for _ in range(2):
        dm.space_to_depth(view, "blocks_first", 2)
    handle = core.handle("space_to_depth", view, "blocks_first", 2, "channels_first", "auto")
    assert handle is not None
    assert core.at(handle, 0) is None
    with pytest.raises((TypeError, OverflowError)):
        core.at(handle, "an address")
    src = np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4)
    got = core.at(handle, src.ctypes.data)
    assert np.array_equal(got, dm.space_to_depth(src, "blocks_first", 2, engine="numpy"))


def test_a_traced_tensor_never_takes_the_door():
    """torch.compile sees the custom op, not the handle: the door asks whether it traces before any cache.
    (In a fresh interpreter: torch.compile imports Triton, which aborts a process that has loaded jaxlib's,
    TensorFlow's or OpenVINO's LLVM; see test_nn.py.)"""
    data = torch.randn(1, 4, 8, 8)
    for _ in range(3):
        dm.space_to_depth(data, "depth_first", 2)
    assert ops._tensor_repeat("space_to_depth", data, "depth_first", 2, "channels_first", "auto") is not None
    code = """
import datamove as dm, torch
from datamove import ops
data = torch.randn(1, 4, 8, 8)
for _ in range(3):
    dm.space_to_depth(data, "depth_first", 2)
seen = []
door = ops._tensor_repeat
ops._tensor_repeat = lambda *args: seen.append(door(*args)) or seen[-1]
compiled = torch.compile(lambda x: dm.space_to_depth(x, "depth_first", 2) * 2, backend="eager", fullgraph=True)
want = torch.nn.functional.pixel_unshuffle(data, 2) * 2
assert torch.equal(compiled(data), want) and torch.equal(compiled(data), want)
assert seen and all(found is None for found in seen), seen  # (traced: the door stood aside)
print("checked")
"""
    assert script_output(code, timeout=600).endswith("checked")


@pytest.mark.parametrize("op", ["space_to_depth", "depth_to_space"])
def test_the_tensor_doors_key_is_the_recipes_key(op):
    """ops._tensor_repeat spells libraries._Torch.key's fields inline (a call less): it must find the recipe
    that recipes.key, the one place keys are made, keyed."""
    x = torch.arange(4 * 4 * 4 * 4, dtype=torch.float32).reshape(4, 4, 4, 4)
    for _ in range(3):
        getattr(dm, op)(x, "depth_first", 2)
    key = recipes.key(op, ("depth_first", 2), x, "auto")
    recipe = recipes.RECIPES.get(key)
    assert recipe is not None
    recipes.RECIPES.clear()
    assert ops._tensor_repeat(op, x, "depth_first", 2, "channels_first", "auto") is None
    recipes.RECIPES[key] = recipe  # the only recipe kept: the door finds it by its own key
    done = ops._tensor_repeat(op, x, "depth_first", 2, "channels_first", "auto")
    assert done is not None and torch.equal(done, getattr(torch.nn.functional,
                                                         "pixel_unshuffle" if op == "space_to_depth" else "pixel_shuffle")(x, 2))
