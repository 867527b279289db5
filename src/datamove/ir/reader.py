"""Reading an OpenVINO IR (``.xml`` + ``.bin``) safely: the file is untrusted.

What is refused, each with a :class:`~datamove.DataMoveError` naming the
layer (id, name, type) and the rule:

- any DTD, entity or external reference (``defusedxml``), an XML file over
  :data:`MAX_XML_BYTES`, more than :data:`MAX_XML_ELEMENTS` elements or nesting
  deeper than :data:`MAX_XML_DEPTH`;
- an IR version other than 10 or 11, a duplicate layer id, a port id used twice
  in one layer, a dim that is not ``-1``/``?``/an integer/an interval;
- an edge to or from a missing layer or port, an input port with no edge or
  with two, a cycle;
- a ``Const`` whose ``offset``/``size`` is not a non-negative integer, whose
  bytes lie past the end of the ``.bin``, or whose ``size`` is not what its
  ``shape`` and ``element_type`` need; an unknown ``element_type``;
- the known layer types (``Parameter``, ``Const``, ``Convert``, ``Result`` and
  the four operations) with the wrong number of input or output ports.

Nothing is read from the ``.bin`` here but its size: a ``Const``'s bytes are
read (exactly ``size`` bytes at ``offset``) when a check or a run needs them.

>>> from datamove.ir.reader import parse_dims
>>> parse_dims("?,1..10,..5,2..,4", "shape")
(None, Dim(1, 10), Dim(0, 5), Dim(2, None), 4)
>>> parse_dims("...", "shape") is None, parse_dims("", "shape")
(True, ())
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ElementTree
from typing import Dict, List, Optional, Tuple

from ..dims import INT64_MAX, DimLike, parse_dim
from ..errors import DataMoveError
from .model import ELEMENT_TYPES, Layer, Model, Port

__all__ = ["read_model", "parse_dims", "MAX_XML_BYTES", "MAX_XML_ELEMENTS", "MAX_XML_DEPTH"]

#: Largest ``.xml`` accepted (the IRs of large language models are a few tens of MB).
MAX_XML_BYTES = 128 * 2**20
#: Most XML elements accepted: bounds the memory of the parsed tree.
MAX_XML_ELEMENTS = 2_000_000
#: Deepest nesting accepted (an IR needs 6 levels; rt_info and sub-graphs a few more).
MAX_XML_DEPTH = 64

Shape = Optional[Tuple[DimLike, ...]]

_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")

#: Input and output port counts of the layer types datamove knows.
PORT_COUNTS: Dict[str, Tuple[int, int]] = {
    "Parameter": (0, 1),
    "Const": (0, 1),
    "Convert": (1, 1),
    "Result": (1, 0),
    "BatchToSpace": (4, 1),
    "SpaceToBatch": (4, 1),
    "SpaceToDepth": (1, 1),
    "DepthToSpace": (1, 1),
}


# ----------------------------------------------------------------- notation


def parse_dims(text: str, where: str) -> Shape:
    """A shape attribute as OpenVINO writes it: ``2,?,1..10``; ``...`` is an unknown rank, ``""`` a scalar."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    if text == "...":
        return None
    if not text:
        return ()
    return tuple(parse_dim(item, f"{where} dim {i}") for i, item in enumerate(text.split(",")))


def _integer(text: Optional[str], where: str, minimum: int = 0) -> int:
    if text is None:
        raise DataMoveError(f"{where} is missing")
    text = text.strip()
    if not _INTEGER.fullmatch(text) or not minimum <= int(text) <= INT64_MAX:
        raise DataMoveError(f"{where} must be an integer from {minimum} to 2**63 - 1, got {text[:40]!r}")
    return int(text)


def _split_names(text: Optional[str]) -> Tuple[str, ...]:
    """OpenVINO's tensor-name lists: comma-separated, a literal comma escaped as ``\\,``."""
    if not text:
        return ()
    names = [part.replace("\\,", ",").strip() for part in re.split(r"(?<!\\),", text)]
    return tuple(name for name in names if name)


# ----------------------------------------------------------------- XML


def _parse_xml(xml_path: str) -> ElementTree.Element:
    import defusedxml
    import defusedxml.ElementTree as SafeElementTree

    try:
        size = os.path.getsize(xml_path)
    except OSError as exc:
        raise DataMoveError(f"cannot read {xml_path}: {exc.strerror or exc}") from None
    if size > MAX_XML_BYTES:
        raise DataMoveError(f"{xml_path} is {size} bytes, more than the {MAX_XML_BYTES} accepted for an IR .xml")
    root = None
    depth = count = 0
    try:
        with open(xml_path, "rb") as file:
            events = SafeElementTree.iterparse(
                file, events=("start", "end"), forbid_dtd=True, forbid_entities=True, forbid_external=True
            )
            for event, element in events:
                if event == "start":
                    depth += 1
                    count += 1
                    if root is None:
                        root = element
                    if depth > MAX_XML_DEPTH:
                        raise DataMoveError(f"{xml_path}: XML nested deeper than {MAX_XML_DEPTH} levels")
                    if count > MAX_XML_ELEMENTS:
                        raise DataMoveError(f"{xml_path}: more than {MAX_XML_ELEMENTS} XML elements")
                else:
                    depth -= 1
    except DataMoveError:
        raise
    except OSError as exc:
        raise DataMoveError(f"cannot read {xml_path}: {exc.strerror or exc}") from None
    except defusedxml.DTDForbidden:
        raise DataMoveError(f"{xml_path}: XML with a DTD (<!DOCTYPE ...>) is refused: an IR has none") from None
    except defusedxml.EntitiesForbidden as exc:
        raise DataMoveError(f"{xml_path}: XML entity declarations are refused ({exc})") from None
    except defusedxml.ExternalReferenceForbidden as exc:
        raise DataMoveError(f"{xml_path}: XML external references are refused ({exc})") from None
    except defusedxml.DefusedXmlException as exc:
        raise DataMoveError(f"{xml_path}: unsafe XML refused ({exc})") from None
    except ElementTree.ParseError as exc:
        raise DataMoveError(f"{xml_path} is not well-formed XML: {exc}") from None
    except (ValueError, RecursionError, UnicodeError) as exc:
        raise DataMoveError(f"{xml_path} is not a readable XML file: {type(exc).__name__}: {exc}") from None
    if root is None:
        raise DataMoveError(f"{xml_path} has no XML element")
    return root


# ----------------------------------------------------------------- layers


def _port(element: ElementTree.Element, where: str) -> Port:
    port_id = _integer(element.get("id"), f"{where}: port id")
    where = f"{where} port {port_id}"
    dims = [parse_dim(dim.text or "", f"{where} dim {i}") for i, dim in enumerate(element.findall("dim"))]
    # OpenVINO writes no <dim> for both a scalar and an unknown rank; the reader keeps "no dims" as None.
    shape = tuple(dims) if dims else None
    return Port(port_id, shape, element.get("precision"), _split_names(element.get("names")))


def _layer(element: ElementTree.Element) -> Layer:
    layer_id = _integer(element.get("id"), "a <layer> id")
    name = element.get("name") or ""
    kind = element.get("type") or ""
    where = f"layer {layer_id} {name!r} ({kind or 'no type'})"
    if not kind:
        raise DataMoveError(f"{where} has no type attribute")
    data = element.find("data")
    attributes = dict(data.attrib) if data is not None else {}
    ports: Dict[int, str] = {}
    inputs: List[Port] = []
    outputs: List[Port] = []
    for group, into in (("input", inputs), ("output", outputs)):
        for section in element.findall(group):
            for port_element in section.findall("port"):
                port = _port(port_element, where)
                if port.id in ports:
                    raise DataMoveError(f"{where}: port id {port.id} is used twice ({ports[port.id]} and {group})")
                ports[port.id] = group
                into.append(port)
    layer = Layer(layer_id, name, kind, element.get("version") or "", attributes, tuple(inputs), tuple(outputs),
                  dict(element.attrib))
    expected = PORT_COUNTS.get(kind)
    if expected is not None and (len(inputs), len(outputs)) != expected:
        raise DataMoveError(
            f"{where} must have {expected[0]} input and {expected[1]} output ports, "
            f"has {len(inputs)} and {len(outputs)}"
        )
    return layer


def _const_bytes(layer: Layer, element_type: str, shape: Shape) -> int:
    """The byte size a Const of ``shape`` and ``element_type`` needs (``-1``: not computable, e.g. string)."""
    where = layer.describe()
    if shape is None or any(not isinstance(d, int) for d in shape):
        raise DataMoveError(f"{where}: a Const must have a static shape, got shape={layer.attributes.get('shape')!r}")
    bits = ELEMENT_TYPES[element_type][1]
    if bits is None:
        return -1
    count = math.prod(shape)  # type: ignore[arg-type]
    return (count * bits + 7) // 8


def _check_layer_data(layer: Layer, bin_size: Optional[int], bin_path: str) -> None:
    """Attributes of the layer types datamove reads; Const bytes against the .bin."""
    where = layer.describe()
    attributes = layer.attributes
    if layer.type in ("Parameter", "Const"):
        element_type = attributes.get("element_type")
        if element_type not in ELEMENT_TYPES:
            raise DataMoveError(f"{where}: unknown element_type {str(element_type)[:40]!r}")
        if "shape" in attributes:
            layer.shape = parse_dims(attributes["shape"], f"{where} shape")
        elif layer.type == "Const":
            raise DataMoveError(f"{where}: a Const needs a shape attribute")
        else:
            layer.shape = layer.outputs[0].shape
    if layer.type == "Convert" and attributes.get("destination_type") not in ELEMENT_TYPES:
        raise DataMoveError(f"{where}: unknown destination_type {str(attributes.get('destination_type'))[:40]!r}")
    if layer.type in ("SpaceToDepth", "DepthToSpace"):
        _integer(attributes.get("block_size", "1"), f"{where}: block_size")
        if attributes.get("mode") not in ("blocks_first", "depth_first"):
            raise DataMoveError(
                f"{where}: mode must be blocks_first or depth_first, got {str(attributes.get('mode'))[:40]!r}"
            )
    if layer.type != "Const":
        return
    offset = _integer(attributes.get("offset"), f"{where}: offset")
    size = _integer(attributes.get("size"), f"{where}: size")
    needed = _const_bytes(layer, attributes["element_type"], layer.shape)
    if needed >= 0 and size != needed:
        raise DataMoveError(
            f"{where}: size = {size} bytes, but shape {list(layer.shape or ())} of {attributes['element_type']} "
            f"needs {needed}"
        )
    if bin_size is None:
        raise DataMoveError(f"{where} has data at offset {offset}, but the weights file {bin_path} cannot be read")
    if offset + size > bin_size:
        raise DataMoveError(
            f"{where}: offset {offset} + size {size} = {offset + size} is past the end of {bin_path} "
            f"({bin_size} bytes)"
        )
    layer.offset, layer.size = offset, size


def _topological_order(layers: Dict[int, Layer], sources: Dict[Tuple[int, int], Tuple[int, int]]) -> List[int]:
    """Layer ids, each after the layers it reads from; a cycle raises."""
    successors: Dict[int, List[int]] = {layer_id: [] for layer_id in layers}
    pending = {layer_id: 0 for layer_id in layers}
    for (to_layer, _), (from_layer, _) in sources.items():
        successors[from_layer].append(to_layer)
        pending[to_layer] += 1
    ready = [layer_id for layer_id in layers if pending[layer_id] == 0]
    ready.reverse()
    order: List[int] = []
    while ready:
        layer_id = ready.pop()
        order.append(layer_id)
        for successor in successors[layer_id]:
            pending[successor] -= 1
            if pending[successor] == 0:
                ready.append(successor)
    if len(order) < len(layers):
        stuck = [layers[i].describe() for i in layers if pending[i] > 0]
        raise DataMoveError(f"the edges form a cycle; the layers on it or fed by it: {', '.join(stuck[:5])}{' ...' if len(stuck) > 5 else ''}")
    return order


def read_model(xml_path: "str | os.PathLike[str]", bin_path: "str | os.PathLike[str] | None" = None) -> Model:
    """Read an OpenVINO IR (v10 or v11), treating both files as untrusted.

    Parameters
    ----------
    xml_path : str or path
        The ``.xml`` file.
    bin_path : str or path, optional
        The weights. Default: ``xml_path`` with the suffix ``.bin``. A model
        without ``Const`` layers needs none.

    Returns
    -------
    Model
        Its layers (in an order where each comes after its inputs), ports and
        edges; see :meth:`Model.check` and :meth:`Model.run`.

    Raises
    ------
    DataMoveError
        An unreadable, unsafe or inconsistent file; the message names the layer.

    Examples
    --------
    >>> from datamove.ir import read_model
    >>> model = read_model("examples/ir/batch_to_space_2d.xml")
    >>> [layer.type for layer in model.layers]
    ['Parameter', 'Const', 'Const', 'Const', 'BatchToSpace', 'Result']
    """
    xml_path = os.fspath(xml_path)
    bin_path = os.fspath(bin_path) if bin_path is not None else os.path.splitext(xml_path)[0] + ".bin"
    root = _parse_xml(xml_path)
    if root.tag != "net":
        raise DataMoveError(f"{xml_path}: the root element is <{root.tag[:40]}>, not <net>: not an OpenVINO IR")
    version = root.get("version")
    if version not in ("10", "11"):
        raise DataMoveError(f"{xml_path}: IR version {str(version)[:20]!r} is not supported (10 and 11 are)")
    try:
        bin_size: Optional[int] = os.path.getsize(bin_path)
    except OSError:
        bin_size = None

    layers: Dict[int, Layer] = {}
    for section in root.findall("layers"):
        for element in section.findall("layer"):
            layer = _layer(element)
            if layer.id in layers:
                raise DataMoveError(f"layer id {layer.id} is used twice: {layers[layer.id].describe()} and "
                                    f"{layer.describe()}")
            layers[layer.id] = layer
    if not layers:
        raise DataMoveError(f"{xml_path}: the IR has no layers")
    for layer in layers.values():
        _check_layer_data(layer, bin_size, bin_path)

    sources: Dict[Tuple[int, int], Tuple[int, int]] = {}
    for section in root.findall("edges"):
        for i, edge in enumerate(section.findall("edge")):
            where = f"edge {i}"
            from_layer = _integer(edge.get("from-layer"), f"{where}: from-layer")
            from_port = _integer(edge.get("from-port"), f"{where}: from-port")
            to_layer = _integer(edge.get("to-layer"), f"{where}: to-layer")
            to_port = _integer(edge.get("to-port"), f"{where}: to-port")
            where = f"edge {i} (layer {from_layer} port {from_port} -> layer {to_layer} port {to_port})"
            for end in (from_layer, to_layer):
                if end not in layers:
                    raise DataMoveError(f"{where} refers to layer {end}, which does not exist")
            if layers[from_layer].output_index(from_port) is None:
                raise DataMoveError(f"{where}: {layers[from_layer].describe()} has no output port {from_port}")
            if layers[to_layer].input_index(to_port) is None:
                raise DataMoveError(f"{where}: {layers[to_layer].describe()} has no input port {to_port}")
            if (to_layer, to_port) in sources:
                raise DataMoveError(f"{where}: {layers[to_layer].describe()} input port {to_port} has two edges")
            sources[(to_layer, to_port)] = (from_layer, from_port)
    for layer in layers.values():
        for port in layer.inputs:
            if (layer.id, port.id) not in sources:
                raise DataMoveError(f"{layer.describe()}: input port {port.id} has no edge (a dangling input)")
    order = _topological_order(layers, sources)
    return Model(
        name=root.get("name") or "",
        version=int(version),
        layers=[layers[i] for i in order],
        sources=sources,
        xml_path=xml_path,
        bin_path=bin_path,
        bin_size=bin_size,
    )
