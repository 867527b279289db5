"""The compiled planner's plans (``src/native/planner/views.cpp``) held to :mod:`datamove.plans.views`, bit for bit, on the
calls that tests/test_planner.py's random generator does not reach: empty axes, ranks 2 and 7, blocks of 1
everywhere and blocks of 5-8, crops that remove whole blocks, the depth ops in 1 and 3 spatial dims; and
the calls it refuses (``plan_flat`` returns None, never crashes; the NumPy engine runs them): past its bound
of 65,536 views, an op id out of range, vectors of the wrong length, hostile values."""

from __future__ import annotations

import numpy as np
import pytest

import planner_cases as cases
from datamove import shapes
from datamove.engines.native import engine as native_engine

native = pytest.importorskip("datamove._native") if native_engine.available() else None
pytestmark = pytest.mark.skipif(native is None, reason="the compiled core is not loaded")

S2B, B2S = "space_to_batch", "batch_to_space"

# (op, data shape, args): block, begin, end for the space ops (pads for S2B, crops for B2S); mode, size for
# the depth ops. B2S's data shapes are written as the S2B shape they come from (see _call).
SPACE_CASES = [
    # empty axes: batch 0, a spatial dim 0, pads making everything padding
    (S2B, (0, 4, 6), ((1, 2, 3), (0, 1, 2), (0, 1, 1))),
    (S2B, (2, 0, 6), ((1, 2, 3), (0, 0, 0), (0, 0, 0))),
    (S2B, (2, 0, 5), ((1, 2, 3), (0, 1, 3), (0, 1, 1))),
    (S2B, (2, 0, 0), ((1, 4, 3), (0, 3, 1), (0, 5, 2))),
    (S2B, (1, 3, 0, 2), ((1, 2, 2, 1), (0, 1, 2, 0), (0, 0, 0, 0))),
    (S2B, (3, 5, 4), ((1, 1, 1), (0, 0, 0), (0, 0, 0))),
    (B2S, (0, 4, 6), ((1, 2, 3), (0, 1, 2), (0, 1, 1))),
    (B2S, (2, 0, 6), ((1, 2, 3), (0, 0, 0), (0, 0, 0))),
    (B2S, (2, 0, 5), ((1, 2, 3), (0, 1, 3), (0, 1, 1))),
    (B2S, (2, 3, 0), ((1, 1, 4), (0, 0, 2), (0, 0, 2))),
    # rank 2
    (S2B, (2, 7), ((1, 3), (0, 1), (0, 1))),
    (S2B, (1, 12), ((1, 4), (0, 0), (0, 0))),
    (S2B, (3, 5), ((1, 1), (0, 2), (0, 0))),
    (B2S, (2, 7), ((1, 3), (0, 1), (0, 1))),
    (B2S, (1, 5), ((1, 8), (0, 3), (0, 0))),
    # rank 7
    (S2B, (1, 3, 2, 5, 1, 4, 3), ((1, 2, 1, 3, 1, 2, 3), (0, 1, 0, 1, 0, 2, 0), (0, 0, 0, 0, 1, 0, 0))),
    (S2B, (2, 1, 2, 3, 2, 1, 2), ((1, 1, 2, 1, 2, 1, 1), (0, 0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0, 0))),
    (B2S, (1, 3, 2, 5, 1, 4, 3), ((1, 2, 1, 3, 1, 2, 3), (0, 1, 0, 1, 0, 2, 0), (0, 0, 0, 0, 1, 0, 0))),
    (B2S, (2, 1, 3, 3, 2, 1, 2), ((1, 1, 2, 1, 2, 1, 2), (0, 0, 1, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0, 0))),
    # blocks of 1 everywhere, with and without pads
    (S2B, (2, 3, 4, 5), ((1, 1, 1, 1), (0, 0, 0, 0), (0, 0, 0, 0))),
    (S2B, (2, 3, 4, 5), ((1, 1, 1, 1), (0, 1, 0, 2), (0, 0, 3, 1))),
    (B2S, (2, 3, 4, 5), ((1, 1, 1, 1), (0, 0, 0, 0), (0, 0, 0, 0))),
    (B2S, (2, 3, 4, 5), ((1, 1, 1, 1), (0, 1, 0, 2), (0, 0, 3, 1))),
    # large blocks (5-8)
    (S2B, (1, 9, 13), ((1, 5, 8), (0, 3, 2), (0, 3, 1))),
    (S2B, (2, 3, 20), ((1, 6, 7), (0, 2, 6), (0, 1, 2))),
    (S2B, (1, 2, 14, 3), ((1, 8, 7, 1), (0, 6, 0, 0), (0, 0, 0, 0))),
    (B2S, (1, 9, 13), ((1, 5, 8), (0, 3, 2), (0, 3, 1))),
    (B2S, (2, 3, 20), ((1, 6, 7), (0, 2, 6), (0, 1, 2))),
    # B2S crops that remove whole blocks (crops >= the block), or all but a sliver
    (B2S, (1, 2, 3), ((1, 2, 3), (0, 4, 6), (0, 2, 3))),
    (B2S, (2, 1, 1), ((1, 3, 2), (0, 5, 3), (0, 3, 4))),
    (B2S, (1, 4, 6, 2), ((1, 2, 2, 1), (0, 2, 4, 0), (0, 2, 2, 0))),
    (B2S, (1, 0, 4), ((1, 2, 2), (0, 4, 0), (0, 2, 0))),
    # a window axis with whole axes after it (TensorFlow's NHWC), and one with pads after it (no windows)
    (S2B, (1, 5, 7, 3), ((1, 2, 3, 1), (0, 1, 1, 0), (0, 0, 1, 0))),
    (S2B, (1, 5, 7, 3), ((1, 2, 3, 1), (0, 1, 1, 1), (0, 0, 1, 0))),
    (B2S, (1, 5, 7, 3), ((1, 2, 3, 1), (0, 1, 1, 0), (0, 0, 1, 0))),
]

DEPTH_CASES = [
    (op, shape, (mode, size))
    for op in ("space_to_depth", "depth_to_space")
    for mode in cases.MODES
    for shape, size in [
        ((2, 3, 8), 2),          # 3-D: one spatial dim
        ((1, 1, 12), 4),
        ((1, 5, 6), 1),
        ((2, 3, 4, 6, 2), 2),    # 5-D: three spatial dims
        ((1, 2, 3, 3, 6), 3),
        ((1, 1, 5, 5, 5), 5),
        ((3, 2, 4, 8), 4),
        ((0, 3, 4, 4), 2),       # empty: no copies
        ((2, 0, 6), 3),
        ((2, 3, 0, 4), 2),
        ((1, 2), 3),             # no spatial dims (rank 2: the planner's own rule, past shapes' rank >= 3)
    ]
]


def _call(op, shape, args):
    """(data shape, out shape) of a call; B2S's data is the S2B output of `shape` (a valid call by making)."""
    if op == B2S:
        data = tuple(shapes.space_to_batch(shape, *args))
        return data, tuple(shapes.batch_to_space(data, *args))
    if op == "depth_to_space" and len(shape) >= 3:
        shape = tuple(shapes.space_to_depth(shape, *args))
    if len(shape) < 3:  # shapes refuses rank 2; datamove.plans.views plans it all the same
        return tuple(shape), tuple(shape)
    return tuple(shape), tuple(getattr(shapes, op)(shape, *args))


def _check(op, shape, args):
    data_shape, out_shape = _call(op, shape, args)
    plan = cases.plan_of(op, data_shape, args, out_shape)
    found = native.plan_flat(*cases.planner_args(op, data_shape, out_shape, args))
    assert found is not None, (op, data_shape, args)
    assert np.frombuffer(found, np.int64).tolist() == cases.encode_plan(plan).tolist(), (op, data_shape, args)
    return plan


@pytest.mark.parametrize("op, shape, args", SPACE_CASES + DEPTH_CASES)
def test_plan_matches_datamove_plans(op, shape, args):
    _check(op, shape, args)


def test_everything_padding_is_fills_only():
    plan = _check(S2B, (2, 0, 0), ((1, 4, 3), (0, 3, 1), (0, 5, 2)))
    assert plan.copies == () and plan.fills


def _big(rank):
    """A call whose every spatial axis splits into three pieces (head, rows, tail): 3 ** (rank - 1) copies."""
    return (1,) + (7,) * (rank - 1), ((1,) + (3,) * (rank - 1), (0,) + (1,) * (rank - 1), (0,) + (1,) * (rank - 1))


def test_just_under_the_bound_is_planned():
    shape, args = _big(10)  # B2S: 19,683 copies and 6,561 windows
    plan = _check(B2S, shape, args)
    assert len(plan.copies) + len(plan.windows) == 26244


@pytest.mark.parametrize("op, rank", [(S2B, 11), (B2S, 11), (S2B, 12)])
def test_past_the_bound_is_refused(op, rank):
    # over 65,536 views: S2B rank 11, 59,049 copies and their fills; B2S rank 11, 59,049 copies and 19,683 windows
    # (the NumPy engine runs such calls: tests/test_native_engine.py)
    shape, args = _big(rank)
    data_shape, out_shape = _call(op, shape, args)
    assert native.plan_flat(*cases.planner_args(op, data_shape, out_shape, args)) is None


@pytest.mark.parametrize("flat_args", [
    (7, (1, 2, 4), (1, 8, 1), (), (), (), 0, 2),                        # op id 7
    (-1, (1, 2, 4), (1, 8, 1), (), (), (), 0, 2),
    (1, (1, 4), (2, 2), (1, 2, 1), (0, 0), (0, 0), 0, 1),                 # block of the wrong length
    (0, (2, 4), (1, 8), (1, 2), (0,), (0, 0), 0, 1),                      # crops of the wrong length
    (1, (), (), (), (), (), 0, 1),                                        # rank 0
    (1, (1, 4), (2, 2), (1, 0), (0, 0), (0, 0), 0, 1),                    # block 0
    (0, (2, 4), (1, 8), (1, -2), (0, 0), (0, 0), 0, 1),                   # a negative block
    (2, (1, 2, 4), (1, 8, 1), (), (), (), 5, 2),                          # mode 5
    (2, (1, 2, 4), (1, 8, 1), (), (), (), 0, 0),                          # block size 0
    (3, (1, 8, 1), (1, 2, 4, 1), (), (), (), 0, 2),                       # ranks that differ
    (2, (1,), (1,), (), (), (), 0, 2),                                    # rank 1
    (1, (1,) * 40, (1,) * 40, (1,) * 40, (0,) * 40, (0,) * 40, 0, 1),     # rank 40: past the planner's
])
def test_bad_calls_are_refused(flat_args):
    assert native.plan_flat(*flat_args) is None


def test_hostile_values_do_not_crash():
    """Calls no validation passed (negative, huge, mismatched) plan or are refused, never crash."""
    rng = np.random.default_rng(5)
    extremes = [-(1 << 63), (1 << 63) - 1, -1, 0, 1, 1 << 40]
    for _ in range(1500):
        rank = int(rng.integers(0, 6))

        def vec():
            n = rank if rng.random() < 0.9 else int(rng.integers(0, 6))
            return tuple(int(rng.choice(extremes)) if rng.random() < 0.1 else int(rng.integers(-3, 10))
                         for _ in range(n))

        op, mode = int(rng.integers(-1, 5)), int(rng.integers(-1, 3))
        found = native.plan_flat(op, vec(), vec(), vec(), vec(), vec(), mode, int(rng.integers(-2, 6)))
        assert found is None or isinstance(found, bytes)
