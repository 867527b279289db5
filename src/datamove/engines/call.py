"""A validated call: what every engine is given (:mod:`datamove.engines`' one protocol).

The op's name and resolved parameters (for the engines that work from the
formula: array-API, GPU), the input and output shapes, and the plan (for the
engines that execute strided views: NumPy, native), built on first use, so a
call that never needs it (JAX, Dask, a GPU tensor) never plans.

>>> call = Call("space_to_depth", {"mode": "blocks_first", "block_size": 2}, (1, 1, 4), (1, 2, 2))
>>> call.args
('blocks_first', 2)
>>> len(call.plan.copies)
1
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .. import opset
from ..plans.views import Plan

__all__ = ["Call"]


class Call:
    """``op`` with resolved ``params`` on an input of ``in_shape``, giving ``out_shape``."""

    __slots__ = ("op", "params", "in_shape", "out_shape", "_plan")

    def __init__(self, op: str, params: Dict[str, Any], in_shape: Tuple[int, ...], out_shape: Tuple[int, ...]) -> None:
        self.op, self.params, self.in_shape, self.out_shape = op, params, in_shape, out_shape
        self._plan: Optional[Plan] = None

    @property
    def args(self) -> Tuple[Any, ...]:
        """The parameters in the op's call order (``datamove.opset``)."""
        return opset.OPS[self.op].args(self.params)

    @property
    def plan(self) -> Plan:
        """The output as strided views of the input (``datamove.plans.views``), made once."""
        plan = self._plan
        if plan is None:
            plan = self._plan = opset.OPS[self.op].plan(self.in_shape, self.out_shape, *self.args)
        return plan

    def __repr__(self) -> str:
        return f"Call({self.op!r}, {self.params!r}, {self.in_shape}, {self.out_shape})"
