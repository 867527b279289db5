"""The ``datamove`` command: ``shape`` and ``run``, their notation, every error path; each command's own help."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import datamove as dm
from datamove import Dim, shapes
import datamove.rules.shapes
from datamove.cli.app import format_shape, main, parse_shape

B2S_5D = ["--block-shape", "1,2,4,3,1", "--crops-begin", "0,0,1,0,0", "--crops-end", "0,0,1,0,0"]
S2B_5D = ["--block-shape", "1,2,4,3,1", "--pads-begin", "0,0,1,0,0", "--pads-end", "0,0,1,0,0"]


def run_cli(capsys, *argv):
    """``main(argv)``: (exit status, stdout, stderr)."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def shape_of(capsys, *argv):
    status, out, err = run_cli(capsys, "shape", *argv)
    assert (status, err) == (0, ""), err
    assert out.count("\n") == 1
    return out.strip()


def assert_one_line_error(status, out, err, match=""):
    assert status == 2
    assert out == ""
    assert err.startswith("datamove: error: ") and err.endswith("\n")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert match in err, err


# ------------------------------------------------------------------ shape: the spec examples


@pytest.mark.parametrize("op", ["batch_to_space", "BatchToSpace"])
def test_shape_batch_to_space_spec_2d_example(capsys, op):
    assert shape_of(capsys, op, "--shape", "10,2", "--block-shape", "1,5",
                    "--crops-begin", "0,2", "--crops-end", "0,0") == "[2, 8]"


@pytest.mark.parametrize("op", ["batch_to_space", "BatchToSpace"])
def test_shape_batch_to_space_spec_5d_example(capsys, op):
    assert shape_of(capsys, op, "--shape", "48,3,3,1,3", *B2S_5D) == "[2, 6, 10, 3, 3]"


@pytest.mark.parametrize("op", ["space_to_batch", "SpaceToBatch"])
def test_shape_space_to_batch_spec_example(capsys, op):
    assert shape_of(capsys, op, "--shape", "2,6,10,3,3", *S2B_5D) == "[48, 3, 3, 1, 3]"


@pytest.mark.parametrize("op", ["space_to_depth", "SpaceToDepth"])
@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_shape_space_to_depth_spec_example(capsys, op, mode):
    assert shape_of(capsys, op, "--shape", "5,7,4,6", "--mode", mode, "--block-size", "2") == "[5, 28, 2, 3]"


@pytest.mark.parametrize("op", ["depth_to_space", "DepthToSpace"])
def test_shape_depth_to_space(capsys, op):
    assert shape_of(capsys, op, "--shape", "5,28,2,3", "--mode", "blocks_first", "--block-size", "2") == "[5, 7, 4, 6]"


# ------------------------------------------------------------------ shape: intervals and unknowns


@pytest.mark.parametrize("argv, expected", [
    (["space_to_depth", "--shape", "?,4..8,6,6", "--mode", "blocks_first", "--block-size", "2"], "[?, 16..32, 3, 3]"),
    (["space_to_batch", "--shape", "2,3..", "--block-shape", "1,4", "--pads-begin", "0,1", "--pads-end", "0,0"],
     "[8, 1..]"),
    (["space_to_batch", "--shape", "1,4..", "--block-shape", "1,1", "--pads-begin", "0,0", "--pads-end", "0,0"],
     "[1, 4..]"),
    (["batch_to_space", "--shape", "4..17,5", "--block-shape", "1,2", "--crops-begin", "0,3", "--crops-end", "0,0"],
     "[2..8, 7]"),
    (["depth_to_space", "--shape", "2..10,81..82,3..7", "--mode", "blocks_first", "--block-size", "3"],
     "[2..10, 27, 9..21]"),
    # ..hi is 0..hi; -1 is ?; lo..? is unbounded; [ ] and spaces are accepted
    (["space_to_depth", "--shape", "1,..3,..8", "--mode", "depth_first", "--block-size", "2"], "[1, 0..6, 0..4]"),
    (["space_to_depth", "--shape=-1,3,4", "--mode", "depth_first", "--block-size", "2"], "[?, 6, 2]"),
    (["space_to_depth", "--shape", "1,2..?,4", "--mode", "depth_first", "--block-size", "2"], "[1, 4.., 2]"),
    (["space_to_depth", "--shape", "[1, 2..2, 4]", "--mode", "depth_first", "--block-size", "2"], "[1, 4, 2]"),
    (["space_to_depth", "--shape", "1,..,4", "--mode", "depth_first", "--block-size", "2"], "[1, ?, 2]"),
    # the whole shape unknown: rank included
    (["depth_to_space", "--shape", "*", "--mode", "depth_first", "--block-size", "2"], "[...]"),
    (["batch_to_space", "--shape", "...", "--block-shape", "1,2"], "[...]"),
    (["space_to_batch", "--shape", "[...]"], "[...]"),
    # parameters left out (or ?) are unknown until run time
    (["batch_to_space", "--shape", "12,3,4", "--block-shape", "1,2,3"], "[2, ?, ?]"),
    (["batch_to_space", "--shape", "12,3,4"], "[?, ?, ?]"),
    (["batch_to_space", "--shape", "12,3", "--block-shape", "?", "--crops-begin", "0,1", "--crops-end", "0,1"],
     "[?, 1..]"),
    (["space_to_batch", "--shape", "2,6", "--block-shape", "1,3"], "[6, ?]"),
    (["space_to_depth", "--shape", "1,2,4", "--block-size", "?"], "[1, ?, ?]"),
    (["space_to_depth", "--shape", "1,2,4", "--mode", "?", "--block-size", "2"], "[1, 4, 2]"),
    (["space_to_depth", "--shape", "1,2,4"], "[1, 2, 4]"),  # block_size defaults to 1, as in the spec
])
def test_shape_intervals_and_unknowns(capsys, argv, expected):
    assert shape_of(capsys, *argv) == expected


def test_shape_output_pastes_back_as_input(capsys):
    first = shape_of(capsys, "space_to_depth", "--shape", "?,4..8,6,6", "--mode", "blocks_first", "--block-size", "2")
    again = shape_of(capsys, "depth_to_space", "--shape", first, "--mode", "blocks_first", "--block-size", "2")
    assert again == "[?, 4..8, 6, 6]"


def test_parse_shape_values():
    assert parse_shape("?,4..8,6,..6,3..,-1") == (None, Dim(4, 8), 6, Dim(0, 6), Dim(3, None), None)
    assert parse_shape("*") is None
    assert parse_shape("") == () == parse_shape("[]")


dims = st.one_of(
    st.none(),
    st.integers(0, 2**63 - 1),
    st.builds(lambda lo, extra: Dim(lo, None if extra is None else lo + extra),
              st.integers(0, 1000), st.none() | st.integers(0, 1000)),
)


def _normalised(shape):
    """``Dim(0, None)`` is ``None`` (unknown) under another name."""
    if shape is None:
        return None
    return tuple(None if isinstance(d, Dim) and (d.lo, d.hi) == (0, None) else d for d in shape)


@given(st.none() | st.lists(dims, max_size=6).map(tuple))
def test_format_then_parse_round_trips(shape):
    text = format_shape(shape)
    assert parse_shape(text) == _normalised(shape)
    assert format_shape(parse_shape(text)) == text


@given(st.lists(dims, min_size=3, max_size=5), st.sampled_from(["space_to_depth", "depth_to_space"]),
       st.integers(1, 4))
def test_shape_command_agrees_with_datamove_shapes(shape, op, block_size):
    try:
        expected = format_shape(getattr(shapes, op)(tuple(shape), "blocks_first", block_size))
    except dm.DataMoveError as exc:
        expected = f"datamove: error: {exc}"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["shape", op, "--shape", format_shape(tuple(shape)), "--mode", "blocks_first",
                       "--block-size", str(block_size)])
    assert (out.getvalue() or err.getvalue()).strip() == expected
    assert status == (0 if out.getvalue() else 2)


# ------------------------------------------------------------------ run


def save(path, array):
    np.save(path, array)
    return str(path)


RUN_CASES = [
    ("batch_to_space", (10, 2), ["--block-shape", "1,5", "--crops-begin", "0,2", "--crops-end", "0,0"],
     lambda x: dm.batch_to_space(x, [1, 5], [0, 2], [0, 0])),
    ("BatchToSpace", (48, 3, 3, 1, 3), B2S_5D,
     lambda x: dm.batch_to_space(x, [1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0])),
    ("space_to_batch", (2, 6, 10, 3, 3), S2B_5D,
     lambda x: dm.space_to_batch(x, [1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0])),
    ("space_to_depth", (5, 7, 4, 6), ["--mode", "blocks_first", "--block-size", "2"],
     lambda x: dm.space_to_depth(x, "blocks_first", 2)),
    ("SpaceToDepth", (5, 7, 4, 6), ["--mode", "depth_first", "--block-size", "2"],
     lambda x: dm.space_to_depth(x, "depth_first", 2)),
    ("depth_to_space", (1, 12, 2, 3), ["--mode", "depth_first", "--block-size", "2"],
     lambda x: dm.depth_to_space(x, "depth_first", 2)),
    ("DepthToSpace", (2, 8, 3), ["--mode", "blocks_first", "--block-size", "2"],
     lambda x: dm.depth_to_space(x, "blocks_first", 2)),
    ("space_to_depth", (1, 3, 5), ["--mode", "blocks_first"],  # block size 1 by default
     lambda x: dm.space_to_depth(x, "blocks_first", 1)),
]


@pytest.mark.parametrize("op, shape, params, direct", RUN_CASES)
def test_run_equals_calling_datamove(capsys, tmp_path, op, shape, params, direct):
    data = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    source, target = save(tmp_path / "in.npy", data), str(tmp_path / "out.npy")
    status, out, err = run_cli(capsys, "run", op, source, target, *params)
    assert (status, err) == (0, "")
    expected = direct(data)
    got = np.load(target)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()
    assert out.count("\n") == 1
    assert f"{format_shape(shape)} int32 -> " in out and f"{format_shape(expected.shape)} int32" in out


DTYPES = [
    np.dtype(bool), np.dtype(np.int8), np.dtype(np.uint64), np.dtype(np.float16), np.dtype(np.complex128),
    np.dtype("U3"), np.dtype("S2"), np.dtype("datetime64[ns]"), np.dtype(">i4"),
    np.dtype([("a", "<i4"), ("b", "U2"), ("c", "?")]),
]


def sample(dtype, shape):
    """An array of ``dtype`` with varied, valid values (so .tobytes() compares them all)."""
    count = int(np.prod(shape))
    if dtype.fields:
        data = np.array([(i, str(i % 97), i % 3 == 0) for i in range(count)], dtype)
    elif dtype.kind == "b":
        data = np.arange(count) % 3 == 0
    elif dtype.kind in "US":
        data = np.array([str(i % 997)[: dtype.itemsize // np.dtype(dtype.kind + "1").itemsize]
                         for i in range(count)], dtype)
    elif dtype.kind == "M":
        data = np.arange(count).astype(dtype)
    else:  # numbers: random bytes, NaN payloads and all
        data = np.random.default_rng(0).integers(0, 256, count * dtype.itemsize, dtype=np.uint8).view(dtype)
    return data.reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_run_round_trips_every_dtype(capsys, tmp_path, dtype):
    data = sample(dtype, (2, 8, 4, 6))
    source, target = save(tmp_path / "in.npy", data), str(tmp_path / "out.npy")
    status, _, err = run_cli(capsys, "run", "space_to_depth", source, target, "--mode", "depth_first",
                             "--block-size", "2")
    assert (status, err) == (0, "")
    got, expected = np.load(target), dm.space_to_depth(data, "depth_first", 2)
    assert got.dtype == dtype and got.shape == (2, 32, 2, 3)
    assert got.tobytes() == expected.tobytes()
    # and back again, through the command
    back = str(tmp_path / "back.npy")
    assert main(["run", "depth_to_space", target, back, "--mode", "depth_first", "--block-size", "2"]) == 0
    assert np.load(back).tobytes() == data.tobytes()


def test_run_fortran_order_and_zero_sized_inputs(capsys, tmp_path):
    data = np.asfortranarray(np.arange(40.0).reshape(4, 10))
    source, target = save(tmp_path / "f.npy", data), str(tmp_path / "out.npy")
    assert main(["run", "space_to_batch", source, target, "--block-shape", "1,2",
                 "--pads-begin", "0,0", "--pads-end", "0,0"]) == 0
    assert np.array_equal(np.load(target), dm.space_to_batch(data, [1, 2], [0, 0], [0, 0]))
    empty = save(tmp_path / "e.npy", np.zeros((0, 3, 4), np.float32))
    assert main(["run", "space_to_batch", empty, target, "--block-shape", "1,1,2",
                 "--pads-begin", "0,0,0", "--pads-end", "0,0,0"]) == 0
    assert np.load(target).shape == (0, 3, 2)
    capsys.readouterr()


def test_run_writes_exactly_the_output_path_and_may_overwrite_its_input(capsys, tmp_path):
    data = np.arange(16).reshape(1, 4, 4)
    source = save(tmp_path / "data.npy", data)
    target = tmp_path / "result.bin"  # np.save(path) would have added ".npy"
    assert main(["run", "space_to_depth", source, str(target), "--mode", "blocks_first", "--block-size", "2"]) == 0
    assert target.exists() and not (tmp_path / "result.bin.npy").exists()
    assert main(["run", "space_to_depth", source, source, "--mode", "blocks_first", "--block-size", "2"]) == 0
    assert np.array_equal(np.load(source), dm.space_to_depth(data, "blocks_first", 2))
    assert np.array_equal(np.load(source), np.load(target))
    capsys.readouterr()


# ------------------------------------------------------------------ errors: one line, status 2


SHAPE_ERRORS = [
    # datamove's rules (DataMoveError), with its message
    (["batch_to_space", "--shape", "10,2", "--block-shape", "1,3", "--crops-begin", "0,0", "--crops-end", "0,0"],
     "data.shape[0] = 10 is not divisible by the product of block_shape [1, 3] = 3"),
    (["batch_to_space", "--shape", "4,3", "--block-shape", "1,2", "--crops-begin", "0,4", "--crops-end", "0,3"],
     "crops_begin[1] + crops_end[1] = 7 exceeds data.shape[1] * block_shape[1] = 6"),
    (["BatchToSpace", "--shape", "10", "--block-shape", "1"], "data must have rank >= 2, got rank 1"),
    (["space_to_batch", "--shape", "2,5", "--block-shape", "1,2,1"], "len(block_shape) = 3, data rank = 2"),
    (["space_to_batch", "--shape", "2,5", "--block-shape", "1,2", "--pads-begin", "0,0", "--pads-end", "0,0"],
     "is not divisible by block_shape[1] = 2"),
    (["space_to_batch", "--shape", "2,6", "--block-shape", "1,2", "--pads-begin=0,-1", "--pads-end", "0,1"],
     "pads_begin[1] must be >= 0, got -1"),
    (["space_to_depth", "--shape", "1,2,5", "--mode", "blocks_first", "--block-size", "2"],
     "data.shape[2] = 5 is not divisible by block_size = 2"),
    (["space_to_depth", "--shape", "1,2,4", "--mode", "DCR", "--block-size", "2"], "(ONNX's DCR is 'blocks_first')"),
    (["depth_to_space", "--shape", "1,2,4", "--mode", "depth_first", "--block-size", "0"], "block_size must be >= 1"),
    (["depth_to_space", "--shape", "1,2,4", "--mode", "depth_first", "--block-size", "-2"], "block_size must be >= 1"),
    (["depth_to_space", "--shape", "1,2", "--mode", "depth_first"], "rank >= 3, got rank 2"),
    (["batch_to_space", "--shape", "99999999999999999999,2"], "does not fit in int64"),
    # the notation
    (["batch_to_space", "--shape", "10,x"], "--shape dim 1: 'x' is not a dim"),
    (["batch_to_space", "--shape", "10,-2"], "--shape dim 1: -2 is negative"),
    (["batch_to_space", "--shape", "10,8..2"], "'8..2' is empty"),
    (["batch_to_space", "--shape", "10,2..3..4"], "'2..3..4' is not a dim"),
    (["batch_to_space", "--shape", "10,2.5"], "'2.5' is not a dim"),
    (["batch_to_space", "--shape", "10,,2"], "--shape dim 1 is empty"),
    (["batch_to_space", "--shape", "[10,2"], "unbalanced brackets"),
    (["batch_to_space", "--shape", "1..99999999999999999999,2"], "does not fit in int64"),
    (["batch_to_space", "--shape", "10,2", "--block-shape", "1,x"], "--block-shape[1]: 'x' is not an integer"),
    (["batch_to_space", "--shape", "10,2", "--crops-end", "0,1.0"], "--crops-end[1]: '1.0' is not an integer"),
    (["space_to_depth", "--shape", "1,2,4", "--block-size", "two"], "--block-size: 'two' is not an integer"),
    # options of another operation
    (["batch_to_space", "--shape", "10,2", "--pads-begin", "0,0"],
     "--pads-begin does not apply to batch_to_space, which takes --block-shape, --crops-begin, --crops-end"),
    (["space_to_depth", "--shape", "1,2,4", "--block-shape", "1,1,1", "--crops-end", "0,0,0"],
     "--block-shape, --crops-end do not apply to space_to_depth"),
    (["space_to_batch", "--shape", "2,4", "--mode", "blocks_first"], "--mode does not apply to space_to_batch"),
    # argparse's own usage errors, also one line
    (["bogus", "--shape", "1,2"], "unknown operation 'bogus'; choose from batch_to_space"),
    (["batch_to_space"], "the following arguments are required: --shape"),
    (["batch_to_space", "--shape", "1,2", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    (["batch_to_space", "--shape"], "argument --shape: expected one argument"),
]


@pytest.mark.parametrize("argv, match", SHAPE_ERRORS)
def test_shape_errors_are_one_line_and_status_2(capsys, argv, match):
    assert_one_line_error(*run_cli(capsys, "shape", *argv), match=match)


def test_usage_errors_without_a_command(capsys):
    assert_one_line_error(*run_cli(capsys), match="the following arguments are required: COMMAND")
    assert_one_line_error(*run_cli(capsys, "frobnicate"), match="invalid choice: 'frobnicate'")


@pytest.fixture
def npy_files(tmp_path):
    files = {"good": save(tmp_path / "good.npy", np.arange(24.0).reshape(4, 6))}
    np.save(tmp_path / "objects.npy", np.array([1, None], dtype=object), allow_pickle=True)
    files["objects"] = str(tmp_path / "objects.npy")
    (tmp_path / "text.npy").write_text("hello, not an array\n")
    files["text"] = str(tmp_path / "text.npy")
    raw = (tmp_path / "good.npy").read_bytes()
    (tmp_path / "header.npy").write_bytes(raw[:20])
    files["header"] = str(tmp_path / "header.npy")
    (tmp_path / "short.npy").write_bytes(raw[:-8])
    files["short"] = str(tmp_path / "short.npy")
    (tmp_path / "empty.npy").write_bytes(b"")
    files["empty"] = str(tmp_path / "empty.npy")
    np.savez(tmp_path / "archive.npz", a=np.zeros(3))
    files["archive"] = str(tmp_path / "archive.npz")
    files["missing"] = str(tmp_path / "missing.npy")
    files["directory"] = str(tmp_path)
    files["out"] = str(tmp_path / "out.npy")
    files["bad_out"] = str(tmp_path / "no" / "such" / "dir" / "out.npy")
    return files


B2S_OK = ["--block-shape", "1,2", "--crops-begin", "0,0", "--crops-end", "0,0"]

RUN_ERRORS = [
    ("missing", "batch_to_space", B2S_OK, "cannot read {missing}: No such file or directory"),
    ("directory", "batch_to_space", B2S_OK, "cannot read {directory}: Is a directory"),
    ("text", "batch_to_space", B2S_OK, "{text} is not a .npy file"),
    ("empty", "batch_to_space", B2S_OK, "{empty} is not a .npy file"),
    ("header", "batch_to_space", B2S_OK, "{header} is not a readable .npy file"),
    ("short", "batch_to_space", B2S_OK, "{short} is not a readable .npy file"),
    ("archive", "batch_to_space", B2S_OK, "{archive} is an .npz archive, not a .npy file"),
    ("objects", "batch_to_space", B2S_OK, "{objects} holds Python objects"),
    # required parameters
    ("good", "batch_to_space", ["--block-shape", "1,2"], "run batch_to_space needs --crops-begin, --crops-end"),
    ("good", "space_to_batch", [], "run space_to_batch needs --block-shape, --pads-begin, --pads-end"),
    ("good", "BatchToSpace", ["--block-shape", "?", "--crops-begin", "0,0", "--crops-end", "0,0"],
     "needs --block-shape"),
    ("good", "space_to_depth", ["--block-size", "2"], "run space_to_depth needs --mode"),
    ("good", "depth_to_space", ["--mode", "depth_first", "--block-size", "?"], "--block-size: '?' is not an integer"),
    ("good", "depth_to_space", ["--mode", "depth_first", "--crops-end", "0,0"], "--crops-end does not apply"),
    # datamove's rules on the real data
    ("good", "batch_to_space", ["--block-shape", "1,3", "--crops-begin", "0,0", "--crops-end", "0,0"],
     "data.shape[0] = 4 is not divisible by the product of block_shape [1, 3] = 3"),
    ("good", "space_to_depth", ["--mode", "blocks_first", "--block-size", "2"], "rank >= 3, got rank 2"),
    ("good", "space_to_batch", ["--block-shape", "1,4", "--pads-begin", "0,0", "--pads-end", "0,1"],
     "data.shape[1] + pads_begin[1] + pads_end[1] = 7 is not divisible by block_shape[1] = 4"),
    ("good", "batch_to_space", [*B2S_OK, "--engine", "warp"], "argument --engine: invalid choice: 'warp' (choose from 'auto', "),
]


@pytest.mark.parametrize("source, op, params, match", RUN_ERRORS)
def test_run_errors_are_one_line_and_status_2(capsys, npy_files, source, op, params, match):
    status, out, err = run_cli(capsys, "run", op, npy_files[source], npy_files["out"], *params)
    assert_one_line_error(status, out, err, match=match.format(**npy_files))
    assert not os.path.exists(npy_files["out"]), "no output is written on error"


def test_run_unwritable_output(capsys, npy_files):
    status, out, err = run_cli(capsys, "run", "batch_to_space", npy_files["good"], npy_files["bad_out"], *B2S_OK)
    assert_one_line_error(status, out, err, match=f"cannot write {npy_files['bad_out']}: No such file or directory")


def test_run_usage_errors(capsys, npy_files):
    assert_one_line_error(*run_cli(capsys, "run", "batch_to_space", npy_files["good"]),
                          match="the following arguments are required: OUTPUT.npy")


def test_a_type_error_from_datamove_is_one_line(capsys, npy_files, monkeypatch):
    # The command line only passes ints and strings, so provoke datamove's TypeError directly.
    def refuse(*args, **kwargs):
        raise TypeError("block_shape must be a sequence of integers,\ngot something else")

    monkeypatch.setattr(dm.ops, "batch_to_space", refuse)
    monkeypatch.setattr(datamove.rules.shapes, "batch_to_space", refuse)
    status, out, err = run_cli(capsys, "run", "batch_to_space", npy_files["good"], npy_files["out"], *B2S_OK)
    # the line break is escaped, never printed: a name holding one cannot fake a second error line
    assert_one_line_error(status, out, err, match="block_shape must be a sequence of integers,\\ngot something else")
    assert_one_line_error(*run_cli(capsys, "shape", "batch_to_space", "--shape", "4,6"), match="got something else")


# ------------------------------------------------------------------ help, version, the real command


@pytest.mark.parametrize("argv", [["--help"], ["shape", "--help"], ["run", "--help"], ["run-model", "--help"]])
def test_help_exits_0_with_an_example(capsys, argv):
    status, out, err = run_cli(capsys, *argv)
    assert (status, err) == (0, "")
    assert "examples:" in out and "datamove " in out


COMMANDS = ["shape", "run", "run-model", "check", "inspect", "verify", "bench", "info"]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_its_own_help(capsys, command):
    status, out, err = run_cli(capsys, command, "--help")
    assert (status, err) == (0, "")
    assert out.startswith(f"usage: datamove {command} ")
    # the top-level help lists it
    assert f"    {command} " in run_cli(capsys, "--help")[1]


EXAMPLE_MODEL = "examples/ir/space_to_depth.xml"


@pytest.mark.parametrize("argv, command", [
    (["run", "space_to_depth", "in.npy"], "run"),             # OUTPUT.npy missing
    (["run", "space_to_depth", "a.npy", "b.npy", "--engine", "cuda"], "run"),
    (["run-model", EXAMPLE_MODEL, "-i", "data=x.npy"], "run-model"),   # -o missing
    (["run-model", EXAMPLE_MODEL, "-o", "o.npz", "--engine", "cuda"], "run-model"),
    (["run-model", EXAMPLE_MODEL, "-o", "o.npz", "--quiet", "--progress"], "run-model"),
    (["run", EXAMPLE_MODEL, "-i", "data=x.npy"], "run-model"),   # the former spelling of run-model
    (["shape", "space_to_depth"], "shape"),                   # --shape missing
    (["check"], "check"),
    (["inspect"], "inspect"),
    (["verify"], "verify"),
    (["info", "--yaml"], "info"),
])
def test_usage_errors_point_to_their_own_commands_help(capsys, monkeypatch, argv, command):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    status, out, err = run_cli(capsys, *argv)
    error = err.splitlines()[-1]  # after the former spelling's warning
    assert status == 2 and out == ""
    assert error.startswith("datamove: error: ") and error.endswith(f"(see 'datamove {command} --help')"), err


def test_engine_choices_are_the_engine_registry(capsys):
    from datamove.engines.route import ENGINES

    choices = "{" + ",".join(["auto", *ENGINES]) + "}"
    for command in ("run", "run-model", "bench"):
        assert f"--engine {choices}" in run_cli(capsys, command, "--help")[1], command
    status, _, err = run_cli(capsys, "run", "space_to_depth", "a.npy", "b.npy", "--engine", "cuda")
    assert status == 2 and "invalid choice: 'cuda' (choose from " + ", ".join(
        repr(name) for name in ("auto", *ENGINES)) + ")" in err


def test_run_model_is_its_own_command_and_the_former_spelling_still_runs(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.arange(5 * 7 * 4 * 6, dtype=np.float32).reshape(5, 7, 4, 6))
    runs = {}
    for command in ("run-model", "run"):
        output = tmp_path / f"{command}.npz"
        status, out, err = run_cli(capsys, command, EXAMPLE_MODEL, "-i", f"data={tmp_path / 'x.npy'}", "-o", str(output))
        assert status == 0 and out.endswith(": output: [5, 28, 2, 3] float32\n"), (out, err)
        with np.load(output) as saved:
            runs[command] = (saved["output"], err)
    assert np.array_equal(runs["run"][0], runs["run-model"][0])
    assert runs["run-model"][1] == ""
    assert runs["run"][1] == ("datamove: warning: 'datamove run MODEL.xml' is now 'datamove run-model MODEL.xml'; "
                              "the old spelling will be removed\n")


def test_shape_help_documents_the_notation(capsys):
    out = run_cli(capsys, "shape", "--help")[1]
    for text in ("? or -1", "2..8", "4..", "..8", "*", "rank included",
                 "--block-shape", "--crops-begin", "--crops-end", "--pads-begin", "--pads-end", "--mode",
                 "--block-size", "BatchToSpace"):
        assert text in out, text


def test_version(capsys):
    status, out, _ = run_cli(capsys, "--version")
    assert status == 0 and out.strip() == f"datamove {dm.__version__}"


def test_main_reads_sys_argv(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["datamove", "shape", "space_to_batch", "--shape", "2,6,10,3,3", *S2B_5D])
    assert main() == 0
    assert capsys.readouterr().out == "[48, 3, 3, 1, 3]\n"


def test_python_dash_m_datamove_for_real(tmp_path):
    command = [sys.executable, "-m", "datamove", "shape", "BatchToSpace", "--shape", "48,3,3,1,3", *B2S_5D]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[2, 6, 10, 3, 3]\n", "")
    done = subprocess.run([sys.executable, "-m", "datamove", "run", "batch_to_space", str(tmp_path / "none.npy"),
                           str(tmp_path / "out.npy"), *B2S_OK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("datamove: error: cannot read ") and done.stderr.count("\n") == 1


def test_import_datamove_does_not_import_the_cli():
    code = "import sys, datamove; print('datamove.cli.app' in sys.modules, 'argparse' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[0] == "False", done.stderr
