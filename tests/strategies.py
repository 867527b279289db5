"""Hypothesis strategies for valid cases of the four operations."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

MODES = ("blocks_first", "depth_first")


@st.composite
def space_batch_case(draw, max_rank=7, max_block=3, max_size=4096):
    """``(data_shape, block_shape, pads_begin, pads_end)`` valid for space_to_batch.

    The same tuple, applied to the space_to_batch output with crops = pads, is
    valid for batch_to_space.
    """
    rank = draw(st.integers(2, max_rank))
    block = [1]
    begin = [0]
    end = [0]
    shape = [draw(st.integers(0, 3))]
    for _ in range(rank - 1):
        b = draw(st.integers(1, max_block))
        padded = b * draw(st.integers(0, 3))
        d = draw(st.integers(0, padded))
        pb = draw(st.integers(0, padded - d))
        block.append(b)
        shape.append(d)
        begin.append(pb)
        end.append(padded - d - pb)
    total = int(np.prod(shape)) * int(np.prod(block))
    if total > max_size:
        shape[0] = 0 if total else shape[0]
    return tuple(shape), block, begin, end


@st.composite
def depth_case(draw, max_rank=7, max_block=3, max_size=4096):
    """``(data_shape, mode, block_size)`` valid for space_to_depth (its output for depth_to_space)."""
    rank = draw(st.integers(3, max_rank))
    size = draw(st.integers(1, max_block))
    spatial = rank - 2
    shape = [draw(st.integers(0, 2)), draw(st.integers(0, 3))]
    shape += [size * draw(st.integers(0, 2 if spatial > 3 else 3)) for _ in range(spatial)]
    if int(np.prod(shape)) > max_size:
        shape[0] = 0
    return tuple(shape), draw(st.sampled_from(MODES)), size
