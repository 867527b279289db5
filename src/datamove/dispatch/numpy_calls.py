"""NumPy's calls: NumPy arrays, their subclasses, and whatever ``np.asarray`` takes (lists, scalars).

A repeated call of an exact ``np.ndarray`` that the compiled core keeps never
reaches Python past :mod:`datamove.ops` (``src/native/runtime/repeat.cpp``).
The others come here: a kept recipe, found by a key built inline (the op, its
parameters as given, the engine, and the array's shape, strides and dtype:
``libraries.NUMPY.key``'s fields); or a layout's first call, planned, lowered
and run by the core in one C call (:meth:`NumPyCalls.first`), the recipe left
to the layout's next call; or the rules and a recipe (:class:`~datamove.dispatch.calls.Calls`).

>>> import numpy as np
>>> from datamove.dispatch.numpy_calls import NUMPY
>>> NUMPY.key("space_to_depth", ("blocks_first", 2), np.zeros((1, 1, 4, 4), np.float32), "numpy")
('space_to_depth', 'blocks_first', 2, 'numpy', (1, 1, 4, 4), (64, 64, 16, 4), dtype('float32'))
"""

from __future__ import annotations

import math
from typing import Any, Dict, Hashable, Optional, Tuple

import numpy as np

from .. import engines
from ..opset import DEPTH_OPS
from ..arrays.outputs import LINE_FROM, allocate, check_out, check_size, refuse_masked
from ..engines import route
from ..engines.call import Call
from ..engines.native import engine as native_engine
from ..errors import brief
from ..rules import shapes
from . import recipes
from .calls import RECIPES, Calls

__all__ = ["NumPyCalls", "NUMPY", "SEEN"]

#: The core's repeated calls (:func:`datamove.engines.native.engine.repeated_calls`), asked by :meth:`NumPyCalls.again`
#: as :mod:`datamove.ops` asks them first; None without the core.
REPEATED = native_engine.repeated_calls()

#: The keys of calls made once by the core in one call (:func:`~datamove.engines.native.engine.first_call`),
#: whose recipe the key's next call makes: a shape seen once costs no recipe. (A first call into a new array,
#: by the core's ``first``, is kept in the core's own table, which says when its next call is the recipe's:
#: :meth:`NumPyCalls.first`.) A plain dict (its get and set are atomic), forgotten whole at the recipes' bound.
SEEN: Dict[Hashable, bool] = {}


def _seen(recipe_key: Optional[Hashable]) -> None:
    """``recipe_key``'s first call was the core's: its next, where the core does not repeat it, makes the
    recipe (:data:`SEEN`)."""
    if recipe_key is not None:
        if len(SEEN) >= recipes.RECIPES.maxsize:
            SEEN.clear()
        SEEN[recipe_key] = True


class NumPyCalls(Calls):
    """:class:`~datamove.dispatch.calls.Calls` for NumPy arrays: keys built inline, the core's first calls,
    arrays converted by ``np.asarray``, channels-last results allocated (:meth:`output`) and viewed by
    ``transpose``."""

    def key(self, op: str, args: Tuple[Any, ...], data: Any, engine: Any) -> Optional[Hashable]:
        # (recipes.key's with libraries.NUMPY.key's fields, inline: one call less on a call of a few us;
        # tests/test_recipes.py holds the two equal). Subclasses and lists: no recipe.
        if type(data) is not np.ndarray or type(engine) is not str:
            return None
        if op in DEPTH_OPS:
            mode, block_size = args
            if type(mode) is str and type(block_size) is int:
                return (op, mode, block_size, engine, data.shape, data.strides, data.dtype)
            return None
        block_shape, begin, end = args
        exact = recipes.exact
        block_shape, begin, end = exact(block_shape), exact(begin), exact(end)
        if block_shape is None or begin is None or end is None:
            return None
        return (op, block_shape, begin, end, engine, data.shape, data.strides, data.dtype)

    def again(self, op: str, data: Any, args: Tuple[Any, ...], out: Any, engine: Any) -> Any:
        if REPEATED is not None and type(data) is np.ndarray:
            mode, block_size = args
            done = REPEATED(op, data, mode, block_size, "channels_first", out, engine)
            if done is not None:
                return done
        return self.run(op, data, args, "channels_first", out, engine)

    def array(self, data: Any) -> Any:
        if isinstance(data, np.ndarray):
            if type(data) is not np.ndarray:
                refuse_masked(data, "data")
            return data
        if data is None or isinstance(data, (str, bytes, dict, set)):
            raise TypeError(f"data must be an array, got {type(data).__name__} {brief(data)}")
        try:
            return np.asarray(data)
        except Exception as exc:
            raise TypeError(f"data must be an array, could not convert {type(data).__name__}: {exc}") from None

    def run(self, op: str, data: Any, args: Tuple[Any, ...], data_format: Optional[str], out: Any,
            engine: Any) -> Any:
        # Calls.run's steps, and a layout's first call on the core (first), in one frame: a new small shape's
        # first call spends a third of its time in Python
        if data_format != "channels_first" and op in DEPTH_OPS:
            return self.channels_last(op, data, args, data_format, out, engine)
        recipe_key: Optional[Hashable] = None
        if op in DEPTH_OPS:
            a, b, c = *args, "channels_first"
            if type(data) is np.ndarray and type(a) is str and type(b) is int and type(engine) is str:
                recipe_key = (op, a, b, engine, data.shape, data.strides, data.dtype)  # key's, inline (a call less)
        else:
            a, b, c = args
            recipe_key = self.key(op, args, data, engine)
        recipe = RECIPES.get(recipe_key)
        if recipe is not None:
            return recipe(data, out)
        if recipe_key is not None:  # (an exact ndarray: key's door)
            done = self.first(op, recipe_key, data, a, b, c, engine, out)
            if done is not None:
                return done
        return self.fresh(op, data, args, out, engine, recipe_key)

    def first(self, op: str, recipe_key: Hashable, data: np.ndarray, a: Any, b: Any, c: Any, engine: Any,
              out: Any) -> Any:
        """An exact ndarray's first call of a layout (depth ops channels first), into a new array or an ``out=``
        ndarray (``a, b, c``: ``mode, block_size, "channels_first"`` or ``block_shape, begin, end``): the
        rules' straight path (:func:`datamove.rules.shapes.static_depth_shape`,
        :func:`~datamove.rules.shapes.static_space_shape`) and the core in one call, its program kept there,
        nothing else made (:meth:`made` makes a ``Resolved``, a ``Call`` and a recipe); None, nothing done, for
        any call that path does not take, which :meth:`~datamove.dispatch.calls.Calls.fresh` then validates
        and runs. An ``out=`` is checked here as :meth:`made` checks it; one that shares memory with ``data``
        is :meth:`made`'s (which copies ``data`` first)."""
        core = native_engine._native  # (the one native_engine runs: a test may put a recording or another level's)
        if core is None or not route.first_on_core(engine, out is None or type(out) is np.ndarray):
            return None
        depth = op in DEPTH_OPS
        out_shape = (shapes.static_depth_shape(op == "space_to_depth", data.shape, a, b) if depth
                     else shapes.static_space_shape(op, data.shape, a, b, c))
        if out_shape is None:
            return None
        if depth:
            nbytes = data.nbytes  # (the output holds the input's items, in another order)
        else:
            check_size(out_shape, data.dtype)  # (pads may make it any size)
            nbytes = math.prod(out_shape) * data.itemsize
        new = None if nbytes < LINE_FROM else allocate  # (the call's new results: a large one on a line)
        if out is not None:
            check_out(out, out_shape, data.dtype)
            if np.may_share_memory(data, out):
                return None
            # the core's first() into out=: planned, lowered and run in one C call, its program kept there for
            # repeats into outs of these strides (the checks above passed for them)
            return core.first(op, data, a, b, c, out_shape, new, engine, out)
        # the core's first(): allocated, planned, lowered and run in one C call, its program kept there for the
        # call's repeats
        done = core.first(op, data, a, b, c, out_shape, new, engine)
        if done is False:  # the core keeps this call already, and its repeat did not take it: the recipe's turn
            _seen(recipe_key)
            return None
        return done

    def made(self, recipe_key: Optional[Hashable], call: Call, data: Any, out: Any, engine: Any) -> Any:
        """As :meth:`Calls.made`; but the first time an exact ndarray's key is seen, planned and run by the
        compiled core in one call, the recipe left to the key's next."""
        seen = recipe_key is not None and SEEN.pop(recipe_key, False)
        ndarrays = type(data) is np.ndarray and (out is None or type(out) is np.ndarray)
        if not seen and route.first_on_core(engine, ndarrays):
            if out is not None:
                check_out(out, call.out_shape, data.dtype)
            done = native_engine.first_call(call, data, out)
            if done is not None:
                _seen(recipe_key)
                return done
        facts = engines.facts(data, engines.check_name(engine))
        recipe = recipes.kept(recipe_key, recipes.Recipe(call, data, engines.get(route.route(facts).engine), facts,
                                                         kept=recipe_key is not None))
        if seen:
            recipe.called = True  # (its first call was the core's: a recipe that moves to the core does so now)
        return recipe(data, out)

    last_array = array

    def output(self, data: Any, out: Any, shape: Optional[Tuple[int, ...]]) -> Any:
        assert shape is not None
        check_size(shape, data.dtype)
        if out is None:
            return allocate(shape, data.dtype)
        check_out(out, shape, data.dtype)
        return out

    def permuted(self, array: Any, order: Tuple[int, ...]) -> Any:
        return array.transpose(order)

NUMPY = NumPyCalls()
