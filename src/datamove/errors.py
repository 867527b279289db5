"""The one exception type of datamove."""

from __future__ import annotations

__all__ = ["DataMoveError"]


class DataMoveError(ValueError):
    """Bad input to a datamove operation.

    The message names the argument, the rule it breaks and the values, e.g.
    ``crops_begin[2] + crops_end[2] = 11 exceeds data.shape[2] * block_shape[2] = 10``.
    A subclass of :class:`ValueError`, so ``except ValueError`` catches it too.
    """
