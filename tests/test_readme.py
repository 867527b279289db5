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
