"""The native engine (the compiled core) against the spec formulas and the NumPy engine: every item width, layout,
pattern, streaming stores, threads, fork."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import datamove as dm
import reference as ref
from datamove import engines, shapes
from datamove.plans import views as plans
from datamove.engines.native import engine as native_engine
import lowering
from lowering import strided
from lowering.strided import _merge, fan_out_first, lower, schedule
from concurrency import run_threads
from strategies import depth_case, space_batch_case

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


def _child(code, env=None, timeout=120):
    """What ``python -c code`` prints, in a new process (``env``: its environment); a failure shows its stderr."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def run_both(op, data, *args):
    expected = op(data, *args, engine="numpy")
    got = op(data, *args, engine="native")
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
                assert same_bits(dm.space_to_depth(view, mode, size, engine="native"), ref.space_to_depth(data, mode, size)), name
        args = ([1, 2, 3, 4], [0, 1, 1, 3], [0, 1, 2, 1])
        assert same_bits(dm.batch_to_space(view, [1, 2, 1, 2], [0, 1, 0, 3], [0, 1, 2, 1], engine="native"),
                         ref.batch_to_space(data, [1, 2, 1, 2], [0, 1, 0, 3], [0, 1, 2, 1])), name
        assert same_bits(dm.space_to_batch(view, *args, engine="native"), ref.space_to_batch(data, *args)), name


def test_broadcast_input_and_strided_out():
    data = np.broadcast_to(np.arange(8, dtype=np.uint8).reshape(1, 1, 1, 8), (2, 3, 4, 8))
    expected = ref.space_to_depth(np.ascontiguousarray(data), "depth_first", 2)
    assert same_bits(dm.space_to_depth(data, "depth_first", 2, engine="native"), expected)
    # an out that is a transposed view (TensorFlow's NHWC output seen as NCHW)
    base = np.full((2, 2, 4, 12), 99, np.uint8)
    out = base.transpose(0, 3, 1, 2)
    assert dm.space_to_depth(data, "depth_first", 2, out=out, engine="native") is out
    assert same_bits(out, expected)


def test_object_arrays_go_through_numpy():
    data = np.array([object(), "a", 3, None] * 4, dtype=object).reshape(1, 4, 2, 2)
    with pytest.raises(dm.DataMoveError, match=r"engine 'native' cannot take a numpy.ndarray; engines that can: \['numpy'\]"):
        dm.space_to_depth(data, "blocks_first", 2, engine="native")
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
    for mode in ("blocks_first", "depth_first"):  # depth_first: the two-level block tiles (gather2, scatter2)
        deep = ref.space_to_depth(data, mode, block)
        assert same_bits(dm.space_to_depth(nhwc.transpose(0, 3, 1, 2), mode, block, engine="native"), deep)
        for stream in (False, True):
            back = np.empty(nhwc.shape, data.dtype).transpose(0, 3, 1, 2)
            deep_nhwc = np.ascontiguousarray(np.moveaxis(deep, 1, -1)).transpose(0, 3, 1, 2)
            saved, native_engine.STREAM_BYTES = native_engine.STREAM_BYTES, 0 if stream else native_engine.STREAM_BYTES
            try:
                dm.depth_to_space(deep_nhwc, mode, block, out=back, engine="native")
            finally:
                native_engine.STREAM_BYTES = saved
            assert same_bits(back, data)


def test_long_contiguous_runs_are_split_among_threads():
    # block 1 everywhere: one long contiguous loop, cut into chunks plus a remainder
    data = np.arange(3 * 100_003, dtype=np.uint16).reshape(3, 100_003)
    assert same_bits(dm.space_to_batch(data, [1, 1], [0, 0], [0, 0], engine="native"), data)
    assert same_bits(dm.batch_to_space(data[:1], [1, 1], [0, 5], [0, 7], engine="native"), data[:1, 5:-7])


def _ones_then_nhwc(shape):
    """A C-contiguous array of ``shape`` with its values in NHWC order (moving it to NCHW is a transpose)."""
    data = np.arange(int(np.prod(shape)), dtype=np.float32)
    return np.moveaxis(data.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)


_SOURCE = np.arange(2 * 48 * 160 * 160, dtype=np.float32).reshape(2, 48, 160, 160)  # 9.4 MiB
_MOVED = _ones_then_nhwc(_SOURCE.shape)


@pytest.mark.parametrize("name, call, expected", [
    ("copy", lambda: dm.space_to_depth(_SOURCE, "blocks_first", 1, engine="native"), lambda: _SOURCE),
    ("copy, crops", lambda: dm.batch_to_space(_SOURCE, [1, 1, 1, 1], [0, 0, 1, 0], [0, 0, 2, 0], engine="native"),
     lambda: _SOURCE[:, :, 1:-2]),
    ("copy, pads", lambda: dm.space_to_batch(_SOURCE, [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 300, 0], engine="native"),
     lambda: np.pad(_SOURCE, ((0, 0), (0, 0), (0, 300), (0, 0)))),
    ("transpose", lambda: dm.space_to_depth(_MOVED, "depth_first", 1, engine="native"), lambda: _MOVED),
    ("transpose, pads", lambda: dm.space_to_batch(_MOVED, [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 3], engine="native"),
     lambda: np.pad(_MOVED, ((0, 0), (0, 0), (0, 0), (0, 3)))),
])
def test_a_block_of_one_is_shared_among_threads(name, call, expected, python_lowering):
    # A block of 1 is a copy (or, across layouts, a transpose) whose tile was the whole step: the threads
    # share a step by the loops around its tile, so one thread ran all of it, whatever the thread count.
    lowering._PROGRAMS.clear()
    with _threads(16):
        result = call()
    (program,) = lowering._PROGRAMS.values()
    for pattern, word, block, loops in _steps(program):
        rows, size = int(np.prod([l[0] for l in loops[:-2]])), int(np.prod([l[0] for l in loops])) * word
        if size >= 1 << 20:  # every large step: tiles enough for 16 threads and their pieces, or tiles of 256 KiB
            assert rows >= 64 or size // rows <= 256 << 10, (name, pattern, loops)
    assert same_bits(result, expected())


def _pairs(step):
    """The (src, dst) word offset pairs a step of ``_split`` copies, one per word (a fill's src: 0)."""
    pattern, word, block, lo, hi, src, dst, count = step[:8]
    loops = np.array(step[8:], np.int64).reshape(count, 3)
    index = np.indices(tuple(loops[:, 0])).reshape(count, -1)
    return list(zip((src + loops[:, 1] @ index).tolist(), (dst + loops[:, 2] @ index).tolist()))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["contiguous", "fill", "strided"]),
       st.lists(st.tuples(st.integers(1, 4), st.integers(-40, 40), st.integers(-40, 40)), max_size=2),
       st.lists(st.tuples(st.integers(1, 40), st.integers(-40, 40), st.integers(-40, 40)), min_size=1, max_size=2),
       st.integers(1, 3), st.booleans())
def test_split_cuts_a_nest_into_steps_that_copy_the_same_words(pattern, outer, tile, min_rows, rows_on):
    # _split's cuts (tiles of fewer rows, chunks of the innermost loop), at sizes a test can walk: every
    # word pair of the nest once, no other, in steps whose rows reach the bound where the nest allows
    loops = [list(l) for l in outer + tile]
    if rows_on and len(loops) >= 2:  # a tile writing whole rows one after another (the transposes' 16-row case)
        loops[-1][2], loops[-2][2] = 1, loops[-1][0]
    word = 4
    saved = (lowering._MIN_ROWS, lowering._CHUNK_WORDS, lowering._CHUNK_BYTES, lowering._SHARED_BYTES)
    lowering._MIN_ROWS, lowering._CHUNK_WORDS, lowering._CHUNK_BYTES, lowering._SHARED_BYTES = \
        8 * min_rows, 4, 8, 16
    try:
        steps = lowering._split(pattern, word, 0, 100, 200, loops)
    finally:
        lowering._MIN_ROWS, lowering._CHUNK_WORDS, lowering._CHUNK_BYTES, lowering._SHARED_BYTES = saved
    whole = [l for l in loops]
    while len(whole) < 2:
        whole.insert(0, [1, 0, 0])
    expected = _pairs([0, word, 0, 0, 0, 100, 200, len(whole)] + [x for l in whole for x in l])
    got = [pair for step in steps for pair in _pairs(step)]
    assert sorted(got) == sorted(expected)  # (offsets may repeat inside one nest: a multiset, not a set)
    for step in steps:
        assert step[0] == lowering._PATTERNS[pattern] and step[7] >= 2


@pytest.mark.parametrize("block", [2, 3, 4])
def test_register_streams_take_16_byte_scatters_and_a_few_staged_steps(block):
    """Below the last-level cache's size (stream mode 1) a program streams where its steps stream from
    registers, scatters of 16-byte words (pixels of 4 float32 channels) in blocks of 2 or 4 included, or
    stage whole rows of 240 bytes and more (a 3 x 3 block's, rows of 178 pixels): channels-last
    BatchToSpace with crops, whose pixels are its scatter windows' words (the crop's edge pixels in the
    window's pass). Bit for bit."""
    core = native_engine.core()
    nchw = np.random.default_rng(block).random((block * block * 2, 4, 60, 60)).astype(np.float32)
    data = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # channels-last
    args = ([1, 1, block, block], [0, 0, 1, 1], [0, 0, 1, 1])
    expected = ref.batch_to_space(data, *args)
    out = np.zeros((expected.shape[0],) + expected.shape[2:] + (4,), np.float32).transpose(0, 3, 1, 2)
    plan = plans.batch_to_space(data.shape, expected.shape, *map(tuple, args))
    program = lowering.program(plan, data, out, stream=1)
    steps = _steps(program)
    bulk = max(steps, key=lambda step: np.prod([l[0] for l in step[3]]))
    assert bulk[:3] == (lowering._PATTERNS["scatter_window"], 16, block), bulk
    addresses = (strided._address(data), strided._address(out))
    assert core.streams(program, addresses[1], True)
    with _threads(2):
        core.run(program, data, out, dm.get_num_threads(), 1)
    assert same_bits(out, expected)


def test_thread_counts_give_the_same_result():
    data = np.random.default_rng(3).random((4, 8, 64, 64)).astype(np.float32)
    expected = ref.space_to_depth(data, "blocks_first", 2)
    before = dm.get_num_threads()
    try:
        for threads in (1, 2, 3, 5, 8, 16):
            dm.set_num_threads(threads)
            assert dm.get_num_threads() == threads
            assert same_bits(dm.space_to_depth(data, "blocks_first", 2, engine="native"), expected)
    finally:
        dm.set_num_threads(before)



def _split_case(rng):
    """A random call of 0.25-4 MiB (so its rows are cut among threads), NCHW or NHWC, crops and pads."""
    op = rng.choice(["s2d", "d2s", "b2s", "s2b"])
    rank = int(rng.integers(3, 6))
    dtype = np.dtype(rng.choice([np.uint8, np.int16, np.float32, np.float64, np.complex128]))
    block = [1] + [int(rng.integers(1, 4)) for _ in range(rank - 1)]
    if op in ("s2d", "d2s"):
        b = int(rng.integers(2, 5))
        spatial = [int(rng.integers(1, 7)) for _ in range(rank - 2)]
        channels = int(rng.integers(1, 4))
        inner = channels * int(np.prod(spatial)) * b ** (rank - 2)
        shape = [0, channels] + [b * n for n in spatial] if op == "s2d" else [0, channels * b ** (rank - 2)] + spatial
        args, f = (str(rng.choice(["blocks_first", "depth_first"])), b), (dm.space_to_depth if op == "s2d" else dm.depth_to_space)
    elif op == "b2s":
        spatial = [int(rng.integers(1, 8)) for _ in range(rank - 1)]
        crops = [[0] + [int(rng.integers(0, k * n // 3 + 1)) for k, n in zip(block[1:], spatial)] for _ in range(2)]
        inner, shape = int(np.prod(spatial)), [0] + spatial
        args, f = (block, *crops), dm.batch_to_space
    else:
        pads = [[0] + [int(rng.integers(0, 3)) for _ in range(rank - 1)] for _ in range(2)]
        shape = [0] + [k * ((p + q) // k + int(rng.integers(1, 8))) - p - q for k, p, q in zip(block[1:], pads[0][1:], pads[1][1:])]
        inner = int(np.prod(shape[1:]))
        args, f = (block, *pads), dm.space_to_batch
    per_batch = inner * dtype.itemsize * (int(np.prod(block)) if op == "b2s" else 1)  # b2s: whole batches of blocks
    shape[0] = max(1, int(rng.integers(1 << 18, 1 << 22)) // per_batch) * (per_batch // (inner * dtype.itemsize))
    data = random_array(shape, dtype, rng)
    if rank == 4 and rng.random() < 0.5:  # channels-last memory
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1)).transpose(0, 3, 1, 2)
    return f, data, args


def test_rows_cut_among_threads_anywhere():
    # Each thread takes a range of rows that starts and ends anywhere in the loops (the odometer, and the
    # whole runs of the innermost loop that skip it): every thread count gives the one-thread bytes.
    rng = np.random.default_rng(14)
    before = dm.get_num_threads()
    try:
        for _ in range(60):
            f, data, args = _split_case(rng)
            try:
                expected = f(data, *args, engine="numpy")
            except dm.DataMoveError:
                continue
            for threads in (1, 2, 3, 7):
                dm.set_num_threads(threads)
                assert same_bits(f(data, *args, engine="native"), expected), (f.__name__, data.shape, data.dtype, args, threads)
    finally:
        dm.set_num_threads(before)


# ------------------------------------------------------------------ scheduling


def _merged_by_definition(loops):
    """The merge rule as first written: the first (outer, inner) pair in list order whose outer loop
    continues the inner one on both sides becomes one loop, until none does; count-1 loops dropped."""
    loops = [list(l) for l in loops if l[0] != 1]
    while True:
        pair = next(((i, j) for i, outer in enumerate(loops) for j, inner in enumerate(loops)
                     if i != j and outer[1] == inner[1] * inner[0] and outer[2] == inner[2] * inner[0]), None)
        if pair is None:
            return loops
        i, j = pair
        loops[j][0] *= loops[i][0]
        del loops[i]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 3, 4, 8]), st.sampled_from([0, 1, 2, 3, 4, 8, 12, 16, 24, -4]),
                          st.sampled_from([0, 1, 2, 4, 6, 8, 16, 32, -2])), max_size=10))
def test_merge_follows_its_definition(loops):
    assert _merge([list(l) for l in loops]) == _merged_by_definition(loops)


def test_schedule_names_the_block_patterns():
    data = np.zeros((1, 2, 8, 8), np.float32)
    for mode in ("blocks_first", "depth_first"):
        plan = plans.space_to_depth(data.shape, (1, 8, 4, 4), mode, 2)
        nest = lower(data, np.zeros(plan.out_shape, np.float32), *plan.copies[0])
        assert (nest.pattern, nest.block) == ("gather", 2)
        back = plans.depth_to_space(plan.out_shape, data.shape, mode, 2)
        nest = lower(np.zeros(plan.out_shape, np.float32), data, *back.copies[0])
        assert (nest.pattern, nest.block) == ("scatter", 2)
    # channels last, depth_first: each output pixel's [C, b, b] from b x b input pixels' runs of C
    nhwc = np.zeros((1, 8, 8, 16), np.float32).transpose(0, 3, 1, 2)
    plan = plans.space_to_depth(nhwc.shape, (1, 64, 4, 4), "depth_first", 2)
    deep = np.zeros((1, 4, 4, 64), np.float32).transpose(0, 3, 1, 2)
    nest = lower(nhwc, deep, *plan.copies[0])
    assert (nest.pattern, nest.block) == ("scatter2", 4) and nest.loops[-1] == (16, 1, 4)
    back = plans.depth_to_space(deep.shape, nhwc.shape, "depth_first", 2)
    assert (lower(deep, nhwc, *back.copies[0]).pattern, lower(deep, nhwc, *back.copies[0]).block) == ("gather2", 4)
    assert schedule([[2, 4096, 2], [2, 16, 1], [16, 1, 4]])[:2] == ("scatter2", 4)
    assert schedule([[2, 4096, 2], [2, 16, 3], [16, 1, 4]])[0] == "strided"  # rows not contiguous on the out side
    assert schedule([[5, 1, 1], [3, 5, 7]])[0] == "contiguous"
    assert schedule([[5, 3, 7], [3, 1, 2]])[0] == "strided"
    assert schedule([[4, 0, 1], [3, 0, 9]], fill=True) == ("contiguous", 0, [[3, 0, 9], [4, 0, 1]])


# ------------------------------------------------------------------ engine choice, memory, imports


def test_auto_picks_native_from_the_threshold():
    small = np.zeros(engines.NATIVE_MIN_BYTES - 1, np.uint8).reshape(1, -1)
    large = np.zeros(engines.NATIVE_MIN_BYTES, np.uint8).reshape(1, -1)
    assert engines.select("auto", small).__name__.endswith("numpy_engine")
    assert engines.select("auto", large).__name__.endswith("native.engine")
    assert engines.select("auto", large.astype(object)).__name__.endswith("numpy_engine")
    for array in (small, large):
        assert same_bits(dm.space_to_batch(array, [1, 1], [0, 1], [0, 2]), ref.space_to_batch(array, [1, 1], [0, 1], [0, 2]))


def test_no_temporary_arrays():
    data = np.random.default_rng(0).random((4, 16, 128, 128)).astype(np.float32)  # 4 MiB
    out = np.empty((4, 64, 64, 64), np.float32)
    tracemalloc.start()
    dm.space_to_depth(data, "blocks_first", 2, out=out, engine="native")
    dm.space_to_batch(data, [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], engine="native")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    output = 4 * 16 * 65 * 65 * 4 * 4
    assert peak <= output + (1 << 20), peak


@pytest.mark.parametrize("shape, block, pads", [
    ((1, 1, 520, 502), [1, 1, 8, 8], [0, 0, 0, 1]),  # 64 block offsets of 4095 words: 2 MiB of tables, 1 MiB out
    ((2, 9, 40, 40), [1, 1, 3, 3], [0, 0, 1, 1]),  # units from tables, within the bound
    ((3, 16, 46, 46), [1, 1, 4, 4], [0, 0, 1, 1])])
def test_units_tables_within_the_output_and_1_mib(shape, block, pads, python_lowering):
    """The lowering's arrays for a step's tables (datamove.engines.native.units) stay within the output's bytes and
    1 MiB: a SpaceToBatch whose tables would take more goes to the windows. Bit for bit."""
    data = np.random.default_rng(1).random(shape).astype(np.float32)
    expected = ref.space_to_batch(data, block, pads, pads)
    out = np.empty_like(expected)
    lowering._PROGRAMS.clear()
    tracemalloc.start()
    dm.space_to_batch(data, block, pads, pads, out=out, engine="native")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= out.nbytes + (1 << 20), peak
    assert same_bits(out, expected)


def test_import_loads_the_core():
    """The compiled core loads with the package (not in the first large call, which then runs at steady speed,
    its pool not yet started)."""
    code = ("import sys, datamove; import numpy as np; datamove.space_to_depth(np.zeros((1, 1, 2, 2)), 'blocks_first', 2); "
            "print('datamove._native' in sys.modules, sys.modules['datamove._native'].workers())")
    assert _child(code).strip() == "True 0"


def test_bad_input_raises_before_any_kernel():
    out = np.full((1, 4, 2, 2), 7.0)
    with pytest.raises(dm.DataMoveError, match="out.shape"):
        dm.space_to_depth(np.zeros((1, 1, 4, 4)), "blocks_first", 2, out=out[:, :2], engine="native")
    with pytest.raises(dm.DataMoveError, match="block_size"):
        dm.space_to_depth(np.zeros((1, 1, 4, 5)), "blocks_first", 2, out=out, engine="native")
    assert (out == 7.0).all()
    assert native_engine.can_take(np.zeros(1)) and not native_engine.can_take(np.zeros(1, object))


# ------------------------------------------------------------------ the compiled core: stores, words, threads, fork


@pytest.mark.parametrize("core_plans", [True, False])
def test_calls_the_core_plans_none_of_run_on_numpy(monkeypatch, core_plans):
    """The core's planner refuses ranks over 16 (and plans of over 65,536 views: tests/test_planner_views.py),
    and with ``CORE_PLANS`` off it plans nothing: such calls run on the NumPy engine, bit for bit, first and
    repeated, into new arrays and into ``out=`` (an out that aliases the data too), and name no kernel."""
    from datamove.engines.call import Call

    monkeypatch.setattr(native_engine, "CORE_PLANS", core_plans)
    rng = np.random.default_rng(17)
    rank = 17 if core_plans else 4
    lead = (1,) * (rank - 3)
    x = rng.integers(0, 1 << 16, (2,) + lead + (4, 6), dtype=np.uint16)
    block, begin, end = (1,) + lead + (2, 2), (0,) * (rank - 2) + (1, 0), (0,) * (rank - 2) + (1, 2)
    space = rng.integers(0, 1 << 16, (1, 3) + (2,) * (rank - 2), dtype=np.uint16)  # (the depth ops' block: every axis)
    depth = dm.space_to_depth(space, "depth_first", 2, engine="numpy")
    calls = [(dm.space_to_batch, x, (block, begin, end)), (dm.batch_to_space, x[:1].repeat(4, 0), (block, begin, end)),
             (dm.space_to_depth, space, ("depth_first", 2)), (dm.depth_to_space, depth, ("blocks_first", 2))]
    for (op, data, args), engine in itertools.product(calls, ("native", "auto")):  # (auto: a recipe moved to the core)
        want = op(data, *args, engine="numpy")
        for _ in range(3):  # a first call, a recipe, its repeats
            assert same_bits(op(data, *args, engine=engine), want), (op.__name__, engine)
            out = np.full_like(want, 7)
            assert op(data, *args, engine=engine, out=out) is out and same_bits(out, want), (op.__name__, engine)
    call = Call("space_to_depth", {"mode": "depth_first", "block_size": 2}, space.shape, depth.shape)
    assert native_engine.program_of(call, space, np.empty_like(depth)) is None
    assert native_engine.kernels(call, space, np.empty_like(depth)) == []
    assert same_bits(native_engine.run(call, space, None), depth)  # the engine protocol's run()
    out = np.zeros_like(depth)
    assert native_engine.run(call, space, out) is out and same_bits(out, depth)
    flat = np.arange(2 * 4 * 4 * 4, dtype=np.float32).reshape(2, 4, 4, 4)  # an out= that is the data's own memory
    want = dm.space_to_depth(flat, "blocks_first", 2, engine="numpy")
    assert same_bits(dm.space_to_depth(flat, "blocks_first", 2, engine="native", out=flat.reshape(want.shape)), want)


@pytest.fixture
def python_lowering(monkeypatch):
    """Calls lowered by the tests' Python twin of the core's planner (tests/lowering: into its cache of
    programs, which a test reads; its allocations, which tracemalloc sees), which tests/test_planner.py holds
    the core's to bit for bit."""
    lowering.python_plans(monkeypatch)


@pytest.fixture
def streaming(monkeypatch):
    """Every output takes the non-temporal store path, however small."""
    native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)


@pytest.fixture
def windows(monkeypatch):
    """SpaceToBatch with pads as windows and fills, however small its images (no units from tables:
    tests/lowering/units.py), for the tests of those kernels; programs made afresh."""
    from datamove.arrays.caches import BoundedCache

    lowering.python_plans(monkeypatch)  # (the Python twin of the core's planner, which can leave units out)
    monkeypatch.setattr(lowering, "lower_units", lambda *args: None)
    monkeypatch.setattr(lowering, "_PROGRAMS", BoundedCache(lowering._MAX_PROGRAMS))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # set once
@given(space_batch_case(max_block=5), st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_streaming_stores_space_batch(streaming, case, dtype, seed):
    shape, block, begin, end = case
    data = random_array(shape, dtype, np.random.default_rng(seed))
    batched = run_both(dm.space_to_batch, data, block, begin, end)
    assert same_bits(run_both(dm.batch_to_space, batched, block, begin, end), data)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # set once
@given(depth_case(max_block=5), st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_streaming_stores_depth(streaming, case, dtype, seed):
    shape, mode, size = case
    data = random_array(shape, dtype, np.random.default_rng(seed))
    deep = run_both(dm.space_to_depth, data, mode, size)
    assert same_bits(run_both(dm.depth_to_space, deep, mode, size), data)


@pytest.mark.parametrize("channels", [4, 8, 16, 32])
def test_channels_last_pieces_streamed_or_not(monkeypatch, channels):
    """Channels-last data writes 16-128-byte pieces: streamed whole (inline), plain, or mixed with edge pieces."""
    rng = np.random.default_rng(channels)
    nhwc = rng.integers(0, 2**31, (4, 18, 22, channels), dtype=np.int64).astype(np.float32)
    nchw = np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))
    space = ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])
    cases = [("space_to_depth", ("blocks_first", 2)), ("space_to_depth", ("depth_first", 2)),
             ("space_to_batch", space), ("batch_to_space", ([1, 1, 1, 2], [0, 0, 1, 1], [0, 0, 2, 1]))]
    for stream in (0, 1 << 62):
        monkeypatch.setattr(native_engine, "STREAM_BYTES", stream)
        for name, args in cases:
            expected = getattr(ref, name)(nchw, *args)
            for offset in (0, 4):  # out 16-byte aligned, and not
                base = np.zeros(expected.size + 8, np.float32)
                n, c, *spatial = expected.shape
                out = base[offset: offset + expected.size].reshape(n, *spatial, c).transpose(0, 3, 1, 2)
                getattr(dm, name)(nhwc.transpose(0, 3, 1, 2), *args, out=out, engine="native")
                assert same_bits(out, expected), (name, args, stream, offset)
        # TensorFlow's layout: blocks on H and W of C-contiguous NHWC data (no windows on the channels)
        tf_args = ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0])
        batched = dm.space_to_batch(nhwc, *tf_args, engine="native")
        assert same_bits(batched, ref.space_to_batch(nhwc, *tf_args))
        assert same_bits(dm.batch_to_space(batched, *tf_args, engine="native"), nhwc)


@pytest.mark.parametrize("level", ["native", "avx2"])
@pytest.mark.parametrize("channels", [16, 20, 24, 32, 48, 128])
def test_channels_last_block_rows_streamed_together(monkeypatch, channels, level):
    """Channels-last DepthToSpace blocks_first and BatchToSpace streamed: each tile's block rows (chunks of
    2 * channels items, 64-512 bytes, and 80, 96 and 192 bytes whose lines straddle two chunks) go on through
    the run, to output rows a whole number of lines apart or not (widths 8 and 9), into outs 0-48 bytes
    into a line, and, where the rows' lines fall at the same places, are stored line by line, every row in
    turn (stream_chunks<true>; below AVX-512, tile by tile): bit for bit against the reference, at the CPU's
    level and at AVX2."""
    if level != "native":
        core = _core_at(level)
        native_engine.core()
        monkeypatch.setattr(native_engine, "_native", core)
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    rng = np.random.default_rng(channels)
    for width in (8, 9):
        nhwc = rng.integers(0, 2**31, (2, 5, width, 4 * channels), dtype=np.int64).astype(np.float32)
        data = nhwc.transpose(0, 3, 1, 2)
        batched = rng.integers(0, 2**31, (8, 5, width, channels), dtype=np.int64).astype(np.float32).transpose(0, 3, 1, 2)
        cases = [("depth_to_space", data, ("blocks_first", 2)),
                 ("batch_to_space", batched, ([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0])),
                 ("batch_to_space", batched, ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 0]))]
        for name, x, args in cases:
            expected = getattr(ref, name)(np.ascontiguousarray(x), *args)
            n, c, *spatial = expected.shape
            for offset in (0, 4, 8, 12):  # items of 4 bytes: 0-48 bytes into a line
                base = np.zeros(expected.size + 16 + 64, np.float32)
                start = (-base.ctypes.data % 64) // 4 + offset
                out = base[start: start + expected.size].reshape(n, *spatial, c).transpose(0, 3, 1, 2)
                getattr(dm, name)(x, *args, out=out, engine="native")
                assert same_bits(out, expected), (name, args, width, offset)
                assert not base[:start].any() and not base[start + expected.size:].any()  # nothing past out


@pytest.mark.parametrize("channels, block", [(8, 2), (4, 2), (16, 2), (8, 4)])
def test_tensorflow_batch_to_space_rows_interleaved_streamed(monkeypatch, channels, block):
    """TensorFlow's BatchToSpace (NHWC, blocks on H and W), streamed: with 8 float32 channels and a block of 2
    along W each output line is two 32-byte pixels, one from each of two input batches
    (stream_small_chunks<32, 2>); with and without crops, at odd and even widths (chunks after the last whole
    vector), into outs 0-60 bytes into a line: bit for bit against the reference, nothing written past out.
    Other channel counts and blocks (other kernels) beside them."""
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    rng = np.random.default_rng(channels * block)
    for width, crops in ((63, (0, 0)), (64, (1, 2)), (65, (0, 3))):
        x = rng.integers(0, 2**31, (2 * block * block, 32 // block, width, channels), dtype=np.int64).astype(np.float32)
        args = ([1, block, block, 1], [0, 0, crops[0], 0], [0, 0, crops[1], 0])
        expected = ref.batch_to_space(x, *args)
        for offset in range(0, 16, 1):  # items of 4 bytes: 0-60 bytes into a line
            base = np.zeros(expected.size + 16 + 64, np.float32)
            start = (-base.ctypes.data % 64) // 4 + offset
            out = base[start: start + expected.size].reshape(expected.shape)
            dm.batch_to_space(x, *args, out=out, engine="native")
            assert same_bits(out, expected), (width, crops, offset)
            assert not base[:start].any() and not base[start + expected.size:].any()  # nothing past out


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64, np.complex128, "V3"])
def test_long_rows_every_word_unaligned_and_strided_outputs(monkeypatch, stream, dtype):
    """Rows long enough for the streamed body, heads and tails at every alignment, into C, strided and flipped outs."""
    native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(11)
    data = random_array((2, 3, 6, 4 * 3 * 97), dtype, rng)
    for shift in (0, 1, 3):  # the input starts 0, 1 or 3 items into a buffer
        base = random_array((data.size + shift,), dtype, rng)
        view = base[shift:].reshape(data.shape)
        view[...] = data
        for block in (2, 3, 4):
            for mode in ("blocks_first", "depth_first"):
                expected = ref.space_to_depth(data, mode, block) if data.shape[2] % block == 0 else None
                if expected is None:
                    continue
                got = dm.space_to_depth(view, mode, block, engine="native")
                assert same_bits(got, expected)
                assert same_bits(dm.depth_to_space(got, mode, block, engine="native"), data)
                flipped = np.empty(expected.shape, dtype)[:, :, ::-1, ::-1]
                dm.space_to_depth(view, mode, block, out=flipped, engine="native")
                assert same_bits(flipped, expected)
            args = ([1, 1, 2, block], [0, 0, 1, block - 1], [0, 0, 1, 1])
            assert same_bits(dm.space_to_batch(view, *args, engine="native"), ref.space_to_batch(data, *args))
            batched = ref.space_to_batch(data, *args)
            assert same_bits(dm.batch_to_space(batched, *args, engine="native"), data)


def test_sixteen_byte_words():
    data = (np.arange(4 * 6 * 8 * 8) + 1j).astype(np.complex128).reshape(4, 6, 8, 8)
    plan = plans.space_to_depth(data.shape, (4, 24, 4, 4), "depth_first", 2)
    out = np.empty(plan.out_shape, data.dtype)
    assert lower(data, out, *plan.copies[0], widest=16).word == 16
    assert lower(data, out, *plan.copies[0]).word == 8  # NumPy's engines stop at 8
    assert same_bits(dm.space_to_depth(data, "depth_first", 2, engine="native"), ref.space_to_depth(data, "depth_first", 2))


def test_many_python_threads_at_once():
    """8 threads calling at once, on shapes that evict each other's cached programs, against one thread's results."""
    rng = np.random.default_rng(5)
    inputs = [random_array((2, 4, 8 * k, 8 * (k + 1)), np.dtype(np.float32), rng) for k in range(1, 6)]
    calls = []
    for data in inputs:
        calls.append((dm.space_to_depth, data, ("blocks_first", 2)))
        calls.append((dm.space_to_batch, data, ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])))
        calls.append((dm.space_to_depth, data, ("depth_first", 4)))
    expected = [op(data, *args, engine="numpy") for op, data, args in calls]
    errors = []
    from datamove.arrays.caches import BoundedCache

    before = lowering._PROGRAMS
    lowering._PROGRAMS = BoundedCache(2)  # constant eviction: the races the cache must survive

    def work(seed):
        order = np.random.default_rng(seed).permutation(len(calls) * 4) % len(calls)
        try:
            for k in order:
                op, data, args = calls[k]
                if not same_bits(op(data, *args, engine="native"), expected[k]):
                    errors.append(f"mismatch in call {k}")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    try:
        run_threads(work)
    finally:
        lowering._PROGRAMS = before
    assert errors == []


def test_forked_child_after_use():
    """A child forked after large calls (DataLoader workers, multiprocessing) runs large calls with its own pool."""
    code = (
        "import os, sys, numpy as np, datamove as dm\n"
        "from datamove.engines.native import engine as native_engine\n"
        "x = np.random.default_rng(0).random((8, 16, 128, 128)).astype(np.float32)\n"
        "expected = dm.space_to_depth(x, 'blocks_first', 2, engine='numpy')\n"
        "assert (dm.space_to_depth(x, 'blocks_first', 2) == expected).all()\n"
        "assert native_engine.core().workers() >= 1\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = native_engine.core().workers() == 0\n"
        "    ok = ok and all((dm.space_to_depth(x, 'blocks_first', 2) == expected).all() for _ in range(3))\n"
        "    ok = ok and native_engine.core().workers() >= 1\n"
        "    os._exit(0 if ok else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert (dm.space_to_depth(x, 'blocks_first', 2) == expected).all()\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    assert _child(code, env={**os.environ, "DATAMOVE_NUM_THREADS": "4"}).strip() == "0"


# The four ops, with pads and crops, as a child process's `calls` (needs `dm` imported).
_FOUR_CALLS = (
    "calls = [(dm.space_to_depth, ('blocks_first', 2)), (dm.depth_to_space, ('depth_first', 2)),\n"
    "         (dm.space_to_batch, ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))),\n"
    "         (dm.batch_to_space, ((1, 1, 1, 2), (0, 0, 0, 1), (0, 0, 0, 2)))]\n"
)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_more_threads_than_cores_take_each_others_pieces():
    """Four threads on one core (the process pinned before its pool starts): the workers run late or not at all
    while the caller works, so whoever runs takes what is left of the others' shares (take_pieces), and a
    worker that wakes after the last piece is taken leaves the call alone. The four ops at sizes whose shares
    are cut into one to four pieces, streamed and stored plainly, three calls each: bit for bit the NumPy
    engine's results."""
    code = (
        "import os, time, numpy as np\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "import datamove as dm\n"
        "from datamove.engines.native import engine as native_engine\n"
        "native_engine.core()\n"
        "dm.set_num_threads(4)\n"
        "rng = np.random.default_rng(7)\n"
        + _FOUR_CALLS +
        "checked = 0\n"
        "for stream in (None, 0):\n"
        "    if stream is not None: native_engine.STREAM_BYTES = stream\n"
        "    for rows in (40, 76, 150, 300):  # 0.6 to 4.7 MiB: one to four pieces a share\n"
        "        x = rng.standard_normal((4, 16, rows, 256)).astype(np.float32)\n"
        "        for op, args in calls:\n"
        "            expected = op(x, *args, engine='numpy')\n"
        "            for k in range(3):\n"
        "                assert np.array_equal(op(x, *args, engine='native'), expected), (op.__name__, rows, k)\n"
        "                checked += 1\n"
        "                if k == 1: time.sleep(0.002)  # the workers asleep for the next call\n"
        "print(checked)\n"
    )
    assert _child(code, timeout=300).strip() == "96"


def test_the_pool_grows_while_its_first_calls_run():
    """A process's first call starts one worker and runs at once; the workers start each other (two each)
    and join the calls as they come up. The four ops' first calls with 12 threads, then with 16 (the pool
    grows again), bit for bit the NumPy engine's, and every worker asked for starts."""
    code = (
        "import time, numpy as np, datamove as dm\n"
        "from datamove.engines.native import engine as native_engine\n"
        "native_engine.STREAM_BYTES = 0\n"  # the streamed kernels too, as at 1 GiB
        "x = np.random.default_rng(3).standard_normal((4, 16, 300, 256)).astype(np.float32)\n"
        + _FOUR_CALLS +
        "expected = [op(x, *args, engine='numpy') for op, args in calls]\n"
        "def all_started(n):\n"
        "    deadline = time.monotonic() + 30\n"
        "    while native_engine.core().workers() < n and time.monotonic() < deadline: time.sleep(0.001)\n"
        "    return native_engine.core().workers()\n"
        "for threads in (12, 16):\n"
        "    dm.set_num_threads(threads)\n"
        "    for (op, args), want in zip(calls, expected):\n"
        "        assert np.array_equal(op(x, *args, engine='native'), want), (op.__name__, threads)\n"
        "    print(all_started(threads - 1))\n"
    )
    assert _child(code, timeout=300).split() == ["11", "15"]


def test_first_calls_from_many_threads_and_a_fork_while_the_pool_grows():
    """A fresh process's first calls from 8 Python threads at once (12 pool threads asked for), then a fork
    straight after a first call, while workers still start workers: every result bit for bit, the child's
    own pool grows, and nothing hangs."""
    code = (
        "import os, threading, numpy as np, datamove as dm\n"
        "from datamove.engines.native import engine as native_engine\n"
        "dm.set_num_threads(12)\n"  # (DATAMOVE_NUM_THREADS is capped to the usable cores)
        "x = np.random.default_rng(4).standard_normal((4, 16, 300, 256)).astype(np.float32)\n"
        + _FOUR_CALLS +
        "expected = [op(x, *args, engine='numpy') for op, args in calls]\n"
        "barrier, errors = threading.Barrier(8), []\n"
        "def work(k):\n"
        "    barrier.wait()\n"
        "    for j in range(4):\n"
        "        op, args = calls[(k + j) % 4]\n"
        "        if not np.array_equal(op(x, *args, engine='native'), expected[(k + j) % 4]): errors.append(k)\n"
        "threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "assert errors == [], errors\n"
        "y = x[:, :, :298]\n"  # a new shape: its first call, then the fork at once
        "want = dm.space_to_batch(y, (1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1), engine='numpy')\n"
        "assert np.array_equal(dm.space_to_batch(y, (1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1)), want)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = all(np.array_equal(op(x, *args, engine='native'), e) for (op, args), e in zip(calls, expected))\n"
        "    ok = ok and native_engine.core().workers() >= 1\n"
        "    os._exit(0 if ok else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    assert _child(code, timeout=300).strip() == "0"

def test_streamed_calls_from_a_thread_with_the_smallest_stack():
    """Python lets a thread have a 32 KiB stack (threading.stack_size); the core's streamed tiles keep their
    chunk buffers on the heap, one per thread, so a call from such a thread, which runs a part of the job
    itself, does not overflow it (with up to 20 KiB of buffers a frame on the stack, it did)."""
    code = (
        "import threading, numpy as np, datamove as dm\n"
        "from datamove.engines.native import engine as native_engine\n"
        "native_engine.core()\n"
        "native_engine.STREAM_BYTES = 0\n"
        "threading.stack_size(32768)\n"
        "x = np.random.default_rng(0).random((2, 8, 64, 512)).astype(np.float32)\n"
        + _FOUR_CALLS +
        "ok = []\n"
        "def work():\n"
        "    for threads in (1, 2):\n"
        "        dm.set_num_threads(threads)\n"
        "        for op, args in calls:\n"
        "            ok.append(np.array_equal(op(x, *args, engine='native'), op(x, *args, engine='numpy')))\n"
        "thread = threading.Thread(target=work)\n"
        "thread.start(); thread.join()\n"
        "print(len(ok), all(ok))\n"
    )
    assert _child(code).split() == ["8", "True"]


def test_num_threads_setting_and_environment():
    before = dm.get_num_threads()
    try:
        for bad in (0, -1, 1025):
            with pytest.raises(dm.DataMoveError, match=r"n must be from 1 to 1024 threads, got"):
                dm.set_num_threads(bad)
        for bad in (2.0, True, "2", None):
            with pytest.raises(TypeError, match="n must be an int"):
                dm.set_num_threads(bad)
        dm.set_num_threads(np.int64(3))
        assert dm.get_num_threads() == 3 and type(dm.get_num_threads()) is int
    finally:
        dm.set_num_threads(before)
    code = "import os, datamove as dm; print(dm.get_num_threads(), len(os.sched_getaffinity(0)))"
    env = {k: v for k, v in os.environ.items() if k != "DATAMOVE_NUM_THREADS"}
    got, cores = _child(code, env=env).split()
    assert got == cores  # the default: the cores this process may use
    got = _child(code, env={**env, "DATAMOVE_NUM_THREADS": " 1 "}).split()[0]
    assert got == "1"
    # a count over the usable cores is capped to them (more threads than cores only cost)
    assert _child(code, env={**env, "DATAMOVE_NUM_THREADS": "1024"}).split() == [cores, cores]


# Not a thread count: ignored with a warning, the default kept, for every call alike.
BAD_THREAD_COUNTS = ["0", "-1", "abc", "99999", "4.0", "1_000", "+2", "\u0663", "1025", "0x4", "many"]


@pytest.mark.parametrize("value", BAD_THREAD_COUNTS)
def test_a_bad_thread_count_in_the_environment_is_refused_once_for_every_call(value):
    """DATAMOVE_NUM_THREADS is read once, at import: a value that is not plain decimal digits from 1 to
    1024 gives one RuntimeWarning naming it and the default (the usable cores), and small calls (the NumPy
    engine) and large ones (the compiled core) both work; before, the large ones raised and the small ones
    did not."""
    code = (
        "import os, warnings, numpy as np\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import datamove as dm\n"
        "small = dm.space_to_depth(np.ones((1, 1, 4, 4)), 'blocks_first', 2)\n"
        "large = dm.space_to_depth(np.ones((2, 16, 256, 256)), 'blocks_first', 2)\n"
        "print(small.shape == (1, 4, 2, 2) and large.shape == (2, 64, 128, 128), dm.get_num_threads(),\n"
        "      len(os.sched_getaffinity(0)), [str(w.message) for w in caught if w.category is RuntimeWarning])\n"
    )
    env = {**os.environ, "DATAMOVE_NUM_THREADS": value, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                            encoding="utf-8")
    assert result.returncode == 0, result.stderr
    ok, threads, cores, rest = result.stdout.split(" ", 3)
    assert ok == "True" and threads == cores
    assert rest.count("DATAMOVE_NUM_THREADS must be plain decimal digits from 1 to 1024") == 1, rest
    assert repr(value) in rest, rest


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_default_threads_follow_the_affinity_mask():
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); import datamove as dm; print(dm.get_num_threads())"
    env = {k: v for k, v in os.environ.items() if k != "DATAMOVE_NUM_THREADS"}
    assert _child(code, env=env).strip() == "1"


def test_without_the_core_auto_runs_on_numpy_with_one_warning_and_native_names_the_fix():
    # (an install without a C++ compiler has no core: tests/test_install.py builds one and runs tests/install_smoke.py)
    code = (
        "import sys, warnings, numpy as np\n"
        "sys.modules['datamove._native'] = None  # as if the extension had not been built\n"
        "import datamove as dm\n"
        "warnings.simplefilter('always')\n"
        "x = np.arange(16 * 256 * 256, dtype=np.float32).reshape(1, 16, 256, 256)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    small = dm.space_to_depth(np.zeros((1, 1, 4, 4)), 'blocks_first', 2)  # no warning: it never needs the core\n"
        "    first = len(caught)\n"
        "    ys = [dm.space_to_depth(x, 'blocks_first', 2) for _ in range(3)]\n"
        "print(first, len(caught), caught[-1].category.__name__, caught[-1].lineno, str(caught[-1].message))\n"
        "print(all(np.array_equal(y, dm.space_to_depth(x, 'blocks_first', 2, engine='numpy')) for y in ys))\n"
        "try:\n"
        "    dm.space_to_depth(x, 'blocks_first', 2, engine='native')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    warned, same, error = _child(code, timeout=60).splitlines()
    assert warned.startswith("0 1 RuntimeWarning 10 datamove's compiled core is not loaded"), warned  # the user's line
    assert same == "True"
    assert "datamove's compiled core (datamove._native) is missing" in error and "engine='native' needs it" in error
    assert "pip install" in error and "C++17 compiler" in error


def test_malformed_programs_are_refused():
    core = native_engine.core()
    buffer = np.zeros(4, np.uint8)
    step = [0, 1, 0, 0, 0, 0, 0, 2, 1, 0, 0, 4, 1, 1]
    good = np.array([1] + step, np.int64).tobytes()
    core.run(good, buffer, buffer, 1, False)
    gather = [1, 1, 2, 0, 0, 0, 0, 2, 2, 1, 1, 1, 2, 1]  # GATHER<2>: two rows of one word
    core.run(np.array([1] + gather, np.int64).tobytes(), buffer, buffer, 1, False)
    for bad in ([], [2] + step, [1] + step[:-1], [1] + step[:1] + [3] + step[2:], [1] + [9] + step[1:],
                [1] + [1, 1, 7] + step[3:], [1] + step[:7] + [300] + step[8:], [-1],
                [1] + gather[:3] + [3] + gather[4:], [1] + gather[:3] + [-1] + gather[4:],  # rows in groups of 3 of 2
                [1] + step[:1] + [64] + step[2:], [1] + gather[:1] + [128] + gather[2:], [1] + step[:1] + [256] + step[2:]):
        with pytest.raises(ValueError, match="malformed program"):
            core.run(np.array(bad, np.int64).tobytes(), buffer, buffer, 1, False)


def test_units_programs_with_their_tables():
    """A UNITS step given in a program (SpaceToBatch of small images, datamove.engines.native.units): its loops
    [count, src_step, unit], [parts, 0, part_step], [unit, 0, 1], then each part's table (input offsets,
    or -2**31 for a zero); what it writes, and malformed ones refused."""
    core = native_engine.core()
    src = np.arange(1, 9, dtype=np.float32)
    dst = np.full(10, -1, np.float32)
    at = lambda a: a.__array_interface__["data"][0]  # noqa: E731
    zero, units = core.ZERO_WORD, core.PATTERNS["units"]
    big, parts = core.UNIT_WORDS + 1, core.MAX_PARTS
    part = core.UNIT_ENTRIES // parts + 1
    step = [units, 4, 0, 0, 0, 0, 1, 3, 2, 2, 2, 2, 0, 4, 2, 0, 1, 1, zero, 0, 1]
    for stream in (0, 2):
        dst[:] = -1
        core.run(np.array([1] + step, np.int64).tobytes(), src, dst, 1, stream)
        assert dst.tolist() == [-1, 2, 0, 4, 0, 1, 2, 3, 4, -1]
    bad = [step[:-1], step[:7] + [2] + step[8:14] + step[17:],  # the tables cut short; two loops
           step[:1] + [2] + step[2:], step[:1] + [16] + step[2:],  # words of 2 and 16 bytes
           step[:10] + [3] + step[11:], step[:15] + [1] + step[16:],  # the units not one after another; l0.s
           step[:11] + [0] + step[12:], step[:11] + [65] + step[12:] + [0] * 126,  # no parts; more than 64
           step[:17] + [core.TABLE_REACH] + step[18:],  # an offset past the tables' reach (2**28)
           [units, 4, 0, 0, 0, 0, 0, 3, 1, 0, big, 1, 0, 0, big, 0, 1] + [0] * big,  # a unit over UNIT_WORDS
           [units, 4, 0, 0, 0, 0, 0, 3, 1, 0, part, parts, 0, part, part, 0, 1] + [0] * (parts * part),  # over UNIT_ENTRIES
           step[:17] + [-(2**63)] + step[18:], step[:9] + [2**62] + step[10:]]  # the farthest offset; a unit's step
    for program in bad:
        with pytest.raises(ValueError, match="malformed program"):
            core.run(np.array([1] + program, np.int64).tobytes(), src, dst, 1, 0)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.complex128])
def test_which_programs_stream_and_what_they_write(monkeypatch, dtype):
    """Streaming stores only where every piece streams whole (4-byte aligned, 4-byte multiples: no plain
    head or tail in a line; a gather tile's rows on a line, unless they go on from each other past at most
    kJoinedStreams rows, or 16 rows of runs from 4 KiB), and then bit for bit what plain stores write,
    windows included."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    rng = np.random.default_rng(7)
    words = 1024 // np.dtype(dtype).itemsize  # output rows of 1 KiB
    cases = [  # (op, input, args, streams when the output is 16-byte aligned)
        ("space_to_depth", (2, 3, 8, 2 * words), ("blocks_first", 2), True),  # 2 x 2 rows go on: side_joined
        ("space_to_depth", (2, 3, 8, 4 * words), ("blocks_first", 4), True),  # 4 x 4 rows, runs from 4 KiB: joined
        ("space_to_depth", (2, 3, 4, words), ("blocks_first", 4), True),  # 4 x 4 rows of 768-byte runs: not
        ("space_to_batch", (2, 3, 6, 2 * words - 2), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), True),  # gather windows
        ("batch_to_space", (4, 3, 4, words // 2 + 2), ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 4]), True),  # scatter windows
        ("batch_to_space", (4, 3, 4, words // 2 + 2), ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 3]),
         np.dtype(dtype).itemsize >= 4),  # odd rows: 4-byte multiples only for items of 4 bytes or more
        # 4-item rows: a line, or 16-byte rows of 4-byte words from a table, on every CPU (table_of takes rows
        # under 64 bytes with AVX-512F, table_lines; under 24 without, table_words)
        ("space_to_depth", (2, 16, 8, 8), ("depth_first", 2), np.dtype(dtype).itemsize in (4, 16)),
    ]
    for op, shape, args, whole in cases:
        data = random_array(shape, np.dtype(dtype), rng)
        expected = getattr(dm, op)(data, *args, engine="numpy")
        for offset in (0, 1):  # the output on a line, and one item off
            base = np.zeros(expected.size + 64, dtype)
            start = (-base.__array_interface__["data"][0] % 64) // base.itemsize + offset
            out = base[start: start + expected.size].reshape(expected.shape)
            plan = getattr(plans, op)(data.shape, expected.shape, *[tuple(a) if isinstance(a, list) else a for a in args])
            program = lowering.program(plan, data, out)
            # a gather's rows stream from anywhere when they go on from each other (put_lines stores their
            # partial end lines plainly), and only from a line when not (SpaceToDepth with block 4, short runs); the
            # others from 4-byte aligned starts
            aligned = (offset == 0 if shape[2] == 4 else True) if op == "space_to_depth" \
                else offset * np.dtype(dtype).itemsize % 4 == 0
            assert core.streams(program, strided._address(out)) == (whole and aligned), (op, args, offset)
            getattr(dm, op)(data, *args, out=out, engine="native")
            assert same_bits(out, expected), (op, args, offset)


def _steps(program):
    """The steps of a core program: (pattern, word, block, loops as [count, src, dst] outermost first)."""
    a = np.frombuffer(program, np.int64)
    steps, i = [], 1
    for _ in range(a[0]):
        pattern, word, block, nloops = int(a[i]), int(a[i + 1]), int(a[i + 2]), int(a[i + 7])
        loops = a[i + 8: i + 8 + 3 * nloops].reshape(-1, 3).tolist()
        steps.append((pattern, word, block, loops))
        i += 8 + 3 * nloops + (loops[1][0] * loops[2][0] if pattern == 7 else 0)  # (UNITS: then its tables)
    return steps


@contextlib.contextmanager
def _threads(count):
    """The core's thread count set to ``count`` for a block, then set back."""
    before = dm.get_num_threads()
    dm.set_num_threads(count)
    try:
        yield
    finally:
        dm.set_num_threads(before)


def _outs_at_offsets(expected, offsets):
    """``out`` arrays shaped like ``expected``, each ``offset`` bytes into a line of a zeroed buffer with 64
    spare bytes on each side: ``(offset, out, written_outside)``, the last a function saying whether
    anything beyond ``out`` was written."""
    for offset in offsets:
        base = np.zeros(expected.nbytes + 128, np.uint8)
        start = -base.__array_interface__["data"][0] % 64 + offset
        out = base[start: start + expected.nbytes].view(expected.dtype).reshape(expected.shape)
        yield offset, out, lambda base=base, start=start: base[:start].any() or base[start + expected.nbytes:].any()


def _item_offsets(item):
    """Offsets into a line: every 4 bytes (every item from 8 bytes), and for bytes a few odd ones."""
    return range(0, 64, max(item, 4)) if item > 1 else [0, 1, 3, 16, 17, 63]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64])
@pytest.mark.parametrize("block, pads, width", [(2, (1, 1), 2 * 64 - 2), (2, (0, 2), 2 * 300), (3, (1, 2), 3 * 100 - 3),
                                                (4, (3, 1), 4 * 70 - 4)])
def test_streamed_gather_windows_taken_as_runs(streaming, threads, dtype, block, pads, width):
    """SpaceToBatch NCHW with pads: gather windows whose output rows go on from each other, right outside
    the tile (block on W only) or past the block's row loop (block on H and W: side_joined), are streamed
    a run at a time through the L1 buffer, pads included: bit for bit the spec's result and nothing outside
    it at any item offset into a line, rows cut among threads anywhere."""
    core = native_engine.core()
    with _threads(threads):
        rng = np.random.default_rng(width)
        data = random_array((2, 3, 2 * 5, width), np.dtype(dtype), rng)
        for hb in ([1, 1, 1, block], [1, 1, 2, block]) if block < 4 else ([1, 1, 2, block],):
            args = (hb, [0, 0, 0, pads[0]], [0, 0, 0, pads[1]])
            expected = ref.space_to_batch(data, *args)
            plan = plans.space_to_batch(data.shape, expected.shape, tuple(hb), tuple(args[1]), tuple(args[2]))
            item = np.dtype(dtype).itemsize
            for offset, out, written_outside in _outs_at_offsets(expected, _item_offsets(item)):
                program = lowering.program(plan, data, out)
                steps = _steps(program)
                windows = [loops for pattern, _, b, loops in steps if pattern == lowering._PATTERNS["gather_window"]]
                assert windows and all(len(l) >= 3 for l in windows)
                if hb[2] == 1:  # the loop right outside the tile goes on where its rows stop
                    assert any(l[-3][2] == l[-1][0] for l in windows)
                else:  # one loop further out, past the block's row loop
                    assert any(l[-3][2] != l[-1][0] and l[-4][2] == l[-1][0] for l in windows)
                if item >= 4 or offset % 4 == 0 and expected.shape[-1] * item % 4 == 0:  # (put_bytes: 4-byte words)
                    assert core.streams(program, strided._address(out)), offset
                dm.space_to_batch(data, *args, out=out, engine="native")
                assert same_bits(out, expected), (hb, offset)
                assert not written_outside(), offset


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, channels", [(np.float32, 8), (np.float32, 4), (np.float32, 2), (np.float64, 4),
                                             (np.float64, 2), (np.uint8, 16), (np.uint16, 4), (np.complex128, 2),
                                             (np.float16, 8), (np.float32, 16), (np.float32, 32), (np.uint8, 64),
                                             (np.complex128, 8)])
@pytest.mark.parametrize("layout", ["tf", "channels_last"])
def test_gather_windows_of_pixels(windows, monkeypatch, stream, threads, dtype, channels, layout):
    """SpaceToBatch of channels-last data (TensorFlow's NHWC, or NCHW stored channels-last) with pads on
    the blocked axes: each window position is a pixel of 2 to 128 bytes, one word, so the pads of the
    last blocked axis are written in the copy's pass. Bit for bit the spec's result and nothing outside
    ``out`` at offsets 0-48 bytes into a line, blocks 2-4 and 5 (the generic window), plain and streamed,
    rows cut among threads anywhere."""
    native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(channels * item)
    with _threads(threads):
        for block, pads, width in [(2, (1, 1), 2 * 20 - 2), (3, (1, 2), 3 * 9 - 3), (4, (3, 1), 4 * 6 - 4), (5, (2, 3), 5 * 4 - 5)]:
            nchw = random_array((2, channels, 2 * 3 - 1, width), np.dtype(dtype), rng)
            if layout == "tf":
                data = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))
                args = ([1, 2, block, 1], [0, 1, pads[0], 0], [0, 0, pads[1], 0])
            else:
                data = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
                args = ([1, 1, 2, block], [0, 0, 1, pads[0]], [0, 0, 0, pads[1]])
            expected = ref.space_to_batch(data, *args)
            plan = plans.space_to_batch(data.shape, expected.shape, *map(tuple, args))
            for offset in (0, 16, 32, 48):
                base = np.zeros(expected.nbytes + 128, np.uint8)
                start = -base.__array_interface__["data"][0] % 64 + offset
                out = base[start:start + expected.nbytes].view(dtype)
                if layout == "tf":
                    out = out.reshape(expected.shape)
                else:  # NCHW stored channels-last, as the data
                    out = out.reshape((expected.shape[0],) + expected.shape[2:] + (channels,)).transpose(0, 3, 1, 2)
                windows = [(word, loops) for pattern, word, _, loops in _steps(lowering.program(plan, data, out))
                           if pattern == lowering._PATTERNS["gather_window"]]
                assert windows and all(word == channels * item for word, _ in windows), windows
                dm.space_to_batch(data, *args, out=out, engine="native")
                assert same_bits(out, expected), (block, offset)
                assert not base[:start].any() and not base[start + expected.nbytes:].any(), offset


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, channels", [(np.float32, 8), (np.int64, 8), (np.float32, 32), (np.uint8, 32),
                                             (np.complex64, 16)])
def test_windows_of_wide_pixels_streamed_at_any_offset(windows, monkeypatch, threads, dtype, channels):
    """Streamed gather windows of 32-, 64- and 128-byte pixels go straight from registers (gather_pixel_lines)
    at every offset into a line they are lowered at (16 bytes: lower_window; at others, other steps): each
    row's vectors shifted to dst's lines, pads as zeros, odd counts of 32-byte pixels (the last one stored
    plainly), one row or runs of rows, block rows side by side, two rows of 32-byte pixels at once (blocks
    of 2, rows of an even count); bit for bit the spec's result and nothing outside out."""
    native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(channels * item + 1)
    with _threads(threads):
        for blocks, pads_begin, pads_end, hw in [((2, 2), (1, 1), (1, 1), (2 * 9 - 2, 2 * 21 - 2)),
                                                 # even rows (22 positions): 32-byte pixels two rows at a time
                                                 ((2, 2), (1, 1), (1, 1), (2 * 9 - 2, 2 * 22 - 2)),
                                                 ((2, 2), (0, 3), (2, 1), (2 * 9 - 2, 2 * 22 - 4)),
                                                 ((1, 3), (0, 2), (0, 2), (5, 3 * 11 - 4)),
                                                 ((2, 4), (1, 3), (1, 2), (2 * 4 - 2, 4 * 7 - 5))]:
            data = random_array((3,) + hw + (channels,), np.dtype(dtype), rng)  # TensorFlow's NHWC
            args = ([1, *blocks, 1], [0, *pads_begin, 0], [0, *pads_end, 0])
            expected = ref.space_to_batch(data, *args)
            plan = plans.space_to_batch(data.shape, expected.shape, *map(tuple, args))
            for offset in (0, 16, 32, 48, 4, 40, 1):
                base = np.zeros(expected.nbytes + 128, np.uint8)
                start = -base.__array_interface__["data"][0] % 64 + offset
                out = base[start:start + expected.nbytes].view(dtype).reshape(expected.shape)
                program = lowering.program(plan, data, out)
                assert any(pattern == lowering._PATTERNS["gather_window"] and word == channels * item
                           for pattern, word, _, _ in _steps(program)) == (offset % 16 == 0)
                dm.space_to_batch(data, *args, out=out, engine="native")
                assert same_bits(out, expected), (blocks, offset)
                assert not base[:start].any() and not base[start + expected.nbytes:].any(), offset


@pytest.mark.parametrize("level", ["sse2", "avx2"])
def test_windows_of_pixels_streamed_without_avx512(monkeypatch, level):
    """Below AVX-512 (at each such level this CPU has), streamed gather windows of 16- to 128-byte pixels go
    straight from src to dst a pixel at a time (gather_pixels), 16 bytes a streaming store (16-byte pixels at
    AVX2: two a 32-byte store, pixel_pairs, the first and last alone off 32 bytes), and count as
    streaming from registers (stream=1 takes them): pads as zeros, one row or runs of rows, block rows side
    by side, dst 0-48 bytes into a line, rows cut among 1 or 3 threads; bit for bit the spec's result and
    nothing outside out. The core says that at these levels large outputs run with stream=1 (STAGED_STREAMS)."""
    core = _core_at(level)
    assert core.STAGED_STREAMS == 0
    native_engine.core()
    monkeypatch.setattr(native_engine, "_native", core)
    monkeypatch.setattr(native_engine, "RUN_MODES", (0, 1, 1))  # (as the core's STAGED_STREAMS has it)
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    rng = np.random.default_rng(7)
    compared = 0
    for dtype, channels in [(np.float32, 4), (np.float32, 8), (np.int64, 8), (np.uint8, 32), (np.complex64, 16)]:
        item = np.dtype(dtype).itemsize
        for blocks, pads_begin, pads_end, hw in [((2, 2), (1, 1), (1, 1), (64, 2 * 127 - 2)),
                                                 ((1, 3), (0, 2), (0, 2), (64, 3 * 85 - 4)),
                                                 ((2, 4), (1, 3), (1, 2), (64, 4 * 64 - 5))]:
            # channels-last: blocks on H and W of NCHW, the pixel innermost in memory (the out= likewise); images
            # of 64 x 251 and more (smaller ones of 4 channels move as units from tables, not windows)
            nhwc = random_array((2,) + hw + (channels,), np.dtype(dtype), rng)
            data = nhwc.transpose(0, 3, 1, 2)
            args = ([1, 1, *blocks], [0, 0, *pads_begin], [0, 0, *pads_end])
            expected = ref.space_to_batch(data, *args)
            plan = plans.space_to_batch(data.shape, expected.shape, *map(tuple, args))
            shape = (expected.shape[0],) + expected.shape[2:] + (channels,)
            for offset in (0, 16, 32, 48):
                base = np.zeros(expected.nbytes + 128, np.uint8)
                start = -base.__array_interface__["data"][0] % 64 + offset
                out = base[start:start + expected.nbytes].view(dtype).reshape(shape).transpose(0, 3, 1, 2)
                program = lowering.program(plan, data, out, stream=1)
                windows = [word for pattern, word, _, _ in _steps(program)
                           if pattern == lowering._PATTERNS["gather_window"]]
                assert channels * item in windows, windows
                assert core.streams(program, strided._address(out), True)  # from registers
                for threads in (1, 3):
                    out[...] = 0
                    with _threads(threads):
                        dm.space_to_batch(data, *args, out=out, engine="native")
                    assert same_bits(out, expected), (dtype, channels, blocks, offset, threads)
                    assert not base[:start].any() and not base[start + expected.nbytes:].any(), offset
                    compared += 1
    assert compared == 5 * 3 * 4 * 2


def _register_streams_at(monkeypatch, level):
    """The core at ``level`` (``_core_at``) running every call, however small, in stream mode 1: streamed
    only where every step streams straight from registers (below the last-level cache's size)."""
    core = _core_at(level)
    native_engine.core()
    monkeypatch.setattr(native_engine, "_native", core)
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 1 << 40)
    monkeypatch.setattr(native_engine, "REGISTER_STREAM_BYTES", 0)
    return core


@pytest.mark.parametrize("level", ["avx2", "avx512f", "avx512"])
def test_windows_without_pads_stream_as_gathers(monkeypatch, level):
    """SpaceToBatch without pads lowers to gather windows that pad nothing; they go as plain gathers go: at
    AVX2 (and AVX-512F without BW and VBMI), whose line kernel takes no padded window of 1- or 2-byte words,
    such windows of rows of a line or more stream from registers (gather_lines_avx2), where they went
    through the L1 buffer, stored plainly, below the last-level cache's size ([4,32,256,1024] uint8 with a
    4 x 4 block, 32 MiB, at AVX2: 1.11-1.44x the copy floor -> 0.85-0.87x); a window with pads there does
    not. Bit for bit the spec's result, nothing outside out, at several offsets, rows cut among 1 or 3 threads."""
    core = _register_streams_at(monkeypatch, level)
    rng = np.random.default_rng(11)
    for dtype in (np.uint8, np.uint16):
        item = np.dtype(dtype).itemsize
        for blocks in ((1, 1, 2, 2), (1, 1, 4, 4), (1, 1, 1, 4)):
            data = random_array((2, 3, 4 * blocks[2], 3 * 64 // item * blocks[3]), np.dtype(dtype), rng)  # rows of 3 lines
            for pads in ((0, 0, 0, 0), (0, 0, 0, blocks[3])):
                args = (blocks, pads, (0, 0, 0, 0))
                expected = ref.space_to_batch(data, *args)
                plan = plans.space_to_batch(data.shape, expected.shape, *args)
                for offset, out, outside in _outs_at_offsets(expected, (0, 16)):
                    program = lowering.program(plan, data, out, stream=1)
                    registers = core.streams(program, strided._address(out), True)
                    if not any(pads):
                        assert registers == bool(core.GATHER_NARROW_LINES), (dtype, blocks, offset)
                    elif not core.WHOLE_NARROW_LINES:  # (AVX2's line kernel: no padded window of narrow words)
                        assert not registers, (dtype, blocks, pads, offset)
                    for threads in (1, 3):
                        out[...] = 0
                        with _threads(threads):
                            dm.space_to_batch(data, *args, out=out, engine="native")
                        assert same_bits(out, expected) and not outside(), (dtype, blocks, pads, offset, threads)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, channels, block", [
    (np.uint8, 3, 3), (np.uint8, 3, 4), (np.uint8, 1, 3), (np.uint8, 2, 4), (np.uint8, 4, 3), (np.uint8, 7, 2),
    (np.uint16, 3, 3), (np.float16, 2, 4), (np.bool_, 3, 3), (np.int8, 5, 3)])
def test_narrow_gather_tiles_as_units_of_output(threads, dtype, channels, block):
    """Channels-last SpaceToDepth depth_first of a few narrow channels: each output pixel is a unit that the
    gather tiles of its block's rows fill densely (units_of), made G units a vector by byte permutes
    (gather_unit_rows, plainly stored). Bit for bit the spec's result and nothing outside out, at any byte
    offset, flipped and strided inputs, rows cut among threads anywhere (partial blocks by run_rows), and
    whole vectors loaded and stored only inside the rows and the units (the rest masked)."""
    native_engine.core()
    rng = np.random.default_rng(channels * block)
    with _threads(threads):
        for h, w in [(block * 5, block * 23), (block, block * 2), (block * 3, block * 41)]:
            nhwc = random_array((3, h, w + block, channels), np.dtype(dtype), rng)
            for data in (nhwc[:, :, :w].transpose(0, 3, 1, 2), nhwc[:, ::-1, :w].transpose(0, 3, 1, 2),
                         np.ascontiguousarray(nhwc[:, :, :w]).transpose(0, 3, 1, 2)):
                expected = ref.space_to_depth(data, "depth_first", block)
                n, c, oh, ow = expected.shape
                for offset in (0, 1, 5, 16, 33):
                    base = np.zeros(expected.nbytes + 128, np.uint8)
                    start = -base.__array_interface__["data"][0] % 64 + offset
                    out = base[start:start + expected.nbytes].view(dtype).reshape(n, oh, ow, c).transpose(0, 3, 1, 2)
                    dm.space_to_depth(data, "depth_first", block, out=out, engine="native")
                    assert same_bits(out, expected), (h, w, offset)
                    assert not base[:start].any() and not base[start + expected.nbytes:].any(), offset


_GUARDED = """
import ctypes, mmap, sys
import numpy as np, datamove as dm
from datamove.engines.native import engine as native_engine
native_engine.core()
native_engine.STREAM_BYTES = 0  # every output streamed
libc = ctypes.CDLL(None)
page = mmap.PAGESIZE
def guarded(shape, dtype, layout):
    # an array whose last byte is the last byte before a page that may not be read
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    pages = -(-nbytes // page) + 1
    m = mmap.mmap(-1, pages * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    assert libc.mprotect(ctypes.c_void_p(base + (pages - 1) * page), page, 0) == 0  # PROT_NONE
    flat = np.frombuffer(m, np.uint8, nbytes, (pages - 1) * page - nbytes).view(dtype)
    if layout == "nhwc":
        n, c, h, w = shape
        return flat.reshape(n, h, w, c).transpose(0, 3, 1, 2), m
    return flat.reshape(shape), m
rng = np.random.default_rng(0)
for op, shape, args, layout, dtype in CASES:
    data, keep = guarded(shape, dtype, layout)
    data[...] = rng.integers(0, 100, shape)
    expected = getattr(dm, op)(np.array(data), *args, engine="numpy")
    n, c, *space = expected.shape
    for threads, offset in [(t, o) for t in (1, 2) for o in (0, 16, 32, 48)]:  # (where the output's lines start)
        dm.set_num_threads(threads)
        buf = np.empty(expected.nbytes + 128, np.uint8)
        start = -buf.ctypes.data % 64 + offset
        flat = buf[start:start + expected.nbytes].view(dtype)
        out = flat.reshape(n, *space, c).transpose(0, 3, 1, 2) if layout == "nhwc" else flat.reshape(expected.shape)
        getattr(dm, op)(data, *args, out=out, engine="native")
        assert np.array_equal(out, expected), (op, shape, args, offset)
print("ok")
"""


def test_no_read_past_the_input():
    """The streamed kernels that load whole vectors (pixel tiles' lines, whole-line gathers and scatters)
    read nothing past the input's last byte: inputs that end right before a page that may not be read,
    at every pass's start (DepthToSpace depth_first NHWC reads each pixel twice, from 0 and from 2 words
    in) and every output offset into a line (which decides where a run's whole lines end), give the NumPy
    engine's result and no crash (in a child process)."""
    pads = ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])
    cases = [("depth_to_space", (2, 8, 5, 12), ("depth_first", 2), "nhwc", "float32"),
             ("depth_to_space", (2, 16, 5, 12), ("depth_first", 2), "nhwc", "float32"),
             ("depth_to_space", (2, 16, 3, 37), ("blocks_first", 2), "nchw", "float32"),
             ("depth_to_space", (2, 16, 3, 37), ("blocks_first", 2), "nchw", "float64"),
             ("depth_to_space", (2, 16, 3, 70), ("blocks_first", 2), "nchw", "uint8"),
             ("space_to_depth", (2, 2, 6, 40), ("depth_first", 2), "nhwc", "float32"),
             ("space_to_depth", (2, 3, 6, 72), ("blocks_first", 2), "nchw", "float32"),
             ("space_to_depth", (2, 3, 6, 200), ("blocks_first", 2), "nchw", "uint8"),
             ("space_to_depth", (2, 3, 6, 72), ("blocks_first", 2), "nchw", "float64"),
             ("batch_to_space", (4, 3, 5, 40), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 0, 1]), "nchw", "float32"),
             ("space_to_batch", (1, 3, 6, 62), pads, "nchw", "float32"),
             ("space_to_batch", (1, 3, 6, 190), pads, "nchw", "uint16"),
             ("space_to_batch", (2, 6, 30, 8), ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0]), "nchw", "float32"),  # TF NHWC
             ("space_to_batch", (2, 6, 30, 4), ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0]), "nchw", "float32"),  # 16-byte pixels
             ("space_to_batch", (2, 6, 30, 2), ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0]), "nchw", "float64"),
             ("space_to_batch", (2, 6, 30, 16), ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0]), "nchw", "float32"),  # 64 bytes
             ("space_to_batch", (1, 16, 6, 62), pads, "nhwc", "float64"),  # 128-byte pixels
             ("space_to_batch", (1, 4, 6, 62), pads, "nhwc", "float32"),
             ("depth_to_space", (2, 64, 3, 9), ("blocks_first", 2), "nhwc", "float32"),  # rows of tiles' chunks
             ("depth_to_space", (2, 256, 2, 5), ("blocks_first", 2), "nhwc", "float32"),
             ("batch_to_space", (4, 16, 3, 20), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 0, 1]), "nhwc", "float32"),
             ("depth_to_space", (2, 64, 3, 7), ("depth_first", 2), "nhwc", "float32"),  # chained_lines
             ("space_to_depth", (2, 3, 9, 30), ("depth_first", 3), "nhwc", "uint8"),  # gather_units
             ("space_to_depth", (2, 2, 8, 40), ("depth_first", 4), "nhwc", "uint8"),
             ("space_to_depth", (2, 3, 6, 36), ("depth_first", 3), "nhwc", "uint16"),
             ("depth_to_space", (2, 128, 3, 7), ("depth_first", 4), "nhwc", "float32"),  # strided_lines
             ("space_to_depth", (2, 4, 6, 33), ("depth_first", 3), "nhwc", "float32"),  # table_lines
             ("space_to_batch", (1, 3, 6, 62), pads, "nhwc", "float32"),
             ("depth_to_space", (2, 9, 3, 41), ("blocks_first", 3), "nhwc", "float64"),
             ("depth_to_space", (2, 16, 3, 20), ("blocks_first", 2), "nhwc", "float32"),  # stream_small_chunks
             ("depth_to_space", (2, 8, 3, 40), ("blocks_first", 2), "nhwc", "float32"),
             ("space_to_batch", (1, 3, 6, 62), pads, "nhwc", "uint8"),  # pixel_rows: 3-byte pixels
             ("space_to_batch", (1, 3, 6, 60), ([1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 0]), "nhwc", "uint16"),
             ("batch_to_space", (4, 3, 5, 40), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 0, 1]), "nhwc", "uint8"),  # interleave_rows
             ("batch_to_space", (6, 5, 4, 30), ([1, 1, 2, 3], [0, 0, 0, 1], [0, 0, 1, 0]), "nhwc", "uint8"),
             ("batch_to_space", (4, 3, 5, 40), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 0, 0]), "nhwc", "uint8"),
             ("space_to_depth", (2, 3, 6, 40), ("depth_first", 2), "nhwc", "uint8"),  # interleave_rows' scatters
             ("depth_to_space", (2, 12, 3, 20), ("depth_first", 2), "nhwc", "uint8"),
             ("depth_to_space", (2, 27, 3, 20), ("depth_first", 3), "nhwc", "float16")]
    assert _child(_GUARDED.replace("CASES", repr(cases))).strip() == "ok"


def test_windows_of_pixels_only_where_the_core_takes_them():
    """Pixels of 2 to 128 bytes lower to windows in SpaceToBatch, of 2 to 16 bytes in BatchToSpace; pixels
    over that or not a power of two lower to None (the copies then run)."""
    from lowering.strided import lower_window

    def nest(op, shape, channels, dtype=np.float32):
        data = np.zeros(shape + (channels,), dtype)
        args = ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0])
        out_shape = getattr(shapes, op)(data.shape, *args)
        plan = getattr(plans, op)(data.shape, out_shape, *map(tuple, args))
        assert plan.windows and all(w.trailing == 2 for w in plan.windows)
        return [lower_window(data, np.zeros(out_shape, dtype), w) for w in plan.windows]

    assert all(n is not None and n.word == 32 for n in nest("space_to_batch", (1, 6, 6), 8))
    assert all(n is not None and n.word == 16 for n in nest("space_to_batch", (1, 6, 6), 2, np.float64))
    assert all(n is not None and n.word == 64 for n in nest("space_to_batch", (1, 6, 6), 16))
    assert all(n is not None and n.word == 128 for n in nest("space_to_batch", (1, 6, 6), 16, np.float64))
    assert all(n is None for n in nest("space_to_batch", (1, 6, 6), 64))  # 256 bytes
    assert all(n is None for n in nest("space_to_batch", (1, 6, 6), 12))  # 48 bytes
    assert all(n is None for n in nest("space_to_batch", (1, 6, 6), 3))  # 12 bytes
    assert all(n is not None and n.word == 16 for n in nest("batch_to_space", (4, 4, 4), 4))  # 16-byte pixels
    assert all(n is not None and n.word == 8 for n in nest("batch_to_space", (4, 4, 4), 2))
    assert all(n is None for n in nest("batch_to_space", (4, 4, 4), 8))  # 32 bytes: the copies
    assert all(n is None for n in nest("batch_to_space", (4, 4, 4), 3))  # 12 bytes
    assert all(n is not None and n.word == 4 for n in nest("batch_to_space", (4, 4, 4), 1))  # one item: as NCHW


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, width", [(np.uint8, 2 * 201), (np.uint16, 2 * 37), (np.float32, 2 * 64),
                                          (np.float32, 2 * 700), (np.float64, 2 * 9), (np.complex128, 2 * 33)])
@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_streamed_gather_rows_that_go_on_past_the_block_row_loop(streaming, threads, dtype, width, mode):
    """SpaceToDepth NCHW with block 2: the loop over the block's row offset lies between the gather tile
    and the loop over rows, whose output rows go on from each other (side_joined). Streamed, the four
    rows of each input row pair fill the L1 buffer side by side and stream at any 4-byte offset into a
    line (or, for odd row sizes, any item offset), bit for bit the spec's result and nothing outside it,
    with rows of 9 to 700 words, cut among threads anywhere (a thread's first and last side loops may be
    partial)."""
    core = native_engine.core()
    with _threads(threads):
        rng = np.random.default_rng(width)
        data = random_array((2, 3, 2 * 7, width), np.dtype(dtype), rng)
        expected = ref.space_to_depth(data, mode, 2)
        plan = plans.space_to_depth(data.shape, expected.shape, mode, 2)
        for offset, out, written_outside in _outs_at_offsets(expected, _item_offsets(np.dtype(dtype).itemsize)):
            program = lowering.program(plan, data, out)
            (pattern, _, block, loops), = _steps(program)
            assert (pattern, block) == (lowering._PATTERNS["gather"], 2)
            assert loops[-3][2] != loops[-1][0] and loops[-4][2] == loops[-1][0]  # rows go on past one loop
            assert core.streams(program, strided._address(out)), offset
            dm.space_to_depth(data, mode, 2, out=out, engine="native")
            assert same_bits(out, expected), offset
            assert not written_outside(), offset


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, width", [
    (np.float32, 48), (np.uint8, 192), (np.uint16, 96), (np.float32, 3 * 37), (np.float64, 48)])
def test_streamed_gather_rows_that_go_on_are_streamed_as_one_run(streaming, threads, dtype, width):
    """Streamed gathers whose output rows go on from each other on the loop just outside the tile (SpaceToDepth
    blocks_first of a view into wider rows: its rows over C, which do not merge with the tile's) fill the L1
    buffer from many tiles at once: they stream at every offset in a line, and write bit for bit the spec's
    result and nothing outside it, rows cut among threads anywhere."""
    core = native_engine.core()
    with _threads(threads):
        rng = np.random.default_rng(width)
        data = random_array((4, 33, width + 3), np.dtype(dtype), rng)[..., :width]
        expected = ref.space_to_depth(data, "blocks_first", 3)
        plan = plans.space_to_depth(data.shape, expected.shape, "blocks_first", 3)
        for offset, out, written_outside in _outs_at_offsets(expected, range(0, 64, max(4, data.itemsize))):
            program = lowering.program(plan, data, out)
            (pattern, _, block, loops), = _steps(program)
            assert (pattern, block) == (lowering._PATTERNS["gather"], 3)  # a gather tile
            assert loops[-3][2] == loops[-1][0]  # the loop around it goes on where its rows stop
            assert core.streams(program, strided._address(out)), offset
            dm.space_to_depth(data, "blocks_first", 3, out=out, engine="native")
            assert same_bits(out, expected), offset
            assert not written_outside(), offset


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, channels", [
    (np.float32, 16), (np.float32, 32), (np.int32, 48), (np.float64, 8), (np.complex128, 8), (np.complex64, 24)])
def test_streamed_gather_rows_in_chains(streaming, threads, dtype, channels):
    """DepthToSpace depth_first channels-last with a 2 x 2 block, output pixels of whole lines (64 bytes or
    a multiple): a gather tile's rows are output pixels, j = 0 and 1 next to each other and the next tile's
    after them (chained_rows). Where the CPU has AVX-512F they stream straight from registers at any offset
    into a line (chained_lines: each line from the two vectors around it, a chain's end lines stored
    plainly), and where it has AVX2 those of 4- and 8-byte words do (chained_lines_avx2, 32 bytes a store). Bit for bit the spec's result and nothing outside it, inputs reversed along W included, rows
    cut among threads anywhere."""
    core = native_engine.core()
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(channels * threads)
    nhwc = random_array((3, 5, 37, 4 * channels), np.dtype(dtype), rng)
    with _threads(threads):
        for data in (nhwc.transpose(0, 3, 1, 2), nhwc.transpose(0, 3, 1, 2)[..., ::-1]):
            expected = ref.depth_to_space(data, "depth_first", 2)
            plan = plans.depth_to_space(data.shape, expected.shape, "depth_first", 2)
            last = np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out.transpose(0, 3, 1, 2)
                program = lowering.program(plan, data, out)
                (pattern, _, block, loops), = _steps(program)
                assert (pattern, block) == (lowering._PATTERNS["gather"], 4)
                if core.WHOLE_LINES or (core.GATHER_LINES and item in (4, 8)):
                    assert core.streams(program, strided._address(out), True), offset
                dm.depth_to_space(data, "depth_first", 2, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, block, channels", [
    (np.float32, 4, 64), (np.float32, 4, 8), (np.float32, 3, 16), (np.int32, 4, 32), (np.float64, 4, 8),
    (np.float64, 3, 8), (np.complex64, 5, 24)])
def test_strided_tiles_a_line_at_a_time(monkeypatch, stream, threads, dtype, block, channels):
    """DepthToSpace depth_first channels-last with blocks of 3 or more: STRIDED tiles (a block row's pixels,
    each pixel's channels read block * block words apart) whose rows follow each other in dst. Where the
    CPU has AVX-512F each output line is one gather instruction (strided_lines: rows of a line or more, or
    lines of several whole rows), stored plainly or streamed at any offset into a line (then shifted to
    dst's lines, the run's two end lines stored plainly). Bit for bit the spec's result and nothing outside
    it, inputs reversed along W included, rows cut among threads anywhere."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(channels * threads + block)
    nhwc = random_array((3, 5, 21, block * block * channels), np.dtype(dtype), rng)
    with _threads(threads):
        for data in (nhwc.transpose(0, 3, 1, 2), nhwc.transpose(0, 3, 1, 2)[..., ::-1]):
            expected = ref.depth_to_space(data, "depth_first", block)
            plan = plans.depth_to_space(data.shape, expected.shape, "depth_first", block)
            last = np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out.transpose(0, 3, 1, 2)
                program = lowering.program(plan, data, out)
                assert [step[0] for step in _steps(program)] == [lowering._PATTERNS["strided"]]
                if core.WHOLE_LINES and stream:
                    assert core.streams(program, strided._address(out)), offset
                dm.depth_to_space(data, "depth_first", block, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("op, dtype, block, channels", [
    ("space_to_depth", np.float32, 3, 16), ("space_to_depth", np.float32, 4, 32), ("space_to_depth", np.float64, 3, 8),
    ("space_to_depth", np.float32, 3, 4), ("space_to_depth", np.float64, 3, 2), ("space_to_depth", np.float32, 3, 3),
    ("space_to_depth", np.float32, 4, 4), ("space_to_depth", np.float32, 4, 2),
    ("depth_to_space", np.float32, 3, 4), ("depth_to_space", np.int32, 3, 2), ("depth_to_space", np.float32, 2, 3),
    ("space_to_depth", np.int32, 5, 16), ("depth_to_space", np.float32, 3, 8), ("depth_to_space", np.float64, 3, 6),
    ("depth_to_space", np.int32, 5, 8), ("depth_to_space", np.complex64, 3, 6)])
def test_strided_units_from_a_table(monkeypatch, stream, threads, op, dtype, block, channels):
    """Channels-last SpaceToDepth depth_first (a pixel's channels, block rows and columns) and DepthToSpace
    depth_first with blocks of 3 and a few channels: STRIDED tiles, or block tiles of 3 rows or positions (a
    3 x 3 block's pixels, pixels of 3 channels), or streamed gathers of rows under 64 bytes (SpaceToDepth
    4 x 4 with 2 and 4 channels), alone or with one or two loops outside, fill a dense block of
    output words that the next goes on from. Where the CPU has AVX-512F each line is one gather instruction
    with its lanes' offsets from a table made once (table_lines), stored plainly or streamed at any offset
    into a line; the words after the last whole line one at a time. Bit for bit the spec's result and
    nothing outside it, inputs reversed along W included, rows cut among threads anywhere."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(channels * threads + block)
    spec, call, plan_of = getattr(ref, op), getattr(dm, op), getattr(plans, op)
    shape = (3, 2 * block, 7 * block, channels) if op == "space_to_depth" else (3, 5, 21, block * block * channels)
    nhwc = random_array(shape, np.dtype(dtype), rng)
    with _threads(threads):
        for data in (nhwc.transpose(0, 3, 1, 2), nhwc.transpose(0, 3, 1, 2)[..., ::-1]):
            expected = spec(data, "depth_first", block)
            plan = plan_of(data.shape, expected.shape, "depth_first", block)
            last = np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out.transpose(0, 3, 1, 2)
                program = lowering.program(plan, data, out)
                (pattern, _, _, loops), = _steps(program)
                # block tiles of 3 rows or positions (the SIMD bodies take 2 or 4), or streamed gathers of short rows
                rows, tile = loops[-2][0], loops[-1][0]
                assert pattern == lowering._PATTERNS["strided"] or 3 in (rows, tile) or \
                    (pattern == lowering._PATTERNS["gather"] and tile * item < 64), (pattern, rows, tile)
                if core.WHOLE_LINES and stream:
                    assert core.streams(program, strided._address(out)), offset
                call(data, "depth_first", block, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


def _images_and_wider(monkeypatch, stream, shape, dtype, seed):
    """For the tests of many small images: every output streamed (or none), random images of ``shape``, and
    the same a channel wider (a view of them skips one: images a channel apart)."""
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    monkeypatch.setattr(native_engine, "REGISTER_STREAM_BYTES", 0 if stream else 1 << 62)
    rng = np.random.default_rng(seed)
    full = random_array(shape, np.dtype(dtype), rng)
    return full, random_array((shape[0], shape[1] + 1) + shape[2:], np.dtype(dtype), rng)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape, block, crops_begin, crops_end, layout, dtype", [
    ((4 * 1031, 64, 4, 4), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], "nchw", np.float32),
    ((9 * 1031, 16, 2, 2), [1, 1, 3, 3], [0, 0, 1, 1], [0, 0, 1, 1], "nchw", np.float32),
    ((4 * 131, 16, 14, 14), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 2, 1], "nchw", np.float32),
    ((4 * 57, 8, 7, 7), [1, 1, 2, 2], [0, 0, 0, 1], [0, 0, 1, 0], "nchw", np.float64),
    ((16 * 101, 8, 3, 3), [1, 1, 4, 4], [0, 0, 3, 1], [0, 0, 0, 2], "nchw", np.int32),
    ((8 * 67, 4, 3, 4, 4), [1, 1, 2, 2, 2], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1], "nchw", np.float32),
    ((4 * 1031, 4, 4, 4), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], "nhwc", np.float32)])
def test_small_images_with_crops_from_one_table(monkeypatch, stream, threads, shape, block, crops_begin, crops_end,
                                                layout, dtype):
    """BatchToSpace of many small images with crops: its programs are windows, the first, inner and last rows
    of each image steps of their own. Where the CPU has AVX-512F and each image's output is a dense unit
    of at most 4096 words under one loop that every step shares, the steps are merged into one (a table
    of the image's input offsets, table_lines, a line at a time). Bit for bit the spec's result and
    nothing outside it, at every 4-byte offset into a line (8-byte for float64), inputs reversed along W
    or a channel apart from image to image, rows cut among 3 threads anywhere."""
    item = np.dtype(dtype).itemsize
    full, wider = _images_and_wider(monkeypatch, stream, shape, dtype, shape[0] * threads + shape[-1])
    with _threads(threads):
        for data in (full, full[..., ::-1], wider[:, 1:]):
            if layout == "nhwc":
                data = np.ascontiguousarray(np.moveaxis(data, 1, -1)).transpose(0, 3, 1, 2)
            expected = ref.batch_to_space(data, block, crops_begin, crops_end)
            last = expected if layout == "nchw" else np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out if layout == "nchw" else out.transpose(0, 3, 1, 2)
                dm.batch_to_space(data, block, crops_begin, crops_end, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape, block, crops_begin, crops_end, layout, dtype", [
    ((4 * 389, 16, 4, 4), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], "nhwc", np.float32),
    ((9 * 131, 64, 2, 3), [1, 1, 3, 3], [0, 0, 2, 0], [0, 0, 1, 2], "nhwc", np.float64),
    ((8 * 67, 4, 3, 2, 2), [1, 1, 2, 2, 2], [0, 0, 1, 0, 1], [0, 0, 0, 1, 1], "nhwc", np.int32),
    ((4 * 301, 3, 5, 8), [1, 2, 2, 1], [0, 1, 0, 0], [0, 0, 3, 0], "nchw", np.float32),  # TensorFlow's NHWC
    ((4 * 97, 24, 2, 3), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1], "nhwc", np.float32),  # 2 lines in 3 runs
    ((4 * 53, 12, 3, 2), [1, 1, 2, 2], [0, 0, 0, 1], [0, 0, 1, 0], "nhwc", np.float64),
    ((9 * 23, 16, 7, 7), [1, 1, 3, 3], [0, 0, 1, 1], [0, 0, 1, 1], "nhwc", np.float32),  # images of 5776 words
    ((4 * 11, 64, 8, 8), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2], "nhwc", np.float32),  # 12544 words
    ((4 * 7, 8, 23, 23), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 0, 1], "nhwc", np.float64)])  # 15840 words
def test_channels_last_batch_to_space_of_small_images_from_tables(monkeypatch, stream, threads, shape, block,
                                                                  crops_begin, crops_end, layout, dtype):
    """Channels-last BatchToSpace of many small images with crops: one UNITS step, each output image a
    unit whose table reads every block offset's input image (out.shape[0] images apart), where its windows
    copied a pixel at a time. Bit for bit the spec's result and nothing outside it, at every 4-byte
    offset into a line (8-byte for float64), inputs reversed along the last axis, rows cut among 3
    threads anywhere."""
    item = np.dtype(dtype).itemsize
    full, _ = _images_and_wider(monkeypatch, stream, shape, dtype, shape[0] * threads + shape[-1])
    args = (block, crops_begin, crops_end)
    with _threads(threads):
        for data in (full, full[..., ::-1]):
            if layout == "nhwc":
                data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
                data = np.moveaxis(data, -1, 1)
            expected = ref.batch_to_space(data, *args)
            last = expected if layout == "nchw" else np.ascontiguousarray(np.moveaxis(expected, 1, -1))
            plan = plans.batch_to_space(data.shape, expected.shape, *map(tuple, args))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out if layout == "nchw" else np.moveaxis(out, -1, 1)
                steps = _steps(lowering.program(plan, data, out))
                assert [(step[0], step[3][-1][0]) for step in steps] == [(7, int(np.prod(expected.shape[1:])))]
                dm.batch_to_space(data, *args, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


@pytest.mark.parametrize("op, shape, block, begin, end, dtype", [
    ("space_to_batch", (8, 1, 62, 126), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], np.float32),  # rows of 256 bytes
    ("space_to_batch", (64, 16, 6, 6), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], np.uint16),  # 2-byte words
    ("space_to_batch", (4, 2, 7, 7), [1, 1, 9, 8], [0, 0, 1, 0], [0, 0, 1, 1], np.float32),  # 72 block offsets
    ("space_to_batch", (64, 16, 6, 6), [1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0], np.float32),  # no pads
    ("space_to_batch", (1, 2, 522, 124), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], np.float32),  # planes of 16506 words
    ("space_to_batch", (1, 1, 528, 500), [1, 1, 8, 8], [0, 0, 0, 2], [0, 0, 0, 2], np.float32),  # 64 x 4158 words
    ("batch_to_space", (4 * 64, 16, 3, 3), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], np.float32),  # NCHW: merge_units
    ("batch_to_space", (4 * 64, 3, 3, 16), [1, 2, 2, 1], [0, 0, 0, 0], [0, 0, 0, 0], np.float32)])  # no crops
def test_units_left_to_the_other_kernels(op, shape, block, begin, end, dtype):
    """Where units from tables are not taken (datamove.engines.native.units): SpaceToBatch with rows of 256 bytes
    and more, words other than 4 or 8 bytes, over 64 block offsets, no pads, units over 16384 words or
    tables of over 262144 words together;
    BatchToSpace NCHW (its windows merged in the core) or without crops. Bit for bit."""
    data = random_array(shape, np.dtype(dtype), np.random.default_rng(5))
    args = (block, begin, end)
    expected = getattr(ref, op)(data, *args)
    out = np.empty_like(expected)
    plan = getattr(plans, op)(data.shape, expected.shape, *map(tuple, args))
    assert all(step[0] != 7 for step in _steps(lowering.program(plan, data, out)))
    getattr(dm, op)(data, *args, out=out, engine="native")
    assert same_bits(out, expected)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape, block, pads_begin, pads_end, layout, dtype, unit", [
    ((517, 16, 6, 6), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], "nchw", np.float32, 256),  # an image a unit
    ((13, 300, 10, 10), [1, 1, 3, 3], [0, 0, 1, 1], [0, 0, 1, 1], "nchw", np.float32, 16),  # a channel's plane
    ((203, 3, 7, 5), [1, 1, 3, 2], [0, 0, 2, 0], [0, 0, 0, 1], "nchw", np.float64, 27),
    ((389, 8, 2, 3), [1, 1, 4, 4], [0, 0, 1, 0], [0, 0, 1, 1], "nchw", np.int32, 8),
    ((97, 4, 3, 4, 4), [1, 1, 2, 2, 2], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], "nchw", np.float32, 72),
    ((611, 16, 4, 4), [1, 1, 3, 3], [0, 0, 1, 1], [0, 0, 1, 1], "nhwc", np.float32, 64),
    ((211, 24, 4, 4), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], "nhwc", np.float32, 216),  # lines mostly runs
    ((433, 6, 6, 2), [1, 2, 2, 1], [0, 1, 0, 0], [0, 1, 2, 0], "nchw", np.float32, 32),  # TensorFlow's NHWC
    ((23, 64, 24, 24), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], "nhwc", np.float32, 10816),  # images over 4096 words
    ((7, 16, 40, 44), [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1], "nchw", np.float32, 483)])  # planes before images
def test_space_to_batch_of_small_images_from_tables(monkeypatch, stream, threads, shape, block, pads_begin, pads_end,
                                                    layout, dtype, unit):
    """SpaceToBatch of many small images with pads: one UNITS step, a part per block offset, each part's
    units (an image, or a channel's plane where an image is over 16384 words) from a table of input
    offsets with zeros for the pads (masked off the gather instruction where the CPU has AVX-512F), a
    chunk of images for every part in turn. Bit for bit the spec's result and nothing outside it, at
    every 4-byte offset into a line (8-byte for float64), inputs reversed along the last axis (negative
    offsets), rows cut among 3 threads anywhere; a channel apart from image to image, where the units are
    planes, whole images (of up to 16384 words) instead."""
    item = np.dtype(dtype).itemsize
    full, wider = _images_and_wider(monkeypatch, stream, shape, dtype, shape[0] * threads + shape[-1])
    args = (block, pads_begin, pads_end)
    with _threads(threads):
        for apart, data in ((False, full), (False, full[..., ::-1]), (True, wider[:, 1:])):
            if layout == "nhwc":
                data = np.ascontiguousarray(np.moveaxis(data, 1, -1)).transpose(0, 3, 1, 2)
            expected = ref.space_to_batch(data, *args)
            last = expected if layout == "nchw" else np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
            plan = plans.space_to_batch(data.shape, expected.shape, *map(tuple, args))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out if layout == "nchw" else out.transpose(0, 3, 1, 2)
                steps = _steps(lowering.program(plan, data, out))
                image = int(np.prod(expected.shape[1:]))
                if apart and unit < image and image > 16384:  # planes' loop is no single loop, the images too big
                    assert steps[0][0] != 7
                elif apart and unit < image:  # whole images instead
                    assert [(step[0], step[3][-1][0]) for step in steps] == [(7, image)]
                else:
                    assert [(step[0], step[3][-1][0]) for step in steps] == [(7, unit)]
                dm.space_to_batch(data, *args, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("op, mode, block, shape, layout, dtype", [
    ("depth_to_space", "depth_first", 2, (1031, 64, 2, 2), "nchw", np.float32),
    ("depth_to_space", "blocks_first", 2, (4099, 16, 2, 2), "nchw", np.float32),
    ("depth_to_space", "depth_first", 2, (181, 32, 7, 7), "nchw", np.float32),
    ("depth_to_space", "depth_first", 3, (293, 36, 3, 3), "nchw", np.int32),
    ("depth_to_space", "depth_first", 2, (1029, 16, 2, 2), "nhwc", np.float32),
    ("depth_to_space", "blocks_first", 2, (523, 16, 2, 2), "nchw", np.float64),
    ("space_to_depth", "depth_first", 2, (83, 64, 8, 8), "nchw", np.float32),
    ("space_to_depth", "depth_first", 2, (571, 16, 4, 4), "nchw", np.float64),
    ("space_to_depth", "depth_first", 3, (233, 32, 6, 6), "nchw", np.float32),
    ("space_to_depth", "depth_first", 2, (1031, 16, 4, 4), "nchw", np.float32),
    ("space_to_depth", "blocks_first", 2, (67, 64, 4, 4), "nchw", np.float32),
    ("space_to_depth", "depth_first", 3, (67, 4, 21, 21), "nchw", np.float32),
    ("depth_to_space", "depth_first", 2, (4099, 4, 1, 1), "nchw", np.float32),
    ("depth_to_space", "blocks_first", 2, (1031, 12, 1, 3), "nchw", np.float64)])
def test_units_of_small_images_from_a_table(monkeypatch, stream, threads, op, mode, block, shape, layout, dtype):
    """Many small images (NCHW DepthToSpace of 1 x 1 to 7 x 7 pixels, SpaceToDepth of 4 x 4 to 21 x 21):
    loops outside tiles of a few words fill a dense unit of output (an image, or an image's channels), each
    unit going on from the one before. Where the CPU has AVX-512F the units go a line at a time by the
    gather instruction with a table of their offsets (Table outer 4; units of 4 to 4096 words, a line's
    lanes reading on into the next unit); where a thread's rows start or end inside a unit, that unit's
    rows are tiles. Bit for bit the spec's result and nothing outside it, at
    every 4-byte offset into a line (8-byte for float64), inputs reversed along W or a channel apart
    from image to image (units going on only within an image), rows cut among 3 threads anywhere."""
    item = np.dtype(dtype).itemsize
    spec, call = getattr(ref, op), getattr(dm, op)
    full, wider = _images_and_wider(monkeypatch, stream, shape, dtype, shape[0] * threads + block)
    with _threads(threads):
        for data in (full, full[..., ::-1], wider[:, 1:]):
            if layout == "nhwc":
                data = np.ascontiguousarray(np.moveaxis(data, 1, -1)).transpose(0, 3, 1, 2)
            expected = spec(data, mode, block)
            last = expected if layout == "nchw" else np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out if layout == "nchw" else out.transpose(0, 3, 1, 2)
                call(data, mode, block, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("op, args, channels, dtype", [
    ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), 3, np.float32),
    ("space_to_batch", ([1, 1, 3, 3], [0, 0, 1, 2], [0, 0, 2, 1]), 3, np.float64),
    ("batch_to_space", ([1, 1, 4, 4], [0, 0, 1, 1], [0, 0, 1, 1]), 3, np.float32),
    ("batch_to_space", ([1, 1, 2, 2], [0, 0, 0, 1], [0, 0, 1, 0]), 2, np.int32),
    ("depth_to_space", ("blocks_first", 3), 1, np.float32),
    ("depth_to_space", ("depth_first", 3), 1, np.float32),
    ("depth_to_space", ("blocks_first", 3), 3, np.float64),
    ("space_to_depth", ("blocks_first", 3), 3, np.float32),
    ("space_to_depth", ("blocks_first", 3), 1, np.int32)])
def test_short_pixel_copies_from_a_table(monkeypatch, stream, threads, op, args, channels, dtype):
    """Channels-last copies of pixels under 64 bytes that are not whole 16-byte groups (1, 2 or 3 channels):
    CONTIGUOUS tiles whose rows, with the loop outside, fill a dense block of output words, or each tile
    row a piece of its own where the rows lie far apart (SpaceToBatch's batches). Where the CPU has
    AVX-512F they go a line at a time by the gather instruction (table_lines), stored plainly or streamed at
    any offset into a line. Bit for bit the spec's result and nothing outside it, inputs reversed along W
    included, rows cut among threads anywhere."""
    native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(channels * threads)
    spec, call = getattr(ref, op), getattr(dm, op)
    if op == "space_to_batch":
        shape = (2, 7, 37, channels)  # (cut below to whole blocks with the pads)
    elif op == "batch_to_space":
        shape = (2 * args[0][2] * args[0][3], 3, 25, channels)
    elif op == "depth_to_space":
        shape = (2, 3, 25, 9 * channels)
    else:
        shape = (2, 6, 39, channels)
    nhwc = random_array(shape, np.dtype(dtype), rng)
    with _threads(threads):
        for data in (nhwc.transpose(0, 3, 1, 2), nhwc.transpose(0, 3, 1, 2)[..., ::-1]):
            if op == "space_to_batch":  # whole blocks with the pads
                h, w = data.shape[2:]
                (bh, bw), (ph, pw), (eh, ew) = args[0][2:], args[1][2:], args[2][2:]
                data = data[..., : h - (h + ph + eh) % bh, : w - (w + pw + ew) % bw]
            expected = spec(data, *args)
            last = np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
            for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, max(item, 4))):
                out = out.transpose(0, 3, 1, 2)
                call(data, *args, out=out, engine="native")
                assert same_bits(out, expected), offset
                assert not written_outside(), offset


@pytest.mark.parametrize("mode", ["depth_first", "blocks_first"])
def test_gather_loops_follow_the_input_past_too_many_side_rows(streaming, mode):
    """5-D SpaceToDepth with block 3: the tile's three rows go on past the block's row loop, nine rows side
    by side, more than the core joins for runs this short (22 tiles of 64 bytes through the output's height
    and depth). The loops still follow the input (read in order; moving the row loop inside read 192-byte
    runs 576 bytes apart, 1.75-2.3x the copy floor) but for the block's depth offset, moved outside the
    depth loop (runs_together), and off a line the program stores plainly, on a line it streams; bit for
    bit either way."""
    core = native_engine.core()
    rng = np.random.default_rng(3)
    data = random_array((2, 2, 6, 3 * 11, 48), np.dtype(np.float32), rng)
    expected = ref.space_to_depth(data, mode, 3)
    plan = plans.space_to_depth(data.shape, expected.shape, mode, 3)
    for offset, out, written_outside in _outs_at_offsets(expected, (0, 16)):
        program = lowering.program(plan, data, out)
        (pattern, _, block, loops), = _steps(program)
        assert (pattern, block) == (lowering._PATTERNS["gather"], 3)
        outer = loops[:-2]
        assert outer[-3][2] == 16 * outer[-2][0] and outer[-2][2] == 16  # depth, then height: the rows go on
        assert abs(outer[-4][1]) < abs(outer[-3][1])  # the block's depth offset, outside the depth loop
        rest = [abs(l[1]) for l in outer[:-4] + outer[-3:]]
        assert rest == sorted(rest, reverse=True)
        assert core.streams(program, strided._address(out)) == (offset == 0), offset
        dm.space_to_depth(data, mode, 3, out=out, engine="native")
        assert same_bits(out, expected), offset
        assert not written_outside(), offset


TWO_LOOP_CASES = [
    (np.float32, 3, (1, 2, 24, 48, 48)), (np.float32, 2, (2, 2, 8, 10, 38)), (np.uint8, 2, (1, 3, 6, 8, 130)),
    (np.uint16, 3, (1, 2, 12, 60, 99)), (np.float64, 3, (1, 2, 12, 36, 48)), (np.complex128, 2, (1, 2, 4, 6, 10))]


def _rows_through_two_loops(core, threads, dtype, block, shape, mode):
    with _threads(threads):
        rng = np.random.default_rng(block * shape[-1])
        data = random_array(shape, np.dtype(dtype), rng)
        expected = ref.space_to_depth(data, mode, block)
        plan = plans.space_to_depth(data.shape, expected.shape, mode, block)
        for offset, out, written_outside in _outs_at_offsets(expected, _item_offsets(np.dtype(dtype).itemsize)):
            program = lowering.program(plan, data, out)
            (pattern, word, kind, loops), = _steps(program)
            assert (pattern, kind) == (lowering._PATTERNS["gather"], block)
            n = loops[-1][0]
            assert loops[-4][2] == n and loops[-5][2] == n * loops[-4][0]  # height, then depth: the rows go on
            assert core.streams(program, strided._address(out)), offset
            dm.space_to_depth(data, mode, block, out=out, engine="native")
            assert same_bits(out, expected), offset
            assert not written_outside(), offset


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, block, shape", TWO_LOOP_CASES)
@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_streamed_gather_rows_that_go_on_through_two_loops(streaming, threads, dtype, block, shape, mode):
    """5-D SpaceToDepth NCHW: the output rows go on through its height and its depth, which the input's order
    keeps apart (the block's depth offset between them). runs_together moves that loop out, and the core
    streams each row through both loops as one run (side_runs, Steps) at any offset into a line: bit for
    bit the spec's result and nothing outside it, rows cut among threads anywhere (a thread's runs may
    start and end inside either loop)."""
    _rows_through_two_loops(native_engine.core(), threads, dtype, block, shape, mode)


@pytest.mark.slow
def test_rows_through_two_loops_through_the_l1_buffer(monkeypatch, streaming):
    """The same, where the CPU has no AVX-512 (the core at avx2): the runs through two loops fill the L1 buffer
    and stream from it."""
    portable = _core_at("avx2")
    monkeypatch.setattr(native_engine, "_native", portable)
    for dtype, block, shape in TWO_LOOP_CASES:
        for threads in (1, 3):
            _rows_through_two_loops(portable, threads, dtype, block, shape, "depth_first")


def test_runs_together_only_moves_loops_over_a_cached_span():
    """runs_together moves the loops between two that go on with the rows outside the outer one, only over
    as much of it as reads REREAD_BYTES of input (a merged loop is cut in two), only loops of smaller input
    strides, only for tiles' rows of a line or more, and leaves loops already together alone."""
    outer = [[304, 55296, 55296], [8, 6912, 256], [3, 2304, 18432], [16, 144, 16], [3, 48, 6144]]  # 5-D depth_first
    moved = [[304, 55296, 55296], [3, 2304, 18432], [8, 6912, 256], [16, 144, 16], [3, 48, 6144]]
    assert strided.runs_together(outer, 16, 4) == moved
    assert strided.runs_together(moved, 16, 4) == moved  # together already
    assert strided.runs_together(outer, 16, 2) == outer  # rows of 32 bytes: under a line
    # 5-D blocks_first: channels and depth merged (64 x 6912 words of float32 = 1.7 MiB), cut to 32 (864 KiB)
    merged = [[38, 442368, 442368], [64, 6912, 256], [3, 2304, 147456], [16, 144, 16], [3, 48, 49152]]
    assert strided.runs_together(merged, 16, 4) == [
        [38, 442368, 442368], [2, 221184, 8192], [3, 2304, 147456], [32, 6912, 256], [16, 144, 16], [3, 48, 49152]]
    assert 32 * 6912 * 4 <= strided.REREAD_BYTES < 64 * 6912 * 4
    prime = [[7, 200000, 256], [3, 2304, 18432], [16, 144, 16]]  # 7 x 800 KB: no part of it fits but one
    assert strided.runs_together(prime, 16, 4) == prime
    assert strided.runs_together([[8, 6912, 256], [3, 9000, 18432], [16, 144, 16]], 16, 4) == \
        [[8, 6912, 256], [3, 9000, 18432], [16, 144, 16]]  # a loop of larger input stride stays
    assert strided.runs_together(outer, 8, 8) == outer  # no loop goes on with rows of 8


def test_the_last_level_cache_comes_from_sysfs():
    """The streaming threshold: the L3 instance cpu0 shares (sysfs), not sysconf's sum over every CCX."""
    import glob

    best = (0, 0)
    for folder in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            level, kind, text = (open(f"{folder}/{name}").read().strip() for name in ("level", "type", "size"))
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        size = int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)
        if kind in ("Unified", "Data"):
            best = max(best, (int(level), size))
    core = native_engine.core()
    if best[1]:
        assert core.cache_bytes() == best[1] == native_engine.STREAM_BYTES
    else:
        assert core.cache_bytes() >= 0 and native_engine.STREAM_BYTES > 0


@pytest.mark.parametrize("seed", range(3))
def test_streamed_windows_with_rows_longer_than_a_chunk(monkeypatch, seed):
    """Windows that stream assemble each output row in L1 chunk by chunk (2 KiB): rows of one to two chunks,
    with pads or crops at both ends, every word width, the output aligned and one item off."""
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    core = native_engine.core()
    rng = np.random.default_rng(seed)
    streamed = 0
    for _ in range(20):
        dtype = np.dtype(rng.choice([np.uint8, np.uint16, np.float32, np.float64, np.complex128]))
        b = int(rng.choice([2, 3, 4]))
        chunk = 2048 // dtype.itemsize
        width = b * int(rng.integers(chunk // b - 3, 2 * chunk // b + 5))
        lo, hi = int(rng.integers(0, b + 2)), int(rng.integers(0, b + 2))
        hi += -(width + lo + hi) % b
        x = random_array((2, 2, 3, width), dtype, rng)
        y = random_array((2 * b, 2, 3, width // b + 1), dtype, rng)
        for op, data, args in (("space_to_batch", x, ([1, 1, 1, b], [0, 0, 0, lo], [0, 0, 0, hi])),
                               ("batch_to_space", y, ([1, 1, 1, b], [0, 0, 0, min(lo, b)], [0, 0, 0, min(hi, b)]))):
            expected = getattr(dm, op)(data, *args, engine="numpy")
            for offset in (0, 1):
                base = np.zeros(expected.size + 2, dtype)
                out = base[offset: offset + expected.size].reshape(expected.shape)
                plan = getattr(plans, op)(data.shape, expected.shape, *(tuple(a) for a in args))
                streamed += core.streams(lowering.program(plan, data, out), strided._address(out))
                getattr(dm, op)(data, *args, out=out, engine="native")
                assert same_bits(out, expected), (op, dtype, b, width, args, offset)
    assert streamed  # the streamed paths were taken


_SIMD_CASES = [(dtype, block, "space_to_depth", (mode, block))
               for dtype in (np.uint8, np.uint16, np.float32) for block in (2, 3, 4)
               for mode in ("blocks_first", "depth_first")] + [
    (np.uint8, 4, "space_to_batch", ([1, 1, 4, 4], [0] * 4, [0] * 4)),
    (np.uint8, 4, "space_to_batch", ([1, 1, 1, 4], [0, 0, 0, 1], [0, 0, 0, 3]))]


@pytest.mark.parametrize("stream", [False, True])
def test_simd_block_bodies_every_length_and_offset(monkeypatch, stream):
    """The hand-written SIMD bodies (GATHER and SCATTER of 1-, 2- and 4-byte words in blocks of 2, 3 and 4: the
    rounds of unpacks of 1- and 2-byte words in blocks of 2 and 4 among them) and their scalar tails: rows of 0 to 40 positions, the input and the output 0 to 3 items into a buffer, streamed
    or not, and back through DepthToSpace."""
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    rng = np.random.default_rng(5)
    for n in range(0, 41):
        for shift in (0, 1, 3):
            for dtype, block, op, args in _SIMD_CASES:
                width = block * n
                data = random_array((2, 2, block, width), np.dtype(dtype), rng)
                base = random_array((data.size + shift,), np.dtype(dtype), rng)
                view = base[shift:].reshape(data.shape)
                view[...] = data
                expected = getattr(ref, op)(data, *args)
                out = np.zeros(expected.size + 3, dtype)[shift: shift + expected.size].reshape(expected.shape)
                getattr(dm, op)(view, *args, out=out, engine="native")
                assert same_bits(out, expected), (dtype, op, args, n, shift)
                if op == "space_to_depth":  # and back: SCATTER<block>
                    back = np.zeros(data.size + 3, dtype)[shift: shift + data.size].reshape(data.shape)
                    dm.depth_to_space(out, args[0], block, out=back, engine="native")
                    assert same_bits(back, data), (dtype, args, n, shift)


def _one_step(pattern, word, block, loops, src0=0, dst0=0):
    """A core program of one step: loops as (count, src stride, dst stride) in words, outermost first."""
    head = [_PATTERN[pattern], word, block, 0, 0, src0, dst0, len(loops)]
    return np.array([1] + head + [x for loop in loops for x in loop], np.int64).tobytes()


_PATTERN = lowering._PATTERNS


def _run_and_compare(core, program, src, raw, expected, threads, label):
    for stream in (0, 1, 2):  # plain; streamed where every step streams from registers; streamed
        raw[...] = 0
        core.run(program, src, raw, threads, stream)
        assert np.array_equal(raw, expected), (label, stream)


def _aligned_start(raw, shift):
    """An index into raw, `shift` items past its first 16-byte boundary."""
    return (-raw.__array_interface__["data"][0] % 16) // raw.itemsize + shift


_SMALL_PIXELS = [(4, 2, 2), (4, 2, 4), (4, 4, 2), (4, 4, 4)] + [
    (word, block, n) for word in (1, 2) for block in (2, 4) for n in range(1, 8 // word + 1)] + [
    (word, 3, n) for word in (1, 2) for n in (1, 2, 3, 5, 8)]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("word, block, n", _SMALL_PIXELS)
def test_pixels_of_a_few_channels_are_transposed_in_registers(word, block, n, threads):
    """scatter_run: SCATTER tiles that are a pixel of a few channels (2 or 4 rows of n words, 4-byte words with
    n = 2 or 4; 1- and 2-byte words with rows up to 8 bytes; blocks of 3 of them word by word) moved a run at a
    time in registers,
    out[m * dm + i * B + j] = in[m * sm + j * s1 + i]: bit for bit, nothing written outside, streamed (4-byte
    words on 16 bytes: streaming stores; off them: tile by tile) or not, the runs cut among threads anywhere."""
    core = native_engine.core()
    dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[word]
    rng = np.random.default_rng(word * 100 + block * 10 + n)
    before = dm.get_num_threads()
    dm.set_num_threads(threads)
    try:
        for run, s1, gap in ((1, n, 0), (5, n, 0), (37, 2 * n + 1, 4), (300, n * block, 0)):
            sm, dm_ = s1 * block + 3, n * block + gap
            src = rng.integers(0, np.iinfo(dtype).max, size=sm * run + s1 * block + n, dtype=dtype, endpoint=True)
            for shift in (0, 1, 4):  # the output on 16 bytes, one word off, 4 words on
                raw = np.zeros(dm_ * run + 16, dtype)
                start = _aligned_start(raw, shift)
                expected = raw.copy()
                for m in range(run):
                    for j in range(block):
                        at = start + m * dm_ + j
                        expected[at: at + n * block: block] = src[m * sm + j * s1: m * sm + j * s1 + n]
                program = _one_step("scatter", word, block, [(run, sm, dm_), (block, s1, 1), (n, 1, block)], dst0=start)
                _run_and_compare(core, program, src, raw, expected, threads, (run, s1, gap, shift))
    finally:
        dm.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("channels, mode, width", [(16, "depth_first", 40), (16, "blocks_first", 40), (32, "blocks_first", 40),
                                                   (16, "depth_first", 3), (16, "blocks_first", 5), (8, "blocks_first", 33),
                                                   (8, "depth_first", 40), (8, "depth_first", 9), (8, "depth_first", 31)])
def test_pixels_of_few_channels_stream_whole_lines_at_any_offset(streaming, threads, channels, mode, width):
    """Channels-last DepthToSpace into 2 to 8 float32 channels, streamed: its small pixels' tiles
    (scatter_run_lines, and stream_small_chunks for runs of 16- and 32-byte rows) store whole lines,
    shifted where no tile starts a line, the first and last partial lines plainly; or, where the tiles start on
    lines, the partial lines that one row ends and the next starts in joined through the carry (8 channels
    depth_first: 16-byte tiles). Bit for bit the spec's
    result and nothing outside it at every 4-byte offset into a line (NumPy's own are 16 bytes in), rows
    long and short (3 pixels: tile by tile), cut among threads anywhere."""
    rng = np.random.default_rng(channels + width)
    data = np.ascontiguousarray(rng.random((3, 7, width, channels), dtype=np.float32)).transpose(0, 3, 1, 2)
    expected = ref.depth_to_space(data, mode, 2)
    nhwc = np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
    with _threads(threads):
        for offset, out, written_outside in _outs_at_offsets(nhwc, range(0, 64, 4)):
            dm.depth_to_space(data, mode, 2, out=out.transpose(0, 3, 1, 2), engine="native")
            assert same_bits(out, nhwc), offset
            assert not written_outside(), offset


@pytest.mark.parametrize("threads", [1, 3])
def test_short_rows_of_any_size_a_run_at_a_time(threads):
    """contiguous_run: runs of CONTIGUOUS tiles of rows of 1 to 33 and 48, 64, 128 bytes (a pixel of 3 uint8
    channels is 3 bytes; sizes without a fixed-size case move as two overlapping moves, or by byte
    permutes: pixel_rows, interleave_rows), in words of 1, 2, 4 and 8 bytes, a tile's rows far apart or side by
    side, streamed or not, at every offset: bit for bit, nothing written outside."""
    core = native_engine.core()
    rng = np.random.default_rng(3)
    before = dm.get_num_threads()
    dm.set_num_threads(threads)
    try:
        for nbytes in list(range(1, 34)) + [48, 64, 128]:
            for word in (1, 2, 4, 8):
                if nbytes % word:
                    continue
                n = nbytes // word
                dtype = np.dtype("u%d" % word)
                for run, rows, shift, side in ((1, 1, 0, 0), (9, 2, 0, 0), (40, 3, 1, 0), (40, 2, 2, 0), (9, 2, 0, 1),
                                               (41, 3, 1, 1), (23, 4, 0, 1), (40, 2, 3, 1)):
                    # a tile's rows far apart, the tiles of a run going on; or (side) its rows side by side
                    d1, dm_ = (n, n * rows) if side else (n * run + 1, n)
                    s1, sm = n, n * rows + 1
                    src = rng.integers(0, 255, size=sm * run + s1 * rows, dtype=np.uint8).astype(dtype)
                    raw = np.zeros((run - 1) * dm_ + (rows - 1) * d1 + n + 16, dtype)
                    start = _aligned_start(raw, shift)
                    expected = raw.copy()
                    for m in range(run):
                        for j in range(rows):
                            expected[start + m * dm_ + j * d1: start + m * dm_ + j * d1 + n] = src[m * sm + j * s1: m * sm + j * s1 + n]
                    program = _one_step("contiguous", word, 0, [(run, sm, dm_), (rows, s1, d1), (n, 1, 1)], dst0=start)
                    _run_and_compare(core, program, src, raw, expected, threads, (nbytes, word, run, rows, shift))
    finally:
        dm.set_num_threads(before)


@pytest.mark.parametrize("stream", [False, True])
def test_channels_last_pixels_of_a_few_channels(monkeypatch, stream):
    """The ops whose tiles are scatter_run's pixels (channels-last DepthToSpace depth_first with 8 and 16 channels,
    SpaceToDepth depth_first with 2 and 4): their programs are such tiles, and they write the spec's result bit for
    bit at every offset of the output, streamed where their pixels, under a line, start on 16 bytes."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    rng = np.random.default_rng(9)
    for op, channels, tiles in (("depth_to_space", 8, (2, 2)), ("depth_to_space", 16, (4, 2)),
                                ("space_to_depth", 2, (4, 2)), ("space_to_depth", 4, (4, 4))):
        # (rows of 300 pixels: images too wide for a table of their units, test_units_of_small_images_from_a_table)
        data = random_array((2, 6, 300, channels), np.dtype(np.float32), rng).transpose(0, 3, 1, 2)
        expected = getattr(ref, op)(np.ascontiguousarray(data), "depth_first", 2)
        n, c, h, w = expected.shape
        plan = getattr(plans, op)(data.shape, expected.shape, "depth_first", 2)
        for shift in (0, 1, 4):
            raw = np.zeros(expected.size + 8, np.float32)
            start = (-raw.__array_interface__["data"][0] % 16) // 4 + shift
            out = raw[start: start + expected.size].reshape(n, h, w, c).transpose(0, 3, 1, 2)
            program = lowering.program(plan, data, out)
            assert [(p, word, b, loops[-1][0]) for p, word, b, loops in _steps(program)] == [(2, 4) + tiles], op
            # pixels under a line stream only from 16 bytes; 64-byte ones from any 4 bytes, as every piece of a line
            streamed = shift != 1 or tiles == (4, 4)
            assert core.streams(program, strided._address(out)) == streamed, (op, shift)
            getattr(dm, op)(data, "depth_first", 2, out=out, engine="native")
            assert same_bits(out, expected), (op, channels, shift)
            assert not raw[:start].any() and not raw[start + expected.size:].any()


def test_short_rows_of_the_run_loops_store_plainly(windows, monkeypatch):
    """BatchToSpace with crops of 1 writes rows of 2W - 2 items: float32 rows under 256 bytes that do not all
    start on 16 bytes are stored plainly (a run loop beats streaming each row's ends 4 bytes at a time), long
    rows and rows all on 16 bytes (float64) stream. SpaceToBatch with pads: float32 gather window rows under
    256 bytes are stored plainly, 256 bytes stream. Bit for bit either way."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    rng = np.random.default_rng(11)
    args = ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))
    # (images of 80 rows: too large for one table of the image, test_small_images_with_crops_from_one_table)
    for dtype, width, streamed in ((np.float32, 16, False), (np.float32, 32, False), (np.float32, 64, True),
                                   (np.float64, 16, True)):
        data = random_array((8, 2, 80, width), np.dtype(dtype), rng)
        expected = ref.batch_to_space(data, *args)
        plan = plans.batch_to_space(data.shape, expected.shape, *args)
        for offset, out, written_outside in _outs_at_offsets(expected, (0, 16)):
            program = lowering.program(plan, data, out)
            assert core.streams(program, strided._address(out)) == streamed, (dtype, width, offset)
            dm.batch_to_space(data, *args, out=out, engine="native")
            assert same_bits(out, expected), (dtype, width, offset)
            assert not written_outside(), (dtype, width, offset)
    for width, streamed in ((46, False), (126, True)):  # padded to 48 and 128: rows of 96 and 256 bytes
        data = random_array((2, 2, 6, width), np.dtype(np.float32), rng)
        expected = ref.space_to_batch(data, *args)
        plan = plans.space_to_batch(data.shape, expected.shape, *args)
        for offset, out, written_outside in _outs_at_offsets(expected, (0, 16)):
            program = lowering.program(plan, data, out)
            assert core.streams(program, strided._address(out)) == streamed, (width, offset)
            dm.space_to_batch(data, *args, out=out, engine="native")
            assert same_bits(out, expected), (width, offset)
            assert not written_outside(), (width, offset)


def test_short_pieces_in_many_streams_stream_only_on_a_line(monkeypatch):
    """Streaming stores where few partial lines are left alone: SpaceToBatch uint8 with a 4 x 4 block writes 16
    streams of 64-byte pieces. Where each stream's run of rows is 4 KiB or more (64 rows) they are buffered
    side by side and stream as runs at any offset (side_joined); with 16 rows they stream only when the
    output starts on a line and not 16 bytes into one (each piece's partial lines would wait for the other 15
    streams); 1 KiB rows stream at either offset."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    rng = np.random.default_rng(1)
    for shape, on_line_only in (((1, 1, 64, 256), True), ((2, 2, 64, 256), False), ((2, 2, 64, 4096), False)):
        width = shape[-1]
        data = random_array(shape, np.dtype(np.uint8), rng)
        args = ([1, 1, 4, 4], [0] * 4, [0] * 4)
        expected = ref.space_to_batch(data, *args)
        plan = plans.space_to_batch(data.shape, expected.shape, *(tuple(a) for a in args))
        for offset in (0, 16):
            raw = np.zeros(expected.size + 128, np.uint8)
            start = -raw.__array_interface__["data"][0] % 64 + offset
            out = raw[start: start + expected.size].reshape(expected.shape)
            streams = core.streams(lowering.program(plan, data, out), strided._address(out))
            assert streams == (offset == 0 or not on_line_only), (width, offset)
            dm.space_to_batch(data, *args, out=out, engine="native")
            assert same_bits(out, expected)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("op, shape, args", [
    ("space_to_batch", (120, 4, 22, 46), ((1, 1, 4, 4), (0, 0, 1, 1), (0, 0, 1, 1))),  # windows and pad fills
    ("space_to_batch", (80, 3, 61, 30), ((1, 1, 3, 3), (0, 0, 2, 0), (0, 0, 0, 3))),
    ("batch_to_space", (504, 8, 8, 16), ((1, 1, 3, 3), (0, 0, 1, 2), (0, 0, 2, 1))),  # crop windows
])
def test_programs_of_several_steps_run_in_bands(windows, op, shape, args, threads):
    """A program of several steps (windows, the fills of their padding) runs in bands of about 256 KiB of
    output, each band taking its share of every step in turn: outputs of 1.5-2.3 MiB make several bands a
    part, cut anywhere in the steps' rows, at every thread count; bit for bit the spec's result and nothing
    written outside the output."""
    rng = np.random.default_rng(len(shape) + shape[0])
    data = random_array(shape, np.dtype(np.float32), rng)
    expected = getattr(ref, op)(data, *args)
    assert expected.nbytes >= 2 * 3 * (256 << 10)  # two bands a part or more
    plan = getattr(plans, op)(data.shape, expected.shape, *args)
    with _threads(threads):
        for offset, out, written_outside in _outs_at_offsets(expected, (0, 4, 16)):
            assert len(_steps(lowering.program(plan, data, out))) > 1
            getattr(dm, op)(data, *args, out=out, engine="native")
            assert same_bits(out, expected), offset
            assert not written_outside(), offset


def _check_at_offsets(call, expected, offsets, where, prefill=None):
    """``call(out)`` into ``out=`` arrays at each of ``offsets`` bytes into a line (``_outs_at_offsets``; first
    filled with ``prefill`` when given, so what must be written is): bit for bit ``expected``, nothing
    written outside. ``where`` names the case in a failure."""
    for offset, out, written_outside in _outs_at_offsets(expected, offsets):
        if prefill is not None:
            out[...] = prefill
        call(out)
        assert same_bits(out, expected), (*where, offset)
        assert not written_outside(), (*where, offset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int16])
@pytest.mark.parametrize("block", [2, 3, 4])
def test_plain_scatter_windows_every_crop(dtype, block):
    """BatchToSpace with crops on W, stored plainly (scatter_rows_run): every crop of up to two blocks and
    a word at either end of rows 1-13 blocks wide, so the rows have no whole group, one, several, and
    several and an overlapping one, with single words before and after; two rows per tile loop and two
    outer loops (H and the block on H); bit for bit the spec's result, nothing outside the output."""
    rng = np.random.default_rng(block)
    for width in (1, 2, 3, 4, 5, 8, 9, 13):
        data = random_array((2 * block * 2, 3, 2, width), np.dtype(dtype), rng)
        span = block * width
        for begin in range(min(span, 2 * block + 2)):
            for end in range(min(span - begin, 2 * block + 2)):
                args = ((1, 1, 2, block), (0, 0, 1, begin), (0, 0, 0, end))
                _check_at_offsets(lambda out: dm.batch_to_space(data, *args, out=out, engine="native"),
                                  ref.batch_to_space(data, *args), (0, 4 + 8 * (begin % 2)), (width, begin, end))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, channels", [(np.float32, 4), (np.float64, 2), (np.uint8, 16), (np.float32, 2),
                                             (np.int16, 4), (np.uint8, 8), (np.float32, 1)])
def test_pixel_scatter_windows_every_crop(monkeypatch, dtype, channels, threads, stream):
    """Channels-last BatchToSpace with crops on W: a pixel of up to 16 bytes is a scatter window's word
    (its crop's edge pixels in the copy's pass, not steps of their own), and 16-byte pixels stream from
    registers: with AVX-512F two lines at a time (scatter2_lines), with AVX2 two pixels a store (pixel_pairs).
    Rows of 1-300 blocks, every crop of up to a block and a pixel at either end, streamed and not, cut
    among threads anywhere, at every 16-byte offset into a line and off 16 bytes: bit for bit the spec's
    result, nothing outside it."""
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    rng = np.random.default_rng(channels)
    with _threads(threads):
        # (8 x 300: too large for a table of units, which takes the smaller images of 4- and 8-byte items)
        for height, width in ((3, 1), (3, 3), (3, 6), (3, 7), (3, 13), (3, 40), (8, 300)):
            data = random_array((4, height, width, channels), np.dtype(dtype), rng).transpose(0, 3, 1, 2)
            for begin, end in ((0, 0), (1, 0), (0, 1), (1, 1), (2, 3), (3, 2)):
                if begin + end >= 2 * width:
                    continue
                args = ((1, 1, 2, 2), (0, 0, 1, begin), (0, 0, 0, end))
                nhwc = np.ascontiguousarray(ref.batch_to_space(data, *args).transpose(0, 2, 3, 1))
                for offset, out, written_outside in _outs_at_offsets(nhwc, (0, 16, 32, 48, 8)):
                    dm.batch_to_space(data, *args, out=out.transpose(0, 3, 1, 2), engine="native")
                    assert same_bits(out, nhwc), (width, begin, end, offset)
                    assert not written_outside(), (width, begin, end, offset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int16])
@pytest.mark.parametrize("block", [2, 3, 4])
@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_plain_gathers_every_short_length(dtype, block, mode):
    """SpaceToDepth stored plainly (gather_rows_run): tiles of 1-13 positions, so shorter than a 16-byte group,
    a whole number of groups, and groups with an overlapping last one; channels first and last (whose
    depth_first rows come in groups); bit for bit the spec's result, nothing outside the output."""
    rng = np.random.default_rng(block)
    for width in range(1, 14):
        for layout in ("nchw", "nhwc"):
            data = random_array((3, 2, 2 * block, block * width), np.dtype(dtype), rng)
            if layout == "nhwc":
                data = np.ascontiguousarray(data.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
            _check_at_offsets(lambda out: dm.space_to_depth(data, mode, block, out=out, engine="native"),
                              ref.space_to_depth(data, mode, block), (0, 4 + 8 * (width % 2)), (width, layout))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int16])
@pytest.mark.parametrize("block", [2, 3, 4])
def test_plain_gather_windows_every_pad(dtype, block):
    """SpaceToBatch with pads on W, stored plainly (gather_rows_run): every pad of up to two blocks and a
    word at either end of rows 1-13 blocks wide (padded), so that the blocks wholly inside are none, fewer
    than a group, a group, several and an overlapping one, and pads wide enough that the edge words
    overflow the run's lists; bit for bit the spec's result, nothing outside the output."""
    rng = np.random.default_rng(block)
    for width in (1, 2, 3, 4, 5, 8, 9, 13, 40):
        span = block * width
        pads = [(b, e) for b in range(min(span, 2 * block + 2)) for e in range(min(span - b, 2 * block + 2))]
        pads += [(span // 2, span - span // 2 - 1)] if width == 40 else []  # 60-80 edge words a row
        for begin, end in pads:
            data = random_array((2, 3, 2 * 2, span - begin - end), np.dtype(dtype), rng)
            args = ((1, 1, 2, block), (0, 0, 0, begin), (0, 0, 0, end))
            _check_at_offsets(lambda out: dm.space_to_batch(data, *args, out=out, engine="native"),
                              ref.space_to_batch(data, *args), (0, 4 + 8 * (begin % 2)), (width, begin, end),
                              prefill=1)  # the padding's zeros are written, not left


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int16])
@pytest.mark.parametrize("block", [2, 3, 4])
@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_plain_scatters_every_short_length(dtype, block, mode):
    """DepthToSpace stored plainly (scatter_rows_run, scatter_run): tiles of 1-13 positions from channels
    first and last; SpaceToDepth channels-last to channels-last, whose depth_first scatter rows come in
    groups; bit for bit the spec's result, nothing outside the output."""
    rng = np.random.default_rng(block)
    for width in range(1, 14):
        for layout in ("nchw", "nhwc"):
            data = random_array((3, 2 * block * block, 2, width), np.dtype(dtype), rng)
            if layout == "nhwc":
                data = np.ascontiguousarray(data.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
            _check_at_offsets(lambda out: dm.depth_to_space(data, mode, block, out=out, engine="native"),
                              ref.depth_to_space(data, mode, block), (0, 4 + 8 * (width % 2)), (width, layout))
            # SpaceToDepth channels-last to channels-last: scatter tiles whose depth_first rows come in groups
            data = random_array((3, 2, 2 * block, block * width), np.dtype(dtype), rng)
            data = np.ascontiguousarray(data.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
            _check_at_offsets(lambda out: dm.space_to_depth(data, mode, block, out=out.transpose(0, 3, 1, 2),
                                                            engine="native"),
                              np.ascontiguousarray(ref.space_to_depth(data, mode, block).transpose(0, 2, 3, 1)),
                              (0, 4 + 8 * (width % 2)), (width, "nhwc out"))


def test_the_cores_lowest_address_is_the_lowering_s():
    """_native.lowest (the buffer protocol, no format) gives strided._address for any dtype and layout: negative
    and zero strides, zero-size, read-only, and dtypes with no buffer format; a non-array is a TypeError."""
    from lowering.strided import _address

    core = native_engine.core()
    read_only = np.arange(6.0)
    read_only.flags.writeable = False
    arrays = [np.ones((3, 4, 5), np.float32), np.ones((3, 4, 5), np.float32)[::-1, :, ::-2], np.zeros(5, "V3"),
              np.zeros((2, 3), "M8[s]"), np.zeros((2, 3), ml_dtypes.bfloat16)[:, ::-1], np.zeros(3, "U3")[::-1],
              np.zeros(4, [("a", "i4"), ("b", "f8")]), np.zeros((0, 3))[:, ::-1], np.broadcast_to(np.ones(3), (4, 3)),
              np.ones((2, 2), bool).T[::-1], np.zeros((2, 3), ml_dtypes.float8_e4m3fn)[::-1], read_only[::-1]]
    for array in arrays:
        assert core.lowest(array) == _address(array), (array.dtype, array.strides)
    with pytest.raises(TypeError):
        core.lowest([1, 2])


def test_gather_loops_follow_the_input():
    """Around a gather tile the loops follow the input, read in order, also where the loop that continues the
    tile's rows lies further out: 5-D SpaceToDepth depth_first with block 3 (the block's row loop inside the
    rows' loop over H; moved inside it, each 9 KiB of input was read in three passes of 192-byte runs, 1.75-2.3x
    the copy floor against 1.0-1.3x), 4-D blocks_first, and SpaceToBatch uint8 4 x 4 (a gather window)."""
    data = np.zeros((2, 8, 24, 48, 48), np.float32)
    plan = plans.space_to_depth(data.shape, (2, 216, 8, 16, 16), "depth_first", 3)
    nest = lower(data, np.zeros(plan.out_shape, np.float32), *plan.copies[0])
    assert (nest.pattern, nest.block) == ("gather", 3)
    assert nest.loops[-3] == (3, 48, 6144) and nest.loops[-4] == (16, 144, 16)
    data = np.zeros((2, 64, 256, 256), np.float32)
    plan = plans.space_to_depth(data.shape, (2, 256, 128, 128), "blocks_first", 2)
    nest = lower(data, np.zeros(plan.out_shape, np.float32), *plan.copies[0])
    assert nest.loops[-3] == (2, 256, 2 * 128 * 128 * 64)  # block rows innermost, as the input runs
    from lowering.strided import lower_window

    for height in (64, 256):
        data = np.zeros((1, 1, height, 256), np.uint8)
        args = ((1, 1, 4, 4), (0,) * 4, (0,) * 4)
        plan = plans.space_to_batch(data.shape, (16, 1, height // 4, 64), *args)
        nest = lower_window(data, np.zeros(plan.out_shape, np.uint8), plan.windows[0])
        assert nest.loops[-3] == (4, 256, 4 * height // 4 * 64), nest.loops


def test_large_results_start_on_a_cache_line():
    from datamove.arrays.outputs import LINE_FROM, allocate

    for dtype in (np.uint8, np.float32, np.complex128, np.dtype("V3")):
        big = allocate((LINE_FROM // np.dtype(dtype).itemsize + 1,), dtype)
        assert big.__array_interface__["data"][0] % 64 == 0 and big.flags.c_contiguous and big.flags.writeable
        assert big.dtype == np.dtype(dtype)
    result = dm.space_to_batch(np.zeros((1, 4, 512, 512), np.uint8), [1, 1, 4, 4], [0] * 4, [0] * 4)
    assert result.__array_interface__["data"][0] % 64 == 0 and result.shape == (16, 4, 128, 128)
    assert allocate((3,), np.float32).flags.owndata  # small ones: plain np.empty
    with pytest.raises(dm.DataMoveError, match="too big"):
        allocate((1 << 40, 1 << 40), np.float32)


def test_short_rows_stream_when_the_next_goes_on_from_them(monkeypatch):
    """TensorFlow's NHWC SpaceToBatch with pads copies 32-byte pixels whose next pixel goes on where they stop:
    they stream (16-byte streaming stores), the pad pixels at the row ends (plain, 1/32 of the lines at most)
    beside them. A block tile's short pieces (D2S depth_first NHWC, 16 channels: 32 bytes, transposed in
    registers by scatter_run) stream where they start on 16 bytes, and only there."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0)
    rng = np.random.default_rng(2)
    tf_args = ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0])
    nhwc = random_array((1, 30, 254, 8), np.dtype(np.float32), rng)
    deep = random_array((1, 64, 64, 16), np.dtype(np.float32), rng).transpose(0, 3, 1, 2)
    for op, data, args, streamed in (("space_to_batch", nhwc, tf_args, {0: True, 1: True, 4: True}),
                                     ("depth_to_space", deep, ("depth_first", 2), {0: True, 1: False, 4: True})):
        expected = getattr(ref, op)(np.ascontiguousarray(data), *args)
        for offset in (0, 1, 4):  # 16-byte aligned; 4 bytes off (streamed as 4-byte words); 16 bytes off
            base = np.zeros(expected.size + 8, np.float32)
            start = (-base.__array_interface__["data"][0] % 16) // 4 + offset
            if op == "space_to_batch":
                out = base[start: start + expected.size].reshape(expected.shape)
            else:
                n, c, h, w = expected.shape
                out = base[start: start + expected.size].reshape(n, h, w, c).transpose(0, 3, 1, 2)
            plan_args = [tuple(a) if isinstance(a, list) else a for a in args]
            plan = getattr(plans, op)(data.shape, expected.shape, *plan_args)
            assert core.streams(lowering.program(plan, data, out), strided._address(out)) == streamed[offset], (op, offset)
            getattr(dm, op)(data, *args, out=out, engine="native")
            assert same_bits(out, expected), (op, offset)


@functools.lru_cache(maxsize=None)
def _core_built_with(flag):
    """The core compiled here at -O1 with ``flag`` (once a test session), loaded beside the installed one."""
    import importlib.util

    from test_core_safety import compile_core

    target = compile_core(["-O1", flag], "portable_native.so")
    spec = importlib.util.spec_from_file_location("datamove._native", target)
    portable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(portable)
    return portable


@functools.lru_cache(maxsize=None)
def _core_at(level):
    """The compiled core loaded anew (a copy of its file: its own static state, its own pool) running at the
    instruction-set level ``level``, read from DATAMOVE_ISA as it loads; a skip where this CPU lacks it."""
    import importlib.util
    import shutil
    import tempfile

    core = native_engine.core()
    if level not in core.ISAS:
        pytest.skip(f"this CPU runs the core at most at {core.CPU_ISA}, not {level}")
    target = os.path.join(tempfile.mkdtemp(prefix="datamove-core-"), os.path.basename(core.__file__))
    shutil.copy(core.__file__, target)
    before = os.environ.get("DATAMOVE_ISA")
    os.environ["DATAMOVE_ISA"] = level
    try:
        spec = importlib.util.spec_from_file_location("datamove._native", target)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if before is None:
            del os.environ["DATAMOVE_ISA"]
        else:
            os.environ["DATAMOVE_ISA"] = before
    assert module.ISA == level and module.CPU_ISA == core.CPU_ISA
    return module


# Every level the core has kernels for, and the build other CPUs get (no SSE2, no streaming stores).
ISA_LEVELS = ["sse2", "ssse3", "avx2", "avx512f", "avx512", "-DDM_PORTABLE"]


def _sweep(core):
    """Every tile, bit for bit against the NumPy engine, on ``core``: block tiles of 2, 3 and 4 in both
    groupings, windows, every word width, rows of a 16-byte group and more, channels-last, crops and pads;
    plain, then streamed (stores around the cache wherever the program can). The calls compared."""
    rng = np.random.default_rng(9)
    compared = 0
    for dtype in (np.uint8, np.uint16, np.float32, np.float64, np.complex128):
        for block in (2, 3, 4):
            data = random_array((2, 4, 4 * block, 20 * block), np.dtype(dtype), rng)  # rows of 20: a 16-byte group and more
            nhwc = np.ascontiguousarray(np.moveaxis(data, 1, -1)).transpose(0, 3, 1, 2)
            for x in (data, nhwc):
                for mode in ("blocks_first", "depth_first"):
                    deep = run_both(dm.space_to_depth, x, mode, block)
                    run_both(dm.depth_to_space, deep, mode, block)
                args = ([1, 1, block, block], [0, 0, 1, block - 1], [0, 0, block - 1, 1])
                run_both(dm.batch_to_space, run_both(dm.space_to_batch, x, *args), *args)
                compared += 6
    for _ in range(100):  # and random calls: ranks 3-5, every dtype kind, blocks 1-4, crops and pads, layouts
        compared += _random_call(rng)
    return compared


def _random_call(rng):
    """One random call of a random op, native against NumPy (run_both): 1."""
    rank, dtype = int(rng.integers(3, 6)), DTYPES[int(rng.integers(len(DTYPES)))]
    op = ["space_to_depth", "depth_to_space", "space_to_batch", "batch_to_space"][int(rng.integers(4))]
    spatial = [int(rng.integers(1, 9)) for _ in range(rank - 2)]
    if op in ("space_to_depth", "depth_to_space"):
        block, mode = int(rng.integers(1, 5)), ["blocks_first", "depth_first"][int(rng.integers(2))]
        shape = [int(rng.integers(1, 4)), int(rng.integers(1, 5))] + [d * block for d in spatial]
        if op == "depth_to_space":
            shape = [shape[0], shape[1] * block ** (rank - 2)] + spatial
        args = (mode, block)
    else:
        blocks = [1, 1] + [int(rng.integers(1, 4)) for _ in spatial]
        begin = [0, 0] + [int(rng.integers(0, 3)) for _ in spatial]
        if op == "space_to_batch":
            end = [0, 0] + [(-(d + b0)) % k + k * int(rng.integers(0, 2)) for d, b0, k in zip(spatial, begin[2:], blocks[2:])]
            shape = [int(rng.integers(1, 3)), int(rng.integers(1, 5))] + spatial
        else:
            begin = [0, 0] + [min(b0, d * k - 1) for b0, d, k in zip(begin[2:], spatial, blocks[2:])]
            end = [0, 0] + [int(rng.integers(0, d * k - b0)) for b0, d, k in zip(begin[2:], spatial, blocks[2:])]
            shape = [int(np.prod(blocks)) * int(rng.integers(1, 3)), int(rng.integers(1, 5))] + spatial
        args = (blocks, begin, end)
    data = random_array(shape, dtype, rng)
    layout = int(rng.integers(4))
    if layout == 1:
        data = data[..., ::-1]
    elif layout == 2:
        data = np.moveaxis(np.ascontiguousarray(np.moveaxis(data, 1, -1)), -1, 1)
    elif layout == 3:
        data = random_array([d + 1 for d in shape], dtype, rng)[tuple(slice(1, None) for _ in shape)]
    with _threads(int(rng.integers(1, 4))):
        run_both(getattr(dm, op), data, *args)
    return 1


@pytest.mark.slow
@pytest.mark.parametrize("level", ISA_LEVELS)
def test_every_instruction_set_level_this_cpu_has(monkeypatch, level):
    """The core at every level this CPU has (DATAMOVE_ISA, read as a copy of it loads), and as aarch64 or any
    non-x86 CPU compiles it (-DDM_PORTABLE: no SSE2 bodies, no streaming stores), bit for bit against the
    NumPy engine on every tile, plain and streamed (_sweep). Which kernels a level has is the core's answer
    (WHOLE_LINES, WHOLE_NARROW_LINES, GATHER_LINES, GATHER_NARROW_LINES), never this machine's."""
    core = _core_built_with(level) if level.startswith("-D") else _core_at(level)
    assert core.HAVE_STREAM == (level != "-DDM_PORTABLE")
    assert core.WHOLE_LINES == (level in ("avx512f", "avx512")) and core.WHOLE_NARROW_LINES == (level == "avx512")
    assert core.GATHER_LINES == (level in ("avx2", "avx512f", "avx512"))
    assert core.GATHER_NARROW_LINES == (level in ("avx2", "avx512f", "avx512"))
    native_engine.core()
    monkeypatch.setattr(native_engine, "_native", core)
    compared = 0
    for stream in (1 << 62, 0):
        monkeypatch.setattr(native_engine, "STREAM_BYTES", stream)
        compared += _sweep(core)
    assert compared == 2 * (180 + 100)


def test_the_instruction_set_is_chosen_once_and_lowered_by_datamove_isa():
    """DATAMOVE_ISA lowers the level (case and blanks ignored; "native" or unset: the CPU's); a level above
    the CPU's, below the build's lowest, or no level at all leaves the CPU's with one RuntimeWarning naming
    the value and the levels there are. Asked of the core, never assumed of this machine."""
    core = native_engine.core()
    assert core.ISAS[0] in ("sse2", "portable") and core.ISAS[-1] == core.CPU_ISA
    code = ("import warnings\nwith warnings.catch_warnings(record=True) as caught:\n    warnings.simplefilter('always')\n"
            "    from datamove import _native as core\n"
            "print(core.ISA, len([w for w in caught if 'DATAMOVE_ISA=' in str(w.message)]))\n")
    env = {k: v for k, v in os.environ.items() if k != "DATAMOVE_ISA"}
    assert _child(code, env=env).split() == [core.CPU_ISA, "0"]
    for value, level, warned in [("native", core.CPU_ISA, 0), (f" {core.ISAS[0].upper()} ", core.ISAS[0], 0),
                                 ("avx-512", core.CPU_ISA, 1), ("", core.CPU_ISA, 0)]:
        assert _child(code, env={**env, "DATAMOVE_ISA": value}).split() == [level, str(warned)], value
    if core.CPU_ISA != "avx512":
        assert _child(code, env={**env, "DATAMOVE_ISA": "avx512"}).split() == [core.CPU_ISA, "1"]
    if core.ISAS[0] == "sse2":
        assert _child(code, env={**env, "DATAMOVE_ISA": "portable"}).split() == ["sse2", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["avx2", "-DDM_PORTABLE"])
@pytest.mark.parametrize("stream", [False, True])
def test_small_image_tables_without_avx512(monkeypatch, flag, stream):
    """Where the CPU has no AVX-512F (AVX2 x86-64, or aarch64 and the like: -DDM_PORTABLE, no streaming
    stores), the units of many small images still go by their tables, a word at a time (table_words): the
    cases of test_units_of_small_images_from_a_table and test_small_images_with_crops_from_one_table, plain
    and streamed, at every 4-byte offset into a line, on 1 and 3 threads, bit for bit the spec's result and
    nothing outside it."""
    portable = _core_built_with(flag) if flag.startswith("-D") else _core_at(flag)
    native_engine.core()
    monkeypatch.setattr(native_engine, "_native", portable)
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
    monkeypatch.setattr(native_engine, "REGISTER_STREAM_BYTES", 0 if stream else 1 << 62)
    rng = np.random.default_rng(31)
    cases = [(ref.depth_to_space, dm.depth_to_space, (1031, 64, 2, 2), ("depth_first", 2), np.float32, "nchw"),
             (ref.depth_to_space, dm.depth_to_space, (523, 16, 2, 2), ("blocks_first", 2), np.float64, "nchw"),
             (ref.depth_to_space, dm.depth_to_space, (181, 32, 7, 7), ("depth_first", 2), np.float32, "nchw"),
             (ref.depth_to_space, dm.depth_to_space, (1029, 16, 2, 2), ("depth_first", 2), np.float32, "nhwc"),
             (ref.space_to_depth, dm.space_to_depth, (233, 32, 6, 6), ("depth_first", 3), np.float32, "nchw"),
             (ref.space_to_depth, dm.space_to_depth, (1031, 16, 4, 4), ("blocks_first", 2), np.int32, "nchw"),
             (ref.space_to_depth, dm.space_to_depth, (3, 4, 4, 14), ("depth_first", 2), np.float32, "nhwc"),
             (ref.batch_to_space, dm.batch_to_space, (4 * 1031, 16, 4, 4), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]),
              np.float32, "nchw"),
             (ref.batch_to_space, dm.batch_to_space, (4 * 57, 8, 7, 7), ([1, 1, 2, 2], [0, 0, 0, 1], [0, 0, 1, 0]),
              np.float64, "nchw"),
             (ref.batch_to_space, dm.batch_to_space, (8 * 67, 4, 3, 4, 4),
              ([1, 1, 2, 2, 2], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]), np.float32, "nchw"),
             (ref.space_to_batch, dm.space_to_batch, (18, 2, 10, 19), ([1, 1, 4, 4], [0, 0, 2, 1], [0, 0, 0, 0]),
              np.float32, "nhwc"),  # units of 2 words: a store's words in two or more units
             (ref.space_to_batch, dm.space_to_batch, (13, 2, 5, 12), ([1, 1, 3, 3], [0, 0, 1, 0], [0, 0, 0, 0]),
              np.float64, "nchw")]
    for threads in (1, 3):
        with _threads(threads):
            for spec, call, shape, args, dtype, layout in cases:
                full = random_array(shape, np.dtype(dtype), rng)
                for data in (full, full[..., ::-1]):
                    if layout == "nhwc":
                        data = np.ascontiguousarray(np.moveaxis(data, 1, -1)).transpose(0, 3, 1, 2)
                    expected = spec(data, *args)
                    last = expected if layout == "nchw" else np.ascontiguousarray(expected.transpose(0, 2, 3, 1))
                    for offset, out, written_outside in _outs_at_offsets(last, range(0, 64, 4)):
                        out = out if layout == "nchw" else out.transpose(0, 3, 1, 2)
                        call(data, *args, out=out, engine="native")
                        assert same_bits(out, expected), (shape, args, offset)
                        assert not written_outside(), (shape, args, offset)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # set once
@given(st.sampled_from(["space_to_depth", "space_to_batch"]), st.integers(2, 4), st.sampled_from([1, 2, 4, 8, 16]),
       st.permutations(range(4)), st.permutations(range(4)), st.integers(0, 3), st.integers(1, 24),
       st.integers(0, 2**32 - 1))
def test_streamed_any_layout_and_offset(streaming, op, block, itemsize, in_order, out_order, offset, channels, seed):
    """Streaming stores forced on every output, any memory order of the input and of the output (channels-last
    among them), the output 0 to 3 items into its buffer: bit for bit what the NumPy engine writes, and back."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype({1: np.uint8, 2: np.uint16, 4: np.float32, 8: np.float64, 16: np.complex128}[itemsize])
    shape = (2, channels, 3 * block, 5 * block)

    def laid_out(shape, order, shift=0):
        dims = [shape[a] for a in order]
        base = random_array((int(np.prod(dims)) + shift,), dtype, rng)
        return base[shift:].reshape(dims).transpose(np.argsort(order))

    data = laid_out(shape, in_order)
    args = (("depth_first" if seed % 2 else "blocks_first", block) if op == "space_to_depth"
            else ([1, 1, block, block], [0, 0, 1, block - 1], [0, 0, block - 1, 1]))
    expected = getattr(dm, op)(data, *args, engine="numpy")
    out = laid_out(expected.shape, out_order, offset)
    getattr(dm, op)(data, *args, out=out, engine="native")
    assert same_bits(out, expected)
    back = laid_out(shape, out_order, offset)
    inverse = dm.depth_to_space if op == "space_to_depth" else dm.batch_to_space
    inverse(out, *args, out=back, engine="native")
    assert same_bits(back, data)


def test_fan_out_first_moves_only_the_loops_between_a_long_row_tile_on_whole_lines_and_the_loop_reading_on():
    """The loops between a scatter tile and the loop whose src stride continues its rows go outermost, in
    their order; rows under 1 KiB, rows not contiguous in src, rows off whole lines, and nests with no loop
    reading on stay."""
    tile = [[2, 8388608, 1], [256, 1, 2]]  # 256 words of 4 bytes a row: 1 KiB
    planes, rows, by = [128, 65536, 262144], [256, 256, 1024], [2, 16777216, 512]  # output rows of 2 KiB
    assert fan_out_first([planes, rows, by] + tile, 4, 0, 2048) == [by, planes, rows] + tile
    assert fan_out_first([planes, rows, by] + tile, 2, 0, 1024) == [planes, rows, by] + tile  # 512 bytes
    assert fan_out_first([planes, by] + tile, 4, 0, 2048) == [planes, by] + tile  # nothing reads on
    assert fan_out_first([planes, rows] + tile, 4, 0, 2048) == [planes, rows] + tile  # nothing between
    assert fan_out_first([planes, rows, by] + [[2, 8388608, 1], [256, 2, 2]], 4, 0, 2048) == [planes, rows, by, [2, 8388608, 1], [256, 2, 2]]
    bz = [2, 33554432, 131072]  # 5-D: two block loops between, kept in their order
    assert fan_out_first([planes, rows, bz, by] + tile, 4, 0, 2048) == [bz, by, planes, rows] + tile
    # rows off whole lines stay in order: a row past a line, a row not a whole number of lines (crops), a
    # stride off a line
    assert fan_out_first([planes, rows, by] + tile, 4, 16, 2048) == [planes, rows, by] + tile
    assert fan_out_first([planes, rows, by] + tile, 4, 0, 2040) == [planes, rows, by] + tile
    assert fan_out_first([[128, 65536, 260100], rows, by] + tile, 4, 0, 2048) == [[128, 65536, 260100], rows, by] + tile


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_streamed_scatters_of_long_rows_read_a_block_row_at_a_time(streaming, threads):
    """Streamed, BatchToSpace and DepthToSpace with input rows of 1 KiB or more whose output rows lie on whole
    lines run the block's row offset as the outermost loop (fan_out_first: each pass reads B input streams,
    not B x B); rows under 1 KiB, rows off whole lines (crops, an output a few bytes past a line: the core
    joins the lines between rows in order) and outputs stored plainly keep the output's order; bit for bit
    either way, nothing outside the output, with crops, rows cut among threads anywhere."""
    rng = np.random.default_rng(threads)
    cases = [
        (dm.batch_to_space, ref.batch_to_space, (8, 3, 5, 256), np.float32, ((1, 1, 2, 2), (0, 0, 1, 0), (0, 0, 1, 2))),
        (dm.batch_to_space, ref.batch_to_space, (8, 3, 5, 128), np.float64, ((1, 1, 2, 2), (0, 0, 0, 0), (0, 0, 0, 0))),
        (dm.batch_to_space, ref.batch_to_space, (16, 2, 3, 3, 1024), np.uint8, ((1, 1, 2, 2, 2), (0, 0, 1, 0, 3), (0, 0, 0, 1, 1))),
        (dm.depth_to_space, ref.depth_to_space, (2, 12, 5, 256), np.float32, ("blocks_first", 2)),
        (dm.depth_to_space, ref.depth_to_space, (2, 12, 5, 256), np.float32, ("depth_first", 2)),
        (dm.batch_to_space, ref.batch_to_space, (8, 3, 5, 255), np.float32, ((1, 1, 2, 2), (0, 0, 1, 0), (0, 0, 1, 2))),
        (dm.depth_to_space, ref.depth_to_space, (2, 12, 5, 128), np.float32, ("blocks_first", 2)),
    ]
    with _threads(threads):
        for op, spec, shape, dtype, args in cases:
            data = random_array(shape, np.dtype(dtype), rng)
            expected = spec(data, *args)
            plan = getattr(plans, op.__name__)(data.shape, expected.shape, *args)
            fanned = shape[-1] * np.dtype(dtype).itemsize >= 1024
            for stream in (True, False):
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(native_engine, "STREAM_BYTES", 0 if stream else 1 << 62)
                    for offset, out, written_outside in _outs_at_offsets(expected, (0, 8, 16, 40)):
                        main = max(_steps(lowering.program(plan, data, out)), key=lambda s: np.prod([l[0] for l in s[3]]))
                        outermost = main[3][0]
                        block_row = outermost[0] == args[0][-2] if op is dm.batch_to_space else outermost[0] == args[1]
                        on_lines = offset == 0 and out.strides[-2] % 64 == 0
                        # the block row offset outermost writes every other output row: dst stride one row
                        assert (block_row and outermost[2] * np.dtype(dtype).itemsize == out.strides[-2]) == (fanned and stream and on_lines), \
                            (op.__name__, shape, stream, offset, outermost)
                        op(data, *args, out=out, engine="native")
                        assert same_bits(out, expected), (op.__name__, shape, stream, offset)
                        assert not written_outside(), (op.__name__, shape, stream, offset)


@pytest.mark.parametrize("threads", [1, 3])
def test_streamed_scatter_rows_off_lines_join_the_next_rows(streaming, threads):
    """Streamed scatter rows that start or end inside a line hold the line they end in until the next row
    fills it (the core's carry): BatchToSpace's windows of 4- and 8-byte words with crops, and the rows
    staged through the L1 buffer (1- and 2-byte words, blocks of 3, 16-byte words). They stream at every
    4-byte offset into a line, and come out bit for bit at every item offset, nothing outside the output,
    rows cut among threads anywhere; rows a few bytes apart are not joined across the gap."""
    rng = np.random.default_rng(threads)
    cases = [
        (dm.batch_to_space, ref.batch_to_space, (8, 2, 3, 256), np.float32, ((1, 1, 2, 2), (0, 0, 1, 0), (0, 0, 1, 3))),
        (dm.batch_to_space, ref.batch_to_space, (16, 2, 3, 130), np.float64, ((1, 1, 2, 4), (0, 0, 0, 1), (0, 0, 1, 0))),
        (dm.batch_to_space, ref.batch_to_space, (16, 2, 3, 128), np.uint8, ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 0, 3))),
        (dm.batch_to_space, ref.batch_to_space, (18, 2, 3, 100), np.uint16, ((1, 1, 3, 3), (0, 0, 1, 2), (0, 0, 0, 2))),
        (dm.depth_to_space, ref.depth_to_space, (2, 8, 3, 100), np.uint8, ("blocks_first", 2)),
        (dm.depth_to_space, ref.depth_to_space, (2, 18, 3, 70), np.uint16, ("depth_first", 3)),
        (dm.depth_to_space, ref.depth_to_space, (2, 9, 3, 70), np.float32, ("blocks_first", 3)),
        (dm.depth_to_space, ref.depth_to_space, (1, 4, 3, 40), np.complex128, ("depth_first", 2)),
    ]
    core = native_engine.core()
    with _threads(threads):
        for op, spec, shape, dtype, args in cases:
            data = random_array(shape, np.dtype(dtype), rng)
            expected = spec(data, *args)
            plan = getattr(plans, op.__name__)(data.shape, expected.shape, *args)
            for offset, out, written_outside in _outs_at_offsets(expected, _item_offsets(np.dtype(dtype).itemsize)):
                program = lowering.program(plan, data, out)
                # (it streams 4-byte aligned pieces of 4-byte multiples: from an odd offset, plainly)
                assert core.streams(program, out.__array_interface__["data"][0]) or offset % 4, (op.__name__, shape, dtype, offset)
                op(data, *args, out=out, engine="native")
                assert same_bits(out, expected), (op.__name__, shape, dtype, offset)
                assert not written_outside(), (op.__name__, shape, dtype, offset)
            # rows a few bytes apart (an out= cut from a wider array): a row that starts in the line the
            # last one ended in, but not where it ended, is not joined to it; the gaps stay as they were
            for gap in (4, 8, 12):
                items = gap // np.dtype(dtype).itemsize or 1
                wide = np.zeros(expected.shape[:-1] + (expected.shape[-1] + items,), dtype)
                out = wide[..., :expected.shape[-1]]
                op(data, *args, out=out, engine="native")
                assert same_bits(out, expected), (op.__name__, shape, dtype, gap)
                assert not wide[..., expected.shape[-1]:].view(np.uint8).any(), (op.__name__, shape, dtype, gap)


def test_short_rows_stream_where_the_plain_run_loop_cannot_take_them(windows, streaming):
    """streams_whole stores short gather-window rows plainly only where the plain run loop takes them
    (runs_plainly, the rule both share): SpaceToBatch with a pad of 70 before 2 items and a block of 4
    has 18 blocks a row, none whole, 72 words outside the groups (the run loop's lists hold 64), so its
    72-byte rows stream; a pad of 6 (2 blocks a row) is the run loop's and stores plainly. Bit for bit,
    nothing outside the output, either way."""
    core = native_engine.core()
    rng = np.random.default_rng(70)
    for pad, streamed in ((70, True), (6, False)):
        data = random_array((2, 3, 4, 2), np.dtype(np.float32), rng)
        args = ((1, 1, 1, 4), (0, 0, 0, pad), (0, 0, 0, 0))
        expected = ref.space_to_batch(data, *args)
        plan = plans.space_to_batch(data.shape, expected.shape, *args)
        for offset, out, written_outside in _outs_at_offsets(expected, (0, 16)):
            window = [s for s in _steps(lowering.program(plan, data, out)) if s[0] == lowering._PATTERNS["gather_window"]]
            assert window, pad
            assert core.streams(lowering.program(plan, data, out), strided._address(out)) == streamed, (pad, offset)
            dm.space_to_batch(data, *args, out=out, engine="native")
            assert same_bits(out, expected), (pad, offset)
            assert not written_outside(), (pad, offset)


@pytest.mark.parametrize("threads", [1, 3])
def test_streamed_gathers_join_up_to_16_rows_side_by_side_where_runs_are_long(streaming, threads):
    """Gather tiles whose rows go on past the block's row loop are streamed as runs buffered side by side
    (side_joined) up to 16 rows (4 x 4 blocks) where each row's run is 4 KiB or more, so into an out= 16
    bytes into a line they stream; 9 rows of 1 KiB runs (5-D SpaceToDepth with block 3) store plainly
    there. Bit for bit, nothing outside the output, 1- to 8-byte items, rows cut among threads anywhere."""
    core = native_engine.core()
    rng = np.random.default_rng(16 + threads)
    cases = [
        (dm.space_to_depth, ref.space_to_depth, plans.space_to_depth, (1, 2, 64, 256), np.float32, ("depth_first", 4), True),
        (dm.space_to_depth, ref.space_to_depth, plans.space_to_depth, (1, 2, 48, 192), np.float64, ("blocks_first", 3), True),
        (dm.space_to_batch, ref.space_to_batch, plans.space_to_batch, (1, 2, 128, 512), np.uint8,
         ((1, 1, 4, 4), (0, 0, 0, 0), (0, 0, 0, 0)), True),
        (dm.space_to_batch, ref.space_to_batch, plans.space_to_batch, (1, 2, 126, 508), np.int16,
         ((1, 1, 4, 4), (0, 0, 1, 2), (0, 0, 1, 2)), True),
        (dm.space_to_depth, ref.space_to_depth, plans.space_to_depth, (1, 2, 6, 48, 48), np.float32, ("depth_first", 3), False),
    ]
    with _threads(threads):
        for op, spec, plan_of, shape, dtype, args, streamed in cases:
            data = random_array(shape, np.dtype(dtype), rng)
            expected = spec(data, *args)
            plan = plan_of(data.shape, expected.shape, *args)
            for offset, out, written_outside in _outs_at_offsets(expected, (16, 0, 4 * (np.dtype(dtype).itemsize < 8))):
                if offset == 16:
                    assert core.streams(lowering.program(plan, data, out), strided._address(out)) == streamed, \
                        (op.__name__, shape, offset)
                op(data, *args, out=out, engine="native")
                assert same_bits(out, expected), (op.__name__, shape, offset)
                assert not written_outside(), (op.__name__, shape, offset)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int64])
@pytest.mark.parametrize("block", [2, 3, 4])
def test_streamed_gathers_store_whole_lines(streaming, threads, dtype, block):
    """Where the CPU has AVX-512F (``WHOLE_LINES``), streamed gathers of 4- and 8-byte words go straight from
    registers to memory a whole line a store (gather_lines), and with AVX-512BW and VBMI too
    (``WHOLE_NARROW_LINES``) those of 1- and 2-byte words (gather_narrow_lines); where it has AVX2 alone,
    gather_lines_avx2 takes those of 4- and 8-byte words (``GATHER_LINES``) and, outside windows, of 1- and
    2-byte words in blocks of 2 and 4 (``GATHER_NARROW_LINES``), tiles of a line or more; the partial
    lines at a run's ends stored plainly; elsewhere the same cases take the L1 buffer. Tiles of one line, of a line and a few positions (a
    line's positions from two tiles) and of many lines; rows that go on past the block's row loop (NCHW) and
    right outside the tile (SpaceToBatch with the block on W only); SpaceToBatch's windows with pads (zeros
    in the loads); the output at every item offset into a line; pieces cut among threads anywhere: bit for
    bit the spec's result, nothing written outside it."""
    item = np.dtype(dtype).itemsize
    line = 64 // item  # positions a line
    rng = np.random.default_rng(block * 10 + threads)
    with _threads(threads):
        for positions in (line, line + 3, 3 * line - 1, 40 * line + 5):
            big = positions > 3 * line
            data = random_array((2, 4, (8 if big else 2) * block, positions * block), np.dtype(dtype), rng)
            calls = [(dm.space_to_depth, ref.space_to_depth, (mode, block)) for mode in ("blocks_first", "depth_first")]
            calls += [(dm.space_to_batch, ref.space_to_batch, (shape, (0,) * 4, (0,) * 4))
                      for shape in ((1, 1, block, block), (1, 1, 1, block))]
            calls += [(dm.space_to_batch, ref.space_to_batch, ((1, 1, block, block), (0, 0, 1, 1), (0, 0, block - 1, block - 1))),
                      (dm.space_to_batch, ref.space_to_batch, ((1, 1, 1, block), (0, 0, 0, 2), (0, 0, 0, block - 2)))]
            for op, spec, args in calls:
                expected = spec(data, *args)
                offsets = (0, item, 16, 64 - item) if big else _item_offsets(item)
                _check_at_offsets(lambda out: op(data, *args, out=out, engine="native"), expected, offsets,
                                  (op.__name__, args, positions))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.int64])
@pytest.mark.parametrize("block", [2, 3, 4])
def test_whole_line_gathers_join_the_lanes_around_each_tile_end(streaming, threads, dtype, block):
    """Streamed whole-line gathers (``GATHER_LINES``: gather_lines_avx2 below AVX-512) whose lines cross from
    one tile into the next at every lane of a 32-byte vector: output rows of two to three lines (every
    count of positions between) at every item offset into a line, so each line across two tiles takes the
    last lanes of one and the first of the next (the vector across the cut by masked loads, as are those
    where a window's padding lies); of 1- and 2-byte words (outside windows) the vector across the cut
    from a copy of its two parts. NCHW SpaceToDepth (rows that go on past the
    block's row loop), SpaceToBatch with the block on W only (rows that go on right outside the tile), with
    pads of every width below the block: bit for bit the spec's result, nothing written outside it."""
    item = np.dtype(dtype).itemsize
    line = 64 // item
    rng = np.random.default_rng(block * 100 + item + threads)
    core = native_engine.core()
    with _threads(threads):
        for positions in range(2 * line, 3 * line + 1, 1 if item == 8 else 3):
            data = random_array((1, 2, 2 * block, positions * block), np.dtype(dtype), rng)
            calls = [(dm.space_to_depth, ref.space_to_depth, (mode, block)) for mode in ("blocks_first", "depth_first")]
            calls += [(dm.space_to_batch, ref.space_to_batch, ((1, 1, 1, block), (0, 0, 0, lead), (0, 0, 0, (-lead) % block)))
                      for lead in range(block)]
            for op, spec, args in calls:
                expected = spec(data, *args)
                _check_at_offsets(lambda out: op(data, *args, out=out, engine="native"), expected, _item_offsets(item),
                                  (op.__name__, args, positions))
            lines = core.GATHER_LINES if item >= 4 else core.GATHER_NARROW_LINES
            if lines and block == 2 and positions % line == 0:  # (4 side rows of whole lines, whose runs stream as one)
                data = random_array((1, 2, 8 * block, positions * block), np.dtype(dtype), rng)
                expected = ref.space_to_depth(data, "blocks_first", block)
                plan = plans.space_to_depth(data.shape, expected.shape, "blocks_first", block)
                for offset, out, _ in _outs_at_offsets(expected, (0, 16)):
                    assert core.streams(lowering.program(plan, data, out), strided._address(out), True), offset


@pytest.mark.parametrize("level", ["sse2", "avx2", "avx512f", "avx512"])
def test_gather_tiles_of_one_line_stream_from_registers_at_every_level(monkeypatch, level):
    """NCHW SpaceToDepth whose output rows are one line each (16 float32, 64 uint8: every line across two
    tiles off the line): below the last-level cache's size (stream mode 1) they stream straight from
    registers wherever the level has a line kernel for their words and block (``GATHER_LINES`` for 4- and
    8-byte words; 1- and 2-byte words in blocks of 2 and 4 by ``GATHER_NARROW_LINES``, of 3 by
    ``WHOLE_NARROW_LINES``), side rows two tiles a group (kSideBurstLines), and stay plain where it has none.
    4-D and 5-D, both modes, and SpaceToBatch's windows of such rows with pads and without, every item offset
    into a line, rows cut among 1 or 3 threads: bit for bit the spec's result, nothing written outside it."""
    core = _register_streams_at(monkeypatch, level)
    rng = np.random.default_rng(48)
    streamed = 0
    for dtype in (np.uint8, np.uint16, np.float32, np.float64):
        item = np.dtype(dtype).itemsize
        line = 64 // item  # positions a line: one output row
        for block in (2, 3, 4):
            words = core.GATHER_LINES if item >= 4 else core.GATHER_NARROW_LINES if block != 3 else core.WHOLE_NARROW_LINES
            shapes = [(1, 2, 64 * block, line * block)]  # (64 tiles a side row's run, 4 KiB: side_joined)
            if block == 3:
                shapes.append((1, 2, 4 * block, 16 * block, line * block))  # 5-D: depth, height and width blocked
            for shape in shapes:
                data = random_array(shape, np.dtype(dtype), rng)
                for mode in ("blocks_first", "depth_first"):
                    expected = ref.space_to_depth(data, mode, block)
                    plan = plans.space_to_depth(data.shape, expected.shape, mode, block)
                    for offset, out, outside in _outs_at_offsets(expected, _item_offsets(item)):
                        registers = core.streams(lowering.program(plan, data, out, stream=1), strided._address(out), True)
                        if offset % 4 == 0:  # (bytes off 4 bytes: as other rules have it)
                            assert registers == bool(words), (dtype, block, shape, mode, offset)
                            streamed += registers
                        for threads in (1, 3):
                            out[...] = 0
                            with _threads(threads):
                                dm.space_to_depth(data, mode, block, out=out, engine="native")
                            assert same_bits(out, expected) and not outside(), (dtype, block, shape, mode, offset, threads)
            # SpaceToBatch's windows of one-line rows, padding nothing and with pads of 1 and block - 1 (zeros
            # in the loads, where the level's line kernel takes such a window)
            for pads in ((0, 0), (1, block - 1)):
                data = random_array((1, 2, 64 * block, line * block - sum(pads)), np.dtype(dtype), rng)
                args = ((1, 1, block, block), (0, 0, 0, pads[0]), (0, 0, 0, pads[1]))
                expected = ref.space_to_batch(data, *args)
                for threads in (1, 3):
                    with _threads(threads):
                        _check_at_offsets(lambda out: dm.space_to_batch(data, *args, out=out, engine="native"), expected,
                                          _item_offsets(item), (dtype, block, pads, threads), prefill=0)
    # (8 shapes and modes a dtype, 4 of them blocks of 3; float32 and uint16 at 16 offsets, float64 at 8, uint8 at 2)
    assert streamed == {"sse2": 0, "avx2": 8 * (16 + 8) + 4 * (16 + 2), "avx512f": 8 * (16 + 8) + 4 * (16 + 2)}.get(level, 8 * (16 + 8 + 16 + 2))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_streamed_scatters_of_pairs_4_bytes_past_8(streaming, threads, dtype):
    """Streamed scatters of two rows of 4-byte words whose blocks start 4 bytes past 8 (BatchToSpace with a
    crop of an odd number of words on W, or an out= 4 bytes past 8): no block lies on 16 bytes, and each 16
    bytes of output on 16 bytes is taken from two 8-byte loads (scatter_odd_span), the words around them
    one at a time; rows short and long, crops of 0 to 2 words on either side, 1-D and 2-D blocks, at every
    4-byte offset into a line: bit for bit the spec's result, nothing outside it."""
    rng = np.random.default_rng(threads)
    with _threads(threads):
        for width in (9, 33, 64, 129):  # (output rows from 256 bytes stream: streams_whole)
            data = random_array((8, 3, 5, width), np.dtype(dtype), rng)
            for block in ((1, 1, 1, 2), (1, 1, 2, 2)):
                for lead in range(3):
                    for tail in range(3):
                        if lead + tail >= 2 * width:
                            continue
                        args = (block, (0, 0, 0, lead), (0, 0, 0, tail))
                        expected = ref.batch_to_space(data, *args)
                        _check_at_offsets(lambda out: dm.batch_to_space(data, *args, out=out, engine="native"), expected,
                                          range(0, 64, 4), (width, block, lead, tail))


@pytest.mark.parametrize("width, streamed", [(126, True), (30, False)])
def test_register_streams_take_windows_of_wide_pixels_with_long_rows(width, streamed):
    """Channels-last SpaceToBatch of 64 float16 channels (128-byte pixels) with pads: its gather windows
    stage rows in the L1 buffer; below the last-level cache's size (stream mode 1) they stream where a row
    is 4 KiB or more (64 pixels), and a program of 16-pixel rows (2 KiB) stays plain, where the core has
    AVX-512 (below it, gather_pixels streams them from registers at any length). Bit for bit."""
    core = native_engine.core()
    nchw = np.random.default_rng(width).random((2, 64, 40, width)).astype(np.float16)
    data = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # channels-last
    args = ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])
    expected = ref.space_to_batch(data, *args)
    out = np.zeros((expected.shape[0],) + expected.shape[2:] + (64,), np.float16).transpose(0, 3, 1, 2)
    plan = plans.space_to_batch(data.shape, expected.shape, *map(tuple, args))
    program = lowering.program(plan, data, out, stream=1)
    bulk = max(_steps(program), key=lambda step: np.prod([l[0] for l in step[3]]))
    assert bulk[:2] == (lowering._PATTERNS["gather_window"], 128), bulk
    addresses = (strided._address(data), strided._address(out))
    # (below AVX-512, gather_pixels takes such windows from registers, rows of any length)
    registers = streamed or not core.WHOLE_LINES
    assert core.streams(program, addresses[1], True) == (registers and core.streams(program, addresses[1]))
    with _threads(2):
        core.run(program, data, out, dm.get_num_threads(), 1)
    assert same_bits(out, expected)


def test_outputs_between_the_two_sizes_stream_where_every_step_streams_from_registers(monkeypatch):
    """From REGISTER_STREAM_BYTES up to STREAM_BYTES (a last-level cache larger than the first), a call is
    streamed only where every step streams straight from registers: copies, fills, scatters of 4- and
    8-byte words in blocks of 2 or 4, scatters of any block whose rows are 240 bytes or more (staged whole
    in the L1 buffer), and (where the CPU has AVX-512 or AVX2: ``GATHER_LINES``) gathers and SpaceToBatch's
    windows of 4- and 8-byte words stored a whole line at a time, padding and all (of 1- and 2-byte words
    with AVX-512BW and VBMI); scatters of blocks of 3 into shorter rows, and elsewhere every gather (through
    the L1 buffer), store plainly. Bit for bit the spec's result either way, at several
    offsets into a line."""
    core = native_engine.core()
    monkeypatch.setattr(native_engine, "STREAM_BYTES", 1 << 20)
    monkeypatch.setattr(native_engine, "REGISTER_STREAM_BYTES", 1 << 10)
    assert [native_engine.streamed(np.empty(n, np.uint8)) for n in (1 << 9, 1 << 10, 1 << 19, 1 << 20)] == [0, 1, 1, 2]
    rng = np.random.default_rng(5)
    lines = bool(core.GATHER_LINES)  # (AVX-512F's gather_lines, or AVX2's gather_lines_avx2)
    pads = ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))
    cases = [  # op, spec, plan, shape, dtype, args, streamed from registers
        (dm.depth_to_space, ref.depth_to_space, plans.depth_to_space, (2, 16, 8, 64), np.float32, ("blocks_first", 2), True),
        (dm.batch_to_space, ref.batch_to_space, plans.batch_to_space, (8, 2, 8, 64), np.float64,
         ((1, 1, 2, 2), (0, 0, 1, 0), (0, 0, 1, 2)), True),
        (dm.depth_to_space, ref.depth_to_space, plans.depth_to_space, (2, 18, 8, 16), np.float32, ("depth_first", 3), False),
        (dm.depth_to_space, ref.depth_to_space, plans.depth_to_space, (2, 18, 8, 64), np.float32, ("depth_first", 3), True),
        (dm.depth_to_space, ref.depth_to_space, plans.depth_to_space, (2, 18, 8, 20), np.float32, ("depth_first", 3), True),
        (dm.space_to_depth, ref.space_to_depth, plans.space_to_depth, (2, 4, 16, 128), np.float32, ("blocks_first", 2), lines),
        (dm.space_to_depth, ref.space_to_depth, plans.space_to_depth, (2, 4, 16, 128), np.float64, ("depth_first", 4), lines),
        (dm.space_to_depth, ref.space_to_depth, plans.space_to_depth, (2, 4, 16, 256), np.uint8, ("blocks_first", 2),
         bool(core.GATHER_NARROW_LINES)),
        (dm.space_to_batch, ref.space_to_batch, plans.space_to_batch, (1, 4, 30, 126), np.float32, pads, lines),
        (dm.space_to_batch, ref.space_to_batch, plans.space_to_batch, (1, 4, 32, 512), np.uint8,
         ((1, 1, 4, 4), (0,) * 4, (0,) * 4), bool(core.WHOLE_NARROW_LINES)),
    ]
    for op, spec, plan_of, shape, dtype, args, registers in cases:
        data = random_array(shape, np.dtype(dtype), rng)
        expected = spec(data, *args)
        plan = plan_of(data.shape, expected.shape, *[tuple(a) if isinstance(a, tuple) else a for a in args])
        for offset, out, written_outside in _outs_at_offsets(expected, (0, 16)):
            assert native_engine.streamed(out) == 1
            program = lowering.program(plan, data, out)
            assert core.streams(program, strided._address(out), True) == (registers and core.streams(
                program, strided._address(out))), (op.__name__, dtype, offset)
            op(data, *args, out=out, engine="native")
            assert same_bits(out, expected), (op.__name__, dtype, offset)
            assert not written_outside(), (op.__name__, dtype, offset)
