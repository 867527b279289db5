"""data_format="channels_last" on the depth ops: [N, D_1, ..., D_K, C], in place of the spec's [N, C, D_1, ...]."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datamove as dm
from datamove.rules import shapes

OPS = {"space_to_depth": dm.space_to_depth, "depth_to_space": dm.depth_to_space}


def by_channels_first(op, x, mode, size):
    """The spec's op on the channels moved to axis 1, then moved back: what channels_last means."""
    return np.moveaxis(OPS[op](np.ascontiguousarray(np.moveaxis(x, -1, 1)), mode, size), 1, -1)


@st.composite
def cases(draw):
    op = draw(st.sampled_from(sorted(OPS)))
    spatial = draw(st.integers(1, 3))
    size = draw(st.integers(1, 3))
    mode = draw(st.sampled_from(["blocks_first", "depth_first"]))
    channels = draw(st.integers(1, 3)) * (size**spatial if op == "depth_to_space" else 1)
    dims = [draw(st.integers(0, 2)) * (size if op == "space_to_depth" else 1) for _ in range(spatial)]
    dtype = draw(st.sampled_from([np.uint8, np.float32, np.int64, np.complex128]))
    n = draw(st.integers(0, 3))
    x = np.arange(n * channels * int(np.prod(dims)), dtype=np.int64).astype(dtype).reshape(n, *dims, channels)
    return op, x, mode, size


@settings(max_examples=150, deadline=None)
@given(cases(), st.sampled_from(["auto", "numpy", "native"]))
def test_channels_last_is_the_op_on_the_channels_moved(case, engine):
    op, x, mode, size = case
    expected = by_channels_first(op, x, mode, size)
    got = OPS[op](x, mode, size, data_format="channels_last", engine=engine)
    assert got.shape == expected.shape == shapes.__dict__[op](x.shape, mode, size, "channels_last")
    assert got.flags.c_contiguous and got.dtype == x.dtype
    np.testing.assert_array_equal(got, expected)
    out = np.full(expected.shape, 7, x.dtype)
    assert OPS[op](x, mode, size, data_format="channels_last", out=out, engine=engine) is out
    np.testing.assert_array_equal(out, expected)


def test_strided_inputs_and_outputs():
    x = np.arange(2 * 8 * 12 * 6, dtype=np.float32).reshape(2, 8, 12, 6)
    view = x[:, ::2, ::-1, 1:5]  # (2, 4, 12, 4), no contiguity at all
    expected = by_channels_first("space_to_depth", view, "depth_first", 2)
    out = np.zeros((2, 2, 12, 32), np.float32)[:, :, ::2, 8:24]
    dm.space_to_depth(view, "depth_first", 2, data_format="channels_last", out=out)
    np.testing.assert_array_equal(out, expected)


def test_round_trip_and_the_keras_convention():
    x = np.random.default_rng(0).standard_normal((3, 6, 4, 12)).astype(np.float32)  # NHWC
    for mode in ("blocks_first", "depth_first"):
        y = dm.depth_to_space(x, mode, 2, data_format="channels_last")
        assert y.shape == (3, 12, 8, 3)
        np.testing.assert_array_equal(dm.space_to_depth(y, mode, 2, data_format="channels_last"), x)
    tf = pytest.importorskip("tensorflow")  # Keras' depth_to_space is TensorFlow's: NHWC, blocks first (DCR)
    np.testing.assert_array_equal(dm.depth_to_space(x, "blocks_first", 2, data_format="channels_last"),
                                  tf.nn.depth_to_space(x, 2).numpy())


def test_shapes_with_intervals_and_messages_name_the_axes_given():
    assert shapes.space_to_depth((None, dm.Dim(4, 8), 6, 3), "blocks_first", 2, "channels_last") == \
        (None, dm.Dim(2, 4), 3, 12)
    assert shapes.depth_to_space(None, "depth_first", 2, data_format="channels_last") is None
    with pytest.raises(dm.DataMoveError, match=r"data.shape\[3\] = 6 is not divisible by block_size \*\* 2 = 4"):
        dm.depth_to_space(np.zeros((1, 2, 2, 6)), "blocks_first", 2, data_format="channels_last")
    with pytest.raises(dm.DataMoveError, match=r"data.shape\[2\] = 3 is not divisible by block_size = 2"):
        dm.space_to_depth(np.zeros((1, 4, 3, 5)), "blocks_first", 2, data_format="channels_last")
    with pytest.raises(dm.DataMoveError, match="out.shape must be the output shape"):
        dm.space_to_depth(np.zeros((1, 4, 4, 5)), "blocks_first", 2, data_format="channels_last",
                          out=np.zeros((1, 20, 2, 2)))


@pytest.mark.parametrize("value, error, match", [
    ("NHWC", dm.DataMoveError, r"data_format must be 'channels_first' or 'channels_last', got 'NHWC' \(NHWC is 'channels_last'\)"),
    ("channels-last", dm.DataMoveError, "data_format must be 'channels_first' or 'channels_last'"),
    (None, TypeError, "data_format must be a string"),
    (1, TypeError, "data_format must be a string"),
])
def test_bad_data_formats(value, error, match):
    for call in (lambda: dm.space_to_depth(np.zeros((1, 2, 2, 1)), "blocks_first", 2, data_format=value),
                 lambda: shapes.depth_to_space((1, 4, 1, 1), "blocks_first", 2, data_format=value)):
        with pytest.raises(error, match=match):
            call()


def test_torch_tensors_keep_their_channels_last_layout_and_gradients():
    torch = pytest.importorskip("torch")
    for shape in ((2, 4, 6, 8), (2, 4, 8), (1, 2, 4, 6, 8)):
        x = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape)
        for op in OPS:
            size = 2
            if op == "depth_to_space":
                x = x.reshape(*shape[:-1], -1)
            expected = by_channels_first(op, x.numpy(), "depth_first", size)
            got = OPS[op](x, "depth_first", size, data_format="channels_last")
            assert isinstance(got, torch.Tensor) and got.is_contiguous()
            np.testing.assert_array_equal(got.numpy(), expected)
            leaf = x.clone().requires_grad_()
            result = OPS[op](leaf, "blocks_first", size, data_format="channels_last")
            (result * torch.arange(result.numel(), dtype=torch.float64).reshape(result.shape)).sum().backward()
            # the gradient of a permutation is the inverse permutation of the weights
            weights = np.arange(result.numel(), dtype=np.float64).reshape(result.shape)
            inverse = "space_to_depth" if op == "depth_to_space" else "depth_to_space"
            np.testing.assert_array_equal(leaf.grad.numpy(), by_channels_first(inverse, weights, "blocks_first", size))


def test_jax_arrays():
    jnp = pytest.importorskip("jax.numpy")
    x = np.arange(2 * 4 * 6 * 3, dtype=np.float32).reshape(2, 4, 6, 3)
    got = dm.space_to_depth(jnp.asarray(x), "blocks_first", 2, data_format="channels_last")
    np.testing.assert_array_equal(np.asarray(got), by_channels_first("space_to_depth", x, "blocks_first", 2))
