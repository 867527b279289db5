"""The four operations on every installed array library: bit for bit the NumPy result, same kind, same device, same errors."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import datamove as dm
from datamove import engines
from datamove import DataMoveError
from strategies import depth_case, space_batch_case
from test_validation import B2S_RULES, DEPTH_RULES, S2B_RULES

ml_dtypes = pytest.importorskip("ml_dtypes")
array_api_compat = pytest.importorskip("array_api_compat")

BF16 = np.dtype(ml_dtypes.bfloat16)
ALL_DTYPES = [np.bool_, np.int8, np.int32, np.uint16, np.int64, np.float16, np.float32, np.float64, np.complex64, BF16]


def random_array(shape, dtype, seed):
    """Random bits of every dtype (NaN payloads and -0.0 included), booleans 0/1."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    size = int(np.prod(shape)) * dtype.itemsize
    return rng.integers(0, 256, size, dtype=np.uint8).view(dtype).reshape(shape)


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes()


# ------------------------------------------------------------------ libraries


class Library:
    """How one library's arrays are made from NumPy and read back."""

    def __init__(self, name, module, to, back, kind, dtypes, engine="auto"):
        self.name, self.module, self.to, self.back, self.kind, self.dtypes, self.engine = name, module, to, back, kind, dtypes, engine

    def __repr__(self):
        return self.name


def _torch_to(a):
    import torch

    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _torch_back(t):
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16)
    return t.numpy()


def _libraries():
    # bfloat16 is not a dtype of the standard: NumPy's bfloat16 arrays stay with the NumPy engines
    libs = [Library("numpy-array_api", "numpy", np.asarray, np.asarray, np.ndarray, [d for d in ALL_DTYPES if d != BF16], "array_api")]
    torch_dtypes = [d for d in ALL_DTYPES if d is not np.uint16]
    libs.append(Library("torch", "torch", _torch_to, _torch_back, "torch.Tensor", torch_dtypes))
    libs.append(Library("torch-array_api", "torch", _torch_to, _torch_back, "torch.Tensor", torch_dtypes, "array_api"))
    # float64 would silently become float32 without jax_enable_x64
    jax_dtypes = [d for d in ALL_DTYPES if d not in (np.float64, np.int64)]
    libs.append(Library("jax", "jax", lambda a: __import__("jax.numpy").numpy.asarray(a), np.asarray, "jax.Array", jax_dtypes))
    strict_dtypes = [d for d in ALL_DTYPES if d not in (np.float16, BF16)]
    libs.append(Library("array_api_strict", "array_api_strict",
                        lambda a: __import__("array_api_strict").asarray(a), np.asarray, "array_api_strict.Array", strict_dtypes))
    libs.append(Library("dask", "dask", lambda a: __import__("dask.array").array.from_array(a, chunks=3),
                        lambda d: np.asarray(d.compute()), "dask.array.Array", ALL_DTYPES))
    return libs


LIBRARIES = _libraries()


@pytest.fixture(params=LIBRARIES, ids=repr)
def lib(request):
    library = request.param
    if library.module != "numpy":
        pytest.importorskip(library.module)
    return library


def check_kind(got, data, lib):
    if lib.kind is np.ndarray:
        assert type(got) is np.ndarray
    else:
        assert dm.arrays.libraries.name(got) == lib.kind
        assert dm.arrays.libraries.name(got) == dm.arrays.libraries.name(data)
        assert array_api_compat.device(got) == array_api_compat.device(data)


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(case=space_batch_case(max_rank=5, max_size=600), seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 99))
def test_space_to_batch_and_back_equal_numpy(lib, case, seed, pick):
    shape, block, begin, end = case
    data = random_array(shape, lib.dtypes[pick % len(lib.dtypes)], seed)
    expected = dm.space_to_batch(data, block, begin, end)
    x = lib.to(data)
    got = dm.space_to_batch(x, block, begin, end, engine=lib.engine)
    check_kind(got, x, lib)
    same_bits(lib.back(got), expected)

    y = lib.to(expected)  # BatchToSpace with crops = pads gives the data back
    back = dm.batch_to_space(y, block, begin, end, engine=lib.engine)
    check_kind(back, y, lib)
    same_bits(lib.back(back), dm.batch_to_space(expected, block, begin, end))
    same_bits(lib.back(back), data)


@SETTINGS
@given(case=depth_case(max_rank=5, max_size=600), seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 99))
def test_space_to_depth_and_back_equal_numpy(lib, case, seed, pick):
    shape, mode, size = case
    data = random_array(shape, lib.dtypes[pick % len(lib.dtypes)], seed)
    expected = dm.space_to_depth(data, mode, size)
    x = lib.to(data)
    got = dm.space_to_depth(x, mode, size, engine=lib.engine)
    check_kind(got, x, lib)
    same_bits(lib.back(got), expected)

    y = lib.to(expected)
    back = dm.depth_to_space(y, mode, size, engine=lib.engine)
    check_kind(back, y, lib)
    same_bits(lib.back(back), dm.depth_to_space(expected, mode, size))
    same_bits(lib.back(back), data)


# ------------------------------------------------------------------ errors


def _small(rules):
    return [r for r in rules if r[0 if not isinstance(r[0], str) else 1].size < 10_000 and r[-2] is not None]


@pytest.mark.parametrize("data, block, begin, end, error, match", _small(B2S_RULES), ids=lambda v: "")
def test_batch_to_space_errors_are_numpys(lib, data, block, begin, end, error, match):
    with pytest.raises(error, match=match):
        dm.batch_to_space(lib.to(data.astype(np.float32)), block, begin, end, engine=lib.engine)


@pytest.mark.parametrize("data, block, begin, end, error, match", _small(S2B_RULES), ids=lambda v: "")
def test_space_to_batch_errors_are_numpys(lib, data, block, begin, end, error, match):
    with pytest.raises(error, match=match):
        dm.space_to_batch(lib.to(data.astype(np.float32)), block, begin, end, engine=lib.engine)


@pytest.mark.parametrize("op, data, mode, size, error, match", _small(DEPTH_RULES), ids=lambda v: "")
def test_depth_errors_are_numpys(lib, op, data, mode, size, error, match):
    with pytest.raises(error, match=match):
        getattr(dm, op)(lib.to(data.astype(np.float32)), mode, size, engine=lib.engine)


def engines_for_lib(x):
    from datamove.engines import route

    return route.able(engines.facts(x))


def test_engine_errors_name_the_engines_that_can(lib):
    x = lib.to(np.zeros((1, 4, 2, 2), np.float32))
    with pytest.raises(DataMoveError, match=re.escape("engine must be 'auto' or one of ['numpy', 'native', 'array_api', 'triton', 'pallas'], got 'cuda'")):
        dm.depth_to_space(x, "blocks_first", 2, engine="cuda")
    with pytest.raises(TypeError, match="engine must be a string"):
        dm.depth_to_space(x, "blocks_first", 2, engine=None)
    if "triton" not in engines_for_lib(x):
        with pytest.raises(DataMoveError, match=r"engine 'triton' cannot take (a|this) .*; engines that can: \[.*'array_api'.*\]"):
            dm.depth_to_space(x, "blocks_first", 2, engine="triton")


def test_numpy_dtypes_outside_the_standard_stay_with_the_numpy_engines():
    x = np.zeros((1, 4, 2, 2), object)
    with pytest.raises(DataMoveError, match=re.escape("engine 'array_api' cannot take a numpy.ndarray; engines that can: ['numpy'")):
        dm.depth_to_space(x, "blocks_first", 2, engine="array_api")


def test_lazy_and_grad_arrays_cannot_take_the_numpy_engine():
    torch = pytest.importorskip("torch")
    t = torch.zeros(1, 4, 2, 2, requires_grad=True)
    with pytest.raises(DataMoveError, match=re.escape("engine 'numpy' cannot take this torch.Tensor; engines that can: ['array_api']")):
        dm.depth_to_space(t, "blocks_first", 2, engine="numpy")
    with torch.no_grad():  # no graph to keep: the zero-copy path may take it
        assert dm.depth_to_space(t, "blocks_first", 2, engine="numpy").shape == (1, 1, 4, 4)
    da = pytest.importorskip("dask.array")
    with pytest.raises(DataMoveError, match=re.escape("engine 'native' cannot take this dask.array.Array; engines that can: ['array_api']")):
        dm.space_to_depth(da.zeros((1, 1, 4, 4)), "blocks_first", 2, engine="native")


def test_dask_unknown_chunk_sizes_are_reported():
    da = pytest.importorskip("dask.array")
    x = da.arange(16)
    x = x[x > 3].reshape(1, -1) if False else x[x > 3][None, :]
    with pytest.raises(DataMoveError, match=r"data.shape\[1\] is unknown \(nan\).*compute_chunk_sizes"):
        dm.space_to_batch(x, [1, 2], [0, 0], [0, 0])


def test_cpu_dlpack_arrays_can_take_the_numpy_engines():
    jax = pytest.importorskip("jax")
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    on_cpu = jax.device_put(x, jax.devices("cpu")[0])  # (JAX's default device may be a GPU)
    for engine in ("numpy", "native"):
        got = dm.space_to_depth(on_cpu, "depth_first", 2, engine=engine)
        assert dm.arrays.libraries.name(got) == "jax.Array"
        same_bits(np.asarray(got), dm.space_to_depth(x, "depth_first", 2))


# ------------------------------------------------------------------ out=


def test_out_torch_is_written_in_place_on_both_paths():
    torch = pytest.importorskip("torch")
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    expected = dm.space_to_batch(x, [1, 1, 2, 3], [0, 0, 0, 1], [0, 0, 0, 2])
    for engine in ("auto", "numpy", "array_api"):
        out = torch.full(expected.shape, -1.0)
        got = dm.space_to_batch(torch.from_numpy(x), [1, 1, 2, 3], [0, 0, 0, 1], [0, 0, 0, 2], out=out, engine=engine)
        assert got is out
        same_bits(out.numpy(), expected)
    # bfloat16 through the zero-copy path: reinterpreted, written through out's own view
    xb = torch.from_numpy(x).to(torch.bfloat16)
    out = torch.empty(expected.shape, dtype=torch.bfloat16)
    dm.space_to_batch(xb, [1, 1, 2, 3], [0, 0, 0, 1], [0, 0, 0, 2], out=out)
    assert torch.equal(out, torch.from_numpy(expected).to(torch.bfloat16))


def test_out_overlapping_the_input_is_safe():
    torch = pytest.importorskip("torch")
    x = np.arange(16, dtype=np.int32).reshape(1, 4, 2, 2)
    expected = dm.depth_to_space(x, "blocks_first", 2)
    for engine in ("auto", "array_api"):
        t = torch.from_numpy(x.copy())
        out = t.view(1, 1, 4, 4)  # the same memory
        dm.depth_to_space(t, "blocks_first", 2, out=out, engine=engine)
        same_bits(out.numpy(), expected)


def test_out_array_api_strict_by_item_assignment():
    xs = pytest.importorskip("array_api_strict")
    x = np.arange(24, dtype=np.int64).reshape(1, 2, 2, 6)
    out = xs.zeros((1, 8, 1, 3), dtype=xs.int64)
    assert dm.space_to_depth(xs.asarray(x), "blocks_first", 2, out=out) is out
    same_bits(np.asarray(out), dm.space_to_depth(x, "blocks_first", 2))


def test_out_errors():
    torch = pytest.importorskip("torch")
    t = torch.zeros(1, 4, 2, 2)
    with pytest.raises(TypeError, match="out must be a torch.Tensor like data, got numpy.ndarray"):
        dm.depth_to_space(t, "blocks_first", 2, out=np.zeros((1, 1, 4, 4), np.float32))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray like data, got Tensor"):
        dm.depth_to_space(t.numpy(), "blocks_first", 2, out=torch.zeros(1, 1, 4, 4))
    with pytest.raises(DataMoveError, match=re.escape(r"out.shape must be the output shape (1, 1, 4, 4), got (1, 4, 2, 2)")):
        dm.depth_to_space(t, "blocks_first", 2, out=torch.zeros(1, 4, 2, 2))
    with pytest.raises(DataMoveError, match="out.dtype must be data.dtype = torch.float32, got torch.float64"):
        dm.depth_to_space(t, "blocks_first", 2, out=torch.zeros(1, 1, 4, 4, dtype=torch.float64))
    with pytest.raises(DataMoveError, match="out is a leaf tensor that requires grad"):
        dm.depth_to_space(t, "blocks_first", 2, out=torch.zeros(1, 1, 4, 4, requires_grad=True))
    sparse = torch.zeros(1, 4, 2, 2).to_sparse()
    for engine in ("auto", "numpy", "array_api"):
        with pytest.raises(TypeError, match=re.escape("data must be a dense (strided) tensor, got a tensor of layout torch.sparse_coo")):
            dm.depth_to_space(sparse, "blocks_first", 2, engine=engine)
    with pytest.raises(TypeError, match=re.escape("out must be a dense (strided) tensor, got a tensor of layout torch.sparse_coo")):
        dm.depth_to_space(t, "blocks_first", 2, out=torch.zeros(1, 1, 4, 4).to_sparse())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "nested tensors are in prototype stage"
        nested = torch.nested.nested_tensor([torch.zeros(2, 4, 4)] * 2)
    with pytest.raises(TypeError, match="data must be a dense .strided. tensor, got a nested tensor"):
        dm.batch_to_space(nested, [1, 1, 2, 2], [0] * 4, [0] * 4)
    expanded = torch.zeros(1, 1, 1, 4).expand(1, 1, 4, 4)  # four rows on one row's memory
    for _ in range(2):  # also once the call has a recipe
        with pytest.raises(DataMoveError, match=re.escape("out must not repeat elements, got out.stride() = (4, 4, 0, 1)")):
            dm.depth_to_space(t, "blocks_first", 2, out=expanded)
        assert not expanded.any()
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(TypeError, match="out= cannot be used with JAX arrays: they are immutable"):
        dm.depth_to_space(jnp.zeros((1, 4, 2, 2)), "blocks_first", 2, out=jnp.zeros((1, 1, 4, 4)))
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="out= cannot be used with Dask arrays: they are lazy"):
        dm.depth_to_space(da.zeros((1, 4, 2, 2)), "blocks_first", 2, out=da.zeros((1, 1, 4, 4)))


def test_results_never_alias_the_input(lib):
    """Even when nothing moves (block 1), writing into the result leaves the input alone."""
    if lib.module in ("jax", "dask"):
        pytest.skip("immutable arrays")
    x = lib.to(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
    before = lib.back(x).copy()
    for result in (dm.space_to_depth(x, "blocks_first", 1, engine=lib.engine),
                   dm.batch_to_space(x, [1, 1, 1], [0, 0, 1], [0, 0, 0], engine=lib.engine)):
        result[...] = 0
        same_bits(lib.back(x), before)


def test_results_are_c_contiguous():
    """The uncropped BatchToSpace result is cropped by a slice: the result is that slice copied out."""
    torch = pytest.importorskip("torch")
    x = np.arange(16, dtype=np.float32).reshape(4, 1, 2, 2)
    args = ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])
    expected = dm.batch_to_space(x, *args)
    for data, engine in [(x, "array_api"), (torch.from_numpy(x), "auto"), (torch.from_numpy(x), "array_api"),
                         (torch.from_numpy(x).requires_grad_(), "auto")]:
        for _ in range(2):  # a torch call's second run comes from its recipe
            got = dm.batch_to_space(data, *args, engine=engine)
            contiguous = got.flags.c_contiguous if isinstance(got, np.ndarray) else got.is_contiguous()
            assert contiguous and np.array_equal(np.asarray(got.detach() if hasattr(got, "detach") else got), expected)


# ------------------------------------------------------------------ imports


def test_import_and_numpy_calls_load_no_framework():
    code = (
        "import sys, numpy as np, datamove as dm\n"
        "dm.space_to_depth(np.zeros((1, 1, 4, 4)), 'blocks_first', 2)\n"
        "dm.space_to_batch([[1, 2]], [1, 2], [0, 0], [0, 0])\n"
        "print(sorted(m for m in ('torch', 'jax', 'dask', 'cupy', 'array_api_compat', 'array_api_strict') if m in sys.modules))\n"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


# ------------------------------------------------------------------ GPU


def _gpu_cases():
    x = random_array((2, 8, 6, 4), np.float32, 1)
    return [
        ("space_to_batch", x, ([1, 2, 3, 2], [0, 0, 1, 1], [0, 2, 2, 1])),
        ("batch_to_space", x, ([1, 2, 1, 1], [0, 1, 0, 0], [0, 0, 2, 1])),
        ("space_to_depth", x, ("blocks_first", 2)),
        ("depth_to_space", x, ("depth_first", 2)),
    ]


def test_torch_cuda_matches_cpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    for op, x, args in _gpu_cases():
        t = torch.from_numpy(x).cuda()
        got = getattr(dm, op)(t, *args)
        assert got.device == t.device
        same_bits(got.cpu().numpy(), getattr(dm, op)(x, *args))


def test_cupy_matches_cpu():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("no CUDA device")
    for op, x, args in _gpu_cases():
        c = cupy.asarray(x)
        got = getattr(dm, op)(c, *args)
        assert isinstance(got, cupy.ndarray) and got.device == c.device
        same_bits(cupy.asnumpy(got), getattr(dm, op)(x, *args))


def test_a_traced_parameter_says_to_make_it_static():
    """Under jax.jit a parameter passed as an argument is a tracer: the message says how to make it static."""
    jax = pytest.importorskip("jax")
    x = jax.numpy.zeros((1, 2, 4, 4))
    static = "make it static (jax.jit(f, static_argnums=...) or static_argnames=...), or close over it"
    with pytest.raises(TypeError, match=re.escape("block_size must be an integer, got DynamicJaxprTracer")) as info:
        jax.jit(lambda x, b: dm.space_to_depth(x, "blocks_first", b))(x, 2)
    assert static in str(info.value)
    with pytest.raises(TypeError, match=re.escape("block_shape must be integers known while tracing")) as info:
        jax.jit(lambda x, b: dm.space_to_batch(x, b, [0] * 4, [0] * 4))(x, jax.numpy.array([1, 1, 2, 2]))
    assert static in str(info.value)
    ok = jax.jit(lambda x, b: dm.space_to_depth(x, "blocks_first", b), static_argnums=1)(x, 2)
    assert ok.shape == (1, 8, 2, 2)
