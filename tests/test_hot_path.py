"""A repeated call's cached path: every way a cache could be fooled gives the right answer.

A NumPy call's recipe is keyed by (op, parameters, engine, shape, strides,
dtype); from its second call a kept ``engine="auto"`` recipe of
``REPEAT_NATIVE_MIN_BYTES`` or more (any size) runs on the compiled core with its
programs kept by the recipe (``native_engine.Planned``), keyed further by the
arrays' alignments, ``out``'s strides and the streaming mode; the thread count
is read at each call. Each test here changes one of those between repeated
calls and compares with the specs' formulas (tests/reference.py).

(About 2 s in all.)
"""

from __future__ import annotations

import numpy as np
import pytest

import datamove as dm
from datamove import ops
from datamove.dispatch import calls as dispatch_calls, numpy_calls
from datamove.dispatch import recipes
from datamove.engines import route
from datamove.rules import shapes
from datamove.engines.native import engine as native_engine

import reference
from concurrency import run_threads

pytestmark = pytest.mark.skipif(not native_engine.available(), reason="needs the compiled core")

S2D = ("space_to_depth", ("blocks_first", 2))
D2S = ("depth_to_space", ("depth_first", 2))
B2S = ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]))
S2B = ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]))
CASES = [(S2D, (1, 4, 16, 16)), (D2S, (1, 16, 8, 8)), (B2S, (4, 4, 8, 8)), (S2B, (1, 4, 16, 16))]
IDS = ["s2d", "d2s", "b2s crops", "s2b pads"]


def _expected(op, args, data):
    return np.ascontiguousarray(getattr(reference, op)(data, *args))


def _values(shape, dtype, seed=0):
    return np.random.default_rng(seed).integers(1, 100, size=shape).astype(dtype)


class _Recording:
    """The core, its runs recorded: (program, threads, stream) of each; and its calls (a new shape's first
    call, planned, lowered and run there in one), (op, threads, stream) of each (a depth op's: (op, None,
    None))."""

    def __init__(self, core):
        self.core, self.runs, self.calls = core, [], []

    def run(self, program, src, dst, threads, stream):
        self.runs.append((program, threads, stream))
        return self.core.run(program, src, dst, threads, stream)

    def call(self, *args):
        self.calls.append((args[0], args[-3], args[-1]))
        return self.core.call(*args)

    def first(self, op, *args):  # (a depth op's first call, allocated there too: its op's id, as call's)
        self.calls.append((native_engine._OPS[op], None, None))
        return self.core.first(op, *args)

    def __getattr__(self, name):
        return getattr(self.core, name)


@pytest.fixture
def recorded(monkeypatch):
    recording = _Recording(native_engine.core())
    monkeypatch.setattr(native_engine, "_native", recording)
    return recording


@pytest.mark.parametrize("case, shape", CASES, ids=IDS)
def test_a_repeated_call_runs_on_the_core_from_its_second_call(case, shape, recorded):
    op, args = case
    x = _values(shape, np.float32)
    assert x.nbytes >= route.REPEAT_NATIVE_MIN_BYTES
    recipes.RECIPES.clear()
    results = []
    for k in range(3):
        before = len(recorded.runs)
        results.append(getattr(dm, op)(x, *args))
        ran = len(recorded.runs) - before
        if k == 0:  # the first call: the core plans and runs it in one, and leaves the recipe to the next
            assert (ran, len(recorded.calls), len(recipes.RECIPES)) == (0, 1, 0)
            continue
        recipe = next(iter(recipes.RECIPES.values()))
        # then the recipe, on the core, but for a program the core makes tables for at every run
        tables = recipe.core is None and not recipe.core_later
        assert ran == (0 if tables else 1), (k, ran)
    for result in results:
        np.testing.assert_array_equal(result, _expected(op, args, x))


def test_forced_numpy_stays_off_the_core_and_small_repeats_go_to_it(recorded):
    op, args = S2D
    small = _values((1, 2, 8, 8), np.float32)  # 512 bytes
    assert small.nbytes >= route.REPEAT_NATIVE_MIN_BYTES
    x = _values((1, 4, 16, 16), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(dm.space_to_depth(x, *args, engine="numpy"), _expected(op, args, x))
    assert recorded.runs == [] and recorded.calls == []  # engine="numpy": never the core
    for _ in range(3):
        np.testing.assert_array_equal(dm.space_to_depth(small, *args), _expected(op, args, small))
    # a new shape's first call is the core's (first()), which plans it for less than the Python side would
    # and keeps it; its repeats are the core's alone, which this recording core leaves to the Python side: at
    # the second call first() says the core keeps it already, and the recipe is made, on the core
    assert len(recorded.runs) == 2 and [op for op, _, _ in recorded.calls] == [2, 2]
    for _ in range(3):  # engine="native": the same
        np.testing.assert_array_equal(dm.space_to_depth(x, *args, engine="native"), _expected(op, args, x))
    assert len(recorded.calls) == 4 and len(recorded.runs) == 4


@pytest.mark.parametrize("case, shape", CASES, ids=IDS)
def test_same_shape_other_strides_dtypes_and_alignments(case, shape):
    op, args = case
    function = getattr(dm, op)
    for dtype in (np.float32, np.int32, np.float64, np.uint8, np.int16, np.complex128):
        base = _values(shape, dtype)
        # views of the same shape: C order, reversed along an axis, transposed and back, inside a larger array
        views = [base, base[:, ::-1], base.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2),
                 np.pad(base, 1)[1:-1, 1:-1, 1:-1, 1:-1]]
        # the same layout at every offset a 64-byte line has (the programs depend on the alignment)
        buffer = np.zeros(base.nbytes + 128, np.uint8)
        for offset in range(0, 65, base.itemsize if base.itemsize < 8 else 8):
            aligned = buffer[offset:offset + base.nbytes].view(dtype).reshape(shape)
            aligned[...] = base
            views.append(aligned)
        for repeat in range(2):
            for view in views:
                np.testing.assert_array_equal(function(view, *args), _expected(op, args, view), err_msg=f"{dtype} {repeat}")


@pytest.mark.parametrize("case, shape", CASES, ids=IDS)
def test_out_of_other_strides_and_alignments_and_out_aliasing_data(case, shape):
    op, args = case
    function = getattr(dm, op)
    x = _values(shape, np.float32)
    expected = _expected(op, args, x)
    buffer = np.zeros(expected.nbytes * 2 + 128, np.uint8)
    outs = [np.empty_like(expected), np.empty(expected.shape[::-1], np.float32).T,
            np.empty(expected.shape[:-1] + (expected.shape[-1] * 2,), np.float32)[..., ::2]]
    outs += [buffer[offset:offset + expected.nbytes].view(np.float32).reshape(expected.shape) for offset in (0, 4, 8, 16, 36)]
    for repeat in range(2):
        for out in outs:
            out[...] = -1
            assert function(x, *args, out=out) is out
            np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(function(x, *args), expected)  # out= and not, in turns
    if x.size == expected.size:  # out over data's own memory: data is read before it is written
        for repeat in range(3):
            data = _values(shape, np.float32, seed=repeat)
            want = _expected(op, args, data)
            function(data, *args, out=data.reshape(want.shape))
            np.testing.assert_array_equal(data.reshape(want.shape), want)
    for repeat in range(3):  # the same through a strided view: its copy has another layout than the recipe's
        wide = _values(shape[:-1] + (shape[-1] * 2,), np.float32, seed=repeat)
        data = wide[..., ::2]
        want = _expected(op, args, data)
        out = wide.reshape(-1)[:want.size].reshape(want.shape)
        assert function(data, *args, out=out) is out
        np.testing.assert_array_equal(out, want)


def test_the_thread_count_is_read_at_each_call(recorded):
    op, args = S2D
    x = _values((1, 4, 16, 16), np.float32)
    before = dm.get_num_threads()
    try:
        for threads in (1, 3, 2, 1):
            dm.set_num_threads(threads)
            for _ in range(2):
                np.testing.assert_array_equal(dm.space_to_depth(x, *args), _expected(op, args, x))
            assert recorded.runs[-1][1] == threads
    finally:
        dm.set_num_threads(before)


def test_the_streaming_mode_is_part_of_the_program_key(recorded, monkeypatch):
    op, args = S2D
    x = _values((1, 4, 16, 16), np.float32)
    for stream_bytes in (None, 0, None):
        if stream_bytes is not None:
            monkeypatch.setattr(native_engine, "STREAM_BYTES", stream_bytes)
        else:
            monkeypatch.undo()
            monkeypatch.setattr(native_engine, "_native", recorded)
        for _ in range(2):
            np.testing.assert_array_equal(dm.space_to_depth(x, *args), _expected(op, args, x))
        # (streamed: the core's mode for it, 1 where its level stores L1-staged steps plainly: RUN_MODES)
        assert recorded.runs[-1][2] == (native_engine.RUN_MODES[2] if stream_bytes == 0 else 0)


def test_bad_out_is_refused_on_the_cached_path_as_on_the_first_call():
    op, args = S2D
    x = _values((1, 4, 16, 16), np.float32)
    for _ in range(2):
        dm.space_to_depth(x, *args)  # the recipe made and on the core
    good = np.full((1, 16, 8, 8), 7, np.float32)
    read_only = good.copy()
    read_only.flags.writeable = False
    with pytest.raises(dm.DataMoveError, match=r"out.shape must be the output shape \(1, 16, 8, 8\), got \(1, 16, 8, 4\)"):
        dm.space_to_depth(x, *args, out=good[..., :4])
    with pytest.raises(dm.DataMoveError, match="out.dtype must be data.dtype = float32, got float64"):
        dm.space_to_depth(x, *args, out=good.astype(np.float64))
    with pytest.raises(dm.DataMoveError, match="read-only"):
        dm.space_to_depth(x, *args, out=read_only)
    with pytest.raises(dm.DataMoveError, match="overlap"):
        dm.space_to_depth(x, *args, out=np.lib.stride_tricks.as_strided(good, strides=(0,) * 4))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        dm.space_to_depth(x, *args, out=good.tolist())
    with pytest.raises(dm.DataMoveError):  # a bad parameter after the recipe exists: validated again
        dm.space_to_depth(x, "blocks_first", 3)
    assert (read_only == 7).all() and (good == 7).all()  # refused before any write
    np.testing.assert_array_equal(dm.space_to_depth(x, *args, out=good), _expected(op, args, x))


def test_threads_sharing_repeated_calls_of_every_alignment():
    buffers = [np.zeros(4096 + 128, np.uint8) for _ in range(8)]
    errors = []

    def work(i):
        try:
            for repeat in range(30):
                for (op, args), shape in CASES:
                    offset = 4 * ((i + repeat) % 16)
                    x = buffers[i][offset:offset + 4096].view(np.float32).reshape(shape)
                    x[...] = _values(shape, np.float32, seed=i)
                    result = getattr(dm, op)(x, *args)
                    if not np.array_equal(result, _expected(op, args, x)):
                        errors.append((i, repeat, op, offset))
        except Exception as exc:  # noqa: BLE001 - reported below, with the thread's index
            errors.append((i, repr(exc)))

    run_threads(work)
    assert errors == []


def test_a_small_cpu_tensor_repeats_on_the_core(recorded):
    """From the second call, the core (through NumPy views here: the recording core has no handles); calls
    autograd records keep the differentiable formula, whenever they come; dtypes, strides and lazy
    conjugates stay apart."""
    torch = pytest.importorskip("torch")
    for (op, args), shape in CASES:
        function = getattr(dm, op)
        for dtype in (torch.float32, torch.int16, torch.complex64):
            base = torch.arange(int(np.prod(shape)), dtype=torch.int64).reshape(shape).to(dtype)
            for data in (base, base.transpose(2, 3).contiguous().transpose(2, 3), base.conj() if dtype.is_complex else -base):
                want = torch.from_numpy(_expected(op, args, data.resolve_conj().numpy()))
                for _ in range(3):
                    got = function(data, *args)
                    assert type(got) is torch.Tensor and got.dtype == dtype and torch.equal(got.resolve_conj(), want)
    assert recorded.runs  # (some of them ran on the core)
    op, args = S2D
    leaf = torch.rand(1, 4, 16, 16, requires_grad=True)
    for k in range(3):
        dm.space_to_depth(leaf, *args).sum().backward()
        assert leaf.grad is not None and torch.equal(leaf.grad, torch.full_like(leaf, k + 1.0))
        with torch.no_grad():
            quiet = dm.space_to_depth(leaf, *args)
        assert not quiet.requires_grad
        assert torch.equal(quiet, torch.from_numpy(_expected(op, args, leaf.detach().numpy())))


@pytest.mark.parametrize("case, shape", CASES, ids=IDS)
@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_a_cpu_tensors_repeats_are_the_cores_alone(case, shape, mode, monkeypatch):
    """From the third call, a CPU tensor's call is the core's repeat from the tensor's address in one C call
    (``_native.at``, on the handle the second call made): no NumPy view, no Python program step, a new
    tensor of its own. PyTorch's pixel_(un)shuffle (depth_first) included: the core costs less."""
    torch = pytest.importorskip("torch")
    op, args = case
    if op in ("space_to_depth", "depth_to_space"):
        args = (mode, 2)
    elif mode == "depth_first":
        pytest.skip("no mode")
    recipes.RECIPES.clear()
    data = torch.from_numpy(_values(shape, np.float32))
    want = torch.from_numpy(_expected(op, args, data.numpy()))
    asked, found = [], []
    make_handle, core_at = native_engine.handles()

    def counted(handle, address):
        done = core_at(handle, address)
        asked.append(address)
        found.append(done is not None)
        return done

    monkeypatch.setattr(native_engine, "handles", lambda: (make_handle, counted))  # (as the recipe is made)
    for _ in range(3):
        getattr(dm, op)(data, *args)
    asked.clear(), found.clear()

    def refused(*_args, **_kwargs):
        raise AssertionError("a kept call took the Python side's program")

    monkeypatch.setattr(native_engine.Planned, "fresh", refused)
    monkeypatch.setattr(native_engine.Planned, "__call__", refused)
    monkeypatch.setattr(torch.Tensor, "numpy", refused)
    for _ in range(3):
        got = getattr(dm, op)(data, *args)
        assert type(got) is torch.Tensor and got.dtype == data.dtype and torch.equal(got, want)
        assert got.data_ptr() != data.data_ptr() and got.is_contiguous()
    assert asked == [data.data_ptr()] * 3 and all(found)


@pytest.mark.parametrize("op", ["space_to_depth", "depth_to_space"])
@pytest.mark.parametrize("shape", [(2, 8, 4, 6), (1, 8, 6), (2, 8, 2, 4, 6), (0, 8, 4, 4)], ids=["4-D", "3-D", "5-D", "empty"])
def test_a_new_depth_shape_goes_from_the_rules_straight_to_the_core(op, shape, monkeypatch, recorded):
    """A NumPy array's first SpaceToDepth / DepthToSpace call of a layout, channels first, into a new array:
    the rules' straight path (shapes.static_depth_shape) and one core call, no Resolved, no Call; the second
    call takes the whole path and makes the recipe."""
    x = _values(shape, np.float32)
    expected = _expected(op, ("depth_first", 2), x)
    numpy_calls.SEEN.clear()
    recipes.RECIPES.clear()

    def refused(*args, **kwargs):
        raise AssertionError("not on a new depth shape's first call")

    with monkeypatch.context() as patched:
        patched.setattr(dispatch_calls, "Call", refused)
        patched.setattr(shapes, "resolve_space_to_depth", refused)
        patched.setattr(shapes, "resolve_depth_to_space", refused)
        first = getattr(dm, op)(x, "depth_first", 2)
    np.testing.assert_array_equal(first, expected)
    assert first.flags.c_contiguous and not np.shares_memory(first, x)
    assert len(recorded.calls) == 1 and not recipes.RECIPES  # (an empty result: first() leaves it to the Python path)
    np.testing.assert_array_equal(getattr(dm, op)(x, "depth_first", 2), expected)  # the recipe's maker
    assert len(recipes.RECIPES) == 1


@pytest.mark.parametrize("call", [
    lambda x: dm.space_to_depth(x, "depth_first", 3),  # 8 x 6 not divisible by 3
    lambda x: dm.space_to_depth(x, "DCR", 2),
    lambda x: dm.space_to_depth(x, "depth_first", 0),
    lambda x: dm.depth_to_space(x, "blocks_first", 3),  # 8 channels not divisible by 9
    lambda x: dm.depth_to_space(x, "blocks_first", np.int64(2**40)),
])
def test_a_broken_new_depth_call_is_refused_by_the_rules(call):
    """What the straight path does not take goes to the rules, which raise as on any other path."""
    numpy_calls.SEEN.clear()
    with pytest.raises((dm.DataMoveError, TypeError)):
        call(_values((1, 8, 8, 6), np.float32))
