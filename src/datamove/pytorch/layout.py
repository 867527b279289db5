"""The memory layout of a PyTorch result: the input's memory format, as PyTorch's own ops keep it.

A 4-D (5-D) tensor laid out channels-last gives a channels-last result, as
``pixel_shuffle``, ``pixel_unshuffle`` and convolutions do; every other
tensor a contiguous one. Every path that makes a PyTorch result (the GPU
engine, the zero-copy CPU path, the small-tensor recipes, the generic path
and the custom ops' fake implementations) asks here.

>>> import torch                                          # doctest: +SKIP
>>> x = torch.zeros(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)  # doctest: +SKIP
>>> empty((2, 12, 2, 2), x).is_contiguous(memory_format=torch.channels_last)   # doctest: +SKIP
True
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

__all__ = ["memory_format", "empty"]


def memory_format(tensor: Any) -> Any:
    """``torch.channels_last`` (``channels_last_3d``) for a 4-D (5-D) tensor laid out so, else ``torch.contiguous_format``.

    A tensor that is both (one channel, or 1 x 1 spatial) counts as contiguous.
    """
    torch = sys.modules["torch"]
    rank = tensor.dim()
    if rank == 4 and not tensor.is_contiguous() and tensor.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    if rank == 5 and not tensor.is_contiguous() and tensor.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return torch.contiguous_format


def empty(shape: Sequence[int], like: Any) -> Any:
    """An uninitialised result of ``shape`` with ``like``'s dtype, device and memory format."""
    torch = sys.modules["torch"]
    return torch.empty(tuple(shape), dtype=like.dtype, device=like.device, memory_format=memory_format(like))
