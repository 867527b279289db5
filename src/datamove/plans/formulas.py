"""The specs' formulas as data: pad, reshape, transpose, reshape, crop.

Each of the four operations is, in its specification, a reshape, a
transpose and a reshape (SpaceToBatch zero-pads first, BatchToSpace crops
last). :func:`steps` returns those steps for one input shape, as plain
integers, for the code that has to *write the formula down* in another
system: the PyTorch ops recorded while ``torch.onnx``'s TorchScript exporter
traces a call, and the ONNX translations of ``torch.ops.datamove.*``
(:mod:`datamove.pytorch.onnx`), and the TensorFlow and Keras paths, which
apply them with their own ops (:func:`follow`). A dim may be a symbol (any
object with ``//``, ``*`` and ``+``, such as a scalar ``tf.Tensor`` from
``tf.shape``), so that a size unknown when the graph is built stays unknown.
Parameters are the normalised ones of
``datamove.rules.shapes.resolve_<op>(...).params``: validate first.

>>> s = steps("depth_to_space", {"mode": "depth_first", "block_size": 2}, (1, 8, 3, 5))
>>> s.split, s.perm, s.merged
((1, 2, 2, 2, 3, 5), (0, 1, 4, 2, 5, 3), (1, 2, 6, 10))
>>> import numpy as np
>>> x = np.arange(8).reshape(1, 8, 1, 1)
>>> run(steps("depth_to_space", {"mode": "blocks_first", "block_size": 2}, x.shape), x)[0].tolist()
[[[0, 2], [4, 6]], [[1, 3], [5, 7]]]
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

__all__ = ["Steps", "steps", "run", "follow"]

Ints = Tuple[int, ...]  # (or symbols: see the module's docstring)


@dataclass(frozen=True)
class Steps:
    """One call of an operation as ``pad -> reshape(split) -> transpose(perm) -> reshape(merged) -> crop``.

    ``pads`` (SpaceToBatch) and ``crops`` (BatchToSpace) are ``(begin, end)``
    per axis, or None when all are zero.
    """

    pads: Optional[Tuple[Ints, Ints]]
    split: Ints
    perm: Ints
    merged: Ints
    crops: Optional[Tuple[Ints, Ints]]

    @property
    def moves_nothing(self) -> bool:
        """No pad, no crop, and the transpose keeps the order of every axis longer than 1 (blocks of 1):
        the output is the input, reshaped.

        >>> steps("space_to_depth", {"mode": "blocks_first", "block_size": 1}, (1, 3, 2, 2)).moves_nothing
        True
        """
        moved = [axis for axis in self.perm if self.split[axis] != 1]
        return self.pads is None and self.crops is None and moved == sorted(moved)

    @property
    def out_shape(self) -> Ints:
        """The output shape (after the crop)."""
        if self.crops is None:
            return self.merged
        begin, end = self.crops
        return tuple(n - b - e for n, b, e in zip(self.merged, begin, end))


def steps(op: str, params: Dict[str, Any], shape: Ints) -> Steps:
    """The steps of ``op`` with validated ``params`` on an input of ``shape`` (Python ints, or symbols)."""
    shape = tuple(int(d) if isinstance(d, numbers.Integral) else d for d in shape)
    if op in ("space_to_depth", "depth_to_space"):
        return _depth(op, params["mode"], int(params["block_size"]), shape)
    blocks = tuple(int(b) for b in params["block_shape"][1:])
    m = len(blocks)
    if op == "batch_to_space":
        batch, dims = shape[0], shape[1:]
        new_batch = batch // math.prod(blocks)
        order = [m]
        for i in range(m):
            order += [m + 1 + i, i]
        crops = _nonzero(params["crops_begin"], params["crops_end"])
        merged = (new_batch,) + tuple(d * b for d, b in zip(dims, blocks))
        return Steps(None, blocks + (new_batch,) + dims, tuple(order), merged, crops)
    if op == "space_to_batch":
        pads = _nonzero(params["pads_begin"], params["pads_end"])
        padded = shape if pads is None else tuple(d + b + e for d, b, e in zip(shape, *pads))
        batch, dims = padded[0], padded[1:]
        split = (batch,) + tuple(v for d, b in zip(dims, blocks) for v in (d // b, b))
        perm = tuple(2 + 2 * i for i in range(m)) + (0,) + tuple(1 + 2 * i for i in range(m))
        merged = (batch * math.prod(blocks),) + tuple(d // b for d, b in zip(dims, blocks))
        return Steps(pads, split, perm, merged, None)
    raise ValueError(f"unknown operation {op!r}")


def _depth(op: str, mode: str, size: int, shape: Ints) -> Steps:
    n, c, dims = shape[0], shape[1], shape[2:]
    k = len(dims)
    if op == "space_to_depth":
        split = (n, c) + tuple(v for d in dims for v in (d // size, size))
        if mode == "blocks_first":
            perm = (0,) + tuple(3 + 2 * i for i in range(k)) + (1,) + tuple(2 + 2 * i for i in range(k))
        else:
            perm = (0, 1) + tuple(3 + 2 * i for i in range(k)) + tuple(2 + 2 * i for i in range(k))
        return Steps(None, split, perm, (n, c * size**k) + tuple(d // size for d in dims), None)
    new_c = c // size**k
    if mode == "blocks_first":
        split = (n,) + (size,) * k + (new_c,) + dims
        order = [0, k + 1]
        for i in range(k):
            order += [k + 2 + i, 1 + i]
    else:
        split = (n, new_c) + (size,) * k + dims
        order = [0, 1]
        for i in range(k):
            order += [k + 2 + i, 2 + i]
    return Steps(None, split, tuple(order), (n, new_c) + tuple(d * size for d in dims), None)


def _nonzero(begin: Any, end: Any) -> Optional[Tuple[Ints, Ints]]:
    begin, end = tuple(int(v) for v in begin), tuple(int(v) for v in end)
    return (begin, end) if any(begin) or any(end) else None


def run(s: Steps, data: Any) -> Any:
    """The steps applied to a NumPy array (a reference for tests: NumPy's ``pad``, ``reshape``, ``transpose``)."""
    import numpy as np

    x = np.asarray(data)
    if s.pads is not None:
        x = np.pad(x, list(zip(*s.pads)))
    x = x.reshape(s.split).transpose(s.perm).reshape(s.merged)
    if s.crops is not None:
        x = x[tuple(slice(b, n - e) for n, b, e in zip(s.merged, *s.crops))]
    return x


def follow(s: Steps, x: Any, reshape: Callable[[Any, Sequence[Any]], Any], transpose: Callable[[Any, Ints], Any],
           pad: Callable[[Any, Sequence[Tuple[int, int]]], Any]) -> Any:
    """The steps applied with a framework's own ``reshape(x, dims)``, ``transpose(x, perm)`` and
    ``pad(x, [(begin, end), ...])``; the crop is basic slicing with constant bounds, which every framework
    has, so a symbolic size is never needed for it.

    >>> import numpy as np
    >>> s = steps("space_to_batch", {"block_shape": (1, 2), "pads_begin": (0, 1), "pads_end": (0, 1)}, (1, 4))
    >>> follow(s, np.arange(1, 5).reshape(1, 4), np.reshape, np.transpose, np.pad).tolist()
    [[0, 2, 4], [1, 3, 0]]
    """
    if s.pads is not None:
        x = pad(x, list(zip(*s.pads)))
    x = reshape(transpose(reshape(x, s.split), s.perm), s.merged)
    if s.crops is not None:
        x = x[tuple(slice(b, -e if e else None) for b, e in zip(*s.crops))]
    return x
