"""The Numba engine against the spec formulas and the NumPy engine: every item width, layout, pattern."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datamove as dm
import reference as ref
from datamove import engines, plans, shapes
from datamove.engines import numba_engine
from datamove.engines.strided import lower, schedule, word_view
from strategies import depth_case, space_batch_case

numba = pytest.importorskip("numba")
ml_dtypes = pytest.importorskip("ml_dtypes")

# One dtype per item width and kind: 1, 2, 4, 8, 16 bytes, odd structured widths, ml_dtypes.
DTYPES = [
    np.dtype(np.bool_),
    np.dtype(np.uint8),
    np.dtype(np.int16),
    np.dtype(np.float16),
    np.dtype(ml_dtypes.bfloat16),
    np.dtype(ml_dtypes.float8_e4m3fn),
    np.dtype(np.float32),
    np.dtype(">i4"),
    np.dtype(np.float64),
    np.dtype(np.complex128),
    np.dtype("V3"),
    np.dtype([("a", "u1"), ("b", "<i2"), ("c", "<f4")]),  # 7 bytes, packed
    np.dtype("S6"),
    np.dtype("U3"),  # 12 bytes
    np.dtype("datetime64[ns]"),
]


def random_array(shape, dtype, rng):
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape) if dtype.itemsize else np.zeros(shape, dtype)


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def run_both(op, data, *args):
    expected = op(data, *args, engine="numpy")
    got = op(data, *args, engine="numba")
    assert same_bits(got, expected)
    return got


# ------------------------------------------------------------------ properties against the spec


@settings(max_examples=120, deadline=None)
@given(space_batch_case(max_block=5), st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_space_batch_round_trip_every_width(case, dtype, seed):
    shape, block, begin, end = case
    data = random_array(shape, dtype, np.random.default_rng(seed))
    batched = run_both(dm.space_to_batch, data, block, begin, end)
    assert same_bits(batched, ref.space_to_batch(data, block, begin, end))
    assert same_bits(run_both(dm.batch_to_space, batched, block, begin, end), data)


@settings(max_examples=120, deadline=None)
@given(depth_case(max_block=5), st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_depth_round_trip_every_width(case, dtype, seed):
    shape, mode, size = case
    data = random_array(shape, dtype, np.random.default_rng(seed))
    deep = run_both(dm.space_to_depth, data, mode, size)
    assert same_bits(deep, ref.space_to_depth(data, mode, size))
    assert same_bits(run_both(dm.depth_to_space, deep, mode, size), data)


# ------------------------------------------------------------------ layouts


def layouts(data):
    """The same values in memory layouts the kernels must walk correctly."""
    yield "C", data
    yield "Fortran", np.asfortranarray(data)
    flipped = np.ascontiguousarray(data[::-1, ..., ::-1])
    yield "negative strides", flipped[::-1, ..., ::-1]
    padded = np.zeros(tuple(2 * n for n in data.shape), data.dtype)
    padded[tuple(slice(None, None, 2) for _ in data.shape)] = data
    yield "every other element", padded[tuple(slice(None, None, 2) for _ in data.shape)]
    yield "transposed copy", np.ascontiguousarray(np.moveaxis(data, 1, -1)).transpose(0, data.ndim - 1, *range(1, data.ndim - 1))
    structured = np.zeros(data.shape, [("pad", "u1"), ("x", data.dtype)])
    structured["x"] = data
    yield "unaligned field", structured["x"]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64, np.complex128])
def test_layouts(dtype):
    rng = np.random.default_rng(7)
    data = random_array((4, 6, 12, 12), np.dtype(dtype), rng)
    for name, view in layouts(data):
        assert same_bits(view, data), name
        for mode in ("blocks_first", "depth_first"):
            for size in (1, 2, 3, 4, 6):
                assert same_bits(dm.space_to_depth(view, mode, size, engine="numba"), ref.space_to_depth(data, mode, size)), name
        args = ([1, 2, 3, 4], [0, 1, 1, 3], [0, 1, 2, 1])
        assert same_bits(dm.batch_to_space(view, [1, 2, 1, 2], [0, 1, 0, 3], [0, 1, 2, 1], engine="numba"),
                         ref.batch_to_space(data, [1, 2, 1, 2], [0, 1, 0, 3], [0, 1, 2, 1])), name
        assert same_bits(dm.space_to_batch(view, *args, engine="numba"), ref.space_to_batch(data, *args)), name


def test_broadcast_input_and_strided_out():
    data = np.broadcast_to(np.arange(8, dtype=np.uint8).reshape(1, 1, 1, 8), (2, 3, 4, 8))
    expected = ref.space_to_depth(np.ascontiguousarray(data), "depth_first", 2)
    assert same_bits(dm.space_to_depth(data, "depth_first", 2, engine="numba"), expected)
    # an out that is a transposed view (TensorFlow's NHWC output seen as NCHW)
    base = np.full((2, 2, 4, 12), 99, np.uint8)
    out = base.transpose(0, 3, 1, 2)
    assert dm.space_to_depth(data, "depth_first", 2, out=out, engine="numba") is out
    assert same_bits(out, expected)


def test_object_arrays_go_through_numpy():
    data = np.array([object(), "a", 3, None] * 4, dtype=object).reshape(1, 4, 2, 2)
    with pytest.raises(dm.DataMoveError, match=r"engine 'numba' cannot take a numpy.ndarray; engines that can: \['numpy'\]"):
        dm.space_to_depth(data, "blocks_first", 2, engine="numba")
    out = dm.space_to_depth(np.tile(data, (1, 1, 300, 300)), "blocks_first", 2)[..., :2, :2]  # auto, past the threshold
    data = np.tile(data, (1, 1, 300, 300))[..., :4, :4]
    expected = ref.space_to_depth(data, "blocks_first", 2)[..., :2, :2]
    assert all(a is b for a, b in zip(out.ravel(), expected.ravel()))


# ------------------------------------------------------------------ larger cases: every tile pattern, many threads' shares


@pytest.mark.parametrize("block", [2, 3, 4, 5])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
def test_patterns_on_larger_arrays(block, dtype):
    rng = np.random.default_rng(block)
    data = random_array((3, 5, 12 * block, 10 * block), np.dtype(dtype), rng)
    for mode in ("blocks_first", "depth_first"):
        deep = run_both(dm.space_to_depth, data, mode, block)
        run_both(dm.depth_to_space, deep, mode, block)
    args = ([1, 1, block, block], [0, 0, 1, block - 1], [0, 0, block - 1, 1])
    batched = run_both(dm.space_to_batch, data, *args)
    run_both(dm.batch_to_space, batched, *args)
    nhwc = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    assert same_bits(dm.space_to_depth(nhwc.transpose(0, 3, 1, 2), "blocks_first", block, engine="numba"),
                     ref.space_to_depth(data, "blocks_first", block))


def test_long_contiguous_runs_are_split_among_threads():
    # block 1 everywhere: one long contiguous loop, cut into chunks plus a remainder
    data = np.arange(3 * 100_003, dtype=np.uint16).reshape(3, 100_003)
    assert same_bits(dm.space_to_batch(data, [1, 1], [0, 0], [0, 0], engine="numba"), data)
    assert same_bits(dm.batch_to_space(data[:1], [1, 1], [0, 5], [0, 7], engine="numba"), data[:1, 5:-7])


def test_thread_counts_give_the_same_result():
    data = np.random.default_rng(3).random((4, 8, 64, 64)).astype(np.float32)
    expected = ref.space_to_depth(data, "blocks_first", 2)
    before = numba.get_num_threads()
    try:
        for threads in range(1, numba.config.NUMBA_NUM_THREADS + 1):
            numba.set_num_threads(threads)
            assert same_bits(dm.space_to_depth(data, "blocks_first", 2, engine="numba"), expected)
    finally:
        numba.set_num_threads(before)


# ------------------------------------------------------------------ scheduling


def test_schedule_names_the_block_patterns():
    data = np.zeros((1, 2, 8, 8), np.float32)
    for mode in ("blocks_first", "depth_first"):
        plan = plans.space_to_depth(data.shape, (1, 8, 4, 4), mode, 2)
        nest = lower(data, np.zeros(plan.out_shape, np.float32), *plan.copies[0])
        assert (nest.pattern, nest.block) == ("gather", 2)
        back = plans.depth_to_space(plan.out_shape, data.shape, mode, 2)
        nest = lower(np.zeros(plan.out_shape, np.float32), data, *back.copies[0])
        assert (nest.pattern, nest.block) == ("scatter", 2)
    assert schedule([[5, 1, 1], [3, 5, 7]])[0] == "contiguous"
    assert schedule([[5, 3, 7], [3, 1, 2]])[0] == "strided"
    assert schedule([[4, 0, 1], [3, 0, 9]], fill=True) == ("contiguous", 0, [[3, 0, 9], [4, 0, 1]])


def test_word_view_spans_the_memory_of_any_layout():
    base = np.arange(24, dtype=np.uint32).reshape(2, 3, 4)
    view = base[::-1, :, ::-2]
    words = word_view(view, 4)
    assert words.size == 2 * 3 * 4 - 1 and words[0] == 1 and words[-1] == 23
    assert word_view(np.zeros((0, 3)), 8) is None


# ------------------------------------------------------------------ engine choice, memory, imports


def test_auto_picks_numba_from_the_threshold():
    assert engines.numba_ready(wait=True)
    small = np.zeros(engines.NUMBA_MIN_BYTES - 1, np.uint8).reshape(1, -1)
    large = np.zeros(engines.NUMBA_MIN_BYTES, np.uint8).reshape(1, -1)
    assert engines.select("auto", small).__module__.endswith("numpy_engine")
    assert engines.select("auto", large).__module__.endswith("numba_engine")
    assert engines.select("auto", large.astype(object)).__module__.endswith("numpy_engine")
    for array in (small, large):
        assert same_bits(dm.space_to_batch(array, [1, 1], [0, 1], [0, 2]), ref.space_to_batch(array, [1, 1], [0, 1], [0, 2]))


def test_no_temporary_arrays():
    data = np.random.default_rng(0).random((4, 16, 128, 128)).astype(np.float32)  # 4 MiB
    out = np.empty((4, 64, 64, 64), np.float32)
    dm.space_to_depth(data, "blocks_first", 2, out=out, engine="numba")  # compile and warm up
    tracemalloc.start()
    dm.space_to_depth(data, "blocks_first", 2, out=out, engine="numba")
    dm.space_to_batch(data, [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], engine="numba")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    output = 4 * 16 * 65 * 65 * 4 * 4
    assert peak <= output + (1 << 20), peak


def test_first_large_call_runs_while_numba_loads():
    code = (
        "import sys, numpy as np, datamove as dm\n"
        "from datamove import engines, recipes\n"
        "x = np.arange(1 << 18, dtype=np.float32).reshape(1, 4, 256, 256)\n"
        "first = dm.space_to_depth(x, 'depth_first', 2)\n"
        "provisional = engines.provisional('auto', x)\n"
        "assert engines.numba_ready(wait=True)\n"
        "second = dm.space_to_depth(x, 'depth_first', 2)\n"
        "assert (first == second).all() and first.shape == (1, 16, 128, 128)\n"
        "assert engines.select('auto', x).__module__.endswith('numba_engine')\n"
        "print(provisional, len(recipes.RECIPES))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    provisional, kept = result.stdout.split()
    assert kept == "1"  # the provisional NumPy recipe was not kept


def test_import_does_not_import_numba():
    code = "import sys, datamove; import numpy as np; datamove.space_to_depth(np.zeros((1, 1, 2, 2)), 'blocks_first', 2); print('numba' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_bad_input_raises_before_any_kernel():
    out = np.full((1, 4, 2, 2), 7.0)
    with pytest.raises(dm.DataMoveError, match="out.shape"):
        dm.space_to_depth(np.zeros((1, 1, 4, 4)), "blocks_first", 2, out=out[:, :2], engine="numba")
    with pytest.raises(dm.DataMoveError, match="block_size"):
        dm.space_to_depth(np.zeros((1, 1, 4, 5)), "blocks_first", 2, out=out, engine="numba")
    assert (out == 7.0).all()
    assert numba_engine.can_take(np.zeros(1)) and not numba_engine.can_take(np.zeros(1, object))
