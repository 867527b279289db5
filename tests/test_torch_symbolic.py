"""Symbolic sizes in PyTorch (tests/torch_symbolic_cases.py), in a process of its own.

``torch.onnx.export(dynamo=True)`` runs ``torch.export``, which imports Triton
when it is installed; Triton bundles its own LLVM and aborts a process that
has already loaded TensorFlow's or jaxlib's, as the rest of the suite does. So
the export cases run in a fresh interpreter, as the Triton cases do.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).with_name("torch_symbolic_cases.py")
NEEDED = ("torch", "onnx", "onnxruntime", "onnxscript")


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in NEEDED),
                    reason="torch, onnx, onnxruntime and onnxscript are test extras")
def test_torch_symbolic_cases_in_their_own_process():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra", str(CASES)],
        capture_output=True, text=True, cwd=CASES.parent.parent, timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert " passed" in run.stdout and " failed" not in run.stdout and " skipped" not in run.stdout
