"""channel_permutation: DCR <-> CRD by reordering channels, for converter authors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datamove as dm

MODES = ["blocks_first", "depth_first"]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from(MODES), st.sampled_from(MODES),
       st.integers(0, 2))
def test_the_identities_for_both_ops_and_any_rank(spatial, size, depth, from_mode, to_mode, n):
    channels = depth * size**spatial
    rng = np.random.default_rng(spatial * 100 + size * 10 + depth)
    x = rng.integers(0, 1000, size=(n, channels, *[2] * spatial))
    p = dm.channel_permutation("depth_to_space", channels, size, spatial, from_mode=from_mode, to_mode=to_mode)
    assert sorted(p.tolist()) == list(range(channels)) and p.dtype == np.int64
    np.testing.assert_array_equal(dm.depth_to_space(x[:, p], to_mode, size), dm.depth_to_space(x, from_mode, size))
    back = dm.channel_permutation("depth_to_space", channels, size, spatial, from_mode=to_mode, to_mode=from_mode)
    np.testing.assert_array_equal(back, np.argsort(p))
    image = rng.integers(0, 1000, size=(n, depth, *[size * 2] * spatial))
    q = dm.channel_permutation("space_to_depth", channels, size, spatial, from_mode=from_mode, to_mode=to_mode)
    np.testing.assert_array_equal(dm.space_to_depth(image, to_mode, size)[:, q],
                                  dm.space_to_depth(image, from_mode, size))
    if from_mode == to_mode:
        np.testing.assert_array_equal(p, np.arange(channels))


def test_a_convolution_then_depth_to_space_converted_by_reordering_its_weights():
    """TensorFlow's upscaler (conv, then DCR DepthToSpace) as PyTorch's (conv, then pixel_shuffle = CRD)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    weight = torch.from_numpy(rng.integers(-3, 4, size=(12, 5, 3, 3)).astype(np.float64))
    bias = torch.from_numpy(rng.integers(-3, 4, size=12).astype(np.float64))
    x = torch.from_numpy(rng.integers(-3, 4, size=(2, 5, 7, 7)).astype(np.float64))
    dcr = dm.depth_to_space(F.conv2d(x, weight, bias, padding=1).numpy(), "blocks_first", 2)
    p = torch.from_numpy(dm.channel_permutation("depth_to_space", 12, 2, from_mode="blocks_first",
                                                to_mode="depth_first"))
    crd = F.pixel_shuffle(F.conv2d(x, weight[p], bias[p], padding=1), 2)  # pixel_shuffle is depth_first (CRD)
    np.testing.assert_array_equal(crd.numpy(), dcr)  # integer-valued float64: exact


@pytest.mark.parametrize("args, kwargs, error, match", [
    (("depth_to_space", 6, 2), {}, dm.DataMoveError, r"channels = 6 is not divisible by block_size \*\* spatial_rank = 4"),
    (("depth_to_space", 8, 0), {}, dm.DataMoveError, "block_size must be >= 1, got 0"),
    (("depth_to_space", 8, 2, 0), {}, dm.DataMoveError, "spatial_rank must be >= 1"),
    (("depth_to_space", -4, 2), {}, dm.DataMoveError, "channels must be >= 0"),
    (("pixel_shuffle", 8, 2), {}, dm.DataMoveError, "op must be 'depth_to_space' or 'space_to_depth'"),
    (("depth_to_space", 8.0, 2), {}, TypeError, "channels must be an integer"),
    (("depth_to_space", 8, True), {}, TypeError, "block_size must be an integer, got bool"),
    (("depth_to_space", 8, 2), {"from_mode": "DCR"}, dm.DataMoveError, "ONNX's DCR is 'blocks_first'"),
])
def test_bad_arguments(args, kwargs, error, match):
    modes = {"from_mode": "blocks_first", "to_mode": "depth_first", **kwargs}
    with pytest.raises(error, match=match):
        dm.channel_permutation(*args, **modes)
