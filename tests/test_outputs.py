"""Allocated results: on a cache line, and the pool that reuses a large result's memory once it is let go.

The pool must never hand out memory that anything still refers to (a result,
a view of one, a tensor over one), must give every byte of a reused result
its new value, and must stay bounded under threads and after fork.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import datamove as dm
from datamove.arrays import outputs

from concurrency import run_threads, script_output
from reference import space_to_depth as reference_space_to_depth

# 4 MiB of float32: inside the pool's sizes, above LINE_FROM
X = np.arange(4 * 16 * 128 * 128, dtype=np.float32).reshape(4, 16, 128, 128)
EXPECTED = reference_space_to_depth(X, "blocks_first", 2)


def address(a):
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch):
    monkeypatch.setattr(outputs, "_pool", outputs._Pool())


def test_a_dropped_result_is_reused_and_wholly_rewritten():
    first = dm.space_to_depth(X, "blocks_first", 2)
    where = address(first)
    first[...] = -1  # whatever the last user left there must not show through
    del first
    second = dm.space_to_depth(X, "blocks_first", 2)
    assert address(second) == where
    np.testing.assert_array_equal(second, EXPECTED)


@pytest.mark.parametrize("hold", ["result", "view", "memoryview", "base"])
def test_memory_still_referred_to_is_never_reused(hold):
    first = dm.space_to_depth(X, "blocks_first", 2)
    kept = {"result": lambda a: a, "view": lambda a: a[1:, ::3], "memoryview": memoryview,
            "base": lambda a: a.base}[hold](first)
    first[...] = 7
    if hold == "base":  # the buffer's bytes around the result are not the result's
        start = address(first) - address(first.base)
        region = slice(start, start + first.nbytes)
    else:
        region = slice(None)
    del first
    others = [dm.space_to_depth(X * 2, "blocks_first", 2) for _ in range(outputs.POOL_SLOTS + 1)]
    held = np.asarray(kept)
    for other in others:
        assert not np.shares_memory(other, held)
    values = held[region].view(np.float32) if hold == "base" else held
    assert (values == 7).all()  # untouched by the later calls
    np.testing.assert_array_equal(others[-1], reference_space_to_depth(X * 2, "blocks_first", 2))


def test_a_torch_tensor_over_a_result_keeps_its_memory():
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(dm.space_to_depth(X, "blocks_first", 2))
    other = dm.space_to_depth(X + 1, "blocks_first", 2)
    assert not np.shares_memory(other, t.numpy())
    np.testing.assert_array_equal(t.numpy(), EXPECTED)


def test_a_result_used_as_the_next_input_is_not_overwritten():
    back = dm.depth_to_space(dm.space_to_depth(X, "blocks_first", 2), "blocks_first", 2)
    np.testing.assert_array_equal(back, X)
    y = X
    for _ in range(4):  # y = op(y): the input is always the last result
        y = dm.depth_to_space(dm.space_to_depth(y, "depth_first", 2), "depth_first", 2)
    np.testing.assert_array_equal(y, X)


def test_a_loop_keeping_the_last_result_alternates_two_buffers():
    seen = set()
    y = None
    for _ in range(6):
        y = dm.space_to_depth(X, "blocks_first", 2)
        seen.add(address(y))
    assert len(seen) == 2
    np.testing.assert_array_equal(y, EXPECTED)


def test_the_pool_is_bounded_and_frees_idle_buffers_before_a_new_one():
    pool = outputs._pool
    kept = [pool.take(n)[0] for n in (1 << 20, 2 << 20, 3 << 20)]
    assert len(pool._buffers) == len(pool._starts) == outputs.POOL_SLOTS  # the oldest is forgotten, not freed under its user
    assert kept[0].size == 1 << 20 and kept[0].base is None
    del kept
    pool.take(8 << 20)  # nothing idle fits: the idle buffers go before the new one comes
    assert [b.size for b in pool._buffers] == [8 << 20] and len(pool._starts) == 1
    raw, start = pool.take(5 << 20)
    assert raw.size == 8 << 20 and (address(raw) + start) % outputs.LINE == 0  # fits with less than its own size to spare
    del raw
    assert pool.take(3 << 20)[0].size == 3 << 20  # 8 MiB would waste more than the request: a new one


def test_results_above_the_pool_bound_are_not_kept_nor_beside_idle_ones():
    pool = outputs._pool
    pool.take(1 << 20)  # idle at once
    n = outputs.POOL_MAX_BYTES // 4 + 1
    a = outputs.allocate((n,), np.float32)
    assert a.base.size == 4 * n + outputs.LINE and address(a) % outputs.LINE == 0
    assert pool._buffers == []  # not kept, and the idle buffer went before it came
    del a
    b = outputs.allocate((n - 1,), np.float32)  # a result of exactly POOL_MAX_BYTES is kept
    assert [buffer is b.base for buffer in pool._buffers] == [True]


def test_object_and_small_results_are_plain_arrays():
    assert outputs.allocate((10,), object).base is None
    assert outputs.allocate((1000,), np.float32).base is None
    assert not outputs._pool._buffers


def test_threads_never_share_a_live_result():
    inputs = [X + i for i in range(8)]
    expected = [reference_space_to_depth(x, "depth_first", 2) for x in inputs]
    failures = []

    def work(i):
        try:
            held = []
            for round_ in range(6):
                y = dm.space_to_depth(inputs[i], "depth_first", 2)
                if round_ % 2:
                    held.append(y)  # some results live on while the other threads allocate
            for y in held:
                if not np.array_equal(y, expected[i]):
                    failures.append((i, "overwritten"))
        except Exception as exc:  # noqa: BLE001 - every exception is a failure here
            failures.append((i, repr(exc)))

    run_threads(work)
    assert not failures, failures[:5]
    assert len(outputs._pool._buffers) <= outputs.POOL_SLOTS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_another_thread_holds_the_pool_allocates():
    """The pool's lock held at fork() (another thread inside ``take``) is the child's own lock, free."""
    code = (
        "import os, signal, numpy as np, datamove as dm\n"
        "from datamove.arrays import outputs\n"
        "x = np.ones((4, 16, 128, 128), np.float32)\n"
        "expected = dm.space_to_depth(x, 'blocks_first', 2, engine='numpy')\n"
        "outputs._pool._lock.acquire()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    signal.alarm(30)\n"
        "    ok = all((dm.space_to_depth(x, 'blocks_first', 2) == expected).all() for _ in range(3))\n"
        "    os._exit(0 if ok else 3)\n"
        "outputs._pool._lock.release()\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    assert script_output(code) == "0"


def test_channels_last_results_come_from_the_pool_too():
    x = np.ones((4, 128, 128, 16), np.float32)
    first = dm.space_to_depth(x, "depth_first", 2, data_format="channels_last")
    where = address(first)
    assert where % outputs.LINE == 0
    first[...] = -1
    del first
    second = dm.space_to_depth(x, "depth_first", 2, data_format="channels_last")
    assert address(second) == where and (second == 1).all()
