"""The operations datamove implements, one entry each: the registry the rest of the package reads.

Each :class:`Op` says what every layer needs to know about an operation: its
name in datamove, its OpenVINO type and opset, its parameters in call order
(for the CLI, the IR and the PyTorch custom ops), the operation that undoes it
(the adjoint, used for gradients), and its shape rule and plan (in
:mod:`datamove.shapes` and :mod:`datamove.plans.views`). Adding an operation is its
rule, its plan, an entry here, and each engine's function; the test
``tests/test_opset.py`` reports whatever a new entry still lacks.

>>> from datamove import opset
>>> op = opset.OPS["batch_to_space"]
>>> op.openvino_type, op.params, op.adjoint
('BatchToSpace', ('block_shape', 'crops_begin', 'crops_end'), 'space_to_batch')
>>> opset.by_openvino_type("DepthToSpace").name
'depth_to_space'
>>> op.shape_rule((10, 2), [1, 5], [0, 2], [0, 0])
(2, 8)
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

__all__ = ["Op", "OPS", "DEPTH_OPS", "NAMES", "OPENVINO_TYPES", "by_openvino_type", "lookup"]


class Op(NamedTuple):
    """One operation of the registry (a named tuple: no dataclasses import at ``import datamove``)."""

    name: str
    #: OpenVINO's type name (the IR's ``type`` attribute) and the opset that defines this version.
    openvino_type: str
    opset: str
    #: ``"space"`` (block_shape and a pair of margin vectors) or ``"depth"`` (mode and block_size).
    family: str
    #: The parameters after ``data``, in call order.
    params: Tuple[str, ...]
    #: The operation that undoes this one with the same parameters (pads = crops): its gradient.
    adjoint: str
    #: The IR's data inputs of the layer (data plus the parameter tensors) and outputs.
    ports: Tuple[int, int]

    @property
    def margins(self) -> Optional[Tuple[str, str]]:
        """The names of the begin/end margin vectors (crops or pads), None for the depth ops."""
        return (self.params[1], self.params[2]) if self.family == "space" else None

    @property
    def shape_rule(self) -> Callable[..., Any]:
        """``datamove.rules.shapes.<name>``: ``(data_shape, *params) -> output shape``."""
        from .rules import shapes

        return getattr(shapes, self.name)  # type: ignore[no-any-return]

    @property
    def resolve(self) -> Callable[..., Any]:
        """``datamove.rules.shapes.resolve_<name>``: the rule with its normalised parameters."""
        from .rules import shapes

        return getattr(shapes, f"resolve_{self.name}")  # type: ignore[no-any-return]

    @property
    def plan(self) -> Callable[..., Any]:
        """``datamove.plans.views.<name>``: the output as strided views of the input."""
        from .plans import views as plans

        return getattr(plans, self.name)  # type: ignore[no-any-return]

    def args(self, params: Dict[str, Any]) -> Tuple[Any, ...]:
        """The values of ``params`` (a ``resolve(...).params`` dict) in call order."""
        return tuple(params[name] for name in self.params)

    def kwargs(self, args: Tuple[Any, ...]) -> Dict[str, Any]:
        """``args`` in call order as a dict by parameter name."""
        return dict(zip(self.params, args))


_SPACE_PORTS = (4, 1)
_DEPTH_PORTS = (1, 1)

OPS: Dict[str, Op] = {
    op.name: op
    for op in (
        Op("batch_to_space", "BatchToSpace", "opset2", "space", ("block_shape", "crops_begin", "crops_end"),
           "space_to_batch", _SPACE_PORTS),
        Op("space_to_batch", "SpaceToBatch", "opset2", "space", ("block_shape", "pads_begin", "pads_end"),
           "batch_to_space", _SPACE_PORTS),
        Op("space_to_depth", "SpaceToDepth", "opset1", "depth", ("mode", "block_size"), "depth_to_space", _DEPTH_PORTS),
        Op("depth_to_space", "DepthToSpace", "opset1", "depth", ("mode", "block_size"), "space_to_depth", _DEPTH_PORTS),
    )
}

#: The names of the operations of the ``"depth"`` family (mode and block_size; a ``data_format``).
DEPTH_OPS = frozenset(name for name, op in OPS.items() if op.family == "depth")
#: datamove's names of the operations, in the registry's order.
NAMES: Tuple[str, ...] = tuple(OPS)
#: OpenVINO's type names of the operations, in the same order.
OPENVINO_TYPES: Tuple[str, ...] = tuple(op.openvino_type for op in OPS.values())
_BY_TYPE = {op.openvino_type: op for op in OPS.values()}


def by_openvino_type(openvino_type: str) -> Op:
    """The operation of OpenVINO type ``openvino_type`` (``KeyError`` if datamove has none)."""
    return _BY_TYPE[openvino_type]


def lookup(name: str) -> Optional[Op]:
    """The operation named ``name`` in datamove's or OpenVINO's spelling, None if there is none."""
    return OPS.get(name) or _BY_TYPE.get(name)
