"""Shape inference and validation: the four operations on shapes (datamove's public API).

Same names and arguments as the operations, on shapes instead of arrays. A
shape is a tuple of dims (``int``, ``None`` for unknown, ``Dim(lo, hi)`` for an
interval) or ``None`` for an unknown rank; a parameter may be ``None`` when it
is not known until run time. The rules follow OpenVINO's shape inference
(``src/core/shape_inference/include/*_shape_inference.hpp``) except where it
is unsound; ``docs/guide/converters.rst`` lists the differences.

>>> batch_to_space((10, 2), [1, 5], [0, 2], [0, 0])
(2, 8)
>>> space_to_depth((None, Dim(4, 8), 6, 6), "blocks_first", 2)
(None, Dim(16, 32), 3, 3)
>>> space_to_batch((2, Dim(3, None)), [1, 4], [0, 1], [0, 0])
(8, Dim(1, None))

This is the public face of :mod:`datamove.shapes`, the one place of
the rules, which the operations call too.
"""

from .rules.dims import Dim
from .rules.shapes import batch_to_space, depth_to_space, space_to_batch, space_to_depth

__all__ = ["batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space", "Dim"]
