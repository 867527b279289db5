"""An OpenVINO IR model as datamove reads it: layers, ports, edges; ``check`` and ``run``.

:func:`datamove.ir.read_model` builds a :class:`Model`. :meth:`Model.check`
infers every output shape with :mod:`datamove.shapes` and lists where the IR's
recorded dims disagree; :meth:`Model.run` executes graphs of ``Parameter``,
``Const``, ``Convert``, the four operations and ``Result`` with the core ops.

How recorded dims compare. OpenVINO writes an interval or unknown dim of a
port as ``-1`` (only a ``Parameter``'s ``shape`` attribute keeps its bounds,
e.g. ``?,1..10,..5,2..``) and writes no ``<dim>`` at all for an unknown rank.
So a recorded dim agrees with an inferred one when both are the same static
size, or the recorded one is ``-1`` and the inferred one is not static; a port
with no dims agrees with an unknown rank. A hand-written interval in a
``<dim>`` must equal the inferred interval.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, cast

import numpy as np

from .. import opset
from ..rules.dims import Dim, DimLike, format_shape
from ..errors import DataMoveError, number, quote, show
from ..rules.types import Engine

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Model", "Layer", "Port", "CheckReport", "Mismatch", "ELEMENT_TYPES", "RUNNABLE_TYPES"]

Shape = Optional[Tuple[DimLike, ...]]

#: OpenVINO element types: NumPy dtype (None: datamove cannot hold it) and bits per element
#: (None: no fixed size, so a Const's size is only bounds-checked).
ELEMENT_TYPES: Dict[str, Tuple[Optional[str], Optional[int]]] = {
    "boolean": ("bool", 8),
    "bf16": ("bfloat16", 16),
    "f16": ("<f2", 16),
    "f32": ("<f4", 32),
    "f64": ("<f8", 64),
    "i8": ("i1", 8),
    "i16": ("<i2", 16),
    "i32": ("<i4", 32),
    "i64": ("<i8", 64),
    "u8": ("u1", 8),
    "u16": ("<u2", 16),
    "u32": ("<u4", 32),
    "u64": ("<u8", 64),
    "u1": (None, 1),
    "u4": (None, 4),
    "i4": (None, 4),
    "nf4": (None, 4),
    "f4e2m1": (None, 4),
    "f8e4m3": (None, 8),
    "f8e5m2": (None, 8),
    "f8e8m0": (None, 8),
    "u2": (None, None),
    "u3": (None, None),
    "u6": (None, None),
    "string": (None, None),
    "dynamic": (None, None),
    "undefined": (None, None),
}

#: The layer types :meth:`Model.run` executes (and :meth:`Model.check` infers).
RUNNABLE_TYPES = ("Parameter", "Const", "Convert") + opset.OPENVINO_TYPES + ("Result",)
#: OpenVINO type -> datamove's name, for the operations (:mod:`datamove.opset`).
OPERATIONS = {op.openvino_type: op.name for op in opset.OPS.values()}
#: Constant parameters larger than this are not read for shape inference (no rank is that large).
MAX_FOLDED_ELEMENTS = 4096
#: Longest chain of Converts followed back to a Const for shape inference.
MAX_FOLDED_CONVERTS = 64
#: Const data at least this large is memory-mapped rather than read.
MEMMAP_BYTES = 1 << 20


def split_names(text: Optional[str]) -> Tuple[str, ...]:
    """OpenVINO's tensor-name lists: comma-separated, a literal comma escaped as ``\\,``.

    >>> split_names("data, image\\,left")
    ('data', 'image,left')
    """
    if not text:
        return ()
    if "\\" not in text:  # no escaped comma: a plain split, about twice as fast on a long list
        return tuple(name for name in map(str.strip, text.split(",")) if name)
    names = [part.replace("\\,", ",").strip() for part in re.split(r"(?<!\\),", text)]
    return tuple(name for name in names if name)


@dataclass(frozen=True)
class Port:
    """A port of a layer: its id, recorded dims (None: no ``<dim>``), precision and tensor names."""

    id: int
    shape: Shape
    precision: Optional[str] = None
    names: Tuple[str, ...] = ()


@dataclass(eq=False)
class Layer:
    """A ``<layer>``: id, name, type, opset version, ``<data>`` attributes, ports.

    ``shape`` is the ``shape`` attribute of a ``Parameter`` or ``Const``
    (intervals kept); ``offset``/``size`` locate a ``Const``'s bytes in the ``.bin``.
    """

    id: int
    name: str
    type: str
    version: str
    attributes: Dict[str, str]
    inputs: Tuple[Port, ...]
    outputs: Tuple[Port, ...]
    xml_attributes: Dict[str, str] = field(default_factory=dict)
    shape: Shape = None
    offset: int = -1
    size: int = -1

    def describe(self) -> str:
        """``layer 4 'b2s' (BatchToSpace)``: how messages name a layer (a long or odd name or type cut, quoted)."""
        kind = self.type if isinstance(self.type, str) and len(self.type) <= 80 and self.type.isprintable() \
            else quote(self.type)
        layer_id = number(self.id) if isinstance(self.id, int) else quote(self.id)
        return f"layer {layer_id} {quote(self.name)} ({kind})"

    def input_index(self, port_id: int) -> Optional[int]:
        """The index in ``inputs`` of the port with this id (the first, if repeated); None if there is none."""
        return _port_index(self, "_input_indexes", self.inputs, port_id)

    def output_index(self, port_id: int) -> Optional[int]:
        """The index in ``outputs`` of the port with this id (the first, if repeated); None if there is none."""
        return _port_index(self, "_output_indexes", self.outputs, port_id)


#: Layers with more ports than this look ports up in a dict (built once) rather than by a scan.
_SCANNED_PORTS = 8


def _port_index(layer: Layer, slot: str, ports: Tuple[Port, ...], port_id: int) -> Optional[int]:
    """The index in ``ports`` of ``port_id``: a scan of a few ports, else a ``port id -> index`` dict.

    The dict is kept on the layer while ``ports`` is the same tuple: a layer with many ports is looked
    up once per edge, and a scan per look-up would be quadratic.
    """
    if len(ports) <= _SCANNED_PORTS:
        return next((i for i, port in enumerate(ports) if port.id == port_id), None)
    cached = layer.__dict__.get(slot)
    if cached is None or cached[0] is not ports:
        indexes: Dict[int, int] = {}
        for i, port in enumerate(ports):
            indexes.setdefault(port.id, i)
        cached = (ports, indexes)
        layer.__dict__[slot] = cached
    return cached[1].get(port_id)


@dataclass(frozen=True)
class Mismatch:
    """A port whose recorded dims disagree with the inferred shape."""

    layer: str
    port: int
    direction: str
    recorded: Shape
    inferred: Shape

    def __str__(self) -> str:
        recorded = "no dims" if self.recorded is None else format_shape(self.recorded)
        return (f"{self.layer} {self.direction} port {self.port}: recorded {recorded}, "
                f"inferred {format_shape(self.inferred)}")


@dataclass
class CheckReport:
    """What :meth:`Model.check` found.

    Attributes
    ----------
    ok : bool
        True when every recorded shape agrees and every layer is valid.
    mismatches : list of Mismatch
        Ports whose recorded dims disagree with the inferred shape.
    invalid : list of str
        Layers that break a rule of their operation (the rule's message).
    opaque : list of str
        Layers of other types, whose recorded output shapes were trusted.
    checked : int
        Layers whose output shapes were inferred.
    inferred : dict
        ``(layer id, output port id) -> shape``: every output's shape as
        inferred (opaque layers: as recorded).
    """

    model: str
    layers: int
    checked: int
    mismatches: List[Mismatch] = field(default_factory=list)
    invalid: List[str] = field(default_factory=list)
    opaque: List[str] = field(default_factory=list)
    inferred: Dict[Tuple[int, int], Shape] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.invalid

    def __str__(self) -> str:
        lines = [f"{self.model}: {self.layers} layers, {self.checked} inferred, {len(self.opaque)} opaque"
                 + (f" ({', '.join(self.opaque[:10])}{', ...' if len(self.opaque) > 10 else ''})"
                    if self.opaque else "")]
        lines += [f"invalid: {message}" for message in self.invalid]
        lines += [f"mismatch: {mismatch}" for mismatch in self.mismatches]
        if self.ok:
            lines.append("OK: every recorded shape agrees with the inferred one")
        else:
            lines.append(f"FAILED: {len(self.mismatches)} mismatch(es), {len(self.invalid)} invalid layer(s)")
        return "\n".join(lines)


# ----------------------------------------------------------------- helpers


def numpy_dtype(element_type: str, where: str) -> np.dtype:
    """The NumPy dtype of an OpenVINO element type (bf16 through ml_dtypes); unsupported ones raise."""
    name = ELEMENT_TYPES.get(element_type, (None, None))[0]
    if name is None:
        raise DataMoveError(f"{where}: element_type {element_type!r} is not supported by datamove.ir")
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise DataMoveError(f"{where}: element_type bf16 needs the ml_dtypes package, which is not installed") \
                from None
        bfloat16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
        return bfloat16
    return np.dtype(name)


def _dim_agrees(recorded: DimLike, inferred: DimLike) -> bool:
    static = isinstance(inferred, int) or (isinstance(inferred, Dim) and inferred.is_static)
    if recorded is None:
        return not static
    if isinstance(recorded, Dim):
        return recorded == inferred if inferred is not None else recorded == Dim(0, None)
    return static and inferred == recorded


def shapes_agree(recorded: Shape, inferred: Shape) -> bool:
    """Do a port's recorded dims (None: no ``<dim>``) fit the inferred shape, as OpenVINO serialises it?

    >>> shapes_agree((2, None), (2, Dim(1, 10))), shapes_agree((2, 8), (2, Dim(1, 10))), shapes_agree(None, None)
    (True, False, True)
    """
    if recorded is None:
        return inferred is None or inferred == ()
    if inferred is None:
        return False
    return len(recorded) == len(inferred) and all(map(_dim_agrees, recorded, inferred))


def convert_exactly(value: np.ndarray, dtype: np.dtype, where: str) -> np.ndarray:
    """``value.astype(dtype)`` when every value survives; otherwise DataMoveError.

    OpenVINO's plugins differ on rounding and saturation of inexact conversions,
    so datamove only performs exact ones (and any conversion to boolean: non-zero is true).

    >>> convert_exactly(np.array([1, 2], np.int32), np.dtype(np.int64), "x")
    array([1, 2])
    """
    if dtype == np.bool_:
        truth: np.ndarray[Any, Any] = value != 0 if value.dtype != np.bool_ else value.copy()
        return truth
    with np.errstate(all="ignore"):
        converted = value.astype(dtype)
        back = converted.astype(value.dtype)
    same = back == value
    if value.dtype.kind in "fc" or value.dtype.name == "bfloat16":
        nan = np.isnan(value.astype(np.float64)) if value.dtype.name == "bfloat16" else np.isnan(value)
        same |= nan & (converted.dtype.kind in "fc" or converted.dtype.name == "bfloat16")
    if not np.all(same):
        index = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0])
        raise DataMoveError(
            f"{where}: converting {value.dtype} to {dtype} is not exact for the value {value[index]!r} at {index} "
            "(datamove runs only exact conversions: OpenVINO's plugins differ on rounding and saturation)"
        )
    return converted


def _itemsize(element_type: str) -> int:
    """Bytes per element of an OpenVINO element type (at least 1: a packed type counts a byte an element)."""
    bits = ELEMENT_TYPES.get(element_type, (None, None))[1]
    return max((bits or 8) // 8, 1)


# ----------------------------------------------------------------- model


def _max_bytes(value: Any) -> Optional[int]:
    """``max_bytes`` of :meth:`Model.run`: None or a non-negative integer (not a bool, a float or a str)."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"max_bytes must be a non-negative integer or None, got {type(value).__name__} "
                        f"{quote(repr(value), 40)}")
    limit = operator.index(value)
    if limit < 0:
        raise DataMoveError(f"max_bytes must be a non-negative integer or None, got {number(limit)}")
    return limit


class Model:
    """An OpenVINO IR model read by :func:`datamove.ir.read_model`.

    Attributes
    ----------
    name : str
    version : int
        The IR version, 10 or 11.
    layers : list of Layer
        In an order where every layer comes after the layers it reads.
    sources : dict
        ``(layer id, input port id) -> (layer id, output port id)``: the edges.
    """

    def __init__(self, name: str, version: int, layers: List[Layer],
                 sources: Dict[Tuple[int, int], Tuple[int, int]], xml_path: str, bin_path: str,
                 bin_size: Optional[int]) -> None:
        self.name = name
        self.version = version
        self.layers = layers
        self.sources = sources
        self.xml_path = xml_path
        self.bin_path = bin_path
        self.bin_size = bin_size
        self._by_id = {layer.id: layer for layer in layers}

    def __repr__(self) -> str:
        return f"<datamove.ir.Model {quote(self.name)} from {self.xml_path!r}: {len(self.layers)} layers>"

    def layer(self, layer_id: int) -> Layer:
        """The layer with this id."""
        return self._by_id[layer_id]

    @property
    def parameters(self) -> List[Layer]:
        """The ``Parameter`` layers, in file order."""
        return sorted((layer for layer in self.layers if layer.type == "Parameter"), key=lambda l: l.id)

    @property
    def results(self) -> List[Layer]:
        """The ``Result`` layers, in file order."""
        return sorted((layer for layer in self.layers if layer.type == "Result"), key=lambda l: l.id)

    def _source(self, layer: Layer, index: int) -> Tuple[Layer, int]:
        """The layer and output index feeding input ``index`` of ``layer``."""
        from_layer, from_port = self.sources[(layer.id, layer.inputs[index].id)]
        source = self._by_id[from_layer]
        return source, source.output_index(from_port)  # type: ignore[return-value]

    # ------------------------------------------------------------- constants

    def const_value(self, layer: Layer) -> np.ndarray:
        """The data of a ``Const`` layer, read from the ``.bin`` (exactly its ``size`` bytes at ``offset``).

        bf16 without ml_dtypes comes back as its raw bits (``uint16``); running it then raises.
        """
        where = layer.describe()
        if layer.type != "Const":
            raise DataMoveError(f"{where} is not a Const")
        element_type = layer.attributes["element_type"]
        try:
            dtype = numpy_dtype(element_type, where)
        except DataMoveError:
            if element_type != "bf16":
                raise
            dtype = np.dtype("<u2")
        shape = tuple(int(d) for d in layer.shape or ())  # type: ignore[arg-type]
        try:
            with open(self.bin_path, "rb") as file:
                file.seek(0, 2)
                if file.tell() != self.bin_size:
                    raise DataMoveError(f"{where}: {show(self.bin_path)} changed size since the model was read")
                if layer.size >= MEMMAP_BYTES and dtype != np.bool_:
                    return np.memmap(file, dtype=dtype, mode="r", offset=layer.offset, shape=shape)
                file.seek(layer.offset)
                data = file.read(layer.size)
        except OSError as exc:
            raise DataMoveError(f"{where}: cannot read {show(self.bin_path)}: {exc.strerror or exc}") from None
        if len(data) != layer.size:
            raise DataMoveError(f"{where}: read {len(data)} of {layer.size} bytes from {show(self.bin_path)}")
        array: np.ndarray[Any, Any]
        if dtype == np.bool_:
            array = (np.frombuffer(data, np.uint8) != 0).reshape(shape)
        else:
            array = np.frombuffer(data, dtype).reshape(shape)
        return array

    def _folded_value(self, layer: Layer, index: int, memo: Dict[int, Optional[np.ndarray]]) -> Optional[np.ndarray]:
        """The constant value on input ``index`` (a Const, possibly through Converts), or None if not constant."""
        source, _ = self._source(layer, index)
        converts: List[Layer] = []
        while source.type == "Convert" and source.id not in memo and len(converts) < MAX_FOLDED_CONVERTS:
            converts.append(source)
            source, _ = self._source(source, 0)
        if source.id in memo:
            value = memo[source.id]
        else:
            value = None
            element_type = source.attributes.get("element_type")
            known = ELEMENT_TYPES.get(element_type or "", (None, None))[0] not in (None, "bfloat16")
            if source.type == "Const" and known:
                static = cast(Tuple[int, ...], source.shape or ())  # a Const's shape is static (the reader checks)
                count = math.prod(int(d) for d in static)
                if count <= MAX_FOLDED_ELEMENTS:
                    value = self.const_value(source)
            memo[source.id] = value
        for convert in reversed(converts):
            if value is not None:
                try:
                    dtype = numpy_dtype(convert.attributes["destination_type"], convert.describe())
                    value = convert_exactly(value, dtype, convert.describe())
                except DataMoveError:
                    value = None
            memo[convert.id] = value
        return value

    def _folded_params(self, layer: Layer, memo: Dict[int, Optional[np.ndarray]]) -> List[Any]:
        """An operation layer's parameters as shape inference sees them: constants folded, any other None."""
        if layer.type in ("BatchToSpace", "SpaceToBatch"):
            return [self._folded_value(layer, i, memo) for i in (1, 2, 3)]
        return [layer.attributes["mode"], int(layer.attributes.get("block_size", "1"))]

    # ------------------------------------------------------------- check

    def check(self) -> CheckReport:
        """Infer every layer's output shape and compare with the recorded dims.

        Parameter shapes come from their ``shape`` attribute (intervals kept);
        constant parameters of the operations from ``Const`` layers (through
        ``Convert``); any other parameter is unknown. Layers of other types
        are opaque: their recorded output dims are trusted and passed on.

        Returns
        -------
        CheckReport
            ``report.ok`` is True when everything agrees; ``str(report)`` is readable.

        Examples
        --------
        >>> from datamove.ir import read_model
        >>> report = read_model("examples/ir/batch_to_space_5d.xml").check()
        >>> report.ok, report.checked, report.opaque
        (True, 6, [])
        """
        report = CheckReport(model=f"model {quote(self.name)} ({show(self.xml_path)})", layers=len(self.layers), checked=0)
        inferred = report.inferred
        memo: Dict[int, Optional[np.ndarray]] = {}

        def compare(layer: Layer, port: Port, direction: str, shape: Shape) -> None:
            if not shapes_agree(port.shape, shape):
                report.mismatches.append(Mismatch(layer.describe(), port.id, direction, port.shape, shape))

        for layer in self.layers:
            in_shapes = []
            for index, port in enumerate(layer.inputs):
                source, out_index = self._source(layer, index)
                shape = inferred[(source.id, source.outputs[out_index].id)]
                in_shapes.append(shape)
                compare(layer, port, "input", shape)
            outputs: List[Shape]
            if layer.type in ("Parameter", "Const"):
                outputs = [layer.shape]
            elif layer.type == "Convert":
                outputs = [in_shapes[0]]
            elif layer.type == "Result":
                outputs = []
            elif layer.type in OPERATIONS:
                function = opset.by_openvino_type(layer.type).shape_rule
                try:
                    outputs = [function(in_shapes[0], *self._folded_params(layer, memo))]
                except (DataMoveError, TypeError) as exc:
                    report.invalid.append(f"{layer.describe()}: {exc}")
                    outputs = [port.shape for port in layer.outputs]
            else:
                report.opaque.append(layer.describe())
                outputs = [port.shape for port in layer.outputs]
                for port, shape in zip(layer.outputs, outputs):
                    inferred[(layer.id, port.id)] = shape
                continue
            report.checked += 1
            for port, shape in zip(layer.outputs, outputs):
                inferred[(layer.id, port.id)] = shape
                compare(layer, port, "output", shape)
        return report

    # ------------------------------------------------------------- run

    def input_names(self) -> Dict[str, Layer]:
        """Names accepted by :meth:`run` for each Parameter: its friendly name, then its tensor names."""
        names: Dict[str, Layer] = {}
        for layer in self.parameters:
            names.setdefault(layer.name, layer)
        for layer in self.parameters:
            for name in layer.outputs[0].names:
                names.setdefault(name, layer)
        return names

    def output_names(self) -> Dict[str, Layer]:
        """The name :meth:`run` gives each Result's array.

        As OpenVINO names a model's outputs: the Result's ``output_names``
        attribute if it has one (IR v11 from OpenVINO 2025 on), else the
        first tensor name of the port feeding it, else the Result's own name.
        A name already taken falls back to the Result's own name.
        """
        names: Dict[str, Layer] = {}
        for layer in self.results:
            candidates = list(split_names(layer.xml_attributes.get("output_names")))
            source, index = self._source(layer, 0)
            candidates += list(source.outputs[index].names)
            name = next((n for n in candidates), layer.name)
            if name in names:
                name = layer.name
            if name in names:
                name = f"{layer.name}:{layer.id}"
            names[name] = layer
        return names

    def checked_inputs(self, inputs: Mapping[str, Any]) -> Dict[int, np.ndarray]:
        """``inputs`` checked as :meth:`run` checks them (every Parameter once, by name; dtype and shape):
        ``Parameter id -> array``."""
        if not isinstance(inputs, Mapping):
            raise TypeError(f"inputs must be a mapping of Parameter names to arrays, got {type(inputs).__name__}")
        accepted = self.input_names()
        given: Dict[int, np.ndarray] = {}
        for key, value in inputs.items():
            if key not in accepted:
                known = [quote(layer.name) for layer in self.parameters[:8]]
                more = f" and {len(self.parameters) - 8} more" if len(self.parameters) > 8 else ""
                raise DataMoveError(f"input {quote(key)} is not a Parameter of the model; its inputs are "
                                    f"{', '.join(known) or '(none)'}{more}")
            layer = accepted[key]
            if layer.id in given:
                raise DataMoveError(f"input {quote(key)} names {layer.describe()}, which was given already")
            given[layer.id] = self._checked_input(layer, key, value)
        missing = [layer.name for layer in self.parameters if layer.id not in given]
        if missing:
            more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            raise DataMoveError(f"missing input(s) {', '.join(map(quote, missing[:8]))}{more}: every Parameter "
                                "needs an array")
        return given

    def run(self, inputs: Mapping[str, Any], *, engine: Engine = "auto", max_bytes: Optional[int] = None,
            allocate: Optional[Callable[[str, Tuple[int, ...], np.dtype[Any]], NDArray[Any]]] = None,
            progress: Optional[Callable[[int, int, Optional[Layer]], object]] = None) -> Dict[str, NDArray[Any]]:
        """Execute the model with the core operations.

        Parameters
        ----------
        inputs : mapping of str to array
            One array per ``Parameter``, by its name (friendly name or tensor
            name); its dtype must be the Parameter's element type and its shape
            must fit the Parameter's (possibly dynamic) shape.
        engine : str
            Passed to the operations.
        max_bytes : int, optional
            Refuse (before allocating) to compute arrays of more than this
            many bytes in all, the outputs' copies included: a bound on the
            memory an untrusted model may take. A non-negative integer;
            default: no bound.
        allocate : callable, optional
            ``allocate(name, shape, dtype)`` gives the array output ``name``
            is written into (e.g. a ``.npy`` memory map, so a large output is
            never held in memory): the operation feeding the ``Result``
            writes straight into it. Default: new arrays.
        progress : callable, optional
            ``progress(done, total, layer)``, called before each layer runs
            (and once at the end, ``layer`` None), with the bytes written so
            far and in all by the layers that move data (:meth:`bytes_written`):
            for a progress bar with the time left.

        Returns
        -------
        dict of str to numpy.ndarray
            One array per ``Result``, named as :meth:`output_names` says.
            Each is an array of its own: an output fed straight from an
            input or a ``Const`` (or feeding two Results) is copied, so
            writing to it changes nothing else and no output maps a file.

        Raises
        ------
        DataMoveError
            A layer type other than Parameter, Const, Convert, Result and the
            four operations; a missing, unknown or ill-fitting input; an
            invalid layer (the operation's rule, naming the layer).

        Examples
        --------
        >>> import numpy as np
        >>> from datamove.ir import read_model
        >>> model = read_model("examples/ir/space_to_depth.xml")
        >>> x = np.arange(5 * 7 * 4 * 6, dtype=np.float32).reshape(5, 7, 4, 6)
        >>> {name: y.shape for name, y in model.run({"data": x}).items()}
        {'output': (5, 28, 2, 3)}
        """
        from .. import ops

        max_bytes = _max_bytes(max_bytes)
        unsupported = [layer.describe() for layer in self.layers if layer.type not in RUNNABLE_TYPES]
        if unsupported:
            raise DataMoveError(
                f"cannot run {unsupported[0]}{f' (and {len(unsupported) - 1} more)' if len(unsupported) > 1 else ''}"
                f": datamove runs only {', '.join(RUNNABLE_TYPES)}"
            )
        given = self.checked_inputs(inputs)

        values: Dict[Tuple[int, int], np.ndarray] = {}
        outputs: Dict[int, np.ndarray] = {}
        allocated = 0
        names = self.output_names()
        # an operation feeding a Result writes into that output's own array when the caller allocates them
        direct: Dict[int, str] = {}
        if allocate is not None:
            for name, result_layer in names.items():
                source, _ = self._source(result_layer, 0)
                if source.type in OPERATIONS:
                    direct.setdefault(source.id, name)
        given_arrays: Dict[str, np.ndarray] = {}
        work = self.bytes_written(given) if progress is not None else {}
        total, done = sum(work.values()), 0
        for layer in self.layers:
            if progress is not None:
                progress(done, total, layer)
            done += work.get(layer.id, 0)
            where = layer.describe()
            arguments = []
            for index in range(len(layer.inputs)):
                source, out_index = self._source(layer, index)
                arguments.append(values[(source.id, source.outputs[out_index].id)])
            if layer.type == "Parameter":
                result = given[layer.id]
            elif layer.type == "Const":
                result = self.const_value(layer)
                numpy_dtype(layer.attributes["element_type"], where)  # bf16 without ml_dtypes: raise here
            elif layer.type == "Convert":
                if max_bytes is not None:
                    allocated += arguments[0].size * numpy_dtype(layer.attributes["destination_type"], where).itemsize
                    if allocated > max_bytes:
                        raise DataMoveError(f"{where}: its output would take the arrays computed past "
                                            f"max_bytes = {max_bytes}")
                result = convert_exactly(arguments[0], numpy_dtype(layer.attributes["destination_type"], where),
                                         where)
            elif layer.type == "Result":
                outputs[layer.id] = arguments[0]
                continue
            else:
                operation = getattr(ops, OPERATIONS[layer.type])
                if layer.type in ("BatchToSpace", "SpaceToBatch"):
                    params: List[Any] = arguments[1:]
                else:
                    params = [layer.attributes["mode"], int(layer.attributes.get("block_size", "1"))]
                try:
                    if max_bytes is not None:
                        shape = opset.by_openvino_type(layer.type).shape_rule(arguments[0].shape, *params)
                        allocated += math.prod(shape) * arguments[0].dtype.itemsize
                        if allocated > max_bytes:
                            raise DataMoveError(f"its output {format_shape(shape)} {arguments[0].dtype} would take "
                                                f"the arrays computed past max_bytes = {max_bytes}")
                    if layer.id in direct:
                        name = direct[layer.id]
                        shape = opset.by_openvino_type(layer.type).shape_rule(arguments[0].shape, *params)
                        out = allocate(name, tuple(shape), arguments[0].dtype)  # type: ignore[misc]
                        given_arrays[name] = out
                        result = operation(arguments[0], *params, engine=engine, out=out)
                    else:
                        result = operation(arguments[0], *params, engine=engine)
                except (DataMoveError, TypeError) as exc:
                    raise DataMoveError(f"{where}: {exc}") from None
            values[(layer.id, layer.outputs[0].id)] = result
        results: Dict[str, np.ndarray] = {}
        borrowed = [*given.values(), *(values[(layer.id, layer.outputs[0].id)] for layer in self.layers
                                       if layer.type == "Const")]
        for name, layer in names.items():
            array = outputs[layer.id]
            if allocate is not None:
                if given_arrays.get(name) is not array:  # not written in place: copied into its own array
                    if max_bytes is not None:
                        allocated += array.nbytes
                        if allocated > max_bytes:
                            raise DataMoveError(f"{layer.describe()}: the copy of its output would take the arrays "
                                                f"computed past max_bytes = {max_bytes}")
                    target = allocate(name, tuple(array.shape), array.dtype)
                    np.copyto(target, array, casting="no")
                    array = target
                results[name] = array
                continue
            array = np.asarray(array)
            if any(np.may_share_memory(array, other) for other in [*borrowed, *results.values()]):
                if max_bytes is not None:
                    allocated += array.nbytes
                    if allocated > max_bytes:
                        raise DataMoveError(f"{layer.describe()}: the copy of its output would take the arrays "
                                            f"computed past max_bytes = {max_bytes}")
                array = np.array(array, copy=True)
            results[name] = array
        if progress is not None:
            progress(total, total, None)
        return results

    def bytes_written(self, given: Mapping[int, np.ndarray]) -> Dict[int, int]:
        """The bytes each Convert and operation layer writes when run on ``given``, from shapes alone.

        The measure of :meth:`run`'s progress: the work that takes time is
        moving bytes, and a Parameter, Const or Result moves none. An
        operation whose output shape is not known before it runs (a parameter
        computed from an input) counts its input's bytes.

        Parameters
        ----------
        given : mapping of int to numpy.ndarray
            Each Parameter's array, by layer id (:meth:`checked_inputs`).

        Examples
        --------
        >>> import numpy as np
        >>> from datamove.ir import read_model
        >>> model = read_model("examples/ir/space_to_depth.xml")
        >>> given = model.checked_inputs({"data": np.zeros((5, 7, 4, 6), np.float32)})
        >>> [(model.layer(i).type, n) for i, n in model.bytes_written(given).items()]   # 5 * 28 * 2 * 3 float32
        [('SpaceToDepth', 3360)]
        """
        shapes: Dict[Tuple[int, int], Tuple[Optional[Tuple[int, ...]], int]] = {}  # (shape, item size)
        written: Dict[int, int] = {}
        memo: Dict[int, Optional[np.ndarray]] = {}
        for layer in self.layers:
            if layer.type == "Result" or not layer.outputs:
                continue
            if layer.type == "Parameter":
                array = given[layer.id]
                shape: Optional[Tuple[int, ...]] = tuple(array.shape)
                itemsize = array.dtype.itemsize
            elif layer.type == "Const":
                shape = tuple(int(d) for d in layer.shape or ())  # type: ignore[arg-type]
                itemsize = _itemsize(layer.attributes.get("element_type", ""))
            else:
                source, index = self._source(layer, 0)
                in_shape, itemsize = shapes[(source.id, source.outputs[index].id)]
                shape = in_shape
                if layer.type == "Convert":
                    itemsize = _itemsize(layer.attributes.get("destination_type", ""))
                elif in_shape is not None:
                    shape = self._static_output_shape(layer, in_shape, memo) or in_shape
                written[layer.id] = math.prod(shape or ()) * itemsize
            shapes[(layer.id, layer.outputs[0].id)] = (shape, itemsize)
        return written

    def _static_output_shape(self, layer: Layer, in_shape: Tuple[int, ...],
                             memo: Dict[int, Optional[np.ndarray]]) -> Optional[Tuple[int, ...]]:
        """An operation layer's output shape for this input shape, or None where it is not known before running."""
        try:
            shape = opset.by_openvino_type(layer.type).shape_rule(in_shape, *self._folded_params(layer, memo))
        except (DataMoveError, TypeError, ValueError):  # an invalid layer: run() raises its error itself
            return None
        if shape is None or not all(isinstance(d, int) for d in shape):
            return None
        return tuple(shape)

    def _checked_input(self, layer: Layer, key: str, value: Any) -> np.ndarray:
        where = f"input {quote(key)} ({layer.describe()})"
        if isinstance(value, np.ndarray):
            array = value
        else:
            try:
                array = np.asarray(value)
            except Exception as exc:
                raise TypeError(f"{where} could not be read as an array: {exc}") from None
        element_type = layer.attributes["element_type"]
        if element_type not in ("dynamic", "undefined"):
            dtype = numpy_dtype(element_type, where)
            if array.dtype != dtype:
                raise DataMoveError(f"{where} has dtype {array.dtype}, but the Parameter's element_type is "
                                    f"{element_type} ({dtype})")
        shape = layer.shape
        if shape is not None:
            fits = len(shape) == array.ndim and all(
                d is None or (d == n if isinstance(d, int) else d.lo <= n and (d.hi is None or n <= d.hi))
                for d, n in zip(shape, array.shape))
            if not fits:
                raise DataMoveError(f"{where} has shape {format_shape(array.shape)}, which does not fit the "
                                    f"Parameter's shape {format_shape(shape)}")
        return array
