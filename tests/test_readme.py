"""The README's Python examples run, and its commented results are true."""

from __future__ import annotations

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_blocks_run_and_their_comments_hold():
    blocks = _python_blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    checked = 0
    for block in blocks:
        for line in block.splitlines():
            code, _, comment = line.partition("#")
            exec(code, namespace) if code.strip() else None
            comment = comment.strip()
            # "# (2, 8)"-style comments state the value (for an array, its shape) of the expression on that line
            if code.strip() and comment.startswith("(") or comment == "None":
                expression = code.strip()
                if re.match(r"^\w+ = ", expression):  # an assignment: check the name it binds
                    expression = expression.split(" = ")[0]
                value = eval(expression, namespace)
                if hasattr(value, "shape") and hasattr(value, "dtype"):
                    value = value.shape  # for arrays the comment states the shape
                assert repr(value) == comment, (line, value)
                checked += 1
    assert checked >= 6


def test_readme_is_at_most_300_lines():
    # the history of benchmark runs lives in docs/performance.rst and CHANGELOG.md
    assert len(README.read_text().splitlines()) <= 300


def test_readme_examples_shadow_no_library():
    """``from datamove.compat import torch`` would hide PyTorch from the rest of the example."""
    import importlib.util

    bound = [name.split(" as ")[-1].strip()
             for block in _python_blocks()
             for names in re.findall(r"^from datamove[\w.]* import (.+)$", block, flags=re.M)
             for name in names.split(",")]
    assert bound, "no 'from datamove... import' in the README's examples"
    assert [name for name in bound if importlib.util.find_spec(name) is not None] == []


def test_readme_test_command_is_what_ci_runs():
    ci = (README.parent / ".ci" / "run").read_text()
    command = re.search(r"```sh\n(pip install -e \"\.\[test\]\" && python -m pytest[^\n]*)\n```", README.read_text())
    assert command, "the README's test command is gone"
    install, test = command[1].split(" && ")
    assert install.replace("pip install", "python -m pip install --quiet --disable-pip-version-check") in ci
    assert f"\n{test}\n" in ci
