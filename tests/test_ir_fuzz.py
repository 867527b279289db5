"""Fuzzing the IR reader: mutations of valid IRs never let anything but DataMoveError escape.

Each example takes one of the shipped IRs (examples/ir) and applies 1-3
mutations: a byte flipped, an attribute value replaced (huge, negative,
empty, text, dim notations), a line removed or duplicated, the .bin truncated
or a byte of it changed. Then ``read_model``, ``check`` and ``run`` (with
inputs fitting the Parameters, under ``max_bytes``) either work or raise
DataMoveError.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datamove import DataMoveError, Dim
from datamove.ir import read_model
from datamove.ir.model import ELEMENT_TYPES

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ir"
MODELS = sorted(p.stem for p in EXAMPLES.glob("*.xml"))
VALUES = ["", "-1", "0", "1", "2", "-5", "?", "...", "1..3", "..4", "2..", "5..2", str(2**63), str(2**64),
          "9" * 400, "abc", "f32", "i64", "u4", "bf16", "boolean", "string", "blocks_first", "depth_first",
          "DCR", "1,2", "0,0,0", "4294967296,4294967296", "BatchToSpace", "Frobnicate", "opset1", "&amp;", "\\,"]
_ATTRIBUTE = re.compile(r'([\w-]+)="([^"]*)"')


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(MODELS))
    xml = (EXAMPLES / f"{name}.xml").read_bytes()
    binary = (EXAMPLES / f"{name}.bin").read_bytes()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "attribute", "attribute", "remove", "duplicate", "bin"]))
        if kind == "flip":
            i = draw(st.integers(0, len(xml) - 1))
            xml = xml[:i] + bytes([draw(st.integers(0, 255))]) + xml[i + 1:]
        elif kind == "attribute":
            text = xml.decode("utf-8", "replace")
            matches = list(_ATTRIBUTE.finditer(text))
            if matches:
                match = draw(st.sampled_from(matches))
                value = draw(st.one_of(st.sampled_from(VALUES), st.integers(-(2**70), 2**70).map(str)))
                text = text[:match.start(2)] + value + text[match.end(2):]
                xml = text.encode()
        elif kind in ("remove", "duplicate"):
            lines = xml.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = [] if kind == "remove" else [lines[i], lines[i]]
            xml = b"\n".join(lines)
        elif binary:
            if draw(st.booleans()):
                binary = binary[:draw(st.integers(0, len(binary)))]
            else:
                i = draw(st.integers(0, len(binary) - 1))
                binary = binary[:i] + bytes([draw(st.integers(0, 255))]) + binary[i + 1:]
    return xml, binary


def _inputs(model):
    """Arrays fitting each Parameter (smallest sizes), or None when none can be made."""
    inputs = {}
    for layer in model.parameters:
        element_type = layer.attributes.get("element_type")
        if ELEMENT_TYPES.get(element_type, (None,))[0] in (None, "bfloat16") or layer.shape is None:
            return None
        shape = [d if isinstance(d, int) else (d.lo if isinstance(d, Dim) else 1) for d in layer.shape]
        if np.prod(shape, dtype=object) > 10_000:
            return None
        inputs[layer.name] = np.zeros(shape, np.dtype(ELEMENT_TYPES[element_type][0]))
    return inputs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutated())
def test_mutated_irs_raise_only_datamove_errors(tmp_path, files):
    xml, binary = files
    (tmp_path / "model.xml").write_bytes(xml)
    (tmp_path / "model.bin").write_bytes(binary)
    try:
        model = read_model(tmp_path / "model.xml")
        report = model.check()
        str(report)
        inputs = _inputs(model)
        if inputs is not None:
            model.run(inputs, max_bytes=2**20)
    except DataMoveError as exc:
        assert str(exc)
