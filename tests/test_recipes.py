"""Recipes: a repeated call reuses its plan, and never skips a check it must make."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import datamove as dm
import reference as ref
from datamove.dispatch import numpy_calls, recipes
from test_moves import calls

CALLS = [
    (dm.space_to_depth, ("blocks_first", 2), ref.space_to_depth, (4, 3, 6, 8)),
    (dm.depth_to_space, ("depth_first", 2), ref.depth_to_space, (2, 12, 3, 5)),
    (dm.batch_to_space, ([1, 2, 3, 1], [0, 1, 2, 0], [0, 0, 1, 0]), ref.batch_to_space, (12, 2, 3, 4)),
    (dm.space_to_batch, ([1, 2, 3, 1], [0, 1, 2, 0], [0, 1, 1, 0]), ref.space_to_batch, (2, 2, 3, 4)),
]


@pytest.mark.parametrize("op, args, reference, shape", CALLS, ids=[c[0].__name__ for c in CALLS])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.complex128, "V3"])
def test_repeated_calls(op, args, reference, shape, dtype):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype).reshape(shape)
    expected = reference(data, *args)
    # on the NumPy engine the first call makes the recipe, the others use it; with "auto" the core's first
    # call keeps the call's program (any out's strides), or, where the core takes none, a recipe is made
    for engine in ("auto", "numpy"):
        for _ in range(3):
            got = op(data, *args, engine=engine)
            assert got.tobytes() == expected.tobytes() and got.shape == expected.shape and got.flags.c_contiguous
            out = np.full(expected.shape, 0, dtype)
            assert op(data, *args, out=out, engine=engine) is out and out.tobytes() == expected.tobytes()
            strided_out = np.zeros(expected.shape[:-1] + (2 * expected.shape[-1],), dtype)[..., ::2]
            assert op(data, *args, out=strided_out, engine=engine) is strided_out
            assert np.ascontiguousarray(strided_out).tobytes() == expected.tobytes()
            other = np.asfortranarray(data)  # another layout: another recipe
            assert op(other, *args, engine=engine).tobytes() == expected.tobytes()
    assert any(k[0] == op.__name__ and "numpy" in k for k in recipes.RECIPES)


@pytest.mark.parametrize("op, args, shape", [
    (dm.space_to_batch, ([1, 2], [0, 0], [0, 0]), (1, 6)),  # the gather view is F-contiguous: reshape keeps it
    (dm.space_to_batch, ([1, 3], [0, 0], [0, 0]), (2, 6)),
    (dm.batch_to_space, ([1, 2], [0, 0], [0, 0]), (2, 3)),
    (dm.space_to_depth, ("blocks_first", 1), (1, 2, 3, 4)),  # block 1: the identity
    (dm.depth_to_space, ("depth_first", 2), (1, 4, 1, 1)),
])
def test_results_own_their_memory_in_c_order(op, args, shape):
    data = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    for _ in range(2):  # the first call makes the recipe, the second uses it
        got = op(data, *args)
        assert got.flags.c_contiguous and not np.may_share_memory(got, data)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int16, np.complex128, np.bool_, "M8[s]"])
def test_small_crops_and_pads_take_the_two_step_path_and_nothing_else(dtype):
    """A small call with crops or pads on the NumPy engine keeps only the two-step path (nothing lowered for
    the direct one, which it would never take), on every plain dtype, with and without ``out=``. (With
    ``engine="auto"`` the core's first call takes these and keeps their programs: no recipe is made.)"""
    rng = np.random.default_rng(1)
    for op, args, shape in [(dm.batch_to_space, ([1, 2, 2], [0, 1, 0], [0, 2, 3]), (4, 3, 5)),
                            (dm.space_to_batch, ([1, 2, 3], [0, 1, 2], [0, 1, 3]), (2, 4, 7))]:
        data = rng.integers(0, 256, int(np.prod(shape)) * np.dtype(dtype).itemsize, np.uint8).view(dtype).reshape(shape)
        expected = getattr(ref, op.__name__)(data, *args)
        for _ in range(2):
            for engine in ("auto", "numpy"):
                assert op(data, *args, engine=engine).tobytes() == np.ascontiguousarray(expected).tobytes()
                out = np.zeros(expected.shape[::-1], dtype).T
                assert op(data, *args, out=out, engine=engine) is out
                assert np.ascontiguousarray(out).tobytes() == np.ascontiguousarray(expected).tobytes()
        recipe = recipes.RECIPES[numpy_calls.NUMPY.key(op.__name__, tuple(args), data, "numpy")]
        assert recipe.two_step is not None and recipe.copies is None and recipe.gather is None


@settings(max_examples=300, deadline=None)
@given(calls(), st.sampled_from(["uint8", "int16", "float32", "complex128", "bool", "M8[s]", "V3"]))
def test_every_small_recipe_path_equals_the_spec_bit_for_bit(case, dtype):
    """Whatever path a kept recipe takes (two-step, read off the plan, lowered copies, the engine), its first
    and later calls, with and without ``out=`` (C- and F-ordered), give the spec's result, bit for bit."""
    op, shape, args = case
    dtype = np.dtype(dtype)
    raw = np.random.default_rng(len(shape)).integers(0, 256, int(np.prod(shape)) * dtype.itemsize, np.uint8)
    data = raw.view(dtype).reshape(shape)
    expected = np.ascontiguousarray(getattr(ref, op)(data, *args)).tobytes()
    for _ in range(2):
        got = getattr(dm, op)(data, *args)
        assert got.tobytes() == expected and got.flags.c_contiguous
        for out in (np.zeros(got.shape, dtype), np.zeros(got.shape[::-1], dtype).T):
            assert getattr(dm, op)(data, *args, out=out) is out and np.ascontiguousarray(out).tobytes() == expected


def test_small_inputs_with_large_pads_hold_no_temporary_of_the_output_size():
    """Pads can make a small input's output any size: no padded temporary then, NumPy or PyTorch
    (peak extra memory: the output and at most 1 MiB)."""
    import tracemalloc

    data = np.arange(10_000, dtype=np.float32).reshape(1, 1, 100, 100)  # 40 KB in, 4.6 MiB out
    args = ([1, 1, 2, 2], [0, 0, 500, 500], [0, 0, 500, 500])
    for _ in range(2):
        tracemalloc.start()
        got = dm.space_to_batch(data, *args)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak <= got.nbytes + (1 << 20), (peak, got.nbytes)
        assert np.array_equal(got, ref.space_to_batch(data, *args))
    pytest.importorskip("torch")
    code = """
import resource, torch, datamove as dm
x = torch.arange(10_000, dtype=torch.float32).reshape(1, 1, 100, 100)
dm.space_to_batch(x[:, :, :2, :2], [1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
y = dm.space_to_batch(x, [1, 1, 2, 2], [0, 0, 2000, 2000], [0, 0, 2000, 2000])
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024, y.numel() * 4)
"""
    rise, nbytes = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True).stdout.split())
    assert rise <= nbytes + (2 << 20), (rise, nbytes)  # was twice the output: the padded input, then the result


def test_parameter_types_are_checked_on_every_call():
    x = np.zeros((1, 1, 4, 4))
    dm.space_to_depth(x, "blocks_first", 1)
    dm.space_to_depth(x, "blocks_first", 2)
    with pytest.raises(TypeError):
        dm.space_to_depth(x, "blocks_first", True)
    with pytest.raises(TypeError):
        dm.space_to_depth(x, "blocks_first", 2.0)
    y = np.zeros((4, 2))
    dm.batch_to_space(y, [1, 2], [0, 1], [0, 1])
    with pytest.raises(TypeError):
        dm.batch_to_space(y, [1, 2.0], [0, 1], [0, 1])
    with pytest.raises(TypeError):
        dm.batch_to_space(y, [1, 2], [0, True], [0, 1])
    # integer arrays work, without a recipe
    assert np.array_equal(dm.batch_to_space(y, np.array([1, 2]), [0, 1], [0, 1]), dm.batch_to_space(y, [1, 2], [0, 1], [0, 1]))


def test_out_is_checked_on_every_call():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    good = np.empty((1, 4, 2, 2))
    dm.space_to_depth(x, "blocks_first", 2, out=good)
    for bad, message in ((np.empty((1, 4, 2, 3)), "out.shape"), (np.empty((1, 4, 2, 2), np.float32), "out.dtype")):
        with pytest.raises(dm.DataMoveError, match=message):
            dm.space_to_depth(x, "blocks_first", 2, out=bad)
    frozen = np.empty((1, 4, 2, 2))
    frozen.flags.writeable = False
    with pytest.raises(dm.DataMoveError, match="writeable"):
        dm.space_to_depth(x, "blocks_first", 2, out=frozen)
    with pytest.raises(TypeError, match="out must be"):
        dm.space_to_depth(x, "blocks_first", 2, out=[0])
    # out overlapping the input: the input is copied first
    buffer = np.arange(32.0)
    data = buffer[:16].reshape(1, 1, 4, 4)
    expected = ref.space_to_depth(data.copy(), "blocks_first", 2)
    for _ in range(2):
        buffer[:16] = np.arange(16.0)
        out = buffer[8:24].reshape(1, 4, 2, 2)
        dm.space_to_depth(data, "blocks_first", 2, out=out)
        assert np.array_equal(out, expected)


def test_the_cache_is_bounded():
    for n in range(1, recipes._MAX + 40):
        dm.space_to_batch(np.zeros((1, n), np.uint8), [1, 1], [0, 0], [0, 0])
    assert len(recipes.RECIPES) <= recipes._MAX


def test_torch_calls_reuse_a_recipe_and_still_check_out():
    torch = pytest.importorskip("torch")
    x = torch.arange(64.0).reshape(1, 4, 4, 4)
    batch = x.reshape(4, 1, 4, 4)
    expected = ref.batch_to_space(batch.numpy(), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])
    for _ in range(3):  # the first call validates and keeps a recipe, the others use it
        assert torch.equal(dm.space_to_depth(x, "depth_first", 2), torch.nn.functional.pixel_unshuffle(x, 2))
        got = dm.batch_to_space(batch, [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])
        assert type(got) is torch.Tensor and np.array_equal(got.numpy(), expected)
        out = torch.zeros(1, 16, 2, 2)
        assert dm.space_to_depth(x, "blocks_first", 2, out=out) is out
        assert np.array_equal(out.numpy(), ref.space_to_depth(x.numpy(), "blocks_first", 2))
    assert sum(isinstance(r, recipes.TorchRecipe) for r in recipes.RECIPES.values()) >= 3
    with pytest.raises(dm.DataMoveError, match=r"out.shape must be the output shape \(1, 16, 2, 2\)"):
        dm.space_to_depth(x, "depth_first", 2, out=torch.zeros(1, 16, 2, 3))
    with pytest.raises(TypeError):
        dm.space_to_depth(x, "depth_first", 2.0)


TORCH_DTYPES = ["float32", "uint8", "bool", "bfloat16", "int64", "complex128"]


@settings(max_examples=150, deadline=None)
@given(calls(), st.sampled_from(TORCH_DTYPES), st.sampled_from(["contiguous", "sliced", "offset", "channels_last"]))
def test_small_torch_calls_equal_the_spec_and_own_their_memory(case, dtype, layout):
    # the recipe's PyTorch paths (pixel_(un)shuffle, one strided view cloned, the formula), called twice;
    # the result in the input's memory format: channels-last for a 4-D/5-D channels-last input, else contiguous
    torch = pytest.importorskip("torch")
    op, shape, args = case
    dtype = getattr(torch, dtype)
    count = int(np.prod(shape))
    base = torch.arange(2 * count + 1).to(dtype)
    data = base[:count].reshape(shape)
    if layout == "sliced" and shape[-1]:
        data = base[: 2 * count].reshape(shape[:-1] + [2 * shape[-1]])[..., ::2]
    elif layout == "offset":
        data = base[1 : count + 1].reshape(shape)  # storage_offset 1
    elif layout == "channels_last":
        data = data.movedim(1, -1).contiguous().movedim(-1, 1)
    width = data.element_size()

    def as_bits(t):  # the items as raw bytes (NumPy V items), from a C-contiguous copy
        packed = torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1)
        raw = packed.view(torch.uint8) if dtype != torch.bool else packed
        return raw.numpy().view(np.uint8).view(f"V{width}").reshape(tuple(t.shape))

    expected = getattr(ref, op)(as_bits(data), *args)
    for _ in range(2):  # the first call makes the recipe, the second uses it
        got = getattr(dm, op)(data, *args)
        assert type(got) is torch.Tensor and got.dtype == dtype
        channels_last = layout == "channels_last" and len(shape) in (4, 5) and not data.is_contiguous()
        cl = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        assert got.is_contiguous(memory_format=cl) if channels_last else got.is_contiguous()
        assert np.array_equal(as_bits(got), expected)
        if got.numel():
            assert got.untyped_storage().data_ptr() != data.untyped_storage().data_ptr()


def test_torch_recipes_keep_gradients():
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, 4, 6, dtype=torch.float64)
    for _ in range(2):
        leaf = x.clone().requires_grad_()
        y = dm.space_to_depth(leaf, "blocks_first", 2)  # one strided view: cloned only without a gradient
        (y * torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        weights = torch.arange(y.numel(), dtype=x.dtype).reshape(y.shape)
        assert torch.equal(leaf.grad, dm.depth_to_space(weights, "blocks_first", 2))
        with torch.no_grad():
            assert not dm.space_to_depth(leaf, "blocks_first", 2).requires_grad


@pytest.mark.parametrize("shape", [(1, 2, 4, 4), (4, 16, 64, 64)])  # the PyTorch-op recipe, and zero copy
def test_conjugate_views_never_take_their_bases_recipe(shape):
    torch = pytest.importorskip("torch")
    x = torch.randn(shape, dtype=torch.complex64)
    for call in (lambda t: dm.space_to_depth(t, "blocks_first", 2), lambda t: dm.space_to_depth(t, "depth_first", 2),
                 lambda t: dm.space_to_batch(t, [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])):
        plain = call(x)
        for _ in range(2):
            assert torch.equal(call(x.conj()), plain.conj())
            assert torch.equal(call(x.conj().imag), -call(x.imag.contiguous()))  # a negative view


# Calls on tensors of one shape, [4, 4, 8, 8] float32 (4 KiB: the depth ops' blocks_first on the core from the
# second call, depth_first on pixel_(un)shuffle, the space ops on one strided view, padded or cropped)
KEYED_CALLS = [
    ("space_to_depth", ("blocks_first", 2)),
    ("space_to_depth", ("depth_first", 2)),
    ("depth_to_space", ("blocks_first", 2)),
    ("depth_to_space", ("depth_first", 2)),
    ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])),
    # (no pads: the meta tensor's pads are torch.cat's Python meta kernel, whose first call imports torch._dynamo
    # and so Triton, whose LLVM aborts a process that has loaded TensorFlow's: see case_files.py)
    ("space_to_batch", ([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0])),
]


def _pairs(torch):
    """Pairs of tensors of one shape, [4, 4, 8, 8], that differ in one field of a recipe's key each (or in what
    the recipe must read at every call: the storage offset, requires_grad, inference mode)."""
    base = torch.arange(1, 1025, dtype=torch.float32).reshape(4, 4, 8, 8)
    complex_base = torch.complex(base, -base)
    subclass = type("Subclass", (torch.Tensor,), {})
    pairs = {
        "transposed": (base, base.transpose(2, 3)),  # strides
        "sliced": (base, torch.arange(1, 2049, dtype=torch.float32).reshape(4, 4, 8, 16)[..., ::2]),
        "channels_last": (base, base.contiguous(memory_format=torch.channels_last)),
        "offset": (base, torch.arange(0, 1026, dtype=torch.float32)[2:].reshape(4, 4, 8, 8)),  # same strides
        "int32": (base, base.to(torch.int32)),  # dtype, of the same width
        "float64": (base, base.double()),
        "int16": (base, base.to(torch.int16)),
        "bfloat16": (base, base.to(torch.bfloat16)),
        "conj": (complex_base, complex_base.conj()),  # the same strides and dtype, the conjugate bit
        "subclass": (base, base.as_subclass(subclass)),  # type
        "parameter": (base, torch.nn.Parameter(base.clone(), requires_grad=False)),
        "requires_grad": (base, base.clone().requires_grad_()),
        "meta": (base, base.to("meta")),  # device
    }
    if hasattr(torch, "_neg_view"):
        pairs["neg"] = (base, torch._neg_view(base))  # the same strides and dtype, the negative bit
    with torch.inference_mode():
        pairs["inference"] = (base, base.clone())
    return pairs


_READ_AT_EVERY_CALL = ("offset", "requires_grad", "inference")


def _values(tensor):
    """``tensor``'s values as a NumPy array of float64 or complex128 (exact for every dtype here)."""
    torch = sys.modules["torch"]
    values = tensor.detach().resolve_conj().resolve_neg()
    return values.to(torch.complex128 if values.is_complex() else torch.float64).numpy()


@pytest.mark.parametrize("op, args", KEYED_CALLS, ids=[f"{op}-{args[0]}" for op, args in KEYED_CALLS])
def test_torch_tensors_of_one_shape_never_take_each_others_recipe(op, args):
    # each tensor of a pair right after the other's recipe is made and used: a key that missed a field would
    # hand one the other's recipe (a wrong value, dtype, type, device or memory format). Every result equals
    # the spec's, and, in type and layout, the one its tensor gets from an empty cache.
    torch = pytest.importorskip("torch")
    function = getattr(dm, op)
    for name, pair in _pairs(torch).items():
        fresh = []
        for tensor in pair:
            recipes.RECIPES.clear()
            fresh.append(function(tensor, *args))
        recipes.RECIPES.clear()
        for which in (0, 0, 1, 1, 1, 0, 1):
            tensor, alone = pair[which], fresh[which]
            got = function(tensor, *args)
            assert (type(got), got.dtype, got.device, got.stride()) == (
                type(alone), alone.dtype, alone.device, alone.stride()), (name, which)
            assert got.requires_grad == (tensor.requires_grad and torch.is_grad_enabled()), (name, which)
            if tensor.device.type != "meta":
                assert np.array_equal(_values(got), getattr(ref, op)(_values(tensor), *args)), (name, which)
        # the key TorchCalls builds is the adapter's (recipes.key, libraries.TORCH.key): one recipe each,
        # but for what the recipe reads at every call
        keys = {recipes.key(op, args, tensor, "auto") for tensor in pair}
        assert None not in keys and keys <= set(recipes.RECIPES), name
        assert len(keys) == (1 if name in _READ_AT_EVERY_CALL else 2), name


@pytest.mark.parametrize("op, args", KEYED_CALLS, ids=[f"{op}-{args[0]}" for op, args in KEYED_CALLS])
def test_a_tensor_that_requires_grad_gets_its_gradient_from_a_kept_recipe(op, args):
    # the recipe is made and used on a tensor without a gradient; the same layout with one then gets the
    # adjoint's gradient (each input's gradient: the sum of the weights of the outputs it went to)
    torch = pytest.importorskip("torch")
    function = getattr(dm, op)
    base = _pairs(torch)["transposed"][0]
    recipes.RECIPES.clear()
    function(base, *args)
    function(base, *args)
    places = getattr(ref, op)(np.arange(1, base.numel() + 1, dtype=np.int64).reshape(tuple(base.shape)), *args)
    for _ in range(2):
        leaf = base.clone().requires_grad_()
        got = function(leaf, *args)
        assert got.requires_grad
        weights = torch.arange(1, got.numel() + 1, dtype=torch.float32).reshape(got.shape)
        (got * weights).sum().backward()
        want = np.bincount(places.ravel(), weights=weights.numpy().ravel(), minlength=base.numel() + 1)[1:]
        assert np.array_equal(leaf.grad.numpy().ravel(), want.astype(np.float32))
        with torch.no_grad():
            assert not function(leaf, *args).requires_grad


@pytest.mark.parametrize("op, args", [("space_to_depth", ("blocks_first", 2)), ("depth_to_space", ("depth_first", 2)),
                                      ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])),
                                      ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]))])
def test_numpy_keys_are_the_adapters(op, args):
    """datamove.dispatch.numpy_calls builds a NumPy array's recipe key inline (a call less on the way to
    a kept recipe): it is (op, *args as exact values, engine, *libraries.NUMPY.key(data)), the adapter's key."""
    from datamove.arrays import libraries

    x = np.arange(4 * 4 * 8 * 8, dtype=np.float32).reshape(4, 4, 8, 8)
    if op == "depth_to_space":
        x = x.reshape(4, 16, 4, 4)
    recipes.RECIPES.clear()
    for _ in range(2):  # (the first call of a layout is the core's alone: the second makes the recipe)
        getattr(dm, op)(x, *args, engine="numpy")
    exact = tuple(tuple(a) if isinstance(a, list) else a for a in args)
    assert (op, *exact, "numpy", *libraries.NUMPY.key(x)) in recipes.RECIPES
