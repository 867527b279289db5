"""PyTorch modules for the four operations: ``datamove.nn``.

:class:`SpaceToDepth`, :class:`DepthToSpace`, :class:`SpaceToBatch` and
:class:`BatchToSpace` hold their parameters, checked when the module is
built (the operations' own rules and messages), and call the matching
operation of :mod:`datamove` in ``forward``. They are stateless: no
parameters and no buffers, so a model's ``state_dict()`` does not change when
one is added. They go into ``torch.nn.Sequential``, pickle and copy, pass
gradients, and ``torch.compile(fullgraph=True)`` keeps each call whole, as
one node ``torch.ops.datamove.<op>`` of the graph.

This module imports PyTorch; ``import datamove`` does not. Write
``from datamove import nn`` (or ``import datamove.nn``); ``datamove.nn`` also
loads it on first use.

Examples
--------
A sub-pixel upsampling head (ESPCN): a convolution to ``3 * 2 ** 2`` channels,
then :class:`DepthToSpace` in PyTorch's ``pixel_shuffle`` order:

>>> import torch
>>> from datamove import nn
>>> head = torch.nn.Sequential(torch.nn.Conv2d(8, 12, 3, padding=1), nn.DepthToSpace("depth_first", 2))
>>> head(torch.zeros(1, 8, 16, 16)).shape
torch.Size([1, 3, 32, 32])
>>> head
Sequential(
  (0): Conv2d(8, 12, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
  (1): DepthToSpace(mode='depth_first', block_size=2)
)
"""

from __future__ import annotations

import math
import operator
from typing import Any, List, Optional, SupportsIndex, Tuple

try:
    import torch
except ModuleNotFoundError as exc:  # pragma: no cover - torch is a test extra
    raise ModuleNotFoundError(
        "datamove.nn needs PyTorch (pip install torch); the operations themselves take PyTorch tensors without it",
        name=exc.name,
    ) from exc

from . import ops
from .rules import shapes
from .errors import DataMoveError
from .pytorch import custom_ops as torch_ops
from .rules.types import DataFormat, IntVector, Mode

__all__ = ["SpaceToDepth", "DepthToSpace", "SpaceToBatch", "BatchToSpace"]

# torch.compile cannot trace the registration of torch.ops.datamove.*: done now, when PyTorch is loaded
# (datamove registers them at import only when torch was imported first)
torch_ops.custom_ops()

# torch.jit.is_scripting, which TorchScript takes as a constant True (and skips the eager branch); named here, as a
# "# type: ignore" comment in a scripted function would read to TorchScript as a type comment
_scripting = torch.jit.is_scripting  # type: ignore[attr-defined]


def _format(names: Tuple[str, ...], module: Any, defaults: Any = ()) -> str:
    """``name=value, ...`` for ``extra_repr``, leaving out ``(name, default)`` pairs at their default."""
    return ", ".join(f"{name}={getattr(module, name)!r}" for name in names
                     if (name, getattr(module, name)) not in defaults)


class SpaceToDepth(torch.nn.Module):
    """SpaceToDepth-1 as a module: ``forward(x)`` is :func:`datamove.space_to_depth`.

    Parameters
    ----------
    mode : {"blocks_first", "depth_first"}
        Output channels ordered ``[block_size, ..., block_size, C]``
        (blocks_first: ONNX's DCR, TensorFlow) or ``[C, block_size, ..., block_size]``
        (depth_first: ONNX's CRD, PyTorch's ``pixel_unshuffle``).
    block_size : int
        ``>= 1``; every spatial dim of the input must be divisible by it.
    data_format : {"channels_first", "channels_last"}, default "channels_first"
        ``[N, C, D_1, ..., D_K]`` (NCHW) or ``[N, D_1, ..., D_K, C]`` (NHWC),
        for the input and the output.
    spatial_dims : int, optional
        ``K``, fixed: the input is ``(*, C, D_1, ..., D_K)`` (channels last:
        ``(*, D_1, ..., D_K, C)``) with any number of leading batch dims, none
        included, as ``torch.nn.PixelUnshuffle`` takes it (``spatial_dims=2``).
        Without it, the spec's rule: dim 0 is the batch, dim 1 the channels,
        every other dim spatial, so a ``[C, H, W]`` image is read as a batch
        of ``C`` rows of ``W`` pixels (see the examples).

    Raises
    ------
    DataMoveError
        A parameter breaks a rule of the operation (an unknown mode or
        data_format, ``block_size < 1``, ``spatial_dims < 1``), with the
        operation's message; in ``forward``, an input of rank below
        ``spatial_dims + 1``.
    TypeError
        A parameter of the wrong type, or ``None``.

    See Also
    --------
    datamove.space_to_depth : the operation, on any array.
    DepthToSpace : the inverse, with the same mode and block size.

    Notes
    -----
    Shape: ``[N, C, D_1, ..., D_K]`` to ``[N, C * block_size ** K, D_1 / block_size, ...]``,
    any number ``K >= 1`` of spatial dims (3-D to 5-D tensors and more).

    Examples
    --------
    >>> import torch
    >>> from datamove import nn
    >>> s2d = nn.SpaceToDepth("blocks_first", 2)
    >>> s2d
    SpaceToDepth(mode='blocks_first', block_size=2)
    >>> x = torch.arange(16).reshape(1, 1, 4, 4)
    >>> s2d(x)[0, :, 0, 0]  # the top-left 2 x 2 block, as four channels
    tensor([0, 1, 4, 5])
    >>> s2d(x).shape
    torch.Size([1, 4, 2, 2])
    >>> nn.SpaceToDepth("depth_first", 2, data_format="channels_last")(torch.zeros(1, 4, 4, 3)).shape
    torch.Size([1, 2, 2, 12])

    A ``[C, H, W]`` image, with and without ``spatial_dims``:

    >>> image = torch.zeros(3, 64, 64)
    >>> nn.SpaceToDepth("depth_first", 2, spatial_dims=2)(image).shape  # torch.nn.PixelUnshuffle(2)'s
    torch.Size([12, 32, 32])
    >>> nn.SpaceToDepth("depth_first", 2)(image).shape  # the spec's: a batch of 3, 64 channels, 1-D rows
    torch.Size([3, 128, 32])
    """

    # no class-level annotations: torch.jit.script reads them (and knows neither the Literal aliases nor, with
    # postponed annotations, the strings), and takes each attribute's type from its value instead

    def __init__(self, mode: Mode, block_size: SupportsIndex, data_format: DataFormat = "channels_first",
                 *, spatial_dims: Optional[SupportsIndex] = None) -> None:
        super().__init__()
        mode, size, data_format = _depth_params("space_to_depth", mode, block_size, data_format)
        self.mode: Mode = mode  # annotated here for type checkers, where TorchScript does not read them
        self.block_size: int = size
        self.data_format: DataFormat = data_format
        self.spatial_dims = _spatial_dims(spatial_dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`datamove.space_to_depth` of ``x`` with this module's parameters."""
        if _scripting():  # TorchScript compiles this branch only
            return _scripted("space_to_depth", x, self.mode, self.block_size, self.data_format, self.spatial_dims)
        if self.spatial_dims is None:
            return ops.space_to_depth(x, self.mode, self.block_size, data_format=self.data_format)
        return _leading_dims(ops.space_to_depth, x, self.spatial_dims, self.mode, self.block_size, self.data_format)

    def extra_repr(self) -> str:
        return _format(("mode", "block_size", "data_format", "spatial_dims"), self,
                       {("data_format", "channels_first"), ("spatial_dims", None)})


class DepthToSpace(torch.nn.Module):
    """DepthToSpace-1 as a module: ``forward(x)`` is :func:`datamove.depth_to_space`.

    Parameters
    ----------
    mode : {"blocks_first", "depth_first"}
        Input channels read as ``[block_size, ..., block_size, C']``
        (blocks_first: ONNX's DCR, TensorFlow) or ``[C', block_size, ..., block_size]``
        (depth_first: ONNX's CRD, PyTorch's ``pixel_shuffle``).
    block_size : int
        ``>= 1``; the input's channels must be divisible by ``block_size ** K``.
    data_format : {"channels_first", "channels_last"}, default "channels_first"
        ``[N, C, D_1, ..., D_K]`` (NCHW) or ``[N, D_1, ..., D_K, C]`` (NHWC),
        for the input and the output.
    spatial_dims : int, optional
        ``K``, fixed: the input is ``(*, C, D_1, ..., D_K)`` with any number
        of leading batch dims, none included, as ``torch.nn.PixelShuffle``
        takes it (``spatial_dims=2``). Without it, the spec's rule: dim 0 is
        the batch, dim 1 the channels, every other dim spatial.

    Raises
    ------
    DataMoveError
        A parameter breaks a rule of the operation, with the operation's
        message; in ``forward``, an input of rank below ``spatial_dims + 1``.
    TypeError
        A parameter of the wrong type, or ``None``.

    See Also
    --------
    datamove.depth_to_space : the operation, on any array.
    SpaceToDepth : the inverse, with the same mode and block size.

    Notes
    -----
    Shape: ``[N, C, D_1, ..., D_K]`` to ``[N, C / block_size ** K, D_1 * block_size, ...]``.

    Examples
    --------
    With ``mode="depth_first"`` it is ``torch.nn.PixelShuffle``, in any rank:

    >>> import torch
    >>> from datamove import nn
    >>> x = torch.randn(2, 12, 3, 5)
    >>> torch.equal(nn.DepthToSpace("depth_first", 2)(x), torch.nn.PixelShuffle(2)(x))
    True
    >>> nn.DepthToSpace("blocks_first", 2)(torch.zeros(1, 16, 2, 3, 4)).shape
    torch.Size([1, 2, 4, 6, 8])
    >>> nn.DepthToSpace("depth_first", 2, spatial_dims=2)(torch.zeros(5, 2, 12, 3, 3)).shape  # (*, C, H, W)
    torch.Size([5, 2, 3, 6, 6])
    """

    # no class-level annotations: torch.jit.script reads them (and knows neither the Literal aliases nor, with
    # postponed annotations, the strings), and takes each attribute's type from its value instead

    def __init__(self, mode: Mode, block_size: SupportsIndex, data_format: DataFormat = "channels_first",
                 *, spatial_dims: Optional[SupportsIndex] = None) -> None:
        super().__init__()
        mode, size, data_format = _depth_params("depth_to_space", mode, block_size, data_format)
        self.mode: Mode = mode  # annotated here for type checkers, where TorchScript does not read them
        self.block_size: int = size
        self.data_format: DataFormat = data_format
        self.spatial_dims = _spatial_dims(spatial_dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`datamove.depth_to_space` of ``x`` with this module's parameters."""
        if _scripting():  # TorchScript compiles this branch only
            return _scripted("depth_to_space", x, self.mode, self.block_size, self.data_format, self.spatial_dims)
        if self.spatial_dims is None:
            return ops.depth_to_space(x, self.mode, self.block_size, data_format=self.data_format)
        return _leading_dims(ops.depth_to_space, x, self.spatial_dims, self.mode, self.block_size, self.data_format)

    def extra_repr(self) -> str:
        return _format(("mode", "block_size", "data_format", "spatial_dims"), self,
                       {("data_format", "channels_first"), ("spatial_dims", None)})


class SpaceToBatch(torch.nn.Module):
    """SpaceToBatch-2 as a module: ``forward(x)`` is :func:`datamove.space_to_batch`.

    Parameters
    ----------
    block_shape : sequence of N ints or 1-D integer array
        Block size per axis of the input (N is its rank), ``>= 1``;
        ``block_shape[0]`` (the batch axis) must be 1.
    pads_begin, pads_end : sequence of N ints or 1-D integer array
        Zeros added at the start / end of each axis, ``>= 0``, 0 for the
        batch axis. ``D_i + pads_begin[i] + pads_end[i]`` must be divisible by
        ``block_shape[i]``, checked on each input.

    Raises
    ------
    DataMoveError
        A parameter breaks a rule of the operation (a block below 1 or
        on the batch axis, a negative pad or one on the batch axis, lengths that
        differ), with the operation's message.
    TypeError
        A parameter of the wrong type, or ``None``.

    See Also
    --------
    datamove.space_to_batch : the operation, on any array.
    BatchToSpace : the inverse, with crops = pads.

    Notes
    -----
    Shape: ``[batch, D_1, ...]`` to ``[batch * prod(block_shape), (D_i + pads_begin[i] + pads_end[i]) / block_shape[i], ...]``.

    Examples
    --------
    >>> import torch
    >>> from datamove import nn
    >>> s2b = nn.SpaceToBatch([1, 2], [0, 1], [0, 1])
    >>> s2b
    SpaceToBatch(block_shape=(1, 2), pads_begin=(0, 1), pads_end=(0, 1))
    >>> s2b(torch.tensor([[1, 2, 3, 4]]))
    tensor([[0, 2, 4],
            [1, 3, 0]])
    """

    def __init__(self, block_shape: IntVector, pads_begin: IntVector, pads_end: IntVector) -> None:
        super().__init__()
        ops._require(block_shape=block_shape, pads_begin=pads_begin, pads_end=pads_end)
        p = shapes.resolve_space_to_batch(None, block_shape, pads_begin, pads_end).params
        self.block_shape: Tuple[int, ...] = p["block_shape"]
        self.pads_begin: Tuple[int, ...] = p["pads_begin"]
        self.pads_end: Tuple[int, ...] = p["pads_end"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`datamove.space_to_batch` of ``x`` with this module's parameters."""
        if _scripting():  # TorchScript compiles this branch only: the custom op
            return torch.ops.datamove.space_to_batch(x, list(self.block_shape), list(self.pads_begin), list(self.pads_end))  # type: ignore[no-any-return]
        return ops.space_to_batch(x, self.block_shape, self.pads_begin, self.pads_end)

    def extra_repr(self) -> str:
        return _format(("block_shape", "pads_begin", "pads_end"), self)


class BatchToSpace(torch.nn.Module):
    """BatchToSpace-2 as a module: ``forward(x)`` is :func:`datamove.batch_to_space`.

    Parameters
    ----------
    block_shape : sequence of N ints or 1-D integer array
        Block size per axis of the input (N is its rank), ``>= 1``;
        ``block_shape[0]`` (the batch axis) must be 1. The input's batch must
        be divisible by ``prod(block_shape)``.
    crops_begin, crops_end : sequence of N ints or 1-D integer array
        Elements cropped from the start / end of each axis, ``>= 0``, 0 for
        the batch axis; ``crops_begin[i] + crops_end[i] <= D_i * block_shape[i]``,
        checked on each input.

    Raises
    ------
    DataMoveError
        A parameter breaks a rule of the operation, with the operation's message.
    TypeError
        A parameter of the wrong type, or ``None``.

    See Also
    --------
    datamove.batch_to_space : the operation, on any array.
    SpaceToBatch : the inverse, with pads = crops.

    Notes
    -----
    Shape: ``[batch, D_1, ...]`` to ``[batch / prod(block_shape), D_i * block_shape[i] - crops_begin[i] - crops_end[i], ...]``.

    Examples
    --------
    The inverse of the :class:`SpaceToBatch` example:

    >>> import torch
    >>> from datamove import nn
    >>> b2s = nn.BatchToSpace([1, 2], [0, 1], [0, 1])
    >>> b2s(torch.tensor([[0, 2, 4], [1, 3, 0]]))
    tensor([[1, 2, 3, 4]])
    >>> torch.nn.Sequential(nn.SpaceToBatch([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]),
    ...                     nn.BatchToSpace([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]))(torch.ones(2, 3, 4, 4)).shape
    torch.Size([2, 3, 4, 4])
    """

    def __init__(self, block_shape: IntVector, crops_begin: IntVector, crops_end: IntVector) -> None:
        super().__init__()
        ops._require(block_shape=block_shape, crops_begin=crops_begin, crops_end=crops_end)
        p = shapes.resolve_batch_to_space(None, block_shape, crops_begin, crops_end).params
        self.block_shape: Tuple[int, ...] = p["block_shape"]
        self.crops_begin: Tuple[int, ...] = p["crops_begin"]
        self.crops_end: Tuple[int, ...] = p["crops_end"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`datamove.batch_to_space` of ``x`` with this module's parameters."""
        if _scripting():  # TorchScript compiles this branch only: the custom op
            return torch.ops.datamove.batch_to_space(x, list(self.block_shape), list(self.crops_begin), list(self.crops_end))  # type: ignore[no-any-return]
        return ops.batch_to_space(x, self.block_shape, self.crops_begin, self.crops_end)

    def extra_repr(self) -> str:
        return _format(("block_shape", "crops_begin", "crops_end"), self)


def _spatial_dims(value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"spatial_dims must be an int or None, got {type(value).__name__} {value!r}")
    k = operator.index(value)
    if k < 1:
        raise DataMoveError(f"spatial_dims must be >= 1 (the number of spatial dims after the channels), got {k}")
    return k


def _leading_dims(function: Any, x: torch.Tensor, k: int, mode: str, block_size: int, data_format: str) -> torch.Tensor:
    """A depth op on ``(*, C, D_1, ..., D_k)``: the leading dims (any number, none included) merged into one
    batch dim by a reshape, as PixelShuffle does, and split back after. Sizes are used as values, so a
    traced size stays symbolic."""
    rank = x.dim()
    if rank < k + 1:
        raise DataMoveError(f"with spatial_dims={k} the input must have rank >= {k + 1} ((*, C, D_1, ..., D_{k})), "
                            f"got rank {rank}, shape {list(x.shape)}")
    if rank == k + 2:
        return function(x, mode, block_size, data_format=data_format)  # type: ignore[no-any-return]
    lead = tuple(x.shape[:rank - k - 1])
    y = function(x.reshape((math.prod(lead),) + tuple(x.shape[rank - k - 1:])), mode, block_size,
                 data_format=data_format)
    return y.reshape(lead + tuple(y.shape[1:]))  # type: ignore[no-any-return]


def _scripted(op: str, x: torch.Tensor, mode: str, block_size: int, data_format: str,
              spatial_dims: Optional[int]) -> torch.Tensor:
    """The depth ops' ``forward`` in TorchScript: the custom op ``torch.ops.datamove.<op>`` between the
    reshapes of :func:`_leading_dims` and the permutes of channels-last data (the op checks every rule)."""
    rank = x.dim()
    lead: List[int] = []
    if spatial_dims is not None:
        if rank < spatial_dims + 1:
            raise ValueError("with spatial_dims the input must have rank >= spatial_dims + 1")
        lead = list(x.shape[:rank - spatial_dims - 1])
        batch = 1
        for d in lead:
            batch *= d
        x = x.reshape([batch] + list(x.shape[rank - spatial_dims - 1:]))
        rank = x.dim()
    channels_last = data_format == "channels_last"
    if channels_last:
        x = x.permute([0, rank - 1] + list(range(1, rank - 1)))
    if op == "space_to_depth":
        y: torch.Tensor = torch.ops.datamove.space_to_depth(x, mode, block_size)
    else:
        y = torch.ops.datamove.depth_to_space(x, mode, block_size)
    if channels_last:
        y = y.permute([0] + list(range(2, rank)) + [1])
    if spatial_dims is not None:
        y = y.reshape(lead + list(y.shape[1:]))
    return y


def _depth_params(op: str, mode: Any, block_size: Any, data_format: Any) -> Tuple[Mode, int, DataFormat]:
    """The depth ops' parameters, normalised and checked by the operation's own rules (no shape yet)."""
    ops._require(mode=mode, block_size=block_size)
    resolve = shapes.resolve_space_to_depth if op == "space_to_depth" else shapes.resolve_depth_to_space
    p = resolve(None, mode, block_size, data_format).params  # data_format, mode, block_size >= 1
    return p["mode"], p["block_size"], data_format
