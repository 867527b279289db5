"""Data larger than memory: Dask arrays stay lazy and chunk-parallel; ``out=`` streams to a memmap on disk.

Each case's full array is more than ten times its memory budget; the peak of
what NumPy allocates during the run (``tracemalloc`` sees NumPy's buffers) is
checked against the budget, and the result against NumPy's, piece by piece.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import datamove as dm

MB = 1 << 20


def index_block(shape):
    """A ``map_blocks`` function filling each block with its elements' C-order flat indices in ``shape``."""
    def fill(block, block_info=None):
        location = block_info[None]["array-location"]
        axes = np.ix_(*[np.arange(lo, hi, dtype=np.int32) for lo, hi in location])
        flat = axes[0]
        for size, axis in zip(shape[1:], axes[1:]):
            flat = flat * np.int32(size) + axis  # shapes here stay below 2**31 elements
        return flat
    return fill


def index_slice(shape, n):
    """NumPy: batch ``n`` of the index array, as a ``[1, ...]`` array."""
    per_batch = int(np.prod(shape[1:]))
    return np.arange(n * per_batch, (n + 1) * per_batch, dtype=np.int32).reshape((1,) + tuple(shape[1:]))


def lazy_index_array(shape, chunks):
    da = pytest.importorskip("dask.array")
    return da.empty(shape, chunks=chunks, dtype=np.int32).map_blocks(index_block(shape), dtype=np.int32)


def peak_bytes(run):
    tracemalloc.start()
    try:
        result = run()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def largest_chunk_bytes(array):
    return int(np.prod([max(c) if c else 0 for c in array.chunks])) * array.dtype.itemsize


def test_dask_space_to_depth_of_400_mib_in_a_40_mib_budget():
    shape = (8, 16, 1024, 800)  # int32: 400 MiB, never materialised
    budget = 40 * MB  # measured about 27 MB: eight 3.3 MB chunks and their temporaries on two threads
    x = lazy_index_array(shape, chunks=(1, 4, 256, 800))  # 3.3 MB chunks
    assert x.nbytes >= 10 * budget
    y = dm.space_to_depth(x, "blocks_first", 2)
    assert type(y) is type(x) and y.shape == (8, 64, 512, 400)
    assert largest_chunk_bytes(y) <= 4 * MB  # chunk-parallel, no chunk grows

    # One reduction over the whole result, computed chunk by chunk by dask.
    sums, peak = peak_bytes(lambda: y.sum(axis=(0, 2, 3), dtype=np.int64).compute())
    assert peak < budget, f"peak {peak / MB:.1f} MB"

    # The same reduction of NumPy's result, one batch at a time.
    expected = np.zeros(64, np.int64)
    for n in range(shape[0]):
        piece = dm.space_to_depth(index_slice(shape, n), "blocks_first", 2)
        expected += piece.sum(axis=(0, 2, 3), dtype=np.int64)
        if n in (0, shape[0] - 1):  # and two batches element by element
            assert np.array_equal(y[n : n + 1].compute(), piece)
    assert np.array_equal(sums, expected)


def test_dask_space_to_batch_round_trip_with_unaligned_chunks():
    da = pytest.importorskip("dask.array")
    shape = (16, 998, 1001)  # 64 MB in 2.5 MB chunks that no block divides
    # Spatial chunks, the whole batch in each: an output chunk (block offset, batch, region) then
    # needs one input chunk. (Chunks of one batch row each would make every output chunk wait on
    # all of them, since the spec puts the block offsets outermost in the output batch.)
    x = lazy_index_array(shape, chunks=(16, 40, 1001))
    block, pads_begin, pads_end = [1, 3, 4], [0, 1, 1], [0, 3, 2]
    y = dm.space_to_batch(x, block, pads_begin, pads_end)
    assert isinstance(y, da.Array) and y.shape == (192, 1002 // 3, 1004 // 4)
    assert largest_chunk_bytes(y) <= 4 * largest_chunk_bytes(x)
    back = dm.batch_to_space(y, block, pads_begin, pads_end)
    same, peak = peak_bytes(lambda: bool((back == x).all().compute()))
    assert same
    assert peak < x.nbytes / 2, f"peak {peak / MB:.1f} MB"  # about 7 chunks on 2 threads
    first = index_slice(shape, 0)
    expected = dm.space_to_batch(first, block, pads_begin, pads_end)
    assert np.array_equal(y[0::16].compute(), expected)  # batch 0 of every block offset


def test_memmap_out_streams_to_disk(tmp_path):
    shape = (8, 8, 1024, 1024)  # int32: 256 MB in, 256 MB out, both on disk
    data = np.lib.format.open_memmap(tmp_path / "in.npy", mode="w+", dtype=np.int32, shape=shape)
    for n in range(shape[0]):
        data[n] = index_slice(shape, n)[0]
    data.flush()
    data = np.load(tmp_path / "in.npy", mmap_mode="r")
    block, pads_begin, pads_end = [1, 1, 2, 4], [0, 0, 1, 0], [0, 0, 1, 0]
    out_shape = dm.shapes.space_to_batch(shape, block, pads_begin, pads_end)
    out = np.lib.format.open_memmap(tmp_path / "out.npy", mode="w+", dtype=np.int32, shape=out_shape)

    result, peak = peak_bytes(lambda: dm.space_to_batch(data, block, pads_begin, pads_end, out=out))
    assert result is out
    assert peak < 16 * MB, f"peak {peak / MB:.1f} MB"  # no temporaries: strided copies between the two files
    out.flush()
    del out, result

    # Piece by piece: output batch (b, n) holds block offset b of input batch n.
    written = np.load(tmp_path / "out.npy", mmap_mode="r").reshape((8, shape[0]) + tuple(out_shape[1:]))
    for n in range(shape[0]):
        expected = dm.space_to_batch(index_slice(shape, n), block, pads_begin, pads_end)
        assert np.array_equal(written[:, n], expected)


def test_dask_result_stored_into_a_memmap(tmp_path):
    da = pytest.importorskip("dask.array")
    shape = (4, 64, 512, 512)  # int32: 268 MB
    x = lazy_index_array(shape, chunks=(1, 16, 256, 512))
    y = dm.depth_to_space(x, "depth_first", 2)
    target = np.lib.format.open_memmap(tmp_path / "y.npy", mode="w+", dtype=np.int32, shape=y.shape)
    _, peak = peak_bytes(lambda: da.store(y, target, lock=False))
    assert peak < 64 * MB, f"peak {peak / MB:.1f} MB"
    target.flush()
    for n in (0, shape[0] - 1):
        assert np.array_equal(target[n : n + 1], dm.depth_to_space(index_slice(shape, n), "depth_first", 2))


def test_the_front_ends_keep_a_dask_array_lazy():
    """compat's input check is the ops' own: a Dask array is never turned into a NumPy array there."""
    da = pytest.importorskip("dask.array")
    from datamove.compat import onnx, tensorflow, torch as compat_torch

    x = np.arange(2 * 4 * 4 * 8, dtype=np.float32).reshape(2, 4, 4, 8)
    lazy = da.from_array(x, chunks=(1, 4, 4, 8))
    nchw = da.from_array(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), chunks=(1, 8, 4, 4))
    for call, data, eager in (
        (lambda a: tensorflow.space_to_depth(a, 2), lazy, x),
        (lambda a: tensorflow.batch_to_space(a, [1, 2], [[0, 0], [0, 1]]), lazy, x),
        (lambda a: onnx.depth_to_space(a, 2, "CRD"), nchw, nchw.compute()),
        (lambda a: compat_torch.pixel_unshuffle(a, 2), nchw, nchw.compute()),
    ):
        result = call(data)
        assert isinstance(result, da.Array), type(result)
        np.testing.assert_array_equal(result.compute(), call(eager))
