"""The dispatch: from a call's arguments to its result, for arrays of every library.

:func:`call` picks the class of steps of the array's kind (one per library:
:mod:`~datamove.dispatch.numpy_calls`, :mod:`~datamove.dispatch.torch_calls`,
:mod:`~datamove.dispatch.tensorflow`, and :class:`~datamove.dispatch.calls.Calls`
for every other) and runs the call through it: validated by the rules
(:mod:`datamove.rules`), kept as a recipe (:mod:`~datamove.dispatch.recipes`),
and run by the engine the route table gives (:mod:`datamove.engines.route`),
arrays of libraries other than NumPy through :func:`datamove.dispatch.foreign.run`.

Adding an array library: its adapter (:mod:`datamove.arrays.libraries`); and, only where its calls take
other steps than :class:`~datamove.dispatch.calls.Calls`', a subclass of it, entered in :data:`BY_LIBRARY`.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Tuple

from ..arrays import libraries
from .calls import Calls
from .numpy_calls import NUMPY
from .tensorflow import TENSORFLOW
from .torch_calls import TORCH, TRACED

__all__ = ["call", "compiling", "BY_LIBRARY", "NUMPY"]

#: Every library's steps, by its adapter (None: not an array of any library, which ``np.asarray`` converts).
BY_LIBRARY: Dict[Optional[libraries.Library], Calls] = {
    None: NUMPY, libraries.NUMPY: NUMPY, libraries.TORCH: TORCH,
    libraries.TENSORFLOW: TENSORFLOW, libraries.TENSORFLOW_VARIABLE: TENSORFLOW,
}
_ANY = Calls()  # CuPy, JAX, Dask, array-API and DLPack arrays


def compiling(data: Any) -> bool:
    """True while ``torch.compile``, ``torch.export`` or ``torch.jit.trace`` traces a call on a tensor."""
    torch = sys.modules.get("torch")
    return (torch is not None and isinstance(data, torch.Tensor)
            and (torch.compiler.is_compiling() or torch._C._is_tracing()))


def call(op: str, data: Any, args: Tuple[Any, ...], data_format: Optional[str], out: Any, engine: Any) -> Any:
    """``op`` (one of the four names) with its parameters ``args`` in call order on ``data``; ``data_format``:
    None for the space ops. :mod:`datamove.ops` calls this where the core's or a tensor's recipe's own
    repeat did not take the call."""
    # (an exact ndarray's calls go from datamove.ops to NumPyCalls.run straight; here it finds NUMPY by its
    # adapter. compiling is asked first: Dynamo cannot trace the adapters' cache.)
    steps = TRACED if compiling(data) else BY_LIBRARY.get(libraries.of(data), _ANY)
    return steps.run(op, data, args, data_format, out, engine)
