"""ONNX's semantics: the ``SpaceToDepth`` and ``DepthToSpace`` operators (opsets 1-28).

ONNX is NCHW and 4-D only. ``mode`` maps onto the core op's: ``"DCR"`` (the
default) is ``"blocks_first"``, ``"CRD"`` is ``"depth_first"``. ``DepthToSpace``
has had ``mode`` since opset 11; ``SpaceToDepth`` only since opset 28 (ONNX
1.23): before, its channel order was always DCR's, so it inverted
``DepthToSpace(mode="DCR")`` only, and PyTorch's ``pixel_unshuffle`` (which
is ``SpaceToDepth(mode="CRD")``) had no ONNX operator.

Not copied from ONNX: its shape inference truncates a non-divisible dim
(C = 7, blocksize 2 gives C' = 1) and, before opset 28, accepted any
``mode``; its reference evaluator runs an unknown ``DepthToSpace`` mode as
CRD. Here each raises :class:`~datamove.DataMoveError`.
"""

from __future__ import annotations

from typing import Any, Dict, SupportsIndex, Tuple

from .. import ops
from ..errors import DataMoveError
from ..rules.types import ArrayT, Mode, OnnxMode
from ._common import as_array, positive_int, shape_of

__all__ = ["space_to_depth", "depth_to_space", "MODES"]

#: ONNX DepthToSpace mode -> the core op's mode.
MODES: Dict[OnnxMode, Mode] = {"DCR": "blocks_first", "CRD": "depth_first"}


def _args(input: Any, blocksize: Any) -> Tuple[Any, Tuple[int, ...], int]:
    size = positive_int(blocksize, "blocksize", 1, " (ONNX: blocksize must be positive)")
    data = as_array(input)
    shape = shape_of(data)
    if len(shape) != 4:
        raise DataMoveError(f"input must be 4-dimensional [N, C, H, W], got rank {len(shape)}, shape {list(shape)}")
    return data, shape, size


def _mode(mode: Any) -> Mode:
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, 'DCR' or 'CRD', got {type(mode).__name__} {mode!r}")
    if mode not in MODES:
        hint = ""
        if mode.upper() in MODES:
            hint = f" (ONNX modes are upper case: {mode.upper()!r})"
        elif mode in MODES.values():
            hint = f" ({mode!r} is datamove's name for {[k for k, v in MODES.items() if v == mode][0]!r})"
        raise DataMoveError(f"mode must be 'DCR' or 'CRD', got {mode!r}{hint}")
    return MODES[mode]


def space_to_depth(input: ArrayT, blocksize: SupportsIndex, mode: OnnxMode = "DCR") -> ArrayT:
    """ONNX ``SpaceToDepth``: move ``blocksize`` x ``blocksize`` blocks of H, W into the channels.

    Parameters
    ----------
    input : array
        ``[N, C, H, W]``, ``H`` and ``W`` divisible by ``blocksize``; any dtype.
    blocksize : int
        ``>= 1``.
    mode : {"DCR", "CRD"}, default "DCR"
        The output channels ordered ``(block row, block column, C)`` (DCR,
        the only order before opset 28: the core op's ``"blocks_first"``) or
        ``(C, block row, block column)`` (CRD, opset 28: ``"depth_first"``,
        PyTorch's ``pixel_unshuffle``).

    Returns
    -------
    array
        ``[N, C·bs², H/bs, W/bs]``:
        ``datamove.space_to_depth(input, "blocks_first" or "depth_first", blocksize)``.

    Raises
    ------
    DataMoveError
        Not 4-D, ``blocksize < 1``, H or W not divisible by ``blocksize``, an unknown mode.
    TypeError
        A non-integer ``blocksize`` or a non-string ``mode``.

    See Also
    --------
    depth_to_space : its inverse with the same mode.

    Examples
    --------
    The example of ONNX's operator tests (``test_spacetodepth_example``):

    >>> import numpy as np
    >>> from datamove.compat import onnx
    >>> x = np.array([[[[0, 6, 1, 7, 2, 8], [12, 18, 13, 19, 14, 20],
    ...                 [3, 9, 4, 10, 5, 11], [15, 21, 16, 22, 17, 23]]]], np.float32)
    >>> onnx.space_to_depth(x, 2)
    array([[[[ 0.,  1.,  2.],
             [ 3.,  4.,  5.]],
    <BLANKLINE>
            [[ 6.,  7.,  8.],
             [ 9., 10., 11.]],
    <BLANKLINE>
            [[12., 13., 14.],
             [15., 16., 17.]],
    <BLANKLINE>
            [[18., 19., 20.],
             [21., 22., 23.]]]], dtype=float32)
    """
    core_mode = _mode(mode)
    data, (n, c, h, w), size = _args(input, blocksize)
    for name, dim in (("input.shape[2] = H", h), ("input.shape[3] = W", w)):
        if dim % size:
            raise DataMoveError(f"{name} = {dim} must be divisible by blocksize = {size}")
    return ops.space_to_depth(data, core_mode, size)


def depth_to_space(input: ArrayT, blocksize: SupportsIndex, mode: OnnxMode = "DCR") -> ArrayT:
    """ONNX ``DepthToSpace``: move blocks of the channels into ``blocksize`` x ``blocksize`` spatial blocks.

    Parameters
    ----------
    input : array
        ``[N, C, H, W]``, ``C`` divisible by ``blocksize ** 2``; any dtype.
    blocksize : int
        ``>= 1``.
    mode : {"DCR", "CRD"}, default "DCR"
        Channels read as ``(block row, block column, C')`` (DCR: the core
        op's ``"blocks_first"``) or ``(C', block row, block column)`` (CRD:
        ``"depth_first"``, PyTorch's ``pixel_shuffle``). Case-sensitive, as
        in onnxruntime; anything else raises :class:`~datamove.DataMoveError`.

    Returns
    -------
    array
        ``[N, C/bs², H·bs, W·bs]``.

    Raises
    ------
    DataMoveError
        Not 4-D, ``blocksize < 1``, C not divisible by ``blocksize ** 2``, an unknown mode.
    TypeError
        A non-integer ``blocksize`` or a non-string ``mode``.

    See Also
    --------
    space_to_depth : the inverse with the same mode (CRD: opset 28).

    Examples
    --------
    The examples of ONNX's operator documentation (input ``[1, 8, 2, 3]``, blocksize 2):

    >>> import numpy as np
    >>> from datamove.compat import onnx
    >>> x = np.arange(48, dtype=np.float32).reshape(1, 8, 2, 3)
    >>> onnx.depth_to_space(x, 2, mode="DCR")[0, 0]
    array([[ 0., 12.,  1., 13.,  2., 14.],
           [24., 36., 25., 37., 26., 38.],
           [ 3., 15.,  4., 16.,  5., 17.],
           [27., 39., 28., 40., 29., 41.]], dtype=float32)
    >>> onnx.depth_to_space(x, 2, mode="CRD")[0, 0]
    array([[ 0.,  6.,  1.,  7.,  2.,  8.],
           [12., 18., 13., 19., 14., 20.],
           [ 3.,  9.,  4., 10.,  5., 11.],
           [15., 21., 16., 22., 17., 23.]], dtype=float32)
    """
    core_mode = _mode(mode)
    data, (n, c, h, w), size = _args(input, blocksize)
    if c % (size * size):
        raise DataMoveError(f"input.shape[1] = C = {c} must be divisible by blocksize**2 = {size * size}")
    return ops.depth_to_space(data, core_mode, size)
