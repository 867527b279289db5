"""Engines execute plans; this module picks one for an array.

``engine="auto"`` takes the first engine, in the order of :data:`ENGINES`,
that can take the array, except that NumPy arrays of :data:`NUMBA_MIN_BYTES`
or more go to the compiled ``"numba"`` engine: below that, the strided
``np.copyto`` costs less than a compiled call. Engines are imported only
when chosen. Numba is not imported by ``import datamove``: the first large
call starts loading the compiled kernels in a background thread (importing
Numba and reading its cache takes about half a second) and runs on the NumPy
engine; calls after the load run on Numba. ``engine="numba"`` loads them at
once.
"""

from __future__ import annotations

import importlib
import threading
from typing import Callable, List, Optional

from ..errors import DataMoveError

__all__ = ["ENGINES", "NUMBA_MIN_BYTES", "select", "engines_for", "numba_ready", "provisional"]

#: Every engine name of the design, in the order ``"auto"`` tries them.
ENGINES = ("numpy", "numba", "array_api", "triton")

# The engines this version provides, by module.
_MODULES = {"numpy": "numpy_engine", "numba": "numba_engine", "array_api": "array_api_engine", "triton": "triton_engine"}

#: Input size from which ``"auto"`` runs NumPy arrays on the Numba engine
#: (measured: on 2 cores a compiled call costs about 30 microseconds more than
#: a strided ``np.copyto``, which it overtakes between 64 and 256 KiB).
NUMBA_MIN_BYTES = 1 << 17


_numba_ready = False
_numba_loader: Optional[threading.Thread] = None


def _load_numba() -> None:
    global _numba_ready
    try:
        _module("numba").warm_up()
    except Exception:  # pragma: no cover - no working Numba: "auto" stays on NumPy
        return
    _numba_ready = True


def numba_ready(wait: bool = False) -> bool:
    """Whether the compiled kernels are loaded; starts loading them (in the background) if not.

    With ``wait``, blocks until the load is done.
    """
    global _numba_loader
    if not _numba_ready:
        if _numba_loader is None:
            _numba_loader = threading.Thread(target=_load_numba, name="datamove-numba-load", daemon=True)
            _numba_loader.start()
        if wait:
            _numba_loader.join()
    return _numba_ready


def _wants_numba(array: object) -> bool:
    return getattr(array, "nbytes", 0) >= NUMBA_MIN_BYTES and _module("numba").can_take(array)


def provisional(engine: object, array: object) -> bool:
    """True when ``"auto"`` gives ``array`` to NumPy only because Numba is still loading."""
    return engine == "auto" and not _numba_ready and _wants_numba(array)


def _module(name: str):
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")


def engines_for(array: object) -> List[str]:
    """The names of the available engines that can take ``array``."""
    return [name for name in ENGINES if name in _MODULES and _module(name).can_take(array)]


def select(engine: object, array: object) -> Callable:
    """The ``execute(plan, data, out)`` function of ``engine`` for ``array``."""
    if not isinstance(engine, str):
        raise TypeError(f"engine must be a string, got {type(engine).__name__} {engine!r}")
    if engine != "auto" and engine not in ENGINES:
        raise DataMoveError(f"engine must be 'auto' or one of {list(ENGINES)}, got {engine!r}")
    able = engines_for(array)
    kind = f"{type(array).__module__}.{type(array).__qualname__}"
    if not able:
        raise DataMoveError(f"no engine of this version can take a {kind}; convert it with numpy.asarray")
    if engine == "auto":
        engine = able[0]
        if engine == "numpy" and _wants_numba(array) and numba_ready():
            engine = "numba"
    elif engine not in able:
        missing = "is not available in this version" if engine not in _MODULES else f"cannot take a {kind}"
        raise DataMoveError(f"engine {engine!r} {missing}; engines that can: {able}")
    return _module(engine).execute
