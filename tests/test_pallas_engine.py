"""The Pallas engine (datamove.engines.pallas_engine), on the CPU in Pallas' interpreter: bit for bit against the
NumPy engine over random cases, under jax.jit, jax.vmap and jax.grad, and lowered to Triton for a GPU.

Interpreted kernels compile once per shape (about 0.7 s each here): cases are small and few.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pytest.importorskip("jax.experimental.pallas")

import datamove as dm  # noqa: E402
from datamove import engines
from datamove import DataMoveError  # noqa: E402
from datamove.engines import route
from datamove.engines import pallas_engine  # noqa: E402

OPS = ("batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space")
# JAX's dtypes without 64-bit mode (the 8-byte ones: test_eight_byte_items_under_x64)
DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "bfloat16", "float32",
          "complex64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e8m0fnu")
MAX_ITEMS = 480


def random_data(rng, shape, dtype):
    """Random bits of ``dtype`` (NaN payloads included), as a NumPy array."""
    dtype = np.dtype(getattr(jnp, dtype))
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 256, (*shape, dtype.itemsize), dtype=np.uint8).view(dtype).reshape(shape)


def random_case(rng):
    """``(op, shape, args)``: a valid call of rank 2-5 (3-5 for the depth ops), blocks 1-4, of at most MAX_ITEMS."""
    while True:
        op = OPS[rng.integers(len(OPS))]
        if op in ("space_to_depth", "depth_to_space"):
            rank, size = int(rng.integers(3, 6)), int(rng.integers(1, 5))
            spatial = [int(rng.integers(1, 3)) for _ in range(rank - 2)]
            mode = ("blocks_first", "depth_first")[rng.integers(2)]
            n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
            if op == "space_to_depth":
                shape = (n, c, *(d * size for d in spatial))
            else:
                shape = (n, c * size ** (rank - 2), *spatial)
            args = (mode, size)
        else:
            rank = int(rng.integers(2, 6))
            block = [1] + [int(rng.integers(1, 5)) for _ in range(rank - 1)]
            if op == "space_to_batch":
                shape = (int(rng.integers(1, 3)), *(int(rng.integers(1, 5)) for _ in range(rank - 1)))
                begin = [0] + [int(rng.integers(0, b + 1)) for b in block[1:]]
                end = [0] + [(-(d + lo)) % b + b * int(rng.integers(0, 2)) for d, lo, b in zip(shape[1:], begin[1:], block[1:])]
            else:
                spatial = [int(rng.integers(1, 4)) for _ in range(rank - 1)]
                shape = (int(rng.integers(1, 3)) * int(np.prod(block)), *spatial)
                begin = [0] + [int(rng.integers(0, min(b, d * b) + 1)) for d, b in zip(spatial, block[1:])]
                end = [0] + [int(rng.integers(0, d * b - lo + 1)) if rng.random() < 0.5 else 0
                             for d, b, lo in zip(spatial, block[1:], begin[1:])]
            args = (block, begin, end)
        if np.prod(shape) <= MAX_ITEMS:
            return op, shape, args


def _cases(count, seed):
    rng = np.random.default_rng(seed)
    found = []
    for i in range(count):
        op, shape, args = random_case(rng)
        found.append((op, shape, args, DTYPES[i % len(DTYPES)]))  # every dtype, in turn
    return found


CASES = _cases(30, 45)


def numpy_engine(op, data, args):
    return getattr(dm, op)(np.asarray(data), *args, engine="numpy")


def same_bits(got, expected):
    got = np.asarray(got)
    return got.shape == expected.shape and got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("op, shape, args, dtype", CASES,
                         ids=[f"{op}-rank{len(shape)}-{dtype}" for op, shape, args, dtype in CASES])
def test_random_cases_bit_for_bit(op, shape, args, dtype):
    data = random_data(np.random.default_rng(len(shape)), shape, dtype)
    got = getattr(dm, op)(jnp.asarray(data), *args, engine="pallas")
    assert isinstance(got, jax.Array)
    assert same_bits(got, numpy_engine(op, data, args)), (op, shape, args, dtype)


def test_the_cases_cover_the_issue():
    ranks = {op: {len(shape) for o, shape, _, _ in CASES if o == op} for op in OPS}
    assert ranks["space_to_batch"] | ranks["batch_to_space"] == {2, 3, 4, 5}
    assert ranks["space_to_depth"] | ranks["depth_to_space"] == {3, 4, 5}
    assert {args[0] for op, _, args, _ in CASES if op.endswith("depth")} == {"blocks_first", "depth_first"}
    assert {args[1] for op, _, args, _ in CASES if op.endswith("depth")} == {1, 2, 3, 4}
    margins = [v for op, _, args, _ in CASES if op.endswith("batch") for v in args[1] + args[2]]
    assert any(margins) and {b for op, _, args, _ in CASES if op.endswith("batch") for b in args[0]} == {1, 2, 3, 4}
    assert {dtype for *_, dtype in CASES} == set(DTYPES)


@pytest.mark.parametrize("dtype", ["float64", "int64", "uint64", "complex128"])
def test_eight_byte_items_under_x64(dtype):
    op, shape, args = ("space_to_batch", (1, 3, 2), ([1, 2, 2], [0, 1, 0], [0, 0, 2]))
    data = random_data(np.random.default_rng(8), shape, dtype)
    with jax.enable_x64(True):
        got = getattr(dm, op)(jnp.asarray(data), *args, engine="pallas")
        assert same_bits(got, numpy_engine(op, data, args))


# One call of each op, chained shapes: (2, 2, 4, 6) -s2d-> (2, 8, 2, 3) -d2s-> back -s2b-> -b2s-> back.
CHAIN = [("space_to_depth", ("blocks_first", 2)), ("depth_to_space", ("blocks_first", 2)),
         ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2])),
         ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2]))]


def _chain(x):
    steps = []
    for op, args in CHAIN:
        x = getattr(dm, op)(x, *args, engine="pallas")
        steps.append(x)
    return steps


def _chain_numpy(x):
    steps = []
    for op, args in CHAIN:
        x = numpy_engine(op, x, args)
        steps.append(x)
    return steps


def test_under_jit():
    data = random_data(np.random.default_rng(1), (2, 2, 4, 6), "float32")
    for got, expected in zip(jax.jit(_chain)(jnp.asarray(data)), _chain_numpy(data)):
        assert same_bits(got, expected)


@pytest.mark.parametrize("axis", [2])  # (Pallas moves it in front: one axis is as good as another)
def test_under_vmap(axis):
    data = random_data(np.random.default_rng(2), (3, 2, 2, 4, 6), "bfloat16")
    stacked = np.moveaxis(data, 0, axis)
    got = jax.jit(jax.vmap(_chain, in_axes=axis))(jnp.asarray(stacked))
    for i, expected in enumerate(zip(*[_chain_numpy(x) for x in data])):
        assert same_bits(got[i], np.stack(expected)), CHAIN[i][0]


@pytest.mark.parametrize("op, args", CHAIN, ids=[op for op, _ in CHAIN])
def test_gradient_is_the_adjoint_op(op, args):
    shape = {"space_to_depth": (2, 2, 4, 6), "depth_to_space": (2, 8, 2, 3), "space_to_batch": (2, 2, 4, 6),
             "batch_to_space": (8, 2, 3, 4)}[op]
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    out_shape = getattr(dm, op)(np.zeros(shape, np.float32), *args).shape
    weights = rng.standard_normal(out_shape).astype(np.float32)
    grad = jax.jit(jax.grad(lambda y: jnp.sum(getattr(dm, op)(y, *args, engine="pallas") * weights)))(x)
    adjoint = dm.opset.OPS[op].adjoint  # SpaceToBatch with pads = crops and back; the depth ops' other one
    assert same_bits(grad, numpy_engine(adjoint, weights, args))


def test_check_grads():
    from jax.test_util import check_grads

    x = jnp.asarray(np.random.default_rng(4).standard_normal((2, 2, 4, 6)).astype(np.float32))
    (_, s2b_args), (_, b2s_args) = CHAIN[2:]
    # reverse mode only (a custom_vjp has no forward mode), to second order: the backward is differentiable too
    # (the numerical side calls with NumPy arrays, which engine="pallas" refuses: jnp.asarray)
    check_grads(lambda y: dm.space_to_batch(jnp.asarray(y), *s2b_args, engine="pallas"), (x,), order=2, modes=["rev"])
    s2b = dm.space_to_batch(x, *s2b_args)
    check_grads(jax.vmap(lambda y: dm.batch_to_space(jnp.asarray(y), *b2s_args, engine="pallas")), (s2b[None],),
                order=1, modes=["rev"])


def test_integer_inputs_have_float0_cotangents():
    x = jnp.arange(16, dtype=jnp.int32).reshape(1, 1, 4, 4)
    y, pullback = jax.vjp(lambda t: dm.space_to_depth(t, "depth_first", 2, engine="pallas"), x)
    (grad,) = pullback(np.zeros(y.shape, jax.dtypes.float0))
    assert grad.shape == x.shape and grad.dtype == jax.dtypes.float0


@pytest.mark.parametrize("op, args", CHAIN, ids=[op for op, _ in CHAIN])
def test_lowers_to_one_triton_kernel_for_a_gpu(op, args):
    # Pallas' Triton lowering runs without a GPU: every op's kernel lowers (gathers, masks, iotas) to one call
    shape = {"depth_to_space": (2, 8, 2, 3), "batch_to_space": (8, 2, 3, 4)}.get(op, (2, 2, 4, 6))
    params = dict(zip(dm.opset.OPS[op].params, args))
    forward = pallas_engine._forward(op, pallas_engine._frozen(params), shape, np.dtype(np.float16), False)
    text = forward.trace(jax.ShapeDtypeStruct(shape, jnp.float16)).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("xla.gpu.triton") == 1


def test_route_on_the_cpu():
    x = jnp.zeros((1, 4, 2, 2), jnp.float32)
    facts = engines.facts(x)
    assert facts.pallas and not facts.cuda and facts.nbytes == 64
    assert route.route(facts) == route.Route("array_api", False)  # auto: XLA's ops on the CPU, as before
    assert route.route(engines.facts(x, "pallas")) == route.Route("pallas", False)


def test_refusals():
    with pytest.raises(DataMoveError, match=r"engine 'pallas' cannot take a numpy.ndarray; engines that can: \['numpy'"):
        dm.space_to_depth(np.zeros((1, 1, 2, 2)), "blocks_first", 2, engine="pallas")
    x = jnp.zeros((1, 4, 2, 2), jnp.int4)  # no whole byte per item
    with pytest.raises(DataMoveError, match=r"engine 'pallas' cannot take this jax.Array \(it takes JAX arrays of "
                                            r"whole-byte dtypes.*engines that can: \["):
        dm.depth_to_space(x, "blocks_first", 2, engine="pallas")
    with pytest.raises(TypeError, match="out= cannot be used with JAX arrays"):
        dm.depth_to_space(jnp.zeros((1, 4, 2, 2)), "blocks_first", 2, engine="pallas", out=jnp.zeros((1, 1, 4, 4)))


def test_auto_on_the_cpu_imports_no_pallas():
    code = ("import sys, jax.numpy as jnp, datamove as dm\n"
            "dm.space_to_depth(jnp.zeros((1, 1, 4, 4)), 'blocks_first', 2)\n"
            "print(sorted(m for m in ('jax.experimental.pallas', 'datamove.engines.pallas_kernels') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
