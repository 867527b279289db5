"""PyTorch's semantics: ``torch.nn.functional.pixel_shuffle`` and ``pixel_unshuffle``.

Input ``(*, C, H, W)``, any number of leading batch dims (rank >= 3). The
leading dims are merged into one batch dim by a reshape, the core op runs
with ``mode="depth_first"`` (PyTorch's channel order is CRD), and the result
is reshaped back. This module does not import torch: arrays go to the core op,
which decides which libraries' arrays it can take.

Not copied from PyTorch: its CPU ``pixel_unshuffle`` returns the *input*
shape for a zero-element input (pytorch/pytorch#192816); here the output
shape is always ``(*, C·r², H/r, W/r)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, SupportsIndex, Tuple, overload

from .. import ops
from ..errors import DataMoveError
from ..rules.types import ArrayT, ScalarT
from ._common import as_array, positive_int, product, reshape, shape_of

if TYPE_CHECKING:  # named for type checkers only: PyTorch is never imported here
    import torch
    from numpy.typing import ArrayLike, NDArray

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def _args(input: Any, factor: Any, factor_name: str, function: str) -> Tuple[Any, Tuple[int, ...], int]:
    size = positive_int(factor, factor_name, 1, f" ({function} expects a positive {factor_name})")
    data = as_array(input)
    shape = shape_of(data)
    if len(shape) < 3:
        raise DataMoveError(
            f"{function} expects input to have at least 3 dimensions (*, C, H, W), got rank {len(shape)}, shape {list(shape)}"
        )
    return data, shape, size


def _run(op: Callable[..., Any], data: Any, shape: Tuple[int, ...], size: int) -> Any:
    lead = shape[:-3]
    if len(lead) == 1:
        return op(data, "depth_first", size)
    result = op(reshape(data, (product(lead),) + shape[-3:]), "depth_first", size)
    return reshape(result, lead + shape_of(result)[1:])


@overload
def pixel_shuffle(input: NDArray[ScalarT], upscale_factor: SupportsIndex) -> NDArray[ScalarT]: ...


@overload
def pixel_shuffle(input: torch.Tensor, upscale_factor: SupportsIndex) -> torch.Tensor: ...


@overload
def pixel_shuffle(input: ArrayT, upscale_factor: SupportsIndex) -> ArrayT: ...


@overload
def pixel_shuffle(input: ArrayLike, upscale_factor: SupportsIndex) -> NDArray[Any]: ...


def pixel_shuffle(input: Any, upscale_factor: SupportsIndex) -> Any:
    """``torch.nn.functional.pixel_shuffle``: ``(*, C·r², H, W)`` -> ``(*, C, H·r, W·r)``.

    Parameters
    ----------
    input : array
        ``(*, C·r², H, W)``, rank >= 3; any dtype, zero-sized dims included.
    upscale_factor : int
        ``r >= 1``.

    Returns
    -------
    array
        ``(*, C, H·r, W·r)`` with ``out[..., c, h·r + i, w·r + j] =
        input[..., c·r² + i·r + j, h, w]``:
        ``datamove.depth_to_space(x, "depth_first", r)`` (ONNX's CRD).

    Raises
    ------
    DataMoveError
        Rank < 3, ``r < 1``, ``input.shape[-3]`` not divisible by ``r ** 2``.
    TypeError
        A non-integer ``upscale_factor``.

    See Also
    --------
    pixel_unshuffle : the inverse.

    Examples
    --------
    >>> import numpy as np
    >>> from datamove.compat import torch
    >>> x = np.arange(8).reshape(1, 2, 4, 1, 1)
    >>> y = torch.pixel_shuffle(x, 2)
    >>> y.shape
    (1, 2, 1, 2, 2)
    >>> y[0, 1]
    array([[[4, 5],
            [6, 7]]])
    """
    data, shape, size = _args(input, upscale_factor, "upscale_factor", "pixel_shuffle")
    c = shape[-3]
    if c % (size * size):
        raise DataMoveError(
            f"input.shape[-3] = {c} (channels) must be divisible by upscale_factor**2 = {size * size}"
        )
    return _run(ops.depth_to_space, data, shape, size)


@overload
def pixel_unshuffle(input: NDArray[ScalarT], downscale_factor: SupportsIndex) -> NDArray[ScalarT]: ...


@overload
def pixel_unshuffle(input: torch.Tensor, downscale_factor: SupportsIndex) -> torch.Tensor: ...


@overload
def pixel_unshuffle(input: ArrayT, downscale_factor: SupportsIndex) -> ArrayT: ...


@overload
def pixel_unshuffle(input: ArrayLike, downscale_factor: SupportsIndex) -> NDArray[Any]: ...


def pixel_unshuffle(input: Any, downscale_factor: SupportsIndex) -> Any:
    """``torch.nn.functional.pixel_unshuffle``: ``(*, C, H·r, W·r)`` -> ``(*, C·r², H, W)``.

    Parameters
    ----------
    input : array
        ``(*, C, H·r, W·r)``, rank >= 3; any dtype, zero-sized dims included.
    downscale_factor : int
        ``r >= 1``.

    Returns
    -------
    array
        ``(*, C·r², H, W)``: ``datamove.space_to_depth(x, "depth_first", r)``.
        Not ONNX's ``SpaceToDepth``, whose channel order is DCR.

    Raises
    ------
    DataMoveError
        Rank < 3, ``r < 1``, H or W not divisible by ``r``.
    TypeError
        A non-integer ``downscale_factor``.

    See Also
    --------
    pixel_shuffle : the inverse.

    Examples
    --------
    >>> import numpy as np
    >>> from datamove.compat import torch
    >>> x = np.arange(16).reshape(1, 4, 4)
    >>> torch.pixel_unshuffle(x, 2)[:, 0, 0]
    array([0, 1, 4, 5])

    A zero-element input gets the output shape (PyTorch's CPU kernel returns the input's):

    >>> torch.pixel_unshuffle(np.zeros((0, 1, 4, 4)), 2).shape
    (0, 4, 2, 2)
    """
    data, shape, size = _args(input, downscale_factor, "downscale_factor", "pixel_unshuffle")
    for name, dim in (("input.shape[-2] = H", shape[-2]), ("input.shape[-1] = W", shape[-1])):
        if dim % size:
            raise DataMoveError(f"{name} = {dim} must be divisible by downscale_factor = {size}")
    return _run(ops.space_to_depth, data, shape, size)
