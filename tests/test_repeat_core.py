"""Repeated calls in one C call (``src/native/runtime/repeat.cpp``): what the core keeps, and every way it must miss.

A NumPy call whose kept recipe has run on the core hands each program it runs
to the core (``native_engine.Planned.repeats``); ``datamove.ops`` asks the
core's ``repeated`` first, which runs the call again where its op, parameters
(as given), engine, input layout and dtype, and out's layout, alignment and
stream mode are those of a program kept, and returns None (nothing written, no
error set) for anything else, which then takes the Python path and its checks.
Each test here changes one of those and asks the core directly, then checks
the answer through ``datamove`` against the specs' formulas (tests/reference.py).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import datamove as dm
from datamove import ops
from datamove.dispatch import numpy_calls
from datamove.engines.call import Call
from datamove.dispatch import recipes
from datamove.engines.native import engine as native_engine

import lowering
import reference
from concurrency import run_threads

pytestmark = pytest.mark.skipif(not native_engine.available(), reason="needs the compiled core")

# (op, (a, b, c) as ops hands them to the core, the op's own arguments, input shape): calls of 4 KiB of
# float32, whose kept recipes run on the core from their second call
S2D = ("space_to_depth", ("blocks_first", 2, "channels_first"), ("blocks_first", 2), (1, 4, 16, 16))
D2S = ("depth_to_space", ("depth_first", 2, "channels_first"), ("depth_first", 2), (1, 16, 8, 8))
B2S = ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]),
       ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), (4, 4, 8, 8))
S2B = ("space_to_batch", ([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]),
       ([1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]), (1, 4, 16, 16))
CASES = [S2D, D2S, B2S, S2B]
IDS = ["s2d", "d2s", "b2s crops", "s2b"]


def _core():
    return native_engine.core()


def _values(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).integers(1, 100, size=shape).astype(dtype)


def _expected(op, args, data):
    return np.ascontiguousarray(getattr(reference, op)(data, *args))


def _kept(op, args, data, out=None, times=3):
    """The call made until its program is kept (a new shape's first call, the recipe's maker, its run)."""
    for _ in range(times):
        result = getattr(dm, op)(data, *args, out=out)
    return result


@pytest.fixture(autouse=True)
def _fresh_table():
    recipes.RECIPES.clear()  # (and the core's table with them)
    numpy_calls.SEEN.clear()
    yield
    recipes.RECIPES.clear()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_kept_call_repeats_in_one_core_call(case, monkeypatch):
    op, given, args, shape = case
    x = _values(shape)
    want = _expected(op, args, x)
    assert _core().repeated(op, x, *given, None, "auto") is None  # nothing kept yet
    _kept(op, args, x)
    got = _core().repeated(op, x, *given, None, "auto")
    assert type(got) is np.ndarray and got.flags.c_contiguous and got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, x)
    out = np.full(want.shape, -1, np.float32)
    _kept(op, args, x, out=out)
    out[...] = -1
    assert _core().repeated(op, x, *given, out, "auto") is out
    np.testing.assert_array_equal(out, want)

    def python_path(*_args, **_kwargs):
        raise AssertionError("a kept call took the Python path")

    # through datamove: no Python frame between ops and the core
    monkeypatch.setattr(native_engine.Planned, "fresh", python_path)
    monkeypatch.setattr(native_engine.Planned, "__call__", python_path)
    for _ in range(3):
        np.testing.assert_array_equal(getattr(dm, op)(x, *args), want)
        out[...] = -1
        assert getattr(dm, op)(x, *args, out=out) is out
        np.testing.assert_array_equal(out, want)


def test_parameters_in_the_same_form_repeat_and_in_any_other_miss():
    op, given, args, shape = S2D
    x = _values(shape)
    _kept(op, args, x)
    repeated = _core().repeated
    assert repeated(op, x, "".join(["blocks_", "first"]), 2, "channels_first", None, "auto") is not None  # equal str
    for mode, block, data_format, engine in [
        ("depth_first", 2, "channels_first", "auto"),   # another mode: another call
        ("blocks_first", np.int64(2), "channels_first", "auto"),  # NumPy's int: the Python path's
        ("blocks_first", 2.0, "channels_first", "auto"),
        ("blocks_first", 4, "channels_first", "auto"),
        ("blocks_first", 2, "channels_last", "auto"),   # a view change the Python path makes
        ("blocks_first", 2, "channels_first", "numpy"),  # other engines: their own recipes
        ("blocks_first", 2, "channels_first", "native"),
        ("blocks_first", 2, "channels_first", "NATIVE"),
        (b"blocks_first", 2, "channels_first", "auto"),
        (None, 2, None, None),
    ]:
        assert repeated(op, x, mode, block, data_format, None, engine) is None, (mode, block, data_format, engine)
    assert repeated("depth_to_space", x, "blocks_first", 2, "channels_first", None, "auto") is None
    assert repeated("no_such_op", x, "blocks_first", 2, "channels_first", None, "auto") is None
    assert repeated(42, x, "blocks_first", 2, "channels_first", None, "auto") is None
    # the space ops: lists and tuples of ints alike; NumPy arrays, bools, floats and other values not
    op, given, args, shape = B2S
    y = _values(shape)
    _kept(op, args, y)
    block, begin, end = given
    assert repeated(op, y, tuple(block), tuple(begin), end, None, "auto") is not None
    for other in [(np.array(block), begin, end), ([1, 1, 2, True], begin, end), ([1, 1, 2, 2.0], begin, end),
                  (block, [0, 0, 1], end), (block, begin, [0, 0, 1, 1, 0]), (block, begin, [0, 0, 0, 1]),
                  (block, begin, [0, 0, 1, 2 ** 70]), (block, begin, "0011"), (block, begin, None)]:
        assert repeated(op, y, *other, None, "auto") is None, other
    with pytest.raises(TypeError, match="7 arguments"):
        repeated(op, y, *given, None)


def test_another_array_or_layout_misses():
    op, given, args, shape = S2D
    x = _values(shape)
    _kept(op, args, x)
    repeated = _core().repeated

    class Sub(np.ndarray):
        pass

    for other in [x.view(Sub), x.tolist(), x.astype(np.int32), x.astype(np.float64),
                  x.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2),  # the same shape, other strides
                  x[:, :, ::-1], np.pad(x, 1)[1:-1, 1:-1, 1:-1, 1:-1], x[..., :8], x.reshape(1, 4, 8, 32)]:
        assert repeated(op, other, *given, None, "auto") is None
    # the same layout at another alignment, and into out= of other strides: programs the core plans itself
    buffer = np.zeros(x.nbytes + 64, np.uint8)
    want = _expected(op, args, x)
    for offset in range(4, 64, 4):
        moved = buffer[offset:offset + x.nbytes].view(np.float32).reshape(shape)
        moved[...] = x
        np.testing.assert_array_equal(repeated(op, moved, *given, None, "auto"), want)
    # out= of strides no call has passed the Python path's checks with: never planned here
    wide = np.full(want.shape[:-1] + (want.shape[-1] * 2 + 1,), 7, np.float32)
    assert repeated(op, x, *given, wide[..., :-1:2], "auto") is None
    overlapping = np.lib.stride_tricks.as_strided(wide, want.shape, (0,) * 4)
    assert repeated(op, x, *given, overlapping, "auto") is None
    with pytest.raises(dm.DataMoveError, match="overlap"):
        dm.space_to_depth(x, *args, out=overlapping)
    assert (wide == 7).all()
    for _ in range(2):  # (a layout's first call into an out= of new strides is planned for it alone; its
        # next keeps the program, at this alignment)
        dm.space_to_depth(x, *args, out=wide[..., :-1:2])
    wide[...] = 7
    assert repeated(op, x, *given, wide[..., 1::2], "auto") is not None  # the same strides 4 bytes on
    np.testing.assert_array_equal(wide[..., 1::2], want)
    assert (wide[..., ::2] == 7).all()
    torch = pytest.importorskip("torch")
    assert repeated(op, torch.from_numpy(x), *given, None, "auto") is None


def test_an_out_not_like_the_one_kept_misses_and_is_left_as_it_was():
    op, given, args, shape = S2D
    x = _values(shape)
    want = _expected(op, args, x)
    out = np.empty(want.shape, np.float32)
    _kept(op, args, x, out=out)
    repeated = _core().repeated
    read_only = np.full(want.shape, 7, np.float32)
    read_only.flags.writeable = False
    wide = np.full(want.shape[:-1] + (want.shape[-1] * 2,), 7, np.float32)

    class Sub(np.ndarray):
        pass

    buffer = np.full(want.nbytes + 64, 7, np.uint8)
    for other in [read_only, wide[..., ::2], np.full(want.shape, 7, np.int32), np.full(want.shape, 7, np.float64),
                  np.full(want.shape[:-1] + (4,), 7, np.float32), np.full(want.shape, 7, np.float32).view(Sub)]:
        before = np.array(other, copy=True)
        assert repeated(op, x, *given, other, "auto") is None
        np.testing.assert_array_equal(np.asarray(other), before)
    moved = buffer[4:4 + want.nbytes].view(np.float32).reshape(want.shape)  # out='s strides at another alignment
    assert repeated(op, x, *given, moved, "auto") is moved
    np.testing.assert_array_equal(moved, want)
    assert (buffer[:4] == 7).all() and (buffer[4 + want.nbytes:] == 7).all()
    # out over data's own bytes: the Python path copies data first
    data = _values(want.shape)
    kept = np.array(data)
    _kept(op, args, data.reshape(shape), out=np.empty(want.shape, np.float32))
    assert repeated(op, data.reshape(shape), *given, data, "auto") is None
    np.testing.assert_array_equal(data, kept)
    dm.space_to_depth(data.reshape(shape), *args, out=data)
    np.testing.assert_array_equal(data, _expected(op, args, kept.reshape(shape)))


def test_what_the_python_side_sets_is_read_at_each_call(monkeypatch):
    """The stream mode's sizes (a program is kept per mode), the core native_engine runs, the recipes."""
    op, given, args, shape = S2D
    x = _values(shape)
    want = _expected(op, args, x)
    _kept(op, args, x)
    repeated = _core().repeated
    assert repeated(op, x, *given, None, "auto") is not None
    with monkeypatch.context() as patched:
        patched.setattr(native_engine, "STREAM_BYTES", 0)  # streamed: no program kept for that mode yet,
        lowering.python_plans(patched)  # and none planned here (the tests' Python twin of the core's planner)
        assert repeated(op, x, *given, None, "auto") is None
        # the Python path keeps one for this out= (its alignment: a new result's would be malloc's): the
        # recipe, made by the first call, runs on the core from the second
        out = np.empty(want.shape, np.float32)
        for _ in range(2):
            np.testing.assert_array_equal(dm.space_to_depth(x, *args, out=out), want)
        out[...] = 0
        assert repeated(op, x, *given, out, "auto") is out
        np.testing.assert_array_equal(out, want)
        patched.undo()  # (the core plans again)
        patched.setattr(native_engine, "STREAM_BYTES", 1 << 62)
        patched.setattr(native_engine, "REGISTER_STREAM_BYTES", 0)  # the third mode: planned here
        np.testing.assert_array_equal(repeated(op, x, *given, None, "auto"), want)
        patched.setattr(native_engine, "STREAM_BYTES", None)  # not a size: every call misses
        assert repeated(op, x, *given, None, "auto") is None
    with monkeypatch.context() as patched:
        patched.setattr(native_engine, "_native", object())  # another core (a test's): its own calls
        assert repeated(op, x, *given, None, "auto") is None
    assert repeated(op, x, *given, None, "auto") is not None
    before = dm.get_num_threads()
    try:
        for threads in (1, 3):
            dm.set_num_threads(threads)
            np.testing.assert_array_equal(repeated(op, x, *given, None, "auto"), want)
    finally:
        dm.set_num_threads(before)
    recipes.RECIPES.clear()  # the recipes emptied: the core's calls with them
    assert repeated(op, x, *given, None, "auto") is None


def test_remember_keeps_only_what_it_can_repeat():
    op, given, args, shape = S2D
    x = _values(shape)
    out = np.empty((1, 16, 8, 8), np.float32)
    core = _core()
    program = native_engine.program_of(Call(op, {"mode": "blocks_first", "block_size": 2}, shape, out.shape), x, out)
    # not NumPy arrays, another op, a program not of whole words: nothing kept
    assert core.remember(op, *given, "auto", x.tolist(), out, program, 0, np.empty) is False
    assert core.remember("other", *given, "auto", x, out, program, 0, np.empty) is False
    assert core.remember(op, *given, "auto", x, out, program[:-1], 0, np.empty) is False
    assert core.remember(op, *given, "auto", x, out, program, 0, None) is False
    assert core.repeated(op, x, *given, None, "auto") is None
    # a program that does not fit the arrays is refused when run, as run() refuses it
    assert core.remember(op, *given, "auto", x, out, b"\x01" + bytes(7), 0, np.empty) is True
    with pytest.raises(ValueError, match="malformed"):
        core.repeated(op, x, *given, out, "auto")


def test_arrays_are_read_and_made_as_numpy_lays_them_out():
    """The core reads an ndarray's fields directly and makes new results with NumPy's own allocator (its C API's
    PyArray_NewFromDescr); repeat_setup checked both on this NumPy. A result is then what np.empty makes: its
    own C-contiguous, writable memory of the input's dtype object, and no reference to that dtype is lost or
    leaked by the stolen reference NumPy takes."""
    assert _core().repeat_facts() == (True, True)
    op, given, args, shape = S2D
    for dtype in (np.float32, np.dtype(">i2"), np.dtype([("a", "u1"), ("b", "<f4")]), np.complex128):
        x = np.zeros(shape, dtype)
        if x.dtype.names is None:
            x = _values(shape, dtype)
        want = _expected(op, args, x)
        _kept(op, args, x)
        before = sys.getrefcount(x.dtype)
        results = [_core().repeated(op, x, *given, None, "auto") for _ in range(200)]
        held = sys.getrefcount(x.dtype)  # (not inside assert: pytest's rewriting holds the dtype once more)
        assert held == before + 200  # each result holds it once
        for got in results[::50]:
            assert type(got) is np.ndarray and got.dtype is x.dtype and got.base is None
            assert got.flags.owndata and got.flags.c_contiguous and got.flags.writeable and got.flags.aligned
            assert got.strides == np.empty(want.shape, dtype).strides
            np.testing.assert_array_equal(got, want)
        del results, got
        after = sys.getrefcount(x.dtype)
        assert after == before


def test_an_axis_of_one_item_keeps_its_own_stride():
    """NumPy's buffer view may report a stride of its own on an axis of one item; the core keys and runs a
    layout by the array's own strides, as the Python side plans it: such a layout repeats, and right."""
    op, given, args, shape = S2D
    base = _values((1, 4, 16, 16))
    x = np.lib.stride_tricks.as_strided(base, strides=(12345 * 4,) + base.strides[1:])
    out = np.lib.stride_tricks.as_strided(np.empty((1, 16, 8, 8), np.float32), strides=(4 * 999,) + (256, 32, 4))
    want = _expected(op, args, base)
    _kept(op, args, x)
    _kept(op, args, x, out=out)
    np.testing.assert_array_equal(_core().repeated(op, x, *given, None, "auto"), want)
    out[...] = -1
    assert _core().repeated(op, x, *given, out, "auto") is out
    np.testing.assert_array_equal(out, want)


def test_without_the_checks_of_repeat_setup_repeats_miss_or_allocate_by_np_empty():
    """repeat_setup turns repeats off where arrays' fields do not read as its probes' buffer views say (here:
    no read-only probe to check the writable flag by), and allocates by np.empty where NumPy's C API is not
    found; the answers stay right."""
    op, given, args, shape = S2D
    x = _values(shape)
    want = _expected(op, args, x)
    core = _core()
    from datamove.engines.native import threads
    try:
        core.repeat_setup(np.ndarray, threads.__dict__, vars(native_engine), (np.empty((2, 3)),), np.empty, None)
        assert core.repeat_facts() == (False, False)
        np.testing.assert_array_equal(_kept(op, args, x), want)
        assert core.repeated(op, x, *given, None, "auto") is None
        readonly = np.zeros(3)
        readonly.flags.writeable = False
        core.repeat_setup(np.ndarray, threads.__dict__, vars(native_engine), (np.empty((2, 3)), readonly), np.empty, None)
        assert core.repeat_facts() == (True, False)
        recipes.RECIPES.clear()
        np.testing.assert_array_equal(_kept(op, args, x), want)
        got = core.repeated(op, x, *given, None, "auto")
        assert got is not None and got.flags.owndata and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)
    finally:
        native_engine.setup_repeats(core)
    assert core.repeat_facts() == (True, True)


# Small images, whose programs' steps merge into one of units from a table (BatchToSpace with crops, 4- and
# 8-byte words), or come with tables of their own (SpaceToBatch with pads of many small images): the core
# keeps those tables with the program (Prepared), made once; others for comparison.
_SMALL_IMAGES = [
    ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), (4, 4, 8, 8)),
    ("batch_to_space", ([1, 1, 2, 2], [0, 0, 0, 1], [0, 0, 1, 0]), (16, 3, 6, 6)),
    ("batch_to_space", ([1, 1, 3, 3], [0, 0, 1, 2], [0, 0, 2, 1]), (9, 2, 7, 7)),
    ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), (64, 8, 10, 10)),
    ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2]), (32, 16, 20, 18)),
    ("space_to_batch", ([1, 1, 3, 3], [0, 0, 1, 2], [0, 0, 2, 1]), (16, 16, 12, 12)),
    ("space_to_depth", ("blocks_first", 2), (2, 3, 6, 6)),
    ("depth_to_space", ("depth_first", 3), (2, 18, 5, 5)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
@pytest.mark.parametrize("op, args, shape", _SMALL_IMAGES)
def test_small_images_repeat_with_their_tables(op, args, shape, dtype):
    x = _values(shape, dtype)
    want = _expected(op, args, x)
    given = (*args, "channels_first") if op.endswith("depth") or op.startswith("depth") else args
    for _ in range(6):  # new results at the alignments malloc gives (one the core has no program for: a miss)
        np.testing.assert_array_equal(getattr(dm, op)(x, *args), want)
    buffer = np.empty(want.size + 16, dtype)
    for offset in range(0, 16, 3):  # out= at several alignments (each a program kept, then repeated)
        out = buffer[offset:offset + want.size].reshape(want.shape)
        out[...] = -1
        _kept(op, args, x, out=out)
        out[...] = -1
        assert _core().repeated(op, x, *given, out, "auto") is out
        np.testing.assert_array_equal(out, want)


def test_the_table_is_bounded_and_stays_right():
    op, _, args, _ = S2D
    for k in range(1100):  # more layouts than the table keeps: it starts again empty
        x = _values((1, 4, 2, 2 * (k + 1)), seed=k)
        for _ in range(3):
            result = dm.space_to_depth(x, *args)
        np.testing.assert_array_equal(result, _expected(op, args, x))
    x = _values((1, 4, 2, 2 * 1100), seed=1099)
    np.testing.assert_array_equal(_core().repeated(op, x, "blocks_first", 2, "channels_first", None, "auto"),
                                  _expected(op, args, x))


def test_threads_repeating_calls_while_another_empties_the_table():
    errors = []
    xs = {case[0]: _values(case[3], seed=1) for case in CASES}
    wants = {case[0]: _expected(case[0], case[2], xs[case[0]]) for case in CASES}

    def work(i):
        try:
            for repeat in range(200):
                if i == 0:
                    if repeat % 10 == 0:
                        recipes.RECIPES.clear()
                    continue
                op, _, args, _ = CASES[(i + repeat) % len(CASES)]
                if not np.array_equal(getattr(dm, op)(xs[op], *args), wants[op]):
                    errors.append((i, repeat, op))
        except Exception as exc:  # noqa: BLE001 - reported below, with the thread's index
            errors.append((i, repr(exc)))

    run_threads(work)
    assert errors == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_repeats_the_calls_its_parent_kept():
    op, given, args, shape = S2D
    x = _values(shape)
    _kept(op, args, x)
    pid = os.fork()
    if pid == 0:  # the child: its copy of the table, its own pool
        try:
            ok = all(np.array_equal(_core().repeated(op, x, *given, None, "auto"), _expected(op, args, x))
                     for _ in range(3))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


_OPS = st.sampled_from(["space_to_depth", "depth_to_space", "batch_to_space", "space_to_batch"])


@settings(max_examples=60, deadline=None)
@given(op=_OPS, dtype=st.sampled_from([np.uint8, np.int16, np.float32, np.float64, np.complex128]),
       block=st.integers(1, 3), spatial=st.integers(1, 3), view=st.sampled_from(["c", "reversed", "transposed", "gapped"]),
       seed=st.integers(0, 2 ** 16))
def test_random_repeated_calls_match_the_formulas(op, dtype, block, spatial, view, seed):
    rng = np.random.default_rng(seed)
    k = 2  # two spatial axes
    if op == "space_to_depth":
        shape, args = (1, 3, 8 * spatial * block, 8 * block), (rng.choice(["blocks_first", "depth_first"]), block)
    elif op == "depth_to_space":
        shape, args = (1, 3 * block ** k, 8 * spatial, 8), (rng.choice(["blocks_first", "depth_first"]), block)
    elif op == "batch_to_space":
        crop = int(rng.integers(0, block))
        shape, args = (2 * block ** k, 3, 8 * spatial, 8), ([1, 1, block, block], [0, 0, crop, 0], [0, 0, 0, crop])
    else:
        pad = int(rng.integers(0, block))
        shape, args = (2, 3, 8 * spatial * block - pad, 8 * block), ([1, 1, block, block], [0, 0, pad, 0], [0, 0, 0, 0])
    base = rng.integers(0, 100, size=shape).astype(dtype)
    data = {"c": base, "reversed": base[:, :, ::-1], "transposed": base.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2),
            "gapped": np.repeat(base, 2, axis=-1)[..., ::2]}[view]
    want = _expected(op, args, data)
    for _ in range(4):
        np.testing.assert_array_equal(getattr(dm, op)(data, *args), want)
        out = np.full(want.shape, 1, dtype)
        assert getattr(dm, op)(data, *args, out=out) is out
        np.testing.assert_array_equal(out, want)


def _ticks_inside(call, times=6):
    """How often a sleeping thread woke and counted while ``call`` ran, per call (median): it can count only
    when it holds the GIL, so a call that keeps the GIL throughout sees none inside it (a long switch
    interval: no forced switch hands the GIL over mid-call either)."""
    import statistics
    import threading
    import time

    count, stop = [0], threading.Event()

    def ticker():
        while not stop.is_set():
            time.sleep(0.0002)
            count[0] += 1

    before = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        inside = []
        for _ in range(times):
            time.sleep(0.002)  # (the ticker asleep, not holding the GIL, as the call starts)
            start = count[0]
            call()
            inside.append(count[0] - start)
        return statistics.median(inside)
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(before)


def test_large_first_calls_and_repeats_release_the_gil():
    """A large call runs with the GIL released, as a first call in the core (first) and as a repeat
    (repeated): another thread runs meanwhile. A copy that holds the GIL for as long shows the count
    stays still without the release, so the check can fail."""
    x = _values((1, 64, 512, 256), np.float32)  # 32 MiB
    held = bytearray(x.nbytes * 2)
    assert _ticks_inside(lambda: bytes(held)) <= 1  # memcpy with the GIL held: nothing runs beside it
    core = _core()
    given = ("blocks_first", 2, "channels_first")
    out_shape = (1, 256, 256, 128)
    first = core.first("space_to_depth", x, *given, out_shape, None, "auto")
    assert type(first) is np.ndarray  # (the program kept: repeated() takes the call from here)
    assert _ticks_inside(lambda: core.repeated("space_to_depth", x, *given, None, "auto")) >= 2
    recipes.RECIPES.clear()  # (the core's table too: each call below is a first call)
    assert _ticks_inside(lambda: (recipes.RECIPES.clear(),
                                  core.first("space_to_depth", x, *given, out_shape, None, "auto"))) >= 2
    np.testing.assert_array_equal(core.repeated("space_to_depth", x, *given, None, "auto"),
                                  _expected("space_to_depth", ("blocks_first", 2), x))
