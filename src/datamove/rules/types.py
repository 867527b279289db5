"""The rules' vocabulary as types: the parameters' literal values, dims and shapes.

Users import them from :mod:`datamove.typing`, their public face.
"""

from typing import Any, Literal, Optional, Protocol, Sequence, SupportsIndex, Tuple, TypeVar, Union

import numpy as np

from .dims import Dim, DimLike

__all__ = ["Mode", "DataFormat", "Engine", "OnnxMode", "TensorFlowDataFormat", "IntVector", "IntPairs", "ShapeLike", "Shape",
           "DimLike", "Array", "ArrayT", "ScalarT"]

#: The depth ops' ``mode``: output (input) depth as ``[block, ..., block, C]`` or ``[C, block, ..., block]``.
Mode = Literal["blocks_first", "depth_first"]

#: The depth ops' ``data_format``: ``[N, C, D_1, ...]`` (the spec's) or ``[N, D_1, ..., C]`` (Keras').
DataFormat = Literal["channels_first", "channels_last"]

#: The operations' ``engine``: ``"auto"`` or one engine (``datamove.engines.ENGINES``).
Engine = Literal["auto", "numpy", "native", "array_api", "triton", "pallas"]

#: ``datamove.compat.onnx.depth_to_space``'s ``mode`` (ONNX's names of the two modes).
OnnxMode = Literal["DCR", "CRD"]

#: ``datamove.compat.tensorflow``'s ``data_format`` for the depth ops.
TensorFlowDataFormat = Literal["NHWC", "NCHW"]

#: ``block_shape``, ``crops_*``, ``pads_*``: a sequence of integers or a 1-D integer array.
IntVector = Union[Sequence[SupportsIndex], np.ndarray[Any, np.dtype[np.integer[Any]]]]

#: ``crops`` / ``paddings`` of :mod:`datamove.compat.tensorflow`: ``[M, 2]`` integers, nested or as an array.
IntPairs = Union[Sequence[Sequence[SupportsIndex]], np.ndarray[Any, np.dtype[np.integer[Any]]]]

#: A shape given to :mod:`datamove.rules.shapes`: dims (``int``, ``None`` or :class:`~datamove.Dim`), or ``None`` (unknown rank).
ShapeLike = Union[Sequence[Union[SupportsIndex, Dim, None]], np.ndarray[Any, np.dtype[np.integer[Any]]], None]

#: A shape :mod:`datamove.rules.shapes` returns: a tuple of dims, or ``None`` for an unknown rank.
Shape = Optional[Tuple[DimLike, ...]]


class Array(Protocol):
    """Any array the operations take besides NumPy's and PyTorch's: what they read first is its shape and dtype."""

    @property
    def shape(self) -> Any: ...

    @property
    def dtype(self) -> Any: ...


#: An array of another library (JAX, CuPy, Dask, ...): the operations return the same type.
ArrayT = TypeVar("ArrayT", bound=Array)

#: The scalar type of a NumPy array's dtype, kept from input to output.
ScalarT = TypeVar("ScalarT", bound=np.generic)
