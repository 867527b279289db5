"""Lower a plan's view pairs to byte-level loop nests, the form the compiled kernels take: the tests' twin of
the core's ``src/native/planner/lower.cpp``, which tests/test_planner_lower.py holds to it bit for bit.

A :class:`~datamove.plans.views.View` pair over two concrete arrays becomes a
:class:`LoopNest`: a start offset in each array and a list of loops
``(count, src_stride, dst_stride)``, all in units of ``word`` bytes. The
lowering

1. merges the pair's dims as :func:`datamove.engines.loops.merged` does
   (byte strides, dims contiguous on both sides as one, the widest word:
   16 bytes for the native engine, dividing the base addresses too);
2. orders the loops and names the inner tile's pattern (:func:`schedule`),
   so that each cache line read or written is used while it is in cache.

>>> import numpy as np
>>> from datamove.plans import views as plans
>>> data = np.zeros((1, 2, 4, 4), np.float32)
>>> plan = plans.space_to_depth(data.shape, (1, 8, 2, 2), "blocks_first", 2)
>>> out = np.zeros(plan.out_shape, np.float32)
>>> nest = lower(data, out, *plan.copies[0])
>>> nest.word, nest.pattern, nest.block, nest.loops[-2:]   # 2 rows of 2 from 4 contiguous words
(4, 'gather', 2, ((2, 1, 8), (2, 2, 1)))
"""

from __future__ import annotations

import math
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, cast

import numpy as np

# (the tests read _lowest_offset and _merge here, under the names they had in the package)
from datamove.engines.loops import byte_loops as _byte_loops, in_words
from datamove.engines.loops import lowest_offset as _lowest_offset, merge as _merge  # noqa: F401
from datamove.engines.native import core_format
from datamove.plans.views import View, Window

__all__ = ["LoopNest", "WindowNest", "fan_out_first", "lower", "lower_fill", "lower_window", "schedule"]

Loop = Tuple[int, int, int]  # (count, src_stride, dst_stride)


class LoopNest(NamedTuple):
    word: int  # bytes per word: 1, 2, 4, 8 (or 16)
    src_start: int  # in words, from the src array's lowest address
    dst_start: int
    loops: Tuple[Loop, ...]  # outermost first, strides in words
    pattern: str = "strided"  # the inner tile: see schedule()
    block: int = 0


#: The input the loops :func:`runs_together` moves out may span, in bytes: its passes then read it from
#: the core's L2 cache (2 MiB a core on the development machine), not from memory.
REREAD_BYTES = core_format.REREAD_BYTES  # (the core's: src/native/plan.hpp)


def runs_together(outer: List[List[int]], n: int, word: int = 1) -> List[List[int]]:
    """The loops around a gather tile of ``n`` positions (outermost first), with any loops that the
    input's order puts between two loops that both go on with the tile's rows in dst moved outside them.

    5-D SpaceToDepth: the output's depth and height both continue its rows, and the block's depth
    offset lies between them in the input. Moved out, the rows run on through both (8 KiB instead of
    1 KiB), and the core streams them as one run whatever their offset in a line (``side_joined`` in
    ``src/native/streamed.hpp``). Only over as much of the outer of the two as spans at most
    :data:`REREAD_BYTES` of input (the rest of it stays outside), so the passes the moved loops make over
    it read from the cache, and only where the tile's rows are a line (64 bytes) or more, as the core's
    whole-line gathers take them: stored plainly, the loops moved out gained nothing (float32) or cost
    (uint8 with block 3, 16-byte rows: 1.76-1.84x the copy floor -> 1.97-2.11x).

    >>> runs_together([[304, 55296, 55296], [8, 6912, 256], [3, 2304, 18432], [16, 144, 16], [3, 48, 6144]], 16, 4)
    [[304, 55296, 55296], [3, 2304, 18432], [8, 6912, 256], [16, 144, 16], [3, 48, 6144]]
    """
    if n * word < core_format.LINE:
        return outer
    for r, run in enumerate(outer):
        if run[2] != n:
            continue
        for q in range(r - 1):
            count, src, dst = outer[q]
            between = outer[q + 1:r]
            if dst != n * run[0] or not all(abs(l[1]) < abs(src) for l in between):
                continue
            # the most of the loop whose input fits the bound (a merged loop, as blocks_first's channels
            # and depth, is cut in two: the rest of it stays outside)
            most = REREAD_BYTES // max(1, abs(src) * word)
            divisors = {d for k in range(1, math.isqrt(count) + 1) if count % k == 0 for d in (k, count // k)}
            inner = max((k for k in divisors if k <= most), default=1)
            if inner < 2:
                continue
            rest = [[count // inner, src * inner, dst * inner]] if inner < count else []
            return outer[:q] + rest + between + [[inner, src, dst]] + outer[r:]
        break
    return outer


def schedule(loops: List[List[int]], fill: bool = False, word: int = 1) -> Tuple[str, int, List[List[int]]]:
    """Order the loops (outermost first) and name the inner tile's pattern.

    Loops are ``[count, src_stride, dst_stride]`` in words; a fill has src
    stride 0; ``word``: their bytes. Returns ``(pattern, block, loops)``:

    * ``"gather"``, block ``B`` (2, 3 or 4): a loop ``j`` of ``B`` with src
      stride 1 and a loop ``i`` with src stride ``B`` and dst stride 1, so the
      tile reads ``B * n_i`` contiguous words and writes ``B`` contiguous rows
      (SpaceToDepth's and SpaceToBatch's innermost block). Loop 0 is ``i``,
      loop 1 is ``j``; the other loops follow the input, so it is read in order
      (where the output rows go on past a block loop, the core joins them; see
      ``side_joined`` in ``src/native/streamed.hpp``; :func:`runs_together` keeps
      the loops that go on with them next to each other).
    * ``"scatter"``, block ``B``: the mirror image (DepthToSpace, BatchToSpace);
      the other loops follow the output, so it is written in order.
    * ``"gather2"`` / ``"scatter2"``, block ``B``: the same tiles with the
      ``B`` rows made of two block loops that are contiguous on the run's side
      only (``[j2, j1, i]`` innermost, ``j2`` outer), as channels-last
      depth_first data has them (a 2 x 2 block of pixels, each one run of
      channels). The native engine passes ``j2`` as the tile's second row stride.
    * When several block tiles fit, the one writing the longest pieces (up to
      64 words; then the first above) is taken: short pieces cost most on the
      output side.
    * ``"contiguous"``: a loop with both strides 1 goes innermost.
    * ``"strided"``: the loop with the smallest stride on either side goes
      innermost.
    """
    if not loops:
        return "contiguous", 0, []

    def following(side: int, rest: List[List[int]]) -> List[List[int]]:
        return sorted(rest, key=lambda l: (abs(l[side]), abs(l[3 - side])), reverse=True)

    if not fill:
        # Every block tile the loops allow; the one writing the longest pieces wins, up to 64 words (then
        # the first found). Short pieces cost most on the output side: 4-channel channels-last depth_first
        # SpaceToDepth as GATHER<4> writes pieces of 2 words, 2.3x the copy floor; as SCATTER<4> 16, 1.4x.
        found: List[Tuple[int, str, int, List[List[int]]]] = []
        for j in loops:
            b = j[0]
            if b in BLOCKS and (j[1] == 1 or j[2] == 1):
                for i in loops:
                    if i is j:
                        continue
                    if j[1] == 1 and i[1] == b and i[2] == 1:
                        rest = [l for l in loops if l is not i and l is not j]
                        found.append((i[0], "gather", b, runs_together(following(1, rest), i[0], word) + [j, i]))
                    if j[2] == 1 and i[2] == b and i[1] == 1:
                        rest = [l for l in loops if l is not i and l is not j]
                        found.append((i[0] * b, "scatter", b, following(2, rest) + [j, i]))
        for j1 in loops:  # two block loops whose rows together are B (2 x 2)
            if j1[1] != 1 and j1[2] != 1:
                continue
            for j2 in loops:
                block = j1[0] * j2[0]
                if j2 is j1 or block not in BLOCKS:
                    continue
                gather2, scatter2 = j1[1] == 1 and j2[1] == j1[0], j1[2] == 1 and j2[2] == j1[0]
                if not (gather2 or scatter2):
                    continue
                for i in loops:
                    if i is j1 or i is j2:
                        continue
                    if gather2 and i[1] == block and i[2] == 1:
                        rest = [l for l in loops if l is not i and l is not j1 and l is not j2]
                        found.append((i[0], "gather2", block, following(1, rest) + [j2, j1, i]))
                    if scatter2 and i[2] == block and i[1] == 1:
                        rest = [l for l in loops if l is not i and l is not j1 and l is not j2]
                        found.append((i[0] * block, "scatter2", block, following(2, rest) + [j2, j1, i]))
        if found:
            _, pattern, block, ordered = max(found, key=lambda f: min(f[0], core_format.PIECE_WORDS))  # the first of the longest
            return pattern, block, ordered
    side = 2 if fill else 1
    unit = [l for l in loops if l[2] == 1 and (fill or l[1] == 1)]
    if unit:
        inner = max(unit, key=lambda l: l[0])
        rest = [l for l in loops if l is not inner]
        # Short runs (channels-last data): follow the side on which a block loop
        # continues the run while jumping far on the other side, as the
        # gather and scatter tiles do (SpaceToBatch reads on, BatchToSpace writes on).
        def jump(side: int) -> int:
            return max((abs(l[3 - side]) for l in rest if l[side] == inner[0]), default=-1)

        side = 1 if not fill and inner[0] < core_format.PIECE_WORDS and jump(1) > jump(2) else 2
        return "contiguous", 0, following(side, rest) + [inner]
    inner = min(loops, key=lambda l: (min(abs(l[side]), abs(l[2])), -l[0]))
    return "strided", 0, following(2, [l for l in loops if l is not inner]) + [inner]


def fan_out_first(loops: Sequence[Sequence[int]], word: int, start: int = 0, span: int = 0) -> List[List[int]]:
    """A scatter tile's loops (outermost first, the tile last, strides in words of ``word`` bytes) with
    the loops that fan its reads out moved outermost, where its input rows are 1 KiB or more and its
    output rows lie on whole cache lines: each starts on a line (``start``, the first tile's first byte
    written, as an address) and writes ``span`` bytes, a whole number of lines.

    A scatter tile reads ``B`` rows, each a run of its input; a loop that goes
    on where the rows stop reads on in the same streams, but a loop between
    the tile and that one (BatchToSpace's and DepthToSpace's block row offset)
    opens ``B`` more streams far away in the input. Outermost, such loops make
    separate passes (with several threads, each thread one pass), each reading
    only the tile's own ``B`` streams and writing every other run of the
    output. Only for outputs written around the cache, whose runs are not
    fetched into it: BatchToSpace with crops into ``out=``, 1 GiB, went from
    1.19-1.30x the copy floor to 1.08-1.17x; 512 MiB, 1.09-1.17x -> 1.06-1.12x
    (AMD EPYC, same process, in turns, four runs). Rows under 1 KiB stay in order: their passes'
    partial lines at the runs' ends cost more than the streams saved
    (DepthToSpace of 128 x 128 images, 128 MiB: 0.58-0.59x -> 0.63-0.67x). So do rows off whole lines:
    in order, the core joins the line one row ends in with the next row's start (its Carry), where
    passes stream each such line as two partial writes (2-core Intel Xeon, BatchToSpace 512 MiB into
    np.empty, 16 bytes past a line: 1.51x in passes, 1.02-1.16x in order with the carry).
    Unchanged where no loop reads on.

    >>> fan_out_first([[128, 65536, 262144], [256, 256, 1024], [2, 16777216, 512], [2, 8388608, 1], [256, 1, 2]], 4, 0, 2048)
    [[2, 16777216, 512], [128, 65536, 262144], [256, 256, 1024], [2, 8388608, 1], [256, 1, 2]]
    >>> fan_out_first([[128, 65536, 260100], [254, 256, 1020], [2, 16777216, 510], [2, 8388608, 1], [256, 1, 2]], 4, 0, 2040)[0]
    [128, 65536, 260100]
    """
    nest = [list(l) for l in loops]
    outer, tile = nest[:-2], nest[-2:]
    run = tile[1][0] * tile[1][1]  # a row's src words
    if tile[1][1] != 1 or run * word < core_format.FAN_OUT_BYTES:
        return nest
    line = core_format.LINE  # the core's line: its streams' unit
    if start % line or span % line or any(l[2] * word % line for l in outer):
        return nest
    for k in range(len(outer) - 1, -1, -1):
        if outer[k][1] == run:
            return outer[k + 1:] + outer[:k + 1] + tile
    return nest


#: Block sizes with a specialised tile (see ``src/native/run_rows.hpp``), as the core exports them.
BLOCKS = core_format.TILE_BLOCKS


def _finish(loops: List[List[int]], starts: Sequence[int], addresses: Sequence[int], fill: bool = False,
            widest: int = 8) -> Tuple[int, Tuple[str, int, List[List[int]]]]:
    word, words = in_words(loops, starts, addresses, fill, widest)
    return word, schedule(words, fill, word)


def lower(src_array: np.ndarray, dst_array: np.ndarray, src: View, dst: View, aligned: bool = True,
          widest: int = 8, addresses: Optional[Tuple[int, int]] = None) -> LoopNest:
    """The loop nest that performs ``dst_array[dst] = src_array[src]``.

    With ``aligned`` the word also divides both arrays' addresses (the
    compiled kernels need aligned words; NumPy's copies do not). ``widest``
    caps the word (NumPy has no 16-byte unsigned int; the native core has).
    ``addresses``: both arrays' :func:`_address`, when the caller has them.
    """
    itemsize = src_array.dtype.itemsize
    src_start, src_loops = _byte_loops(src_array, src)
    dst_start, dst_loops = _byte_loops(dst_array, dst)
    loops = [[n, s, d] for (n, s), (_, d) in zip(src_loops, dst_loops)]
    loops = _merge(loops + [[itemsize, 1, 1]])
    bases: Tuple[int, ...] = ()
    if aligned:
        bases = (_address(src_array), _address(dst_array)) if addresses is None else addresses
    word, (pattern, block, loops) = _finish(loops, (src_start, dst_start), bases, widest=widest)
    nest = cast("Tuple[Loop, ...]", tuple(tuple(l) for l in loops))
    return LoopNest(word, src_start // word, dst_start // word, nest, pattern, block)


def lower_fill(dst_array: np.ndarray, view: View, aligned: bool = True, widest: int = 8,
               address: Optional[int] = None) -> LoopNest:
    """The loop nest that zero-fills ``dst_array[view]`` (``src`` strides are 0; ``address`` as in :func:`lower`)."""
    start, byte_loops = _byte_loops(dst_array, view)
    loops = _merge([[n, 0, s] for n, s in byte_loops] + [[dst_array.dtype.itemsize, 0, 1]])
    addresses = ((_address(dst_array) if address is None else address),) if aligned else ()
    word, (_, _, loops) = _finish(loops, (start,), addresses, fill=True, widest=widest)
    return LoopNest(word, 0, start // word, cast("Tuple[Loop, ...]", tuple(tuple(l) for l in loops)), "fill")


class WindowNest(NamedTuple):
    word: int  # bytes a position of the window: an item, or a pixel of items (up to 128 bytes)
    src_start: int
    dst_start: int
    loops: Tuple[Loop, ...]  # ..., (B, b strides), (blocks, d strides): loops 1 and 0
    pattern: str  # "gather_window" or "scatter_window"
    block: int
    lo: int
    hi: int


def lower_window(src_array: np.ndarray[Any, Any], dst_array: np.ndarray[Any, Any],
                 window: Window, addresses: Optional[Tuple[int, int]] = None) -> Optional[WindowNest]:
    """The loop nest of a :class:`~datamove.plans.views.Window`, or None when the kernels cannot take it.

    They take it when each position ``t`` of the window is one word on the
    space side, the word at ``start + t``: an item of 1, 2, 4, 8 or 16 bytes
    where the window axis is contiguous, or a pixel of 2 to 128 bytes (a power
    of two; up to 16 in BatchToSpace's scatter windows) where the items after
    it are (channels-last data: the loops contiguous on both sides merge into
    the item). Words are aligned to their size, up to 16 bytes. Pixels write the
    padding in the copy's pass: TensorFlow's NHWC, 8 float32 channels, 64 MiB,
    1.14-1.26x the copy floor -> 1.06-1.09x; 2 channels, block 4, 1.80x ->
    0.85x (2-core Intel Xeon, same process, in turns); 64- and 128-byte pixels
    (16 and 32 float32 channels), 62 x 62 to 189 x 189 images, whose edge pixels
    were steps of their own: 1.13-1.32x -> 1.04-1.10x. BatchToSpace's scatter
    windows of pixels write a crop's edge pixels in the copy's pass too: 5-D
    channels-last, 4 float32 channels, 64 MiB, 1.14-1.21x -> 0.96-0.98x with
    16-byte words streamed from registers (scatter_pixel_span); through the L1
    buffer, as when first tried, 1.18x -> 1.34x. Stored plainly (16 MiB, 2 to 16
    channels), within 2% of the edge pixels as steps of their own.

    >>> from datamove.plans import views as plans
    >>> x = np.zeros((1, 6, 6, 8), np.float32)   # TensorFlow's NHWC: each position a pixel of 32 bytes
    >>> plan = plans.space_to_batch(x.shape, (4, 4, 4, 8), (1, 2, 2, 1), (0, 1, 1, 0), (0, 1, 1, 0))
    >>> out = np.zeros((4, 4, 4, 8), np.float32)
    >>> nest = lower_window(x, out, plan.windows[0])
    >>> nest.word, nest.pattern, nest.block, nest.loops[-2:], (nest.lo, nest.hi)
    (32, 'gather_window', 2, ((2, 1, 16), (4, 2, 1)), (1, 7))
    """
    itemsize = src_array.dtype.itemsize
    src_start, src_loops = _byte_loops(src_array, window.src)
    dst_start, dst_loops = _byte_loops(dst_array, window.dst)
    loops = [[n, s, d] for (n, s), (_, d) in zip(src_loops, dst_loops)]
    cut = len(loops) - window.trailing
    blocks, offsets = loops[cut - 2], loops[cut - 1]
    rest = _merge(loops[:cut - 2] + loops[cut:] + [[itemsize, 1, 1]])
    unit = [l for l in rest if l[1] == 1 and l[2] == 1]  # the item and the items that go on from it on both sides
    word = unit[0][0] if unit else 1
    side = 1 if window.space == "src" else 2  # the space side: contiguous along the window
    # scatter windows take words of up to 16 bytes (the core's kernels for 32- to 128-byte words are gather
    # windows' only: an item of complex256 or a 32-byte structure goes to the copies' nests)
    if word & (word - 1) or not 1 <= word <= core_format.MAX_WINDOW_WORD or offsets[side] != word or (
            window.space != "src" and word > core_format.MAX_WORD):
        return None
    rest = [l for l in rest if l not in unit]
    if addresses is None:
        addresses = (_address(src_array), _address(dst_array))
    strides = [src_start, dst_start] + [x for l in rest + [blocks, offsets] for x in l[1:]]
    if any(v % word for v in strides) or any(a % min(word, 16) for a in addresses):
        return None
    words = [[l[0], l[1] // word, l[2] // word] for l in rest + [blocks, offsets]]
    blocks, offsets = words[-2], words[-1]
    rest = _merge(words[:-2])
    rest = sorted(rest, key=lambda l: (abs(l[side]), abs(l[3 - side])), reverse=True)
    pattern = "gather_window" if window.space == "src" else "scatter_window"
    block = offsets[0] if offsets[0] in BLOCKS else 0
    nest = cast("Tuple[Loop, ...]", tuple(map(tuple, rest + [offsets, blocks])))
    return WindowNest(word, src_start // word, dst_start // word, nest, pattern, block, window.lo, window.hi)


def _address(array: np.ndarray[Any, Any]) -> int:
    """The lowest address ``array``'s items occupy."""
    pointer: int = array.__array_interface__["data"][0]
    return pointer + _lowest_offset(array)
