"""SpaceToBatch and BatchToSpace of many small images, as whole units from tables: the tests' twin of the
core's ``src/native/planner/units.cpp``, which tests/test_planner_units.py holds to it bit for bit.

SpaceToBatch's windows write each row of an image as a few words, and its pads
are fill steps of their own; channels-last BatchToSpace's windows copy a pixel
at a time: for images of a few pixels each tile's set-up costs more than its
words (2-4x the copy floor). Here the output is a run of *units*, an image (or
one channel plane of it) after another (for SpaceToBatch, a run per block
offset), and a table says where each word of a unit comes from in the input,
or that it is a pad (a zero). The native core then copies the units a line at
a time from the tables (``UNITS`` steps, ``src/native/runtime/program.cpp``); the
tables come from the spec's formulas, once for a layout.

>>> import numpy as np
>>> from datamove.plans import views as plans
>>> data = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
>>> plan = plans.space_to_batch(data.shape, (8, 3, 2, 2), (1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))
>>> out = np.empty(plan.out_shape, np.float32)
>>> steps = lower_units(plan, data, out, (0, 0))
>>> step, = steps
>>> step[8:17].tolist()  # 2 images of 12 words, 12 apart on both sides; 4 block offsets, 24 words apart in out
[2, 12, 12, 4, 0, 24, 12, 0, 1]
>>> step[17:21].tolist()  # block offset (0, 0), channel 0: three pads, then the input's word 3 (row 1, column 1)
[-2147483648, -2147483648, -2147483648, 3]
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

import numpy as np

from datamove.engines.native import core_format  # the core's own limits on a UNITS step, never copied here
from datamove.plans.views import Plan

__all__ = ["lower_units", "SMALL_UNIT_WORDS", "ROW_BYTES"]

#: Units up to this many words are tried first, an image before a plane; larger ones only where neither
#: fits. NCHW SpaceToBatch of 30 x 30 images with 32 channels (8192-word images): 1.12-1.17x the copy
#: floor by planes, 1.23-1.27x by images. Channels-last images have no planes: 2 x 2 blocks on 30 x 30
#: images with 32 channels went 1.99-2.00x (windows) -> 1.00-1.08x (same process, in turns).
SMALL_UNIT_WORDS = core_format.SMALL_UNIT_WORDS  # (the core's, as the two below: src/native/plan.hpp)
#: Bytes the lowering's arrays take per table word (its offsets, the table, the program: int64 each): a
#: step's tables stay within what the output itself takes and 1 MiB (one 512 x 502 image in 8 x 8
#: blocks, a 1 MiB output, took 6 MiB of tables).
TABLE_COST = core_format.TABLE_COST
#: Output rows from this many bytes keep the windows: their tiles copy long runs at the copy's speed
#: (NCHW 62 x 126 images with a 2 x 2 block, 64 MiB, rows of 256 bytes: 0.80-0.83x the copy floor by the
#: windows, 1.30-1.43x by units). Channels-last pixels of 64 to 4096 bytes took units at 0.74-1.39x,
#: the windows at 0.75-3.18x (2 x 2 to 14 x 14 images, 4-48 MiB, same process, in turns).
ROW_BYTES = core_format.ROW_BYTES


def lower_units(plan: Plan, data: np.ndarray[Any, Any], out: np.ndarray[Any, Any],
                starts: Sequence[int]) -> Optional[List[np.ndarray[Any, Any]]]:
    """The steps of ``plan`` on ``data`` into ``out`` as units from tables, or None where it takes none.

    ``starts``: where element 0 of ``data`` and of ``out`` lie from their lowest addresses, in items.
    Taken for SpaceToBatch with pads and for channels-last BatchToSpace with
    crops (NCHW's windows the core merges itself: ``merge_units``), where the
    items are 4 or 8 bytes, the output's rows (its axis of the smallest
    stride, where that is blocked, padded or cropped; channels-last pixels
    take units whatever their size) are under :data:`ROW_BYTES`, and a unit
    fits :data:`SMALL_UNIT_WORDS` words, else the core's :data:`~datamove.engines.native.core_format.UNIT_WORDS`: an output
    image (every axis but the batch), or else a plane of it (the axes after
    the second, which then has no block, pads or crops, as NCHW's channels),
    laid out densely in ``out`` with the next batch's unit right after it,
    the parts' tables together at most its :data:`~datamove.engines.native.core_format.UNIT_ENTRIES` words (and, at
    :data:`TABLE_COST` bytes a word, within the output's bytes and 1 MiB).
    One step: ``[UNITS, item, 0, 0, 0, src,
    dst, 3, count, src_step, unit, parts, 0, part_step, unit, 0, 1]``, a part
    per block offset for SpaceToBatch (one for BatchToSpace, whose units
    read every block offset's input image), followed by each part's ``unit``
    entries: an input offset (items from the unit's first input item) or
    :data:`~datamove.engines.native.core_format.ZERO_WORD`.
    """
    source = plan.source
    if not source:
        return None
    op, block, begin, end = source  # (pads or crops)
    if op == "space_to_batch" and not (plan.fills or plan.window_fills):
        return None
    item, groups = data.dtype.itemsize, math.prod(block)
    if (item not in core_format.UNIT_ITEMS or data.ndim < 3 or any(s % item for s in data.strides + out.strides)
            or groups > core_format.MAX_PARTS):
        return None
    # The output's innermost axis: the windows' rows where it is blocked or padded (long rows keep them),
    # else pixels (channels-last), which the windows take one at a time: units however long.
    rows = min((a for a in range(out.ndim) if out.shape[a] > 1), key=lambda a: abs(out.strides[a]), default=None)
    spatial = rows is not None and (block[rows] > 1 or begin[rows] or end[rows])
    if rows is None or spatial and out.shape[rows] * item >= ROW_BYTES:
        return None
    if op == "batch_to_space" and (spatial or not any(begin) and not any(end)):
        return None
    src_strides = [s // item for s in data.strides]
    dst_strides = [s // item for s in out.strides]
    images = out.shape[0] if op == "batch_to_space" else data.shape[0]  # the space tensor's batch: the units' loop
    # the unit's first axis: the image, else a plane of it; small units first
    for least, most, first in ((1, SMALL_UNIT_WORDS, 1), (1, SMALL_UNIT_WORDS, 2),
                               (SMALL_UNIT_WORDS + 1, core_format.UNIT_WORDS, 1), (SMALL_UNIT_WORDS + 1, core_format.UNIT_WORDS, 2)):
        if first == 2 and (block[1] != 1 or begin[1] or end[1] or data.ndim < 4):
            continue
        unit = math.prod(out.shape[first:])
        if not least <= unit <= most:
            continue
        if first == 1:
            count, src_step, dst_step = images, src_strides[0], dst_strides[0]
        else:  # the batch and the second axis as one loop
            channels = data.shape[1]
            if src_strides[0] != channels * src_strides[1] or dst_strides[0] != channels * dst_strides[1]:
                continue
            count, src_step, dst_step = images * channels, src_strides[1], dst_strides[1]
        # the unit's words in out: every offset from its lowest once, the next unit right after it
        offsets = _offsets(out.shape[first:], dst_strides[first:])
        low = int(offsets.min())
        if dst_step != unit or not np.array_equal(np.sort(offsets.ravel() - low), np.arange(unit)):
            continue
        if op == "space_to_batch":
            parts, part_step = groups, images * dst_strides[0]
            if parts * unit > core_format.UNIT_ENTRIES or TABLE_COST * parts * unit > out.nbytes + core_format.TABLE_SLACK:
                continue
            tables = _space_to_batch_tables(data.shape, src_strides, out.shape, block, begin, first, core_format.ZERO_WORD)
        else:
            tables = _batch_to_space_tables(src_strides, out.shape, block, begin, first)
            parts, part_step = 1, 0
        reach = -(-(core_format.LINE // item) // unit) * abs(src_step)  # (the core's table reads on into the next units)
        if int(np.abs(tables[tables != core_format.ZERO_WORD]).max(initial=0)) + reach >= core_format.TABLE_REACH:
            return None
        head = [core_format.PATTERNS["units"], item, 0, 0, 0, starts[0], starts[1] + low, 3, count, src_step, unit, parts, 0, part_step,
                unit, 0, 1]
        step = np.empty(len(head) + parts * unit, np.int64)  # the head, then the tables in place (no copy)
        step[:len(head)] = head
        step[len(head):].reshape(parts, unit)[:, offsets.ravel() - low] = tables.reshape(parts, unit)
        return [step]
    return None


def _offsets(shape: Sequence[int], strides: Sequence[int]) -> np.ndarray[Any, Any]:
    """Each index's offset ``sum(i_k * strides[k])``, as an array of ``shape``."""
    offsets = np.zeros(tuple(shape), np.int64)
    for axis, (n, s) in enumerate(zip(shape, strides)):
        offsets += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - axis - 1))
    return offsets


def _space_to_batch_tables(in_shape: Sequence[int], src_strides: Sequence[int], out_shape: Sequence[int],
                           block: Sequence[int], pads_begin: Sequence[int], first: int, zero: int) -> np.ndarray[Any, Any]:
    """Per block offset, each output word of one unit (by its index, not yet its place in memory): the input
    offset it copies (from the unit's first input item), or ``zero``. The spec's ``out[(b, n), q] =
    data[n, q * B + b - PB]``, the batch index ``b`` counting the block offsets row-major."""
    axes = range(first, len(in_shape))
    groups = np.indices(tuple(block[1:])).reshape(len(block) - 1, -1)  # each block offset's b, per axis
    table = np.zeros((groups.shape[1],) + tuple(out_shape[first:]), np.int64)
    inside = np.ones(table.shape, np.bool_)
    for k, axis in enumerate(axes):
        shape = (-1,) + (1,) * k + (out_shape[axis],) + (1,) * (len(in_shape) - axis - 1)
        x = (np.arange(out_shape[axis]) * block[axis])[None, :] + groups[axis - 1][:, None] - pads_begin[axis]
        x = x.reshape(shape)
        table += x * src_strides[axis]
        inside &= (x >= 0) & (x < in_shape[axis])
    return np.where(inside, table, zero)


def _batch_to_space_tables(src_strides: Sequence[int], out_shape: Sequence[int], block: Sequence[int],
                           crops_begin: Sequence[int], first: int) -> np.ndarray[Any, Any]:
    """Each output word of one unit (by its index): the input offset it copies, from the unit's first input
    item (block offset 0's image). The spec's ``out[n, p - CB] = data[(b, n), q]`` for ``p = q * B + b``,
    the batch index ``b`` counting the block offsets row-major, ``out_shape[0]`` images apart."""
    rank = len(out_shape)
    table = np.zeros((1,) + tuple(out_shape[first:]), np.int64)
    group = np.zeros(table.shape, np.int64)  # the block offset's row-major index
    for axis in range(first, rank):
        shape = (1,) * (axis - first + 1) + (out_shape[axis],) + (1,) * (rank - axis - 1)
        q, b = np.divmod(np.arange(out_shape[axis]) + crops_begin[axis], block[axis])
        table += (q * src_strides[axis]).reshape(shape)
        group = group * block[axis] + b.reshape(shape)
    return table + group * out_shape[0] * src_strides[0]
