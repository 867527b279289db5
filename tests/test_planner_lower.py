"""The compiled lowering (``src/native/planner/lower.cpp``) held to :func:`datamove.engines.native.engine.program`, bit
for bit, on the cases random layouts rarely reach (tests/test_planner.py draws small arrays): streamed scatter
tiles of long rows (``fan_out_first``), large outputs of few rows cut into chunks (``_split``), 5-D
SpaceToDepth's loops moved out (``runs_together``), windows of pixels and scatter windows, fills, 16-byte
words, negative strides; and ``lower_flat`` refusing (None, never a crash) views that name axes the arrays
lack.

Lowering reads no memory: the large arrays here are ``as_strided`` views of a small buffer, never run. Each
case also checks that the Python side took the path it is there for, so that a change of plans cannot leave
it testing something else.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import planner_cases as cases
from datamove.plans import views as plans
from datamove import shapes
from datamove.engines.native import engine as native_engine
from lowering import strided
import lowering

native = pytest.importorskip("datamove._native") if native_engine.available() else None
pytestmark = pytest.mark.skipif(native is None, reason="the compiled core is not loaded")

GATHER_WINDOW, SCATTER_WINDOW = 5, 6


def _array(shape: Sequence[int], dtype: Any, order: Optional[Sequence[int]] = None, flip: Sequence[int] = (),
           misalign: int = 0) -> np.ndarray:
    """An array of ``shape`` over a small buffer whose first item lies ``misalign`` bytes past a line: its
    axes laid out in memory in ``order`` (outermost first), the axes in ``flip`` reversed.

    NumPy's buffer protocol gives axes of length 1 strides of its own (whatever ``ndarray.strides`` says),
    and ``lower_flat`` reads the buffer's: the array returned has those strides, so that both sides lower
    the same layout."""
    dtype = np.dtype(dtype)
    buffer = np.zeros(4096, np.uint8)
    base = np.ndarray((1,), dtype, buffer, (-buffer.ctypes.data) % 64 + misalign)
    rank = len(shape)
    order = list(range(rank)) if order is None else list(order)
    strides = [0] * rank
    step = dtype.itemsize
    for axis in reversed(order):
        strides[axis] = step
        step *= shape[axis]
    array = as_strided(base, tuple(shape), tuple(strides))
    if flip:
        array = array[tuple(slice(None, None, -1) if k in flip else slice(None) for k in range(rank))]
    return as_strided(array, strides=memoryview(array).strides)


class _Paths:
    """Which of the lowering's steps changed a nest while the Python side lowered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.hits: Dict[str, int] = {}
        for module, name, changed in (
                (lowering, "fan_out_first", lambda args, r: [list(l) for l in args[0]] != r),
                (strided, "runs_together", lambda args, r: args[0] != r),
                (lowering, "_split", lambda args, r: len(r) > 1 or len(r[0]) - 8 != 3 * max(2, len(args[5])))):
            monkeypatch.setattr(module, name, self._wrap(getattr(module, name), name, changed))

    def _wrap(self, function: Any, name: str, changed: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            if changed(args, result):
                self.hits[name] = self.hits.get(name, 0) + 1
            return result
        return wrapped


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> _Paths:
    return _Paths(monkeypatch)


class _Arrays:
    """The arrays of a case, shown by their layouts: a failing test's report must not print them (most are
    views of a buffer far smaller than they are)."""

    __slots__ = ("data", "out")

    def __init__(self, data: np.ndarray, out: np.ndarray) -> None:
        self.data, self.out = data, out

    def __repr__(self) -> str:
        return " ".join(f"{a.shape}{a.strides}{a.dtype.str}" for a in (self.data, self.out))


def _lowered(plan: plans.Plan, arrays: _Arrays, stream: int) -> List[int]:
    """The program of ``plan`` from both sides, asserted equal; its int64s."""
    data, out = arrays.data, arrays.out
    lowering._PROGRAMS.clear()  # (the Python side lowers it anew: the paths are recorded)
    expected = lowering.program(plan, data, out, stream=stream)
    assert not lowering.carries_tables(expected), "a units step: lower_units' case, not this file's"
    found = native.lower_flat(cases.encode_plan(plan).tobytes(), data, out, stream)
    assert found is not None, (plan, arrays, stream)
    program = np.frombuffer(expected, np.int64).tolist()
    assert np.frombuffer(found, np.int64).tolist() == program, (plan, arrays, stream)
    return program


def _call(op: str, shape: Tuple[int, ...], args: Tuple[Any, ...], dtype: Any = "f4", stream: int = 0,
          data: Optional[Dict[str, Any]] = None, out: Optional[Dict[str, Any]] = None) -> List[int]:
    out_shape = tuple(int(n) for n in getattr(shapes, op)(shape, *args))
    plan = cases.plan_of(op, shape, args, out_shape)
    return _lowered(plan, _Arrays(_array(shape, dtype, **(data or {})), _array(out_shape, dtype, **(out or {}))), stream)


def _steps(program: List[int]) -> List[List[int]]:
    steps, at = [], 1
    for _ in range(program[0]):
        end = at + 8 + 3 * program[at + 7]
        steps.append(program[at:end])
        at = end
    assert at == len(program)
    return steps


def test_streamed_scatter_tiles_fan_out_first(paths: _Paths) -> None:
    # BatchToSpace and DepthToSpace, 128-256 MiB of float32, rows of 1 KiB: their block loops made outermost
    for op, shape, args in (("batch_to_space", (4, 128, 256, 256), ((1, 1, 2, 2), (0, 0, 0, 0), (0, 0, 0, 0))),
                            ("depth_to_space", (1, 256, 256, 256), ("blocks_first", 2)),
                            ("depth_to_space", (1, 256, 256, 256), ("depth_first", 2)),
                            ("batch_to_space", (4, 64, 256, 256), ((1, 1, 2, 2), (0, 0, 0, 0), (0, 0, 0, 32)))):
        for stream in (2, 1):
            paths.hits.clear()
            _call(op, shape, args, stream=stream)
            assert bool(paths.hits.get("fan_out_first")) == (stream == 2), (op, shape, stream)
    # BatchToSpace's scatter windows, streamed: rows off whole lines stay in order
    program = _call("batch_to_space", (4, 8, 200, 200), ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1)), stream=2)
    assert _steps(program)[0][0] == SCATTER_WINDOW
    _call("batch_to_space", (4, 8, 200, 200), ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1)), stream=2,
          data={"flip": (3,)}, out={"misalign": 16})


def test_large_outputs_of_few_rows_cut(paths: _Paths) -> None:
    # a copy of 1 MiB in one run: chunks and the rest; transposes (strided) whose rows are shared out
    program = _call("space_to_depth", (1, 1, 509, 509), ("blocks_first", 1))
    assert program[0] == 2
    assert _call("space_to_depth", (1, 1, 500, 500), ("blocks_first", 1), data={"order": (0, 1, 3, 2)})[0] == 2
    _call("space_to_depth", (1, 1, 500, 300), ("blocks_first", 1), data={"order": (0, 1, 3, 2)})
    _call("space_to_depth", (1, 3, 512, 512), ("blocks_first", 1), data={"order": (0, 1, 3, 2)})
    _call("space_to_depth", (1, 16, 512, 512), ("blocks_first", 1), data={"order": (0, 2, 3, 1)}, stream=2)
    _call("space_to_depth", (1, 3, 512, 512), ("blocks_first", 1), dtype="c16", data={"order": (0, 2, 3, 1)})
    # fills of whole channels (SpaceToBatch's pads along C), chunked
    assert _call("space_to_batch", (1, 4, 256, 256), ((1, 1, 1, 1), (0, 2, 0, 0), (0, 2, 0, 0)))[0] == 3
    _call("space_to_batch", (1, 4, 256, 256), ((1, 2, 1, 1), (0, 2, 0, 0), (0, 2, 0, 0)), dtype="u1")
    assert paths.hits.get("_split", 0) >= 8


def test_runs_together_5d_space_to_depth(paths: _Paths) -> None:
    # 5-D SpaceToDepth, rows of 64 bytes (16 float32, block 3; 8 float32, block 2 is under a line and stays)
    for shape, args, dtype in (((1, 304, 24, 48, 48), ("blocks_first", 3), "f4"),
                               ((1, 4, 24, 48, 48), ("blocks_first", 3), "f4"),
                               ((1, 4, 8, 32, 32), ("blocks_first", 2), "f4"),
                               ((2, 4, 8, 32, 32), ("depth_first", 2), "f4"),
                               ((1, 4, 8, 32, 32), ("blocks_first", 2), "f8")):
        paths.hits.clear()
        program = _call("space_to_depth", shape, args, dtype)
        assert paths.hits.get("runs_together") == 1, (shape, args)
        _call("space_to_depth", shape, args, dtype, stream=2, data={"flip": (1,)})
    paths.hits.clear()
    _call("space_to_depth", (1, 4, 8, 16, 16), ("blocks_first", 2))  # rows of 32 bytes: in the input's order
    assert not paths.hits.get("runs_together")
    assert program[0] == 1


@pytest.mark.parametrize("channels, dtype", [(1, "u1"), (1, "u2"), (2, "f4"), (4, "f4"), (8, "f4"), (16, "f4"),
                                             (32, "f4"), (1, "c16"), (3, "f4")])
def test_space_to_batch_windows_of_pixels(channels: int, dtype: str) -> None:
    # TensorFlow's NHWC: each position of the window a pixel of 1 to 128 bytes (12 bytes: not a word)
    shape = (1, 190, 190, channels)
    args = ((1, 2, 2, 1), (0, 1, 1, 0), (0, 1, 1, 0))
    pixel = channels * np.dtype(dtype).itemsize
    first = _steps(_call("space_to_batch", shape, args, dtype))[0]
    if pixel in (1, 2, 4, 8, 16, 32, 64, 128):
        assert first[:2] == [GATHER_WINDOW, pixel]
    else:
        assert first[0] != GATHER_WINDOW
    _call("space_to_batch", shape, args, dtype, stream=2, data={"flip": (1,)}, out={"misalign": 8})
    _call("space_to_batch", shape, args, dtype, data={"misalign": 4 if pixel >= 8 else 0})  # words off their alignment


def test_scatter_windows_and_fills() -> None:
    for shape, args in ((4, 3, 64, 64), ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))), \
                       ((4, 3, 512, 512), ((1, 1, 2, 2), (0, 0, 0, 0), (0, 0, 0, 2))), \
                       ((16, 20, 20, 8), ((1, 4, 4, 1), (0, 1, 1, 0), (0, 1, 1, 0))):
        for dtype in ("u1", "f4", "c16", "V32"):
            for stream in (0, 2):
                _call("batch_to_space", shape, args, dtype, stream=stream)
    # SpaceToBatch's windows with fills of the padding beside them (pads along H and along C)
    program = _call("space_to_batch", (1, 4, 256, 250), ((1, 1, 2, 2), (0, 0, 4, 0), (0, 0, 4, 6)), stream=2)
    assert _steps(program)[0][0] == GATHER_WINDOW and program[0] == 3
    _call("space_to_batch", (2, 4, 64, 64), ((1, 1, 2, 2), (0, 1, 1, 1), (0, 1, 1, 1)), "c16")
    _call("space_to_batch", (2, 5, 64, 64), ((1, 1, 2, 4), (0, 1, 0, 3), (0, 0, 2, 1)), "u2", data={"flip": (2,)})


def test_words_of_16_bytes_and_negative_strides() -> None:
    assert _call("space_to_depth", (1, 4, 16, 32), ("blocks_first", 2), "c16")[2] == 16
    assert _call("space_to_depth", (1, 1, 64, 64), ("blocks_first", 1), "f4")[2] == 16
    assert _call("space_to_depth", (1, 1, 64, 64), ("blocks_first", 1), "f4", data={"misalign": 4})[2] == 4
    for op, shape, args in (("space_to_depth", (1, 4, 16, 32), ("blocks_first", 2)),
                            ("depth_to_space", (1, 64, 64, 64), ("depth_first", 2)),
                            ("space_to_batch", (1, 2, 258, 256), ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))),
                            ("batch_to_space", (4, 4, 64, 64), ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1)))):
        for flip in ((1,), (2, 3), (0, 1, 2, 3)):
            for dtype in ("u1", "f4", "c16", "V6"):
                _call(op, shape, args, dtype, stream=2, data={"flip": flip}, out={"flip": flip[::-1][:1]})


def test_views_past_the_arrays_rank_are_refused() -> None:
    shape = (1, 4, 16, 32)
    plan = plans.space_to_depth(shape, shapes.space_to_depth(shape, "blocks_first", 2), "blocks_first", 2)
    flat = cases.encode_plan(plan).tobytes()
    data, out = np.zeros(shape, np.float32), np.zeros(plan.out_shape, np.float32)
    assert native.lower_flat(flat, data, out, 0) is not None
    # arrays of rank 3 and 2 under a plan whose views name axis 3
    assert native.lower_flat(flat, data[0], out, 0) is None
    assert native.lower_flat(flat, data, out[0], 1) is None
    assert native.lower_flat(flat, data[0, 0], out[0, 0], 2) is None
    # an axis past the rank, a negative axis, a negative count, a window's dims past its views'
    src, dst = plan.copies[0]
    for bad in ((9, 2, 1), (-1, 2, 1), (1, -2, 1)):
        broken = plan._replace(copies=((src._replace(dims=src.dims[:-1] + (bad,)), dst),))
        assert native.lower_flat(cases.encode_plan(broken).tobytes(), data, out, 0) is None
    x = np.zeros((1, 190, 190, 8), np.float32)
    window_plan = plans.space_to_batch(x.shape, shapes.space_to_batch(x.shape, (1, 2, 2, 1), (0, 1, 1, 0), (0, 1, 1, 0)),
                                       (1, 2, 2, 1), (0, 1, 1, 0), (0, 1, 1, 0))
    y = np.zeros(window_plan.out_shape, np.float32)
    window = window_plan.windows[0]
    for trailing in (len(window.src.dims) - 1, -1):
        broken = window_plan._replace(windows=(window._replace(trailing=trailing),) + window_plan.windows[1:])
        assert native.lower_flat(cases.encode_plan(broken).tobytes(), x, y, 0) is None
    assert native.lower_flat(cases.encode_plan(window_plan).tobytes(), x[0], y, 0) is None
