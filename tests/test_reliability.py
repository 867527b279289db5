"""Bad arguments get one clear error, bounded work and an untouched ``out``; caches hold under threads.

The probes of the reliability issue, one test per failure class: parameters
that are not sequences, outputs whose elements overlap, masked arrays,
outputs no array can hold, huge integers and names in messages, threads.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest

import datamove as dm
from datamove.dispatch import recipes
from datamove import shapes

from concurrency import run_threads, script_output

OPS = {
    "batch_to_space": (lambda x, v, **k: dm.batch_to_space(x, v, [0, 0, 0, 0], [0, 0, 0, 0], **k)),
    "space_to_batch": (lambda x, v, **k: dm.space_to_batch(x, v, [0, 0, 0, 0], [0, 0, 0, 0], **k)),
}
X = np.arange(16 * 4 * 6 * 2, dtype=np.float32).reshape(16, 4, 6, 2)


class Counting(Sequence):
    """A sequence that counts the items read from it."""

    def __init__(self, items):
        self.items, self.reads = list(items), 0

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        self.reads += 1
        return self.items[i]


# ------------------------------------------------------------------ parameters: sequences only, bounded reads


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("value", [
    {1, 2, 2, 1} | {4}, {0: 1, 1: 2, 2: 2, 3: 1}, iter([1, 2, 2, 1]), (v for v in [1, 2, 2, 1]), itertools.count(),
    "1221", b"\x01\x02\x02\x01", 1.0, object(),
], ids=["set", "dict", "iterator", "generator", "endless", "str", "bytes", "float", "object"])
def test_block_shape_must_be_a_sequence_or_an_array(op, value):
    with pytest.raises(TypeError, match="block_shape must be a sequence of integers, got"):
        OPS[op](X, value)


def test_pads_and_crops_must_be_sequences_too():
    for name, call in (("crops_begin", lambda v: dm.batch_to_space(X, [1, 2, 2, 1], v, [0] * 4)),
                       ("pads_end", lambda v: dm.space_to_batch(X, [1, 2, 2, 1], [0] * 4, v)),
                       ("crops_end", lambda v: shapes.batch_to_space((4, 2, 2, 1), [1, 2, 2, 1], [0] * 4, v))):
        for value in ({0, 1}, itertools.count(), {"a": 0}):
            with pytest.raises(TypeError, match=f"{name} must be a sequence of integers"):
                call(value)


def test_sequences_and_1d_arrays_are_accepted():
    expected = dm.batch_to_space(X, [1, 2, 2, 1], [0, 0, 0, 0], [0, 0, 0, 0])
    for block in ((1, 2, 2, 1), [1, 2, 2, 1], np.array([1, 2, 2, 1]),
                  np.array([1, 2, 2, 1], np.uint8), Counting([1, 2, 2, 1])):
        np.testing.assert_array_equal(dm.batch_to_space(X, block, [0] * 4, (0,) * 4), expected)
    assert shapes.batch_to_space((4, 3), range(1, 3), (0, 0), range(0, 2)) == (2, 5)


def test_no_more_items_are_read_than_the_rank():
    long = Counting(range(10**7))
    with pytest.raises(dm.DataMoveError, match=r"len\(block_shape\) = 10000000, data rank = 4"):
        dm.batch_to_space(X, long, [0] * 4, [0] * 4)
    assert long.reads == 0
    with pytest.raises(dm.DataMoveError, match=r"len\(pads_begin\) = 100000000, data rank = 4"):
        dm.space_to_batch(X, [1, 1, 1, 1], np.broadcast_to(np.int64(0), (10**8,)), [0] * 4)
    exact = Counting([1, 2, 2, 1])
    dm.batch_to_space(X, exact, [0] * 4, [0] * 4)
    assert exact.reads == 4


def test_a_set_as_a_shape_is_refused():
    with pytest.raises(TypeError, match="data shape must be a sequence of dims"):
        shapes.space_to_depth({1, 8, 4, 4}, "blocks_first", 2)
    assert shapes.space_to_depth(np.array([1, 8, 4, 4]), "blocks_first", 2) == (1, 32, 2, 2)


# ------------------------------------------------------------------ out: overlapping elements, masks


BUFFER = np.zeros(4096, np.float32)


def overlapping_out(shape, strides):
    BUFFER[...] = 0
    return np.lib.stride_tricks.as_strided(BUFFER, shape, strides, writeable=True)


@pytest.mark.parametrize("engine", ["auto", "numpy", "native"])
@pytest.mark.parametrize("strides", [(0, 192, 32, 4), (768, 0, 32, 4), (768, 192, 4, 4)], ids=["batch0", "h0", "w-short"])
def test_out_with_overlapping_elements_is_refused(engine, strides):
    out = overlapping_out((1, 8, 12, 2), strides)
    before = BUFFER.copy()
    with pytest.raises(dm.DataMoveError, match="out's elements overlap"):
        dm.batch_to_space(X[:4], [1, 2, 2, 1], [0] * 4, [0] * 4, out=out, engine=engine)
    np.testing.assert_array_equal(BUFFER, before)


def test_outs_with_gaps_and_reversed_axes_are_accepted():
    expected = dm.batch_to_space(X, [1, 2, 2, 1], [0] * 4, [0] * 4)
    for out in (np.zeros((4, 8, 24, 4), np.float32)[:, :, ::2, :2], np.zeros(expected.shape, np.float32)[:, ::-1],
                np.zeros(expected.shape[::-1], np.float32).T,
                # interleaved but disjoint: axis 3 steps 4 bytes, axis 2 steps 8 (past both items of axis 3)
                np.lib.stride_tricks.as_strided(np.zeros(4 * 8 * 12 * 2 * 2, np.float32), expected.shape,
                                                (8 * 12 * 2 * 4 * 2, 12 * 2 * 4 * 2, 8 * 2, 4), writeable=True)):
        np.testing.assert_array_equal(dm.batch_to_space(X, [1, 2, 2, 1], [0] * 4, [0] * 4, out=out), expected)


def test_masked_arrays_are_refused():
    masked = np.ma.masked_array(X, mask=X > 100)
    with pytest.raises(TypeError, match="masked array, whose mask the operation would not move"):
        dm.space_to_depth(masked, "blocks_first", 2)
    out = np.ma.zeros((16, 16, 3, 1), np.float32)
    with pytest.raises(TypeError, match=r"out is a masked array.*numpy.ma.getdata\(out\)"):
        dm.space_to_depth(X, "blocks_first", 2, out=out)
    assert not out.data.any()


# ------------------------------------------------------------------ an output no array can hold


@pytest.mark.parametrize("engine", ["auto", "numpy", "native", "array_api"])
def test_an_output_too_big_for_any_array_is_one_error(engine):
    x = np.zeros((1, 2, 2, 1), np.float32)
    for _ in range(2):  # the second call may come through a recipe
        with pytest.raises(dm.DataMoveError, match=r"would take 18446744108069290000 bytes, more than an array"):
            dm.space_to_batch(x, [1, 1, 1, 1], [0, 0, 0, 0], [0, 2**31, 2**31, 0], engine=engine)


def test_an_output_too_big_is_one_error_for_torch_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(dm.DataMoveError, match="more than an array can hold"):
        dm.space_to_batch(torch.zeros((1, 2, 2, 1)), [1, 1, 1, 1], [0] * 4, [0, 2**31, 2**31, 0])


# ------------------------------------------------------------------ messages: one short line whatever they quote


def one_short_line(exc_info, limit=400):
    message = str(exc_info.value)
    assert "\n" not in message and len(message) < limit, message[:1000]
    return message


def test_huge_integers_are_shown_by_their_digit_count():
    for call in (lambda: dm.space_to_depth(X, "blocks_first", 10**5000),
                 lambda: dm.batch_to_space(X, [1, 10**5000, 1, 1], [0] * 4, [0] * 4),
                 lambda: shapes.space_to_batch((1, 2), [1, 1], [0, -10**6000], [0, 0])):
        with pytest.raises(dm.DataMoveError, match="an integer of 500[01] digits|an integer of 600[01] digits") as info:
            call()
        one_short_line(info)


def test_block_size_to_a_huge_rank_is_one_line():
    for rank in (65, 14_300, 20_000):
        with pytest.raises(dm.DataMoveError, match=rf"block_size \*\* {rank - 2} = .* does not fit in int64") as info:
            shapes.space_to_depth((1,) * rank, "blocks_first", 2)
        one_short_line(info)
    with pytest.raises(dm.DataMoveError) as info:  # the product of a long block_shape
        shapes.batch_to_space((1,) * 2000, [1] + [2**62] * 1999, [0] * 2000, [0] * 2000)
    one_short_line(info)
    with pytest.raises(dm.DataMoveError) as info:  # a long block_shape quoted in a message
        shapes.batch_to_space((1,) * 20_000, [1] + [0] * 19_999, [0] * 20_000, [0] * 20_000)
    one_short_line(info)


def test_long_and_odd_strings_are_cut_and_escaped():
    for call in (lambda s: dm.space_to_depth(X, s, 2), lambda s: dm.space_to_depth(X, "blocks_first", 2, engine=s),
                 lambda s: shapes.space_to_batch(("1", s), [1, 1], [0, 0], [0, 0])):
        with pytest.raises((dm.DataMoveError, TypeError)) as info:
            call("x\ndatamove: error: fake" + "y" * 10_000_000)
        assert "\ndatamove" not in one_short_line(info)


# ------------------------------------------------------------------ caches under threads


def _cases():
    rng = np.random.default_rng(7)
    cases = []
    for i in range(24):
        n, h, w, c = 4 * int(rng.integers(1, 3)), 2 * int(rng.integers(1, 5)), 2 * int(rng.integers(1, 5)), int(rng.integers(1, 5))
        dtype = [np.uint8, np.float32, np.int64, np.complex128][i % 4]
        x = rng.integers(0, 100, size=(n, h, w, c)).astype(dtype)
        nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        crop = [0, 0, int(rng.integers(0, 2)), 0]
        cases += [
            (dm.batch_to_space, x, ([1, 2, 2, 1], crop, [0, 0, 0, int(rng.integers(0, c))])),
            (dm.space_to_batch, x, ([1, 2, 2, 1], [0, 0, 2, 0], [0, 2, 0, int(rng.integers(0, 2))])),
            (dm.space_to_depth, nchw, (["blocks_first", "depth_first"][i % 2], 2)),
            (dm.depth_to_space, np.ascontiguousarray(nchw.reshape(n, c * 4, h // 2, w // 2)),
             (["depth_first", "blocks_first"][i % 2], 2)),
        ]
    return cases


@pytest.mark.parametrize("engine", ["numpy", "native", "array_api", "auto"])
def test_all_four_ops_from_eight_threads(engine, monkeypatch):
    """Shapes that evict each other's recipes, with a tiny switch interval, against one thread."""
    monkeypatch.setattr(recipes.RECIPES, "maxsize", 8)
    recipes.RECIPES.clear()  # each store evicts one: start within the small bound
    cases = _cases()
    expected = [op(x, *args, engine="numpy") for op, x, args in cases]
    failures = []

    def work(seed):
        order = np.random.default_rng(seed).permutation(len(cases))
        try:
            for _ in range(3):
                for i in order:
                    op, x, args = cases[i]
                    out = None if (i + seed) % 3 else np.empty_like(expected[i])
                    got = op(x, *args, engine=engine, out=out)
                    if got.shape != expected[i].shape or got.tobytes() != expected[i].tobytes():
                        failures.append((seed, i, "wrong result"))
        except Exception as exc:  # noqa: BLE001 - every exception is a failure here
            failures.append((seed, type(exc).__name__, str(exc)[:200]))

    run_threads(work)
    assert not failures, failures[:5]
    assert len(recipes.RECIPES) <= 8  # the bound holds exactly: put() locks


def test_a_cache_bounded_by_bytes_keeps_its_total_through_puts_deletes_and_clears():
    # BoundedCache's byte bound (the core's programs) keeps a running total: it must match the values held
    # and keep them within maxbytes (the newest alone may exceed it), whatever the mix of operations
    from datamove.arrays.caches import BoundedCache

    rng = np.random.default_rng(11)
    cache: BoundedCache[bytes] = BoundedCache(50, maxbytes=20_000)
    for _ in range(4000):
        key = int(rng.integers(0, 120))
        cache.put(key, bytes(int(rng.integers(1, 6000))))  # new keys and replaced ones
        if rng.random() < 0.05:
            del cache[next(iter(cache))]
        if rng.random() < 0.01:
            cache.clear()
        assert cache.held == sum(map(len, cache.values()))
        assert len(cache) <= 50 and (cache.held <= 20_000 or len(cache) == 1)


def test_a_child_forked_while_another_thread_adds_a_recipe_can_add_its_own():
    """A cache's lock held at fork() (another thread inside ``put``) is renewed in the child, which would wait forever."""
    code = (
        "import os, signal, numpy as np, datamove as dm\n"
        "from datamove.dispatch import recipes\n"
        "recipes.RECIPES._lock.acquire()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    signal.alarm(30)\n"
        "    x = np.arange(2 * 4 * 8 * 6, dtype=np.float32).reshape(2, 4, 8, 6)\n"
        "    ok = (dm.space_to_depth(x, 'blocks_first', 2) == dm.space_to_depth(x, 'blocks_first', 2, engine='numpy')).all()\n"
        "    os._exit(0 if ok else 3)\n"
        "recipes.RECIPES._lock.release()\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    assert script_output(code) == "0"
