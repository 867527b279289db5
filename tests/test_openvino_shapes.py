"""``datamove.shapes`` against OpenVINO's own shape inference, intervals included.

Each case builds the OpenVINO node on a Parameter whose PartialShape mixes
static dims, dynamic dims and intervals (bounded and unbounded), with Constant
(sometimes Parameter, i.e. unknown) block/crops/pads, and reads
``node.get_output_partial_shape(0)``. datamove's convention: a static dim is an
``int``, a fully dynamic one ``None``, an interval ``Dim(lo, hi)`` (``hi=None``:
unbounded), an unknown rank ``None``; an unknown parameter ``None``.

Where OpenVINO rejects the node, datamove must raise ``DataMoveError``. Two
deliberate differences (PEERS.md section 2.2, README) are accounted for, not
copied:

* OpenVINO divides an unbounded upper bound into the finite
  ``floor(INT64_MAX / k)``; datamove keeps it unbounded.
* OpenVINO clips ``D * B - crops`` to 0 when the crop exceeds every possible
  ``D * B`` (and ``D * B`` is not static); datamove raises ``DataMoveError``.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any, List, Optional, Tuple

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed: these tests compare with its shape inference")

from openvino_opset import opset  # noqa: E402

from datamove import DataMoveError, Dim, shapes  # noqa: E402
from datamove.rules.dims import INT64_MAX  # noqa: E402



SEED = 20260401
MODES = ("blocks_first", "depth_first")
#: Random cases per op; every op gets them all.
CASES_PER_OP = 1000
BATCH_RANKS = (2, 3, 4, 5, 6)
DEPTH_RANKS = (3, 4, 5, 6)  # shape inference has no rank limit (the CPU plugin stops at 5)
MAX_BLOCK = 4
#: Probability that the data rank is unknown, and that one of block/crops/pads is a Parameter.
DYNAMIC_RANK_FRACTION = 0.04
UNKNOWN_PARAMETER_FRACTION = 0.1
#: Finite bounds in the cases stay below this; OpenVINO's ``floor(INT64_MAX / k)``
#: for k <= MAX_BLOCK ** 5 lies far above it.
LARGEST_FINITE_BOUND = 2**40
assert INT64_MAX // MAX_BLOCK**5 > LARGEST_FINITE_BOUND

Shape = Optional[Tuple[Any, ...]]

# ------------------------------------------------------------------ conversions


def openvino_unbounded_quotient(k: int) -> int:
    """The upper bound OpenVINO gives ``[lo, inf) / k``: ``INT64_MAX / k`` in double precision
    (``[4, inf) / 2`` gives ``[2, 4611686018427387904]``, one more than ``INT64_MAX // 2``)."""
    return int(INT64_MAX / k)


def to_openvino(shape: Shape) -> "ov.PartialShape":
    if shape is None:
        return ov.PartialShape.dynamic()
    dims = []
    for d in shape:
        if d is None:
            dims.append(ov.Dimension())
        elif isinstance(d, Dim):
            dims.append(ov.Dimension(d.lo, -1 if d.hi is None else d.hi))
        else:
            dims.append(ov.Dimension(d))
    return ov.PartialShape(dims)


def from_openvino(shape: "ov.PartialShape") -> Tuple[Shape, int]:
    """OpenVINO's output in datamove's convention, and how many huge bounds became unbounded."""
    if shape.rank.is_dynamic:
        return None, 0
    dims, artefacts = [], 0
    for d in shape:
        if d.is_static:
            dims.append(d.get_length())
            continue
        lo, hi = d.get_min_length(), d.get_max_length()
        if hi == -1:
            hi = None
        elif hi > LARGEST_FINITE_BOUND:
            # INT64_MAX / k (computed in double precision) from an unbounded dim
            # divided by k: datamove keeps it unbounded
            assert any(hi == openvino_unbounded_quotient(k) for k in range(2, MAX_BLOCK**5 + 1)), d
            hi, artefacts = None, artefacts + 1
        dims.append(None if lo == 0 and hi is None else Dim(lo, hi))
    return tuple(dims), artefacts


def _vector_input(values: Optional[List[int]], rank: int):
    if values is None:  # known only at run time
        return opset.parameter([rank], ov.Type.i64)
    return opset.constant(np.array(values, np.int64))


def openvino_shape(op: str, shape: Shape, args: Tuple, rank: int) -> Tuple[str, Any]:
    """``("ok", partial shape)`` or ``("error", message)`` from OpenVINO."""
    data = opset.parameter(to_openvino(shape), ov.Type.f32)
    try:
        if op in ("batch_to_space", "space_to_batch"):
            node = getattr(opset, op)(data, *[_vector_input(a, rank) for a in args])
        else:
            node = getattr(opset, op)(data, *args)
    except RuntimeError as exc:  # NodeValidationFailure and friends
        return "error", str(exc).strip().splitlines()[-1]
    return "ok", node.get_output_partial_shape(0)


def datamove_shape(op: str, shape: Shape, args: Tuple) -> Tuple[str, Any]:
    try:
        return "ok", getattr(shapes, op)(shape, *args)
    except DataMoveError as exc:  # anything else escapes and fails the test
        return "error", str(exc)


# ------------------------------------------------------------------ random cases


def random_dim(rng: random.Random, static: int):
    """``static`` a third of the time or so, otherwise dynamic, a bounded or an unbounded interval."""
    kind = rng.random()
    if kind < 0.45:
        return static
    if kind < 0.6:
        return None
    lo = rng.randint(0, 12)
    if kind < 0.85:
        return Dim(lo, lo + rng.randint(1, 12))
    return Dim(rng.randint(1, 12), None)


def _data_shape(rng: random.Random, statics: List[int]) -> Shape:
    if rng.random() < DYNAMIC_RANK_FRACTION:
        return None
    return tuple(random_dim(rng, s) for s in statics)


def _maybe_unknown(rng: random.Random, vectors: List[List[int]]) -> List[Optional[List[int]]]:
    if rng.random() < UNKNOWN_PARAMETER_FRACTION:
        vectors[rng.randrange(len(vectors))] = None
    return vectors


def _split(rng: random.Random, total: int) -> Tuple[int, int]:
    first = rng.randint(0, total)
    return first, total - first


def batch_to_space_case(rng: random.Random):
    rank = rng.choice(BATCH_RANKS)
    block = [1] + [rng.randint(1, MAX_BLOCK) for _ in range(rank - 1)]
    product = math.prod(block)
    batch = product * rng.randint(0, 3) if rng.random() < 0.6 else rng.randint(0, 40)
    statics = [batch] + [rng.randint(0, 6) for _ in range(rank - 1)]
    begin, end = [0], [0]
    for d, b in zip(statics[1:], block[1:]):
        # mostly within d * b, sometimes beyond it (an error, or OpenVINO's clip to 0)
        first, second = _split(rng, rng.randint(0, d * b + 2) if rng.random() < 0.6 else 0)
        begin.append(first)
        end.append(second)
    return rank, _data_shape(rng, statics), tuple(_maybe_unknown(rng, [block, begin, end]))


def space_to_batch_case(rng: random.Random):
    rank = rng.choice(BATCH_RANKS)
    block, begin, end, statics = [1], [0], [0], [rng.randint(0, 4)]
    for _ in range(rank - 1):
        b = rng.randint(1, MAX_BLOCK)
        d = rng.randint(0, 9)
        total = rng.randint(0, 6)
        if rng.random() < 0.6:  # mostly divisible when static
            total += -(d + total) % b
        first, second = _split(rng, total)
        block.append(b)
        statics.append(d)
        begin.append(first)
        end.append(second)
    return rank, _data_shape(rng, statics), tuple(_maybe_unknown(rng, [block, begin, end]))


def space_to_depth_case(rng: random.Random):
    rank = rng.choice(DEPTH_RANKS)
    size = rng.randint(1, MAX_BLOCK)
    statics = [rng.randint(0, 4), rng.randint(0, 5)]
    statics += [size * rng.randint(0, 4) if rng.random() < 0.7 else rng.randint(0, 13) for _ in range(rank - 2)]
    return rank, _data_shape(rng, statics), (rng.choice(MODES), size)


def depth_to_space_case(rng: random.Random):
    rank = rng.choice(DEPTH_RANKS)
    size = rng.randint(1, MAX_BLOCK)
    divisor = size ** (rank - 2)
    channels = divisor * rng.randint(0, 3) if rng.random() < 0.7 else rng.randint(0, 70)
    statics = [rng.randint(0, 4), channels] + [rng.randint(0, 6) for _ in range(rank - 2)]
    return rank, _data_shape(rng, statics), (rng.choice(MODES), size)


_MAKERS = {
    "batch_to_space": batch_to_space_case,
    "space_to_batch": space_to_batch_case,
    "space_to_depth": space_to_depth_case,
    "depth_to_space": depth_to_space_case,
}
OPS = tuple(_MAKERS)


def _interval(d) -> Tuple[int, Optional[int]]:
    if d is None:
        return 0, None
    if isinstance(d, Dim):
        return d.lo, d.hi
    return d, d


def crop_exceeds_every_size(shape: Shape, args: Tuple, axis: int) -> bool:
    """Is ``crops_begin + crops_end`` on ``axis`` larger than every possible ``D * B``?"""
    block, begin, end = args
    if shape is None or begin is None or end is None:
        return False
    _, hi = _interval(shape[axis])
    if hi is not None and block is not None:
        hi *= block[axis]
    elif hi is not None and hi > 0:  # unknown block: D * [1, inf)
        hi = None
    return hi is not None and begin[axis] + end[axis] > hi


def compare(op: str, rank: int, shape: Shape, args: Tuple, tally: Counter) -> None:
    """One case: OpenVINO's verdict against datamove's, the deliberate differences allowed."""
    where = f"{op}({shape}, {', '.join(map(repr, args))})"
    ov_kind, ov_value = openvino_shape(op, shape, args, rank)
    dm_kind, dm_value = datamove_shape(op, shape, args)
    if ov_kind == "error":
        assert dm_kind == "error", f"{where}: OpenVINO raises ({ov_value}), datamove returns {dm_value}"
        tally["both raise"] += 1
        return
    expected, artefacts = from_openvino(ov_value)
    if dm_kind == "error":
        clipped = [
            i for i in range(1, rank)
            if crop_exceeds_every_size(shape, args, i) and expected[i] == 0
            and f"crops_begin[{i}] + crops_end[{i}]" in dm_value
        ]
        assert op == "batch_to_space" and clipped, (
            f"{where}: datamove raises ({dm_value}), OpenVINO gives {ov_value}"
        )
        tally["OpenVINO clips an oversized crop to 0, datamove raises"] += 1
        return
    assert dm_value == expected, f"{where}: datamove {dm_value}, OpenVINO {ov_value} (i.e. {expected})"
    tally["same shape"] += 1
    if artefacts:
        tally["same shape once floor(INT64_MAX / k) is read as unbounded"] += 1


# ------------------------------------------------------------------ the tests


@pytest.mark.parametrize("op", OPS)
def test_random_cases_match_openvino(op):
    rng = random.Random(f"{SEED}-{op}")
    tally: Counter = Counter()
    for _ in range(CASES_PER_OP):
        rank, shape, args = _MAKERS[op](rng)
        compare(op, rank, shape, args, tally)
    print(f"\n{op}: {CASES_PER_OP} cases: {dict(tally)}")
    # the cases must exercise every branch, not only the easy one
    assert tally["same shape"] >= CASES_PER_OP // 3, tally
    assert tally["both raise"] >= CASES_PER_OP // 20, tally
    assert tally["same shape once floor(INT64_MAX / k) is read as unbounded"] > 0 or op == "space_to_batch", tally
    if op == "batch_to_space":
        assert tally["OpenVINO clips an oversized crop to 0, datamove raises"] > 0, tally


# (op, data shape, parameters): rules broken with static dims and with intervals
ERROR_CASES = [
    ("batch_to_space", (5, 2), ([1, 2], [0, 0], [0, 0])),  # batch not divisible
    ("batch_to_space", (12, 2, 3), ([1, 2, 4], [0, 0, 0], [0, 0, 0])),  # 12 not divisible by 8
    ("batch_to_space", (Dim(5, 7), 5), ([1, 4], [0, 0], [0, 0])),  # no multiple of 4 in 5..7
    ("batch_to_space", (8, 3), ([1, 2], [0, 4], [0, 3])),  # crop 7 > 3 * 2
    ("batch_to_space", (4, 2, 5), ([1, 2, 2], [0, 0, 6], [0, 0, 5])),  # crop 11 > 5 * 2
    ("batch_to_space", (4,), ([1], [0], [0])),  # rank 1
    ("space_to_batch", (2, 5), ([1, 4], [0, 0], [0, 0])),  # 5 not divisible by 4
    ("space_to_batch", (2, 5, 6), ([1, 2, 4], [0, 1, 1], [0, 0, 0])),  # 6 + 1 not divisible by 4
    ("space_to_batch", (2, Dim(5, 6)), ([1, 4], [0, 0], [0, 0])),  # no multiple of 4 in 5..6
    ("space_to_batch", (3,), ([1], [0], [0])),  # rank 1
    ("space_to_depth", (1, 3, 4, 7), ("blocks_first", 4)),  # W = 7 not divisible by 4
    ("space_to_depth", (1, 3, 6, 6, 5), ("depth_first", 2)),  # 5 not divisible by 2
    ("space_to_depth", (1, 3, Dim(5, 7), 4), ("depth_first", 4)),  # no multiple of 4 in 5..7
    ("space_to_depth", (1, 4), ("blocks_first", 2)),  # rank 2
    ("depth_to_space", (1, 7, 2, 2), ("blocks_first", 2)),  # C = 7 not divisible by 4
    ("depth_to_space", (1, 12, 2, 2, 2), ("depth_first", 2)),  # C = 12 not divisible by 8
    ("depth_to_space", (1, Dim(5, 7), 2, 2), ("depth_first", 2)),  # no multiple of 4 in 5..7
    ("depth_to_space", (1, 4), ("depth_first", 2)),  # rank 2
]


@pytest.mark.parametrize("op, shape, args", ERROR_CASES)
def test_both_reject(op, shape, args):
    ov_kind, ov_value = openvino_shape(op, shape, args, len(shape))
    assert ov_kind == "error", f"OpenVINO accepts it: {ov_value}"
    with pytest.raises(DataMoveError):
        getattr(shapes, op)(shape, *args)


# OpenVINO's own type_prop tests (PEERS.md section 2.4): interval-heavy cases
TYPE_PROP_CASES = [
    ("batch_to_space", (960, Dim(2, 20), Dim(12, 14), Dim(100, 150), Dim(10, 20)),
     ([1, 6, 5, 1, 16], [0, 2, 0, 0, 0], [0, 2, 1, 0, 0])),
    ("batch_to_space", (Dim(959, 962), Dim(2, 34), Dim(9, 21), Dim(100, 162), Dim(1, 1999)),
     ([1, 6, 5, 1, 16], [0, 2, 0, 0, 0], [0, 2, 1, 0, 0])),
    ("batch_to_space", (Dim(959, 962), Dim(2, 34), Dim(9, 21)), ([1, 1, 1], [0, 0, 0], [0, 0, 1])),
    ("batch_to_space", (4800, 9, Dim(11, None), 2), ([1, 12, 100, 2], [0, 3, 38, 1], [0, 5, 38, 0])),
    ("batch_to_space", (100, 7, 13, 3), (None, [0, 3, 1, 0], [0, 3, 0, 0])),
    ("batch_to_space", (100, 7, 13, 3), ([1, 2, 5, 1], None, None)),
    ("space_to_batch", (2, Dim(100, None), 1024, 3), ([1, 12, 100, 2], [0, 3, 38, 1], [0, 5, 38, 0])),
    ("space_to_batch", (Dim(2, 5), 100, 1024, 3), ([1, 12, 100, 2], [0, 3, 38, 1], [0, 5, 38, 0])),
    ("space_to_batch", (Dim(2, 5), Dim(5, 100), Dim(100, 1024), Dim(3, 10)),
     ([1, 12, 100, 2], [0, 3, 38, 1], [0, 5, 38, 0])),
    ("space_to_batch", (None, None, None, None), ([1, 10, 5, 1], [0, 3, 2, 0], [0, 3, 0, 0])),
    ("space_to_batch", (Dim(2, 5), 100, Dim(100, None), 3), ([1, 2, 4, 1], [0, 1, 2, 0], [0, 1, 6, 0])),
    ("space_to_batch", (100, 7, 13, 3), ([1, 2, 5, 1], None, [0, 0, 0, 0])),
    ("depth_to_space", (Dim(2, 10), 24, Dim(3, 7), Dim(423, 3000), Dim(235, 1345)), ("blocks_first", 2)),
    ("depth_to_space", (Dim(2, 10), Dim(81, 82), Dim(3, 7), Dim(423, 3000), Dim(235, 1345)), ("depth_first", 3)),
    ("depth_to_space", (Dim(2, 10), 27, Dim(0, 54), Dim(9, None)), ("blocks_first", 3)),
    ("space_to_depth", (Dim(1, 4), Dim(12, 36), 1080, 1616), ("blocks_first", 2)),
    ("space_to_depth", (Dim(1, 4), Dim(12, 36), Dim(100, 1081), Dim(99, 1616)), ("depth_first", 2)),
    ("space_to_depth", (Dim(1, 4), Dim(12, 36), 900, 3), ("blocks_first", 3)),
    ("space_to_depth", (1, 3, Dim(3, None), 4), ("blocks_first", 2)),
    ("depth_to_space", (1, Dim(4, None), 3), ("depth_first", 2)),
    ("batch_to_space", (Dim(4, None), 5), ([1, 2], [0, 0], [0, 0])),
    ("space_to_batch", (2, Dim(3, None)), ([1, 4], [0, 1], [0, 0])),
]


@pytest.mark.parametrize("op, shape, args", TYPE_PROP_CASES)
def test_openvino_type_prop_cases(op, shape, args):
    tally: Counter = Counter()
    compare(op, len(shape), shape, args, tally)
    assert tally["same shape"] == 1, tally


def test_deliberate_difference_unbounded_division():
    """OpenVINO: ``[4, inf) / 2 = [2, 4611686018427387904]``; datamove keeps ``[2, inf)``."""
    kind, value = openvino_shape("batch_to_space", (Dim(4, None), 5), ([1, 2], [0, 0], [0, 0]), 2)
    assert kind == "ok" and value[0].get_max_length() == openvino_unbounded_quotient(2) == 2**62
    assert shapes.batch_to_space((Dim(4, None), 5), [1, 2], [0, 0], [0, 0]) == (Dim(2, None), 10)


def test_deliberate_difference_oversized_crop():
    """OpenVINO clips ``[2, 6] - 7`` to 0; datamove refuses a crop no size can take."""
    kind, value = openvino_shape("batch_to_space", (8, Dim(1, 3)), ([1, 2], [0, 4], [0, 3]), 2)
    assert kind == "ok" and from_openvino(value)[0] == (4, 0)
    with pytest.raises(DataMoveError, match=r"crops_begin\[1\] \+ crops_end\[1\] = 7 exceeds"):
        shapes.batch_to_space((8, Dim(1, 3)), [1, 2], [0, 4], [0, 3])
