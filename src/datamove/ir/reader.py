"""Reading an OpenVINO IR (``.xml`` + ``.bin``) safely: the file is untrusted.

What is refused, each with a :class:`~datamove.DataMoveError` naming the
layer (id, name, type) and the rule:

- any DTD, entity or external reference (``defusedxml``), an XML file over
  :data:`MAX_XML_BYTES`, more than :data:`MAX_XML_ELEMENTS` elements, nesting
  deeper than :data:`MAX_XML_DEPTH`, a single token (a tag with its attributes,
  a comment) longer than :data:`MAX_XML_TOKEN_BYTES`;
- an IR version other than 10 or 11, a duplicate layer id, a port id used twice
  in one layer, a dim that is not ``-1``/``?``/an integer/an interval, a shape
  of more than :data:`MAX_RANK` dims;
- an edge to or from a missing layer or port, an input port with no edge or
  with two, a cycle;
- a ``Const`` whose ``offset``/``size`` is not a non-negative integer, whose
  bytes lie past the end of the ``.bin``, or whose ``size`` is not what its
  ``shape`` and ``element_type`` need; an unknown ``element_type``;
- the known layer types (``Parameter``, ``Const``, ``Convert``, ``Result`` and
  the four operations) with the wrong number of input or output ports.

Nothing is read from the ``.bin`` here but its size: a ``Const``'s bytes are
read (exactly ``size`` bytes at ``offset``) when a check or a run needs them.

Reading takes time linear in the file's size (any accepted file is read or
refused in seconds), and messages quote names and values cut to one short line.

>>> from datamove.ir.reader import parse_dims
>>> parse_dims("?,1..10,..5,2..,4", "shape")
(None, Dim(1, 10), Dim(0, 5), Dim(2, None), 4)
>>> parse_dims("...", "shape") is None, parse_dims("", "shape")
(True, ())
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ElementTree
from typing import Any, Dict, List, NoReturn, Optional, Tuple

from .. import opset
from ..rules.dims import INT64_MAX, DimLike, format_shape, parse_dim
from ..errors import DataMoveError, number, quote, show
from .model import ELEMENT_TYPES, Layer, Model, Port, split_names

__all__ = ["read_model", "parse_dims", "MAX_XML_BYTES", "MAX_XML_ELEMENTS", "MAX_XML_DEPTH", "MAX_XML_TOKEN_BYTES",
           "MAX_RANK"]

#: Largest ``.xml`` accepted (the IRs of large language models are a few tens of MB).
MAX_XML_BYTES = 128 * 2**20
#: Most XML elements accepted: bounds the memory of the parsed tree.
MAX_XML_ELEMENTS = 2_000_000
#: Deepest nesting accepted (an IR needs 6 levels; rt_info and sub-graphs a few more).
MAX_XML_DEPTH = 64
#: Longest single XML token accepted (a start tag with its attributes, a comment, a processing
#: instruction; text is not one token). expat (before 2.6) rescans an unfinished token from its start
#: each time it is given more bytes, and pyexpat gives it at most 1 MiB at a time, so a token of T bytes
#: costs about T**2 / 2 MiB: bounding T keeps reading linear (a 128 MiB file in about a second).
#: Checked after each chunk of :data:`XML_CHUNK_BYTES`: a token up to a chunk longer may pass.
MAX_XML_TOKEN_BYTES = 32 * 2**20
#: Bytes fed to the parser at a time: what pyexpat passes to expat at most in one call anyway.
XML_CHUNK_BYTES = 2**20

Shape = Optional[Tuple[DimLike, ...]]

#: Most dims of a shape (a shape attribute or a port's ``<dim>`` list): NumPy's own limit, and a
#: shape attribute of millions of dims would cost seconds to read and megabytes per message.
MAX_RANK = 64
#: Largest byte size computed for a Const (2**63 - 1: an offset or size past it is refused anyway).
MAX_CONST_BYTES = INT64_MAX

_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")

#: Input and output port counts of the layer types datamove knows.
PORT_COUNTS: Dict[str, Tuple[int, int]] = {
    "Parameter": (0, 1),
    "Const": (0, 1),
    "Convert": (1, 1),
    "Result": (1, 0),
    **{op.openvino_type: op.ports for op in opset.OPS.values()},
}


# ----------------------------------------------------------------- notation


def _small(text: str) -> bool:
    """Is ``text`` plain ASCII digits that fit in int64 (at most 18)? The common case, read without a regex."""
    return len(text) <= 18 and text.isdigit() and text.isascii()


def _dim(text: str, where: str, i: int) -> DimLike:
    """:func:`parse_dim` of dim ``i``, the message's ``where`` built only when it is needed."""
    return int(text) if text and _small(text) else parse_dim(text, f"{where} dim {i}")


def parse_dims(text: str, where: str) -> Shape:
    """A shape attribute as OpenVINO writes it: ``2,?,1..10``; ``...`` is an unknown rank, ``""`` a scalar."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    if text == "...":
        return None
    if not text:
        return ()
    rank = text.count(",") + 1
    if rank > MAX_RANK:
        raise DataMoveError(f"{where} has {number(rank)} dims, more than the {MAX_RANK} accepted")
    return tuple(_dim(item, where, i) for i, item in enumerate(text.split(",")))


def _integer(text: Optional[str], where: str, minimum: int = 0) -> int:
    if text is not None and _small(text) and int(text) >= minimum:
        return int(text)
    if text is None:
        raise DataMoveError(f"{where} is missing")
    text = text.strip()
    if not _INTEGER.fullmatch(text) or not minimum <= int(text) <= INT64_MAX:
        raise DataMoveError(f"{where} must be an integer from {minimum} to 2**63 - 1, got {quote(text, 40)}")
    return int(text)


# ----------------------------------------------------------------- XML


def _short(text: object, limit: int = 200) -> str:
    """Text for a message as it is when short and printable (a parser's message), else cut and quoted."""
    text = str(text)
    return text if len(text) <= limit and text.isprintable() else quote(text, limit)


def _safe_parser(xml_path: str) -> Any:
    """defusedxml's parser (no DTD, entity or external reference) building an ElementTree.

    The element handlers are replaced by two small functions that count the elements and the depth
    (refusing past :data:`MAX_XML_ELEMENTS` and :data:`MAX_XML_DEPTH` as each element starts) and
    call the C tree builder: one Python call per element rather than three.
    """
    import defusedxml.ElementTree as SafeElementTree

    builder = ElementTree.TreeBuilder()
    parser = SafeElementTree.DefusedXMLParser(
        target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    expat = parser.parser
    start_element, end_element = builder.start, builder.end
    depth = count = 0
    namespaces = False

    def fix(name: str) -> str:  # as XMLParser._fixname: expat writes "uri}name", ElementTree "{uri}name"
        return "{" + name if "}" in name else name

    def start(tag: str, attributes: Dict[str, str]) -> None:
        nonlocal depth, count
        depth += 1
        count += 1
        if depth > MAX_XML_DEPTH:
            raise DataMoveError(f"{show(xml_path)}: XML nested deeper than {MAX_XML_DEPTH} levels")
        if count > MAX_XML_ELEMENTS:
            raise DataMoveError(f"{show(xml_path)}: more than {MAX_XML_ELEMENTS} XML elements")
        if namespaces:
            tag = fix(tag)
            attributes = {fix(key): value for key, value in attributes.items()}
        start_element(tag, attributes)

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        end_element(fix(tag) if namespaces else tag)

    start_namespace = expat.StartNamespaceDeclHandler

    def start_ns(prefix: Optional[str], uri: Optional[str]) -> None:
        nonlocal namespaces
        namespaces = True
        if start_namespace is not None:
            start_namespace(prefix, uri)  # pyright: ignore[reportArgumentType]  # typeshed: str; expat passes None too

    expat.ordered_attributes = False  # attributes as a dict, as the tree builder takes them
    expat.StartElementHandler = start
    expat.EndElementHandler = end
    expat.StartNamespaceDeclHandler = start_ns
    return parser


def _parse_xml(xml_path: str) -> ElementTree.Element:
    """The root element of ``xml_path``, parsed with defusedxml (no DTD, entity or external reference).

    The element count and depth are checked as each element starts, the length of the unfinished
    token after each chunk (:data:`MAX_XML_TOKEN_BYTES`): the time is linear in the file's size.
    """
    import defusedxml
    import defusedxml.ElementTree as SafeElementTree

    try:
        size = os.path.getsize(xml_path)
    except OSError as exc:
        raise DataMoveError(f"cannot read {show(xml_path)}: {exc.strerror or exc}") from None
    if size > MAX_XML_BYTES:
        raise DataMoveError(f"{show(xml_path)} is {size} bytes, more than the {MAX_XML_BYTES} accepted for an IR .xml")
    try:
        with open(xml_path, "rb") as file:
            parser = _safe_parser(xml_path)
            total = 0
            while True:
                data = file.read(XML_CHUNK_BYTES)
                if not data:
                    break
                total += len(data)
                if total > MAX_XML_BYTES:  # the file grew since its size was read
                    raise DataMoveError(f"{show(xml_path)} is more than the {MAX_XML_BYTES} bytes accepted for an IR .xml")
                parser.feed(data)
                # expat's position is the end of the last complete token: what follows is one unfinished token
                start = max(parser.parser.CurrentByteIndex, 0)
                if total - start > MAX_XML_TOKEN_BYTES:
                    raise DataMoveError(
                        f"{show(xml_path)}: the XML token (a tag with its attributes, a comment, ...) from byte "
                        f"{start} is longer than the {MAX_XML_TOKEN_BYTES} bytes accepted"
                    )
            root: Optional[ElementTree.Element] = parser.close()
    except DataMoveError:
        raise
    except OSError as exc:
        raise DataMoveError(f"cannot read {show(xml_path)}: {exc.strerror or exc}") from None
    except defusedxml.DTDForbidden:
        raise DataMoveError(f"{show(xml_path)}: XML with a DTD (<!DOCTYPE ...>) is refused: an IR has none") from None
    except defusedxml.EntitiesForbidden as exc:
        raise DataMoveError(f"{show(xml_path)}: XML entity declarations are refused ({_short(exc)})") from None
    except defusedxml.ExternalReferenceForbidden as exc:
        raise DataMoveError(f"{show(xml_path)}: XML external references are refused ({_short(exc)})") from None
    except defusedxml.DefusedXmlException as exc:
        raise DataMoveError(f"{show(xml_path)}: unsafe XML refused ({_short(exc)})") from None
    except (ElementTree.ParseError, SafeElementTree.ParseError) as exc:
        raise DataMoveError(f"{show(xml_path)} is not well-formed XML: {_short(exc)}") from None
    except (ValueError, RecursionError, UnicodeError, LookupError) as exc:  # LookupError: an unknown encoding
        raise DataMoveError(f"{show(xml_path)} is not a readable XML file: {type(exc).__name__}: {_short(exc)}") from None
    if root is None:
        raise DataMoveError(f"{show(xml_path)} has no XML element")
    return root


# ----------------------------------------------------------------- layers


def _port(element: ElementTree.Element, where: str) -> Port:
    port_id = _integer(element.get("id"), f"{where}: port id")
    where = f"{where} port {port_id}"
    dim_elements = element.findall("dim")
    if len(dim_elements) > MAX_RANK:
        raise DataMoveError(f"{where} has {number(len(dim_elements))} dims, more than the {MAX_RANK} accepted")
    dims = [_dim(dim.text or "", where, i) for i, dim in enumerate(dim_elements)]
    # OpenVINO writes no <dim> for both a scalar and an unknown rank; the reader keeps "no dims" as None.
    shape = tuple(dims) if dims else None
    return Port(port_id, shape, element.get("precision"), split_names(element.get("names")))


def _layer(element: ElementTree.Element) -> Layer:
    layer_id = _integer(element.get("id"), "a <layer> id")
    name = element.get("name") or ""
    kind = element.get("type") or ""
    if not kind:
        raise DataMoveError(f"layer {layer_id} {quote(name)} (no type) has no type attribute")
    data = element.find("data")
    attributes = dict(data.attrib) if data is not None else {}
    ports: Dict[int, str] = {}
    inputs: List[Port] = []
    outputs: List[Port] = []
    sections = (("input", inputs, element.findall("input")), ("output", outputs, element.findall("output")))
    # how messages name the layer (Layer.describe), built only for a layer with ports or a wrong count of them
    where = f"layer {layer_id} {quote(name)} ({_short(kind, 80)})" if sections[0][2] or sections[1][2] \
        or kind in PORT_COUNTS else ""
    for group, into, found in sections:
        for section in found:
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


def _shape_text(shape: Shape, limit: int = 8) -> str:
    """A shape for a message: ``[2, 3]``, a long one cut (``[1, 2, 3, 4, 5, 6, 7, ..., 9] (rank 64)``)."""
    if shape is None or len(shape) <= limit:
        return format_shape(shape)
    head = format_shape(shape[:limit - 1])[:-1]
    return f"{head}, ..., {format_shape(shape[-1:])[1:]} (rank {len(shape)})"


def _const_bytes(layer: Layer, element_type: str, shape: Shape) -> int:
    """The byte size a Const of ``shape`` and ``element_type`` needs (``-1``: not computable, e.g. string).

    A size past :data:`MAX_CONST_BYTES` is returned as ``MAX_CONST_BYTES + 1``: the product of a long
    shape of large dims would be a huge integer, slow to compute and no use (no ``.bin`` is that large).
    """
    where = layer.describe()
    if shape is None or any(not isinstance(d, int) for d in shape):
        raise DataMoveError(f"{where}: a Const must have a static shape, got shape="
                            f"{quote(layer.attributes.get('shape'))}")
    bits = ELEMENT_TYPES[element_type][1]
    if bits is None:
        return -1
    if 0 in shape:
        return 0
    count = 1
    for d in shape:
        count *= d  # type: ignore[operator]
        if count > MAX_CONST_BYTES * 8:
            return MAX_CONST_BYTES + 1
    return min((count * bits + 7) // 8, MAX_CONST_BYTES + 1)


_CHECKED_TYPES = frozenset(("Parameter", "Const", "Convert", "SpaceToDepth", "DepthToSpace"))


def _check_layer_data(layer: Layer, bin_size: Optional[int], bin_path: str) -> None:
    """Attributes of the layer types datamove reads; Const bytes against the .bin."""
    if layer.type not in _CHECKED_TYPES:
        return
    where = layer.describe()
    attributes = layer.attributes
    if layer.type in ("Parameter", "Const"):
        element_type = attributes.get("element_type")
        if element_type not in ELEMENT_TYPES:
            raise DataMoveError(f"{where}: unknown element_type {quote(element_type, 40)}")
        if "shape" in attributes:
            layer.shape = parse_dims(attributes["shape"], f"{where} shape")
        elif layer.type == "Const":
            raise DataMoveError(f"{where}: a Const needs a shape attribute")
        else:
            layer.shape = layer.outputs[0].shape
    if layer.type == "Convert" and attributes.get("destination_type") not in ELEMENT_TYPES:
        raise DataMoveError(f"{where}: unknown destination_type {quote(attributes.get('destination_type'), 40)}")
    if layer.type in ("SpaceToDepth", "DepthToSpace"):
        _integer(attributes.get("block_size", "1"), f"{where}: block_size")
        if attributes.get("mode") not in ("blocks_first", "depth_first"):
            raise DataMoveError(
                f"{where}: mode must be blocks_first or depth_first, got {quote(attributes.get('mode'), 40)}"
            )
    if layer.type != "Const":
        return
    offset = _integer(attributes.get("offset"), f"{where}: offset")
    size = _integer(attributes.get("size"), f"{where}: size")
    needed = _const_bytes(layer, attributes["element_type"], layer.shape)
    if needed >= 0 and size != needed:
        needs = f"more than {MAX_CONST_BYTES}" if needed > MAX_CONST_BYTES else str(needed)
        raise DataMoveError(
            f"{where}: size = {size} bytes, but shape {_shape_text(layer.shape or ())} of "
            f"{attributes['element_type']} needs {needs}"
        )
    if bin_size is None:
        raise DataMoveError(f"{where} has data at offset {offset}, but the weights file {show(bin_path)} cannot be read")
    if offset + size > bin_size:
        raise DataMoveError(
            f"{where}: offset {offset} + size {size} = {offset + size} is past the end of {show(bin_path)} "
            f"({bin_size} bytes)"
        )
    layer.offset, layer.size = offset, size


def _topological_order(layers: Dict[int, Layer], sources: Dict[Tuple[int, int], Tuple[int, int]]) -> List[int]:
    """Layer ids, each after the layers it reads from; a cycle raises."""
    successors: Dict[int, List[int]] = {}  # only the layers that feed some
    pending = dict.fromkeys(layers, 0)
    for (to_layer, _), (from_layer, _) in sources.items():
        successors.setdefault(from_layer, []).append(to_layer)
        pending[to_layer] += 1
    ready = [layer_id for layer_id in layers if pending[layer_id] == 0]
    ready.reverse()
    order: List[int] = []
    while ready:
        layer_id = ready.pop()
        order.append(layer_id)
        for successor in successors.get(layer_id, ()):
            pending[successor] -= 1
            if pending[successor] == 0:
                ready.append(successor)
    if len(order) < len(layers):
        stuck = [i for i in layers if pending[i] > 0]
        shown = ", ".join(layers[i].describe() for i in stuck[:5])
        raise DataMoveError(f"the edges form a cycle; the layers on it or fed by it: {shown}"
                            f"{f' ... ({len(stuck)} layers)' if len(stuck) > 5 else ''}")
    return order


_EDGE_ENDS = ("from-layer", "from-port", "to-layer", "to-port")


def _refuse_edge(layers: Dict[int, Layer], i: int, ends: List[int]) -> NoReturn:
    """Raise the DataMoveError that edge ``i`` (from-layer, from-port, to-layer, to-port) deserves."""
    from_layer, from_port, to_layer, to_port = ends
    where = f"edge {i} (layer {from_layer} port {from_port} -> layer {to_layer} port {to_port})"
    for end in (from_layer, to_layer):
        if end not in layers:
            raise DataMoveError(f"{where} refers to layer {end}, which does not exist")
    if layers[from_layer].output_index(from_port) is None:
        raise DataMoveError(f"{where}: {layers[from_layer].describe()} has no output port {from_port}")
    if layers[to_layer].input_index(to_port) is None:
        raise DataMoveError(f"{where}: {layers[to_layer].describe()} has no input port {to_port}")
    raise DataMoveError(f"{where}: {layers[to_layer].describe()} input port {to_port} has two edges")


def _path(value: object, name: str) -> str:
    """A path argument as a str: str, bytes (decoded as the file system does) or any os.PathLike."""
    try:
        return os.fsdecode(os.fspath(value))  # type: ignore[call-overload]  # any object: fspath says TypeError
    except TypeError:
        raise TypeError(f"{name} must be a path (str, bytes or os.PathLike), got {type(value).__name__}") from None


def read_model(xml_path: "str | bytes | os.PathLike[str] | os.PathLike[bytes]",
               bin_path: "str | bytes | os.PathLike[str] | os.PathLike[bytes] | None" = None) -> Model:
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
    xml_path = _path(xml_path, "xml_path")
    bin_path = _path(bin_path, "bin_path") if bin_path is not None else os.path.splitext(xml_path)[0] + ".bin"
    root = _parse_xml(xml_path)
    if root.tag != "net":
        raise DataMoveError(f"{show(xml_path)}: the root element is <{_short(root.tag, 40)}>, not <net>: not an OpenVINO IR")
    version = root.get("version")
    if version not in ("10", "11"):
        raise DataMoveError(f"{show(xml_path)}: IR version {quote(version, 20)} is not supported (10 and 11 are)")
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
        raise DataMoveError(f"{show(xml_path)}: the IR has no layers")
    for layer in layers.values():
        _check_layer_data(layer, bin_size, bin_path)

    sources: Dict[Tuple[int, int], Tuple[int, int]] = {}
    for section in root.findall("edges"):
        for i, edge in enumerate(section.findall("edge")):
            from_layer, from_port, to_layer, to_port = ends = [
                _integer(edge.get(key), f"edge {i}: {key}") for key in _EDGE_ENDS
            ]
            source, target = layers.get(from_layer), layers.get(to_layer)
            if (source is None or target is None or source.output_index(from_port) is None
                    or target.input_index(to_port) is None or (to_layer, to_port) in sources):
                _refuse_edge(layers, i, ends)
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
