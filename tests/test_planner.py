"""The compiled planner (``src/native/plan.hpp``) held to the Python side, bit for bit: its plans to
:mod:`datamove.plans.views`', its programs to :func:`datamove.engines.native.engine.program`'s, over thousands of
random calls and layouts (ranks 2-6, every item size, permuted, reversed and gapped strides, offsets, the
three stream modes)."""

from __future__ import annotations

import numpy as np
import pytest

import planner_cases as cases
import datamove.rules.shapes
from datamove.engines.native import engine as native_engine

native = pytest.importorskip("datamove._native") if native_engine.available() else None
pytestmark = pytest.mark.skipif(native is None, reason="the compiled core is not loaded")

CASES = 3000


def test_plans_match_datamove_plans():
    rng = np.random.default_rng(20261128)
    for _ in range(CASES):
        op, data_shape, args, out_shape = cases.random_call(rng)
        plan = cases.plan_of(op, data_shape, args, out_shape)
        found = native.plan_flat(*cases.planner_args(op, data_shape, out_shape, args))
        assert found is not None, (op, data_shape, args)
        assert np.frombuffer(found, np.int64).tolist() == cases.encode_plan(plan).tolist(), (op, data_shape, args)


def test_programs_match_native_engine():
    rng = np.random.default_rng(11282026)
    for _ in range(CASES):
        plan, data, out, stream, _ = cases.random_case(rng)
        expected = cases.python_program(plan, data, out, stream)
        found = native.lower_flat(cases.encode_plan(plan).tobytes(), data, out, stream)
        assert found is not None, (plan, data.strides, out.strides, data.dtype, stream)
        assert np.frombuffer(found, np.int64).tolist() == np.frombuffer(expected, np.int64).tolist(), (
            plan, data.shape, data.strides, out.strides, data.dtype, stream)


def test_calls_bit_for_bit_against_the_numpy_engine():
    """``_native.call`` (planned, lowered and run in one, a new shape's first call) writes what the NumPy engine
    writes, over random calls and layouts, and returns True where its planner took the call."""
    import datamove as dm
    from datamove.engines.call import Call

    rng = np.random.default_rng(1128)
    taken = 0
    for _ in range(400):
        op, data_shape, args, out_shape = cases.random_call(rng)
        dtype = np.dtype(cases.DTYPES[rng.integers(len(cases.DTYPES))])
        data = cases.random_array(rng, data_shape, dtype)
        out = cases.random_array(rng, out_shape, dtype, writable_zero=True)
        expected = getattr(dm, op)(np.array(data), *args, engine="numpy")
        params = getattr(datamove.rules.shapes, "resolve_" + op)(data_shape, *args).params
        call = Call(op, params, data_shape, out_shape)
        stream = int(rng.choice([0, 1, 2]))
        if native.call(*native_engine._core_args(call), data, out, 1, stream, native_engine.RUN_MODES[stream]):
            taken += 1
            assert np.ascontiguousarray(out).tobytes() == np.ascontiguousarray(expected).tobytes(), (
                op, data_shape, args, dtype, data.strides, out.strides)
    assert taken == 400


def test_hostile_calls_are_refused_never_run_past_the_arrays():
    """Calls that break the rules (no validation ran: the exports are the core's own) plan nothing, or plan
    what the core's parser then refuses (a ValueError): never a crash, never a write outside ``out``."""
    rng = np.random.default_rng(7)
    guard = np.full(4096, 0xAB, np.uint8)
    ran = refused = 0
    for _ in range(3000):
        rank = int(rng.integers(0, 7))
        in_shape = tuple(int(v) for v in rng.integers(0, 6, rank))
        agree = rng.random() < 0.7  # lengths that agree with the rank, values that break the rules
        out_shape = tuple(int(v) for v in rng.integers(0, 6, rank if agree else int(rng.integers(0, 7))))
        vectors = [tuple(int(v) for v in rng.integers(-3, 5, rank if agree else int(rng.integers(0, 7))))
                   for _ in range(3)]
        args = (int(rng.integers(-1, 5)), *vectors, int(rng.integers(-1, 3)), int(rng.integers(-2, 5)))
        nin, nout = int(np.prod(in_shape)), int(np.prod(out_shape))
        data = guard[:nin * 4].view(np.float32).reshape(in_shape) if nin * 4 <= 2048 else None
        if data is None or nout * 4 > 2048:
            continue
        out = guard[2048:2048 + nout * 4].view(np.float32).reshape(out_shape)
        before = guard.copy()
        try:
            native.call(*args, data, out, 1, 0, 0)
            native.program(*args, data, out, 0)
        except (ValueError, TypeError, OverflowError):
            refused += 1
        else:
            ran += 1
        written = np.zeros(guard.size, bool)
        written[2048:2048 + nout * 4] = True
        assert np.array_equal(guard[~written], before[~written])  # the input and the bytes around out
    assert ran > 1000 and refused > 10, (ran, refused)  # (both ways taken: the test reaches the parser)
