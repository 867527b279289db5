"""Round trips across the front ends: which conversions between frameworks are the identity, and which are not.

These need no framework installed: they check the mode mapping of the README's table through the front
ends alone.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import datamove as dm
from datamove.compat import onnx, tensorflow, torch

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def nchw_space(draw, min_block=1):
    """(x, block): an NCHW array whose H and W divide by block."""
    block = draw(st.integers(min_block, 3))
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 3)), block * draw(st.integers(0, 3)), block * draw(st.integers(0, 3)))
    return np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape), block


def nchw_depth(space):
    x, block = space
    return onnx.space_to_depth(x, block), block


@given(nchw_space(min_block=2))
@SETTINGS
def test_onnx_dcr_depth_to_space_then_tensorflow_nchw_space_to_depth_is_identity(case):
    x, block = nchw_depth(case)
    assert np.array_equal(tensorflow.space_to_depth(onnx.depth_to_space(x, block, "DCR"), block, "NCHW"), x)


@given(nchw_space(min_block=2))
@SETTINGS
def test_tensorflow_nhwc_is_onnx_dcr_between_transposes(case):
    x, block = nchw_depth(case)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    assert np.array_equal(tensorflow.depth_to_space(nhwc, block), onnx.depth_to_space(x, block).transpose(0, 2, 3, 1))
    assert np.array_equal(tensorflow.depth_to_space(x, block, "NCHW"), onnx.depth_to_space(x, block, "DCR"))


@given(nchw_space())
@SETTINGS
def test_pixel_shuffle_is_onnx_crd_and_pixel_unshuffle_is_onnx_crd_space_to_depth(case):
    x, block = case
    assert np.array_equal(torch.pixel_unshuffle(x, block), onnx.space_to_depth(x, block, mode="CRD"))
    y = torch.pixel_unshuffle(x, block)
    assert np.array_equal(torch.pixel_shuffle(y, block), onnx.depth_to_space(y, block, "CRD"))
    # CRD undoes pixel_shuffle: the identity
    assert np.array_equal(onnx.space_to_depth(torch.pixel_shuffle(y, block), block, "CRD"), y)
    assert np.array_equal(torch.pixel_shuffle(torch.pixel_unshuffle(x, block), block), x)


@given(nchw_space(min_block=2))
@SETTINGS
def test_pixel_shuffle_then_onnx_default_space_to_depth_is_not_identity(case):
    x, block = case
    y = torch.pixel_unshuffle(x, block)
    back = onnx.space_to_depth(torch.pixel_shuffle(y, block), block)  # DCR: the classic export bug
    # The same elements, in another channel order whenever there is more than one channel to mix
    assert sorted(back.ravel().tolist()) == sorted(y.ravel().tolist())
    if x.shape[1] > 1 and x.size:
        assert not np.array_equal(back, y)
    # ... and DCR undoes exactly what DCR did
    assert np.array_equal(onnx.space_to_depth(onnx.depth_to_space(y, block), block), y)


@st.composite
def nd_case(draw):
    """(x, block, paddings) for TensorFlow's space_to_batch, M spatial dims and trailing dims."""
    m = draw(st.integers(0, 3))
    block = [draw(st.integers(1, 3)) for _ in range(m)]
    shape, paddings = [draw(st.integers(0, 2))], []
    for b in block:
        padded = b * draw(st.integers(0, 3))
        d = draw(st.integers(0, padded))
        start = draw(st.integers(0, padded - d))
        shape.append(d)
        paddings.append([start, padded - d - start])
    shape += [draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 2)))]
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape), block, paddings


@given(nd_case())
@SETTINGS
def test_tensorflow_batch_to_space_undoes_space_to_batch(case):
    x, block, paddings = case
    assert np.array_equal(tensorflow.batch_to_space(tensorflow.space_to_batch(x, block, paddings), block, paddings), x)


@given(nd_case())
@SETTINGS
def test_tensorflow_nd_is_the_core_op_with_batch_and_trailing_axes_added(case):
    x, block, paddings = case
    if x.ndim < 2:
        return
    rest = [1] * (x.ndim - 1 - len(block))
    zeros = [0] * len(rest)
    core = dm.space_to_batch(x, [1, *block, *rest], [0, *(p[0] for p in paddings), *zeros], [0, *(p[1] for p in paddings), *zeros])
    assert np.array_equal(tensorflow.space_to_batch(x, block, paddings), core)


@given(st.integers(1, 3), st.lists(st.integers(0, 2), max_size=3), st.integers(1, 2), st.integers(0, 2), st.integers(0, 2))
@SETTINGS
def test_pixel_shuffle_leading_dims_are_a_batch(factor, lead, c, h, w):
    x = np.arange(int(np.prod(lead, dtype=int)) * c * factor**2 * h * w).reshape(*lead, c * factor**2, h, w)
    flat = x.reshape((int(np.prod(lead, dtype=int)),) + x.shape[-3:])
    expected = dm.depth_to_space(flat, "depth_first", factor).reshape(*lead, c, h * factor, w * factor)
    assert np.array_equal(torch.pixel_shuffle(x, factor), expected)
    assert np.array_equal(torch.pixel_unshuffle(expected, factor), x)
