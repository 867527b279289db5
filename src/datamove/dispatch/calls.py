"""How a call runs on one kind of array: :class:`Calls`, the steps every library shares, which each library's
class overrides where its arrays differ.

:func:`datamove.dispatch.call` picks the class by the array (NumPy's, PyTorch's, TensorFlow's, or this one
for every other library: CuPy, JAX, Dask, array-API and DLPack arrays) and calls its :meth:`Calls.run`:

1. channels-last data: the channels-first call on views that move the last axis to 1 (:meth:`Calls.channels_last`);
2. a repeated call: its recipe, found by its key (:meth:`Calls.key`, :mod:`datamove.dispatch.recipes`);
3. a new one: the rules (:mod:`datamove.rules.shapes`) on ``data.shape``, then its recipe made, kept and run
   (:meth:`Calls.fresh`, :meth:`Calls.made`).

Everything is checked before any memory is touched, so bad input never leaves a partial write in ``out``.

>>> import numpy as np
>>> from datamove.dispatch import call
>>> call("space_to_depth", np.arange(8).reshape(1, 2, 4), ("blocks_first", 2), "channels_first", None, "auto")[0]
array([[0, 2],
       [4, 6],
       [1, 3],
       [5, 7]])
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Optional, Tuple, cast

from .. import engines, opset
from ..opset import DEPTH_OPS
from ..arrays import libraries
from ..engines.call import Call
from ..arrays.outputs import check_size
from ..errors import brief
from ..rules import params, shapes
from . import recipes

__all__ = ["Calls", "required", "resolve", "static"]

#: The recipes, by key (:mod:`datamove.dispatch.recipes`).
RECIPES = recipes.RECIPES
#: Each op's parameter names, and the name of its rule in :mod:`datamove.rules.shapes` (looked up at each call, as
#: ``opset.Op.resolve`` does: a test may put another there).
NAMES = {name: op.params for name, op in opset.OPS.items()}
RULES = {name: f"resolve_{name}" for name in opset.OPS}


def required(op: str, args: Tuple[Any, ...]) -> None:
    """Every parameter given: ``None`` means "unknown" only in :mod:`datamove.rules.shapes` (a TypeError)."""
    for arg in args:
        if arg is None:
            params.required(**dict(zip(NAMES[op], args)))


def resolve(op: str, shape: Tuple[Any, ...], args: Tuple[Any, ...]) -> Any:
    """``op``'s rule on ``shape`` and ``args`` (:func:`datamove.rules.shapes.resolve_space_to_depth`, ...)."""
    return getattr(shapes, RULES[op])(shape, *args)


def static(resolved: Any) -> Tuple[int, ...]:
    """The output shape of a concrete input (a :class:`~datamove.rules.shapes.Resolved`): every dim a plain int."""
    return cast(Tuple[int, ...], resolved.public())


class Calls:
    """The steps of a call on arrays of any library that has no class of its own: recipes keyed by the
    library's adapter (:meth:`datamove.arrays.libraries.Library.key`), run by the dispatcher,
    :func:`datamove.dispatch.foreign.run`, through a :class:`~datamove.dispatch.recipes.ForeignRecipe`.

    ``op``: one of the four names; ``args``: its parameters in call order (``opset.OPS[op].params``);
    ``data_format``: None for the space ops.
    """

    def run(self, op: str, data: Any, args: Tuple[Any, ...], data_format: Optional[str], out: Any,
            engine: Any) -> Any:
        """The call, from its arguments as the caller gave them to its result."""
        if data_format != "channels_first" and op in DEPTH_OPS:
            return self.channels_last(op, data, args, data_format, out, engine)
        recipe_key = self.key(op, args, data, engine)
        recipe = RECIPES.get(recipe_key)
        if recipe is not None:
            return recipe(data, out)
        return self.fresh(op, data, args, out, engine, recipe_key)

    def again(self, op: str, data: Any, args: Tuple[Any, ...], out: Any, engine: Any) -> Any:
        """A depth op's channels-first call on the views :meth:`channels_last` made: as :meth:`run`, after the
        library's own repeats where it has any (NumPy's: the core's)."""
        return self.run(op, data, args, "channels_first", out, engine)

    #: ``key(op, args, data, engine)``: the recipe key of the call (:func:`datamove.dispatch.recipes.key`, the
    #: array's adapter asked: ``libraries.of(data)``), or None when it cannot use one. (The function itself, not
    #: a method that calls it: a frame less on a small call.)
    key: Callable[..., Optional[Hashable]] = staticmethod(recipes.key)

    def array(self, data: Any) -> Any:
        """``data`` as the array the rules and the engines take, or a TypeError/DataMoveError saying why not."""
        return libraries.checked(data)  # not converted: datamove.dispatch.foreign runs it in its own library

    def fresh(self, op: str, data: Any, args: Tuple[Any, ...], out: Any, engine: Any,
              recipe_key: Optional[Hashable]) -> Any:
        """A call no recipe holds: every rule checked on ``data.shape``, then its recipe made and run."""
        required(op, args)
        data = self.array(data)
        resolved = resolve(op, data.shape, args)
        out_shape = static(resolved)
        check_size(out_shape, getattr(data, "dtype", None))
        return self.made(recipe_key, Call(op, resolved.params, tuple(data.shape), out_shape), data, out, engine)

    def made(self, recipe_key: Optional[Hashable], call: Call, data: Any, out: Any, engine: Any) -> Any:
        """A validated call: its recipe made (kept under ``recipe_key``, unless None) and run."""
        return recipes.kept(recipe_key, recipes.ForeignRecipe(call, engines.check_name(engine)))(data, out)

    def channels_last(self, op: str, data: Any, args: Tuple[Any, ...], data_format: Any, out: Any,
                      engine: Any) -> Any:
        """A depth op on ``[N, D_1, ..., D_K, C]`` data: the channels-first op on views that move the last axis
        to 1. The result is allocated channels-last (:meth:`output`) and written through such a view, so the
        data is moved once, as channels-first data is."""
        if params.data_format_arg(data_format) == "channels_first":
            return self.again(op, data, args, out, engine)
        data = self.last_array(data)
        required(op, args)
        shape = tuple(data.shape)
        rank = len(shape)
        first = (0, rank - 1, *range(1, rank - 1))  # channels-last -> channels-first, as a view
        out = self.output(data, out, self.last_shape(op, data, args))
        moved = self.again(op, self.permuted(data, first), args, None if out is None else self.permuted(out, first),
                           engine)
        return out if out is not None else self.permuted(moved, (0, *range(2, rank), 1))

    def last_array(self, data: Any) -> Any:
        """:meth:`channels_last`'s ``data``: an array with a rank."""
        if getattr(data, "ndim", None) is None:
            raise TypeError(f"data must be an array, got {type(data).__name__} {brief(data)}")
        return data

    def last_shape(self, op: str, data: Any, args: Tuple[Any, ...]) -> Optional[Tuple[int, ...]]:
        """:meth:`channels_last`'s output shape, every rule checked on the axes as given (the channels-first
        call checks them again, on the views)."""
        return static(resolve(op, tuple(data.shape), (*args, "channels_last")))

    def output(self, data: Any, out: Any, shape: Optional[Tuple[int, ...]]) -> Any:
        """:meth:`channels_last`'s result, channels-last, of ``shape``: ``out``, or a new array; None where the
        channels-first call's result, permuted back, is the result (here: whenever no out is given)."""
        return out

    def permuted(self, array: Any, order: Tuple[int, ...]) -> Any:
        """A view of ``array`` with its axes in ``order``."""
        from array_api_compat import array_namespace

        return array_namespace(array).permute_dims(array, order)
