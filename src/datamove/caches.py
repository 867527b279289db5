"""The package's one kind of cache: a dict bounded to ``maxsize`` entries, oldest forgotten first.

Recipes (:mod:`datamove.recipes`), the compiled core's programs and the GPU
engine's launches and tables are each kept in one. Lookups are the dict's own
``get`` (no Python-level call on the hot path, atomic under the GIL);
:meth:`BoundedCache.put` adds an entry and forgets the oldest past the bound
under a lock, so threads adding at once never evict past it or fail.

>>> cache = BoundedCache(2)
>>> for key in "abc":
...     _ = cache.put(key, key.upper())
>>> sorted(cache), cache.get("c"), cache.get("a")
(['b', 'c'], 'C', None)
"""

from __future__ import annotations

import threading
from typing import Dict, Hashable, TypeVar

__all__ = ["BoundedCache"]

V = TypeVar("V")


class BoundedCache(Dict[Hashable, V]):
    """A dict of at most ``maxsize`` entries, filled with ``put`` (first in, first out)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize
        self._lock = threading.Lock()

    def put(self, key: Hashable, value: V) -> V:
        """Keep ``value`` under ``key``, forgetting the oldest entries past ``maxsize``; return ``value``."""
        with self._lock:
            self[key] = value
            while len(self) > self.maxsize:
                del self[next(iter(self))]
        return value
