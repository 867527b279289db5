"""Verify a real model's data-movement layers in OpenVINO against datamove.

:func:`verify` runs an OpenVINO IR model with OpenVINO itself, every layer
kept OpenVINO's (Convolution, Transpose, ReLU, ...), with the input and the
output of each ``BatchToSpace``, ``SpaceToBatch``, ``SpaceToDepth`` and
``DepthToSpace`` layer exposed as extra outputs. It then recomputes each of
those layers with datamove's operations from the input OpenVINO fed it, and
compares the two results bit for bit. ``datamove verify MODEL.xml -i
NAME=FILE.npy`` is the same on the command line (exit status 1 when a layer
differs).

OpenVINO is an optional dependency: it is imported when :func:`verify` runs,
never by ``import datamove.ir``.

>>> import numpy as np
>>> from datamove.ir import verify
>>> x = np.arange(5 * 7 * 4 * 6, dtype=np.float32).reshape(5, 7, 4, 6)
>>> report = verify("examples/ir/space_to_depth.xml", {"data": x})
>>> print(report)
model 'space_to_depth' (examples/ir/space_to_depth.xml) on CPU: 1 of 3 layers moves data
equal: layer 'SpaceToDepth_47' (SpaceToDepth; blocks_first, block_size 2): [5, 7, 4, 6] -> [5, 28, 2, 3] float32
OK: every data-movement layer equals datamove's result
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..rules.dims import format_shape
from ..errors import DataMoveError, brief, quote, show
from .model import OPERATIONS

__all__ = ["verify", "VerifyReport", "LayerReport", "Difference"]

#: The layer types verified, in the order messages name them.
VERIFIED_TYPES = tuple(OPERATIONS)
#: How many differing elements a layer's report lists (all are counted).
MAX_DIFFERENCES = 5
_PARAMETERS = {"BatchToSpace": ("block_shape", "crops_begin", "crops_end"),
               "SpaceToBatch": ("block_shape", "pads_begin", "pads_end")}
_INSTALL = "pip install openvino"


# ----------------------------------------------------------------- the report


@dataclass(frozen=True)
class Difference:
    """One element where OpenVINO's output and datamove's differ: its index and both values."""

    index: Tuple[int, ...]
    openvino: Any
    datamove: Any

    def __str__(self) -> str:
        return f"at {list(self.index)}: OpenVINO {_shown(self.openvino)}, datamove {_shown(self.datamove)}"


@dataclass
class LayerReport:
    """One data-movement layer as :func:`verify` found it.

    Attributes
    ----------
    name, type : str
        The layer's (friendly) name and its OpenVINO type.
    parameters : dict
        ``block_shape`` and ``crops_*``/``pads_*`` as OpenVINO fed them, or
        ``mode`` and ``block_size``.
    input_shape, output_shape : tuple of int
        The data OpenVINO fed the layer, and the output OpenVINO computed.
    dtype : str
        The element type, as a NumPy dtype's name.
    elements : int
        The elements of OpenVINO's output.
    mismatches : int
        The elements whose bits differ from datamove's result.
    differences : tuple of Difference
        The first few of them (in C order).
    problem : str or None
        Why the outputs cannot be compared element by element: datamove
        refuses the parameters OpenVINO ran, or the shapes or dtypes differ.
    """

    name: str
    type: str
    parameters: Dict[str, Any]
    input_shape: Tuple[int, ...]
    output_shape: Tuple[int, ...]
    dtype: str
    elements: int = 0
    mismatches: int = 0
    differences: Tuple[Difference, ...] = ()
    problem: Optional[str] = None

    @property
    def ok(self) -> bool:
        """True when datamove computes exactly OpenVINO's output, bit for bit."""
        return self.problem is None and self.mismatches == 0

    def describe(self) -> str:
        """``layer 's2b' (SpaceToBatch; block_shape [1, 2], ...)``: the layer with its parameters."""
        if self.type in _PARAMETERS:
            params = ", ".join(f"{name} {brief(value)}" for name, value in self.parameters.items())
        else:
            params = f"{self.parameters.get('mode')}, block_size {self.parameters.get('block_size')}"
        return f"layer {quote(self.name)} ({self.type}; {params})"

    def __str__(self) -> str:
        shapes = f"{format_shape(self.input_shape)} -> {format_shape(self.output_shape)} {self.dtype}"
        if self.ok:
            return f"equal: {self.describe()}: {shapes}"
        if self.problem is not None:
            return f"differs: {self.describe()}: {shapes}: {self.problem}"
        lines = [f"differs: {self.describe()}: {shapes}: {self.mismatches} of {self.elements} elements differ"]
        lines += [f"  {difference}" for difference in self.differences]
        if self.mismatches > len(self.differences):
            lines.append(f"  ... and {self.mismatches - len(self.differences)} more")
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        """The layer as JSON-ready values (a NaN or infinity as a string)."""
        return {
            "name": self.name, "type": self.type, "ok": self.ok,
            "parameters": {key: _json_value(value) for key, value in self.parameters.items()},
            "input_shape": list(self.input_shape), "output_shape": list(self.output_shape), "dtype": self.dtype,
            "elements": self.elements, "mismatches": self.mismatches,
            "differences": [{"index": list(d.index), "openvino": _json_value(d.openvino),
                             "datamove": _json_value(d.datamove)} for d in self.differences],
            "problem": self.problem,
        }


@dataclass
class VerifyReport:
    """What :func:`verify` found: one :class:`LayerReport` per data-movement layer, in graph order.

    ``report.ok`` is True when every one equals datamove's result (or there is
    none); ``str(report)`` is what ``datamove verify`` prints, and
    :meth:`to_dict` what ``datamove verify --json`` prints.
    """

    model: str
    path: str
    device: str
    total_layers: int
    layers: List[LayerReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(layer.ok for layer in self.layers)

    @property
    def failed(self) -> List[LayerReport]:
        """The layers whose output differs from datamove's."""
        return [layer for layer in self.layers if not layer.ok]

    def __str__(self) -> str:
        head = f"model {quote(self.model)} ({show(self.path)})"
        if not self.layers:
            return (f"{head}: no {', '.join(VERIFIED_TYPES[:-1])} or {VERIFIED_TYPES[-1]} layer among its "
                    f"{self.total_layers} layers: nothing to verify")
        verb = "moves" if len(self.layers) == 1 else "move"
        lines = [f"{head} on {quote(self.device)[1:-1]}: {len(self.layers)} of {self.total_layers} layers {verb} data"]
        lines += [str(layer) for layer in self.layers]
        failed = self.failed
        if failed:
            layers = "layer" if len(self.layers) == 1 else "layers"
            verb = "differs" if len(failed) == 1 else "differ"
            lines.append(f"FAILED: {len(failed)} of {len(self.layers)} data-movement {layers} {verb} from "
                         "datamove's result")
        else:
            lines.append("OK: every data-movement layer equals datamove's result")
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        """The report as JSON-ready values: ``json.dumps(report.to_dict(), allow_nan=False)`` works."""
        return {"model": self.model, "path": self.path, "device": self.device, "ok": self.ok,
                "total_layers": self.total_layers, "layers": [layer.to_dict() for layer in self.layers]}


def _shown(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value) or isinstance(value, str):
        return str(value)
    return repr(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, complex):
        return str(value)
    return value


# ----------------------------------------------------------------- comparison


def _bits(array: np.ndarray) -> np.ndarray:
    """The elements as unsigned integers of their width (bytes as a last axis past 8), so NaNs compare by bits."""
    array = np.ascontiguousarray(array)
    if array.dtype.itemsize in (1, 2, 4, 8):
        return array.view(f"u{array.dtype.itemsize}")
    return array.view(np.uint8).reshape(*array.shape, array.dtype.itemsize)


def _scalar(array: np.ndarray, index: Tuple[int, ...]) -> Any:
    """The element at ``index`` as a Python value (bfloat16 and other ml_dtypes as float)."""
    value = array[index]
    if array.dtype.kind == "V" or array.dtype.name in ("bfloat16",) or array.dtype.kind not in "biufcSUMm":
        try:
            return float(value)
        except (TypeError, ValueError):
            return str(value)
    return value.item() if hasattr(value, "item") else value


def _compare(layer: LayerReport, expected: np.ndarray, got: np.ndarray, max_differences: int) -> None:
    if expected.shape != got.shape or expected.dtype != got.dtype:
        layer.problem = (f"OpenVINO's output is {format_shape(got.shape)} {got.dtype}, datamove's "
                         f"{format_shape(expected.shape)} {expected.dtype}")
        return
    differ = _bits(expected) != _bits(got)
    if differ.ndim > expected.ndim:
        differ = differ.any(axis=-1)
    layer.mismatches = int(np.count_nonzero(differ))
    if layer.mismatches:
        first = np.flatnonzero(differ.ravel())[:max_differences]
        indexes = [tuple(int(i) for i in np.unravel_index(flat, got.shape)) for flat in first]
        layer.differences = tuple(Difference(index, _scalar(got, index), _scalar(expected, index))
                                  for index in indexes)


# ----------------------------------------------------------------- OpenVINO


def _import_openvino() -> Any:
    try:
        import openvino
    except ImportError:
        raise DataMoveError(f"verifying a model needs OpenVINO, which is not installed: {_INSTALL}") from None
    for name in ("Core", "Model", "Tensor", "Type"):
        if not hasattr(openvino, name):
            raise DataMoveError(f"the installed openvino package has no openvino.{name}: datamove verify needs "
                                f"OpenVINO 2023.1 or later ({_INSTALL} --upgrade)")
    return openvino


def _openvino_message(exc: BaseException) -> str:
    """OpenVINO's message without its ``Exception from src/...`` trace lines, one line, cut."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Exception from ")] or lines
    text = lines[-1] if lines else type(exc).__name__
    return quote(re.sub(r"\s+", " ", text), 300)[1:-1]


def _key(output: Any) -> Tuple[Any, int]:
    """An OpenVINO output port, hashable: its node's instance id (or unique name) and its index."""
    node = output.get_node()
    identity = node.get_instance_id() if hasattr(node, "get_instance_id") else node.get_name()
    return identity, output.get_index()


def _input_tensor(openvino: Any, array: np.ndarray) -> Any:
    """What OpenVINO takes for an input: the array, or a tensor of its bits for bfloat16 (which OpenVINO reads as f16)."""
    if array.dtype.name != "bfloat16":
        return array
    tensor = openvino.Tensor(openvino.Type.bf16, list(array.shape))
    tensor.data[...] = np.ascontiguousarray(array).view(np.float16)
    return tensor


def _output_array(openvino: Any, tensor: Any) -> np.ndarray:
    """A copy of an output tensor as NumPy, bf16 as ml_dtypes' bfloat16 (OpenVINO shows its bits as float16)."""
    data = np.array(tensor.data, copy=True)
    if tensor.element_type == openvino.Type.bf16:
        try:
            import ml_dtypes

            return data.view(np.uint16).view(ml_dtypes.bfloat16)
        except ImportError:
            return data.view(np.uint16)
    return data


def _settings(core: Any, device: str, config: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """f32 inference where the device has the hint, then the caller's config.

    A CPU with bf16 (AMX, AVX-512 BF16) and a GPU default to a lower precision:
    a data-movement layer would then see rounded values while its exposed input
    keeps the original ones, a difference that is not the layer's.
    """
    settings: Dict[str, Any] = {}
    try:
        if "INFERENCE_PRECISION_HINT" in core.get_property(device, "SUPPORTED_PROPERTIES"):
            settings["INFERENCE_PRECISION_HINT"] = "f32"
    except Exception:  # an unknown device: compile_model says so
        pass
    settings.update(config or {})
    return settings


def verify(model_path: Any, inputs: Mapping[str, Any], *, device: str = "CPU", bin_path: Any = None,
           config: Optional[Mapping[str, Any]] = None, max_differences: int = MAX_DIFFERENCES) -> VerifyReport:
    """Run a model in OpenVINO and recompute each of its data-movement layers with datamove.

    Every ``BatchToSpace``, ``SpaceToBatch``, ``SpaceToDepth`` and
    ``DepthToSpace`` layer's data input, parameters and output are exposed as
    extra outputs of the model (``openvino.Model.add_outputs``); the model
    runs once on ``device``; each layer is then recomputed with
    `datamove.space_to_batch` (and the others) from the data and parameters
    OpenVINO fed it, and the two outputs are compared bit for bit (a NaN
    equals a NaN of the same bits). Every other layer is OpenVINO's alone.

    Parameters
    ----------
    model_path : str or path-like
        The IR's ``.xml`` file. It is read first by :func:`datamove.ir.read_model`
        (safely: untrusted files), then by OpenVINO.
    inputs : mapping of str to array
        One array per ``Parameter``, by its name (friendly name or tensor
        name), checked as :meth:`Model.run` checks them: dtype of the
        Parameter's element type, shape that fits its dims.
    device : str
        The OpenVINO device to run on (``"CPU"``, ``"GPU"``, ...).
    bin_path : str or path-like, optional
        The weights (default: the ``.xml``'s name with ``.bin``).
    config : mapping, optional
        OpenVINO properties for ``compile_model``. By default the inference
        precision is f32 where the device has the hint (see Notes).
    max_differences : int
        How many differing elements each layer lists (all are counted).

    Returns
    -------
    VerifyReport
        One :class:`LayerReport` per data-movement layer; ``report.ok`` is
        True when all equal datamove's results. A model with none of the four
        layers gives an empty report (and OpenVINO does not run it).

    Raises
    ------
    DataMoveError
        OpenVINO is not installed (``pip install openvino``); the files
        cannot be read; an input is missing, unknown or does not fit;
        OpenVINO cannot read, compile or run the model (its message).

    Notes
    -----
    The extra outputs keep the exposed tensors from being fused away, so
    OpenVINO runs a graph that differs from the deployed one only by them.
    Where a device would run in a lower precision by default (bf16 on CPUs
    with AMX or AVX-512 BF16, f16 on GPUs) a layer could see rounded values
    while its exposed input keeps the original ones; so the hint is f32
    unless ``config`` says otherwise. Layers inside the bodies of ``Loop``,
    ``TensorIterator`` or ``If`` layers are not reached.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(2 * 6 * 10 * 3 * 3, dtype=np.float32).reshape(2, 6, 10, 3, 3)
    >>> report = verify("examples/ir/space_to_batch.xml", {"data": x})
    >>> report.ok, [(layer.type, layer.output_shape) for layer in report.layers]
    (True, [('SpaceToBatch', (48, 3, 3, 1, 3))])
    """
    from .. import ops
    from .reader import read_model

    if not isinstance(device, str) or not device:
        raise TypeError(f"device must be a non-empty str, got {brief(device)}")
    if isinstance(max_differences, bool) or not isinstance(max_differences, int):
        raise TypeError(f"max_differences must be an int, got {type(max_differences).__name__}")
    if max_differences < 0:
        raise DataMoveError(f"max_differences must be 0 or more, got {brief(max_differences)}")
    model = read_model(model_path, bin_path)
    given = model.checked_inputs(inputs)
    openvino = _import_openvino()
    core = openvino.Core()
    try:
        ov_model = core.read_model(str(model.xml_path), str(model.bin_path))
    except RuntimeError as exc:
        raise DataMoveError(f"OpenVINO cannot read {show(model.xml_path)}: {_openvino_message(exc)}") from None
    report = VerifyReport(model=model.name, path=str(model.xml_path), device=device,
                          total_layers=len(ov_model.get_ops()))
    nodes = [node for node in ov_model.get_ordered_ops() if node.get_type_name() in OPERATIONS]
    if not nodes:
        return report

    # the ports to expose: each layer's inputs (data and parameters) and its output
    wanted = []
    for node in nodes:
        wanted += [node.input_value(i) for i in range(node.get_input_size())]
        wanted.append(node.output(0))
    exposed = {_key(result.input_value(0)) for result in ov_model.get_results()}
    new: Dict[Tuple[Any, int], Any] = {}
    for port in wanted:
        if _key(port) not in exposed:
            new.setdefault(_key(port), port)
    if new:
        try:
            ov_model.add_outputs(list(new.values()))
        except RuntimeError as exc:
            raise DataMoveError(f"OpenVINO cannot expose the data-movement layers' tensors of "
                                f"{show(model.xml_path)}: {_openvino_message(exc)}") from None
    index: Dict[Tuple[Any, int], int] = {}
    for i, output in enumerate(ov_model.outputs):
        index.setdefault(_key(output.get_node().input_value(0)), i)

    parameters = {layer.name: layer for layer in model.parameters}
    feed: Dict[int, Any] = {}
    for position, parameter in enumerate(ov_model.get_parameters()):
        read = parameters.get(parameter.get_friendly_name())
        if read is None or read.id not in given:
            raise DataMoveError(f"OpenVINO's Parameter {quote(parameter.get_friendly_name())} is not a Parameter "
                                f"datamove read in {show(model.xml_path)}")
        feed[position] = _input_tensor(openvino, given[read.id])
    try:
        compiled = core.compile_model(ov_model, device, _settings(core, device, config))
        request = compiled.create_infer_request()
        request.infer(feed)
    except RuntimeError as exc:
        raise DataMoveError(f"OpenVINO cannot run {show(model.xml_path)} on {quote(device)}: "
                            f"{_openvino_message(exc)}") from None

    def value(port: Any) -> np.ndarray:
        return _output_array(openvino, request.get_output_tensor(index[_key(port)]))

    for node in nodes:
        kind = node.get_type_name()
        data = value(node.input_value(0))
        got = value(node.output(0))
        if kind in _PARAMETERS:
            arrays = [value(node.input_value(i)) for i in (1, 2, 3)]
            params: Dict[str, Any] = {name: [int(v) for v in array.ravel()]
                                      for name, array in zip(_PARAMETERS[kind], arrays)}
            arguments: List[Any] = list(arrays)
        else:
            attributes = node.get_attributes()
            params = {"mode": str(attributes.get("mode")), "block_size": int(attributes.get("block_size", 1))}
            arguments = [params["mode"], params["block_size"]]
        layer = LayerReport(name=node.get_friendly_name(), type=kind, parameters=params,
                            input_shape=tuple(data.shape), output_shape=tuple(got.shape), dtype=str(got.dtype),
                            elements=int(got.size))
        try:
            expected = getattr(ops, OPERATIONS[kind])(data, *arguments)
        except (DataMoveError, TypeError) as exc:
            layer.problem = f"datamove refuses what OpenVINO ran: {exc}"
        else:
            _compare(layer, np.asarray(expected), got, max_differences)
        report.layers.append(layer)
    return report
