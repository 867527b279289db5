"""The GPU engine's one Triton kernel: a :class:`~datamove.plans.moves.Move`, one tile per program.

Imported only by :mod:`datamove.engines.triton_engine`, when a CUDA tensor
(or ``engine="triton"``) arrives: importing Triton costs about a second.

Each program copies one ``[BR, BA, BC]`` tile of the move's ``(r, a, c)``
dims at one index of its outer dims. ``c`` is innermost in ``dst`` and ``a``
in ``src``, so the load is coalesced along ``a`` and the store along ``c``
(``r``, the next dim in ``dst``, makes the tile big enough to be worth a program);
Triton's layout pass moves the tile between the two orders through shared
memory. The outer index is decoded once per program from ``table``
(``extent, src stride, dst stride`` per outer dim, innermost first, then each
condition's ``offset, limit``, weights of ``r``, ``a``, ``c`` and of the outer dims), so the kernel is compiled
once per (outer rank, conditions, tile, word), not per shape.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["move_kernel"]


@triton.jit
def _keep(tr, ta, tc, jr, ja, jc, outer, table, ext_r, ext_a, ext_c,
          OUTER: tl.constexpr, NCOND: tl.constexpr, BR: tl.constexpr, BA: tl.constexpr, BC: tl.constexpr):
    """The ``[BR, BA, BC]`` tile's (in range, kept by every condition) masks; ``ja``/``jc`` broadcast as given."""
    mask = ((tr * BR + jr) < ext_r) & ((ta * BA + ja) < ext_a) & ((tc * BC + jc) < ext_c)
    keep = mask
    for j in tl.static_range(NCOND):
        row = table + 3 * OUTER + j * (5 + OUTER)
        wr = tl.load(row + 2)
        wa = tl.load(row + 3)
        wc = tl.load(row + 4)
        base = -tl.load(row) + (tr * BR) * wr + (ta * BA) * wa + (tc * BC) * wc
        limit = tl.load(row + 1)
        r = outer
        for i in tl.static_range(OUTER):
            e = tl.load(table + 3 * i).to(tl.int32)
            k = r % e
            r = r // e
            base += k.to(tl.int64) * tl.load(row + 5 + i)
        coord = base + jr * wr + ja * wa + jc * wc
        keep = keep & (coord >= 0) & (coord < limit)
    return mask, keep


@triton.jit
def _join_masks(a, b):
    # joined as integers: masks of int1 do not join everywhere (Triton's interpreter)
    return tl.join(a.to(tl.int8), b.to(tl.int8)) != 0


@triton.jit
def move_kernel(
    src, dst, table,
    ext_r, src_r, dst_r, ext_a, src_a, dst_a, ext_c, src_c, dst_c,
    tiles_r, tiles_a, tiles_c, src0, dst0,
    OUTER: tl.constexpr, NCOND: tl.constexpr, FILL: tl.constexpr, WIDE: tl.constexpr,
    BR: tl.constexpr, BA: tl.constexpr, BC: tl.constexpr,
    SRC_ROWS: tl.constexpr, DST_ROWS: tl.constexpr, SAME: tl.constexpr, SPLIT: tl.constexpr, JOIN: tl.constexpr,
    PACKED: tl.constexpr, PAIR: tl.constexpr, BITS: tl.constexpr,
):
    # 32-bit index arithmetic (a 64-bit division costs ~100 instructions, on every thread)
    pid = tl.program_id(0)
    tc = pid % tiles_c
    rest = pid // tiles_c
    ta = rest % tiles_a
    rest = rest // tiles_a
    tr = rest % tiles_r
    outer = rest // tiles_r
    # The tile's corner, in 64-bit scalars; offsets inside the tile stay 32-bit unless WIDE.
    so = src0 + (tr * BR).to(tl.int64) * src_r + (ta * BA).to(tl.int64) * src_a + (tc * BC).to(tl.int64) * src_c
    do = dst0 + (tr * BR).to(tl.int64) * dst_r + (ta * BA).to(tl.int64) * dst_a + (tc * BC).to(tl.int64) * dst_c
    r = outer
    for i in tl.static_range(OUTER):
        e = tl.load(table + 3 * i).to(tl.int32)
        k = r % e
        r = r // e
        so += k.to(tl.int64) * tl.load(table + 3 * i + 1)
        do += k.to(tl.int64) * tl.load(table + 3 * i + 2)
    jr = tl.arange(0, BR)
    ja = tl.arange(0, BA)
    jc = tl.arange(0, BC)
    if WIDE:
        jr = jr.to(tl.int64)
        ja = ja.to(tl.int64)
        jc = jc.to(tl.int64)
    src_t = src + so
    dst_t = dst + do
    if SPLIT and PACKED:
        # a has 2 narrow items (1 or 2 bytes) next to each other in src: load each pair as one
        # word of twice the width (PAIR), split it with shifts, store two rows of items
        m0, k0 = _keep(tr, ta, tc, jr[:, None], tl.full([1, 1], 0, tl.int32), jc[None, :], outer, table, ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        m1, k1 = _keep(tr, ta, tc, jr[:, None], tl.full([1, 1], 1, tl.int32), jc[None, :], outer, table, ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        pairs = src_t.to(tl.pointer_type(PAIR), bitcast=True)
        words = tl.load(pairs + (jr * (src_r // 2))[:, None] + jc[None, :], mask=k0 | k1, other=0)
        item = dst.dtype.element_ty
        v0 = (words & ((1 << BITS) - 1)).to(item, bitcast=False)
        v1 = (words >> BITS).to(item, bitcast=False)
        if FILL:
            v0 = tl.where(k0, v0, 0)
            v1 = tl.where(k1, v1, 0)
        dst_off = (jr * dst_r)[:, None] + (jc * dst_c)[None, :]
        tl.store(dst_t + dst_off, v0, mask=m0 if FILL else k0)
        tl.store(dst_t + dst_a + dst_off, v1, mask=m1 if FILL else k1)
    elif JOIN and PACKED:
        # c has 2 narrow items next to each other in dst (no condition splits a pair):
        # load two rows, pack each pair into one word of twice the width, store the words
        m0, k0 = _keep(tr, ta, tc, jr[:, None], ja[None, :], tl.full([1, 1], 0, tl.int32), outer, table, ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        src_off = (jr * src_r)[:, None] + (ja * src_a)[None, :]
        v0 = tl.load(src_t + src_off, mask=k0, other=0).to(PAIR, bitcast=False)
        v1 = tl.load(src_t + src_c + src_off, mask=k0, other=0).to(PAIR, bitcast=False)
        words = (v0 & ((1 << BITS) - 1)) | (v1 << BITS)
        pairs = dst_t.to(tl.pointer_type(PAIR), bitcast=True)
        tl.store(pairs + (jr * (dst_r // 2))[:, None] + ja[None, :], words, mask=k0)
    elif SPLIT:
        # a has 2 items, interleaved with c in src: load the run, split even/odd in registers,
        # store two rows (no shared memory)
        flat = (jr * src_r)[:, None] + tl.arange(0, BC * 2)[None, :]
        m0, k0 = _keep(tr, ta, tc, jr[:, None], tl.full([1, 1], 0, tl.int32), jc[None, :], outer, table, ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        m1, k1 = _keep(tr, ta, tc, jr[:, None], tl.full([1, 1], 1, tl.int32), jc[None, :], outer, table, ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        load_mask = tl.reshape(_join_masks(k0, k1), [BR, BC * 2])
        v0, v1 = tl.split(tl.reshape(tl.load(src_t + flat, mask=load_mask, other=0), [BR, BC, 2]))
        dst_off = (jr * dst_r)[:, None] + (jc * dst_c)[None, :]
        tl.store(dst_t + dst_off, v0, mask=m0 if FILL else k0)
        tl.store(dst_t + dst_a + dst_off, v1, mask=m1 if FILL else k1)
    elif JOIN:
        # c has 2 items, interleaved with a in dst: load two rows, join them in registers,
        # store the run
        m0, k0 = _keep(tr, ta, tc, jr[:, None], ja[None, :], tl.full([1, 1], 0, tl.int32), outer, table, ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        m1, k1 = _keep(tr, ta, tc, jr[:, None], ja[None, :], tl.full([1, 1], 1, tl.int32), outer, table, ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        src_off = (jr * src_r)[:, None] + (ja * src_a)[None, :]
        v0 = tl.load(src_t + src_off, mask=k0, other=0)
        v1 = tl.load(src_t + src_c + src_off, mask=k1, other=0)
        flat = (jr * dst_r)[:, None] + tl.arange(0, BA * 2)[None, :]
        store_mask = _join_masks(m0, m1) if FILL else _join_masks(k0, k1)
        tl.store(dst_t + flat, tl.reshape(tl.join(v0, v1), [BR, BA * 2]), mask=tl.reshape(store_mask, [BR, BA * 2]))
    else:
        # The store side: [BR, BA, BC], c fastest.
        mask, keep = _keep(tr, ta, tc, jr[:, None, None], ja[None, :, None], jc[None, None, :], outer, table,
                           ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
        if SAME:
            # c is innermost on both sides: load in the store's order
            src_off = (jr * src_r)[:, None, None] + (ja * src_a)[None, :, None] + (jc * src_c)[None, None, :]
            values = tl.load(src_t + src_off, mask=keep, other=0)
        else:
            # The load side: [BR, BC, BA], a fastest, then transposed to the store's order.
            mask_l, keep_l = _keep(tr, ta, tc, jr[:, None, None], ja[None, None, :], jc[None, :, None], outer, table,
                                   ext_r, ext_a, ext_c, OUTER, NCOND, BR, BA, BC)
            if SRC_ROWS:
                # (c, a) is one contiguous run of BC * BA items in src: a flat, vectorised load
                flat = (jr * src_r)[:, None] + tl.arange(0, BC * BA)[None, :]
                values = tl.load(src_t + flat, mask=tl.reshape(keep_l, [BR, BC * BA]), other=0)
                values = tl.reshape(values, [BR, BC, BA])
            else:
                src_off = (jr * src_r)[:, None, None] + (jc * src_c)[None, :, None] + (ja * src_a)[None, None, :]
                values = tl.load(src_t + src_off, mask=keep_l, other=0)
            values = tl.permute(values, (0, 2, 1))
        store_mask = mask if FILL else keep
        if DST_ROWS:
            # (a, c) is one contiguous run of BA * BC items in dst: a flat, vectorised store
            flat = (jr * dst_r)[:, None] + tl.arange(0, BA * BC)[None, :]
            tl.store(dst_t + flat, tl.reshape(values, [BR, BA * BC]), mask=tl.reshape(store_mask, [BR, BA * BC]))
        else:
            dst_off = (jr * dst_r)[:, None, None] + (ja * dst_a)[None, :, None] + (jc * dst_c)[None, None, :]
            tl.store(dst_t + dst_off, values, mask=store_mask)
