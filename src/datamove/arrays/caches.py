"""The package's one kind of cache: a dict bounded to ``maxsize`` entries, oldest forgotten first.

Recipes (:mod:`datamove.dispatch.recipes`), the compiled core's programs and the GPU
engine's launches and tables are each kept in one. Lookups are the dict's own
``get`` (no Python-level call on the hot path, atomic under the GIL);
:meth:`BoundedCache.put` adds an entry and forgets the oldest past the bound
under a lock, so threads adding at once never evict past it or fail; a
forked child gets new locks (a parent's thread may have held one at fork()).

>>> cache = BoundedCache(2)
>>> for key in "abc":
...     _ = cache.put(key, key.upper())
>>> sorted(cache), cache.get("c"), cache.get("a")
(['b', 'c'], 'C', None)
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Dict, Hashable, Optional, TypeVar, cast

__all__ = ["BoundedCache", "renew_lock_after_fork"]

V = TypeVar("V")

#: Everything whose ``_lock`` a forked child renews, by id (a dict subclass is unhashable: not a WeakSet).
#: An entry leaves with its owner, so adding one costs the same however many caches live (a list pruned
#: at each add cost 25 us a new recipe once 500 were kept, each with its programs' cache).
_LOCKED: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()


def renew_lock_after_fork(owner: Any) -> None:
    """Give ``owner`` a new ``owner._lock`` in a forked child: a thread of the parent may have held it at
    fork(), and the child, which has only the forking thread, would wait for it forever."""
    _LOCKED[id(owner)] = owner


class BoundedCache(Dict[Hashable, V]):
    """A dict of at most ``maxsize`` entries, filled with ``put`` (first in, first out); with ``maxbytes``,
    its values (``bytes``) also hold at most that many bytes together, the newest kept whatever its size.
    Their total is kept as entries are set, deleted or cleared (not through ``pop``, ``popitem``,
    ``update`` or ``setdefault``, which the package does not use on it).

    >>> programs = BoundedCache(8, maxbytes=10)
    >>> for key in "abc":
    ...     _ = programs.put(key, b"12345")
    >>> sorted(programs), programs.held
    (['b', 'c'], 10)
    """

    def __init__(self, maxsize: int, maxbytes: Optional[int] = None) -> None:
        super().__init__()
        self.maxsize = maxsize
        self.maxbytes = maxbytes
        self.held = 0  # the values' bytes together, where maxbytes bounds them
        self._lock = threading.Lock()
        renew_lock_after_fork(self)

    def __setitem__(self, key: Hashable, value: V) -> None:
        if self.maxbytes is not None:
            self.held += len(cast(bytes, value)) - (len(cast(bytes, self[key])) if key in self else 0)
        super().__setitem__(key, value)

    def __delitem__(self, key: Hashable) -> None:
        if self.maxbytes is not None:
            self.held -= len(cast(bytes, self[key]))
        super().__delitem__(key)

    def clear(self) -> None:
        """Forget every entry (the byte total with them)."""
        super().clear()
        self.held = 0

    def put(self, key: Hashable, value: V) -> V:
        """Keep ``value`` under ``key``, forgetting the oldest entries past the bounds; return ``value``."""
        with self._lock:
            if self.maxbytes is None:  # (no total to keep: the dict's own methods, no Python call each)
                dict.__setitem__(self, key, value)
                while len(self) > self.maxsize:
                    dict.__delitem__(self, next(iter(self)))
                return value
            self[key] = value
            while len(self) > self.maxsize:
                del self[next(iter(self))]
            # (a running total: summing every value's size on each put took 28 us at 256 programs, on every
            # new shape's first call)
            while self.maxbytes is not None and self.held > self.maxbytes and len(self) > 1:
                del self[next(iter(self))]
        return value


def _after_fork_in_child() -> None:
    for owner in list(_LOCKED.values()):
        owner._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
