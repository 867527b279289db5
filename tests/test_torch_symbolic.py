"""Symbolic sizes in PyTorch (tests/torch_symbolic_cases.py), in a process of its own.

``torch.onnx.export(dynamo=True)`` may import Triton, which aborts a process
that has loaded TensorFlow or jaxlib, as the rest of the suite does: see
``tests/case_files.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from case_files import run_case_file

CASES = Path(__file__).with_name("torch_symbolic_cases.py")
NEEDED = ("torch", "onnx", "onnxruntime", "onnxscript")


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in NEEDED),
                    reason="torch, onnx, onnxruntime and onnxscript are test extras")
def test_torch_symbolic_cases_in_their_own_process():
    run_case_file(CASES)
