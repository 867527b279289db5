"""The IR reader is linear in the file's size: large generated files are read or refused in seconds.

Each file is generated here: one layer with tens of thousands of ports, a 32 MB
attribute, a 100 MB one, a huge ``names`` or ``shape`` attribute, long chains
of layers (one closed into a cycle), a 10 MB layer name. Time is not asserted
in the test's own process: either the work is counted (port visits), or
``read_model`` + ``check`` (or ``python -m datamove check``) runs in a
subprocess under a generous timeout, for work that took seconds to minutes
when it was quadratic (32,000 ports: 13 s; a 32 MB attribute: 8 s; a 100 MB
one: about 4 minutes). Every message is one short line.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

import pytest

from datamove import DataMoveError
from datamove.ir import read_model
from datamove.ir import reader
from datamove.ir.model import Layer, Port

#: Seconds a subprocess may take: generous (each case takes about a second). Only the 100 MB
#: attribute took longer than this (minutes) when reading was quadratic; the ports are also counted.
TIMEOUT = 60
#: Longest message accepted for any refusal here.
MAX_MESSAGE = 500

HEAD = '<?xml version="1.0"?>\n<net name="{name}" version="11">\n<layers>\n'


def _port(port_id: int, dims: Sequence[int] = (1,), names: Optional[str] = None) -> str:
    names_attribute = f' names="{names}"' if names is not None else ""
    return (f'<port id="{port_id}" precision="FP32"{names_attribute}>'
            + "".join(f"<dim>{d}</dim>" for d in dims) + "</port>")


def _parameter(layer_id: int, name: str = "x", data: str = 'shape="1" element_type="f32"',
               names: Optional[str] = None) -> str:
    return (f'<layer id="{layer_id}" name="{name}" type="Parameter" version="opset1"><data {data}/>'
            f"<output>{_port(0, names=names)}</output></layer>\n")


def _result(layer_id: int, dims: Sequence[int] = (1,)) -> str:
    return (f'<layer id="{layer_id}" name="out{layer_id}" type="Result" version="opset1">'
            f"<input>{_port(0, dims)}</input></layer>\n")


def _edges(edges: List[tuple]) -> str:
    return ("</layers>\n<edges>\n"
            + "".join(f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>\n'
                      for a, b, c, d in edges)
            + "</edges>\n</net>\n")


def many_ports(n: int) -> str:
    """Parameter -> Split (n outputs) -> Concat (n inputs) -> Result: one layer with n input ports."""
    split = ('<layer id="1" name="split" type="Split" version="opset1"><input>' + _port(0) + "</input><output>"
             + "".join(_port(i + 1) for i in range(n)) + "</output></layer>\n")
    concat = ('<layer id="2" name="concat" type="Concat" version="opset1"><input>'
              + "".join(_port(i) for i in range(n)) + f"</input><output>{_port(n, (n,))}</output></layer>\n")
    edges = [(0, 0, 1, 0)] + [(1, i + 1, 2, i) for i in range(n)] + [(2, n, 3, 0)]
    return HEAD.format(name="ports") + _parameter(0) + split + concat + _result(3, (n,)) + _edges(edges)


def one_parameter(data: str = 'shape="1" element_type="f32"', name: str = "x", net: str = "one",
                  names: Optional[str] = None) -> str:
    """A Parameter (with these ``<data>`` attributes, name and tensor names) feeding a Result."""
    return HEAD.format(name=net) + _parameter(0, name, data, names) + _result(1) + _edges([(0, 0, 1, 0)])


def chain(n: int, cycle: bool = False) -> str:
    """Parameter -> n Converts -> Result; ``cycle``: the first Convert reads the last one instead."""
    converts = "".join(
        f'<layer id="{k}" name="c{k}" type="Convert" version="opset1"><data destination_type="f32"/>'
        f"<input>{_port(0)}</input><output>{_port(1)}</output></layer>\n" for k in range(1, n + 1))
    edges = [(n, 1, 1, 0) if cycle else (0, 0, 1, 0)] + [(k, 1, k + 1, 0) for k in range(1, n + 1)]
    return HEAD.format(name="chain") + _parameter(0) + converts + _result(n + 1) + _edges(edges)


def write(tmp_path: pathlib.Path, name: str, xml: str) -> pathlib.Path:
    path = tmp_path / f"{name}.xml"
    path.write_text(xml)
    return path


_READ = """
import json, sys
from datamove import DataMoveError
from datamove.ir import read_model
for path in sys.argv[1:]:
    try:
        model = read_model(path)
        report = model.check()
        text = str(report)
        out = {"ok": report.ok, "layers": len(model.layers), "report": text[:1000], "report_chars": len(text),
               "names": max((len(p.names) for layer in model.layers for p in layer.outputs), default=0)}
    except DataMoveError as exc:
        out = {"error": str(exc)}
    print(json.dumps(out), flush=True)
"""


def read_in_subprocess(*paths: pathlib.Path) -> List[Dict]:
    """``read_model`` + ``check`` of each file in a fresh Python, under :data:`TIMEOUT` seconds in all."""
    try:
        done = subprocess.run([sys.executable, "-c", _READ, *map(str, paths)], capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {[p.name for p in paths]} took more than {TIMEOUT} s: not linear")
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(paths)
    return results


def short(message: str) -> str:
    assert len(message) < MAX_MESSAGE and "\n" not in message and "\r" not in message, message[:1000]
    return message


# ----------------------------------------------------------------- counted work


class _CountedPorts(tuple):
    """A layer's ports, counting every port visited by any iteration over them (a scan is a visit per port)."""

    visits = 0

    def __iter__(self):
        for port in tuple.__iter__(self):
            _CountedPorts.visits += 1
            yield port


class _CountedLayer(Layer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.inputs = _CountedPorts(self.inputs)
        self.outputs = _CountedPorts(self.outputs)


@pytest.mark.parametrize("build, ports", [(lambda: many_ports(4000), 8004), (lambda: chain(3000), 6002)],
                         ids=["4000 ports on one layer", "3000 layers in a chain"])
def test_edges_visit_each_port_a_bounded_number_of_times(tmp_path, monkeypatch, build, ports):
    # a scan of every port per edge visited 3 * 4000**2 / 2 = 24 million ports for 4000 edges
    monkeypatch.setattr(reader, "Layer", _CountedLayer)
    monkeypatch.setattr(_CountedPorts, "visits", 0)
    model = read_model(write(tmp_path, "model", build()))
    report = model.check()
    assert report.ok and report.checked + len(report.opaque) == len(model.layers)
    assert _CountedPorts.visits <= 10 * ports, _CountedPorts.visits


def test_port_lookup_keeps_its_meaning():
    ports = tuple(Port(i % 20, (1,)) for i in range(30))  # ids 0..19, then 0..9 again
    layer = Layer(7, "many", "Concat", "opset1", {}, ports, (Port(100, None),))
    assert [layer.input_index(i) for i in (0, 9, 10, 19, 20, -1)] == [0, 9, 10, 19, None, None]
    assert layer.output_index(100) == 0 and layer.output_index(0) is None
    layer.inputs = tuple(reversed(ports))  # a new tuple of ports: looked up afresh
    assert layer.input_index(19) == 10 and layer.input_index(0) == 9
    assert layer.describe() == "layer 7 'many' (Concat)"
    few = Layer(8, "few", "Add", "opset1", {}, (Port(3, None), Port(1, None), Port(3, None)), ())
    assert [few.input_index(i) for i in (3, 1, 0)] == [0, 1, None] and few.output_index(0) is None


# ----------------------------------------------------------------- in a subprocess, under a timeout


def test_32000_ports_on_one_layer_with_the_command(tmp_path):
    path = write(tmp_path, "ports", many_ports(32_000))  # 5.6 MB, took 13 s
    try:
        done = subprocess.run([sys.executable, "-m", "datamove", "check", str(path)], capture_output=True,
                              text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"datamove check of 32,000 ports took more than {TIMEOUT} s")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.rstrip().endswith("OK: every recorded shape agrees with the inferred one")


def _blob(size: int, letter: str = "a") -> str:
    return one_parameter(f'shape="1" element_type="f32" blob="{letter * size}"')


def test_a_32_mb_attribute(tmp_path):
    (result,) = read_in_subprocess(write(tmp_path, "attribute", _blob(32_000_000)))  # took 8 s
    assert result["ok"] and result["layers"] == 2


@pytest.mark.slow
def test_tokens_longer_than_the_cap_are_refused(tmp_path):
    limit = reader.MAX_XML_TOKEN_BYTES
    longer = limit + reader.XML_CHUNK_BYTES + 1  # checked after each chunk: surely caught
    paths = [
        write(tmp_path, "attribute", _blob(100_000_000, "b")),  # took about 4 minutes
        write(tmp_path, "comment", one_parameter().replace("<layers>", "<layers><!--" + "c" * longer + "-->")),
        write(tmp_path, "text", one_parameter().replace("<layers>", "<layers>" + " " * longer)),
    ]
    attribute, comment, text = read_in_subprocess(*paths)
    for refused in (attribute, comment):
        message = short(refused["error"])
        assert f"longer than the {limit} bytes accepted" in message
    assert text["ok"]  # text is not one token: any length is read in linear time


def test_huge_names_and_shapes(tmp_path):
    names = ",".join(f"t{i}" for i in range(1_000_000))  # 7 MB of tensor names on one port
    # the largest static shape: the product of its dims has about 1,200 digits
    big = ",".join(["9223372036854775807"] * reader.MAX_RANK)
    paths = [
        write(tmp_path, "names", one_parameter(names=names)),
        write(tmp_path, "shape_attribute", one_parameter(f'shape="{",".join(["1"] * 8_000_000)}" element_type="f32"')),
        write(tmp_path, "dims", one_parameter().replace("<dim>1</dim>", "<dim>1</dim>" * 100_000, 1)),
        write(tmp_path, "const", HEAD.format(name="const")
              + '<layer id="0" name="c" type="Const" version="opset1">'
              + f'<data shape="{big}" element_type="f32" offset="0" size="4"/><output>{_port(0)}</output></layer>\n'
              + _result(1) + _edges([(0, 0, 1, 0)])),
    ]
    names_result, shape_attribute, dims, const = read_in_subprocess(*paths)
    assert names_result["ok"] and names_result["names"] == 1_000_000
    assert f"has 8000000 dims, more than the {reader.MAX_RANK} accepted" in short(shape_attribute["error"])
    assert f"has 100000 dims, more than the {reader.MAX_RANK} accepted" in short(dims["error"])
    message = short(const["error"])
    assert "size = 4 bytes" in message and "needs more than 9223372036854775807" in message
    assert f"(rank {reader.MAX_RANK})" in message


def test_long_chain_and_long_cycle(tmp_path):
    paths = [write(tmp_path, "chain", chain(10_000)), write(tmp_path, "cycle", chain(10_000, cycle=True))]
    chained, cycle = read_in_subprocess(*paths)
    assert chained["ok"] and chained["layers"] == 10_002
    message = short(cycle["error"])
    assert message.startswith("the edges form a cycle") and "layer 1 'c1' (Convert)" in message
    assert "(10001 layers)" in message  # the Converts and the Result they feed


def test_many_bare_layers(tmp_path):
    xml = HEAD.format(name="bare") + "".join(f'<layer id="{k}" type="X{k}"/>' for k in range(50_000)) + _edges([])
    (bare,) = read_in_subprocess(write(tmp_path, "bare", xml))
    assert bare["ok"] and bare["layers"] == 50_000
    assert len(bare["report"].splitlines()[0]) < MAX_MESSAGE  # the opaque layers: the first 10 are shown


# ----------------------------------------------------------------- messages quote names briefly


def test_a_10_mb_layer_name_is_cut_in_messages(tmp_path, capsys):
    name = "N" * 5_000_000 + "&#10;" + "M" * 5_000_000  # with a newline in the middle
    path = write(tmp_path, "name", one_parameter('shape="1" element_type="f33"', name=name))
    with pytest.raises(DataMoveError) as info:
        read_model(path)
    message = short(str(info.value))
    assert "(10000001 characters)" in message and "unknown element_type 'f33'" in message
    assert message.startswith("layer 0 'NNNN") and "MMMM' " in message

    from datamove.cli.app import main

    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < MAX_MESSAGE + 100 and "(10000001 characters)" in err


def test_names_with_control_characters_are_escaped(tmp_path):
    # a layer type with a control character, a net name of a megabyte: one short line each
    xml = one_parameter(net="n" * 1_000_000).replace('name="out1" type="Result"', 'name="out1" type="Re&#10;sult"')
    model = read_model(write(tmp_path, "odd", xml))
    layer = model.layer(1)
    assert layer.type == "Re\nsult"
    assert short(layer.describe()) == "layer 1 'out1' ('Re\\nsult')"
    first_line = str(model.check()).splitlines()[0]
    assert len(first_line) < MAX_MESSAGE and "(1000000 characters)" in first_line
    assert len(repr(model)) < MAX_MESSAGE
    with pytest.raises(DataMoveError) as info:
        read_model(write(tmp_path, "root", "<" + "r" * 100_000 + "/>"))
    assert "(100000 characters)" in short(str(info.value)) and "not <net>" in str(info.value)
    with pytest.raises(DataMoveError) as info:
        read_model(write(tmp_path, "version", one_parameter().replace('version="11"', f'version="{"1" * 100_000}"', 1)))
    assert "is not supported" in short(str(info.value))
