"""Engines execute plans; this module picks one for an array.

``engine="auto"`` takes the first engine, in the order of :data:`ENGINES`,
that can take the array, except that NumPy arrays of :data:`NATIVE_MIN_BYTES`
or more go to the compiled ``"native"`` engine: below that, the strided
``np.copyto`` costs less than a call into the compiled core. Engines are
imported only when chosen; the compiled core is an ahead-of-time extension
module (no JIT), so the first large call of a process runs at full speed.

>>> import numpy as np
>>> select("auto", np.zeros(NATIVE_MIN_BYTES, np.uint8)).__module__
'datamove.engines.native_engine'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, List, Protocol, cast

from ..errors import DataMoveError, brief
from ..route import ENGINES, NATIVE_MIN_BYTES  # the route table's names and threshold

if TYPE_CHECKING:
    from ..plans import Plan

__all__ = ["ENGINES", "NATIVE_MIN_BYTES", "select", "engines_for"]


# The engines this version provides, by module.
_MODULES = {"numpy": "numpy_engine", "native": "native_engine", "array_api": "array_api_engine", "triton": "triton_engine"}



#: An engine's ``execute(plan, data, out)``: writes ``plan`` applied to ``data`` into ``out``, returns ``out``.
Execute = Callable[["Plan", Any, Any], Any]


class _Engine(Protocol):
    """What every engine module provides."""

    def can_take(self, array: Any) -> bool: ...

    def execute(self, plan: Plan, data: Any, out: Any) -> Any: ...


def _wants_native(array: object) -> bool:
    return getattr(array, "nbytes", 0) >= NATIVE_MIN_BYTES and _module("native").can_take(array)


def _module(name: str) -> _Engine:
    return cast(_Engine, importlib.import_module(f"{__name__}.{_MODULES[name]}"))


def engines_for(array: object) -> List[str]:
    """The names of the available engines that can take ``array``."""
    return [name for name in ENGINES if name in _MODULES and _module(name).can_take(array)]


def select(engine: object, array: object) -> Execute:
    """The ``execute(plan, data, out)`` function of ``engine`` for ``array``."""
    if not isinstance(engine, str):
        raise TypeError(f"engine must be a string, got {type(engine).__name__} {brief(engine)}")
    if engine != "auto" and engine not in ENGINES:
        raise DataMoveError(f"engine must be 'auto' or one of {list(ENGINES)}, got {brief(engine)}")
    # The common answers without importing every engine (a first call pays for each import):
    # NumPy takes every ndarray, so "auto" gives one to NumPy or, when large, the native core.
    if engine == "auto" and type(array).__module__ == "numpy" and _module("numpy").can_take(array):
        return _module("native" if _wants_native(array) else "numpy").execute
    if engine in _MODULES and _module(engine).can_take(array):
        return _module(engine).execute
    able = engines_for(array)
    kind = f"{type(array).__module__}.{type(array).__qualname__}"
    if not able:
        raise DataMoveError(f"no engine of this version can take a {kind}; convert it with numpy.asarray")
    if engine == "auto":
        engine = able[0]
        if engine == "numpy" and _wants_native(array):
            engine = "native"
        return _module(engine).execute
    missing = "is not available in this version" if engine not in _MODULES else f"cannot take a {kind}"
    raise DataMoveError(f"engine {engine!r} {missing}; engines that can: {able}")
