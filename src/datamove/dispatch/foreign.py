"""Arrays of every library: recognise them, pick the path, give the result back in their kind.

The dispatch's steps (:class:`datamove.dispatch.calls.Calls`) validate from ``data.shape``
alone, then a recipe hands any array that is not a NumPy array to :func:`run`, the dispatcher of every library:
it checks ``out=`` and copies an input that overlaps it through the array's
adapter (:mod:`datamove.arrays.libraries`), asks the route table
(:mod:`datamove.engines.route`) for the path, and runs the engine
(:mod:`datamove.engines`' protocol). Two paths:

* **zero copy**: a PyTorch CPU tensor that needs no gradient (and, with
  ``engine="numpy"``/``"native"``, any CPU array exposing DLPack) is viewed as a
  NumPy array over the same memory (dtypes NumPy lacks, such as bfloat16 and
  float8, reinterpreted as integers of the same width) and runs on the NumPy
  or native engine exactly as a NumPy array does; the result comes back as a
  tensor over the NumPy result's memory (``torch.from_numpy``), and ``out=``
  is written through its own NumPy view.
* **generic**: everything else that ``array_api_compat`` knows (PyTorch with
  autograd or on CUDA, JAX, CuPy, Dask, ``array_api_strict``) goes through
  :mod:`datamove.engines.array_api_engine`, which keeps the library, device,
  laziness and differentiability.

No framework is imported here: libraries are recognised by the modules the
caller has already imported (``sys.modules``, in :mod:`datamove.arrays.libraries`),
and ``array_api_compat`` is imported only when a non-NumPy array arrives.

``out=`` takes an array of the caller's library, device, output shape and
dtype. PyTorch tensors are written in place (``copy_``, so autograd records
it), CuPy and ``array_api_strict`` arrays by item assignment. JAX arrays are
immutable and Dask arrays lazy: ``out=`` with them raises :class:`TypeError`
(use the returned array; with Dask, ``dask.array.store(result, target)``
streams it into any array-like target, e.g. a ``np.memmap``).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import engines
from ..arrays import libraries
from ..engines import route
from ..engines.call import Call
from ..arrays.outputs import unaliased

__all__ = ["run"]


def run(call: Call, data: Any, out: Any, engine: str) -> Any:
    """Run validated ``call`` on ``data``, an array of any library but NumPy; the recipes call
    this.

    ``out`` is checked, and ``data`` copied where it overlaps ``out``, here and
    only here; then the route table picks the engine.
    """
    engines.check_name(engine)
    library = libraries.of(data)
    assert library is not None and library is not libraries.NUMPY, "run() of a foreign array"
    target = None
    if out is not None:
        library.check_out(data, out, call.out_shape)
        target = library.view(out)  # asked once: by the route (PyTorch) and for the write
    view = library.view(data)
    path = route.route(engines.facts(data, engine, out, view, target))
    if path.through_view:
        assert view is not None
        return _on_view(call, view, target, data, out, engines.get(path.engine), library)
    if out is not None:
        data = library.unaliased(data, out)
    return engines.get(path.engine).run(call, data, out)


def _on_view(call: Call, view: np.ndarray, target: Optional[np.ndarray], data: Any, out: Any, engine: Any,
             library: libraries.Library) -> Any:
    """The NumPy engines on NumPy views of a foreign array's memory (zero copy); ``target``: ``out``'s view."""
    if out is None:
        result = library.empty(call.out_shape, data)
        if result is None:
            return library.from_numpy(engine.run(call, view, None), data)
        engine.run(call, view, library.view(result))
        return result
    if target is None or not target.flags.writeable:
        library.write(out, library.from_numpy(engine.run(call, view, None), data))
        return out
    engine.run(call, unaliased(view, target), target)
    return out
