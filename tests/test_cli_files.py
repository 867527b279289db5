"""Files are never lost: every output is written whole or not at all (issue: reliability).

Failed writes are provoked with a file-size limit (RLIMIT_FSIZE) on the
command run in a subprocess, never by writing to a device.
"""

from __future__ import annotations

import os
import pathlib
import re
import stat
import subprocess
import sys

import numpy as np
import pytest

from datamove import DataMoveError
from datamove.cli.app import main
from datamove.cli.files import write_atomically
from datamove.ir import read_model

from ir_builders import IR

resource = pytest.importorskip("resource")

B2S = ["--block-shape", "1,2,2,1", "--crops-begin", "0,0,0,0", "--crops-end", "0,0,0,0"]


def snapshot(folder: pathlib.Path):
    return {p.name: (p.read_bytes(), p.stat().st_mode) for p in sorted(folder.iterdir()) if p.is_file()}


def run_limited(args, limit_bytes, cwd):
    """``python -m datamove ARGS`` with files limited to ``limit_bytes`` (set in the child: no fork here)."""
    limit = "resource.RLIM_INFINITY" if limit_bytes == resource.RLIM_INFINITY else str(limit_bytes)
    code = (f"import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
            "sys.argv[0] = 'datamove'; runpy.run_module('datamove', run_name='__main__', alter_sys=True)")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def one_line_error(result, *match):
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.startswith("datamove: error: ") and result.stderr.count("\n") == 1, result.stderr
    for text in match:
        assert text in result.stderr, result.stderr


def identity_model(folder: pathlib.Path, const_bytes: int = 0, shape=(8, 16, 16, 4)) -> pathlib.Path:
    """Parameter -> Result (and a Const -> Result of ``const_bytes`` bytes): outputs that are inputs."""
    ir = IR()
    ir.result(ir.parameter("data", shape), output_name="same")
    if const_bytes:
        ir.const(np.arange(const_bytes // 4, dtype=np.float32), "weights")
        ir.result((len(ir.layers) - 1, 0), output_name="weights")
    return ir.write(folder)


# ------------------------------------------------------------------ outputs that were inputs


def test_run_model_output_over_its_own_input(tmp_path, capsys):
    model = identity_model(tmp_path)
    x = np.random.default_rng(0).standard_normal((8, 16, 16, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "x.npy")]) == 0
    with np.load(tmp_path / "x.npy") as saved:  # an .npz now, holding the input whole
        np.testing.assert_array_equal(saved["same"], x)


def test_run_model_output_over_its_weights(tmp_path):
    model = identity_model(tmp_path, const_bytes=2 << 20)  # memory-mapped from the .bin
    x = np.ones((8, 16, 16, 4), np.float32)
    np.save(tmp_path / "x.npy", x)
    weights = np.arange((2 << 20) // 4, dtype=np.float32)
    assert main(["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "model.bin")]) == 0
    with np.load(tmp_path / "model.bin") as saved:
        np.testing.assert_array_equal(saved["weights"], weights)
        np.testing.assert_array_equal(saved["same"], x)


def test_model_run_outputs_never_alias_inputs_or_weights(tmp_path):
    ir = IR()
    data = ir.parameter("data", (2, 4, 4, 1))
    weights = ir.const(np.arange(1 << 18, dtype=np.float32), "weights")  # 1 MiB: memory-mapped
    ir.result(data, output_name="a")
    ir.result(data, output_name="b")
    ir.result(weights, output_name="w")
    model = read_model(ir.write(tmp_path))
    x = np.zeros((2, 4, 4, 1), np.float32)
    out = model.run({"data": x})
    assert not any(np.shares_memory(out[k], x) for k in "ab") and not np.shares_memory(out["a"], out["b"])
    assert type(out["w"]) is np.ndarray and out["w"].flags.writeable and out["w"].base is None
    out["a"][...] = 1
    assert not x.any() and not out["b"].any()
    with pytest.raises(DataMoveError, match="max_bytes"):  # the copies count against the bound
        model.run({"data": x}, max_bytes=2 * x.nbytes)


# ------------------------------------------------------------------ failed writes change nothing


def test_failed_write_keeps_the_input_it_replaces(tmp_path):
    x = np.arange(4 * 64 * 64 * 8, dtype=np.float32).reshape(4, 64, 64, 8)
    np.save(tmp_path / "x.npy", x)
    before = snapshot(tmp_path)
    result = run_limited(["run", "batch_to_space", "x.npy", "x.npy", *B2S], 64 << 10, tmp_path)
    one_line_error(result, "cannot write x.npy", "no file was changed")
    assert snapshot(tmp_path) == before  # no temporary left either


def test_failed_write_of_a_new_file_leaves_nothing(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((4, 64, 64, 8), np.float32))
    before = snapshot(tmp_path)
    one_line_error(run_limited(["run", "batch_to_space", "x.npy", "new.npy", *B2S], 64 << 10, tmp_path))
    model = identity_model(tmp_path, shape=(4, 64, 64, 8))
    before = snapshot(tmp_path)
    one_line_error(run_limited(["run-model", model.name, "-i", "data=x.npy", "-o", "out.npz"], 64 << 10, tmp_path),
                   "cannot write out.npz")
    one_line_error(run_limited(["run-model", model.name, "-i", "data=x.npy", "-o", "x.npy"], 64 << 10, tmp_path),
                   "cannot write x.npy")
    assert snapshot(tmp_path) == before


def test_the_limit_is_what_fails(tmp_path):
    """The same commands succeed without the limit: the tests above fail for the right reason."""
    np.save(tmp_path / "x.npy", np.zeros((4, 64, 64, 8), np.float32))
    result = run_limited(["run", "batch_to_space", "x.npy", "x.npy", *B2S], resource.RLIM_INFINITY, tmp_path)
    assert result.returncode == 0, result.stderr
    assert np.load(tmp_path / "x.npy").shape == (1, 128, 128, 8)


# ------------------------------------------------------------------ targets


def test_special_files_are_refused_as_targets(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((4, 2, 2, 1), np.float32))
    os.mkfifo(tmp_path / "fifo")  # opening it to write would block forever
    (tmp_path / "folder").mkdir()
    before = snapshot(tmp_path)
    for target, kind in ((tmp_path / "fifo", "a FIFO"), (tmp_path / "folder", "a directory"),
                         ("/dev/null", "a character device")):
        assert main(["run", "batch_to_space", str(tmp_path / "x.npy"), str(target), *B2S]) == 2
        err = capsys.readouterr().err
        assert f"it is {kind}" in err and err.count("\n") == 1, err
        with pytest.raises(DataMoveError, match=kind):
            write_atomically(target, lambda file: file.write(b"never"))
    assert snapshot(tmp_path) == before
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)


def test_a_missing_directory_is_refused_before_the_work(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((4, 2, 2, 1), np.float32))
    model = identity_model(tmp_path, shape=(4, 2, 2, 1))
    for argv in (["run", "batch_to_space", str(tmp_path / "x.npy"), str(tmp_path / "no" / "y.npy"), *B2S],
                 ["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "no" / "y.npz")]):
        assert main(argv) == 2
        assert "No such file or directory" in capsys.readouterr().err


def test_a_symlink_target_keeps_the_link_and_the_mode(tmp_path):
    real = tmp_path / "real.npy"
    np.save(real, np.zeros((4, 2, 2, 1), np.float32))
    os.chmod(real, 0o640)
    link = tmp_path / "link.npy"
    link.symlink_to(real)
    assert main(["run", "batch_to_space", str(link), str(link), *B2S]) == 0
    assert link.is_symlink() and np.load(real).shape == (1, 4, 4, 1)
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.npy", "real.npy"]


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomically(tmp_path / "new", lambda file: file.write(b"x"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o640


def test_an_error_inside_the_writer_changes_nothing(tmp_path):
    target = tmp_path / "keep"
    target.write_bytes(b"old")

    def half(file):
        file.write(b"partial")
        raise RuntimeError("encoder failed")

    with pytest.raises(RuntimeError):
        write_atomically(target, half)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["keep"]


# ------------------------------------------------------------------ output names and the memory bound


@pytest.mark.parametrize("name, problem", [
    ("a\nb", "control characters"),
    ("../../x", "relative path"),
    ("/etc/x", "relative path"),
    ("a//b", "relative path"),
    ("a\\b", "relative path"),
    ("n" * 70000, "longer than 4096 bytes"),
])
def test_output_names_an_archive_cannot_hold_are_refused(tmp_path, capsys, name, problem):
    ir = IR()
    ir.result(ir.parameter("data", (4, 2, 2, 1)))
    attribute = name.replace("\n", "&#10;")  # a plain newline in an attribute is read as a space
    ir.layers[-1] = ir.layers[-1].replace("<layer ", f'<layer output_names="{attribute}" ', 1)
    model = ir.write(tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((4, 2, 2, 1), np.float32))
    assert main(["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out.npz")]) == 2
    err = capsys.readouterr().err
    assert problem in err and err.count("\n") == 1 and len(err) < 400, err[:500]
    assert not (tmp_path / "out.npz").exists()


def test_names_with_slashes_inside_are_kept(tmp_path, capsys):
    ir = IR()
    ir.result(ir.parameter("data", (4, 2, 2, 1)), output_name="model/conv1/BiasAdd:0")
    model = ir.write(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((4, 2, 2, 1), np.float32))
    assert main(["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["model/conv1/BiasAdd:0"].sum() == 16


def padding_bomb(folder: pathlib.Path, pad: int) -> pathlib.Path:
    """A 16-byte input that SpaceToBatch pads to ``(pad + 2) ** 2 * 4`` bytes."""
    ir = IR()
    data = ir.parameter("data", (1, 2, 2, 1))
    block = ir.const(np.array([1, 1, 1, 1]))
    zero = ir.const(np.array([0, 0, 0, 0]))
    pads = ir.const(np.array([0, pad, pad, 0]))
    ir.result(ir.op("SpaceToBatch", [data, block, zero, pads]), output_name="out")
    return ir.write(folder)


def test_run_model_has_a_default_memory_bound(tmp_path, capsys):
    model = padding_bomb(tmp_path, 16384)  # 1 GiB from 16 bytes
    np.save(tmp_path / "x.npy", np.ones((1, 2, 2, 1), np.float32))
    argv = ["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out.npz")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "max_bytes = 268435456" in err and "--max-bytes" in err, err
    assert main([*argv, "--max-bytes", "64K"]) == 2
    assert "max_bytes = 65536" in capsys.readouterr().err
    assert not (tmp_path / "out.npz").exists()
    small = padding_bomb(tmp_path, 100)
    assert main(["run-model", str(small), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out.npz"),
                 "--max-bytes", "none"]) == 0
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["out"].shape == (1, 102, 102, 1) and saved["out"].sum() == 4


@pytest.mark.parametrize("text", ["-1", "1.5G", "lots", "1Q", "9" * 5000, ""])
def test_max_bytes_option_is_validated(tmp_path, capsys, text):
    model = padding_bomb(tmp_path, 1)
    np.save(tmp_path / "x.npy", np.ones((1, 2, 2, 1), np.float32))
    assert main(["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "o.npz"),
                 f"--max-bytes={text}"]) == 2
    err = capsys.readouterr().err
    assert "--max-bytes" in err and err.count("\n") == 1 and len(err) < 300, err


@pytest.mark.parametrize("value, error", [
    ("1000", TypeError), (float("nan"), TypeError), (True, TypeError), (1e9, TypeError), (-1, DataMoveError),
])
def test_model_run_max_bytes_is_validated(tmp_path, value, error):
    model = read_model(padding_bomb(tmp_path, 1))
    with pytest.raises(error, match="max_bytes must be a non-negative integer"):
        model.run({"data": np.ones((1, 2, 2, 1), np.float32)}, max_bytes=value)
    assert model.run({"data": np.ones((1, 2, 2, 1), np.float32)}, max_bytes=np.int64(64))["out"].shape == (1, 3, 3, 1)


# ------------------------------------------------------------------ hostile headers, numbers and shapes: one line


def write_npy_header(path: pathlib.Path, shape, descr="<f4", data=b"\0" * 64):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data)


@pytest.mark.parametrize("shape", [(2**60, 2), (2**40, 2**40), (3, 5, 7, 9)])
def test_a_header_promising_more_than_the_file_holds(tmp_path, shape):
    write_npy_header(tmp_path / "x.npy", shape)
    result = subprocess.run([sys.executable, "-W", "default", "-m", "datamove", "run", "space_to_depth", "x.npy",
                             "y.npy", "--mode", "blocks_first", "--block-size", "2"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    one_line_error(result, "x.npy is not a readable .npy file", "its header says shape")
    assert not (tmp_path / "y.npy").exists()


def test_huge_command_line_numbers_and_ranks_are_one_line(capsys):
    huge = "9" * 5000
    for argv, match in (
        (["shape", "space_to_depth", "--shape", "1,2,4,4", "--mode", "blocks_first", f"--block-size={huge}"],
         "--block-size: an integer of 5000 digits does not fit in int64"),
        (["shape", "batch_to_space", "--shape", "2,2", f"--block-shape=1,{huge}", "--crops-begin", "0,0",
          "--crops-end", "0,0"], "--block-shape[1]: an integer of 5000 digits"),
        (["shape", "space_to_batch", "--shape", "2,2", "--block-shape", "1,1", "--pads-begin", "0,0",
          f"--pads-end=0,-{huge}"], "--pads-end[1]: an integer of 5000 digits"),
        (["shape", "space_to_depth", "--shape", ",".join(["1"] * 20_000), "--mode", "blocks_first", "--block-size",
          "2"], "block_size ** 19998 = about 2 ** 19998 does not fit in int64"),
        (["shape", "space_to_depth", "--shape", f"1,2,{huge},4", "--mode", "blocks_first"], "--shape dim 2"),
    ):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert match in captured.err and captured.err.count("\n") == 1 and len(captured.err) < 300, captured.err[:400]


def test_a_small_failed_write_is_caught_too(tmp_path):
    """NumPy writes through C stdio, which can drop the error of a write smaller than its buffer."""
    np.save(tmp_path / "x.npy", np.arange(256, dtype=np.float32).reshape(2, 8, 4, 4))
    np.save(tmp_path / "o.npy", np.zeros(3))
    before = snapshot(tmp_path)
    args = ["run", "space_to_depth", "x.npy", "o.npy", "--mode", "blocks_first", "--block-size", "2"]
    one_line_error(run_limited(args, 1024, tmp_path), "cannot write o.npy", "short write")
    assert snapshot(tmp_path) == before


def test_read_model_takes_str_bytes_and_path_like(tmp_path):
    model = identity_model(tmp_path, shape=(4, 2, 2, 1))
    for path in (str(model), bytes(model), model):
        assert [layer.type for layer in read_model(path).layers] == ["Parameter", "Result"]
    with pytest.raises(TypeError, match="xml_path must be a path"):
        read_model(3)


# ------------------------------------------------------------------ outputs as .npy memory maps in a folder


def s2d_model(folder: pathlib.Path, shape=(4, 8, 64, 64), extra_result=False) -> pathlib.Path:
    ir = IR()
    data = ir.parameter("data", shape)
    s2d = ir.op("SpaceToDepth", [data], {"mode": "blocks_first", "block_size": "2"}, output_name="model/packed")
    ir.result(s2d)
    if extra_result:
        ir.result(data, output_name="same")
    return ir.write(folder)


def test_a_folder_gets_one_npy_per_output(tmp_path, capsys):
    model = s2d_model(tmp_path, extra_result=True)
    x = np.random.default_rng(1).standard_normal((4, 8, 64, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out") + "/"]) == 0
    assert "model/packed: [4, 32, 32, 32] float32" in capsys.readouterr().out
    from datamove import space_to_depth

    np.testing.assert_array_equal(np.load(tmp_path / "out" / "model" / "packed.npy"), space_to_depth(x, "blocks_first", 2))
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "same.npy"), x)
    leftovers = [p.name for p in (tmp_path / "out").rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers


def test_a_folder_output_is_never_held_in_memory(tmp_path):
    import tracemalloc

    model = s2d_model(tmp_path, shape=(4, 16, 256, 256))  # 16 MiB
    np.save(tmp_path / "x.npy", np.ones((4, 16, 256, 256), np.float32))
    peaks = {}
    for target in ("out.npz", "out/"):
        tracemalloc.start()
        try:
            output = str(tmp_path / "out") + ("/" if target.endswith("/") else ".npz")  # pathlib drops a final /
            assert main(["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", output]) == 0
            peaks[target] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    # measured: 32.5 MiB for the .npz (the output, then its bytes for the archive), 1.1 MiB for the folder
    assert peaks["out.npz"] > 16 << 20 > 8 * peaks["out/"], peaks


def test_a_failed_folder_write_changes_nothing(tmp_path):
    model = s2d_model(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((4, 8, 64, 64), np.float32))
    (tmp_path / "out" / "model").mkdir(parents=True)
    np.save(tmp_path / "out" / "model" / "packed.npy", np.zeros(3))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = run_limited(["run-model", model.name, "-i", "data=x.npy", "-o", "out/"], 256 << 10, tmp_path)
    one_line_error(result, "cannot write out/", "no output file was changed")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_the_progress_counts_bytes_shows_the_time_left_and_only_when_slow(capsys):
    from datamove.cli.models import _Progress
    from datamove.ir.model import Layer

    layer = Layer(3, "b2s", "BatchToSpace", "opset2", {}, (), (), {})
    now = [0.0]
    progress = _Progress(True)
    progress.start, progress.clock = 0.0, lambda: now[0]
    progress(0, 128 << 20, layer)
    assert capsys.readouterr().err == ""  # the first half second is silent
    now[0] = 0.6
    progress(0, 128 << 20, layer)
    assert capsys.readouterr().err == ("\rdatamove run-model: [                        ] 0 B of 128.0 MiB, "
                                       "time left unknown yet (BatchToSpace)\x1b[K")
    now[0] = 1.0  # a quarter of the bytes in a second: three seconds left
    progress(32 << 20, 128 << 20, layer)
    assert capsys.readouterr().err == ("\rdatamove run-model: [######                  ] 32.0 MiB of 128.0 MiB, "
                                       "0:03 left (BatchToSpace)\x1b[K")
    progress(128 << 20, 128 << 20, None)
    assert capsys.readouterr().err == "\r\x1b[K"
    quiet = _Progress(False)
    quiet.clock = lambda: 10.0
    quiet(1, 4, layer)
    assert capsys.readouterr().err == ""


def b2s_convert_model(folder: pathlib.Path) -> pathlib.Path:
    """float32 [8, 2, 4, 4] -> BatchToSpace (2 x 2 block, crops of 1 on H) -> Convert to f64 -> Result.

    The bytes written: 768 by BatchToSpace ([2, 2, 6, 8] float32), 1,536 by the Convert; none by the rest.
    """
    ir = IR()
    data = ir.parameter("data", (8, 2, 4, 4))
    params = [ir.const(np.array(v, np.int64)) for v in ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 0])]
    b2s = ir.op("BatchToSpace", [data, *params])
    ir.result(ir.op("Convert", [b2s], {"destination_type": "f64"}), output_name="wide")
    return ir.write(folder)


def test_a_models_progress_is_the_bytes_its_layers_write(tmp_path):
    model = read_model(b2s_convert_model(tmp_path))
    calls = []
    outputs = model.run({"data": np.ones((8, 2, 4, 4), np.float32)},
                        progress=lambda done, total, layer: calls.append((done, total, layer and layer.type)))
    assert outputs["wide"].nbytes == 1536
    assert calls == [(0, 2304, "Parameter"), (0, 2304, "Const"), (0, 2304, "Const"), (0, 2304, "Const"),
                     (0, 2304, "BatchToSpace"), (768, 2304, "Convert"), (2304, 2304, "Result"), (2304, 2304, None)]


def test_run_model_shows_its_progress_when_asked(tmp_path, capsys, monkeypatch):
    from datamove.cli import models as commands

    model = b2s_convert_model(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((8, 2, 4, 4), np.float32))
    argv = ["run-model", str(model), "-i", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out.npz")]
    monkeypatch.setattr(commands._Progress, "DELAY", 0.0)  # a run this small takes far less than half a second
    for options in ([], ["--quiet"]):  # stderr is not a terminal here: no progress unless asked
        assert main([*argv, *options]) == 0
        assert capsys.readouterr().err == ""
    assert main([*argv, "--progress"]) == 0
    redraws = capsys.readouterr().err.split("\r")
    assert redraws[0] == "" and redraws[-1] == "\x1b[K"  # each line drawn over the last, the last one cleared
    shown = [re.fullmatch(r"datamove run-model: \[(#*) *\] (.+) of 2.2 KiB, (.+) \((\w+)\)\x1b\[K", line)
             for line in redraws[1:-1]]
    assert all(shown), redraws
    assert [(m[1], m[2], m[4]) for m in shown] == [
        ("", "0 B", "Parameter"), ("", "0 B", "Const"), ("", "0 B", "Const"), ("", "0 B", "Const"),
        ("", "0 B", "BatchToSpace"), ("#" * 8, "768 B", "Convert"), ("#" * 24, "2.2 KiB", "Result")]
    assert shown[0][3] == "time left unknown yet" and re.fullmatch(r"\d+:\d\d left", shown[-1][3])
