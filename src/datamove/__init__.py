"""datamove: the block data-movement operations of OpenVINO, exact to the spec.

>>> import numpy as np, datamove as dm
>>> x = np.arange(16).reshape(1, 1, 4, 4)
>>> y = dm.space_to_depth(x, "blocks_first", 2)
>>> y.shape
(1, 4, 2, 2)
>>> bool((dm.depth_to_space(y, "blocks_first", 2) == x).all())
True
>>> dm.shapes.batch_to_space((10, 2), [1, 5], [0, 2], [0, 0])
(2, 8)
"""

from typing import TYPE_CHECKING, Any

from . import shapes
from .rules.dims import Dim
from .errors import DataMoveError
from .ops import batch_to_space, depth_to_space, space_to_batch, space_to_depth
from .rules.permutations import channel_permutation
from .engines.native.threads import get_num_threads, set_num_threads

__all__ = [
    "DataMoveError",
    "Dim",
    "batch_to_space",
    "channel_permutation",
    "depth_to_space",
    "get_num_threads",
    "set_num_threads",
    "shapes",
    "space_to_batch",
    "space_to_depth",
    "__version__",
]

__version__ = "0.1.0"

if TYPE_CHECKING:  # for type checkers, datamove.nn is an attribute like the others
    from . import nn as nn


def __getattr__(name: str) -> Any:
    # datamove.nn (the PyTorch modules) imports torch: loaded on first use, never by `import datamove`
    if name == "nn":
        import importlib

        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register_torch_ops() -> None:
    # torch.compile cannot trace the registration of torch.ops.datamove.* (datamove.dispatch.torch_calls.compiled_call):
    # done here when PyTorch is already loaded, else on the first call with a tensor
    import sys

    if "torch" in sys.modules:
        from .pytorch import custom_ops as torch_ops

        torch_ops.custom_ops()


_register_torch_ops()



def _load_core() -> None:
    # The compiled core (a small extension module) and its Python side load with the package, about
    # 1.5 ms, not inside the first large call, which then runs at steady speed. Without a built core,
    # small calls still work and the first large one raises the ImportError that names the fix.
    from .engines.native import engine as native_engine

    try:
        native_engine.core()
    except ImportError:
        pass


_load_core()
