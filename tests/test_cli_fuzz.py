"""Fuzzing the ``datamove`` command line: random arguments over random, truncated and corrupt files.

The contract (see tests/cli_fuzz_cases.py for how each point is checked):

- every failing command prints exactly one line on stderr, starting with
  ``datamove: error: ``, no traceback, no Python warning, no control character
  but the final newline, under 2000 characters, and exits with 2 (``check``
  with 1 when the model disagrees with itself or breaks a rule: 0, 1 and 2 are
  its only statuses);
- no existing file is changed (bytes, mtime), removed or added, unless the
  command succeeded and the file is its named output;
- a command that succeeded wrote its output whole: a readable ``.npy`` equal
  to the library's result (``run OP``) or a readable ``.npz`` (``run MODEL.xml``),
  and printed one clean line.

Most commands run in this process (``datamove.cli.app.main``), a few in a real
``python -m datamove`` to see the real exit status and streams. Every run is
reproducible: a seed names the files and the command lines. On a failure the
assertion message lists each failure class once, with its shortest example.

A longer run: ``DATAMOVE_CLI_FUZZ_SEEDS=500 python -m pytest tests/test_cli_fuzz.py -k many_seeds``.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cli_fuzz_cases as cases

#: The default run: SEEDS x COMMANDS random commands in-process (about 10 ms each).
SEEDS = 10
COMMANDS = 80
#: DATAMOVE_CLI_FUZZ_SEEDS=N runs N more seeds (test_cli_fuzz_many_seeds, marked slow).
EXTRA_SEEDS = int(os.environ.get("DATAMOVE_CLI_FUZZ_SEEDS", "0") or 0)

FUZZ_SETTINGS = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                HealthCheck.data_too_large])


def assert_no_violations(found):
    assert not found, cases.summarise(found)


# ------------------------------------------------------------------ random commands, in-process


@pytest.mark.parametrize("seed", range(SEEDS))
def test_cli_fuzz(tmp_path, seed):
    found, _ = cases.fuzz_seed(seed, tmp_path, COMMANDS)
    assert_no_violations(found)


@pytest.mark.slow
@pytest.mark.skipif(EXTRA_SEEDS <= 0, reason="set DATAMOVE_CLI_FUZZ_SEEDS=N for N more seeds")
def test_cli_fuzz_many_seeds(tmp_path):
    found = []
    for seed in range(1000, 1000 + EXTRA_SEEDS):
        violations, _ = cases.fuzz_seed(seed, tmp_path / str(seed), 100)
        found += violations
    assert_no_violations(found)


def test_the_fuzzer_reaches_every_command_and_both_outcomes(tmp_path):
    """The generator is not all noise: each kind of command both succeeds and fails somewhere."""
    stats = {}
    for seed in range(3):
        _, counts = cases.fuzz_seed(seed, tmp_path / str(seed), COMMANDS)
        for key, count in counts.items():
            stats[key] = stats.get(key, 0) + count
    for kind in ("shape", "run_op", "check", "run_ir"):
        assert stats.get(f"{kind}:0", 0) > 0, stats
        assert stats.get(f"{kind}:2", 0) > 0, stats


# ------------------------------------------------------------------ hypothesis: argv and .npy headers

TOKENS = st.one_of(
    st.sampled_from(cases.WEIRD),
    st.sampled_from(["--shape", "--block-shape", "--crops-begin", "--crops-end", "--pads-begin", "--pads-end",
                     "--mode", "--block-size", "--engine", "--", "-", "--shape=", "--mode=", "--block-size="]),
    st.sampled_from(cases.OPS + list(cases.OPENVINO.values())),
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=12),
    st.integers(-(2**70), 2**70).map(str),
    st.lists(st.integers(-3, 9).map(str), max_size=7).map(",".join),
)


@pytest.fixture(scope="module")
def empty_pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_fuzz_empty")
    (root / "w").mkdir()
    return cases.Pool(root, root / "w", {}, {}, [])


@FUZZ_SETTINGS
@given(st.lists(TOKENS, max_size=9))
def test_shape_command_on_random_tokens(empty_pool, tokens):
    command = cases.Command(["shape", *tokens], "shape")
    _, found = cases.run_one(command, empty_pool)
    assert_no_violations(found)


@FUZZ_SETTINGS
@given(st.sampled_from(cases.OPS), st.lists(TOKENS, max_size=9))
def test_shape_command_with_an_op_on_random_tokens(empty_pool, op, tokens):
    command = cases.Command(["shape", op, *tokens], "shape")
    _, found = cases.run_one(command, empty_pool)
    assert_no_violations(found)


SHAPES = st.one_of(
    st.lists(st.integers(0, 2**64), max_size=5).map(lambda dims: repr(tuple(dims))),
    st.lists(st.sampled_from([2**60, 2**62, 2**63 - 1, 3037000500, 65536, 0, 1, -1]), max_size=4)
    .map(lambda dims: repr(tuple(dims))),
    st.sampled_from(["()", "[2, 2]", "None", "(1.5,)", "('a',)", "(True,)", "(" + "1, " * 65 + ")"]),
)
DESCRS = st.sampled_from(["'<f4'", "'|b1'", "'<c16'", "'>i8'", "'|O'", "'<U3'", "'|S0'", "'V0'", "'<M8[s]'",
                          "'<m8[Y]'", "[('a', '<i4'), ('b', '<f8')]", "[('a', '|O')]", "'zz'", "7", "'<U0'",
                          "[('a', '<i4', (2, 3))]", "'<f4' * 3", "'<f2'"])


@FUZZ_SETTINGS
@given(DESCRS, st.sampled_from(["False", "True", "'x'", "0"]), SHAPES, st.integers(0, 200),
       st.sampled_from([(1, 0), (2, 0), (3, 0)]), st.sampled_from(cases.OPS))
def test_run_on_hypothesis_npy_headers(empty_pool, descr, fortran, shape, data_bytes, version, op):
    path = empty_pool.cwd / "h.npy"
    path.write_bytes(cases.npy_bytes(cases._header(descr, fortran, shape), b"\x01" * data_bytes, version))
    params = (["--block-shape", "1,1", "--crops-begin", "0,0", "--crops-end", "0,0"] if op == "batch_to_space"
              else ["--block-shape", "1,1", "--pads-begin", "0,0", "--pads-end", "0,0"] if op == "space_to_batch"
              else ["--mode", "blocks_first"])
    command = cases.Command(["run", op, "h.npy", "o.npy", *params], "run_op", "o.npy")
    _, found = cases.run_one(command, empty_pool)
    for leftover in ("h.npy", "o.npy"):
        (empty_pool.cwd / leftover).unlink(missing_ok=True)
    assert_no_violations(found)


# ------------------------------------------------------------------ targeted cases: each failure class once

HUGE = "9" * 5000
LEADING_ZEROS = "0" * 5000 + "2"


def _pool(tmp_path):
    return cases.build_pool(random.Random(0), tmp_path, corrupt_npys=0, mutated_irs=0)


def _write_npy_header(pool, name, header):
    (pool.cwd / name).write_bytes(cases.npy_bytes(header, b"\x00" * 64))


def _write_xml(pool, name, transform):
    text = (cases.EXAMPLES / "space_to_depth.xml").read_text()
    (pool.cwd / name).write_text(transform(text))


S2D = ["--mode", "blocks_first", "--block-size", "2"]
B2S_11 = ["--block-shape", "1,1", "--crops-begin", "0,0", "--crops-end", "0,0"]

#: (id, setup(pool) or None, argv, kind, output, RLIMIT_FSIZE or None)
TARGETED = [
    ("5000-digit integer option", None,
     ["shape", "batch_to_space", "--shape", "2,2", "--block-shape", "1," + HUGE, "--crops-begin", "0,0",
      "--crops-end", "0,0"], "shape", None, None),
    ("5000-digit block size", None, ["run", "space_to_depth", "f32_4d.npy", "out.npy", "--mode", "blocks_first",
                                     "--block-size", HUGE], "run_op", "out.npy", None),
    ("integer with 5000 leading zeros", None,
     ["shape", "batch_to_space", "--shape", "8,4", "--block-shape", "1,2", "--crops-begin", "0,0",
      "--crops-end", "0," + LEADING_ZEROS], "shape", None, None),
    ("block size with 5000 leading zeros", None,
     ["shape", "space_to_depth", "--shape", "1,4,4,4", "--mode", "blocks_first", "--block-size", LEADING_ZEROS],
     "shape", None, None),
    ("20000 dims for space_to_depth", None,
     ["shape", "space_to_depth", "--shape", ",".join(["2"] * 20000), "--mode", "blocks_first", "--block-size", "2"],
     "shape", None, None),
    ("20000 dims for depth_to_space", None,
     ["shape", "depth_to_space", "--shape", ",".join(["2"] * 20000), "--mode", "blocks_first", "--block-size", "2"],
     "shape", None, None),
    ("20000-long block_shape", None,
     ["shape", "space_to_batch", "--shape", ",".join(["2"] * 20000), "--block-shape", ",".join(["2"] * 20000),
      "--pads-begin", ",".join(["0"] * 20000), "--pads-end", ",".join(["0"] * 20000)], "shape", None, None),
    ("option value '--' (argparse gives a list)", None,
     ["shape", "depth_to_space", "--shape", "1,4,2,2", "--mode=blocks_first", "--block-size=--"], "shape", None, None),
    ("vector option value '--'", None,
     ["shape", "space_to_batch", "--shape", "1,4", "--block-shape=--", "--pads-begin", "0,0", "--pads-end", "0,0"],
     "shape", None, None),
    ("output name with a newline", None, ["run", "space_to_depth", "f32_4d.npy", "out\nname.npy", *S2D],
     "run_op", "out\nname.npy", None),
    ("output name with an escape sequence", None, ["run", "space_to_depth", "f32_4d.npy", "esc\x1b[0m.npy", *S2D],
     "run_op", "esc\x1b[0m.npy", None),
    ("input name with a newline", None, ["run", "batch_to_space", "line\nbreak.npy", "out.npy", *B2S_11],
     "run_op", "out.npy", None),
    ("model output name with a newline", lambda pool: _write_xml(
        pool, "space_to_depth_nl.xml", lambda t: t.replace('output_names="output"', 'output_names="out&#10;put"')),
     ["run-model", "space_to_depth_nl.xml", "-i", "data=in_space_to_depth_data.npy", "-o", "out.npz"], "run_ir", "out.npz",
     None),
    ("output name that is not UTF-8 (surrogate escape), stdout strict UTF-8", None,
     ["run", "space_to_depth", "f32_4d.npy", "\udcffout.npy", *S2D], "run_op", "\udcffout.npy", None),
    ("model output file name that is not UTF-8", None,
     ["run-model", "space_to_depth.xml", "-i", "data=in_space_to_depth_data.npy", "-o", "\udcffout.npz"], "run_ir",
     "\udcffout.npz", None),
    ("3000-character command name", None, ["x" * 3000], "other", None, None),
    ("3000-character missing input name", None, ["run", "space_to_depth", "y" * 3000 + ".npy", "out.npy", *S2D],
     "run_op", "out.npy", None),
    ("3000-character missing model name", None, ["check", "q" * 3000 + ".xml"], "check", None, None),
    ("3000-character mode", None, ["shape", "space_to_depth", "--shape", "1,4,4,4", "--mode", "m" * 3000],
     "shape", None, None),
    ("3000-character unrecognised argument", None, ["shape", "space_to_depth", "--shape", "1,4,4,4", "z" * 3000],
     "shape", None, None),
    (".npy header with 2**62 x 2**62 elements", lambda pool: _write_npy_header(
        pool, "huge.npy", cases._header("'<f4'", "False", "(4611686018427387904, 4611686018427387904)")),
     ["run", "batch_to_space", "huge.npy", "out.npy", *B2S_11], "run_op", "out.npy", None),
    (".npy header with 2**60 elements", lambda pool: _write_npy_header(
        pool, "huge.npy", cases._header("'<f4'", "False", "(1152921504606846976, 16)")),
     ["run", "batch_to_space", "huge.npy", "out.npy", *B2S_11], "run_op", "out.npy", None),
    ("zip header that is not an .npz (unclosed file)", lambda pool: (pool.cwd / "pk.npy").write_bytes(b"PK\x03\x04"),
     ["run", "batch_to_space", "pk.npy", "out.npy", *B2S_11], "run_op", "out.npy", None),
    ("failing write over an existing output", None,
     ["run", "space_to_depth", "big_f64_4d.npy", "f32_4d.npy", *S2D], "run_op", "f32_4d.npy", 4096),
    ("failing write of a new output", None, ["run", "space_to_depth", "big_f64_4d.npy", "new.npy", *S2D],
     "run_op", "new.npy", 4096),
    ("short write (file-size limit inside the data)", None,
     ["run", "space_to_batch", "c128_3d.npy", "o.npy", "--block-shape", "1,2,3", "--pads-begin", "0,0,1",
      "--pads-end", "0,0,3"], "run_op", "o.npy", 200),
    ("short write of the input over itself", None,
     ["run", "space_to_depth", "big_f64_4d.npy", "big_f64_4d.npy", *S2D], "run_op", "big_f64_4d.npy", 200000),
    ("failing write of a model's .npz", None,
     ["run-model", "space_to_batch.xml", "-i", "data=in_space_to_batch_data.npy", "-o", "i64_2d.npy"], "run_ir",
     "i64_2d.npy", 300),
    ("short write of a model's .npz", None,
     ["run-model", "space_to_batch.xml", "-i", "data=in_space_to_batch_data.npy", "-o", "out.npz"], "run_ir",
     "out.npz", 3000),
    ("XML with an unknown encoding", lambda pool: _write_xml(
        pool, "enc.xml", lambda t: t.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="no-such"?>')),
     ["check", "enc.xml"], "check", None, None),
    ("XML with an unknown encoding, run", lambda pool: _write_xml(
        pool, "enc.xml", lambda t: t.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="no-such"?>')),
     ["run-model", "enc.xml", "-i", "data=in_space_to_depth_data.npy", "-o", "out.npz"], "run_ir", "out.npz", None),
    ("check --bin a directory", None, ["check", "convert.xml", "--bin", "sub"], "check", None, None),
    ("check --bin /dev/zero", None, ["check", "batch_to_space_2d.xml", "--bin", "/dev/zero"], "check", None, None),
    ("bench usage error", None, ["bench", "--no-such-option"], "other", None, None),
    ("--max-bytes value '--'", None,
     ["run-model", "space_to_depth.xml", "-i", "data=in_space_to_depth_data.npy", "-o", "out.npz", "--max-bytes=--"],
     "run_ir", "out.npz", None),
    ("3000-character model input name", None,
     ["run-model", "space_to_depth.xml", "-i", "a" * 3000 + "=in_space_to_depth_data.npy", "-o", "out.npz"], "run_ir",
     "out.npz", None),
    ("model file named with an escape sequence, not XML", None, ["check", "esc\x1b[31m.npy"], "check", None, None),
    ("check of a model named with an escape sequence", None, ["check", "esc\x1b[31m.xml"], "check", None, None),
    ("check of a model whose name is not UTF-8", None, ["check", "\udcff.xml"], "check", None, None),
    ("tab in an unrecognised argument", None, ["shape", "space_to_depth", "--shape", "1,4,4,4", "\t1\t"], "shape",
     None, None),
    ("check of the wrong example (exit 1)", None, ["check", "batch_to_space_2d_wrong.xml"], "check", None, None),
    ("run OP with the input as its output", None, ["run", "space_to_depth", "f32_4d.npy", "f32_4d.npy", *S2D],
     "run_op", "f32_4d.npy", None),
    ("run OP through a symbolic link", None, ["run", "space_to_depth", "link.npy", "link.npy", *S2D], "run_op",
     "link.npy", None),
]


def _expected(argv, kind):
    """(input, op, arguments) of a valid ``run OP`` case, for comparing its output with the library's result."""
    if kind != "run_op" or argv[1] not in cases.OPS:
        return None
    options = dict(zip(argv[4::2], argv[5::2]))
    try:
        if argv[1] in ("space_to_depth", "depth_to_space"):
            size = options.get("--block-size", "1")
            arguments = [options["--mode"], int(size) if len(size) < 20 else None]
        else:
            arguments = [[int(v) for v in options[name].split(",")] for name in cases.VECTOR_OPTIONS[argv[1]]]
    except (KeyError, ValueError):
        return None
    return None if None in arguments else (argv[2], argv[1], arguments)


@pytest.mark.parametrize("case", TARGETED, ids=[c[0] for c in TARGETED])
def test_targeted(tmp_path, case):
    _, setup, argv, kind, output, fsize = case
    pool = _pool(tmp_path)
    if setup is not None:
        setup(pool)
    command = cases.Command(list(argv), kind, output, _expected(argv, kind), fsize)
    outcome, found = cases.run_one(command, pool)
    assert_no_violations(found)
    if argv == ["check", "batch_to_space_2d_wrong.xml"]:
        assert outcome.status == 1


# ------------------------------------------------------------------ real processes

SUBPROCESS_TARGETED = [
    "5000-digit integer option",
    "20000 dims for space_to_depth",
    "option value '--' (argparse gives a list)",
    "output name with a newline",
    ".npy header with 2**62 x 2**62 elements",
    "short write (file-size limit inside the data)",
    "failing write over an existing output",
    "XML with an unknown encoding",
    "check --bin a directory",
    "bench usage error",
    "check of the wrong example (exit 1)",
    "run OP with the input as its output",
]


def _run_in_subprocess(pool, command, env=None):
    before = cases.snapshot(pool.root)
    expected = cases.expected_result(command, before, pool)
    outcome = cases.invoke_subprocess(command.argv, pool.cwd, command.fsize_limit, env=env)
    after = cases.snapshot(pool.root)
    return outcome, cases.violations(command, outcome, before, after, pool, expected)


@pytest.mark.parametrize("name", SUBPROCESS_TARGETED)
def test_targeted_in_a_real_process(tmp_path, name):
    _, setup, argv, kind, output, fsize = next(c for c in TARGETED if c[0] == name)
    pool = _pool(tmp_path)
    if setup is not None:
        setup(pool)
    command = cases.Command(list(argv), kind, output, _expected(argv, kind), fsize)
    outcome, found = _run_in_subprocess(pool, command)
    assert_no_violations(found)
    if name == "check of the wrong example (exit 1)":
        assert outcome.status == 1


def test_non_utf8_output_name_in_a_real_process_with_strict_stdout(tmp_path):
    """A file name that is not UTF-8, as a UTF-8 locale other than C.UTF-8 runs Python (stdout strict)."""
    pool = _pool(tmp_path)
    command = cases.Command(["run", "space_to_depth", "f32_4d.npy", "\udcffout.npy", *S2D], "run_op", "\udcffout.npy")
    _, found = _run_in_subprocess(pool, command, env={"PYTHONIOENCODING": "utf-8:strict"})
    assert_no_violations(found)


@pytest.mark.parametrize("output", ["in_two_outputs_p.npy", "two_outputs.xml"])
def test_model_output_over_its_own_input_in_a_real_process(tmp_path, output):
    """-o names the (memory-mapped) input, or the model: a Result fed straight from the Parameter must not crash."""
    pool = _pool(tmp_path)
    command = cases.Command(["run-model", "two_outputs.xml", "-i", "p=in_two_outputs_p.npy", "-o", output], "run_ir", output)
    outcome, found = _run_in_subprocess(pool, command)
    assert_no_violations(found)
    assert outcome.status in (0, 2), outcome


def test_model_output_over_its_weights_in_a_real_process(tmp_path):
    pool = _pool(tmp_path)
    command = cases.Command(["run-model", "batch_to_space_5d.xml", "-i", "data=in_batch_to_space_5d_data.npy", "-o",
                             "batch_to_space_5d.bin"], "run_ir", "batch_to_space_5d.bin")
    outcome, found = _run_in_subprocess(pool, command)
    assert_no_violations(found)


def test_random_commands_in_a_real_process(tmp_path):
    """A few random commands (outputs over inputs allowed) through ``python -m datamove``."""
    rng = random.Random(7)
    pool = cases.build_pool(rng, tmp_path)
    found = []
    for _ in range(8):
        command = cases.random_command(rng, pool, in_process=False)
        _, problems = _run_in_subprocess(pool, command)
        found += problems
    assert_no_violations(found)
