"""Direct transcriptions of the specs' reshape/transpose/reshape formulas.

Deliberately naive and independent of datamove's plans: the oracle the
property tests compare against. No validation: callers pass valid input.
"""

from __future__ import annotations

import math

import numpy as np


def batch_to_space(data, block_shape, crops_begin, crops_end):
    """BatchToSpace-2, steps 1-4 of the spec."""
    n = data.ndim
    batch, dims = data.shape[0], data.shape[1:]
    blocks = list(block_shape[1:])
    new_batch = batch // math.prod(blocks)
    # 1. reshape to [B_1, ..., B_{N-1}, batch / prod(B), D_1, ..., D_{N-1}]
    x = data.reshape(blocks + [new_batch] + list(dims))
    # 2. transpose [N, N + 1, 0, N + 2, 1, ..., N + N - 1, N - 1]  (here N-1 = len(blocks))
    m = len(blocks)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    x = x.transpose(perm)
    # 3. reshape to [batch / prod(B), D_1 * B_1, ...]
    x = x.reshape([new_batch] + [d * b for d, b in zip(dims, blocks)])
    # 4. crop
    index = tuple(slice(crops_begin[i], x.shape[i] - crops_end[i]) for i in range(n))
    return x[index]


def space_to_batch(data, block_shape, pads_begin, pads_end):
    """SpaceToBatch-2: zero-pad, then the inverse steps of BatchToSpace (TF's SpaceToBatchND order)."""
    n = data.ndim
    padded = np.zeros([data.shape[i] + pads_begin[i] + pads_end[i] for i in range(n)], data.dtype)
    padded[tuple(slice(pads_begin[i], pads_begin[i] + data.shape[i]) for i in range(n))] = data
    batch = padded.shape[0]
    blocks = list(block_shape[1:])
    m = len(blocks)
    # reshape to [batch, P_1 / B_1, B_1, ..., P_M / B_M, B_M]
    shape = [batch]
    for p, b in zip(padded.shape[1:], blocks):
        shape += [p // b, b]
    x = padded.reshape(shape)
    # permute to [B_1, ..., B_M, batch, P_1 / B_1, ..., P_M / B_M]
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    x = x.transpose(perm)
    return x.reshape([batch * math.prod(blocks)] + [p // b for p, b in zip(padded.shape[1:], blocks)])


def space_to_depth(data, mode, block_size):
    """SpaceToDepth-1, the spec's three steps for both modes."""
    n, c, *dims = data.shape
    k = len(dims)
    shape = [n, c]
    for d in dims:
        shape += [d // block_size, block_size]
    x = data.reshape(shape)
    if mode == "blocks_first":
        perm = [0] + [3 + 2 * i for i in range(k)] + [1] + [2 + 2 * i for i in range(k)]
    else:
        perm = [0, 1] + [3 + 2 * i for i in range(k)] + [2 + 2 * i for i in range(k)]
    x = x.transpose(perm)
    return x.reshape([n, c * block_size**k] + [d // block_size for d in dims])


def depth_to_space(data, mode, block_size):
    """DepthToSpace-1 (OpenVINO spec DepthToSpace_1.md)."""
    n, c, *dims = data.shape
    k = len(dims)
    new_c = c // block_size**k
    if mode == "blocks_first":
        x = data.reshape([n] + [block_size] * k + [new_c] + dims)
        perm = [0, k + 1]
        for i in range(k):
            perm += [k + 2 + i, 1 + i]
    else:
        x = data.reshape([n, new_c] + [block_size] * k + dims)
        perm = [0, 1]
        for i in range(k):
            perm += [k + 2 + i, 2 + i]
    x = x.transpose(perm)
    return x.reshape([n, new_c] + [d * block_size for d in dims])
