"""``datamove.rules.shapes``: OpenVINO's shape-inference rules, intervals, unknowns and validation.

Sections:

1. The 21 type_prop examples of PEERS.md section 2.4 (OpenVINO's
   ``src/core/tests/type_prop/{batch_to_space,space_to_batch,depth_to_space,space_to_depth}.cpp``),
   written in OpenVINO's notation and converted by :func:`ov`.
2. Interval arithmetic (PEERS.md 2.2), with the two deliberate differences:
   an unbounded upper bound divided by ``k`` stays unbounded (OpenVINO: the
   finite ``floor(INT64_MAX / k)``), and a crop that exceeds every possible
   ``D * B`` raises (OpenVINO: a silent static 0).
3. Unknown parameters (``None``, PEERS.md 2.1 "Non-constant inputs") and an
   unknown rank (``None`` shape), which still validates the parameters.
4. Every validation rule, at the shape level: exception type and message.
5. Hypothesis properties: shapes agree with the operations on ``np.zeros``,
   S2B/B2S round trips, and interval results contain every static result.

Conventions: a dim is an ``int`` (static), ``None`` (unknown) or ``Dim(lo, hi)``;
results are normalised (a static interval is an ``int``, ``[0, inf)`` is ``None``),
which :func:`assert_shape` checks by type as well as by value (``Dim(5, 5) == 5``).
"""

from __future__ import annotations

import re
from typing import Any, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import datamove as dm
from datamove import DataMoveError, Dim
from datamove.rules import shapes
from datamove.rules.dims import INT64_MAX
from strategies import depth_case, space_batch_case

MODES = ("blocks_first", "depth_first")


# ------------------------------------------------------------------ helpers


def ov(*dims: Any) -> Tuple[Any, ...]:
    """A shape in OpenVINO's notation, in datamove's normalised form.

    ``-1`` is a dynamic dim (``None``), ``[lo, -1]`` an unbounded interval,
    ``[lo, hi]`` an interval (a static int when ``lo == hi``).
    """
    out = []
    for d in dims:
        if isinstance(d, list):
            lo, hi = d
            hi = None if hi == -1 else hi
            out.append(lo if lo == hi else (None if (lo, hi) == (0, None) else Dim(lo, hi)))
        elif d == -1:
            out.append(None)
        else:
            out.append(d)
    return tuple(out)


def dynamic(rank: Optional[int] = None):
    """OpenVINO's ``PartialShape::dynamic(rank)``."""
    return None if rank is None else (None,) * rank


def assert_shape(actual, expected):
    """Equal, and every dim in its normalised form (int / None / Dim, never Dim(k, k))."""
    if expected is None:
        assert actual is None
        return
    assert isinstance(actual, tuple), actual
    assert len(actual) == len(expected), (actual, expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert type(a) is type(e), f"dim {i}: {a!r} is not normalised like {e!r} (got {actual}, expected {expected})"
        assert a == e, f"dim {i}: {a!r} != {e!r} (got {actual}, expected {expected})"
        if isinstance(a, Dim):
            assert not a.is_static and (a.lo, a.hi) != (0, None), f"dim {i}: {a!r} is not normalised"


def raises(error, text):
    """``pytest.raises`` matching ``text`` literally (messages hold brackets, dots and stars)."""
    return pytest.raises(error, match=re.escape(text))


def contains(dim, value: int) -> bool:
    if dim is None:
        return value >= 0
    if isinstance(dim, Dim):
        return dim.lo <= value and (dim.hi is None or value <= dim.hi)
    return dim == value


# ------------------------------------------------------------------ 1. type_prop examples (PEERS.md 2.4)

B2S_5D = ([1, 6, 5, 1, 16], [0, 2, 0, 0, 0], [0, 2, 1, 0, 0])
BIG_4D = ([1, 12, 100, 2], [0, 3, 38, 1], [0, 5, 38, 0])

# (example number, data shape, (block_shape, crops_begin, crops_end), expected)
B2S_EXAMPLES = [
    pytest.param(
        ov(960, [2, 20], [12, 14], [100, 150], [10, 20]), B2S_5D,
        ov(2, [8, 116], [59, 69], [100, 150], [160, 320]),
        id="1-b2s-5D_when_batch_is_static",
    ),
    pytest.param(
        ov([959, 962], [2, 34], [9, 21], [100, 162], [1, 1999]), B2S_5D,
        # [ceil(959/480), floor(962/480)] = [2, 2]: a static 2
        ov([2, 2], [8, 200], [44, 104], [100, 162], [16, 31984]),
        id="2-b2s-5D_when_batch_is_dynamic",
    ),
    pytest.param(
        ov([959, 962], [2, 34], [9, 21]), ([1, 1, 1], [0, 0, 0], [0, 0, 1]),
        ov([959, 962], [2, 34], [8, 20]),
        id="3-b2s-input_interval_shape_block_one",
    ),
    pytest.param(
        ov(4800, 9, [11, -1], 2), BIG_4D,
        ov(2, 100, [1024, -1], 3),
        id="4-b2s-batch_to_space_and_space_to_batch",
    ),
    pytest.param(
        # block_shape is a Parameter: out[0] = ?, out[i] = D_i * [1, inf) - crops
        ov(100, 7, 13, 3), (None, [0, 3, 1, 0], [0, 3, 0, 0]),
        ov(-1, [1, -1], [12, -1], [3, -1]),
        id="5-b2s-block_non_constant_only",
    ),
    pytest.param(
        ov(100, 7, 13, 3), ([1, 2, 5, 1], None, None),
        ov(10, -1, -1, -1),
        id="6-b2s-crops_non_constant_only",
    ),
    pytest.param(ov(100, 7, 13, 3), (None, None, None), dynamic(4), id="7a-b2s-non_const_inputs"),
    pytest.param(
        dynamic(4), ([1, 10, 5, 1], [0, 3, 1, 0], [0, 3, 0, 0]), dynamic(4), id="7b-b2s-dynamic_shape_static_rank"
    ),
    pytest.param(
        dynamic(), ([1, 10, 5, 1], [0, 3, 1, 0], [0, 3, 0, 0]), dynamic(), id="7c-b2s-dynamic_shape_dynamic_rank"
    ),
]


@pytest.mark.parametrize("data, params, expected", B2S_EXAMPLES)
def test_type_prop_batch_to_space(data, params, expected):
    assert_shape(shapes.batch_to_space(data, *params), expected)


S2B_EXAMPLES = [
    pytest.param(
        ov(2, [100, -1], 1024, 3), BIG_4D,
        ov(4800, [9, -1], 11, 2),
        id="8-s2b-space_to_batch_and_batch_to_space",
    ),
    pytest.param(
        ov([2, 5], 100, 1024, 3), BIG_4D,
        ov([4800, 12000], 9, 11, 2),
        id="9-s2b-when_space_is_static",
    ),
    pytest.param(
        ov([2, 5], [5, 100], [100, 1024], [3, 10]), BIG_4D,
        # [ceil(13/12), floor(108/12)], [ceil(176/100), floor(1100/100)], [ceil(4/2), floor(11/2)]
        ov([4800, 12000], [2, 9], [2, 11], [2, 5]),
        id="11-s2b-when_space_is_dynamic",
    ),
    pytest.param(
        dynamic(4), ([1, 10, 5, 1], [0, 3, 2, 0], [0, 3, 0, 0]),
        ov(-1, [1, -1], [1, -1], -1),
        id="12-s2b-dynamic_shape_static_rank",
    ),
    pytest.param(
        ov(100, 7, 13, 3), (None, [0, 3, 1, 0], [0, 3, 0, 0]), dynamic(4), id="14a-s2b-block_non_constant_only"
    ),
    pytest.param(
        ov(100, 7, 13, 3), ([1, 2, 5, 1], None, None), ov(1000, -1, -1, -1), id="14b-s2b-crops_non_constant_only"
    ),
    # Not in PEERS.md's table but in the same file: all inputs Parameters, and a dynamic rank.
    pytest.param(ov(100, 7, 13, 3), (None, None, None), dynamic(4), id="s2b-non_const_inputs"),
    pytest.param(
        dynamic(), ([1, 10, 5, 1], [0, 3, 1, 0], [0, 3, 0, 0]), dynamic(), id="s2b-dynamic_shape_dynamic_rank"
    ),
    pytest.param(dynamic(), (None, None, None), dynamic(), id="s2b-dynamic_rank_shape_block_and_pads_not_const"),
]


@pytest.mark.parametrize("data, params, expected", S2B_EXAMPLES)
def test_type_prop_space_to_batch(data, params, expected):
    assert_shape(shapes.space_to_batch(data, *params), expected)


def test_type_prop_4_round_trip_batch_to_space_then_space_to_batch():
    data = ov(4800, 9, [11, -1], 2)
    out = shapes.batch_to_space(data, *BIG_4D)
    assert_shape(out, ov(2, 100, [1024, -1], 3))
    assert_shape(shapes.space_to_batch(out, *BIG_4D), data)


def test_type_prop_8_round_trip_space_to_batch_then_batch_to_space():
    data = ov(2, [100, -1], 1024, 3)
    out = shapes.space_to_batch(data, *BIG_4D)
    assert_shape(out, ov(4800, [9, -1], 11, 2))
    assert_shape(shapes.batch_to_space(out, *BIG_4D), data)


# Examples 10 and 13 pad the batch axis (pads_begin[0] = pads_end[0] = 1). OpenVINO's
# shape inference ignores pads[0] (its CPU plugin applies them); datamove rejects a
# non-zero pad at index 0 (README: "the spec says the batch axis has ... no crop/pad"),
# so these raise. With pads[0] = 0, which is what OpenVINO's shape inference computes
# with, datamove gives OpenVINO's expected output.
S2B_BATCH_PAD_EXAMPLES = [
    pytest.param(
        ov([2, 5], [5, 100], [100, 1024], [3, 10]), ([1, 1, 1, 1], [1, 0, 2, 0], [1, 0, 3, 0]),
        ov([2, 5], [5, 100], [105, 1029], [3, 10]),
        id="10-s2b-when_data_dynamic_",
    ),
    pytest.param(
        ov([2, 5], 100, [100, -1], 3), ([1, 2, 4, 1], [1, 1, 2, 0], [1, 1, 6, 0]),
        ov([16, 40], 51, [27, -1], 3),
        id="13-s2b-default_ctor",
    ),
]


@pytest.mark.parametrize("data, params, expected", S2B_BATCH_PAD_EXAMPLES)
def test_type_prop_space_to_batch_with_batch_pads(data, params, expected):
    block, begin, end = params
    with raises(DataMoveError, "pads_begin[0] must be 0, got 1: index 0 is the batch axis"):
        shapes.space_to_batch(data, block, begin, end)
    with raises(DataMoveError, "pads_end[0] must be 0, got 1: index 0 is the batch axis"):
        shapes.space_to_batch(data, block, [0] + begin[1:], end)
    assert_shape(shapes.space_to_batch(data, block, [0] + begin[1:], [0] + end[1:]), expected)


DEPTH_EXAMPLES = [
    # (op, data, mode, block_size, expected)
    pytest.param(
        "depth_to_space", ov([2, 10], 24, [3, 7], [423, 3000], [235, 1345]), "blocks_first", 2,
        ov([2, 10], 3, [6, 14], [846, 6000], [470, 2690]),
        id="15-d2s-block_first_5D_when_depth_is_static",
    ),
    pytest.param(
        "depth_to_space", ov([2, 10], [81, 82], [3, 7], [423, 3000], [235, 1345]), "blocks_first", 3,
        # [ceil(81/27), floor(82/27)] = [3, 3]
        ov([2, 10], [3, 3], [9, 21], [1269, 9000], [705, 4035]),
        id="17-d2s-block_first_5D_when_depth_is_dynamic",
    ),
    pytest.param(
        "depth_to_space", ov([2, 10], 27, [0, 54], [9, -1]), "blocks_first", 3,
        ov([2, 10], 3, [0, 162], [27, -1]),
        id="18-d2s-default_ctor",
    ),
    pytest.param(
        "space_to_depth", ov([1, 4], [12, 36], 1080, 1616), "depth_first", 2,
        ov([1, 4], [48, 144], 540, 808),
        id="19-s2d-when_space_is_static",
    ),
    pytest.param(
        "space_to_depth", ov([1, 4], [12, 36], [100, 1081], [99, 1616]), "depth_first", 2,
        # [ceil(100/2), floor(1081/2)], [ceil(99/2), floor(1616/2)]
        ov([1, 4], [48, 144], [50, 540], [50, 808]),
        id="20-s2d-when_space_is_dynamic",
    ),
    pytest.param(
        "space_to_depth", ov([1, 4], [12, 36], 900, 3), "blocks_first", 3,
        ov([1, 4], [108, 324], 300, 1),
        id="21-s2d-default_ctor",
    ),
    # Not in PEERS.md's table but in the same files: dynamic shapes and block size 1.
    pytest.param("depth_to_space", dynamic(4), "depth_first", 2, dynamic(4), id="d2s-dynamic_shape_static_rank"),
    pytest.param("depth_to_space", dynamic(), "depth_first", 2, dynamic(), id="d2s-dynamic_shape_dynamic_rank"),
    pytest.param("space_to_depth", dynamic(4), "blocks_first", 8, dynamic(4), id="s2d-dynamic_shape_static_rank"),
    pytest.param("space_to_depth", dynamic(), "blocks_first", 8, dynamic(), id="s2d-dynamic_shape_dynamic_rank"),
    pytest.param(
        "space_to_depth", ov([1, 4], [12, 36], 1080, 1616), "depth_first", 1,
        ov([1, 4], [12, 36], 1080, 1616), id="s2d-depth_first_5D_1 (block size 1)",
    ),
    pytest.param("depth_to_space", ov(1, 128, 8, 8), "blocks_first", 8, ov(1, 2, 64, 64), id="d2s-block_first_4D"),
    pytest.param("space_to_depth", ov(1, 2, 64, 64), "blocks_first", 8, ov(1, 128, 8, 8), id="s2d-block_first_4D"),
]


@pytest.mark.parametrize("op, data, mode, size, expected", DEPTH_EXAMPLES)
def test_type_prop_depth(op, data, mode, size, expected):
    assert_shape(getattr(shapes, op)(data, mode, size), expected)


def test_type_prop_16_depth_to_space_default_block_size():
    data = ov([2, 10], 24, [3, 7], [423, 3000], [235, 1345])
    assert_shape(shapes.depth_to_space(data, "blocks_first"), data)
    assert_shape(shapes.space_to_depth(data, "blocks_first"), data)


STATIC_TYPE_PROP = [
    # The static shapes of the same files: (op, data, params, expected)
    ("batch_to_space", (10, 26), ([1, 5], [0, 2], [0, 0]), (2, 128)),
    ("batch_to_space", (100, 7, 13, 3), ([1, 10, 5, 1], [0, 3, 1, 0], [0, 3, 0, 0]), (2, 64, 64, 3)),
    ("batch_to_space", (960, 6, 13, 128, 16), B2S_5D, (2, 32, 64, 128, 256)),
    ("space_to_batch", (2, 128), ([1, 5], [0, 2], [0, 0]), (10, 26)),
    ("space_to_batch", (2, 64, 64, 3), ([1, 10, 5, 1], [0, 3, 1, 0], [0, 3, 0, 0]), (100, 7, 13, 3)),
    ("space_to_batch", (2, 32, 64, 128, 256), B2S_5D, (960, 6, 13, 128, 16)),
    ("depth_to_space", (1, 16, 3, 1080, 1616), ("depth_first", 2), (1, 2, 6, 2160, 3232)),
    ("space_to_depth", (1, 12, 4, 1080, 1616), ("depth_first", 2), (1, 96, 2, 540, 808)),
]


@pytest.mark.parametrize("op, data, params, expected", STATIC_TYPE_PROP)
def test_type_prop_static(op, data, params, expected):
    assert_shape(getattr(shapes, op)(data, *params), expected)


TYPE_PROP_ERRORS = [
    # OpenVINO's error cases of the same files, with datamove's messages.
    ("batch_to_space", (4,), ([1, 1], [0, 0], [0, 0]), "batch_to_space: data must have rank >= 2, got rank 1"),
    ("batch_to_space", (10, 26), ([1] * 5, [0] * 5, [0] * 5), "len(block_shape) = 5, data rank = 2"),
    ("batch_to_space", (100, 7, 13, 3), ([0, 10, 5, 1], [0, 3, 1, 0], [0, 3, 0, 0]),
     "block_shape[0] must be >= 1, got 0 (block_shape = [0, 10, 5, 1])"),
    ("batch_to_space", (100, 7, 13, 3), ([1, 10, 5, 1], [0, 3, 1, -1], [0, 3, 0, 0]),
     "crops_begin[3] must be >= 0, got -1 (crops_begin = [0, 3, 1, -1])"),
    ("batch_to_space", (100, 7, 13, 3), ([1, 10, 5, 1], [0, 3, 1, 0], [0, 3, -1, 0]),
     "crops_end[2] must be >= 0, got -1 (crops_end = [0, 3, -1, 0])"),
    ("batch_to_space", (80, 7, 13, 3), ([1, 10, 5, 1], [0, 3, 1, 0], [0, 3, 0, 0]),
     "data.shape[0] = 80 is not divisible by the product of block_shape [1, 10, 5, 1] = 50"),
    ("batch_to_space", (32, 4, 1, 3), ([1, 2, 2, 1], [0, 3, 1, 2], [0, 3, 0, 2]),
     "crops_begin[3] + crops_end[3] = 4 exceeds data.shape[3] * block_shape[3] = 3"),
    ("space_to_batch", (2, 128), ([-1, -5], [0, 2], [0, 0]), "block_shape[0] must be >= 1, got -1"),
    ("depth_to_space", (1, 8), ("depth_first", 2), "depth_to_space: data must have rank >= 3, got rank 2"),
    ("depth_to_space", (1, 7, 4, 4), ("depth_first", 2), "data.shape[1] = 7 is not divisible by block_size ** 2 = 4"),
    ("space_to_depth", (1, 8), ("depth_first", 2), "space_to_depth: data must have rank >= 3, got rank 2"),
    ("space_to_depth", (1, 3, 8, 7), ("depth_first", 4), "data.shape[3] = 7 is not divisible by block_size = 4"),
]


@pytest.mark.parametrize("op, data, params, message", TYPE_PROP_ERRORS)
def test_type_prop_errors(op, data, params, message):
    with raises(DataMoveError, message):
        getattr(shapes, op)(data, *params)


# ------------------------------------------------------------------ 2. interval arithmetic (PEERS.md 2.2)

DIVISION = [
    # D / k = [ceil(lo / k), floor(hi / k)]
    ("batch_to_space", (Dim(4, 17), 5), ([1, 2], [0, 3], [0, 0]), (Dim(2, 8), 7)),  # PEERS: [4..17] / 2 -> [2..8]
    ("batch_to_space", (Dim(3, 9), 1), ([1, 2], [0, 0], [0, 0]), (Dim(2, 4), 2)),
    ("batch_to_space", (Dim(5, 8), 1), ([1, 4], [0, 0], [0, 0]), (2, 4)),  # a single multiple: static
    ("batch_to_space", (Dim(0, 3), 1), ([1, 4], [0, 0], [0, 0]), (0, 4)),  # 0 is a multiple of 4
    ("batch_to_space", (Dim(3, 9), 1), ([1, 1], [0, 0], [0, 0]), (Dim(3, 9), 1)),  # k = 1: unchanged
    ("space_to_batch", (1, Dim(3, 9)), ([1, 2], [0, 0], [0, 1]), (2, Dim(2, 5))),
    ("space_to_batch", (1, Dim(1, 2)), ([1, 4], [0, 1], [0, 1]), (4, 1)),  # [3, 4] / 4
    ("space_to_depth", (1, 1, Dim(3, 9)), ("blocks_first", 2), (1, 2, Dim(2, 4))),
    ("space_to_depth", (1, 1, Dim(7, 9)), ("depth_first", 4), (1, 4, 2)),
    ("depth_to_space", (1, Dim(5, 40), 1, 1), ("depth_first", 3), (1, Dim(1, 4), 3, 3)),
]


@pytest.mark.parametrize("op, data, params, expected", DIVISION)
def test_interval_division_is_ceil_lo_floor_hi(op, data, params, expected):
    assert_shape(getattr(shapes, op)(data, *params), expected)


EMPTY_DIVISION = [
    # No multiple of the divisor in the interval: an error naming the dim and the divisor
    # (OpenVINO: "Dimension value: [ 5, 7] must be a multiple of divisor: 4").
    ("batch_to_space", (Dim(5, 7), 5), ([1, 4], [0, 0], [0, 0]),
     "data.shape[0] = 5..7 contains no multiple of the product of block_shape [1, 4] = 4"),
    ("batch_to_space", (Dim(81, 95), 5, 5), ([1, 2, 48], [0, 0, 0], [0, 0, 0]),
     "data.shape[0] = 81..95 contains no multiple of the product of block_shape [1, 2, 48] = 96"),
    ("space_to_batch", (1, Dim(5, 7)), ([1, 4], [0, 0], [0, 0]),
     "data.shape[1] + pads_begin[1] + pads_end[1] = 5..7 contains no multiple of block_shape[1] = 4"),
    ("space_to_batch", (1, 3, Dim(1, 2)), ([1, 1, 4], [0, 0, 1], [0, 0, 0]),
     "data.shape[2] + pads_begin[2] + pads_end[2] = 2..3 contains no multiple of block_shape[2] = 4"),
    ("space_to_depth", (1, 1, Dim(5, 7)), ("blocks_first", 4), "data.shape[2] = 5..7 contains no multiple of block_size = 4"),
    ("space_to_depth", (1, 1, 4, Dim(1, 3)), ("depth_first", 4), "data.shape[3] = 1..3 contains no multiple of block_size = 4"),
    ("depth_to_space", (1, Dim(9, 15), 4, 4), ("blocks_first", 4),
     "data.shape[1] = 9..15 contains no multiple of block_size ** 2 = 16"),
]


@pytest.mark.parametrize("op, data, params, message", EMPTY_DIVISION)
def test_interval_division_without_a_multiple_raises(op, data, params, message):
    with raises(DataMoveError, message):
        getattr(shapes, op)(data, *params)


UNBOUNDED = [
    # An unbounded upper bound stays unbounded. OpenVINO 2026.4.1 (PEERS.md 2.2) gives the
    # finite floor(INT64_MAX / k) instead, e.g. [2..4611686018427387904, 10] for the first.
    ("batch_to_space", (Dim(4, None), 5), ([1, 2], [0, 0], [0, 0]), (Dim(2, None), 10)),
    ("depth_to_space", (1, Dim(4, None), 3), ("blocks_first", 2), (1, Dim(2, None), 6)),
    ("space_to_depth", (1, 3, Dim(3, None), 4), ("blocks_first", 2), (1, 12, Dim(2, None), 2)),
    ("space_to_batch", (2, Dim(3, None)), ([1, 4], [0, 1], [0, 0]), (8, Dim(1, None))),  # OpenVINO agrees
    ("batch_to_space", (Dim(1, None), 5), ([1, 2], [0, 0], [0, 0]), (Dim(1, None), 10)),
    ("batch_to_space", (None, 5), ([1, 2], [0, 0], [0, 0]), (None, 10)),  # [0, inf) / k = ?
    ("depth_to_space", (1, None, Dim(2, None)), ("depth_first", 2), (1, None, Dim(4, None))),
    ("space_to_batch", (None, None), ([1, 3], [0, 1], [0, 1]), (None, Dim(1, None))),  # [2, inf) / 3
    ("batch_to_space", (4, Dim(3, None)), ([1, 4], [0, 5], [0, 0]), (1, Dim(7, None))),  # [12, inf) - 5
]


@pytest.mark.parametrize("op, data, params, expected", UNBOUNDED)
def test_unbounded_upper_bound_stays_unbounded(op, data, params, expected):
    assert_shape(getattr(shapes, op)(data, *params), expected)


SUBTRACTION = [
    # D * B - crops: the lower bound is clipped to 0, never negative.
    # PEERS.md 2.2, verified on OpenVINO: [8, 1..3], block [1, 2], crops 3 + 2 -> [4, 0..1].
    ((8, Dim(1, 3)), ([1, 2], [0, 3], [0, 2]), (4, Dim(0, 1))),
    ((8, Dim(1, 3)), ([1, 2], [0, 6], [0, 0]), (4, 0)),  # the crop equals the largest D * B
    ((8, Dim(1, None)), ([1, 2], [0, 3], [0, 2]), (4, None)),  # [2, inf) - 5 = [0, inf) = ?
    ((8, Dim(3, None)), ([1, 2], [0, 3], [0, 2]), (4, Dim(1, None))),
    ((8, None), ([1, 2], [0, 3], [0, 2]), (4, None)),
    ((2, Dim(2, 5)), (None, [0, 4], [0, 0]), (None, None)),  # block unknown: [2, inf) - 4
    ((2, Dim(2, 5)), (None, [0, 1], [0, 0]), (None, Dim(1, None))),
]


@pytest.mark.parametrize("data, params, expected", SUBTRACTION)
def test_crop_subtraction_clips_the_lower_bound_to_zero(data, params, expected):
    assert_shape(shapes.batch_to_space(data, *params), expected)


CROP_TOO_LARGE = [
    # A crop larger than every possible D * B raises. OpenVINO checks this only when D * B is
    # static, and otherwise silently returns 0 (PEERS.md 2.2: crops 4 + 3 -> [4, 0]).
    ((8, Dim(1, 3)), ([1, 2], [0, 4], [0, 3]),
     "crops_begin[1] + crops_end[1] = 7 exceeds data.shape[1] * block_shape[1] <= 6 (it is 2..6)"),
    ((8, 3), ([1, 2], [0, 4], [0, 3]), "crops_begin[1] + crops_end[1] = 7 exceeds data.shape[1] * block_shape[1] = 6"),
    ((3, Dim(0, 2), 4), ([1, 3, 1], [0, 7, 0], [0, 0, 0]),
     "crops_begin[1] + crops_end[1] = 7 exceeds data.shape[1] * block_shape[1] <= 6 (it is 0..6)"),
    ((1, 4, Dim(2, 3)), ([1, 1, 1], [0, 0, 2], [0, 0, 2]),
     "crops_begin[2] + crops_end[2] = 4 exceeds data.shape[2] * block_shape[2] <= 3 (it is 2..3)"),
    # block unknown: D * B with B >= 1 is 0 only when D is 0
    ((8, 0), (None, [0, 1], [0, 0]), "crops_begin[1] + crops_end[1] = 1 exceeds data.shape[1] * block_shape[1] = 0"),
]


@pytest.mark.parametrize("data, params, message", CROP_TOO_LARGE)
def test_crop_exceeding_every_possible_d_times_b_raises(data, params, message):
    with raises(DataMoveError, message):
        shapes.batch_to_space(data, *params)


def test_crop_that_some_unknown_block_allows_is_accepted():
    # B may be 3 (3 * 3 = 9 >= 7): no error, and the lower bound is clipped to 0.
    assert_shape(shapes.batch_to_space((8, 3), None, [0, 4], [0, 3]), (None, None))
    assert_shape(shapes.batch_to_space((8, Dim(0, 1)), None, [0, 2], [0, 0]), (None, None))
    assert_shape(shapes.batch_to_space((8, 0), None, [0, 0], [0, 0]), (None, 0))


M7 = INT64_MAX // 7  # 7 * M7 == INT64_MAX exactly
assert 7 * M7 == INT64_MAX

MULTIPLY_OVERFLOW = [
    # An upper bound past int64 becomes unbounded (OpenVINO's clip_times saturates too).
    ("batch_to_space", (7, Dim(1, M7)), ([1, 7], [0, 0], [0, 0]), (1, Dim(7, INT64_MAX))),  # fits exactly
    ("batch_to_space", (7, Dim(1, M7 + 1)), ([1, 7], [0, 0], [0, 0]), (1, Dim(7, None))),
    ("batch_to_space", (4, Dim(2, 2**62)), ([1, 4], [0, 1], [0, 0]), (1, Dim(7, None))),
    ("space_to_batch", (Dim(2, 2**62), 4), ([1, 4], [0, 0], [0, 0]), (Dim(8, None), 1)),
    ("depth_to_space", (1, 4, Dim(1, 2**62)), ("blocks_first", 4), (1, 1, Dim(4, None))),
    ("space_to_depth", (1, Dim(1, 2**62), 4, 4), ("blocks_first", 2), (1, Dim(4, None), 2, 2)),
    # the same for an addition
    ("space_to_batch", (1, Dim(0, INT64_MAX)), ([1, 1], [0, 0], [0, 1]), (1, Dim(1, None))),
    ("space_to_batch", (1, Dim(0, INT64_MAX - 1)), ([1, 1], [0, 0], [0, 1]), (1, Dim(1, INT64_MAX))),
]


@pytest.mark.parametrize("op, data, params, expected", MULTIPLY_OVERFLOW)
def test_upper_bound_overflow_becomes_unbounded(op, data, params, expected):
    assert_shape(getattr(shapes, op)(data, *params), expected)


LOWER_OVERFLOW = [
    # A static dim or a lower bound past int64 raises (OpenVINO: a silent "?", README).
    ("space_to_batch", (2**62, 4), ([1, 4], [0, 0], [0, 0]),
     "data.shape[0] * prod(block_shape) = 18446744073709551616 does not fit in int64"),
    ("space_to_batch", (Dim(2**62, None), 4), ([1, 4], [0, 0], [0, 0]),
     "data.shape[0] * prod(block_shape) = 18446744073709551616 does not fit in int64"),
    ("batch_to_space", (4, 2**62), ([1, 4], [0, 0], [0, 0]),
     "data.shape[1] * block_shape[1] = 18446744073709551616 does not fit in int64"),
    ("batch_to_space", (7, Dim(M7 + 1, None)), ([1, 7], [0, 0], [0, 0]),
     f"data.shape[1] * block_shape[1] = {7 * (M7 + 1)} does not fit in int64"),
    ("space_to_batch", (1, INT64_MAX), ([1, 1], [0, 0], [0, 1]),
     "data.shape[1] + pads_begin[1] + pads_end[1] = 9223372036854775808 does not fit in int64"),
    ("space_to_batch", (1, 1), ([1, 1], [0, INT64_MAX], [0, INT64_MAX]),
     f"data.shape[1] + pads_begin[1] + pads_end[1] = {2 * INT64_MAX + 1} does not fit in int64"),
    ("depth_to_space", (1, 2, 2**62), ("blocks_first", 2),
     "data.shape[2] * block_size = 9223372036854775808 does not fit in int64"),
    ("depth_to_space", (1, 0, 3), ("blocks_first", 2**62),
     "data.shape[2] * block_size = 13835058055282163712 does not fit in int64"),
    ("space_to_depth", (1, 2**62, 2, 2), ("blocks_first", 2),
     "data.shape[1] * block_size ** 2 = 18446744073709551616 does not fit in int64"),
]


@pytest.mark.parametrize("op, data, params, message", LOWER_OVERFLOW)
def test_lower_bound_overflow_raises(op, data, params, message):
    with raises(DataMoveError, message):
        getattr(shapes, op)(data, *params)


def test_results_exactly_at_int64_max_fit():
    assert_shape(shapes.batch_to_space((7, M7), [1, 7], [0, 0], [0, 0]), (1, INT64_MAX))
    assert_shape(shapes.space_to_batch((M7, 7), [1, 7], [0, 0], [0, 0]), (INT64_MAX, 1))
    assert_shape(shapes.space_to_batch((1, INT64_MAX - 1), [1, 1], [0, 0], [0, 1]), (1, INT64_MAX))


@pytest.mark.parametrize("op", ["depth_to_space", "space_to_depth"])
def test_block_size_power_past_int64_raises_like_the_block_product(op):
    # block_size = 2**32 with K = 2 spatial dims: block_size ** 2 = 2**64 does not fit in int64.
    with pytest.raises(DataMoveError, match="does not fit in int64"):
        getattr(shapes, op)((1, 0, 0, 0), "blocks_first", 2**32)


def test_normalisation_of_inputs_and_results():
    # Dim(k, k) is a static k; Dim(0, None) is None; results come back normalised.
    assert_shape(shapes.batch_to_space((Dim(8, 8), Dim(0, None)), [1, 2], [0, 0], [0, 0]), (4, None))
    assert_shape(shapes.depth_to_space((Dim(0, None), Dim(4, 4), Dim(3, 3)), None, 2), (None, 2, 6))
    # numpy integers as dims and parameters
    assert_shape(
        shapes.space_to_batch((np.int64(2), np.uint8(3)), np.array([1, 2], np.int32), np.array([0, 1], np.uint8),
                              (np.int16(0), np.int64(0))),
        (4, 2),
    )
    assert_shape(shapes.space_to_depth([1, 1, 4], "blocks_first", np.int8(2)), (1, 2, 2))


# ------------------------------------------------------------------ 3. unknown parameters and unknown rank

UNKNOWN_PARAMETERS = [
    # PEERS.md 2.1, "Non-constant inputs"
    # BatchToSpace: block unknown -> out[0] = ?; crops known -> out[i] = D_i * [1, inf) - crop
    ("batch_to_space", (6, Dim(2, 5), None, 0), (None, [0, 1, 0, 0], [0, 0, 0, 0]), (None, Dim(1, None), None, 0)),
    ("batch_to_space", (6, 3, 4), (None, [0, 0, 1], [0, 0, 2]), (None, Dim(3, None), Dim(1, None))),
    # crops unknown (either) -> out[1:] = ?; out[0] still divided
    ("batch_to_space", (6, 3, 4), ([1, 3, 1], None, [0, 0, 0]), (2, None, None)),
    ("batch_to_space", (6, 3, 4), ([1, 3, 1], [0, 0, 0], None), (2, None, None)),
    ("batch_to_space", (Dim(6, 13), 3, 4), ([1, 3, 2], None, None), (Dim(1, 2), None, None)),
    ("batch_to_space", (6, 3, 4), (None, None, None), (None, None, None)),
    ("batch_to_space", (6, 3, 4), (None, [0, 0, 0], None), (None, None, None)),
    # SpaceToBatch: block unknown -> everything ?; pads unknown -> out[0] = D0 * prod(B), out[1:] = ?
    ("space_to_batch", (6, 3, 4), (None, [0, 0, 0], [0, 1, 0]), (None, None, None)),
    ("space_to_batch", (6, 3, 4), ([1, 3, 2], None, [0, 0, 0]), (36, None, None)),
    ("space_to_batch", (Dim(1, 2), 3, 4), ([1, 3, 2], [0, 0, 0], None), (Dim(6, 12), None, None)),
    ("space_to_batch", (6, 3, 4), ([1, 3, 2], None, None), (36, None, None)),
    ("space_to_batch", (6, 3, 4), (None, None, None), (None, None, None)),
    # DepthToSpace / SpaceToDepth: block_size unknown (datamove's extension; README) ->
    # batch kept, everything else ?; an unknown mode changes nothing (it does not affect shapes).
    ("depth_to_space", (Dim(2, 3), 8, 4, 4), ("blocks_first", None), (Dim(2, 3), None, None, None)),
    ("space_to_depth", (5, 8, 4, 4), ("depth_first", None), (5, None, None, None)),
    ("depth_to_space", (5, 8, 4, 4), (None, 2), (5, 2, 8, 8)),
    ("space_to_depth", (5, 8, 4, 4), (None, 2), (5, 32, 2, 2)),
    ("space_to_depth", (5, 8, 4, 4), (None, None), (5, None, None, None)),
]


@pytest.mark.parametrize("op, data, params, expected", UNKNOWN_PARAMETERS)
def test_unknown_parameters(op, data, params, expected):
    assert_shape(getattr(shapes, op)(data, *params), expected)


UNKNOWN_PARAMETERS_STILL_VALIDATE = [
    # What the known parameters and data can still decide is checked.
    ("batch_to_space", (7, 3), ([1, 2], None, None), DataMoveError,
     "data.shape[0] = 7 is not divisible by the product of block_shape [1, 2] = 2"),
    ("batch_to_space", (8, 3), (None, [0, -1], [0, 0]), DataMoveError, "crops_begin[1] must be >= 0, got -1"),
    ("batch_to_space", (8, 3), (None, [1, 0], None), DataMoveError, "crops_begin[0] must be 0, got 1"),
    ("batch_to_space", (8, 3), (None, [0, 0, 0], None), DataMoveError,
     "crops_begin must have one entry per data axis: len(crops_begin) = 3, data rank = 2"),
    ("batch_to_space", (8, 3), ([2, 1], None, None), DataMoveError, "block_shape[0] must be 1, got 2"),
    ("space_to_batch", (8, 3), ([2, 1], None, None), DataMoveError, "block_shape[0] must be 1, got 2"),
    ("space_to_batch", (8, 3), (None, [0, 0], [0, -2]), DataMoveError, "pads_end[1] must be >= 0, got -2"),
    ("space_to_batch", (8, 3), (None, [0, 0], [1, 0]), DataMoveError, "pads_end[0] must be 0, got 1"),
    ("space_to_batch", (2**62, 3), ([1, 4], None, None), DataMoveError,
     "data.shape[0] * prod(block_shape) = 18446744073709551616 does not fit in int64"),
    ("space_to_batch", (8, 3), ([1, True], None, None), TypeError, "block_shape[1] must be an integer, got bool True"),
    ("depth_to_space", (8, 3), ("blocks_first", None), DataMoveError, "depth_to_space: data must have rank >= 3, got rank 2"),
    ("space_to_depth", (8, 3, 3), ("DCR", None), DataMoveError, "got 'DCR' (ONNX's DCR is 'blocks_first')"),
    ("depth_to_space", (8, 3, 3), (None, 0), DataMoveError, "block_size must be >= 1, got 0"),
]


@pytest.mark.parametrize("op, data, params, error, message", UNKNOWN_PARAMETERS_STILL_VALIDATE)
def test_unknown_parameters_still_validate_the_rest(op, data, params, error, message):
    with raises(error, message):
        getattr(shapes, op)(data, *params)


UNKNOWN_RANK_VALID = [
    ("batch_to_space", ([1, 2, 2], [0, 1, 0], [0, 0, 3])),
    ("batch_to_space", (None, [0, 1, 0], None)),
    ("batch_to_space", (None, None, None)),
    ("space_to_batch", ([1, 2, 2], [0, 1, 0], [0, 0, 3])),
    ("space_to_batch", ([1, 2], None, [0, 0])),
    ("space_to_batch", (None, None, None)),
    ("depth_to_space", ("blocks_first", 2)),
    ("depth_to_space", (None, None)),
    ("space_to_depth", ("depth_first", 3)),
    ("space_to_depth", (None, None)),
]


@pytest.mark.parametrize("op, params", UNKNOWN_RANK_VALID)
def test_unknown_rank_gives_unknown_rank(op, params):
    # PEERS.md 2.1: a dynamic data rank gives a dynamic result, even when block_shape's
    # length would fix the rank.
    assert getattr(shapes, op)(None, *params) is None


UNKNOWN_RANK_INVALID = [
    ("batch_to_space", ([1, 2], [0, -1], [0, 0]), DataMoveError, "crops_begin[1] must be >= 0, got -1 (crops_begin = [0, -1])"),
    ("batch_to_space", ([1, 2], [0, 0], [0, -3]), DataMoveError, "crops_end[1] must be >= 0, got -3"),
    ("batch_to_space", ([1, 2], [0, 0], [0]), DataMoveError,
     "block_shape, crops_begin, crops_end must have the same length, "
     "got len(block_shape) = 2, len(crops_begin) = 2, len(crops_end) = 1"),
    ("batch_to_space", (None, [0, 0, 0], [0]), DataMoveError,
     "crops_begin, crops_end must have the same length, got len(crops_begin) = 3, len(crops_end) = 1"),
    ("batch_to_space", ([1, 0], [0, 0], [0, 0]), DataMoveError, "block_shape[1] must be >= 1, got 0"),
    ("batch_to_space", ([3, 1], None, None), DataMoveError, "block_shape[0] must be 1, got 3"),
    ("batch_to_space", ([1, 1], [2, 0], [0, 0]), DataMoveError, "crops_begin[0] must be 0, got 2"),
    ("batch_to_space", ([1, 2.0], None, None), TypeError, "block_shape[1] must be an integer, got float 2.0"),
    ("batch_to_space", (np.array([[1, 2]]), None, None), DataMoveError, "block_shape must be 1-D"),
    ("batch_to_space", ([1, 2**32, 2**32], None, None), DataMoveError,
     "the product of block_shape = 18446744073709551616 does not fit in int64"),
    ("space_to_batch", ([1, 2], [0, 0, 0], None), DataMoveError,
     "block_shape, pads_begin must have the same length, got len(block_shape) = 2, len(pads_begin) = 3"),
    ("space_to_batch", ([1, 2], [0, -1], [0, 0]), DataMoveError, "pads_begin[1] must be >= 0, got -1"),
    ("space_to_batch", ([1, 2], [0, 0], [4, 0]), DataMoveError, "pads_end[0] must be 0, got 4"),
    ("space_to_batch", ([1, -1], None, None), DataMoveError, "block_shape[1] must be >= 1, got -1"),
    ("space_to_batch", (None, [0, False], None), TypeError, "pads_begin[1] must be an integer, got bool False"),
    ("depth_to_space", ("DCR", 2), DataMoveError, "got 'DCR' (ONNX's DCR is 'blocks_first')"),
    ("depth_to_space", ("blocks_first", 0), DataMoveError, "block_size must be >= 1, got 0"),
    ("space_to_depth", ("blocks_first", True), TypeError, "block_size must be an integer, got bool True"),
    ("space_to_depth", (1, 2), TypeError, "mode must be a string"),
    ("space_to_depth", ("depth_first", 2**63), DataMoveError, "block_size = 9223372036854775808 does not fit in int64"),
]


@pytest.mark.parametrize("op, params, error, message", UNKNOWN_RANK_INVALID)
def test_unknown_rank_still_validates_the_parameters(op, params, error, message):
    with raises(error, message):
        getattr(shapes, op)(None, *params)


@pytest.mark.parametrize("op", ["batch_to_space", "space_to_batch"])
@pytest.mark.parametrize("params", [([1], [0], [0]), ([], [], [])], ids=["length-1", "length-0"])
def test_unknown_rank_with_parameters_too_short_for_rank_2(op, params):
    with pytest.raises(DataMoveError, match="rank"):
        getattr(shapes, op)(None, *params)


# ------------------------------------------------------------------ 4. validation rules

X2 = (4, 3)
X4 = (2, 8, 4, 6)
INT64_OVER = 2**63

B2S_RULES = [
    # (data, block_shape, crops_begin, crops_end, error, message)
    # rank
    ((4,), [1], [0], [0], DataMoveError, "batch_to_space: data must have rank >= 2, got rank 1 (data.shape = [4])"),
    ((), [], [], [], DataMoveError, "batch_to_space: data must have rank >= 2, got rank 0 (data.shape = [])"),
    ((Dim(2, 8),), [1], [0], [0], DataMoveError, "got rank 1 (data.shape = [2..8])"),
    ((None,), [1], [0], [0], DataMoveError, "got rank 1 (data.shape = [?])"),
    # lengths
    (X2, [1, 2, 1], [0, 0], [0, 0], DataMoveError,
     "block_shape must have one entry per data axis: len(block_shape) = 3, data rank = 2"),
    (X2, [1, 2], [0], [0, 0], DataMoveError, "crops_begin must have one entry per data axis: len(crops_begin) = 1, data rank = 2"),
    (X2, [1, 2], [0, 0], [0, 0, 0], DataMoveError, "crops_end must have one entry per data axis: len(crops_end) = 3, data rank = 2"),
    # types
    (X2, [1, True], [0, 0], [0, 0], TypeError, "block_shape[1] must be an integer, got bool True"),
    (X2, [1, np.True_], [0, 0], [0, 0], TypeError, "block_shape[1] must be an integer, got bool"),
    (X2, [1, 2.0], [0, 0], [0, 0], TypeError, "block_shape[1] must be an integer, got float 2.0"),
    (X2, [1, 2], [0, 1.0], [0, 0], TypeError, "crops_begin[1] must be an integer, got float 1.0"),
    (X2, [1, 2], [0, 0], [False, 0], TypeError, "crops_end[0] must be an integer, got bool False"),
    (X2, [1, np.float64(2)], [0, 0], [0, 0], TypeError, "block_shape[1] must be an integer, got float64"),
    (X2, np.array([1.0, 2.0]), [0, 0], [0, 0], TypeError, "block_shape must have an integer dtype, got float64"),
    (X2, [1, 2], np.array([0.0, 0.0], np.float32), [0, 0], TypeError, "crops_begin must have an integer dtype, got float32"),
    (X2, [1, 2], [0, 0], np.array([False, False]), TypeError, "crops_end must have an integer dtype, got bool"),
    (X2, "12", [0, 0], [0, 0], TypeError, "block_shape must be a sequence of integers, got str '12'"),
    (X2, 2, [0, 0], [0, 0], TypeError, "block_shape must be a sequence of integers, got int 2"),
    (X2, [1, "2"], [0, 0], [0, 0], TypeError, "block_shape[1] must be an integer, got str '2'"),
    # 1-D only
    (X2, np.array([[1, 2]]), [0, 0], [0, 0], DataMoveError, "block_shape must be 1-D, got an array of shape (1, 2)"),
    (X2, [1, 2], np.zeros((2, 1), np.int64), [0, 0], DataMoveError, "crops_begin must be 1-D, got an array of shape (2, 1)"),
    (X2, np.array(2), [0, 0], [0, 0], DataMoveError, "block_shape must be 1-D, got an array of shape ()"),
    (X2, [[1, 2]], [0, 0], [0, 0], DataMoveError, "block_shape must be 1-D, got a nested sequence at block_shape[0] = [1, 2]"),
    (X2, [1, 2], [0, 0], [0, (0,)], DataMoveError, "crops_end must be 1-D, got a nested sequence at crops_end[1] = (0,)"),
    # values
    (X2, [1, 0], [0, 0], [0, 0], DataMoveError, "block_shape[1] must be >= 1, got 0 (block_shape = [1, 0])"),
    (X2, [1, -2], [0, 0], [0, 0], DataMoveError, "block_shape[1] must be >= 1, got -2 (block_shape = [1, -2])"),
    (X2, [0, 1], [0, 0], [0, 0], DataMoveError, "block_shape[0] must be >= 1, got 0"),
    (X2, [2, 1], [0, 0], [0, 0], DataMoveError,
     "block_shape[0] must be 1, got 2: index 0 is the batch axis, which the spec says has no block"),
    (X2, [1, 2], [0, -1], [0, 0], DataMoveError, "crops_begin[1] must be >= 0, got -1 (crops_begin = [0, -1])"),
    (X2, [1, 2], [0, 0], [0, -3], DataMoveError, "crops_end[1] must be >= 0, got -3 (crops_end = [0, -3])"),
    (X2, [1, 2], [-1, 0], [0, 0], DataMoveError, "crops_begin[0] must be >= 0, got -1"),
    (X2, [1, 2], [1, 0], [0, 0], DataMoveError,
     "crops_begin[0] must be 0, got 1: index 0 is the batch axis, which the spec says is never cropped"),
    (X2, [1, 2], [0, 0], [2, 0], DataMoveError, "crops_end[0] must be 0, got 2: index 0 is the batch axis"),
    # divisibility of the batch
    (X2, [1, 3], [0, 0], [0, 0], DataMoveError, "data.shape[0] = 4 is not divisible by the product of block_shape [1, 3] = 3"),
    ((6, 1, 1), [1, 2, 2], [0, 0, 0], [0, 0, 0], DataMoveError,
     "data.shape[0] = 6 is not divisible by the product of block_shape [1, 2, 2] = 4"),
    ((Dim(5, 7), 1), [1, 4], [0, 0], [0, 0], DataMoveError,
     "data.shape[0] = 5..7 contains no multiple of the product of block_shape [1, 4] = 4"),
    # crops_begin[i] + crops_end[i] <= D_i * B_i
    (X2, [1, 2], [0, 4], [0, 3], DataMoveError, "crops_begin[1] + crops_end[1] = 7 exceeds data.shape[1] * block_shape[1] = 6"),
    ((4, 1, 3), [1, 1, 2], [0, 0, 7], [0, 0, 0], DataMoveError,
     "crops_begin[2] + crops_end[2] = 7 exceeds data.shape[2] * block_shape[2] = 6"),
    ((4, Dim(1, 3)), [1, 2], [0, 4], [0, 3], DataMoveError,
     "crops_begin[1] + crops_end[1] = 7 exceeds data.shape[1] * block_shape[1] <= 6 (it is 2..6)"),
    # int64
    (X2, [1, INT64_OVER], [0, 0], [0, 0], DataMoveError, "block_shape[1] = 9223372036854775808 does not fit in int64"),
    (X2, [1, 2], [0, -INT64_OVER - 1], [0, 0], DataMoveError, "crops_begin[1] = -9223372036854775809 does not fit in int64"),
    (X2, np.array([1, INT64_OVER], np.uint64), [0, 0], [0, 0], DataMoveError,
     "block_shape[1] = 9223372036854775808 does not fit in int64"),
    ((0, 1, 1, 1), [1, 2**31, 2**31, 2], [0] * 4, [0] * 4, DataMoveError,
     "the product of block_shape = 9223372036854775808 does not fit in int64"),
    ((4, INT64_OVER), [1, 1], [0, 0], [0, 0], DataMoveError, "data.shape[1] = 9223372036854775808 does not fit in int64"),
    ((INT64_OVER, 1), [1, 1], [0, 0], [0, 0], DataMoveError, "data.shape[0] = 9223372036854775808 does not fit in int64"),
    # the data shape
    ((4, -1), [1, 1], [0, 0], [0, 0], DataMoveError,
     "data.shape[1] must be >= 0, got -1 (write None for an unknown dim, Dim(lo, hi) for an interval)"),
    ((-4, 1), [1, 1], [0, 0], [0, 0], DataMoveError, "data.shape[0] must be >= 0, got -4 (write None for an unknown dim"),
    ((4, 2.0), [1, 1], [0, 0], [0, 0], TypeError, "data.shape[1] must be an integer, got float 2.0"),
    ((True, 2), [1, 1], [0, 0], [0, 0], TypeError, "data.shape[0] must be an integer, got bool True"),
    ((4, "3"), [1, 1], [0, 0], [0, 0], TypeError, "data.shape[1] must be an integer, got str '3'"),
    ("ab", [1, 1], [0, 0], [0, 0], TypeError, "data shape must be a sequence of dims or None, got str 'ab'"),
    (4, [1, 1], [0, 0], [0, 0], TypeError, "data shape must be a sequence of dims or None, got int 4"),
    (Dim(2, 3), [1, 1], [0, 0], [0, 0], TypeError, "data shape must be a sequence of dims or None, got Dim Dim(2, 3)"),
    (4.5, [1, 1], [0, 0], [0, 0], TypeError, "data shape must be a sequence of dims or None, got float 4.5"),
]


@pytest.mark.parametrize("data, block, begin, end, error, message", B2S_RULES)
def test_batch_to_space_rules(data, block, begin, end, error, message):
    with raises(error, message):
        shapes.batch_to_space(data, block, begin, end)


S2B_RULES = [
    ((3,), [1], [0], [0], DataMoveError, "space_to_batch: data must have rank >= 2, got rank 1 (data.shape = [3])"),
    ((), [], [], [], DataMoveError, "space_to_batch: data must have rank >= 2, got rank 0"),
    (X2, [1], [0, 0], [0, 0], DataMoveError, "block_shape must have one entry per data axis: len(block_shape) = 1, data rank = 2"),
    (X2, [1, 2], [0, 0, 0], [0, 0], DataMoveError, "pads_begin must have one entry per data axis: len(pads_begin) = 3, data rank = 2"),
    (X2, [1, 2], [0, 0], [0], DataMoveError, "pads_end must have one entry per data axis: len(pads_end) = 1, data rank = 2"),
    (X2, [1, False], [0, 0], [0, 0], TypeError, "block_shape[1] must be an integer, got bool False"),
    (X2, [1, 2], [0, 1.5], [0, 0], TypeError, "pads_begin[1] must be an integer, got float 1.5"),
    (X2, [1, 2], [0, 0], np.array([0.0, 1.0]), TypeError, "pads_end must have an integer dtype, got float64"),
    (X2, [1, 2], np.array([True, False]), [0, 0], TypeError, "pads_begin must have an integer dtype, got bool"),
    (X2, [1, 2], [0, 0], np.array([[0, 1]]), DataMoveError, "pads_end must be 1-D, got an array of shape (1, 2)"),
    (X2, [1, 0], [0, 0], [0, 0], DataMoveError, "block_shape[1] must be >= 1, got 0 (block_shape = [1, 0])"),
    (X2, [-1, -5], [0, 0], [0, 0], DataMoveError, "block_shape[0] must be >= 1, got -1 (block_shape = [-1, -5])"),
    (X2, [3, 1], [0, 0], [0, 0], DataMoveError,
     "block_shape[0] must be 1, got 3: index 0 is the batch axis, which the spec says has no block"),
    # negative pads: OpenVINO's shape inference accepts them (PEERS.md 2.5); the spec forbids them
    (X2, [1, 2], [0, -1], [0, 1], DataMoveError, "pads_begin[1] must be >= 0, got -1 (pads_begin = [0, -1])"),
    (X2, [1, 2], [0, 1], [0, -1], DataMoveError, "pads_end[1] must be >= 0, got -1 (pads_end = [0, -1])"),
    (X2, [1, 1], [1, 0], [0, 0], DataMoveError,
     "pads_begin[0] must be 0, got 1: index 0 is the batch axis, which the spec says is never padded"),
    (X2, [1, 1], [0, 0], [2, 0], DataMoveError, "pads_end[0] must be 0, got 2: index 0 is the batch axis"),
    # (D_i + pads) divisible by B_i
    (X2, [1, 2], [0, 0], [0, 0], DataMoveError,
     "data.shape[1] + pads_begin[1] + pads_end[1] = 3 is not divisible by block_shape[1] = 2"),
    ((1, 5, 3), [1, 1, 4], [0, 0, 1], [0, 0, 1], DataMoveError,
     "data.shape[2] + pads_begin[2] + pads_end[2] = 5 is not divisible by block_shape[2] = 4"),
    ((1, Dim(3, 5)), [1, 4], [0, 1], [0, 1], DataMoveError,
     "data.shape[1] + pads_begin[1] + pads_end[1] = 5..7 contains no multiple of block_shape[1] = 4"),
    # int64
    (X2, [1, 1], [0, 0], [0, INT64_OVER], DataMoveError, "pads_end[1] = 9223372036854775808 does not fit in int64"),
    ((0, 1, 1, 1), [1, 2**31, 2**31, 2], [0] * 4, [0] * 4, DataMoveError,
     "the product of block_shape = 9223372036854775808 does not fit in int64"),
    ((2**61, 1), [1, 4], [0, 0], [0, 3], DataMoveError,
     "data.shape[0] * prod(block_shape) = 9223372036854775808 does not fit in int64"),
    ((1, INT64_OVER), [1, 1], [0, 0], [0, 0], DataMoveError, "data.shape[1] = 9223372036854775808 does not fit in int64"),
    # the data shape
    ((2, -3), [1, 1], [0, 0], [0, 0], DataMoveError, "data.shape[1] must be >= 0, got -3 (write None for an unknown dim"),
    ((2, np.float32(3)), [1, 1], [0, 0], [0, 0], TypeError, "data.shape[1] must be an integer, got float32"),
]


@pytest.mark.parametrize("data, block, begin, end, error, message", S2B_RULES)
def test_space_to_batch_rules(data, block, begin, end, error, message):
    with raises(error, message):
        shapes.space_to_batch(data, block, begin, end)


DEPTH_RULES = [
    # (op, data, mode, block_size, error, message)
    ("space_to_depth", (2, 4), "blocks_first", 2, DataMoveError,
     "space_to_depth: data must have rank >= 3, got rank 2 (data.shape = [2, 4])"),
    ("depth_to_space", (2, 4), "blocks_first", 2, DataMoveError,
     "depth_to_space: data must have rank >= 3, got rank 2 (data.shape = [2, 4])"),
    ("depth_to_space", (), "blocks_first", 2, DataMoveError, "depth_to_space: data must have rank >= 3, got rank 0"),
    # block_size
    ("space_to_depth", X4, "blocks_first", 0, DataMoveError, "block_size must be >= 1, got 0"),
    ("depth_to_space", X4, "depth_first", -2, DataMoveError, "block_size must be >= 1, got -2"),
    ("space_to_depth", X4, "blocks_first", 2.0, TypeError, "block_size must be an integer, got float 2.0"),
    ("depth_to_space", X4, "blocks_first", True, TypeError, "block_size must be an integer, got bool True"),
    ("depth_to_space", X4, "blocks_first", np.True_, TypeError, "block_size must be an integer, got bool"),
    ("space_to_depth", X4, "blocks_first", np.float32(2), TypeError, "block_size must be an integer, got float32"),
    ("space_to_depth", X4, "blocks_first", "2", TypeError, "block_size must be an integer, got str '2'"),
    ("space_to_depth", X4, "blocks_first", [2], TypeError, "block_size must be an integer, got list [2]"),
    ("space_to_depth", X4, "blocks_first", INT64_OVER, DataMoveError, "block_size = 9223372036854775808 does not fit in int64"),
    # channels divisible by block_size ** K (DepthToSpace)
    ("depth_to_space", X4, "blocks_first", 4, DataMoveError, "data.shape[1] = 8 is not divisible by block_size ** 2 = 16"),
    ("depth_to_space", (1, 6, 5), "depth_first", 4, DataMoveError, "data.shape[1] = 6 is not divisible by block_size ** 1 = 4"),
    ("depth_to_space", (1, 8, 1, 1, 1, 1), "depth_first", 2, DataMoveError,
     "data.shape[1] = 8 is not divisible by block_size ** 4 = 16"),
    ("depth_to_space", (1, Dim(9, 15), 4, 4), "blocks_first", 4, DataMoveError,
     "data.shape[1] = 9..15 contains no multiple of block_size ** 2 = 16"),
    # spatial dims divisible by block_size (SpaceToDepth)
    ("space_to_depth", X4, "blocks_first", 4, DataMoveError, "data.shape[3] = 6 is not divisible by block_size = 4"),
    ("space_to_depth", X4, "depth_first", 3, DataMoveError, "data.shape[2] = 4 is not divisible by block_size = 3"),
    ("space_to_depth", (1, 3, 8, 7), "depth_first", 4, DataMoveError, "data.shape[3] = 7 is not divisible by block_size = 4"),
    ("space_to_depth", (1, 1, Dim(5, 7)), "blocks_first", 4, DataMoveError,
     "data.shape[2] = 5..7 contains no multiple of block_size = 4"),
    # mode
    ("space_to_depth", X4, "DCR", 2, DataMoveError,
     "mode must be 'blocks_first' or 'depth_first', got 'DCR' (ONNX's DCR is 'blocks_first')"),
    ("depth_to_space", X4, "crd", 2, DataMoveError, "got 'crd' (ONNX's CRD is 'depth_first')"),
    ("depth_to_space", X4, "Blocks_First", 2, DataMoveError, "got 'Blocks_First' (did you mean 'blocks_first'?)"),
    ("space_to_depth", X4, "DEPTH_FIRST", 2, DataMoveError, "(did you mean 'depth_first'?)"),
    ("space_to_depth", X4, "xyz", 2, DataMoveError, "mode must be 'blocks_first' or 'depth_first', got 'xyz'"),
    ("space_to_depth", X4, "", 2, DataMoveError, "mode must be 'blocks_first' or 'depth_first', got ''"),
    ("space_to_depth", X4, 0, 2, TypeError, "mode must be a string, 'blocks_first' or 'depth_first', got int 0"),
    ("depth_to_space", X4, b"blocks_first", 2, TypeError, "mode must be a string, 'blocks_first' or 'depth_first', got bytes"),
    ("depth_to_space", X4, ["blocks_first"], 2, TypeError, "mode must be a string"),
    # int64
    ("depth_to_space", (1, 0, 3), "blocks_first", 2**62, DataMoveError,
     "data.shape[2] * block_size = 13835058055282163712 does not fit in int64"),
    ("space_to_depth", (1, 2**62, 2, 2), "depth_first", 2, DataMoveError,
     "data.shape[1] * block_size ** 2 = 18446744073709551616 does not fit in int64"),
    ("space_to_depth", (1, INT64_OVER, 2, 2), "depth_first", 2, DataMoveError,
     "data.shape[1] = 9223372036854775808 does not fit in int64"),
    # the data shape
    ("space_to_depth", (1, 4, -2, 2), "blocks_first", 2, DataMoveError,
     "data.shape[2] must be >= 0, got -2 (write None for an unknown dim, Dim(lo, hi) for an interval)"),
    ("depth_to_space", (1, 4, 2, 2.5), "blocks_first", 2, TypeError, "data.shape[3] must be an integer, got float 2.5"),
    ("depth_to_space", "abc", "blocks_first", 2, TypeError, "data shape must be a sequence of dims or None, got str 'abc'"),
]


@pytest.mark.parametrize("op, data, mode, size, error, message", DEPTH_RULES)
def test_depth_rules(op, data, mode, size, error, message):
    with raises(error, message):
        getattr(shapes, op)(data, mode, size)


def test_rules_are_the_operations_rules():
    # The operations validate through the same functions: one message for both.
    with raises(DataMoveError, "data.shape[0] = 4 is not divisible by the product of block_shape [1, 3] = 3"):
        dm.batch_to_space(np.zeros((4, 3)), [1, 3], [0, 0], [0, 0])
    with raises(DataMoveError, "pads_begin[0] must be 0, got 1"):
        dm.space_to_batch(np.zeros((4, 3)), [1, 1], [1, 0], [0, 0])


# ------------------------------------------------------------------ 5. properties

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(space_batch_case())
def test_space_to_batch_and_back_match_the_operations(case):
    shape, block, begin, end = case
    out = shapes.space_to_batch(shape, block, begin, end)
    y = dm.space_to_batch(np.zeros(shape, np.uint8), block, begin, end)
    assert_shape(out, y.shape)
    back = shapes.batch_to_space(out, block, begin, end)
    assert_shape(back, shape)
    assert_shape(back, dm.batch_to_space(y, block, begin, end).shape)


@PROPERTY_SETTINGS
@given(depth_case())
def test_space_to_depth_and_back_match_the_operations(case):
    shape, mode, size = case
    out = shapes.space_to_depth(shape, mode, size)
    y = dm.space_to_depth(np.zeros(shape, np.uint8), mode, size)
    assert_shape(out, y.shape)
    back = shapes.depth_to_space(out, mode, size)
    assert_shape(back, shape)
    assert_shape(back, dm.depth_to_space(y, mode, size).shape)


@st.composite
def widened(draw, shape):
    """An interval shape containing ``shape``: each dim kept, widened, made unbounded or unknown."""
    dims = []
    for d in shape:
        kind = draw(st.sampled_from(["static", "interval", "unbounded", "unknown"]))
        if kind == "static":
            dims.append(d)
        elif kind == "interval":
            dims.append(Dim(d - draw(st.integers(0, d)), d + draw(st.integers(0, 9))))
        elif kind == "unbounded":
            dims.append(Dim(d - draw(st.integers(0, d)), None))
        else:
            dims.append(None)
    return tuple(dims)


def sample(draw, interval_shape):
    """A static shape inside ``interval_shape`` (unbounded dims: up to 24 past the lower bound)."""
    out = []
    for d in interval_shape:
        lo, hi = (0, None) if d is None else (d.lo, d.hi) if isinstance(d, Dim) else (d, d)
        out.append(draw(st.integers(lo, lo + 24 if hi is None else hi)))
    return tuple(out)


def check_contains(op, interval_shape, params, samples):
    """Sound intervals: interval error => every sample errs; else every valid sample's result is inside."""
    try:
        result = op(interval_shape, *params)
    except DataMoveError:
        for s in samples:
            with pytest.raises(DataMoveError):
                op(s, *params)
        return
    assert result is not None and len(result) == len(interval_shape)
    for s in samples:
        try:
            static = op(s, *params)
        except DataMoveError:
            continue
        assert all(type(v) is int for v in static), static
        for i, (r, v) in enumerate(zip(result, static)):
            assert contains(r, v), f"dim {i}: {v} (from {s}) not in {r!r} (from {interval_shape}), params {params}"


@PROPERTY_SETTINGS
@given(space_batch_case(max_block=4), st.data())
def test_intervals_contain_every_static_result_space_batch(case, data):
    shape, block, begin, end = case
    op = data.draw(st.sampled_from(["space_to_batch", "batch_to_space"]))
    if op == "batch_to_space":  # a valid B2S input: the S2B output
        shape = shapes.space_to_batch(shape, block, begin, end)
    interval_shape = data.draw(widened(shape))
    samples = [shape] + [sample(data.draw, interval_shape) for _ in range(8)]
    assert getattr(shapes, op)(shape, block, begin, end) is not None  # the first sample is valid
    check_contains(getattr(shapes, op), interval_shape, (block, begin, end), samples)


@PROPERTY_SETTINGS
@given(depth_case(max_block=4), st.data())
def test_intervals_contain_every_static_result_depth(case, data):
    shape, mode, size = case
    op = data.draw(st.sampled_from(["space_to_depth", "depth_to_space"]))
    if op == "depth_to_space":
        shape = shapes.space_to_depth(shape, mode, size)
    interval_shape = data.draw(widened(shape))
    samples = [shape] + [sample(data.draw, interval_shape) for _ in range(8)]
    check_contains(getattr(shapes, op), interval_shape, (mode, size), samples)


@st.composite
def random_interval_shape(draw, rank):
    dims = []
    for _ in range(rank):
        lo = draw(st.integers(0, 30))
        kind = draw(st.sampled_from(["static", "interval", "unbounded", "unknown"]))
        dims.append({"static": lo, "interval": Dim(lo, lo + draw(st.integers(0, 20))),
                     "unbounded": Dim(lo, None), "unknown": None}[kind])
    return tuple(dims)


@PROPERTY_SETTINGS
@given(st.data())
def test_interval_errors_and_results_are_sound_for_random_cases(data):
    # Not necessarily valid: an interval error must mean that no shape inside is valid.
    op = data.draw(st.sampled_from(["batch_to_space", "space_to_batch", "depth_to_space", "space_to_depth"]))
    if op in ("batch_to_space", "space_to_batch"):
        rank = data.draw(st.integers(2, 4))
        block = [1] + data.draw(st.lists(st.integers(1, 5), min_size=rank - 1, max_size=rank - 1))
        begin = [0] + data.draw(st.lists(st.integers(0, 6), min_size=rank - 1, max_size=rank - 1))
        end = [0] + data.draw(st.lists(st.integers(0, 6), min_size=rank - 1, max_size=rank - 1))
        params = (block, begin, end)
    else:
        rank = data.draw(st.integers(3, 5))
        params = (data.draw(st.sampled_from(MODES)), data.draw(st.integers(1, 4)))
    interval_shape = data.draw(random_interval_shape(rank))
    samples = [sample(data.draw, interval_shape) for _ in range(10)]
    check_contains(getattr(shapes, op), interval_shape, params, samples)


@PROPERTY_SETTINGS
@given(space_batch_case(max_block=4), st.data())
def test_unknown_parameters_contain_every_known_result(case, data):
    shape, block, begin, end = case
    op = data.draw(st.sampled_from(["space_to_batch", "batch_to_space"]))
    if op == "batch_to_space":
        shape = shapes.space_to_batch(shape, block, begin, end)
    known = getattr(shapes, op)(shape, block, begin, end)
    hide = data.draw(st.lists(st.booleans(), min_size=3, max_size=3))
    params = [None if h else p for h, p in zip(hide, (block, begin, end))]
    unknown = getattr(shapes, op)(shape, *params)
    assert len(unknown) == len(known)
    for r, v in zip(unknown, known):
        assert contains(r, v), (unknown, known, params)


@PROPERTY_SETTINGS
@given(depth_case(max_block=4), st.data())
def test_unknown_block_size_and_mode_contain_every_known_result(case, data):
    shape, mode, size = case
    op = data.draw(st.sampled_from(["space_to_depth", "depth_to_space"]))
    if op == "depth_to_space":
        shape = shapes.space_to_depth(shape, mode, size)
    known = getattr(shapes, op)(shape, mode, size)
    assert_shape(getattr(shapes, op)(shape, None, size), known)  # the mode never changes a shape
    unknown = getattr(shapes, op)(shape, data.draw(st.sampled_from([None, mode])), None)
    assert unknown[0] == known[0]
    for r, v in zip(unknown, known):
        assert contains(r, v), (unknown, known)


# ----------------------------------------------------------------- static calls, straight


_EDGE = st.one_of(st.integers(-2, 12), st.sampled_from([INT64_MAX, INT64_MAX - 1, 2**62, 2**63, -(2**63)]))


def _interval_rules(resolve, shape, *args):
    """The rules' own result (a list shape takes the interval code, never the straight path), or the error."""
    try:
        found = resolve(list(shape), *args)
    except (DataMoveError, TypeError) as exc:
        return type(exc)
    return found.shape, found.params


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["batch_to_space", "space_to_batch"]), st.integers(0, 7), st.data())
def test_static_space_calls_agree_with_the_interval_rules(op, rank, data):
    """The straight path of an array's call (shapes._static_space) returns the rules' result, or None where
    the rules raise (it never passes a broken call) or it is not sure."""
    vector = st.lists(_EDGE, min_size=rank, max_size=rank)
    lengths = st.one_of(st.just(rank), st.integers(0, 8))
    shape = tuple(data.draw(st.lists(_EDGE, min_size=rank, max_size=rank)))
    block = data.draw(st.one_of(vector, lengths.flatmap(lambda n: st.lists(st.integers(1, 4), min_size=n, max_size=n))))
    begin, end = (data.draw(st.one_of(vector, st.lists(st.integers(0, 3), min_size=rank, max_size=rank))) for _ in "be")
    if data.draw(st.booleans()):  # the margins of the batch axis and its block as the rules want them, mostly
        block, begin, end = [1] + block[1:], [0] + begin[1:], [0] + end[1:]
    resolve = shapes.resolve_batch_to_space if op == "batch_to_space" else shapes.resolve_space_to_batch
    fast = shapes._static_space(op, shape, block, begin, end)
    expected = _interval_rules(resolve, shape, block, begin, end)
    if fast is not None:
        assert (fast.shape, fast.params) == expected and fast.public() == tuple(d for d, _ in fast.shape)


@settings(max_examples=600, deadline=None)
@given(st.booleans(), st.integers(0, 7), st.data())
def test_static_depth_calls_agree_with_the_interval_rules(space_to_depth, rank, data):
    shape = tuple(data.draw(st.lists(st.one_of(_EDGE, st.sampled_from([6, 8, 12, 16, 24, 27, 64])), min_size=rank,
                                     max_size=rank)))
    mode = data.draw(st.sampled_from(["blocks_first", "depth_first", "DCR", ""]))
    size = data.draw(st.one_of(st.integers(-1, 4), st.sampled_from([INT64_MAX, 2**40, True])))
    resolve = shapes.resolve_space_to_depth if space_to_depth else shapes.resolve_depth_to_space
    fast = shapes._static_depth(space_to_depth, shape, mode, size)
    expected = _interval_rules(resolve, shape, mode, size)
    if fast is not None:
        assert (fast.shape, fast.params) == expected


def test_static_calls_take_the_straight_path():
    """The common calls do take it (so the two tests above compare something): every op, both modes."""
    assert shapes._static_space("batch_to_space", (8, 3, 5, 5), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]) is not None
    assert shapes._static_space("space_to_batch", (2, 3, 5, 5), (1, 1, 2, 2), (0, 0, 1, 0), (0, 0, 0, 1)) is not None
    for mode in ("blocks_first", "depth_first"):
        assert shapes._static_depth(True, (1, 3, 4, 6), mode, 2) is not None
        assert shapes._static_depth(False, (1, 12, 4, 6), mode, 2) is not None
    fast, rules = (shapes.resolve_space_to_depth(shape, "blocks_first", 2) for shape in ((1, 3, 4, 6), [1, 3, 4, 6]))
    assert fast[:2] == rules[:2] and fast.public() == rules.public() == (1, 12, 2, 3)
