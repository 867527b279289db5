"""The compiled planner (``src/native/plan.hpp``) held to the Python side, bit for bit: its plans to
:mod:`datamove.plans`', its programs to :func:`datamove.engines.native_engine.program`'s, over thousands of
random calls and layouts (ranks 2-6, every item size, permuted, reversed and gapped strides, offsets, the
three stream modes)."""

from __future__ import annotations

import numpy as np
import pytest

import planner_cases as cases
from datamove.engines import native_engine

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
