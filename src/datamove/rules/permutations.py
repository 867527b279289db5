"""For converter authors: the channel permutation between the two modes of the depth ops.

A model converted from one framework to another may meet DepthToSpace in the
other mode (TensorFlow's DCR where PyTorch's ``pixel_shuffle`` is CRD).
Instead of inserting a transpose, a converter can reorder the channels of the
layer before it (the output channels of a convolution's weights and bias):

>>> import numpy as np, datamove as dm
>>> x = np.arange(2 * 8 * 3 * 3).reshape(2, 8, 3, 3)
>>> p = dm.channel_permutation("depth_to_space", 8, 2, from_mode="blocks_first", to_mode="depth_first")
>>> p
array([0, 2, 4, 6, 1, 3, 5, 7])
>>> bool((dm.depth_to_space(x[:, p], "depth_first", 2) == dm.depth_to_space(x, "blocks_first", 2)).all())
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, SupportsIndex

import numpy as np

from ..errors import DataMoveError, brief, number
from .params import int_scalar, mode_arg
from .types import Mode

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["channel_permutation"]

_OPS = ("depth_to_space", "space_to_depth")


def channel_permutation(op: Literal["depth_to_space", "space_to_depth"], channels: SupportsIndex,
                        block_size: SupportsIndex, spatial_rank: SupportsIndex = 2, *,
                        from_mode: Mode, to_mode: Mode) -> NDArray[np.int64]:
    """The channel order that turns ``op`` in ``from_mode`` into ``op`` in ``to_mode``.

    Parameters
    ----------
    op : {"depth_to_space", "space_to_depth"}
    channels : int
        The channels on the depth side: DepthToSpace's input channels, or
        SpaceToDepth's output channels (``C * block_size ** spatial_rank``);
        divisible by ``block_size ** spatial_rank``.
    block_size : int
        ``>= 1``.
    spatial_rank : int, default 2
        ``K``, the number of spatial axes (the data's rank minus 2), ``>= 1``.
    from_mode, to_mode : {"blocks_first", "depth_first"}
        The mode the model has, and the mode wanted.

    Returns
    -------
    numpy.ndarray of int64, shape ``(channels,)``
        ``p`` such that, with ``bs = block_size``:

        - ``depth_to_space(x[:, p], to_mode, bs) == depth_to_space(x, from_mode, bs)``
          for every ``x`` of shape ``[N, channels, D_1, ..., D_K]``: the
          channels *into* DepthToSpace (a convolution's output channels:
          ``weight[p]``, ``bias[p]``) are reordered;
        - ``space_to_depth(x, to_mode, bs)[:, p] == space_to_depth(x, from_mode, bs)``
          for every ``x`` of shape ``[N, channels // bs ** K, D_1 * bs, ...]``:
          the channels *out of* SpaceToDepth (a following convolution's input
          channels: ``weight[:, argsort(p)]``) are reordered.

        With ``data_format="channels_last"`` index the last axis (``x[..., p]``).
        ``numpy.argsort(p)`` is the permutation from ``to_mode`` back to
        ``from_mode``; equal modes give the identity.

    Raises
    ------
    TypeError
        ``op`` or a mode not a string; ``channels``, ``block_size`` or
        ``spatial_rank`` not an integer (a bool, a float) or ``None``.
    DataMoveError
        An unknown ``op`` or mode (ONNX's ``"DCR"``/``"CRD"`` are named);
        ``block_size < 1``, ``spatial_rank < 1``, ``channels < 0``; ``channels``
        not divisible by ``block_size ** spatial_rank``.

    Examples
    --------
    A 3-D (one spatial axis) SpaceToDepth with block 3 and 2 input channels:

    >>> channel_permutation("space_to_depth", 6, 3, 1, from_mode="depth_first", to_mode="blocks_first")
    array([0, 2, 4, 1, 3, 5])
    """
    if not isinstance(op, str):
        raise TypeError(f"op must be a string, 'depth_to_space' or 'space_to_depth', got {type(op).__name__} {brief(op)}")
    if op not in _OPS:
        raise DataMoveError(f"op must be 'depth_to_space' or 'space_to_depth', got {brief(op)}")
    values = {"channels": channels, "block_size": block_size, "spatial_rank": spatial_rank,
              "from_mode": from_mode, "to_mode": to_mode}
    for name, value in values.items():
        if value is None:
            raise TypeError(f"{name} is required, got None")
    channels, size, rank = (int_scalar(channels, "channels"), int_scalar(block_size, "block_size"),
                            int_scalar(spatial_rank, "spatial_rank"))
    from_mode, to_mode = _mode(from_mode, "from_mode"), _mode(to_mode, "to_mode")
    if size < 1:
        raise DataMoveError(f"block_size must be >= 1, got {size}")
    if rank < 1:
        raise DataMoveError(f"spatial_rank must be >= 1 (the data's rank minus 2), got {rank}")
    if channels < 0:
        raise DataMoveError(f"channels must be >= 0, got {channels}")
    if channels > np.iinfo(np.intp).max // 8:
        raise DataMoveError(f"channels = {channels} is too many: an int64 array of that length exceeds the address space")
    if size > 1 and rank >= channels.bit_length():
        # block_size ** spatial_rank >= 2 ** spatial_rank > channels: not computed (spatial_rank may be 2 ** 62)
        if channels:
            raise DataMoveError(f"channels = {channels} is not divisible by block_size ** spatial_rank = "
                                f"{size} ** {rank} (which exceeds channels)")
        return np.empty(0, np.int64)
    blocks = size ** rank  # spatial_rank <= 63 here
    if channels % blocks:
        raise DataMoveError(f"channels = {channels} is not divisible by block_size ** spatial_rank = {number(blocks)}")
    depth = channels // blocks
    # channel index = b * depth + c (blocks_first) or c * blocks + b (depth_first): b the block, c the channel
    index = np.arange(channels, dtype=np.int64)
    in_blocks_first = index.reshape(blocks, depth)  # [b, c] -> blocks_first index
    in_depth_first = index.reshape(depth, blocks).T  # [b, c] -> depth_first index
    layouts = {"blocks_first": in_blocks_first, "depth_first": in_depth_first}
    # depth_to_space: p[to(b, c)] = from(b, c); space_to_depth: p[from(b, c)] = to(b, c)
    source, target = (from_mode, to_mode) if op == "depth_to_space" else (to_mode, from_mode)
    permutation = np.empty(channels, np.int64)
    permutation[layouts[target].reshape(-1)] = layouts[source].reshape(-1)
    return permutation


def _mode(value: object, name: str) -> Mode:
    """:func:`datamove.rules.params.mode_arg`, its message naming ``from_mode`` or ``to_mode``."""
    try:
        mode = mode_arg(value)
    except (TypeError, DataMoveError) as exc:
        text = str(exc)
        raise type(exc)(name + text[len("mode"):] if text.startswith("mode") else text) from None
    if mode is None:  # refused by the caller already
        raise TypeError(f"{name} is required, got None")
    return mode
