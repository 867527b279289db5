"""Each operation as one masked strided move: the form the GPU engine's single kernel runs.

A CPU plan (:mod:`datamove.plans.views`) splits crops and pads into rectangles so
that no byte is touched twice; on a GPU one launch must do the whole call,
and a masked lane costs no memory traffic, so there the op is one *move*:
an index space of a few dims, each with an extent and a stride in ``src``
and in ``dst`` (in words), plus *conditions* that mask positions out:

* SpaceToBatch iterates over the output; a position whose padded coordinate
  ``d * B + b - pads_begin`` falls outside the input reads the dtype's zero
  (``fill``): the padding is written, never read;
* BatchToSpace iterates over the input; a position whose coordinate
  ``d * B + b - crops_begin`` falls outside the output is neither read nor
  written: the crop is skipped;
* SpaceToDepth and DepthToSpace are pure permutations (no condition).

Items of any width travel as unsigned words (1, 2, 4 or 8 bytes; wider items
as several words), and runs that are contiguous on both sides are widened to
the widest word that divides them. Dims that step alike on both sides (and in
every condition) are coalesced, so the kernel sees a small rank whatever the
op's rank. The kernel's tile is 3-D: ``c``, the dim that is innermost in
``dst``, by ``a``, the dim innermost in ``src`` (or the next in ``dst``), so
that loads and stores are both coalesced, by ``r``, the next dim in ``dst``;
the other dims are "outer", one index per program.

>>> m = move("space_to_depth", {"mode": "blocks_first", "block_size": 2},
...          (1, 1, 4), (4, 4, 1), (1, 2, 2), (4, 2, 1), 4)
>>> m.word, (m.ext_r, m.ext_a, m.ext_c), m.outer   # 4-byte words: one 2 x 2 tile (b by d)
(4, (1, 2, 2), ())
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

__all__ = ["Move", "move", "dims_of"]

_WORDS = (8, 4, 2, 1)
_SECTOR = 32  # bytes: the GPU's unit of memory traffic


class Dim(NamedTuple):
    extent: int
    src: int  # stride in src, in words
    dst: int  # stride in dst, in words
    coefs: Tuple[int, ...]  # its weight in each condition's coordinate


class Move(NamedTuple):
    """One launch's work (all strides and offsets in words of ``word`` bytes)."""

    word: int
    src0: int  # offset of index 0 in src (negative for SpaceToBatch's pads_begin)
    dst0: int  # offset of index 0 in dst (negative for BatchToSpace's crops_begin)
    ext_r: int
    src_r: int
    dst_r: int
    ext_a: int
    src_a: int
    dst_a: int
    ext_c: int
    src_c: int
    dst_c: int
    outer: Tuple[Tuple[int, int, int], ...]  # (extent, src, dst), innermost first
    # per condition: (offset, limit, coef_r, coef_a, coef_c, coefs of the outer dims innermost first);
    # a position is kept when 0 <= sum(coef * index) - offset < limit
    conditions: Tuple[Tuple[int, int, int, int, int, Tuple[int, ...]], ...]
    fill: bool  # masked positions: True = written as zeros (S2B), False = skipped (B2S)
    empty: bool  # nothing to do (a zero extent)


def dims_of(op: str, params: Dict[str, Any], in_shape: Sequence[int], in_strides: Sequence[int],
            out_shape: Sequence[int], out_strides: Sequence[int]) -> Tuple[List[Dim], List[Tuple[int, int]], int, int, bool]:
    """The op's index space before coalescing: ``(dims, conditions, src0, dst0, fill)``.

    Strides are in items; a condition is ``(offset, limit)`` and its weights are
    the dims' ``coefs``. Derived from the specs' reshape/transpose formulas.
    """
    xs, ys = list(in_strides), list(out_strides)
    if op in ("space_to_batch", "batch_to_space"):
        block = params["block_shape"]
        lo = params["pads_begin"] if op == "space_to_batch" else params["crops_begin"]
        hi = params["pads_end"] if op == "space_to_batch" else params["crops_end"]
        # "space" is the S2B input / B2S output, "batch" the other one
        space_shape, space_strides, batch_strides = (
            (in_shape, xs, ys) if op == "space_to_batch" else (out_shape, ys, xs))
        batch = space_shape[0]
        m = len(block) - 1
        ncond = [i for i in range(1, m + 1) if lo[i] or hi[i]]
        conds = [(lo[i], space_shape[i]) for i in ncond]
        spans = [(space_shape[i] + lo[i] + hi[i]) // block[i] for i in range(1, m + 1)] if op == "space_to_batch" else None
        dims = []
        # batch index = (b_1, ..., b_M, n), row-major
        inner = batch
        bsteps = []
        for i in range(m, 0, -1):
            bsteps.append(inner)
            inner *= block[i]
        bsteps.reverse()
        for i in range(1, m + 1):  # b_i
            coefs = tuple(1 if j == i else 0 for j in ncond)
            dims.append((block[i], space_strides[i], batch_strides[0] * bsteps[i - 1], coefs))
        dims.append((batch, space_strides[0], batch_strides[0], tuple(0 for _ in ncond)))  # n
        for i in range(1, m + 1):  # d_i
            coefs = tuple(block[i] if j == i else 0 for j in ncond)
            extent = spans[i - 1] if spans is not None else in_shape[i]
            dims.append((extent, block[i] * space_strides[i], batch_strides[i], coefs))
        offset = -sum(lo[i] * space_strides[i] for i in range(1, m + 1))
        if op == "space_to_batch":
            return [Dim(e, s, b, c) for e, s, b, c in dims], conds, offset, 0, True
        return [Dim(e, b, s, c) for e, s, b, c in dims], conds, 0, offset, False
    # the depth ops: "space" [N, C, D_i * B] and "depth" [N, C * B**K, D_i]
    size, mode = params["block_size"], params["mode"]
    space_shape, space_strides, depth_strides = (
        (in_shape, xs, ys) if op == "space_to_depth" else (out_shape, ys, xs))
    k = len(space_shape) - 2
    channels = space_shape[1]
    n = (space_shape[0], space_strides[0], depth_strides[0])
    c_step = depth_strides[1] * (size ** k if mode == "depth_first" else 1)
    c = (channels, space_strides[1], c_step)
    blocks_step = depth_strides[1] * (1 if mode == "depth_first" else channels)
    bs = [(size, space_strides[i + 2], blocks_step * size ** (k - 1 - i)) for i in range(k)]
    ds = [(space_shape[i + 2] // size, size * space_strides[i + 2], depth_strides[i + 2]) for i in range(k)]
    order = [n] + ([c] + bs if mode == "depth_first" else bs + [c]) + ds
    if op == "space_to_depth":
        return [Dim(e, s, d, ()) for e, s, d in order], [], 0, 0, False
    return [Dim(e, d, s, ()) for e, s, d in order], [], 0, 0, False


def _coalesce(dims: List[Dim]) -> List[Dim]:
    """Drop extent-1 dims, sort outermost-in-``dst`` first, and merge neighbours that step alike."""
    dims = sorted((d for d in dims if d.extent != 1), key=lambda d: (-d.dst, -d.src))
    merged: List[Dim] = []
    for d in dims:
        if merged:
            p = merged[-1]
            if (p.src == d.extent * d.src and p.dst == d.extent * d.dst
                    and all(pc == d.extent * dc for pc, dc in zip(p.coefs, d.coefs))):
                merged[-1] = Dim(p.extent * d.extent, d.src, d.dst, d.coefs)
                continue
        merged.append(d)
    return merged


def _word(itemsize: int, alignment: int) -> int:
    """The widest word (<= 8 bytes) that divides the item and every address."""
    for w in _WORDS:
        if itemsize % w == 0 and alignment % w == 0:
            return w
    return 1  # pragma: no cover - 1 divides everything


def move(op: str, params: Dict[str, Any], in_shape: Sequence[int], in_strides: Sequence[int],
         out_shape: Sequence[int], out_strides: Sequence[int], itemsize: int, alignment: int = 16) -> Move:
    """The op as one :class:`Move` on arrays of these shapes and strides (in items).

    ``alignment``: a power of two that divides both base addresses (bytes).
    """
    if 0 in tuple(in_shape) or 0 in tuple(out_shape):  # nothing to read (S2B's output, if any, is all zeros)
        return Move(1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, (), (), False, True)
    dims, conds, src0, dst0, fill = dims_of(op, params, in_shape, in_strides, out_shape, out_strides)
    word = _word(itemsize, alignment)
    per_item = itemsize // word
    dims = [Dim(d.extent, d.src * per_item, d.dst * per_item, d.coefs) for d in dims]
    if per_item > 1:  # an item is several words, contiguous on both sides
        dims.append(Dim(per_item, 1, 1, tuple(0 for _ in conds)))
    src0 *= per_item
    dst0 *= per_item
    dims = _coalesce(dims)
    # Widen the words along the run that is contiguous on both sides.
    both = [d for d in dims if d.src == 1 and d.dst == 1 and not any(d.coefs)]
    if both:
        run = both[0]
        for w in _WORDS:
            f = w // word
            if f <= 1 or alignment % w:
                continue
            others = [d for d in dims if d is not run]
            if run.extent % f == 0 and src0 % f == 0 and dst0 % f == 0 and all(d.src % f == 0 and d.dst % f == 0 for d in others):
                dims = [Dim(d.extent // f, 1, 1, d.coefs) if d is run else Dim(d.extent, d.src // f, d.dst // f, d.coefs) for d in dims]
                src0 //= f
                dst0 //= f
                word = w
                break
    if not dims:  # one element
        dims = [Dim(1, 1, 1, tuple(0 for _ in conds))]
    # The tile: c innermost in dst; a innermost in src, or next in dst when c is innermost in
    # both and long enough to fill 32-byte sectors by itself (a short one, such as the two words
    # of a 16-byte item, keeps a innermost in src so that the loads stay contiguous).
    c = min(range(len(dims)), key=lambda i: (dims[i].dst, dims[i].src))
    rest = [i for i in range(len(dims)) if i != c]
    a = None
    if rest:
        a = min(rest, key=lambda i: (dims[i].src, dims[i].dst))
        if dims[c].src <= dims[a].src and dims[c].extent * word >= _SECTOR:
            a = min(rest, key=lambda i: (dims[i].dst, dims[i].src))
    # r: the next dim in dst, so that a tile holds enough to be worth a program
    rest = [i for i in rest if i != a]
    r = min(rest, key=lambda i: (dims[i].dst, dims[i].src)) if rest else None
    unit = Dim(1, 0, 0, tuple(0 for _ in conds))
    dc, da, dr = dims[c], dims[a] if a is not None else unit, dims[r] if r is not None else unit
    outer_idx = [i for i in rest if i != r][::-1]  # innermost first
    outer = tuple((dims[i].extent, dims[i].src, dims[i].dst) for i in outer_idx)
    conditions = tuple(
        (off, lim, dr.coefs[j], da.coefs[j], dc.coefs[j], tuple(dims[i].coefs[j] for i in outer_idx))
        for j, (off, lim) in enumerate(conds)
    )
    return Move(word, src0, dst0, dr.extent, dr.src, dr.dst, da.extent, da.src, da.dst,
                dc.extent, dc.src, dc.dst, outer, conditions, fill, False)
