"""Engines run validated calls; :func:`select` picks one for a NumPy array by the route table.

Every engine module has one protocol:

* ``can_take(array) -> bool``: whether it can run on this array;
* ``run(call, data, out) -> array``: the :class:`~datamove.engines.call.Call` applied
  to ``data``, written into ``out`` (already checked by the dispatcher: the
  output's shape, dtype and library, not overlapping ``data``) and returned,
  or, with ``out=None``, into a new array of ``data``'s library.

``numpy`` and ``native`` execute the call's plan (``execute(plan, data,
out)``, which the recipes call directly); ``array_api`` and ``triton``
work from the op and its parameters. Which engine runs a call is the route
table's answer (:mod:`datamove.engines.route`); engines are imported only when chosen.
Adding an engine is a module with these two functions, its name in
``route.ENGINES`` and :data:`_MODULES`, and its row in the route table.

>>> import numpy as np
>>> select("auto", np.zeros(NATIVE_MIN_BYTES, np.uint8)).__name__
'datamove.engines.native.engine'
>>> select("auto", np.zeros(4, np.uint8)).__name__
'datamove.engines.numpy_engine'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, Protocol, cast

import numpy as np

from . import route
from ..arrays import libraries
from ..errors import DataMoveError, brief
from .route import ENGINES, NATIVE_MIN_BYTES  # the route table's names and threshold

if TYPE_CHECKING:
    from .call import Call

__all__ = ["ENGINES", "NATIVE_MIN_BYTES", "Engine", "get", "select", "facts", "core_loads", "check_name"]


# The engines this version provides, by module.
_MODULES = {"numpy": "numpy_engine", "native": "native.engine", "array_api": "array_api_engine", "triton": "triton_engine",
            "pallas": "pallas_engine"}


class Engine(Protocol):
    """What every engine module provides."""

    def can_take(self, array: Any) -> bool: ...

    def run(self, call: Call, data: Any, out: Any) -> Any: ...


def get(name: str) -> Engine:
    """The engine module named ``name`` (one of :data:`ENGINES`), imported on first use."""
    found = _LOADED.get(name)
    if found is None:  # (two threads may both import it: the same module either way)
        found = _LOADED[name] = cast(Engine, importlib.import_module(f"{__name__}.{_MODULES[name]}"))
    return found


_LOADED: Dict[str, Engine] = {}


def check_name(engine: object) -> str:
    """``engine`` if it is ``"auto"`` or an engine's name; else the TypeError or DataMoveError naming them."""
    if not isinstance(engine, str):
        raise TypeError(f"engine must be a string, got {type(engine).__name__} {brief(engine)}")
    if engine != "auto" and engine not in ENGINES:
        raise DataMoveError(f"engine must be 'auto' or one of {list(ENGINES)}, got {brief(engine)}")
    return engine


def facts(data: Any, engine: str = "auto", out: Any = None, view: Any = False, target: Any = False) -> route.Facts:
    """The facts :func:`datamove.engines.route.route` decides ``data``'s path from, for an array of any
    library (``view`` and ``target``: the NumPy views of ``data`` and ``out``, if known). A NumPy array's
    are answered without importing any engine but the core's, which ``import datamove`` loads.

    >>> import numpy as np
    >>> route.able(facts(np.zeros(3)))
    ['numpy', 'native', 'array_api']
    """
    library = libraries.of(data)
    if library is libraries.NUMPY:
        kind = data.dtype.kind
        plain = kind != "O"
        return route.Facts("numpy.ndarray", engine, view=True, namespace=kind in "biufc", triton=False, cuda=False,
                           nbytes=data.nbytes, plain=plain, core=_loaded or core_loads(engine, data.nbytes, plain))
    assert library is not None, "facts() of an array"
    if view is False:
        view = library.view(data)
    from . import array_api_engine, pallas_engine, triton_engine

    nbytes = library.nbytes(data)
    return route.Facts(
        library.name, engine, view=view is not None, namespace=array_api_engine.can_take(data),
        triton=triton_engine.can_take(data), cuda=library.cuda(data), nbytes=nbytes,
        out_view=out is None or library is not libraries.TORCH
        or (library.view(out) if target is False else target) is not None,
        pallas=pallas_engine.can_take(data), core=core_loads(engine, nbytes if view is not None else 0),
    )


# True once the core has loaded: every call asks (a global read, 0.09 us; the import of native_engine each
# time cost 1.1 us)
_loaded = False


def core_loads(engine: str, nbytes: int, plain: bool = True) -> bool:
    """Whether the compiled core is loaded; without it, the first ``"auto"`` call that it would have run
    warns, once per process, that it runs on NumPy (engine="native" raises the error naming the fix)."""
    global _loaded
    if _loaded:
        return True
    from .native import engine as native_engine

    _loaded = native_engine.available()
    if not _loaded and engine == "auto" and plain and nbytes >= NATIVE_MIN_BYTES:
        native_engine.warn_missing()
    return _loaded


def select(engine: object, array: np.ndarray) -> Engine:
    """The engine module that runs ``engine`` (``"auto"`` or a name) on the NumPy array ``array``."""
    return get(route.route(facts(array, check_name(engine))).engine)
