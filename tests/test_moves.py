"""The GPU engine's description of each op (datamove.plans.moves), checked without a GPU.

A NumPy interpreter of a Move (every index of its space at once) must give
the NumPy engine's result bit for bit, for every op, dtype width, layout,
crop and pad: the Triton kernel only executes this description.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import datamove as dm
from datamove.rules import shapes
from datamove.plans.moves import move

WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def run_move(m, src, dst):
    """Execute Move ``m`` on flat word arrays, all indices at once (masks as the kernel has them)."""
    if m.empty:
        if dst.size:
            dst[...] = 0
        return
    extents = [e for e, _, _ in m.outer][::-1] + [m.ext_r, m.ext_a, m.ext_c]
    index = np.indices(extents).reshape(len(extents), -1)
    outer = index[: len(m.outer)][::-1]  # innermost first, as in the Move
    ir, ia, ic = index[-3], index[-2], index[-1]
    so = m.src0 + ir * m.src_r + ia * m.src_a + ic * m.src_c
    do = m.dst0 + ir * m.dst_r + ia * m.dst_a + ic * m.dst_c
    for k, (_, s, d) in enumerate(m.outer):
        so = so + outer[k] * s
        do = do + outer[k] * d
    keep = np.ones(so.shape, bool)
    for off, lim, cr, ca, cc, coefs in m.conditions:
        coord = ir * cr + ia * ca + ic * cc - off
        for k, c in enumerate(coefs):
            coord = coord + outer[k] * c
        keep &= (coord >= 0) & (coord < lim)
    if m.fill:
        values = np.zeros(so.shape, src.dtype)
        values[keep] = src[so[keep]]
        dst[do] = values
    else:
        dst[do[keep]] = src[so[keep]]


@st.composite
def calls(draw):
    """A random valid call ``(op, shape, args)``: ranks 2-6, zero-size dims, crops and pads of every size."""
    op = draw(st.sampled_from(["space_to_batch", "batch_to_space", "space_to_depth", "depth_to_space"]))
    rank = draw(st.integers(2 if "batch" in op else 3, 6))
    if op == "space_to_batch":
        shape = [draw(st.integers(1, 2))] + [draw(st.integers(0, 4)) for _ in range(rank - 1)]
        block = [1] + [draw(st.integers(1, 3)) for _ in range(rank - 1)]
        begin = [0] + [draw(st.integers(0, 2)) for _ in range(rank - 1)]
        end = [0] + [(-(shape[i] + begin[i])) % block[i] + block[i] * draw(st.integers(0, 1)) for i in range(1, rank)]
        args = (block, begin, end)
    elif op == "batch_to_space":
        block = [1] + [draw(st.integers(1, 3)) for _ in range(rank - 1)]
        shape = [int(np.prod(block)) * draw(st.integers(1, 2))] + [draw(st.integers(0, 4)) for _ in range(rank - 1)]
        begin, end = [0], [0]
        for i in range(1, rank):
            total = shape[i] * block[i]
            begin.append(draw(st.integers(0, total)))
            end.append(draw(st.integers(0, total - begin[-1])))
        args = (block, begin, end)
    else:
        size = draw(st.integers(1, 3))
        mode = draw(st.sampled_from(["blocks_first", "depth_first"]))
        if op == "space_to_depth":
            shape = [draw(st.integers(0, 2)), draw(st.integers(1, 3))] + [size * draw(st.integers(0, 3)) for _ in range(rank - 2)]
        else:
            shape = [draw(st.integers(0, 2)), draw(st.integers(1, 2)) * size ** (rank - 2)] + [draw(st.integers(0, 3)) for _ in range(rank - 2)]
        args = (mode, size)
    return op, shape, args


@settings(max_examples=400, deadline=None)
@given(calls(), st.sampled_from([np.uint8, np.float16, np.float32, np.int64, np.complex128, "V3"]), st.sampled_from(["c", "sliced", "offset"]))
def test_a_move_computes_the_op(call, dtype, layout):
    op, shape, args = call
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    raw = np.random.default_rng(count).integers(0, 256, 2 * count * dtype.itemsize + 64, dtype=np.uint8)
    data = raw[: count * dtype.itemsize].view(dtype).reshape(shape)
    if layout != "c" and shape[-1]:  # every other item, or starting one item in
        wide = raw[: 2 * count * dtype.itemsize].view(dtype).reshape(shape[:-1] + [2 * shape[-1]])
        data = wide[..., ::2] if layout == "sliced" else wide[..., shape[-1]:]
    expected = getattr(dm, op)(data, *args)
    params = getattr(shapes, f"resolve_{op}")(tuple(shape), *args).params
    out = np.full(expected.shape, 7, np.uint8).view(dtype) if dtype.itemsize == 1 else np.empty(expected.shape, dtype)
    out.reshape(-1).view(np.uint8)[...] = 7
    item = dtype.itemsize
    alignment = 16 if data.ctypes.data % 16 == 0 else data.ctypes.data & -data.ctypes.data
    m = move(op, params, data.shape, [s // item for s in data.strides], out.shape, [s // item for s in out.strides], item, min(16, alignment))
    span = (sum((n - 1) * s for n, s in zip(data.shape, data.strides)) + item) if data.size else 0
    start = data.ctypes.data - raw.ctypes.data
    src = raw[start: start + span].view(WORDS[m.word]) if span else raw[:0].view(WORDS[m.word])
    run_move(m, src, out.reshape(-1).view(np.uint8).view(WORDS[m.word]))
    assert out.tobytes() == expected.tobytes(), m


def test_moves_are_small_whatever_the_rank():
    # a 6-D SpaceToDepth: its dims coalesce to a tile and at most a few outer dims
    m = move("space_to_depth", {"mode": "blocks_first", "block_size": 2}, (2, 3, 4, 4, 4, 4), (768, 256, 64, 16, 4, 1),
             (2, 48, 2, 2, 2, 2), (768, 16, 8, 4, 2, 1), 4)
    assert m.word == 4 and (m.ext_a, m.ext_c) == (2, 2) and len(m.outer) <= 7 and not m.conditions
    # pads become conditions; no pads, none
    padded = move("space_to_batch", {"block_shape": (1, 2), "pads_begin": (0, 1), "pads_end": (0, 1)}, (1, 4), (4, 1), (2, 3), (3, 1), 8)
    assert padded.fill and len(padded.conditions) == 1 and padded.src0 == -1
    plain = move("space_to_batch", {"block_shape": (1, 2), "pads_begin": (0, 0), "pads_end": (0, 0)}, (1, 4), (4, 1), (2, 2), (2, 1), 8)
    assert not plain.conditions and plain.src0 == 0
