"""The operations on TensorFlow tensors: the same rules, then TensorFlow's own ops.

:func:`datamove.dispatch.call` hands a ``tf.Tensor`` or ``tf.Variable`` here (eager,
or symbolic inside ``tf.function``). Its shape, with ``None`` for the dims a
traced graph does not know, goes through the same rules as any array's
(:mod:`datamove.shapes`), so a rule broken by known sizes is a
:class:`~datamove.DataMoveError` at once, while tracing; the route table
(:mod:`datamove.engines.route`) confirms the path; the engine
(:mod:`datamove.engines.tensorflow_engine`) builds the call from TensorFlow's
ops, with run-time asserts for the rules on unknown dims. The result is a new
``tf.Tensor``: TensorFlow tensors are immutable, so ``out=`` is refused.
TensorFlow itself is never imported here: a tensor of it is in hand.

>>> import tensorflow as tf, datamove as dm
>>> dm.space_to_depth(tf.zeros((1, 4, 4, 3)), "blocks_first", 2, data_format="channels_last").shape
TensorShape([1, 2, 2, 12])
>>> dm.space_to_depth(tf.zeros((1, 3, 4, 4)), "blocks_first", 3)
Traceback (most recent call last):
    ...
datamove.errors.DataMoveError: data.shape[2] = 4 is not divisible by block_size = 3
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from ..arrays import libraries
from ..engines import route
from ..errors import DataMoveError
from ..opset import DEPTH_OPS
from .calls import Calls, required, resolve

__all__ = ["TensorFlowCalls", "TENSORFLOW", "as_python"]


class TensorFlowCalls(Calls):
    """:class:`~datamove.dispatch.calls.Calls` for TensorFlow tensors and variables: no recipes (TensorFlow builds,
    or traces, its own ops on each call), the rules on the static shape, then TensorFlow's ops."""

    def run(self, op: str, data: Any, args: Tuple[Any, ...], data_format: Optional[str], out: Any,
            engine: Any) -> Any:
        library = libraries.of(data)
        assert library is not None and libraries.tensorflow(data), "run() of a TensorFlow tensor"
        if out is not None:
            library.check_out(data, out, ())  # always refuses, saying why
        from ..engines import check_name

        route.route(route.Facts(library.name, check_name(engine), view=False, namespace=False, triton=False,
                                cuda=False, nbytes=0))  # the TensorFlow row: engine="auto" only
        required(op, args)
        resolved = resolve(op, _shape(data), (*args, data_format) if op in DEPTH_OPS else args)
        out_shape = tuple(d if d is None or isinstance(d, int) else None for d in resolved.public() or ())  # Dim: unknown
        from ..engines import tensorflow_engine

        return tensorflow_engine.apply(op, resolved.params, data, data_format or "channels_first", out_shape)


TENSORFLOW = TensorFlowCalls()


def as_python(*functions: Callable[..., Any]) -> None:
    """Mark ``functions`` (the operations, the front ends) for AutoGraph to call as they are.

    Inside ``tf.function``, AutoGraph rewrites the Python a traced function
    calls into graph code; datamove's code has no control flow on tensor
    values, and the rewrite fails on it, with a warning. This is the attribute
    ``tf.autograph.experimental.do_not_convert`` sets, set here without
    importing TensorFlow.
    """
    for function in functions:
        setattr(function, "autograph_info__", None)


def _shape(data: Any) -> Tuple[Optional[int], ...]:
    """``data``'s static shape, ``None`` for a dim not known until the graph runs."""
    if data.shape.rank is None:
        raise DataMoveError(
            f"data has an unknown rank ({libraries.name(data)} of shape {data.shape}): the operations need the "
            "rank while tracing; give tf.function an input_signature of known rank, or tf.ensure_shape the tensor"
        )
    return tuple(data.shape.as_list())
