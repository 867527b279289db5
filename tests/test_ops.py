"""The four operations on NumPy: spec examples, properties, dtypes, layouts, ``out=``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datamove as dm
import reference as ref
from strategies import depth_case, space_batch_case

ml_dtypes = pytest.importorskip("ml_dtypes")


def assert_bits_equal(got, expected):
    """Same shape, same dtype, same bytes (object arrays: the same objects)."""
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    if got.dtype.hasobject:
        assert all(a is b for a, b in zip(got.ravel().tolist(), expected.ravel().tolist()))
    else:
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes()


# ------------------------------------------------------------------ spec examples


def test_batch_to_space_spec_2d_example():
    data = np.arange(20).reshape(10, 2)
    out = dm.batch_to_space(data, [1, 5], [0, 2], [0, 0])
    assert out.shape == (2, 8)
    # batch row b*2 + n holds block offset b of output row n
    assert out.tolist() == [[8, 12, 16, 1, 5, 9, 13, 17], [10, 14, 18, 3, 7, 11, 15, 19]]


def test_batch_to_space_spec_5d_example():
    data = np.arange(48 * 3 * 3 * 1 * 3).reshape(48, 3, 3, 1, 3)
    args = ([1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0])
    out = dm.batch_to_space(data, *args)
    assert out.shape == (2, 6, 10, 3, 3)
    assert_bits_equal(out, ref.batch_to_space(data, *args))


def test_space_to_batch_spec_example():
    data = np.arange(2 * 6 * 10 * 3 * 3, dtype=np.float32).reshape(2, 6, 10, 3, 3)
    args = ([1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0])
    out = dm.space_to_batch(data, *args)
    assert out.shape == (48, 3, 3, 1, 3)
    assert_bits_equal(out, ref.space_to_batch(data, *args))
    assert_bits_equal(dm.batch_to_space(out, *args), data)


def test_space_to_depth_spec_example():
    data = np.arange(5 * 7 * 4 * 6).reshape(5, 7, 4, 6)
    for mode in ("blocks_first", "depth_first"):
        out = dm.space_to_depth(data, mode, 2)
        assert out.shape == (5, 28, 2, 3)
        assert_bits_equal(out, ref.space_to_depth(data, mode, 2))


def test_depth_to_space_onnx_example():
    # The ONNX DepthToSpace operator examples: DCR = blocks_first, CRD = depth_first.
    x = np.arange(48, dtype=np.float32).reshape(1, 8, 2, 3)
    assert dm.depth_to_space(x, "blocks_first", 2).tolist() == [[
        [[0, 12, 1, 13, 2, 14], [24, 36, 25, 37, 26, 38], [3, 15, 4, 16, 5, 17], [27, 39, 28, 40, 29, 41]],
        [[6, 18, 7, 19, 8, 20], [30, 42, 31, 43, 32, 44], [9, 21, 10, 22, 11, 23], [33, 45, 34, 46, 35, 47]],
    ]]
    assert dm.depth_to_space(x, "depth_first", 2).tolist() == [[
        [[0, 6, 1, 7, 2, 8], [12, 18, 13, 19, 14, 20], [3, 9, 4, 10, 5, 11], [15, 21, 16, 22, 17, 23]],
        [[24, 30, 25, 31, 26, 32], [36, 42, 37, 43, 38, 44], [27, 33, 28, 34, 29, 35], [39, 45, 40, 46, 41, 47]],
    ]]


def test_space_to_depth_onnx_example():
    # ONNX SpaceToDepth (no mode, blocks_first order), blocksize 2.
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert dm.space_to_depth(x, "blocks_first", 2)[0].tolist() == [
        [[0, 2], [8, 10]], [[1, 3], [9, 11]], [[4, 6], [12, 14]], [[5, 7], [13, 15]]]


def test_depth_to_space_modes_differ_for_more_than_one_channel():
    x = np.arange(16).reshape(1, 16, 1, 1)
    dcr = dm.depth_to_space(x, "blocks_first", 2)[0, :, :, :]
    crd = dm.depth_to_space(x, "depth_first", 2)[0, :, :, :]
    assert dcr[0].tolist() == [[0, 4], [8, 12]]  # y[c, i, j] = x[(i*2 + j)*4 + c]
    assert crd[0].tolist() == [[0, 1], [2, 3]]  # y[c, i, j] = x[c*4 + i*2 + j]


# The four worked examples of TensorFlow's batch_to_space (seed 002): NHWC with
# M = 2 spatial dims, so OpenVINO's form is block [1, 2, 2, 1], crops [0, c, c', 0].
TF_EXAMPLES = [
    (
        [[[[1]]], [[[2]]], [[[3]]], [[[4]]]],
        [[0, 0], [0, 0]],
        [[[[1], [2]], [[3], [4]]]],
    ),
    (
        [[[[1, 2, 3]]], [[[4, 5, 6]]], [[[7, 8, 9]]], [[[10, 11, 12]]]],
        [[0, 0], [0, 0]],
        [[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]],
    ),
    (
        [[[[1], [3]], [[9], [11]]], [[[2], [4]], [[10], [12]]],
         [[[5], [7]], [[13], [15]]], [[[6], [8]], [[14], [16]]]],
        [[0, 0], [0, 0]],
        [[[[1], [2], [3], [4]], [[5], [6], [7], [8]], [[9], [10], [11], [12]], [[13], [14], [15], [16]]]],
    ),
    (
        [[[[0], [1], [3]]], [[[0], [9], [11]]], [[[0], [2], [4]]], [[[0], [10], [12]]],
         [[[0], [5], [7]]], [[[0], [13], [15]]], [[[0], [6], [8]]], [[[0], [14], [16]]]],
        [[0, 0], [2, 0]],
        [[[[1], [2], [3], [4]], [[5], [6], [7], [8]]], [[[9], [10], [11], [12]], [[13], [14], [15], [16]]]],
    ),
]


@pytest.mark.parametrize("data, crops, expected", TF_EXAMPLES, ids=["tf1", "tf2", "tf3", "tf4"])
def test_tensorflow_batch_to_space_examples(data, crops, expected):
    data = np.array(data, dtype=np.int32)
    begin = [0, crops[0][0], crops[1][0], 0]
    end = [0, crops[0][1], crops[1][1], 0]
    out = dm.batch_to_space(data, [1, 2, 2, 1], begin, end)
    assert out.tolist() == expected
    assert out.dtype == np.int32
    # and back: space_to_batch with pads = crops restores the input
    assert_bits_equal(dm.space_to_batch(out, [1, 2, 2, 1], begin, end), data)


# ------------------------------------------------------------------ properties


@settings(max_examples=300, deadline=None)
@given(space_batch_case(), st.sampled_from([np.int64, np.uint8, np.float16, np.complex128]))
def test_space_to_batch_matches_spec_formula_and_round_trips(case, dtype):
    shape, block, begin, end = case
    data = np.random.default_rng(len(shape)).integers(1, 100, shape).astype(dtype)
    batched = dm.space_to_batch(data, block, begin, end)
    assert_bits_equal(batched, ref.space_to_batch(data, block, begin, end))
    assert batched.flags.c_contiguous
    assert_bits_equal(dm.batch_to_space(batched, block, begin, end), data)
    assert_bits_equal(ref.batch_to_space(batched, block, begin, end), data)


@settings(max_examples=300, deadline=None)
@given(space_batch_case(), st.data())
def test_batch_to_space_matches_spec_formula(case, draw):
    # batch_to_space on arbitrary data (not only space_to_batch outputs), any crops.
    shape, block, _, _ = case
    in_shape = [shape[0] * int(np.prod(block))] + list(shape[1:])
    begin, end = [0], [0]
    for d, b in zip(shape[1:], block[1:]):
        total = draw.draw(st.integers(0, d * b))
        first = draw.draw(st.integers(0, total))
        begin.append(first)
        end.append(total - first)
    data = np.arange(int(np.prod(in_shape)), dtype=np.int32).reshape(in_shape)
    assert_bits_equal(dm.batch_to_space(data, block, begin, end), ref.batch_to_space(data, block, begin, end))


@settings(max_examples=300, deadline=None)
@given(depth_case(), st.sampled_from([np.int32, np.bool_, np.float64, "U2"]))
def test_depth_ops_match_spec_formula_and_round_trip(case, dtype):
    shape, mode, size = case
    data = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    moved = dm.space_to_depth(data, mode, size)
    assert_bits_equal(moved, ref.space_to_depth(data, mode, size))
    back = dm.depth_to_space(moved, mode, size)
    assert_bits_equal(back, data)
    assert_bits_equal(ref.depth_to_space(moved, mode, size), data)


@settings(max_examples=150, deadline=None)
@given(depth_case(max_rank=5))
def test_depth_to_space_on_arbitrary_data_matches_spec(case):
    shape, mode, size = case
    spatial = len(shape) - 2
    in_shape = (shape[0], shape[1] * size**spatial) + tuple(d // size for d in shape[2:])
    data = np.arange(int(np.prod(in_shape)), dtype=np.int16).reshape(in_shape)
    assert_bits_equal(dm.depth_to_space(data, mode, size), ref.depth_to_space(data, mode, size))


def test_rank_seven_all_ops():
    rng = np.random.default_rng(7)
    data = rng.integers(0, 1000, (2, 2, 3, 2, 4, 1, 2))
    block, pads_b, pads_e = [1, 2, 1, 2, 2, 3, 1], [0, 1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1, 0]
    batched = dm.space_to_batch(data, block, pads_b, pads_e)
    assert_bits_equal(batched, ref.space_to_batch(data, block, pads_b, pads_e))
    assert_bits_equal(dm.batch_to_space(batched, block, pads_b, pads_e), data)
    for mode in ("blocks_first", "depth_first"):
        data = rng.integers(0, 1000, (1, 3, 2, 2, 4, 2, 2))
        moved = dm.space_to_depth(data, mode, 2)
        assert moved.shape == (1, 96, 1, 1, 2, 1, 1)
        assert_bits_equal(moved, ref.space_to_depth(data, mode, 2))
        assert_bits_equal(dm.depth_to_space(moved, mode, 2), data)


# ------------------------------------------------------------------ dtypes

def _random_array(dtype, shape, seed=0):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape))
    if dtype.hasobject:
        items = [object(), None, 1, "a", (2,), 3.5] * (count // 6 + 1)
        array = np.empty(count, dtype)
        array[:] = items[:count]
        return array.reshape(shape)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    raw = rng.integers(0, 256, count * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


STRUCT = np.dtype([("a", "<i4"), ("b", "u1"), ("c", "<f8", (2,))])
DTYPES = [
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64, np.longdouble, np.complex64, np.complex128,
    ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4, ml_dtypes.uint4,
    "S5", "U3", "datetime64[ns]", "timedelta64[s]", STRUCT, ">f4", ">i8", "V3", object,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space"])
def test_every_dtype_bit_for_bit(op, dtype):
    if op in ("space_to_depth", "depth_to_space"):
        shape, args = (2, 4, 4, 2), ("depth_first", 2)
        if op == "space_to_depth":
            args = ("blocks_first", 2)
    elif op == "batch_to_space":
        shape, args = (8, 3, 2), ([1, 2, 2], [0, 1, 0], [0, 2, 1])
    else:
        shape, args = (2, 3, 2), ([1, 2, 3], [0, 1, 0], [0, 0, 1])
    data = _random_array(dtype, shape)
    got = getattr(dm, op)(data, *args)
    expected = getattr(ref, op)(data, *args)
    assert_bits_equal(got, expected)
    assert got.dtype == np.dtype(dtype)


def test_nan_payloads_and_negative_zero_kept():
    bits = np.array([0x7FC00001, 0x7F800001, 0xFFC12345, 0x80000000, 0x7FBFFFFF, 0x00000001, 0, 0x3F800000],
                    dtype=np.uint32)
    data = bits.view(np.float32).reshape(1, 2, 2, 2)
    for mode in ("blocks_first", "depth_first"):
        out = dm.space_to_depth(data, mode, 2)
        assert sorted(out.view(np.uint32).ravel().tolist()) == sorted(bits.tolist())
        assert_bits_equal(dm.depth_to_space(out, mode, 2), data)


@pytest.mark.parametrize(
    "dtype, zero",
    [(np.bool_, False), (np.int16, 0), (np.float64, 0.0), ("U4", ""), ("S2", b""), (object, 0),
     ("datetime64[D]", np.datetime64(0, "D")), (ml_dtypes.bfloat16, 0)],
    ids=str,
)
def test_space_to_batch_pads_with_the_dtype_zero(dtype, zero):
    kind = np.dtype(dtype).kind
    if kind == "M":
        data = np.array([["2020-01-01", "2021-01-01"]], dtype)
    elif kind in "US":
        data = np.array([["ab", "cd"]], dtype)
    else:
        data = np.ones((1, 2), dtype=dtype)
    out = dm.space_to_batch(data, [1, 2], [0, 1], [0, 1])
    assert out.shape == (2, 2)
    assert out[0, 0] == zero and out[1, 1] == zero
    if not out.dtype.hasobject:
        assert out.view(np.uint8).reshape(2, 2, -1)[0, 0].tolist() == [0] * out.dtype.itemsize
    assert out[1, 0] == data[0, 0] and out[0, 1] == data[0, 1]


# ------------------------------------------------------------------ layouts


def _layouts():
    base = np.arange(2 * 4 * 6 * 6, dtype=np.float32).reshape(2, 4, 6, 6)
    readonly = base.copy()
    readonly.flags.writeable = False
    records = np.zeros(base.shape, dtype=[("pad", "u1"), ("x", "<f4")])  # unaligned field view
    records["x"] = base
    return {
        "c": base,
        "fortran": np.asfortranarray(base),
        "sliced": np.arange(4 * 8 * 12 * 6, dtype=np.float32).reshape(4, 8, 12, 6)[::2, 1::2, ::2, :],
        "negative": base[::-1, :, ::-1, :],
        "transposed": base.transpose(0, 1, 3, 2),
        "readonly": readonly,
        "big_endian": base.astype(">f4"),
        "broadcast": np.broadcast_to(np.arange(6, dtype=np.float32), (2, 4, 6, 6)),
        "unaligned_field": records["x"],
    }


@pytest.mark.parametrize("layout", list(_layouts()))
def test_any_memory_layout(layout):
    data = _layouts()[layout]
    contiguous = np.ascontiguousarray(data)
    cases = [
        ("space_to_depth", ("blocks_first", 2)),
        ("space_to_depth", ("depth_first", 3)),
        ("depth_to_space", ("blocks_first", 2)),
        ("depth_to_space", ("depth_first", 2)),
        ("batch_to_space", ([1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 2, 0])),
        ("space_to_batch", ([1, 2, 4, 3], [0, 0, 1, 1], [0, 2, 1, 2])),
    ]
    for op, args in cases:
        got = getattr(dm, op)(data, *args)
        assert got.flags.c_contiguous and got.flags.writeable
        assert_bits_equal(got, getattr(ref, op)(contiguous, *args))


def test_memmap_input_and_out(tmp_path):
    data = np.lib.format.open_memmap(tmp_path / "in.npy", mode="w+", dtype=np.int32, shape=(4, 2, 6))
    data[...] = np.arange(48).reshape(4, 2, 6)
    out = np.lib.format.open_memmap(tmp_path / "out.npy", mode="w+", dtype=np.int32, shape=(1, 4, 12))
    result = dm.batch_to_space(data, [1, 2, 2], [0, 0, 0], [0, 0, 0], out=out)
    assert result is out
    out.flush()
    assert_bits_equal(np.load(tmp_path / "out.npy"), ref.batch_to_space(np.asarray(data), [1, 2, 2], [0] * 3, [0] * 3))


# ------------------------------------------------------------------ out=


def test_out_is_filled_and_returned():
    data = np.arange(32, dtype=np.int64).reshape(2, 4, 2, 2)
    out = np.full((2, 1, 4, 4), -1, np.int64)
    result = dm.depth_to_space(data, "blocks_first", 2, out=out)
    assert result is out
    assert_bits_equal(out, ref.depth_to_space(data, "blocks_first", 2))


def test_out_non_contiguous_view():
    data = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    storage = np.full((1, 8, 2, 4), -1, np.int32)
    out = storage[:, ::2, :, ::2]
    dm.space_to_depth(data, "blocks_first", 2, out=out)
    assert_bits_equal(np.ascontiguousarray(out), ref.space_to_depth(data, "blocks_first", 2))
    assert (storage[:, 1::2] == -1).all() and (storage[..., 1::2] == -1).all()


def test_space_to_batch_out_padding_overwritten():
    data = np.ones((1, 2), np.float32)
    out = np.full((2, 2), np.nan, np.float32)
    dm.space_to_batch(data, [1, 2], [0, 1], [0, 1], out=out)
    assert out.tolist() == [[0, 1], [1, 0]]


def test_out_overlapping_data_gives_the_right_answer():
    buffer = np.arange(16, dtype=np.int32)
    data = buffer.reshape(1, 4, 2, 2)
    expected = ref.depth_to_space(data.copy(), "depth_first", 2)
    dm.depth_to_space(data, "depth_first", 2, out=buffer.reshape(1, 1, 4, 4))
    assert_bits_equal(buffer.reshape(1, 1, 4, 4), expected)


@pytest.mark.parametrize(
    "out, error, match",
    [
        (np.zeros((1, 1, 4, 5), np.int32), dm.DataMoveError, r"out.shape must be the output shape \(1, 1, 4, 4\), got \(1, 1, 4, 5\)"),
        (np.zeros((1, 1, 4, 4), np.int64), dm.DataMoveError, "out.dtype must be data.dtype = int32, got int64"),
        (np.zeros((1, 1, 4, 4), ">i4"), dm.DataMoveError, "out.dtype"),
        (np.zeros((1, 1, 4, 4), np.int32).tolist(), TypeError, "out must be a numpy.ndarray"),
    ],
    ids=["shape", "dtype", "byteorder", "list"],
)
def test_bad_out_raises_before_writing(out, error, match):
    data = np.arange(16, dtype=np.int32).reshape(1, 4, 2, 2)
    before = np.array(out, copy=True)
    with pytest.raises(error, match=match):
        dm.depth_to_space(data, "depth_first", 2, out=out)
    assert_bits_equal(np.asarray(out), before)


def test_read_only_out_raises():
    data = np.arange(16, dtype=np.int32).reshape(1, 4, 2, 2)
    out = np.zeros((1, 1, 4, 4), np.int32)
    out.flags.writeable = False
    with pytest.raises(dm.DataMoveError, match="out must be writeable"):
        dm.depth_to_space(data, "depth_first", 2, out=out)


def test_bad_parameters_with_out_leave_out_untouched():
    data = np.arange(16, dtype=np.int32).reshape(4, 4)
    out = np.full((2, 8), 7, np.int32)
    with pytest.raises(dm.DataMoveError):
        dm.batch_to_space(data, [1, 2], [0, 5], [0, 4], out=out)
    assert (out == 7).all()


# ------------------------------------------------------------------ zero-sized and trivial


@pytest.mark.parametrize(
    "op, shape, args, expected",
    [
        ("batch_to_space", (0, 2, 2, 1), ([1, 2, 2, 1], [0] * 4, [0] * 4), (0, 4, 4, 1)),
        ("batch_to_space", (4, 0, 3), ([1, 2, 2], [0, 0, 1], [0, 0, 1]), (1, 0, 4)),
        ("batch_to_space", (4, 1, 3), ([1, 2, 2], [0, 1, 3], [0, 1, 3]), (1, 0, 0)),
        ("space_to_batch", (0, 3), ([1, 4], [0, 1], [0, 0]), (0, 1)),
        ("space_to_batch", (2, 0), ([1, 3], [0, 1], [0, 2]), (6, 1)),
        ("space_to_batch", (2, 0, 0), ([1, 1, 1], [0, 0, 0], [0, 0, 0]), (2, 0, 0)),
        ("space_to_depth", (0, 3, 4, 4), ("blocks_first", 2), (0, 12, 2, 2)),
        ("space_to_depth", (2, 0, 4, 4), ("depth_first", 4), (2, 0, 1, 1)),
        ("space_to_depth", (2, 3, 0, 4), ("depth_first", 2), (2, 12, 0, 2)),
        ("depth_to_space", (1, 0, 3, 3), ("blocks_first", 5), (1, 0, 15, 15)),
        ("depth_to_space", (1, 8, 0, 1, 1), ("depth_first", 2), (1, 1, 0, 2, 2)),
    ],
)
def test_zero_sized_dims(op, shape, args, expected):
    data = np.zeros(shape, np.float32)
    out = getattr(dm, op)(data, *args)
    assert out.shape == expected == dm.shapes.__dict__[op](shape, *args)
    if op == "space_to_batch":
        assert (out == 0).all()


def test_trivial_blocks_copy_not_alias():
    data = np.arange(6).reshape(2, 3)
    out = dm.batch_to_space(data, [1, 1], [0, 0], [0, 0])
    assert_bits_equal(out, data)
    assert not np.shares_memory(out, data)
    out3 = dm.space_to_depth(data.reshape(1, 2, 3), "blocks_first")  # block_size defaults to 1
    assert_bits_equal(out3, data.reshape(1, 2, 3))


def test_parameters_as_integer_arrays():
    data = np.arange(16).reshape(4, 4)
    for kind in (np.int8, np.uint16, np.int32, np.int64, np.uint64):
        out = dm.batch_to_space(data, np.array([1, 2], kind), np.array([0, 1], kind), np.array([0, 1], kind))
        assert_bits_equal(out, ref.batch_to_space(data, [1, 2], [0, 1], [0, 1]))
    out = dm.space_to_depth(data.reshape(1, 1, 4, 4), "blocks_first", np.int64(2))
    assert out.shape == (1, 4, 2, 2)


def test_list_input_becomes_an_array():
    out = dm.space_to_batch([[1, 2, 3]], [1, 3], [0, 0], [0, 0])
    assert out.tolist() == [[1], [2], [3]]
