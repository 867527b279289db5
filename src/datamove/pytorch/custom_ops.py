"""The PyTorch custom ops ``torch.ops.datamove.<op>``: one node per call for autograd, ``torch.compile`` and export.

Each of the four operations is registered with ``torch.library`` (on first
use: PyTorch is imported only here, and only then) with

- a *fake* implementation that takes the output shape from the operation's
  shape rule (:mod:`datamove.opset` → :mod:`datamove.shapes`), so
  ``torch.compile`` and ``torch.export`` see every rule checked at trace time,
  and a symbolic batch stays symbolic;
- a backward that is the adjoint operation (SpaceToBatch with pads = crops
  for BatchToSpace; the other depth operation with the same mode and size);
- a body that is datamove's own eager path, which :mod:`datamove.ops` gives
  this module (:func:`set_body`): so this module imports no engine and no
  front end, and the body runs wherever the eager call would (the GPU kernel,
  the compiled CPU core).

Registering also gives the ONNX exporter its translations
(:mod:`datamove.pytorch.onnx`).

>>> import torch, datamove
>>> ops = datamove.pytorch.custom_ops.custom_ops()
>>> sorted(ops)
['batch_to_space', 'depth_to_space', 'space_to_batch', 'space_to_depth']
>>> torch.ops.datamove.depth_to_space.default._schema.name
'datamove::depth_to_space'
>>> custom_op_args("batch_to_space", ((1, 2), [0, 1], range(2)))
([1, 2], [0, 1], [0, 1])
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..plans import formulas
from .. import opset
from . import layout as torch_layout

__all__ = ["custom_ops", "custom_op_args", "op_args", "op_params", "set_body", "translation_table"]

#: ``body(op, args, data) -> tensor``: the eager call the custom ops run (set by ``datamove.ops``).
_BODY: Optional[Callable[[str, Tuple[Any, ...], Any], Any]] = None
_OPS: Dict[str, Any] = {}
_LOCK = threading.Lock()


def set_body(body: Callable[[str, Tuple[Any, ...], Any], Any]) -> None:
    """Give the custom ops their body: ``body(op, args, data)`` runs ``op`` eagerly on tensor ``data``."""
    global _BODY
    _BODY = body


def op_args(op: str, params: Dict[str, Any]) -> Tuple[Any, ...]:
    """Resolved ``params`` of ``op`` as its custom op takes them (Python ints and lists)."""
    entry = opset.OPS[op]
    if entry.family == "depth":
        return (params["mode"], int(params["block_size"]))
    return tuple([int(v) for v in params[name]] for name in entry.params)


def op_params(op: str, args: Tuple[Any, ...]) -> Dict[str, Any]:
    """``args`` of ``op`` after ``data`` as a parameter dict (vectors as tuples), like ``resolve(...).params``."""
    entry = opset.OPS[op]
    if entry.family == "depth":
        return {"mode": args[0], "block_size": args[1]}
    return {name: tuple(value) for name, value in zip(entry.params, args)}


def custom_op_args(op: str, args: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """An op's arguments after ``data`` (ints as sequences or arrays) as its custom op takes them."""
    return op_args(op, op_params(op, args))


def _out_shape(op: str, args: Tuple[Any, ...], shape: Tuple[Any, ...]) -> Tuple[Any, ...]:
    return tuple(opset.OPS[op].shape_rule(shape, *args))


def fake_shape(op: str, args: Tuple[Any, ...], shape: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """The output shape for ``torch.compile``/``torch.export``, where any dim may be symbolic (a ``torch.SymInt``).

    The call is validated by the shape rule on the example's sizes (the
    symbols' hints: the operation's own ``DataMoveError``, and no guard),
    then the output is computed with the sizes as values
    (:func:`datamove.plans.formulas.steps`), so every symbolic dim stays symbolic,
    never specialized to the example's size. The rules on symbolic dims are
    checked where the op runs: divisibility by the op's body (the eager call,
    with its ``DataMoveError``), not by a guard, so ``torch.export`` takes a
    plain ``Dim`` on any dim (a guard ``H % 2 == 0`` would ask for
    ``2 * Dim(...)``); BatchToSpace's crops, which decide whether the output
    size is negative, by a ``torch._check`` (a guard under ``torch.compile``,
    a run-time assertion in an exported program).
    """
    import torch

    if not any(isinstance(d, torch.SymInt) for d in shape):
        return _out_shape(op, args, shape)
    params = op_params(op, args)
    _out_shape(op, args, tuple(_example(op, params, shape, i) for i in range(len(shape))))
    for condition, message in _crop_rules(op, params, shape):
        if isinstance(condition, torch.SymBool):
            torch._check(condition, message)  # type: ignore[no-untyped-call]  # PyTorch leaves it unannotated
    return tuple(formulas.steps(op, params, shape).out_shape)


def _example(op: str, params: Dict[str, Any], shape: Tuple[Any, ...], axis: int) -> int:
    """Dim ``axis`` of ``shape`` as an int: its hint (the example's size), or, for a size with none (data
    dependent), the least one that every rule accepts."""
    d = shape[axis]
    hint = getattr(getattr(d, "node", None), "hint", d)
    if hint is not None:
        return int(hint)
    if op == "space_to_depth":
        return int(params["block_size"]) if axis >= 2 else 1
    if op == "depth_to_space":
        return int(params["block_size"]) ** (len(shape) - 2) if axis == 1 else 1
    blocks = params["block_shape"]
    if op == "batch_to_space":
        if axis == 0:
            return int(math.prod(blocks))
        return int(-(-(params["crops_begin"][axis] + params["crops_end"][axis]) // blocks[axis]))
    return int(-(params["pads_begin"][axis] + params["pads_end"][axis]) % blocks[axis])


def _crop_rules(op: str, params: Dict[str, Any], shape: Tuple[Any, ...]) -> List[Tuple[Any, Callable[[], str]]]:
    """BatchToSpace's rule that a crop fits (the output size is not negative), per axis, as ``(condition,
    message)``: a bool, or a ``torch.SymBool`` for a symbolic dim."""
    if op != "batch_to_space":
        return []
    block, begin, end = params["block_shape"], params["crops_begin"], params["crops_end"]
    return [(shape[i] * block[i] >= begin[i] + end[i], _crop_message(i, begin[i] + end[i]))
            for i in range(1, len(shape)) if begin[i] + end[i]]


def _crop_message(axis: int, crop: int) -> Callable[[], str]:
    return lambda: (f"batch_to_space: crops_begin[{axis}] + crops_end[{axis}] = {crop} exceeds "
                    f"data.shape[{axis}] * block_shape[{axis}]")


def custom_ops() -> Dict[str, Any]:
    """``torch.ops.datamove.<op>`` for the four ops, registered on first use."""
    if _OPS:
        return _OPS
    with _LOCK:
        if not _OPS:
            _register()
    return _OPS


def _register() -> None:
    import torch

    def define(op: str, space: bool) -> Any:
        # schemas spelled out: this module's annotations are strings (from __future__ import annotations)
        def space_impl(data: Any, block_shape: Any, begin: Any, end: Any) -> Any:
            return _run(op, (block_shape, begin, end), data)

        def depth_impl(data: Any, mode: Any, block_size: Any) -> Any:
            return _run(op, (mode, block_size), data)

        if space:
            impl: Callable[..., Any] = space_impl
            schema = "(Tensor data, int[] block_shape, int[] begin, int[] end) -> Tensor"
        else:
            impl = depth_impl
            schema = "(Tensor data, str mode, int block_size) -> Tensor"
        custom = torch.library.custom_op(f"datamove::{op}", impl, mutates_args=(), schema=schema)

        @custom.register_fake
        def _(data: Any, *args: Any) -> Any:
            return torch_layout.empty(fake_shape(op, args, tuple(data.shape)), data)

        def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
            ctx.args = inputs[1:]

        def backward(ctx: Any, grad: Any) -> Any:
            # the adjoint: S2B <-> B2S with pads = crops, S2D <-> D2S with the same mode and size
            return (registered[opset.OPS[op].adjoint](grad.contiguous(), *ctx.args),) + (None,) * len(ctx.args)

        custom.register_autograd(backward, setup_context=setup_context)
        return custom

    registered: Dict[str, Any] = {}
    for op, entry in opset.OPS.items():
        registered[op] = define(op, entry.family == "space")
    _OPS.update(registered)  # published whole: another thread sees all four or none
    from . import onnx as torch_onnx

    if not torch_onnx.exporting():  # an export under way has read its functions: it records PyTorch ops
        torch_onnx.register()  # ONNX translations for torch.onnx.export(dynamo=True)


def _run(op: str, args: Tuple[Any, ...], data: Any) -> Any:
    if _BODY is None:  # datamove.ops gives it when it is imported, which `import datamove` does
        raise RuntimeError("torch.ops.datamove has no body: import datamove")
    return _BODY(op, args, data)


def translation_table() -> Dict[Any, Callable[..., Any]]:
    """``{torch.ops.datamove.<op>.default: ONNX translation}`` for ``torch.onnx.export(..., custom_translation_table=)``.

    Not needed with the exporter that PyTorch ships, whose library has them
    (``datamove.pytorch.onnx``); for an exporter set up with a registry of its own.
    """
    from . import onnx as torch_onnx

    import torch

    custom_ops()
    return {getattr(torch.ops.datamove, name).default: torch_onnx.TRANSLATIONS[name] for name in opset.NAMES}
