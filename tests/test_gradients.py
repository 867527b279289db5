"""Gradients through the generic path: PyTorch autograd and JAX, and that each backward is the adjoint op."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datamove as dm
from strategies import depth_case, space_batch_case

# (op, args, adjoint op, adjoint args): space_to_batch <-> batch_to_space with pads = crops,
# space_to_depth <-> depth_to_space with the same mode.
CASES = [
    ((2, 3, 5), "space_to_batch", ([1, 2, 3], [0, 1, 0], [0, 0, 1])),
    ((8, 1, 3, 2), "batch_to_space", ([1, 2, 2, 1], [0, 1, 2, 0], [0, 0, 1, 1])),
    ((1, 2, 4, 2), "space_to_depth", ("blocks_first", 2)),
    ((2, 3, 2, 4), "space_to_depth", ("depth_first", 2)),
    ((1, 8, 1, 2), "depth_to_space", ("blocks_first", 2)),
    ((1, 9, 2, 1), "depth_to_space", ("depth_first", 3)),
    ((1, 1, 2, 2, 2), "space_to_depth", ("blocks_first", 2)),
]
ADJOINT = {
    "space_to_batch": "batch_to_space",
    "batch_to_space": "space_to_batch",
    "space_to_depth": "depth_to_space",
    "depth_to_space": "space_to_depth",
}


def adjoint(op, cotangent, args):
    """The adjoint op applied to ``cotangent`` (NumPy)."""
    return getattr(dm, ADJOINT[op])(cotangent, *args)


def ids(case):
    return f"{case[1]}-{case[0]}-{case[2][0]}"


# ------------------------------------------------------------------ PyTorch


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_torch_gradcheck(case):
    torch = pytest.importorskip("torch")
    shape, op, args = case
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    f = lambda t: getattr(dm, op)(t, *args)  # noqa: E731
    assert f(x).grad_fn is not None  # the generic path, on the autograd graph
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


def _torch_adjoint_holds(torch, op, shape, args, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, dtype=torch.float32, generator=g, requires_grad=True)
    y = getattr(dm, op)(x, *args)
    cotangent = torch.randn(*y.shape, dtype=torch.float32, generator=g)
    (grad,) = torch.autograd.grad(y, x, cotangent, allow_unused=True)
    if grad is None:  # an empty tensor: nothing flows
        assert x.numel() == 0
        return
    expected = adjoint(op, cotangent.numpy(), args)
    assert grad.numpy().tobytes() == expected.tobytes()  # exact: a permutation plus zeros


@settings(max_examples=40, deadline=None)
@given(case=space_batch_case(max_rank=5, max_size=300), seed=st.integers(0, 2**31))
def test_torch_backward_is_the_adjoint_for_space_batch(case, seed):
    torch = pytest.importorskip("torch")
    shape, block, begin, end = case
    _torch_adjoint_holds(torch, "space_to_batch", shape, (block, begin, end), seed)
    out_shape = dm.shapes.space_to_batch(shape, block, begin, end)
    _torch_adjoint_holds(torch, "batch_to_space", out_shape, (block, begin, end), seed)


@settings(max_examples=40, deadline=None)
@given(case=depth_case(max_rank=5, max_size=300), seed=st.integers(0, 2**31))
def test_torch_backward_is_the_adjoint_for_depth(case, seed):
    torch = pytest.importorskip("torch")
    shape, mode, size = case
    _torch_adjoint_holds(torch, "space_to_depth", shape, (mode, size), seed)
    out_shape = dm.shapes.space_to_depth(shape, mode, size)
    _torch_adjoint_holds(torch, "depth_to_space", out_shape, (mode, size), seed)


def test_torch_out_keeps_the_graph():
    torch = pytest.importorskip("torch")
    x = torch.randn(1, 4, 2, 2, dtype=torch.float64, requires_grad=True)
    out = torch.empty(1, 1, 4, 4, dtype=torch.float64)
    dm.depth_to_space(x, "depth_first", 2, out=out)
    assert out.grad_fn is not None
    (out * torch.arange(16.0, dtype=torch.float64).reshape(1, 1, 4, 4)).sum().backward()
    expected = dm.space_to_depth(np.arange(16.0).reshape(1, 1, 4, 4), "depth_first", 2)
    assert np.array_equal(x.grad.numpy(), expected)


def test_torch_no_grad_takes_the_zero_copy_path():
    torch = pytest.importorskip("torch")
    x = torch.randn(1, 4, 2, 2, requires_grad=True)
    with torch.no_grad():
        y = dm.depth_to_space(x, "depth_first", 2)
    assert y.grad_fn is None and not y.requires_grad


# ------------------------------------------------------------------ JAX


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_jax_check_grads_and_adjoint(case):
    jax = pytest.importorskip("jax")
    from jax.test_util import check_grads

    shape, op, args = case
    x = jax.random.normal(jax.random.PRNGKey(0), shape)
    f = lambda t: getattr(dm, op)(t, *args)  # noqa: E731
    check_grads(f, (x,), order=1, modes=("fwd", "rev"))
    y, vjp = jax.vjp(f, x)
    cotangent = jax.random.normal(jax.random.PRNGKey(1), y.shape)
    (grad,) = vjp(cotangent)
    assert np.asarray(grad).tobytes() == adjoint(op, np.asarray(cotangent), args).tobytes()


def test_jax_jit_with_static_parameters():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(2 * 4 * 4 * 6, dtype=jnp.float32).reshape(2, 4, 4, 6)
    expected = dm.space_to_depth(np.asarray(x), "blocks_first", 2)

    f = jax.jit(lambda t: dm.space_to_depth(t, "blocks_first", 2))
    assert np.array_equal(np.asarray(f(x)), expected)
    # All four ops and their gradients under one jit (one compile).
    def chain(t):
        t = dm.space_to_depth(t, "blocks_first", 2)
        t = dm.depth_to_space(t, "depth_first", 2)
        t = dm.space_to_batch(t, [1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 0])
        t = dm.batch_to_space(t, [1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 0])
        return (t * t).sum()

    value, grad = jax.jit(jax.value_and_grad(chain))(x)
    assert float(value) == float((np.asarray(x) ** 2).sum())
    assert np.array_equal(np.asarray(grad), 2 * np.asarray(x))
