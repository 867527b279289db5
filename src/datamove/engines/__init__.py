"""Engines execute plans; this module picks one for an array.

``engine="auto"`` takes the first engine, in the order of :data:`ENGINES`,
that can take the array, except that NumPy arrays of :data:`NUMBA_MIN_BYTES`
or more go to the compiled ``"numba"`` engine: below that, the strided
``np.copyto`` costs less than a compiled call. Engines are imported only
when chosen, and Numba only on the first call that runs a kernel.
"""

from __future__ import annotations

import importlib
from typing import Callable, List

from ..errors import DataMoveError

__all__ = ["ENGINES", "NUMBA_MIN_BYTES", "select", "engines_for"]

#: Every engine name of the design, in the order ``"auto"`` tries them.
ENGINES = ("numpy", "numba", "array_api", "triton")

# The engines this version provides, by module.
_MODULES = {"numpy": "numpy_engine", "numba": "numba_engine"}

#: Input size from which ``"auto"`` runs NumPy arrays on the Numba engine
#: (measured: on 2 cores a compiled call costs about 30 microseconds more than
#: a strided ``np.copyto``, which it overtakes between 64 and 256 KiB).
NUMBA_MIN_BYTES = 1 << 17


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
        if engine == "numpy" and "numba" in able and array.nbytes >= NUMBA_MIN_BYTES:
            engine = "numba"
    elif engine not in able:
        missing = "is not available in this version" if engine not in _MODULES else f"cannot take a {kind}"
        raise DataMoveError(f"engine {engine!r} {missing}; engines that can: {able}")
    return _module(engine).execute
