"""The GPU engine's tests (tests/triton_cases.py), in a process of their own.

Importing Triton aborts a process that has loaded TensorFlow, jaxlib or
OpenVINO, as the rest of the suite does (``tests/case_files.py``), so the
Triton cases run in a fresh interpreter: under Triton's interpreter
(``TRITON_INTERPRET=1``) on CPU tensors here, on the GPU where there is one.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from case_files import run_case_file

CASES = Path(__file__).with_name("triton_cases.py")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None,
                    reason="triton and torch are test extras (Linux x86-64)")
def test_triton_engine_cases_in_their_own_process():
    env = dict(os.environ)
    code = "import torch; print(torch.cuda.is_available())"
    cuda = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "True"
    if not cuda:
        env["TRITON_INTERPRET"] = "1"
    run_case_file(CASES, env=env, skipped_ok=True)  # some cases need a GPU


@pytest.mark.skipif(importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None,
                    reason="triton and torch are test extras (Linux x86-64)")
def test_the_kernel_compiles_for_a_gpu_without_one():
    # Triton's real compiler (to sm_90 PTX and cubin, with its bundled ptxas), which needs no GPU: what the
    # interpreter cannot catch. Its own process: the kernel must be imported without TRITON_INTERPRET.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run_case_file(CASES, "-k", "compiles_for_hopper", env=env, timeout=600)
