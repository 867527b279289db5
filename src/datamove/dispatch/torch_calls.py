"""PyTorch's calls: eager tensors (:class:`TorchCalls`) and tensors that ``torch.compile``, ``torch.export`` or
``torch.jit.trace`` traces (:class:`TracedCalls`).

An eager tensor's call is keyed by ``libraries.TORCH.key`` and kept as a
:class:`~datamove.dispatch.recipes.TorchRecipe`, which the route table shapes
once (the GPU kernel, the core from the tensor's address, PyTorch's own ops);
:mod:`datamove.ops` runs a kept depth call's ``fast`` path before anything
here. A traced call becomes the custom op ``torch.ops.datamove.<op>``, one
node of the graph, validated by its fake implementation at trace time.
PyTorch is never imported here: a tensor of it is in hand.
"""

from __future__ import annotations

import sys
from typing import Any, Hashable, Optional, Tuple

from .. import engines
from ..opset import DEPTH_OPS
from ..arrays import libraries
from ..arrays.outputs import check_size
from ..engines.call import Call
from ..errors import DataMoveError
from . import recipes
from .calls import Calls

__all__ = ["TorchCalls", "TracedCalls", "TORCH", "TRACED", "compiled_call"]


def compiled_call(op: str, args: Tuple[Any, ...], data: Any, out: Any) -> Any:
    """The call as the custom op ``torch.ops.datamove.<op>``, which a compiled graph keeps whole
    (under ``torch.jit.trace``: as PyTorch ops, :func:`datamove.pytorch.onnx.traced`).

    Validation happens in the op's fake implementation (``datamove.rules.shapes``), at trace time.
    """
    torch = sys.modules["torch"]
    from ..pytorch import onnx as torch_onnx

    if not torch.compiler.is_dynamo_compiling() and (  # Dynamo (torch.compile) cannot trace these questions
            torch._C._is_tracing() or (torch_onnx.exporting() and not torch_onnx.ready())):
        # torch.jit.trace, torch.onnx.export(dynamo=False), or an ONNX export without datamove's
        # translations in its library: PyTorch's own ops
        return torch_onnx.traced(op, args, data, out)
    if not hasattr(torch.ops.datamove, op):
        raise DataMoveError(
            "torch.ops.datamove is not registered yet and torch.compile cannot trace its registration: "
            "import torch before datamove, or make one datamove call on a tensor before compiling"
        )
    from ..pytorch import custom_ops as torch_ops

    result = getattr(torch.ops.datamove, op)(data, *torch_ops.custom_op_args(op, args))
    if out is None:
        return result
    out.copy_(result)
    return out


class TorchCalls(Calls):
    """:class:`~datamove.dispatch.calls.Calls` for eager PyTorch tensors: keyed by ``libraries.TORCH.key``, and
    channels-last results allocated as ``torch.empty`` (where autograd records nothing)."""

    def key(self, op: str, args: Tuple[Any, ...], data: Any, engine: Any) -> Optional[Hashable]:
        return recipes.key(op, args, data, engine, libraries.TORCH)  # (the adapter known: not asked again)

    def made(self, recipe_key: Optional[Hashable], call: Call, data: Any, out: Any, engine: Any) -> Any:
        return recipes.kept(recipe_key, recipes.TorchRecipe(call, data, engines.check_name(engine)))(data, out)

    def output(self, data: Any, out: Any, shape: Optional[Tuple[int, ...]]) -> Any:
        if out is None and not libraries.needs_grad(data):  # (a recorded call: the permuted result, for autograd)
            assert shape is not None
            check_size(shape, data.dtype)
            out = sys.modules["torch"].empty(shape, dtype=data.dtype, device=data.device)
        return out

    def permuted(self, array: Any, order: Tuple[int, ...]) -> Any:
        return array.permute(order)


class TracedCalls(TorchCalls):
    """A tensor ``torch.compile``, ``torch.export`` or ``torch.jit.trace`` traces: the custom op
    (:func:`compiled_call`); sizes stay symbolic, so nothing is checked here that the op's fake
    implementation checks."""

    def run(self, op: str, data: Any, args: Tuple[Any, ...], data_format: Optional[str], out: Any,
            engine: Any) -> Any:
        if data_format != "channels_first" and op in DEPTH_OPS:
            return self.channels_last(op, data, args, data_format, out, engine)
        return compiled_call(op, args, data, out)

    def last_shape(self, op: str, data: Any, args: Tuple[Any, ...]) -> Optional[Tuple[int, ...]]:
        return None  # (symbolic sizes: the channels-first op checks them)

    def output(self, data: Any, out: Any, shape: Optional[Tuple[int, ...]]) -> Any:
        return out


TORCH = TorchCalls()
TRACED = TracedCalls()
