"""How many threads the compiled CPU core uses.

The default is the cores this process may run on (``os.sched_getaffinity``),
so a container's or ``taskset``'s limit is respected, or fewer where
``DATAMOVE_NUM_THREADS`` asks for fewer. The variable is read once, when
datamove is imported, so every call sees the same setting whatever its size:
it must be plain decimal digits from 1 to :data:`MAX_THREADS`; anything else
(``"0"``, ``"-1"``, ``"abc"``, ``"4.0"``, ``"1_000"``) is ignored with a
``RuntimeWarning`` naming it, and a count over the usable cores is capped to
them (more threads than cores only cost). :func:`set_num_threads` takes any
count up to :data:`MAX_THREADS`, for tests and experiments. The core's pool
starts its threads on the first large call (a forked child starts its own on
its first call).

>>> import datamove as dm
>>> before = dm.get_num_threads()
>>> dm.set_num_threads(1); dm.get_num_threads()
1
>>> dm.set_num_threads(before)
"""

from __future__ import annotations

import operator
import os
import sys
import warnings
from typing import Optional

from . import core_format
from ...errors import DataMoveError, brief

__all__ = ["set_num_threads", "get_num_threads", "MAX_THREADS"]

#: The most threads the core takes (its ``MAX_THREADS``). Without the core no thread of datamove's runs a
#: copy, and a count is bounded by nothing but being a count.
MAX_THREADS = core_format.MAX_THREADS if core_format.MAX_THREADS > 0 else sys.maxsize


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def from_environment(value: Optional[str]) -> Optional[int]:
    """``DATAMOVE_NUM_THREADS``'s thread count, or None (the default) where it is unset or empty, or is
    not plain decimal digits from 1 to ``MAX_THREADS`` (then with a ``RuntimeWarning`` naming it).

    >>> from_environment(" 4 "), from_environment(""), from_environment(None)
    (4, None, None)
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     from_environment("1_000"), str(caught[0].message)
    (None, "DATAMOVE_NUM_THREADS must be plain decimal digits from 1 to 1024, got '1_000': using the default (the usable cores)")
    """
    value = (value or "").strip()
    if not value:
        return None
    # (int() takes "1_000", "+4" and other scripts' digits such as "\u0663": only ASCII digits are a count)
    if value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_THREADS:
        return int(value)
    warnings.warn(f"DATAMOVE_NUM_THREADS must be plain decimal digits from 1 to {MAX_THREADS}, got {brief(value)}: "
                  "using the default (the usable cores)", RuntimeWarning, stacklevel=2)
    return None


# Read once at import: every call, small or large, sees the same setting.
_asked = from_environment(os.environ.get("DATAMOVE_NUM_THREADS"))
_threads: Optional[int] = None if _asked is None else min(_asked, _usable_cores())


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
        _threads = _usable_cores()
    return _threads
