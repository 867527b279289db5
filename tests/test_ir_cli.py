"""``datamove check MODEL.xml`` and ``datamove run MODEL.xml -i NAME=FILE.npy -o OUT.npz``."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import datamove as dm
from datamove.cli.app import main

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ir"


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.startswith("datamove: error: ") and captured.err.count("\n") == 1, captured.err
    return captured.err


@pytest.mark.parametrize("name", ["batch_to_space_2d", "batch_to_space_5d", "space_to_batch", "space_to_depth"])
def test_check_the_examples_exit_0(capsys, name):
    assert main(["check", str(EXAMPLES / f"{name}.xml")]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("OK: every recorded shape agrees with the inferred one")


def test_check_a_disagreement_exits_1_showing_both_shapes(capsys):
    assert main(["check", str(EXAMPLES / "batch_to_space_2d_wrong.xml")]) == 1
    out = capsys.readouterr().out
    assert "recorded [2, 9], inferred [2, 8]" in out and "BatchToSpace" in out and "FAILED" in out


def test_check_with_another_bin_reads_its_constants(capsys):
    # the 5-D model's weights give the 2-D BatchToSpace block_shape [1, 2] and crops_begin [4, 3]: invalid
    assert main(["check", str(EXAMPLES / "batch_to_space_2d.xml"), "--bin", str(EXAMPLES / "space_to_batch.bin")]) \
        == 1
    out = capsys.readouterr().out
    assert "invalid: layer 4" in out and "BatchToSpace" in out


def test_check_hostile_and_missing_files_exit_2_with_one_line(capsys, tmp_path):
    hostile = tmp_path / "laughs.xml"
    hostile.write_text('<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaa">]><net version="11">&a;</net>')
    assert main(["check", str(hostile)]) == 2
    assert "DTD" in _one_error_line(capsys)
    assert main(["check", str(tmp_path / "absent.xml")]) == 2
    assert "cannot read" in _one_error_line(capsys)
    assert main(["check", str(EXAMPLES / "batch_to_space_2d.xml"), "--bin", str(tmp_path / "absent.bin")]) == 2
    assert "cannot be read" in _one_error_line(capsys)


def test_run_model_saves_an_npz_equal_to_the_ops(capsys, tmp_path):
    x = np.arange(48 * 3 * 3 * 1 * 3, dtype=np.float32).reshape(48, 3, 3, 1, 3)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    assert main(["run-model", str(EXAMPLES / "batch_to_space_5d.xml"), "-i", f"data={tmp_path / 'x.npy'}", "-o",
                 str(out)]) == 0
    assert "output: [2, 6, 10, 3, 3] float32" in capsys.readouterr().out
    with np.load(out) as saved:
        assert list(saved) == ["output"]
        expected = dm.batch_to_space(x, [1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0])
        assert np.array_equal(saved["output"], expected)


def test_run_model_output_name_is_exact_and_may_be_called_file(tmp_path):
    from datamove.cli.models import _save_npz

    with open(tmp_path / "o.data", "wb") as file:
        _save_npz(file, {"file": np.arange(3)})
    with np.load(tmp_path / "o.data") as saved:
        assert saved["file"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("argv, match", [
    (["-i", "data=X"], "does not exist|cannot read|No such file"),
    (["-i", "nope=X"], "not a Parameter"),
    (["-i", "dataX"], "NAME=FILE.npy"),
    ([], "missing input"),
    (["-i", "data=WRONG"], "dtype float64"),
])
def test_run_model_errors_are_one_line_exit_2(capsys, tmp_path, argv, match):
    np.save(tmp_path / "x.npy", np.zeros((5, 7, 4, 6), np.float32))
    np.save(tmp_path / "wrong.npy", np.zeros((5, 7, 4, 6)))
    argv = [a.replace("=X", f"={tmp_path / 'x.npy'}").replace("WRONG", str(tmp_path / "wrong.npy")) for a in argv]
    if match.startswith("does not exist"):
        argv = ["-i", f"data={tmp_path / 'absent.npy'}"]
    code = main(["run-model", str(EXAMPLES / "space_to_depth.xml"), *argv, "-o", str(tmp_path / "o.npz")])
    assert code == 2
    error = _one_error_line(capsys)
    assert any(m in error for m in match.split("|")), error
    assert not (tmp_path / "o.npz").exists()


def test_run_op_form_still_works_next_to_the_model_form(capsys, tmp_path):
    np.save(tmp_path / "in.npy", np.arange(20).reshape(10, 2))
    assert main(["run", "BatchToSpace", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--block-shape", "1,5",
                 "--crops-begin", "0,2", "--crops-end", "0,0"]) == 0
    assert np.load(tmp_path / "out.npy").shape == (2, 8)
    capsys.readouterr()


def test_run_model_help(capsys):
    assert main(["run-model", str(EXAMPLES / "space_to_depth.xml"), "--help"]) == 0
    assert "NAME=FILE.npy" in capsys.readouterr().out
    assert main(["check", "--help"]) == 0
    assert "exit status" in capsys.readouterr().out


def test_is_model_run():
    from datamove.cli.models import is_model_run

    assert is_model_run(["run", "--engine", "numpy", "m.XML", "-o", "o.npz"])
    assert not is_model_run(["run", "space_to_depth", "a.npy", "b.npy"])
    assert not is_model_run(["shape", "m.xml"])
    assert is_model_run(["run", str(EXAMPLES / "space_to_depth.xml")])
    assert not is_model_run(["run-model", str(EXAMPLES / "space_to_depth.xml")])


def test_datamove_check_for_real():
    done = subprocess.run([sys.executable, "-m", "datamove", "check", str(EXAMPLES / "batch_to_space_2d_wrong.xml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "recorded [2, 9]" in done.stdout and done.stderr == ""
