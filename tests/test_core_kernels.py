"""The core's one kernel choice (issue 47): each step of a program gets its kernels once, when the program
is prepared (``choose`` in ``src/native/runtime/program.cpp``), and ``_native.kernels`` names them.

What is asserted here holds on every CPU: which kernel a layout gets may depend on the instruction set
(the table in ``src/native/runtime.hpp``), but never the rules below, nor the bytes a program writes.
"""

from __future__ import annotations

import numpy as np
import pytest

from datamove.engines.call import Call
from datamove.engines.native import engine as native_engine
from datamove.engines import numpy_engine

from planner_cases import plan_of, python_program, random_case

native = pytest.importorskip("datamove._native")

#: Kernels that only a streamed step takes, and those only a plainly stored one takes.
STREAMED = {"side_lines", "joined_lines", "chained_lines"}
PLAIN = {"rows_simd", "permute_rows", "unit_rows", "transposed_runs"}
#: The kernels a run goes to where its step's kernel cannot take it (then tile by tile).
THEN = {"tiles", "chained_lines", "scatter_runs"}
#: The patterns a table of units can take (run_rows' TAB).
TABLED = {"contiguous", "gather", "scatter", "strided"}


def check_choice(chosen, stream):
    assert isinstance(chosen, list)
    for pattern, kernel, then, table in chosen:
        assert pattern in native.PATTERNS and kernel in native.KERNELS and then in THEN
        assert (pattern == "units") == (kernel == "units")
        if pattern == "contiguous":
            assert kernel == "contiguous_runs"
        if pattern == "fill":
            assert kernel == "tiles" and table is None
        if pattern == "strided":
            assert kernel in ("strided_lines", "transposed_runs", "tiles")
        if kernel in ("strided_lines", "transposed_runs"):
            assert pattern == "strided"
        if kernel in ("rows_simd", "side_lines", "joined_lines"):
            assert pattern in ("gather", "scatter", "gather_window", "scatter_window")
        if kernel in ("chained_lines", "unit_rows"):
            assert pattern == "gather"
        if kernel in ("permute_rows", "scatter_runs"):
            assert pattern == "scatter"
        if then != "tiles":
            assert (kernel, then) in {("side_lines", "chained_lines"), ("permute_rows", "scatter_runs")}
        if stream == 0:
            assert kernel not in STREAMED and then not in STREAMED
        if stream == 1 and kernel == "transposed_runs":  # (strided steps stream only from registers or a table)
            assert table is None
        assert table is None or (pattern in TABLED and table in range(5))


def test_the_kernels_are_named_once():
    assert len(set(native.KERNELS)) == len(native.KERNELS)
    assert native.KERNELS[0] == "tiles" and "units" in native.KERNELS
    assert STREAMED | PLAIN | THEN <= set(native.KERNELS)
    assert sorted(native.PATTERNS.values()) == list(range(len(native.PATTERNS)))


def test_random_layouts_get_kernels_that_fit_and_their_programs_write_numpys_bytes():
    """3,000 random calls (ranks 2-6, every item size, permuted, reversed and gapped strides, offsets, every
    stream mode): each step's kernels obey the rules above, and the program run with them writes what the
    NumPy engine writes, bit for bit."""
    rng = np.random.default_rng(47)
    seen = set()
    for _ in range(3000):
        plan, data, out, stream, _ = random_case(rng, max_items=1 << 12)
        program = python_program(plan, data, out, stream)
        chosen = native.kernels(program, native.lowest(out), stream)
        check_choice(chosen, stream)
        seen.update(kernel for _, kernel, _, _ in chosen)
        want = numpy_engine.execute(plan, data, np.zeros_like(out))
        native.run(program, data, out, 2, stream)
        assert np.ascontiguousarray(out).tobytes() == np.ascontiguousarray(want).tobytes(), (plan, stream, chosen)
    assert {"tiles", "units", "contiguous_runs"} <= seen


@pytest.mark.parametrize("stream", [0, 1, 2])
def test_a_units_program_and_a_copy_get_their_kernels(stream):
    """BatchToSpace with crops of small images is one UNITS step (merged); DepthToSpace of channels-last
    pixels of 64 bytes copies rows (no table: rows a line long)."""
    data = np.arange(16 * 4 * 8 * 8, dtype=np.float32).reshape(16, 4, 8, 8)
    call = Call("batch_to_space", {"block_shape": [1, 1, 2, 2], "crops_begin": [0, 0, 1, 0], "crops_end": [0, 0, 0, 1]},
                data.shape, (4, 4, 15, 15))
    out = np.empty(call.out_shape, np.float32)
    program = native_engine.program_of(call, data, out, stream=stream)
    assert native.kernels(program, native.lowest(out), stream) == [("units", "units", "tiles", None)]

    nhwc = np.zeros((1, 4, 4, 64), np.float32).transpose(0, 3, 1, 2)
    out = np.empty((1, 8, 8, 16), np.float32).transpose(0, 3, 1, 2)
    call = Call("depth_to_space", {"mode": "blocks_first", "block_size": 2}, nhwc.shape, out.shape)
    program = native_engine.program_of(call, nhwc, out, stream=stream)
    assert native.kernels(program, native.lowest(out), stream) == [("contiguous", "contiguous_runs", "tiles", None)]
    assert native_engine.kernels(call, nhwc, out) == [("contiguous", "contiguous_runs", "tiles", None)]


def test_a_fill_is_tiles_and_pads_get_their_fills():
    data = np.ones((1, 3, 5, 5), np.float32)
    plan = plan_of("space_to_batch", data.shape, ([1, 1, 2, 2], [0, 0, 1, 2], [0, 0, 2, 1]), (4, 3, 4, 4))
    out = np.empty(plan.out_shape, np.float32)
    chosen = native.kernels(python_program(plan, data, out, 0), native.lowest(out), 0)
    check_choice(chosen, 0)


def test_a_malformed_program_is_refused():
    with pytest.raises(ValueError, match="malformed"):
        native.kernels(np.array([1, 99], np.int64).tobytes(), 0, 0)
    with pytest.raises(ValueError, match="malformed"):
        native.kernels(b"", 0)
    with pytest.raises(TypeError):
        native.kernels("not bytes", 0)


def test_programs_run_at_once_from_several_threads_keep_their_own_tables():
    """A program run once has its steps' tables filled by the calling thread, in that thread's own slots
    (shared with the pool's workers for the job): four threads running tabled programs at once, each into
    its own arrays, each checked against the NumPy engine."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(4747)
    cases = []
    while len(cases) < 40:
        plan, data, out, stream, _ = random_case(rng, max_items=1 << 12)
        program = python_program(plan, data, out, stream)
        if any(table is not None for *_, table in native.kernels(program, native.lowest(out), stream)):
            cases.append((plan, data, out, stream, program, numpy_engine.execute(plan, data, np.zeros_like(out))))

    def run(k):
        for _ in range(20):
            for plan, data, out, stream, program, want in cases[k::4]:  # (each thread its own cases' outs)
                out[...] = np.zeros((), out.dtype)
                native.run(program, data, out, 2, stream)
                assert np.ascontiguousarray(out).tobytes() == np.ascontiguousarray(want).tobytes(), plan
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(4)))


def _channels_last(array):
    return np.ascontiguousarray(np.moveaxis(array, 1, -1)).transpose(0, array.ndim - 1, *range(1, array.ndim - 1))


def _channels_last_empty(shape, dtype):
    return np.empty((shape[0],) + tuple(shape[2:]) + (shape[1],), dtype).transpose(0, len(shape) - 1, *range(1, len(shape) - 1))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float64, np.complex128])
@pytest.mark.parametrize("channels", [1, 3, 4, 5, 8, 17, 64])
def test_transposing_layouts_write_numpys_bytes(dtype, channels):
    """Channels-first data into a channels-last result and the other way (strided tiles that transpose:
    transpose_words4 for 4-byte words, blocks of 4 and the words past them; transposed_run; the row-by-row
    tile), every op, against the NumPy engine, bit for bit."""
    import datamove as dm

    rng = np.random.default_rng(channels)
    calls = [("space_to_depth", ("blocks_first", 2), (2, channels, 12, 10)),
             ("space_to_depth", ("depth_first", 2), (2, channels, 8, 14)),
             ("depth_to_space", ("blocks_first", 2), (2, 4 * channels, 5, 7)),
             ("depth_to_space", ("depth_first", 2), (2, 4 * channels, 6, 6)),
             ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]), (2, channels, 9, 9)),
             ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]), (8, channels, 6, 5))]
    for op, args, shape in calls:
        base = rng.integers(0, 255, size=shape).astype(dtype)
        for data in (base, _channels_last(base)):
            want = getattr(dm, op)(np.array(data), *args, engine="numpy")
            for out in (np.zeros_like(want), _channels_last_empty(want.shape, want.dtype)):
                out[...] = 0
                got = getattr(dm, op)(data, *args, out=out, engine="native")
                assert got is out and np.array_equal(out, want), (op, args, shape, data.strides, out.strides)
