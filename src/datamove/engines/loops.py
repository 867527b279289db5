"""A view pair over two concrete arrays as a nest of byte-level loops: merged dims, the widest word.

:func:`merged` turns ``dst_array[dst] = src_array[src]`` (two
:class:`~datamove.plans.views.View` over one index space) into a start offset in each
array and loops ``(count, src_stride, dst_stride)`` in words of ``word`` bytes:

1. each index dim becomes byte strides, with the item's own bytes as an innermost dim,
   so every dtype width is just more bytes;
2. dims contiguous on both sides (``outer stride == inner stride * inner count``) merge,
   so a contiguous run of items becomes one long loop;
3. the widest word (up to ``widest``) dividing every stride, offset and the run is taken.

The NumPy recipes copy by these (:mod:`datamove.dispatch.recipes`: one ``np.copyto`` of
few, wide dims). The compiled core does the same, and more, in C++
(``src/native/planner/lower.cpp``).

>>> import numpy as np
>>> from datamove.plans import views as plans
>>> data = np.zeros((1, 2, 4, 4), np.float32)
>>> plan = plans.space_to_depth(data.shape, (1, 8, 2, 2), "blocks_first", 2)
>>> out = np.zeros(plan.out_shape, np.float32)
>>> merged(data, out, *plan.copies[0])   # block offsets 2 x 2; channels and rows merged (4); 2 positions
LoopNest(word=4, src_start=0, dst_start=0, loops=((2, 4, 16), (2, 1, 8), (4, 8, 2), (2, 2, 1)))
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..plans.views import View

__all__ = ["LoopNest", "merged", "merged_fill", "lowest_offset", "byte_loops", "merge", "widest_word", "in_words"]

Loop = Tuple[int, int, int]  # (count, src_stride, dst_stride)


class LoopNest(NamedTuple):
    word: int  # bytes per word: 1, 2, 4, 8 (or 16)
    src_start: int  # in words, from the src array's lowest address
    dst_start: int
    loops: Tuple[Loop, ...]  # strides in words


def lowest_offset(array: np.ndarray[Any, Any], strides: Optional[Tuple[int, ...]] = None) -> int:
    """Byte offset of the lowest-addressed element from ``array``'s data pointer (``strides``: its strides)."""
    low = 0
    for n, s in zip(array.shape, array.strides if strides is None else strides):
        if s < 0:
            low += (n - 1) * s
    return low


def byte_loops(array: np.ndarray[Any, Any], view: View) -> Tuple[int, List[Tuple[int, int]]]:
    """``view`` of ``array``: its start, in bytes from the array's lowest address, and a ``(count, byte
    stride)`` a dim."""
    strides = array.strides  # NumPy makes a new tuple at every access: once here, not once per loop
    start = -lowest_offset(array, strides)
    for i, s in zip(view.start, strides):
        start += i * s
    return start, [(count, step * strides[axis]) for axis, count, step in view.dims]


def merge(loops: List[List[int]]) -> List[List[int]]:
    """Merge pairs of loops contiguous on every side, repeatedly; drop count-1 loops.

    Loops are ``[count, src_stride, dst_stride]``. Each round merges the first outer loop (in list order)
    that some other loop continues into the first such inner loop, found through a table of where each
    loop ends: this runs for every piece of every first call.

    >>> merge([[2, 8, 8], [1, 5, 5], [2, 4, 4], [4, 1, 1]])   # one run of 16
    [[16, 1, 1]]
    """
    loops = [[n, s, d] for n, s, d in loops if n != 1]
    while len(loops) > 1:
        ends: Dict[Tuple[int, int], int] = {}
        for k in range(len(loops) - 1, -1, -1):  # the first one wins
            n, s, d = loops[k]
            ends[(s * n, d * n)] = k
        for i, (count, s, d) in enumerate(loops):
            j = ends.get((s, d))
            if j is not None and j != i:
                break
            if j == i:  # a loop that continues itself (strides 0): look for another one
                j = next((k for k, (n, t, e) in enumerate(loops) if k != i and t * n == s and e * n == d), None)
                if j is not None:
                    break
        else:
            return loops
        loops[j][0] *= count
        del loops[i]
    return loops


def widest_word(loops: Sequence[Sequence[int]], offsets: Sequence[int], innermost_run: int, widest: int = 8) -> int:
    """The widest word, up to ``widest``, dividing every byte stride, byte offset and the contiguous run."""
    g = innermost_run
    for loop in loops:
        for stride in loop[1:]:
            g = math.gcd(g, stride)
    for offset in offsets:
        g = math.gcd(g, offset)
    for word in (16, 8, 4, 2):
        if word <= widest and g % word == 0:
            return word
    return 1


def in_words(loops: List[List[int]], starts: Sequence[int], addresses: Sequence[int], fill: bool = False,
             widest: int = 8) -> Tuple[int, List[List[int]]]:
    """Merged byte loops as ``(word, loops in words)``: the item's bytes (the loop of stride 1 on every side;
    after merging, its count is the run) become one loop of words, dropped where it is one word."""
    unit = [l for l in loops if l[1] in (0 if fill else 1,) and l[2] == 1]
    run = unit[0][0] if unit else 1
    others = [l for l in loops if l not in unit]
    word = widest_word(others, list(starts) + list(addresses), run, widest)
    words = []
    for l in loops:
        if l in unit:
            if run // word > 1:
                words.append([run // word, 0 if fill else 1, 1])
        else:
            words.append([l[0]] + [s // word for s in l[1:]])
    return word, words


def merged(src_array: np.ndarray[Any, Any], dst_array: np.ndarray[Any, Any], src: View, dst: View) -> LoopNest:
    """``dst_array[dst] = src_array[src]`` as few loops of words as possible (in the merged order)."""
    src_start, src_loops = byte_loops(src_array, src)
    dst_start, dst_loops = byte_loops(dst_array, dst)
    loops = merge([[n, s, d] for (n, s), (_, d) in zip(src_loops, dst_loops)] + [[src_array.dtype.itemsize, 1, 1]])
    word, words = in_words(loops, (src_start, dst_start), ())
    return LoopNest(word, src_start // word, dst_start // word, tuple((n, s, d) for n, s, d in words))


def merged_fill(dst_array: np.ndarray[Any, Any], view: View) -> LoopNest:
    """The zero fill of ``dst_array[view]`` as :func:`merged` makes a copy's loops (``src`` strides 0)."""
    start, loops = byte_loops(dst_array, view)
    word, words = in_words(merge([[n, 0, s] for n, s in loops] + [[dst_array.dtype.itemsize, 0, 1]]), (start,), (), fill=True)
    return LoopNest(word, 0, start // word, tuple((n, s, d) for n, s, d in words))
