"""Run a file of test cases with pytest in a fresh interpreter, and require that they all pass.

Triton bundles its own LLVM, and importing it into a process that has already
loaded TensorFlow's, jaxlib's or OpenVINO's aborts that process; the rest of
the suite imports those. ``torch.onnx.export(dynamo=True)`` runs
``torch.export``, which imports Triton when it is installed. So the cases that
may import Triton (``triton_cases.py``, ``onnx_export_cases.py``,
``torch_symbolic_cases.py``) live in files that the suite does not collect,
and one test each runs them here, in a process of their own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Mapping, Optional

__all__ = ["run_case_file"]


def run_case_file(cases: Path, *pytest_args: str, env: Optional[Mapping[str, str]] = None, timeout: float = 1200,
                  skipped_ok: bool = False) -> None:
    """``python -m pytest CASES [PYTEST_ARGS]`` from the repository's root; AssertionError unless every case passed.

    A case skipped there fails the test too, unless ``skipped_ok``: a skip in a
    process of its own hides a missing test extra or a broken import. The
    failure's message is the end of the run's output (8,000 characters of
    stdout, 4,000 of stderr).
    """
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra", str(cases),
         *pytest_args],
        capture_output=True, text=True, env=None if env is None else dict(env), cwd=cases.parent.parent,
        timeout=timeout,
    )
    output = run.stdout[-8000:] + run.stderr[-4000:]
    assert run.returncode == 0, output
    assert " passed" in run.stdout and " failed" not in run.stdout, output
    assert skipped_ok or " skipped" not in run.stdout, output
