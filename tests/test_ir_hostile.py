"""Hostile and broken IR files: each refused quickly, with a clear DataMoveError, in bounded memory.

The files are written by hand from the shipped example ``examples/ir/batch_to_space_2d.xml``
(a Parameter, three i64 Consts, a BatchToSpace and a Result).
"""

from __future__ import annotations

import pathlib
import time
import tracemalloc

import numpy as np
import pytest

from datamove import DataMoveError
from datamove.ir import read_model

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ir"
EXAMPLE = (EXAMPLES / "batch_to_space_2d.xml").read_text()
EXAMPLE_BIN = (EXAMPLES / "batch_to_space_2d.bin").read_bytes()
#: Peak Python memory allowed while refusing a file (the files are a few kB).
MAX_PEAK_BYTES = 4 * 2**20


def write(tmp_path: pathlib.Path, xml: str, bin_bytes: bytes = EXAMPLE_BIN, name: str = "model") -> pathlib.Path:
    (tmp_path / f"{name}.xml").write_text(xml)
    (tmp_path / f"{name}.bin").write_bytes(bin_bytes)
    return tmp_path / f"{name}.xml"


def refused(path: pathlib.Path, match: str, action: str = "read") -> str:
    """Read (and check/run) ``path``: DataMoveError matching ``match``, fast and in bounded memory."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(DataMoveError, match=match) as info:
            model = read_model(path)
            if action == "check":
                model.check()
            elif action == "run":
                model.run({"data": np.zeros((10, 2), np.float32)})
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - start < 2.0
    assert peak < MAX_PEAK_BYTES, peak
    return str(info.value)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE net [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
 <!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
]>
<net name="&g;" version="11"><layers/></net>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE net [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<net name="&secret;" version="11"><layers/></net>
"""

EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE net SYSTEM "http://example.invalid/evil.dtd">
<net name="x" version="11"><layers/></net>
"""


def test_billion_laughs(tmp_path):
    message = refused(write(tmp_path, BILLION_LAUGHS), "DTD|entit")
    assert "refused" in message


def test_external_entity(tmp_path):
    refused(write(tmp_path, EXTERNAL_ENTITY), "DTD|entit|external")


def test_external_dtd(tmp_path):
    refused(write(tmp_path, EXTERNAL_DTD), "DTD|external")


def _const(xml: str, which: str, attribute: str, value: str) -> str:
    """Set ``attribute`` of the Const named ``which`` (Constant_2 / _4 / _6 in the example)."""
    head, _, tail = xml.partition(f'name="{which}"')
    start = tail.index(f'{attribute}="')
    end = tail.index('"', start + len(attribute) + 2)
    return head + f'name="{which}"' + tail[:start] + f'{attribute}="{value}"' + tail[end + 1:]


def _first_const(xml: str) -> str:
    return xml.split('type="Const"')[0].rsplit('name="', 1)[1].split('"')[0]


def test_offset_past_the_end_of_the_bin(tmp_path):
    name = _first_const(EXAMPLE)
    message = refused(write(tmp_path, _const(EXAMPLE, name, "offset", "4096")), "past the end")
    assert f"'{name}'" in message and "layer " in message and "48 bytes" in message


def test_negative_size(tmp_path):
    message = refused(write(tmp_path, _const(EXAMPLE, _first_const(EXAMPLE), "size", "-16")), "size must be")
    assert "-16" in message


def test_negative_offset(tmp_path):
    refused(write(tmp_path, _const(EXAMPLE, _first_const(EXAMPLE), "offset", "-8")), "offset must be")


def test_shape_and_size_disagree(tmp_path):
    message = refused(write(tmp_path, _const(EXAMPLE, _first_const(EXAMPLE), "size", "8")), "needs 16")
    assert "size = 8" in message


def test_one_gigabyte_const_with_a_tiny_bin(tmp_path):
    xml = _const(_const(EXAMPLE, _first_const(EXAMPLE), "shape", "134217728"), _first_const(EXAMPLE), "size",
                 str(2**30))
    message = refused(write(tmp_path, xml), "past the end")
    assert str(2**30) in message


def test_huge_numbers(tmp_path):
    refused(write(tmp_path, _const(EXAMPLE, _first_const(EXAMPLE), "offset", "9" * 5000)), "offset must be")
    xml = _const(_const(EXAMPLE, _first_const(EXAMPLE), "shape", "4294967296,4294967296,4294967296"),
                 _first_const(EXAMPLE), "size", "16")
    refused(write(tmp_path, xml), "needs")


def test_missing_bin(tmp_path):
    path = write(tmp_path, EXAMPLE)
    (tmp_path / "model.bin").unlink()
    refused(path, "cannot be read")


def test_edge_to_a_missing_layer(tmp_path):
    xml = EXAMPLE.replace('to-layer="5"', 'to-layer="77"')
    message = refused(write(tmp_path, xml), "layer 77, which does not exist")
    assert "edge" in message


def test_edge_to_a_missing_port(tmp_path):
    xml = EXAMPLE.replace('to-layer="5" to-port="0"', 'to-layer="5" to-port="3"')
    refused(write(tmp_path, xml), "has no input port 3")


def test_dangling_input(tmp_path):
    xml = EXAMPLE.replace('<edge from-layer="4" from-port="4" to-layer="5" to-port="0" />', "")
    refused(write(tmp_path, xml), "no edge")


def test_cycle(tmp_path):
    # the BatchToSpace's data comes from its own output, and the Parameter feeds nothing
    xml = EXAMPLE.replace('from-layer="0" from-port="0" to-layer="4"', 'from-layer="4" from-port="4" to-layer="4"')
    message = refused(write(tmp_path, xml), "cycle")
    assert "BatchToSpace" in message


def test_duplicate_layer_id(tmp_path):
    xml = EXAMPLE.replace('<layer id="5"', '<layer id="4"')
    refused(write(tmp_path, xml), "layer id 4 is used twice")


def test_bad_dims(tmp_path):
    for bad in ("-2", "abc", "5..2", "1" * 30):
        xml = EXAMPLE.replace("<dim>10</dim>", f"<dim>{bad}</dim>", 1)
        refused(write(tmp_path, xml), "dim")


def test_not_an_ir(tmp_path):
    refused(write(tmp_path, "<html><body/></html>"), "not <net>")
    refused(write(tmp_path, EXAMPLE.replace('version="11"', 'version="7"', 1)), "version")
    refused(write(tmp_path, "<net version='11'><layers>"), "well-formed")
    refused(write(tmp_path, ""), "well-formed|no XML")
    (tmp_path / "binary.xml").write_bytes(b"\x00\xff\xfe" * 100)
    refused(tmp_path / "binary.xml", "well-formed|XML")


def test_deep_nesting_and_too_many_elements(tmp_path, monkeypatch):
    refused(write(tmp_path, "<net version='11'>" + "<a>" * 100 + "</a>" * 100 + "</net>"), "deeper")
    import datamove.ir.reader as reader

    monkeypatch.setattr(reader, "MAX_XML_ELEMENTS", 50)
    refused(write(tmp_path, EXAMPLE), "more than 50 XML elements")
    monkeypatch.setattr(reader, "MAX_XML_BYTES", 100)
    refused(write(tmp_path, EXAMPLE), "more than the 100 accepted")


def test_wrong_port_counts_and_attributes(tmp_path):
    xml = EXAMPLE.replace('<edge from-layer="4" from-port="4" to-layer="5" to-port="0" />', "")
    xml = xml.replace('type="Result" version="opset1"', 'type="Result" version="opset1" x="1"')
    head, _, tail = xml.partition('type="Result"')
    start = tail.index("<input>")
    end = tail.index("</input>") + len("</input>")
    refused(write(tmp_path, head + 'type="Result"' + tail[:start] + tail[end:]), "must have 1 input")
    refused(write(tmp_path, EXAMPLE.replace('element_type="f32"', 'element_type="f33"')), "unknown element_type")


def test_invalid_operation_is_reported_by_check_and_refused_by_run(tmp_path):
    # crops_end [0, 0] -> [0, 9]: 2 + 9 > 2 * 5
    name = [n.split('"')[0] for n in EXAMPLE.split('name="')[1:] if 'type="Const"' in n.split(">")[0]][2]
    bin_bytes = bytearray(EXAMPLE_BIN)
    offset = int(EXAMPLE.split(f'name="{name}"')[1].split('offset="')[1].split('"')[0])
    bin_bytes[offset + 8:offset + 16] = np.array([9], np.int64).tobytes()
    path = write(tmp_path, EXAMPLE, bytes(bin_bytes))
    report = read_model(path).check()
    assert not report.ok and report.invalid and "exceeds" in report.invalid[0] and "BatchToSpace" in report.invalid[0]
    refused(path, "BatchToSpace.*exceeds", action="run")


def test_run_refuses_other_layer_types_naming_them(tmp_path):
    xml = EXAMPLE.replace('type="BatchToSpace" version="opset2"', 'type="Frobnicate" version="opset99"')
    path = write(tmp_path, xml)
    report = read_model(path).check()
    assert report.ok and len(report.opaque) == 1 and "Frobnicate" in report.opaque[0]
    refused(path, "cannot run layer 4 .*Frobnicate", action="run")


def test_run_input_errors(tmp_path):
    model = read_model(EXAMPLES / "batch_to_space_2d.xml")
    with pytest.raises(DataMoveError, match="missing input"):
        model.run({})
    with pytest.raises(DataMoveError, match="not a Parameter"):
        model.run({"data": np.zeros((10, 2), np.float32), "other": 1})
    with pytest.raises(DataMoveError, match="dtype float64.*f32"):
        model.run({"data": np.zeros((10, 2))})
    with pytest.raises(DataMoveError, match=r"shape \[10, 3\].*\[10, 2\]"):
        model.run({"data": np.zeros((10, 3), np.float32)})
    with pytest.raises(TypeError, match="mapping"):
        model.run([np.zeros((10, 2), np.float32)])


def test_bin_changed_after_reading(tmp_path):
    path = write(tmp_path, EXAMPLE)
    model = read_model(path)
    (tmp_path / "model.bin").write_bytes(EXAMPLE_BIN[:10])
    with pytest.raises(DataMoveError, match="changed size"):
        model.run({"data": np.zeros((10, 2), np.float32)})
