"""The OpenVINO opset module, shared by the differential tests (skips them without OpenVINO)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed: the differential tests need it")


def _import_opset() -> Any:
    # The opset modules moved from openvino.runtime to openvino in 2025; the four
    # operations are the same in every opset since opset2.
    for name in ("openvino.opset15", "openvino.opset13", "openvino.runtime.opset13", "openvino.runtime.opset8"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    pytest.skip("no OpenVINO opset module with BatchToSpace-2 found", allow_module_level=True)


opset = _import_opset()
