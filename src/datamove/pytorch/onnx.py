"""Export to ONNX: the four operations as standard ONNX ops, from both of PyTorch's exporters.

``torch.onnx.export(model, args)`` works on a model that calls datamove's
operations or :mod:`datamove.nn`'s modules, and the ONNX model holds only
standard ops (no custom domain), so any ONNX runtime runs it:

- ``dynamo=True`` (PyTorch's default exporter): ``torch.export`` records each
  call as one node ``torch.ops.datamove.<op>`` and the translations here
  write it in ONNX: ``DepthToSpace`` (``DCR``/``CRD``) and ``SpaceToDepth``
  (``DCR``: ONNX has no CRD ``SpaceToDepth``) for 4-D tensors of the types
  onnxruntime's kernels take (float16/32/64, int8, uint8), the spec's
  ``Reshape`` / ``Transpose`` / ``Reshape`` for every other case and rank,
  with ``Pad`` before SpaceToBatch and ``Slice`` after BatchToSpace; a size
  the export leaves dynamic (``dynamic_shapes``, any dim) is read by ``Shape``
  when the model runs, so the reshapes take any size. They
  join the exporter's function library (onnxscript's torch_lib) when
  ``torch.ops.datamove`` is defined, or when onnxscript loads after that
  (:func:`register`); :func:`datamove.pytorch.custom_ops.translation_table` gives
  them for ``custom_translation_table=`` too. An export that meets datamove before
  they joined records PyTorch's ops instead, as the TorchScript exporter does.
- ``dynamo=False`` (the TorchScript exporter, and ``torch.jit.trace``): a
  traced call is recorded as PyTorch's own ops, :func:`traced`, the same
  formula (``datamove.plans.formulas``), with the shape arithmetic recorded on the
  traced sizes (so ``dynamic_axes`` on any dim gives ``Shape``-driven
  reshapes).

The translations are written for ONNX opset 18, the exporter's own; it
converts the model to the ``opset_version`` asked for.

Examples
--------
>>> import io, torch, onnx
>>> from datamove import nn
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 1), nn.DepthToSpace("blocks_first", 2))
>>> f = io.BytesIO()
>>> torch.onnx.export(model, (torch.zeros(1, 3, 8, 8),), f, dynamo=False)
>>> [node.op_type for node in onnx.load_from_string(f.getvalue()).graph.node if node.op_type != "Constant"]
['Conv', 'Reshape', 'Transpose', 'Reshape']
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..plans import formulas
from .. import opset

if TYPE_CHECKING:  # onnxscript's tensor type, which _add_to_torch_lib names at run time, when onnxscript is loaded
    TTensor = Any

__all__ = ["traced", "TRANSLATIONS", "register", "ready", "exporting"]

_INT64_MAX = 2**63 - 1


# ------------------------------------------------ TorchScript: PyTorch's own ops


def traced(op: str, args: Tuple[Any, ...], data: Any, out: Optional[Any] = None) -> Any:
    """``op`` on ``data`` as PyTorch ops that a trace records (pad, reshape, permute, reshape, slice).

    The call is validated by :mod:`datamove.shapes` on the example's sizes,
    as any other; the steps are then computed from ``data.shape`` as the
    trace gives it (sizes that it records, ``aten::size``), never from ints,
    so the trace holds the shape arithmetic and runs at other sizes (and the
    TorchScript exporter writes ``Shape``-driven ONNX).
    """
    import torch
    from torch.jit._trace import TracerWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracerWarning)
        shape = tuple(int(d) for d in data.shape)
    params = opset.OPS[op].resolve(shape, *args).params
    s = formulas.steps(op, params, tuple(data.shape))
    x = data
    if s.pads is not None:
        begin, end = s.pads
        x = torch.nn.functional.pad(x, [w for i in reversed(range(len(shape))) for w in (begin[i], end[i])])
    x = x.reshape(s.split).permute(s.perm).reshape(s.merged)
    if s.crops is not None:  # ends counted from the end: no size needed
        x = x[tuple(slice(b, -e if e else None) for b, e in zip(*s.crops))]
    if formulas.steps(op, params, shape).moves_nothing:
        x = x.clone()  # the reshapes were views of ``data``
    if out is None:
        return x
    out.copy_(x)
    return out


# ----------------------------------------------- torch.export: ONNX translations


def _op() -> Any:
    from onnxscript import opset18

    return opset18


def _ints(op: Any, values: Sequence[int]) -> Any:
    return op.Constant(value_ints=[int(v) for v in values])


class _Size:
    """A size known only when the ONNX model runs: a 1-element int64 tensor of the graph, with the arithmetic
    :func:`datamove.plans.formulas.steps` does on sizes (``*``, ``//``, ``+``, ``-`` with ints and each other)."""

    def __init__(self, op: Any, value: Any) -> None:
        self.op, self.value = op, value

    def _of(self, other: Any) -> Any:
        return other.value if isinstance(other, _Size) else _ints(self.op, [other])

    def __mul__(self, other: Any) -> "_Size":
        return _Size(self.op, self.op.Mul(self.value, self._of(other)))

    __rmul__ = __mul__

    def __add__(self, other: Any) -> "_Size":
        return _Size(self.op, self.op.Add(self.value, self._of(other)))

    __radd__ = __add__

    def __sub__(self, other: Any) -> "_Size":
        return _Size(self.op, self.op.Sub(self.value, self._of(other)))

    def __floordiv__(self, other: Any) -> "_Size":  # sizes are >= 0: Div's truncation is floor division
        return _Size(self.op, self.op.Div(self.value, self._of(other)))


def _dims(op: Any, data: Any) -> Tuple[Any, ...]:
    """``data``'s shape: an int where the export knows the size, else a :class:`_Size` read by ``Shape``."""
    return tuple(d if isinstance(d, int) else _Size(op, op.Shape(data, start=i, end=i + 1))
                 for i, d in enumerate(data.shape))


def _shape(op: Any, dims: Sequence[Any]) -> Any:
    """A shape operand for ``Reshape``: a constant when every size is known, else the sizes concatenated."""
    if all(isinstance(d, int) for d in dims):
        return _ints(op, dims)
    pieces: List[Any] = []
    for d in dims:
        if isinstance(d, _Size):
            pieces.append(d.value)
        elif pieces and isinstance(pieces[-1], list):
            pieces[-1].append(d)
        else:
            pieces.append([d])
    return op.Concat(*[_ints(op, p) if isinstance(p, list) else p for p in pieces], axis=0)


def _formula(op: Any, name: str, params: Dict[str, Any], data: Any) -> Any:
    """``Pad`` / ``Reshape`` / ``Transpose`` / ``Reshape`` / ``Slice``, the steps of :mod:`datamove.plans.formulas`.

    A size the export left dynamic enters the steps as a :class:`_Size`, so
    the shapes of the reshapes are computed from ``Shape`` when the model
    runs, and no size is baked in.
    """
    s = formulas.steps(name, params, _dims(op, data))
    x = data
    if s.pads is not None:
        x = op.Pad(x, _ints(op, s.pads[0] + s.pads[1]))
    x = op.Reshape(op.Transpose(op.Reshape(x, _shape(op, s.split)), perm=list(s.perm)), _shape(op, s.merged))
    if s.crops is not None:
        axes = [i for i, (b, e) in enumerate(zip(*s.crops)) if b or e]
        begin, end = s.crops
        ends = [(-end[i] if end[i] else _INT64_MAX) for i in axes]
        x = op.Slice(x, _ints(op, [begin[i] for i in axes]), _ints(op, ends), _ints(op, axes))
    return x


# the types onnxruntime's DepthToSpace and SpaceToDepth kernels take (others: the formula, which all take)
_NATIVE_DTYPES = frozenset({"FLOAT", "DOUBLE", "FLOAT16", "UINT8", "INT8"})


def _native(data: Any) -> bool:
    return len(data.shape) == 4 and getattr(data.dtype, "name", None) in _NATIVE_DTYPES


def _depth_to_space(data: TTensor, mode: str, block_size: int) -> TTensor:
    op = _op()
    if _native(data):
        return op.DepthToSpace(data, blocksize=int(block_size), mode="DCR" if mode == "blocks_first" else "CRD")
    return _formula(op, "depth_to_space", {"mode": mode, "block_size": block_size}, data)


def _space_to_depth(data: TTensor, mode: str, block_size: int) -> TTensor:
    op = _op()
    if mode == "blocks_first" and _native(data):
        return op.SpaceToDepth(data, blocksize=int(block_size))
    return _formula(op, "space_to_depth", {"mode": mode, "block_size": block_size}, data)


def _batch_to_space(data: TTensor, block_shape: Sequence[int], begin: Sequence[int], end: Sequence[int]) -> TTensor:
    return _formula(_op(), "batch_to_space", opset.OPS["batch_to_space"].kwargs((block_shape, begin, end)), data)


def _space_to_batch(data: TTensor, block_shape: Sequence[int], begin: Sequence[int], end: Sequence[int]) -> TTensor:
    return _formula(_op(), "space_to_batch", opset.OPS["space_to_batch"].kwargs((block_shape, begin, end)), data)


TRANSLATIONS: Dict[str, Callable[..., Any]] = {
    "batch_to_space": _batch_to_space,
    "space_to_batch": _space_to_batch,
    "space_to_depth": _space_to_depth,
    "depth_to_space": _depth_to_space,
}


_REGISTERED = threading.Event()
_LOCK = threading.Lock()


def ready() -> bool:
    """Whether the exporter's library has the translations (else an export records PyTorch ops, :func:`traced`)."""
    return _REGISTERED.is_set()


def exporting() -> bool:
    """True while ``torch.onnx.export`` runs (either exporter)."""
    onnx = sys.modules.get("torch.onnx")
    return onnx is not None and bool(onnx.is_in_onnx_export())


def register() -> None:
    """Give the translations to ``torch.onnx``'s exporter (onnxscript's torch_lib library), once.

    The exporter builds its function library before it traces the model, so
    this runs when ``torch.ops.datamove`` is defined: at once if onnxscript
    is loaded, else as soon as it is (importing onnxscript costs 0.4 s, which
    a process that never exports should not pay).
    """
    if _REGISTERED.is_set():
        return
    if "onnxscript" in sys.modules:
        _add_to_torch_lib()
    else:
        _after_import("onnxscript", _add_to_torch_lib)


def _add_to_torch_lib() -> None:
    with _LOCK:
        if _REGISTERED.is_set():
            return
        try:
            from onnxscript.function_libs.torch_lib.registration import torch_op
        except ImportError:  # an onnxscript without torch_lib: custom_translation_table=torch_ops.translation_table()
            return
        # onnxscript evaluates the translations' annotations in this module's globals (an ERROR on stderr for
        # each it does not know): its tensor type is named here only now, as importing it costs an import
        # of onnxscript that a process which never exports should not pay
        from onnxscript.function_libs.torch_lib.tensor_typing import TTensor

        globals()["TTensor"] = TTensor
        for name, function in TRANSLATIONS.items():
            torch_op(f"datamove::{name}", trace_only=True)(function)
        _REGISTERED.set()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback`` once module ``name`` has been executed by an import (a post-import hook)."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name, self.callback = name, callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the real one, by the finders after this one
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenCall(spec.loader, self.callback)
        return spec


class _ThenCall(importlib.abc.Loader):
    def __init__(self, loader: Any, callback: Callable[[], None]) -> None:
        self.loader, self.callback = loader, callback

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        try:
            self.callback()
        except Exception:  # never break the user's import of onnxscript
            pass

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, get_filename, ...
        return getattr(self.loader, name)


def _after_import(name: str, callback: Callable[[], None]) -> None:
    with _LOCK:
        if not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
            sys.meta_path.insert(0, _AfterImport(name, callback))
