"""channel_permutation: DCR <-> CRD by reordering channels, for converter authors.

The identities (``bs = block_size``, ``p = channel_permutation(op, C, bs, K, from_mode=f, to_mode=t)``):

- depth_to_space: ``depth_to_space(x[:, p], t, bs) == depth_to_space(x, f, bs)``
- space_to_depth: ``space_to_depth(x, t, bs)[:, p] == space_to_depth(x, f, bs)``

checked bit for bit with datamove's own ops, and through convolutions (NumPy einsum, PyTorch conv2d / conv3d,
PyTorch's pixel_shuffle / pixel_unshuffle, which are depth_first).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datamove as dm

MODES = ["blocks_first", "depth_first"]
OPS = ["depth_to_space", "space_to_depth"]
DTYPES = [np.int8, np.int64, np.float32, np.float64, np.complex64]


def perm(op, channels, size, spatial=2, from_mode="blocks_first", to_mode="depth_first"):
    return dm.channel_permutation(op, channels, size, spatial, from_mode=from_mode, to_mode=to_mode)


def data(rng, shape, dtype):
    values = rng.integers(-100, 100, size=shape)
    if np.dtype(dtype).kind == "c":
        return (values + 1j * rng.integers(-100, 100, size=shape)).astype(dtype)
    return values.astype(dtype)


# -- the identities ---------------------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(spatial=st.integers(1, 4), size=st.integers(1, 4), depth=st.integers(1, 3), n=st.integers(0, 2),
       from_mode=st.sampled_from(MODES), to_mode=st.sampled_from(MODES), dtype=st.sampled_from(DTYPES),
       dims=st.lists(st.integers(1, 2), min_size=4, max_size=4), seed=st.integers(0, 2**32 - 1))
def test_the_identities_for_both_ops_any_rank_and_both_directions(spatial, size, depth, n, from_mode, to_mode,
                                                                   dtype, dims, seed):
    if size**spatial * depth > 2 * 4**3:  # rank 6 with block 4: 256 blocks; keep the arrays small
        depth = 1
    channels = depth * size**spatial
    rng = np.random.default_rng(seed)
    spatial_dims = dims[:spatial]

    p = perm("depth_to_space", channels, size, spatial, from_mode, to_mode)
    assert p.dtype == np.int64 and p.shape == (channels,)
    np.testing.assert_array_equal(np.sort(p), np.arange(channels))  # a permutation
    x = data(rng, (n, channels, *spatial_dims), dtype)  # rank spatial + 2, i.e. 3 to 6
    np.testing.assert_array_equal(dm.depth_to_space(x[:, p], to_mode, size), dm.depth_to_space(x, from_mode, size))

    q = perm("space_to_depth", channels, size, spatial, from_mode, to_mode)
    image = data(rng, (n, depth, *[d * size for d in spatial_dims]), dtype)
    np.testing.assert_array_equal(dm.space_to_depth(image, to_mode, size)[:, q],
                                  dm.space_to_depth(image, from_mode, size))

    # the inverse: argsort(p) is the permutation the other way, for both ops
    np.testing.assert_array_equal(perm("depth_to_space", channels, size, spatial, to_mode, from_mode), np.argsort(p))
    np.testing.assert_array_equal(perm("space_to_depth", channels, size, spatial, to_mode, from_mode), np.argsort(q))
    np.testing.assert_array_equal(p[np.argsort(p)], np.arange(channels))
    # SpaceToDepth undoes DepthToSpace, so its permutation is the inverse of DepthToSpace's
    np.testing.assert_array_equal(q, np.argsort(p))
    if from_mode == to_mode or size == 1 or depth == 1:  # then both modes order the channels alike
        np.testing.assert_array_equal(p, np.arange(channels))
        np.testing.assert_array_equal(q, np.arange(channels))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("spatial", [1, 2, 3, 4])
def test_the_permutation_by_its_formula(op, spatial):
    """blocks_first index b * depth + c, depth_first index c * blocks + b (b the block, c the channel)."""
    size, depth = 2, 3
    blocks = size**spatial
    p = perm(op, depth * blocks, size, spatial, "blocks_first", "depth_first")
    for b in range(blocks):
        for c in range(depth):
            if op == "depth_to_space":  # depth_first's channel c * blocks + b reads blocks_first's b * depth + c
                assert p[c * blocks + b] == b * depth + c
            else:  # blocks_first's channel b * depth + c is found at depth_first's c * blocks + b
                assert p[b * depth + c] == c * blocks + b


def test_known_values():
    np.testing.assert_array_equal(perm("depth_to_space", 8, 2), [0, 2, 4, 6, 1, 3, 5, 7])
    np.testing.assert_array_equal(perm("depth_to_space", 8, 2, from_mode="depth_first", to_mode="blocks_first"),
                                  [0, 4, 1, 5, 2, 6, 3, 7])
    np.testing.assert_array_equal(perm("space_to_depth", 6, 3, 1, "depth_first", "blocks_first"), [0, 2, 4, 1, 3, 5])
    np.testing.assert_array_equal(perm("depth_to_space", 4, 2, 2), np.arange(4))  # one channel: nothing to move
    assert perm("depth_to_space", 0, 2, 3).shape == (0,)


def test_channels_last_indexes_the_last_axis():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 100, size=(2, 3, 4, 5, 16))  # [N, D1, D2, D3, C], block 2 over 3 axes: 8 blocks, 2 channels
    p = perm("depth_to_space", 16, 2, 3)
    np.testing.assert_array_equal(dm.depth_to_space(x[..., p], "depth_first", 2, data_format="channels_last"),
                                  dm.depth_to_space(x, "blocks_first", 2, data_format="channels_last"))
    image = rng.integers(0, 100, size=(2, 4, 6, 2, 2))
    q = perm("space_to_depth", 16, 2, 3)
    np.testing.assert_array_equal(dm.space_to_depth(image, "depth_first", 2, data_format="channels_last")[..., q],
                                  dm.space_to_depth(image, "blocks_first", 2, data_format="channels_last"))


def test_a_fresh_writable_array():
    p = perm("depth_to_space", 12, 2)
    assert p.flags.writeable and p.flags.c_contiguous and p.flags.owndata
    p[:] = 0
    np.testing.assert_array_equal(perm("depth_to_space", 12, 2), [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11])


# -- converting a convolution + DepthToSpace (or SpaceToDepth + convolution) pair -----------------------------------

@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("from_mode, to_mode", [("blocks_first", "depth_first"), ("depth_first", "blocks_first")])
def test_a_1x1_convolution_then_depth_to_space_by_reordering_its_weights(spatial, from_mode, to_mode):
    rng = np.random.default_rng(spatial)
    size, depth, c_in = 2, 3, 5
    channels = depth * size**spatial
    weight = rng.integers(-3, 4, size=(channels, c_in)).astype(np.float64)  # a 1x1 conv: [C_out, C_in]
    bias = rng.integers(-3, 4, size=channels).astype(np.float64)
    x = rng.integers(-3, 4, size=(2, c_in, *[3] * spatial)).astype(np.float64)

    def conv(w, b):
        return np.einsum("oc,nc...->no...", w, x) + b.reshape(-1, *[1] * spatial)

    p = perm("depth_to_space", channels, size, spatial, from_mode, to_mode)
    before = dm.depth_to_space(conv(weight, bias), from_mode, size)
    after = dm.depth_to_space(conv(weight[p], bias[p]), to_mode, size)
    np.testing.assert_array_equal(after, before)  # integer-valued float64: exact


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_space_to_depth_then_a_1x1_convolution_by_reordering_its_input_weights(spatial):
    rng = np.random.default_rng(10 + spatial)
    size, depth, c_out = 2, 2, 4
    channels = depth * size**spatial
    weight = rng.integers(-3, 4, size=(c_out, channels)).astype(np.float64)
    x = rng.integers(-3, 4, size=(2, depth, *[4] * spatial)).astype(np.float64)

    def conv(w, y):
        return np.einsum("oc,nc...->no...", w, y)

    q = perm("space_to_depth", channels, size, spatial, "blocks_first", "depth_first")
    before = conv(weight, dm.space_to_depth(x, "blocks_first", size))
    after = conv(weight[:, np.argsort(q)], dm.space_to_depth(x, "depth_first", size))
    np.testing.assert_array_equal(after, before)


def test_a_convolution_then_depth_to_space_converted_by_reordering_its_weights():
    """TensorFlow's upscaler (conv, then DCR DepthToSpace) as PyTorch's (conv, then pixel_shuffle = CRD)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    weight = torch.from_numpy(rng.integers(-3, 4, size=(12, 5, 3, 3)).astype(np.float64))
    bias = torch.from_numpy(rng.integers(-3, 4, size=12).astype(np.float64))
    x = torch.from_numpy(rng.integers(-3, 4, size=(2, 5, 7, 7)).astype(np.float64))
    dcr = dm.depth_to_space(F.conv2d(x, weight, bias, padding=1).numpy(), "blocks_first", 2)
    p = torch.from_numpy(perm("depth_to_space", 12, 2))
    crd = F.pixel_shuffle(F.conv2d(x, weight[p], bias[p], padding=1), 2)  # pixel_shuffle is depth_first (CRD)
    np.testing.assert_array_equal(crd.numpy(), dcr)  # integer-valued float64: exact


def test_pytorch_pixel_shuffle_converted_to_blocks_first_and_float32():
    """The other way: PyTorch's conv + pixel_shuffle (CRD) as conv + DCR DepthToSpace, random float32 weights."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 3 * 9, 3, padding=1)  # block 3: 9 blocks of 3 channels
    x = torch.randn(2, 4, 5, 6)
    with torch.no_grad():
        crd = F.pixel_shuffle(conv(x), 3)
        p = torch.from_numpy(perm("depth_to_space", 27, 3, from_mode="depth_first", to_mode="blocks_first"))
        y = F.conv2d(x, conv.weight[p], conv.bias[p], padding=1)
    dcr = dm.depth_to_space(y.numpy(), "blocks_first", 3)
    np.testing.assert_allclose(dcr, crd.numpy(), rtol=1e-6, atol=1e-6)


def test_a_3d_convolution_then_depth_to_space():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    weight = torch.from_numpy(rng.integers(-3, 4, size=(16, 3, 3, 3, 3)).astype(np.float64))  # 8 blocks x 2
    bias = torch.from_numpy(rng.integers(-3, 4, size=16).astype(np.float64))
    x = torch.from_numpy(rng.integers(-3, 4, size=(1, 3, 4, 5, 3)).astype(np.float64))
    p = torch.from_numpy(perm("depth_to_space", 16, 2, 3))
    dcr = dm.depth_to_space(F.conv3d(x, weight, bias, padding=1).numpy(), "blocks_first", 2)
    crd = dm.depth_to_space(F.conv3d(x, weight[p], bias[p], padding=1).numpy(), "depth_first", 2)
    np.testing.assert_array_equal(crd, dcr)


def test_pytorch_pixel_shuffle_and_unshuffle_are_depth_first():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    for size in (1, 2, 3):
        x = rng.integers(-100, 100, size=(2, 2 * size * size, 3, 4))
        np.testing.assert_array_equal(F.pixel_shuffle(torch.from_numpy(x), size).numpy(),
                                      dm.depth_to_space(x, "depth_first", size))
        p = perm("depth_to_space", x.shape[1], size)
        np.testing.assert_array_equal(F.pixel_shuffle(torch.from_numpy(x[:, p]), size).numpy(),
                                      dm.depth_to_space(x, "blocks_first", size))
        image = rng.integers(-100, 100, size=(2, 3, 2 * size, 3 * size))
        np.testing.assert_array_equal(F.pixel_unshuffle(torch.from_numpy(image), size).numpy(),
                                      dm.space_to_depth(image, "depth_first", size))
        q = perm("space_to_depth", 3 * size * size, size)
        np.testing.assert_array_equal(F.pixel_unshuffle(torch.from_numpy(image), size).numpy()[:, q],
                                      dm.space_to_depth(image, "blocks_first", size))


# -- arguments --------------------------------------------------------------------------------------------------------

def test_numpy_integers_and_positional_defaults():
    np.testing.assert_array_equal(dm.channel_permutation("depth_to_space", np.int16(8), np.uint8(2),
                                                         from_mode="blocks_first", to_mode="depth_first"),
                                  [0, 2, 4, 6, 1, 3, 5, 7])  # spatial_rank defaults to 2
    np.testing.assert_array_equal(perm("depth_to_space", np.array(8), 2, np.int64(1)), [0, 4, 1, 5, 2, 6, 3, 7])


@pytest.mark.parametrize("args, kwargs, error, match", [
    (("depth_to_space", 6, 2), {}, dm.DataMoveError, r"channels = 6 is not divisible by block_size \*\* spatial_rank = 4$"),
    (("space_to_depth", 12, 2, 3), {}, dm.DataMoveError, r"channels = 12 is not divisible by block_size \*\* spatial_rank = 8"),
    (("depth_to_space", 8, 2, 2**62), {}, dm.DataMoveError, r"not divisible by block_size \*\* spatial_rank = 2 \*\* 4611686018427387904 \(which exceeds channels\)"),
    (("depth_to_space", 8, 10**9, 5), {}, dm.DataMoveError, r"block_size \*\* spatial_rank = 1000000000 \*\* 5"),
    (("depth_to_space", 8, 2, 2**64), {}, dm.DataMoveError, "spatial_rank = 18446744073709551616 does not fit in int64"),
    (("depth_to_space", 2**62, 1), {}, dm.DataMoveError, "channels = 4611686018427387904 is too many"),
    (("depth_to_space", 8, 0), {}, dm.DataMoveError, "block_size must be >= 1, got 0"),
    (("depth_to_space", 8, -2), {}, dm.DataMoveError, "block_size must be >= 1, got -2"),
    (("depth_to_space", 8, 2, 0), {}, dm.DataMoveError, r"spatial_rank must be >= 1 \(the data's rank minus 2\), got 0"),
    (("depth_to_space", 8, 2, -1), {}, dm.DataMoveError, "spatial_rank must be >= 1"),
    (("depth_to_space", -4, 2), {}, dm.DataMoveError, "channels must be >= 0, got -4"),
    (("pixel_shuffle", 8, 2), {}, dm.DataMoveError, "op must be 'depth_to_space' or 'space_to_depth', got 'pixel_shuffle'"),
    ((None, 8, 2), {}, TypeError, "op must be a string, 'depth_to_space' or 'space_to_depth', got NoneType"),
    ((["depth_to_space"], 8, 2), {}, TypeError, "op must be a string"),
    (("depth_to_space", 8.0, 2), {}, TypeError, "channels must be an integer, got float 8.0"),
    (("depth_to_space", "8", 2), {}, TypeError, "channels must be an integer"),
    (("depth_to_space", 8, True), {}, TypeError, "block_size must be an integer, got bool"),
    (("depth_to_space", 8, 2.0), {}, TypeError, "block_size must be an integer, got float 2.0"),
    (("depth_to_space", 8, np.float64(2)), {}, TypeError, "block_size must be an integer"),
    (("depth_to_space", 8, 2, True), {}, TypeError, "spatial_rank must be an integer, got bool"),
    (("depth_to_space", 8, 2, np.bool_(True)), {}, TypeError, "spatial_rank must be an integer, got bool"),
    (("depth_to_space", 8, 2, 2.5), {}, TypeError, "spatial_rank must be an integer, got float 2.5"),
    (("depth_to_space", None, 2), {}, TypeError, "channels is required, got None"),
    (("depth_to_space", 8, None), {}, TypeError, "block_size is required, got None"),
    (("depth_to_space", 8, 2, None), {}, TypeError, "spatial_rank is required, got None"),
    (("depth_to_space", 8, 2), {"from_mode": None}, TypeError, "from_mode is required, got None"),
    (("depth_to_space", 8, 2), {"to_mode": None}, TypeError, "to_mode is required, got None"),
    (("depth_to_space", 8, 2), {"from_mode": "DCR"}, dm.DataMoveError,
     "from_mode must be 'blocks_first' or 'depth_first', got 'DCR' \\(ONNX's DCR is 'blocks_first'\\)"),
    (("depth_to_space", 8, 2), {"to_mode": "crd"}, dm.DataMoveError, "to_mode .* \\(ONNX's CRD is 'depth_first'\\)"),
    (("depth_to_space", 8, 2), {"to_mode": "Depth_First"}, dm.DataMoveError, "to_mode .*\\(did you mean 'depth_first'\\?\\)"),
    (("depth_to_space", 8, 2), {"from_mode": 1}, TypeError, "from_mode must be a string, 'blocks_first' or 'depth_first', got int 1"),
])
def test_bad_arguments(args, kwargs, error, match):
    modes = {"from_mode": "blocks_first", "to_mode": "depth_first", **kwargs}
    start = time.perf_counter()
    with pytest.raises(error, match=match):
        dm.channel_permutation(*args, **modes)
    assert time.perf_counter() - start < 1  # 2 ** (2 ** 62) is never computed


def test_the_modes_are_keyword_only_and_required():
    with pytest.raises(TypeError, match="to_mode"):
        dm.channel_permutation("depth_to_space", 8, 2, from_mode="blocks_first")
    with pytest.raises(TypeError):
        dm.channel_permutation("depth_to_space", 8, 2, 2, "blocks_first", "depth_first")


def test_exported():
    assert "channel_permutation" in dm.__all__
    assert dm.channel_permutation.__module__ == "datamove.rules.permutations"
