"""A call's first call of a layout in one C call (``_native.first``, ``src/native/runtime/repeat.cpp``).

``datamove.ops`` validates a new call of a NumPy array into a new array with the rules' straight path
(``datamove.rules.shapes.static_depth_shape``, ``static_space_shape``), then hands it to the core, which allocates the result as
np.empty would (or by the allocator it is given), plans, lowers and runs it; None, nothing made, where it
takes none. Each test here asks the core directly or goes through ``datamove``, against the specs' formulas.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import datamove as dm
from datamove import ops
from datamove.dispatch import calls as dispatch_calls, numpy_calls
from datamove.dispatch import recipes
from datamove.engines.native import threads
from datamove.engines.native import engine as native_engine
from datamove.arrays.outputs import LINE_FROM

import reference
from concurrency import run_threads

pytestmark = pytest.mark.skipif(not native_engine.available(), reason="needs the compiled core")


def _first():
    return native_engine.core().first


def _expected(op, data, mode, size):
    return np.ascontiguousarray(getattr(reference, op)(data, mode, size))


@pytest.fixture(autouse=True)
def _fresh():
    recipes.RECIPES.clear()
    numpy_calls.SEEN.clear()
    yield
    recipes.RECIPES.clear()
    numpy_calls.SEEN.clear()


@settings(max_examples=80, deadline=None)
@given(op=st.sampled_from(["space_to_depth", "depth_to_space"]), mode=st.sampled_from(["blocks_first", "depth_first"]),
       size=st.integers(1, 4), spatial=st.integers(1, 3),
       dtype=st.sampled_from([np.bool_, np.uint8, np.int16, np.float32, np.float64, np.complex128, ">i4", "V3"]),
       view=st.sampled_from(["c", "reversed", "gapped", "transposed"]), seed=st.integers(0, 2 ** 16))
def test_first_calls_match_the_formulas(op, mode, size, spatial, dtype, view, seed):
    rng = np.random.default_rng(seed)
    dims = [int(rng.integers(1, 4)) * size for _ in range(spatial)]
    channels = int(rng.integers(1, 4)) * (size ** spatial if op == "depth_to_space" else 1)
    shape = (int(rng.integers(1, 3)), channels, *dims)
    base = rng.integers(0, 256, size=shape + (np.dtype(dtype).itemsize,), dtype=np.uint8).view(dtype)[..., 0]
    data = {"c": base, "reversed": base[..., ::-1], "gapped": np.repeat(base, 2, axis=-1)[..., ::2],
            "transposed": np.swapaxes(np.swapaxes(base, 0, 1).copy(), 0, 1)}[view]
    recipes.RECIPES.clear()  # (the core's table with them: each example's call new to it)
    want = _expected(op, data, mode, size)
    got = _first()(op, data, mode, size, "channels_first", want.shape, None, "auto")
    assert got is not None and type(got) is np.ndarray and got.dtype is data.dtype and got.shape == want.shape
    assert got.flags.c_contiguous and got.flags.owndata and got.flags.writeable
    np.testing.assert_array_equal(got, want)
    # and through datamove: its first call takes this path, its second the recipe's
    numpy_calls.SEEN.clear(), recipes.RECIPES.clear()
    for _ in range(2):
        np.testing.assert_array_equal(getattr(dm, op)(data, mode, size), want)


def test_a_first_call_is_the_cores_and_with_another_core_its_second_makes_the_recipe(monkeypatch):
    x = np.arange(2 * 4 * 6 * 8, dtype=np.float32).reshape(2, 4, 6, 8)
    asked = []
    core = native_engine.core()

    class Asking:  # the core, its first() calls recorded
        def first(self, *args):
            asked.append(args[:4])
            return core.first(*args)

        def __getattr__(self, name):
            return getattr(core, name)

    monkeypatch.setattr(native_engine, "_native", Asking())
    want = _expected("space_to_depth", x, "depth_first", 2)
    np.testing.assert_array_equal(dm.space_to_depth(x, "depth_first", 2), want)
    assert asked == [("space_to_depth", x, "depth_first", 2)] and len(recipes.RECIPES) == 0
    # (its repeat is not the core's here: native_engine runs another core) the core keeps the call already,
    # so its first() says so (False), and the recipe is made
    np.testing.assert_array_equal(dm.space_to_depth(x, "depth_first", 2), want)
    assert len(asked) == 2 and len(recipes.RECIPES) == 1
    assert core.first("space_to_depth", x, "depth_first", 2, "channels_first", want.shape, None, "auto") is False


@settings(max_examples=80, deadline=None)
@given(op=st.sampled_from(["batch_to_space", "space_to_batch"]), spatial=st.integers(1, 3),
       dtype=st.sampled_from([np.bool_, np.uint8, np.int16, np.float32, np.float64, np.complex128, ">i4", "V3"]),
       view=st.sampled_from(["c", "reversed", "gapped"]), as_tuple=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_first_calls_of_batch_to_space_and_space_to_batch_match_the_formulas(op, spatial, dtype, view, as_tuple, seed):
    """The core's first() of a BatchToSpace with crops or SpaceToBatch with pads, as datamove.ops hands it
    (the parameters as given, the rules' out_shape): a new array of the formulas' values, kept for the
    repeats; through datamove, its first call takes this path and its second is the core's repeat."""
    rng = np.random.default_rng(seed)
    block = [1, 1] + [int(rng.integers(1, 4)) for _ in range(spatial)]
    dims = [int(rng.integers(1, 5)) * (block[2 + k] if op == "space_to_batch" else 1) for k in range(spatial)]
    shape = (int(rng.integers(1, 3)) * (int(np.prod(block)) if op == "batch_to_space" else 1), int(rng.integers(1, 4)), *dims)
    base = rng.integers(0, 256, size=shape + (np.dtype(dtype).itemsize,), dtype=np.uint8).view(dtype)[..., 0]
    data = {"c": base, "reversed": base[..., ::-1], "gapped": np.repeat(base, 2, axis=-1)[..., ::2]}[view]
    if op == "batch_to_space":  # crops within each dim's blocks
        begin = [0, 0] + [int(rng.integers(0, d * b + 1)) for d, b in zip(dims, block[2:])]
        end = [0, 0] + [int(rng.integers(0, d * b - c + 1)) for d, b, c in zip(dims, block[2:], begin[2:])]
    else:  # pads that keep each padded dim a multiple of its block
        begin = [0, 0] + [int(rng.integers(0, 2 * b + 1)) for b in block[2:]]
        end = [0, 0] + [(-(d + p)) % b + b * int(rng.integers(0, 2)) for d, p, b in zip(dims, begin[2:], block[2:])]
    args = tuple(tuple(a) for a in (block, begin, end)) if as_tuple else (block, begin, end)
    want = np.ascontiguousarray(getattr(reference, op)(data, *args))
    recipes.RECIPES.clear()  # (the core's table with them: each example's call new to it)
    got = _first()(op, data, *args, want.shape, None, "auto")
    assert type(got) is np.ndarray and got.dtype == data.dtype and got.shape == want.shape
    assert got.flags.c_contiguous and got.flags.owndata and got.flags.writeable
    np.testing.assert_array_equal(got, want)
    again = native_engine.core().repeated(op, data, *args, None, "auto")
    assert again is not None or want.size == 0  # (kept: the layout's second call is the core's alone)
    if again is not None:
        np.testing.assert_array_equal(again, want)
    numpy_calls.SEEN.clear(), recipes.RECIPES.clear()
    for _ in range(3):
        np.testing.assert_array_equal(getattr(dm, op)(data, *args), want)


def test_a_first_batch_to_space_goes_from_the_rules_straight_to_the_core(monkeypatch):
    """Through datamove: a NumPy array's first BatchToSpace / SpaceToBatch of a layout makes no Resolved and
    no Call (the rules' straight path, shapes.static_space_shape, then first()); a call the rules refuse
    still raises their message, and an output too large for any array is the same DataMoveError."""
    from datamove.rules import shapes

    def refused(*args, **kwargs):
        raise AssertionError("not on a first call")

    x = np.arange(4 * 2 * 3 * 3, dtype=np.float32).reshape(4, 2, 3, 3)
    with monkeypatch.context() as patched:
        patched.setattr(dispatch_calls, "Call", refused)
        patched.setattr(shapes, "resolve_batch_to_space", refused)
        patched.setattr(shapes, "resolve_space_to_batch", refused)
        y = dm.batch_to_space(x, [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])
        z = dm.space_to_batch(x, [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])
    np.testing.assert_array_equal(y, reference.batch_to_space(x, [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]))
    np.testing.assert_array_equal(z, reference.space_to_batch(x, [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]))
    assert not recipes.RECIPES
    with pytest.raises(dm.DataMoveError, match="crops_begin"):
        dm.batch_to_space(x, [1, 1, 2, 2], [0, 0, 7, 0], [0, 0, 0, 0])
    with pytest.raises(dm.DataMoveError, match="divisible|multiple"):
        dm.space_to_batch(x, [1, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0])
    with pytest.raises(dm.DataMoveError, match="more than an array can hold"):
        dm.space_to_batch(x, [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 2**61, 0])


@pytest.mark.parametrize("engine", ["auto", "native"])
def test_a_first_calls_program_is_kept_for_its_repeats(engine, monkeypatch):
    """first() keeps the program it ran, keyed as repeated() keys a call: the layout's second call is the
    core's alone (no recipe made in Python), into a new array at any alignment and into out=."""
    x = np.arange(2 * 4 * 6 * 8, dtype=np.float32).reshape(2, 4, 6, 8)
    want = _expected("space_to_depth", x, "depth_first", 2)
    core = native_engine.core()
    assert core.repeated("space_to_depth", x, "depth_first", 2, "channels_first", None, engine) is None
    np.testing.assert_array_equal(dm.space_to_depth(x, "depth_first", 2, engine=engine), want)
    for _ in range(8):  # (results where malloc puts them: a new alignment is planned by the core)
        np.testing.assert_array_equal(core.repeated("space_to_depth", x, "depth_first", 2, "channels_first", None,
                                                    engine), want)
    out = np.full(want.shape, -1, np.float32)
    assert core.repeated("space_to_depth", x, "depth_first", 2, "channels_first", out, engine) is out
    np.testing.assert_array_equal(out, want)
    other = "native" if engine == "auto" else "auto"  # (the engine as given is part of the key)
    assert core.repeated("space_to_depth", x, "depth_first", 2, "channels_first", None, other) is None
    monkeypatch.setattr(recipes, "kept", lambda *args: pytest.fail("a recipe made"))
    for _ in range(3):
        np.testing.assert_array_equal(dm.space_to_depth(x, "depth_first", 2, engine=engine), want)
    assert len(recipes.RECIPES) == 0
    recipes.RECIPES.clear()  # (the core's table with them)
    assert core.repeated("space_to_depth", x, "depth_first", 2, "channels_first", None, engine) is None


def test_what_the_core_does_not_take_is_none_and_nothing_made(monkeypatch):
    x = np.ones((1, 4, 4, 4), np.float32)
    first = _first()
    shape = (1, 16, 2, 2)
    assert first("space_to_depth", x.astype(object), "blocks_first", 2, "channels_first", shape, None, "auto") is None  # references
    assert first("space_to_depth", np.zeros((1, 4, 4, 4), [("a", "i4"), ("b", "O")]), "blocks_first", 2, "channels_first", shape,
                 None, "auto") is None
    assert first("space_to_depth", np.ma.masked_array(x), "blocks_first", 2, "channels_first", shape, None, "auto") is None  # a subclass
    assert first("space_to_depth", x.tolist(), "blocks_first", 2, "channels_first", shape, None, "auto") is None
    assert first("batch_to_space", x, "blocks_first", 2, "channels_first", shape, None, "auto") is None  # not its parameters
    assert first("space_to_depth", x, "blocks_first", 2, "channels_last", shape, None, "auto") is None
    assert first("space_to_depth", x, "BLOCKS_FIRST", 2, "channels_first", shape, None, "auto") is None
    assert first("space_to_depth", x, "blocks_first", np.int64(2), "channels_first", shape, None, "auto") is None
    assert first("space_to_depth", x, "blocks_first", 2, "channels_first", list(shape), None, "auto") is None
    assert first("space_to_depth", x, "blocks_first", 2, "channels_first", (1, 16, 2, -2), None, "auto") is None
    monkeypatch.setattr(native_engine, "CORE_PLANS", False)  # the Python side plans
    assert first("space_to_depth", x, "blocks_first", 2, "channels_first", shape, None, "auto") is None
    monkeypatch.setattr(native_engine, "CORE_PLANS", True)
    np.testing.assert_array_equal(first("space_to_depth", x, "blocks_first", 2, "channels_first", shape, None, "auto"),
                                  _expected("space_to_depth", x, "blocks_first", 2))
    with pytest.raises(TypeError, match="8 or 9 arguments"):
        first("space_to_depth", x, "blocks_first", 2, "channels_first", shape)


def test_an_empty_result_and_the_allocator_given(monkeypatch):
    first = _first()
    # an empty result: made, nothing moved; the call kept, with no program (its next call makes the recipe)
    empty = np.ones((0, 4, 4, 4), np.int16)
    got = first("space_to_depth", empty, "blocks_first", 2, "channels_first", (0, 16, 2, 2), None, "auto")
    assert got.shape == (0, 16, 2, 2) and got.dtype == np.int16
    assert first("space_to_depth", empty, "blocks_first", 2, "channels_first", (0, 16, 2, 2), None, "auto") is False
    for _ in range(3):
        got = dm.space_to_depth(empty, "blocks_first", 2)
        assert got.shape == (0, 16, 2, 2) and got.dtype == np.int16
    made = []
    x = np.arange(4 * 8 * 8, dtype=np.float64).reshape(1, 4, 8, 8)
    got = first("space_to_depth", x, "blocks_first", 2, "channels_first", (1, 16, 4, 4), lambda shape, dtype: made.append(shape) or
                np.full(shape, -1, dtype), "auto")
    assert made == [(1, 16, 4, 4)]
    np.testing.assert_array_equal(got, _expected("space_to_depth", x, "blocks_first", 2))
    # the call is kept now: first() says so, and makes nothing
    assert first("space_to_depth", x, "blocks_first", 2, "channels_first", (1, 16, 4, 4), lambda shape, dtype: made.append(shape),
                 "auto") is False and len(made) == 1
    recipes.RECIPES.clear()
    # an allocator that makes an array of another dtype, or no ndarray: nothing run on it, nothing kept
    assert first("space_to_depth", x, "blocks_first", 2, "channels_first", (1, 16, 4, 4), lambda shape, dtype: np.empty(shape, np.int64),
                 "auto") is None
    assert first("space_to_depth", x, "blocks_first", 2, "channels_first", (1, 16, 4, 4), lambda shape, dtype: np.ma.zeros(shape),
                 "auto") is None
    with pytest.raises(MemoryError):
        first("space_to_depth", x, "blocks_first", 2, "channels_first", (1, 16, 4, 4), lambda shape, dtype: (_ for _ in ()).throw(MemoryError),
              "auto")
    # a large first call through datamove: its result on a line (outputs.allocate)
    big = np.ones((1, 4, 512, LINE_FROM // 2048 + 2), np.float32)
    result = dm.space_to_depth(big, "blocks_first", 2)
    assert result.__array_interface__["data"][0] % 64 == 0 and result.shape == (1, 16, 256, big.shape[-1] // 2)


def test_the_thread_count_is_asked_where_none_is_set_yet(monkeypatch):
    monkeypatch.setattr(threads, "_threads", None)
    x = np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4)
    np.testing.assert_array_equal(_first()("space_to_depth", x, "blocks_first", 2, "channels_first", (1, 16, 2, 2), None, "auto"),
                                  _expected("space_to_depth", x, "blocks_first", 2))
    assert threads._threads == dm.get_num_threads() >= 1


def test_many_dtype_objects():
    # structured dtypes made anew are objects of their own: more than the core remembers, each right
    for k in range(80):
        dtype = np.dtype([("a", "u1"), (f"f{k}", "<i2")])
        x = np.zeros((1, 4, 2, 2), dtype)
        x["a"] = np.arange(16).reshape(1, 4, 2, 2)
        got = _first()("space_to_depth", x, "depth_first", 2, "channels_first", (1, 16, 1, 1), None, "auto")
        assert got.dtype is dtype
        np.testing.assert_array_equal(got, _expected("space_to_depth", x, "depth_first", 2))
    # an 'O' in a field's name reads as objects in the buffer's format: left to the Python path, which moves it
    named = np.zeros((1, 4, 2, 2), [("Oscar", "<i4")])
    named["Oscar"] = np.arange(16).reshape(1, 4, 2, 2)
    assert _first()("space_to_depth", named, "depth_first", 2, "channels_first", (1, 16, 1, 1), None, "auto") is None
    np.testing.assert_array_equal(dm.space_to_depth(named, "depth_first", 2), _expected("space_to_depth", named, "depth_first", 2))


def test_threads_making_first_calls_of_the_same_and_other_shapes_at_once():
    """Threads calling new shapes at once (some the same shape, whose programs each keeps, some large enough
    to run with the GIL released) while one empties the table: every result right."""
    shapes = [(1, 4, 8, 2 * k) for k in range(1, 9)] + [(1, 16, 256, 512)]
    inputs = [np.random.default_rng(k).integers(0, 99, size=s).astype(np.float32) for k, s in enumerate(shapes)]
    wants = [_expected("space_to_depth", x, "blocks_first", 2) for x in inputs]
    failures = []

    def work(i):
        try:
            for round_ in range(12):
                if i == 0 and round_ % 3 == 0:
                    recipes.RECIPES.clear()  # (and the core's table)
                k = (i + round_) % len(inputs)
                got = dm.space_to_depth(inputs[k], "blocks_first", 2)
                if not np.array_equal(got, wants[k]):
                    failures.append((i, round_, k))
        except Exception as exc:  # noqa: BLE001 (reported below)
            failures.append(repr(exc))

    run_threads(work, 8)
    assert failures == []


def _outs(shape, dtype, rng):
    """Outputs of ``shape`` in several layouts: C order, F order, a gapped view, one past its buffer's first
    item, and one whose axes are laid out reversed (strides no new result has)."""
    yield np.zeros(shape, dtype)
    yield np.zeros(shape[::-1], dtype).T
    yield np.zeros(shape[:-1] + (shape[-1] * 2,), dtype)[..., ::2]
    yield np.zeros(int(np.prod(shape)) + 1, dtype)[1:].reshape(shape)
    yield np.zeros(shape, dtype)[..., ::-1]


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(["space_to_depth", "depth_to_space", "batch_to_space", "space_to_batch"]),
       dtype=st.sampled_from([np.uint8, np.int16, np.float32, np.complex128]), seed=st.integers(0, 2 ** 16))
def test_first_calls_into_out_keep_their_programs_for_outs_of_those_strides(op, dtype, seed):
    """A layout's first call into an ``out=`` ndarray is the core's first() (validated by datamove.ops), its
    program kept for that out's strides: the next call into an out of the same strides is repeated()'s alone
    (no recipe made), into one of other strides planned and kept beside it; every result the formulas'."""
    rng = np.random.default_rng(seed)
    if op in ("space_to_depth", "depth_to_space"):
        size = int(rng.integers(1, 4))
        channels = int(rng.integers(1, 3)) * (size * size if op == "depth_to_space" else 1)
        data = rng.integers(0, 100, (int(rng.integers(1, 3)), channels, 2 * size, 3 * size)).astype(dtype)
        args = (str(rng.choice(["blocks_first", "depth_first"])), size)
        key_args = args + ("channels_first",)
    else:
        block = [1, 1, int(rng.integers(1, 3)), int(rng.integers(1, 4))]
        n = int(np.prod(block)) if op == "batch_to_space" else 1
        data = rng.integers(0, 100, (n * int(rng.integers(1, 3)), 2, 3 * block[2], 2 * block[3])).astype(dtype)
        if op == "batch_to_space":
            args = (block, [0, 0, int(rng.integers(0, 2)), 0], [0, 0, 0, int(rng.integers(0, 2))])
        else:
            args = (block, [0, 0, 1, 0], [0, 0, block[2] - 1, 0])
        key_args = args
    want = np.ascontiguousarray(getattr(reference, op)(data, *args))
    recipes.RECIPES.clear(), numpy_calls.SEEN.clear()
    core = native_engine.core()
    for out in _outs(want.shape, dtype, rng):
        known = core.repeated(op, data, *key_args, out, "auto") is not None
        out[...] = 0
        assert getattr(dm, op)(data, *args, out=out) is out
        np.testing.assert_array_equal(out, want)
        out[...] = 0
        assert core.repeated(op, data, *key_args, out, "auto") is out, known  # (kept by the call before)
        np.testing.assert_array_equal(out, want)
    assert len(recipes.RECIPES) == 0


def test_first_into_out_refuses_what_datamove_would_not_write():
    """first() into an out= takes only the out the checks pass (its shape and dtype, writable, apart from the
    data): any other is None, nothing written, nothing kept; through datamove, an out that overlaps the data
    is the Python path's (the data copied first) and a wrong one its error."""
    first = _first()
    x = np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4)
    want = _expected("space_to_depth", x, "blocks_first", 2)
    shape = want.shape
    call = ("space_to_depth", x, "blocks_first", 2, "channels_first", shape, None, "auto")
    for bad in (np.zeros(shape, np.float64), np.zeros((1, 16, 2, 3), np.float32), np.zeros(shape, np.float32)[None],
                np.zeros(shape, np.float32).tolist(), x.reshape(shape)):
        assert first(*call, bad) is None
    readonly = np.zeros(shape, np.float32)
    readonly.flags.writeable = False
    assert first(*call, readonly) is None and not readonly.any()
    assert native_engine.core().repeated(*call[:5], None, "auto") is None  # (nothing kept)
    out = np.zeros(shape, np.float32)
    assert first(*call, None) is not None and first(*call, out) is out  # (None: a new result)
    np.testing.assert_array_equal(out, want)
    # through datamove: an out that is the data's own memory, and ones the checks refuse
    recipes.RECIPES.clear()
    buffer = np.arange(64, dtype=np.float32)
    data, alias = buffer.reshape(1, 4, 4, 4), buffer.reshape(shape)
    expected = _expected("space_to_depth", data.copy(), "blocks_first", 2)
    assert dm.space_to_depth(data, "blocks_first", 2, out=alias) is alias
    np.testing.assert_array_equal(alias, expected)
    with pytest.raises(dm.DataMoveError, match="out"):
        dm.space_to_depth(x, "blocks_first", 2, out=np.zeros((1, 16, 2, 3), np.float32))
    with pytest.raises((dm.DataMoveError, TypeError), match="out"):
        dm.space_to_depth(x, "blocks_first", 2, out=np.zeros(shape, np.float64))
