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
(:mod:`datamove.torch_onnx`).

>>> import torch, datamove
>>> ops = datamove.torch_ops.custom_ops()
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
from typing import Any, Callable, Dict, Optional, Tuple

from . import opset
from .engines import torch_layout

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
    """The output shape for ``torch.compile``/``torch.export``, where the batch may be symbolic (a dynamic dim).

    A symbolic batch is kept symbolic: the rules are checked on the other dims
    with a stand-in batch, and the batch's own rule (BatchToSpace: divisible by
    the block count) becomes a ``torch._check``, not a guard that would fix it.
    """
    import torch

    entry = opset.OPS[op]
    params = op_params(op, args)
    batch = shape[0] if shape else None
    margins = entry.margins
    if (not isinstance(batch, torch.SymInt) or any(isinstance(d, torch.SymInt) for d in shape[1:])
            or (margins is not None and (params[margins[0]][0] or params[margins[1]][0]))):
        return _out_shape(op, args, shape)
    blocks = math.prod(params["block_shape"]) if margins is not None else 1
    out = list(_out_shape(op, args, (blocks if op == "batch_to_space" else 1,) + tuple(shape[1:])))
    if op == "batch_to_space":
        torch._check(  # type: ignore[no-untyped-call]  # PyTorch leaves it unannotated
            batch % blocks == 0, lambda: f"batch_to_space: the batch must be divisible by {blocks}")
        out[0] = batch // blocks
    else:
        out[0] = batch * blocks
    return tuple(out)


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
    from . import torch_onnx

    if not torch_onnx.exporting():  # an export under way has read its functions: it records PyTorch ops
        torch_onnx.register()  # ONNX translations for torch.onnx.export(dynamo=True)


def _run(op: str, args: Tuple[Any, ...], data: Any) -> Any:
    if _BODY is None:  # datamove.ops gives it when it is imported, which `import datamove` does
        raise RuntimeError("torch.ops.datamove has no body: import datamove")
    return _BODY(op, args, data)


def translation_table() -> Dict[Any, Callable[..., Any]]:
    """``{torch.ops.datamove.<op>.default: ONNX translation}`` for ``torch.onnx.export(..., custom_translation_table=)``.

    Not needed with the exporter that PyTorch ships, whose library has them
    (``datamove.torch_onnx``); for an exporter set up with a registry of its own.
    """
    from . import torch_onnx

    import torch

    custom_ops()
    return {getattr(torch.ops.datamove, name).default: torch_onnx.TRANSLATIONS[name] for name in opset.NAMES}
