"""``datamove.keras`` on every Keras backend installed for the tests: TensorFlow, JAX, PyTorch.

Keras picks its backend once, when it is imported, so each backend runs ``tests/keras_checks.py`` in a
process of its own (all at once, one process per backend running every check: about 40 s of wall time on
the 2-core CI machine). Each check is one test here; a check a backend cannot run says why and is skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras", reason="Keras 3 (installed with tensorflow-cpu, a test extra) is not installed")

SCRIPT = Path(__file__).resolve().parent / "keras_checks.py"
BACKENDS = ("tensorflow", "jax", "torch")
CHECKS = ("quiet_import", "eager", "compute_output_shape", "bad_parameters", "default_data_format",
          "config_round_trip", "dynamic_dims", "save_load", "gradients", "training", "compiled", "export")


@pytest.fixture(scope="module")
def results():
    """``{backend: {check: outcome}}``, the backends' processes run side by side."""
    running = {}
    for backend in BACKENDS:
        if importlib.util.find_spec(backend) is None:
            continue
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
        running[backend] = subprocess.Popen([sys.executable, str(SCRIPT)], env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)
    found = {}
    for backend, process in running.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"{backend}:\n{out[-3000:]}\n{err[-3000:]}"
        report = json.loads(out.strip().splitlines()[-1])
        assert report["backend"] == backend
        found[backend] = report["results"]
    return found


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_keras_layers(results, backend, check):
    if backend not in results:
        pytest.skip(f"{backend} is not installed")
    outcome = results[backend].get(check, "missing: the script has no such check")
    if outcome.startswith("skipped"):
        pytest.skip(outcome)
    assert outcome == "ok", outcome


def test_every_check_is_listed(results):
    for backend, outcomes in results.items():
        assert set(outcomes) == set(CHECKS), backend
