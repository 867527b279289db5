"""Differential tests against the real OpenVINO runtime (its CPU plugin).

Every random case is checked three ways:

1. datamove == ``tests/reference.py`` (the spec's reshape/transpose formula),
   bit for bit, always;
2. datamove == OpenVINO wherever OpenVINO == the reference;
3. OpenVINO == the reference: a failure for BatchToSpace, SpaceToDepth and
   DepthToSpace; for SpaceToBatch OpenVINO's CPU plugin is known to be wrong
   on some valid cases (PEERS.md section 6), so there the disagreements are
   counted, reported as a warning, and only required to be a minority.

Compiling a model costs ~20 ms, so there is one model per (op, rank, dtype)
(and mode and block size for the depth ops, whose block size is an attribute):
the data shape is dynamic and ``block_shape``/``crops_*``/``pads_*`` are i64
Parameters, and many cases go through one compiled model.
"""

from __future__ import annotations

import functools
import math
import random
import warnings
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed: the differential tests need its CPU plugin")

from openvino_opset import opset  # noqa: E402

import datamove as dm  # noqa: E402
import reference as ref  # noqa: E402



# ------------------------------------------------------------------ the cases

SEED = 20260401
MODES = ("blocks_first", "depth_first")
DTYPES = ("float32", "float16", "int8", "uint8", "int32", "int64", "bool")
#: Probability that a case has a zero-size axis.
ZERO_SIZE_FRACTION = 0.12
#: Largest number of input (and output) elements of one case.
MAX_ELEMENTS = 8192

#: BatchToSpace / SpaceToBatch: one compiled model per (rank, dtype), each fed this many cases.
BATCH_RANKS = (2, 3, 4, 5, 6)
BATCH_CASES_PER_MODEL = 8
BATCH_CASES = len(BATCH_RANKS) * len(DTYPES) * BATCH_CASES_PER_MODEL  # 280 per op

#: SpaceToDepth / DepthToSpace: the CPU plugin rejects rank > 5 at compile time
#: ("doesn't support dimensions with rank greater than 5"), so rank 6 is left to
#: tests/test_openvino_shapes.py. One model per (rank, mode, block size, dtype);
#: each (rank, mode, block size) takes DEPTH_DTYPES_PER_GROUP dtypes, rotating, so
#: every dtype is covered without compiling all 168 combinations.
DEPTH_RANKS = (3, 4, 5)
DEPTH_BLOCK_SIZES = (1, 2, 3, 4)
DEPTH_DTYPES_PER_GROUP = 3
DEPTH_CASES_PER_MODEL = 4
DEPTH_CASES = (  # 288 per op
    len(DEPTH_RANKS) * len(MODES) * len(DEPTH_BLOCK_SIZES) * DEPTH_DTYPES_PER_GROUP * DEPTH_CASES_PER_MODEL
)

_OV_TYPES = {
    "float32": ov.Type.f32,
    "float16": ov.Type.f16,
    "int8": ov.Type.i8,
    "uint8": ov.Type.u8,
    "int32": ov.Type.i32,
    "int64": ov.Type.i64,
    "bool": ov.Type.boolean,
}

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def random_data(rng: np.random.Generator, shape: Tuple[int, ...], dtype: str) -> np.ndarray:
    """Random bit patterns of ``dtype`` (NaNs, infinities, -0.0 and subnormals included).

    Two restrictions come from the CPU plugin, which computes in other precisions:
    int64 is executed as int32 (values outside int32 are truncated), and float16 as
    float32, which quiets signalling NaNs. Neither is a data-movement question.
    """
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype == "int64":
        return rng.integers(-(2**31), 2**31, size=shape, dtype=np.int64)
    np_dtype = np.dtype(dtype)
    unsigned = _UNSIGNED[np_dtype.itemsize]
    bits = rng.integers(0, np.iinfo(unsigned).max, size=shape, dtype=unsigned, endpoint=True)
    if dtype == "float16":
        signalling = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0) & ((bits & 0x0200) == 0)
        bits = np.where(signalling, bits | 0x0200, bits).astype(unsigned)
    return bits.view(np_dtype)


def _fits(shape: List[int]) -> bool:
    return math.prod(shape) <= MAX_ELEMENTS


def _zero_axis(rng: random.Random, rank: int) -> int:
    """The axis to make empty: the batch a third of the time (OpenVINO treats it apart)."""
    return 0 if rng.random() < 1 / 3 else rng.randrange(1, rank)


def batch_to_space_case(rng: random.Random, rank: int):
    """``(data_shape, block_shape, crops_begin, crops_end)``, valid (index 0: block 1, crops 0)."""
    while True:
        block = [1] + [rng.randint(1, 4) for _ in range(rank - 1)]
        dims = [rng.randint(1, 3) for _ in range(rank - 1)]
        new_batch = rng.randint(1, 2)
        if rng.random() < ZERO_SIZE_FRACTION:
            axis = _zero_axis(rng, rank)
            if axis == 0:
                new_batch = 0
            else:
                dims[axis - 1] = 0
        shape = [new_batch * math.prod(block)] + dims
        if _fits(shape):
            break
    begin, end = [0], [0]
    for d, b in zip(dims, block[1:]):
        total = rng.randint(0, d * b) if rng.random() < 0.6 else 0
        first = rng.randint(0, total)
        begin.append(first)
        end.append(total - first)
    return tuple(shape), block, begin, end


def space_to_batch_case(rng: random.Random, rank: int):
    """``(data_shape, block_shape, pads_begin, pads_end)``, valid (index 0: block 1, pads 0)."""
    while True:
        zero_axis = _zero_axis(rng, rank) if rng.random() < ZERO_SIZE_FRACTION else None
        block, begin, end = [1], [0], [0]
        shape = [0 if zero_axis == 0 else rng.randint(1, 2)]
        for axis in range(1, rank):
            b = rng.randint(1, 4)
            if axis == zero_axis:  # empty data; the padded axis may be empty too
                padded, d = b * rng.randint(0, 2), 0
            else:
                padded = b * rng.randint(1, 3)
                d = rng.randint(1, padded) if rng.random() < 0.6 else padded
            first = rng.randint(0, padded - d)
            block.append(b)
            shape.append(d)
            begin.append(first)
            end.append(padded - d - first)
        out = [shape[0] * math.prod(block)]
        out += [(d + p + q) // b for d, p, q, b in zip(shape[1:], begin[1:], end[1:], block[1:])]
        if _fits(shape) and _fits(out):
            return tuple(shape), block, begin, end


def space_to_depth_case(rng: random.Random, rank: int, block_size: int):
    """``data_shape`` valid for space_to_depth: every spatial dim a multiple of ``block_size``."""
    while True:
        shape = [rng.randint(1, 2), rng.randint(1, 3)] + [block_size * rng.randint(1, 3) for _ in range(rank - 2)]
        if rng.random() < ZERO_SIZE_FRACTION:
            shape[_zero_axis(rng, rank)] = 0
        if _fits(shape):
            return tuple(shape)


def depth_to_space_case(rng: random.Random, rank: int, block_size: int):
    """``data_shape`` valid for depth_to_space: channels a multiple of ``block_size ** K``."""
    while True:
        shape = [rng.randint(1, 2), rng.randint(1, 3) * block_size ** (rank - 2)]
        shape += [rng.randint(1, 3) for _ in range(rank - 2)]
        if rng.random() < ZERO_SIZE_FRACTION:
            shape[_zero_axis(rng, rank)] = 0
        if _fits(shape) and _fits([shape[0], shape[1]] + [d * block_size for d in shape[2:]]):
            return tuple(shape)


# ------------------------------------------------------------------ OpenVINO models

_CORE = ov.Core()
# On CPUs with bf16 (AMX) OpenVINO's default inference precision is bf16; ask for
# f32 so nothing is rounded on the way through.
_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
_BATCH_PARAMS = {"batch_to_space": ("block_shape", "crops_begin", "crops_end"),
                 "space_to_batch": ("block_shape", "pads_begin", "pads_end")}


def _compile(outputs, inputs, name: str):
    return _CORE.compile_model(ov.Model(outputs, inputs, name), "CPU", _CONFIG).create_infer_request()


@functools.lru_cache(maxsize=None)
def batch_model(op: str, rank: int, dtype: str):
    """Dynamic data of this rank; block and crops/pads as i64 Parameters."""
    data = opset.parameter(ov.PartialShape.dynamic(rank), _OV_TYPES[dtype], name="data")
    params = [opset.parameter([rank], ov.Type.i64, name=name) for name in _BATCH_PARAMS[op]]
    return _compile([getattr(opset, op)(data, *params)], [data, *params], f"{op}_{rank}_{dtype}")


@functools.lru_cache(maxsize=None)
def depth_model(op: str, rank: int, dtype: str, mode: str, block_size: int):
    data = opset.parameter(ov.PartialShape.dynamic(rank), _OV_TYPES[dtype], name="data")
    return _compile([getattr(opset, op)(data, mode, block_size)], [data], f"{op}_{rank}_{dtype}_{mode}_{block_size}")


def static_model(op: str, shape: Tuple[int, ...], dtype: str, args: Tuple):
    """The same op with a static data shape and constant parameters (see ``run_openvino``)."""
    data = opset.parameter(list(shape), _OV_TYPES[dtype], name="data")
    if op in _BATCH_PARAMS:
        node = getattr(opset, op)(data, *[opset.constant(np.array(a, np.int64)) for a in args])
    else:
        node = getattr(opset, op)(data, *args)
    return _compile([node], [data], f"{op}_static")


#: Valid cases that the dynamic-shape model refused and the static one ran, per op.
ZERO_QUOTIENT_REJECTIONS: Dict[str, List[str]] = {}


def _divides_a_zero(op: str, shape: Tuple[int, ...], args: Tuple) -> bool:
    """Does the op divide a dim that is 0 here (batch, padded space, space, channels)?"""
    if op == "batch_to_space":
        return shape[0] == 0
    if op == "space_to_batch":
        _, begin, end = args
        return any(shape[i] + begin[i] + end[i] == 0 for i in range(1, len(shape)))
    if op == "space_to_depth":
        return 0 in shape[2:]
    return shape[1] == 0


def run_openvino(op: str, data: np.ndarray, args: Tuple, dtype: str) -> np.ndarray:
    """OpenVINO's output for one case, through the shared dynamic-shape model.

    The CPU plugin's run-time shape inference refuses a dim of 0 divided by
    anything ("Dimension value: [ 0, 0] must be a multiple of divisor: 2"): its
    static dims use 0 as the "empty" marker. That is an OpenVINO limitation on
    valid input; such cases are recorded and run through a model compiled for
    the static shape, which accepts them. Any other error fails the test.
    """
    rank = data.ndim
    if op in _BATCH_PARAMS:
        request = batch_model(op, rank, dtype)
        inputs = [data] + [np.array(a, np.int64) for a in args]
    else:
        request = depth_model(op, rank, dtype, *args)
        inputs = [data]
    try:
        return request.infer(inputs)[0]
    except RuntimeError as exc:
        if "must be a multiple of divisor" not in str(exc) or not _divides_a_zero(op, data.shape, args):
            raise
    ZERO_QUOTIENT_REJECTIONS.setdefault(op, []).append(f"{data.shape} {args}")
    return static_model(op, data.shape, dtype, args).infer([data])[0]


# ------------------------------------------------------------------ comparison


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bytes."""
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    )


def _describe(op: str, shape, dtype: str, args, expected: np.ndarray, got: np.ndarray, who: str) -> str:
    text = f"{op}{(shape, *args)} {dtype}: {who} differs from the spec formula"
    if expected.shape != got.shape or expected.dtype != got.dtype:
        return f"{text}: got {got.shape} {got.dtype}, expected {expected.shape} {expected.dtype}"
    unsigned = _UNSIGNED[expected.dtype.itemsize]
    wrong = np.flatnonzero(expected.view(unsigned).ravel() != got.view(unsigned).ravel())
    return f"{text}: {wrong.size} of {expected.size} elements, first at flat index {wrong[:5].tolist()}"


def check_cases(op: str, cases, formula: Callable, operation: Callable, *, openvino_may_differ: bool = False):
    """Run ``cases`` = [(shape, dtype, args)] through the reference, datamove and OpenVINO.

    Returns the descriptions of the cases where OpenVINO differs from the
    reference. datamove differing from the reference, or from OpenVINO where
    OpenVINO agrees with the reference, fails at once.
    """
    data_rng = np.random.default_rng(SEED)
    openvino_wrong = []
    for shape, dtype, args in cases:
        data = random_data(data_rng, shape, dtype)
        expected = formula(data, *args)
        got = operation(data, *args)
        assert bits_equal(got, expected), _describe(op, shape, dtype, args, expected, got, "datamove")
        from_openvino = run_openvino(op, data, args, dtype)
        if bits_equal(from_openvino, expected):
            assert bits_equal(got, from_openvino), _describe(op, shape, dtype, args, from_openvino, got, "datamove")
        else:
            openvino_wrong.append(_describe(op, shape, dtype, args, expected, from_openvino, "OpenVINO"))
    if openvino_wrong and not openvino_may_differ:
        pytest.fail(f"{len(openvino_wrong)} of {len(cases)} cases:\n" + "\n".join(openvino_wrong[:10]))
    return openvino_wrong


def batch_cases(op: str):
    make = batch_to_space_case if op == "batch_to_space" else space_to_batch_case
    rng = random.Random(f"{SEED}-{op}")
    cases = []
    for rank in BATCH_RANKS:
        for dtype in DTYPES:
            for _ in range(BATCH_CASES_PER_MODEL):
                shape, *args = make(rng, rank)
                cases.append((shape, dtype, tuple(args)))
    assert len(cases) == BATCH_CASES
    return cases


def depth_cases(op: str):
    make = space_to_depth_case if op == "space_to_depth" else depth_to_space_case
    rng = random.Random(f"{SEED}-{op}")
    cases = []
    group = 0
    for rank in DEPTH_RANKS:
        for mode in MODES:
            for block_size in DEPTH_BLOCK_SIZES:
                for k in range(DEPTH_DTYPES_PER_GROUP):
                    dtype = DTYPES[(group * DEPTH_DTYPES_PER_GROUP + k) % len(DTYPES)]
                    for _ in range(DEPTH_CASES_PER_MODEL):
                        cases.append((make(rng, rank, block_size), dtype, (mode, block_size)))
                group += 1
    assert len(cases) == DEPTH_CASES
    return cases


def _report(op: str, total: int, openvino_wrong: List[str]) -> None:
    rejected = ZERO_QUOTIENT_REJECTIONS.get(op, [])
    print(f"\n{op}: {total} cases, OpenVINO differs from the spec on {len(openvino_wrong)}; "
          f"its dynamic-shape model refused {len(rejected)} zero-size cases (run static instead)")


# ------------------------------------------------------------------ the tests


def test_case_counts():
    """At least 200 cases per op, over every rank, dtype, mode and block size named."""
    assert min(BATCH_CASES, DEPTH_CASES) >= 200
    for op in ("batch_to_space", "space_to_batch"):
        cases = batch_cases(op)
        assert {len(s) for s, _, _ in cases} == set(BATCH_RANKS)
        assert {d for _, d, _ in cases} == set(DTYPES)
        assert any(0 in s for s, _, _ in cases)
    for op in ("space_to_depth", "depth_to_space"):
        cases = depth_cases(op)
        assert {d for _, d, _ in cases} == set(DTYPES)
        assert {a for _, _, a in cases} == {(m, b) for m in MODES for b in DEPTH_BLOCK_SIZES}
        assert any(0 in s for s, _, _ in cases)


def test_batch_to_space_matches_openvino():
    wrong = check_cases("batch_to_space", batch_cases("batch_to_space"), ref.batch_to_space, dm.batch_to_space)
    _report("batch_to_space", BATCH_CASES, wrong)


def test_space_to_depth_matches_openvino():
    wrong = check_cases("space_to_depth", depth_cases("space_to_depth"), ref.space_to_depth, dm.space_to_depth)
    _report("space_to_depth", DEPTH_CASES, wrong)


def test_depth_to_space_matches_openvino():
    wrong = check_cases("depth_to_space", depth_cases("depth_to_space"), ref.depth_to_space, dm.depth_to_space)
    _report("depth_to_space", DEPTH_CASES, wrong)


class OpenVINOSpaceToBatchBug(UserWarning):
    """OpenVINO's CPU SpaceToBatch disagrees with the spec (PEERS.md section 6)."""


def test_space_to_batch_matches_openvino_where_openvino_is_right():
    wrong = check_cases("space_to_batch", batch_cases("space_to_batch"), ref.space_to_batch, dm.space_to_batch,
                        openvino_may_differ=True)
    _report("space_to_batch", BATCH_CASES, wrong)
    # datamove equals the spec formula on all of them (checked above); OpenVINO
    # must still be right on most, or the harness itself is suspect.
    assert len(wrong) < BATCH_CASES // 2, "\n".join(wrong[:10])
    if wrong:
        warnings.warn(OpenVINOSpaceToBatchBug(
            f"OpenVINO's CPU SpaceToBatch differs from the spec formula (and from datamove) on "
            f"{len(wrong)} of {BATCH_CASES} valid cases, e.g. {wrong[0]}"))


def test_space_to_batch_known_openvino_bug_example():
    """PEERS.md section 6's smallest example: the second batch block is pure padding."""
    data = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 1, 4)
    args = ([1, 1, 3, 1], [0, 0, 0, 0], [0, 0, 2, 0])
    expected = np.zeros((3, 2, 1, 4), np.float32)
    expected[0] = data[0]
    assert bits_equal(ref.space_to_batch(data, *args), expected)
    assert bits_equal(dm.space_to_batch(data, *args), expected)
    from_openvino = run_openvino("space_to_batch", data, tuple(args), "float32")
    if not bits_equal(from_openvino, expected):
        warnings.warn(OpenVINOSpaceToBatchBug(
            f"OpenVINO still gets PEERS.md's example wrong: batch 1 = {from_openvino[1].ravel().tolist()}, "
            "expected zeros"))
