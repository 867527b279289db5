"""How many threads the compiled CPU core uses.

The default is ``DATAMOVE_NUM_THREADS`` when set, else the cores this process
may run on (``os.sched_getaffinity``), so a container's or ``taskset``'s
limit is respected. The core's pool starts its threads on the first large
call (a forked child starts its own on its first call).

>>> import datamove as dm
>>> before = dm.get_num_threads()
>>> dm.set_num_threads(1); dm.get_num_threads()
1
>>> dm.set_num_threads(before)
"""

from __future__ import annotations

import operator
import os
from typing import Optional

from .errors import DataMoveError, brief

__all__ = ["set_num_threads", "get_num_threads", "MAX_THREADS"]

#: The most threads the core takes.
MAX_THREADS = 1024

_threads: Optional[int] = None


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _default() -> int:
    value = os.environ.get("DATAMOVE_NUM_THREADS", "").strip()
    if not value:
        return _usable_cores()
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise DataMoveError(f"DATAMOVE_NUM_THREADS must be an integer from 1 to {MAX_THREADS}, got {brief(value)}")
    return n


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (1 to :data:`MAX_THREADS`) for the compiled core's copies from now on.

    Raises
    ------
    TypeError
        ``n`` is not an integer (``True`` and ``2.0`` are refused).
    DataMoveError
        ``n`` is out of range.
    """
    global _threads
    if isinstance(n, bool):
        raise TypeError(f"n must be an int, got bool {n!r}")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"n must be an int, got {type(n).__name__} {brief(n)}") from None
    if not 1 <= n <= MAX_THREADS:
        raise DataMoveError(f"n must be from 1 to {MAX_THREADS} threads, got {n}")
    _threads = n


def get_num_threads() -> int:
    """The number of threads the compiled core uses (see :func:`set_num_threads`)."""
    global _threads
    if _threads is None:
        _threads = _default()
    return _threads
