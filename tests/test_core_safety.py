"""The compiled core's own safety: every item size with crops and pads, programs that reach outside their
arrays refused, plans run only on the arrays they were made for, and a fork that lands while a thread
makes the process's first threaded call."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

import datamove as dm
from datamove.plans import views as plans
from datamove.engines.native import engine as native_engine
from datamove.engines import numpy_engine
import lowering

# Every item size from 1 to 128 bytes: words of 1 to 16 bytes, and those the core moves as pixels of 32,
# 64 and 128 bytes (complex256 and structured items of those sizes included).
ITEM_SIZES = list(range(1, 129))

# (op, input shape, args): both windows (crops and pads on the last axis) and the nests around them.
CROPS_AND_PADS = [
    ("batch_to_space", (2, 2), ([1, 2], [0, 1], [0, 0])),  # the case: one crop on the window axis
    ("batch_to_space", (4, 3, 5), ([1, 2, 2], [0, 1, 0], [0, 0, 3])),
    ("batch_to_space", (8, 2, 3, 4), ([1, 2, 2, 2], [0, 0, 1, 1], [0, 1, 2, 0])),
    ("space_to_batch", (1, 3, 5), ([1, 2, 2], [0, 1, 0], [0, 0, 3])),
    ("space_to_batch", (2, 2, 3, 4), ([1, 1, 2, 3], [0, 1, 1, 1], [0, 1, 0, 1])),
    ("space_to_depth", (1, 2, 4, 6), ("depth_first", 2)),
    ("depth_to_space", (1, 9, 2, 3), ("blocks_first", 3)),
]


def _random(shape, itemsize, rng):
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * itemsize, dtype=np.uint8)
    return raw.view(np.dtype(f"V{itemsize}")).reshape(shape)


def _bits(a):
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("itemsize", ITEM_SIZES)
def test_every_item_size_with_crops_and_pads(itemsize):
    """Bit for bit the NumPy engine's, C-ordered, channels-last (the items after the window axis make pixels
    of 2 to 128 bytes) and reversed: BatchToSpace with crops on items of 32, 64 and 128 bytes once raised
    'a malformed program' (its scatter windows took words the core compiles for gather windows only)."""
    rng = np.random.default_rng(itemsize)
    for op, shape, args in CROPS_AND_PADS:
        data = _random(shape, itemsize, rng)
        layouts = [data, data[..., ::-1], np.moveaxis(np.ascontiguousarray(np.moveaxis(data, 1, -1)), -1, 1)]
        for view in layouts:
            expected = getattr(dm, op)(view, *args, engine="numpy")
            got = getattr(dm, op)(view, *args, engine="native")
            assert _bits(got) == _bits(expected), (op, shape, args, itemsize)


@pytest.mark.parametrize("dtype", [np.clongdouble, "V32", "V64", "V128", [("a", "<f8", (4,))]])
def test_large_calls_of_wide_items_with_crops_take_the_core(dtype):
    """engine="auto" from 2 MiB (the compiled core, streaming stores from the last-level cache's size):
    BatchToSpace with crops and SpaceToBatch with pads of 32- to 128-byte items."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(dtype.itemsize)
    data = _random((4, 3, 64, 2 * 1024 * 1024 // (64 * 12 * dtype.itemsize) * 2 + 1), dtype.itemsize, rng).view(dtype)
    for op, args in (("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 3])),
                     ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 1]))):
        assert _bits(getattr(dm, op)(data, *args)) == _bits(getattr(dm, op)(data, *args, engine="numpy")), (op, dtype)


# ------------------------------------------------------------------ programs that reach outside their arrays

PATTERN = lowering._PATTERNS


def _program(*steps):
    """A core program of these steps, each (pattern, word, block, lo, hi, src0, dst0, loops outermost first)."""
    flat = [len(steps)]
    for pattern, word, block, lo, hi, src0, dst0, loops in steps:
        flat += [PATTERN[pattern], word, block, lo, hi, src0, dst0, len(loops)] + [x for loop in loops for x in loop]
    return np.array(flat, np.int64).tobytes()


def _run(program, src, dst, threads=1, stream=0):
    native_engine.core().run(program, src, dst, threads, stream)


def _refused(program, src, dst):
    before = dst.copy()
    with pytest.raises(ValueError, match="malformed program, or one reaching outside its arrays"):
        _run(program, src, dst)
    assert _bits(dst) == _bits(before)  # nothing written


# Steps that fit their source and destination (words of 4 bytes, so many of each) exactly, each with a
# variation reaching one word past either end: (step, src words, dst words).
FITTING = {
    "contiguous": (("contiguous", 4, 0, 0, 0, 0, 0, [[4, 4, 4], [4, 1, 1]]), 16, 16),
    "strided": (("strided", 4, 0, 0, 0, 0, 0, [[4, 1, 4], [4, 4, 1]]), 16, 16),
    "fill": (("fill", 4, 0, 0, 0, 0, 0, [[2, 0, 8], [8, 0, 1]]), 16, 16),
    "gather": (("gather", 4, 2, 0, 0, 0, 0, [[2, 8, 8], [2, 1, 4], [4, 2, 1]]), 16, 16),
    "scatter": (("scatter", 4, 2, 0, 0, 0, 0, [[2, 8, 8], [2, 4, 1], [4, 1, 2]]), 16, 16),
    # 5 blocks of 2 positions a row, positions 1..8 kept: read from src - 1 (gather) or written to dst - 1
    "gather_window": (("gather_window", 4, 2, 1, 9, -1, 0, [[2, 8, 10], [2, 1, 5], [5, 2, 1]]), 16, 20),
    "scatter_window": (("scatter_window", 4, 2, 1, 9, 0, -1, [[2, 10, 8], [2, 5, 1], [5, 1, 2]]), 20, 16),
}


def _arrays(src_words=16, dst_words=16):
    return np.arange(1, src_words + 1, dtype=np.uint32), np.zeros(dst_words, np.uint32)


@pytest.mark.parametrize("name", sorted(FITTING))
def test_steps_that_fit_run_and_a_word_past_either_end_is_refused(name):
    """Each pattern's reach, as its kernels read and write: a step that covers both arrays exactly runs;
    moved one word on either side, before the first byte or past the last, or given one more row, it is
    refused at parse time and writes nothing."""
    step, src_words, dst_words = FITTING[name]
    pattern, word, block, lo, hi, src0, dst0, loops = step
    src, dst = _arrays(src_words, dst_words)
    _run(_program(step), src, dst)
    if pattern in ("contiguous", "strided", "gather", "scatter"):  # permutations of the 16 words
        assert sorted(dst.tolist()) == list(range(1, 17))
    elif pattern != "fill":  # 16 kept positions, each a word of its own (and zeros around them: gather windows)
        kept = [v for v in dst.tolist() if v]
        assert len(kept) == len(set(kept)) == 16 and set(kept) <= set(src.tolist())
    variations = [(src0, dst0 - 1), (src0, dst0 + 1)] + ([] if pattern == "fill" else [(src0 - 1, dst0), (src0 + 1, dst0)])
    for s, d in variations:
        src, dst = _arrays(src_words, dst_words)
        _refused(_program((pattern, word, block, lo, hi, s, d, loops)), src, dst)
    more = [[loops[0][0] + 1] + loops[0][1:]] + loops[1:]
    src, dst = _arrays(src_words, dst_words)
    _refused(_program((pattern, word, block, lo, hi, src0, dst0, more)), src, dst)


def test_windows_reach_only_their_kept_positions():
    """A gather window reads src only at its kept positions (lo <= t < hi: the pads around them are zeros),
    and a scatter window writes dst only there (the crops are skipped): a start that puts the pads or the
    crops before an array's first word is fine; one that puts a kept position there is refused."""
    src, dst = _arrays()
    # positions 0..7 of each of two rows, 1 and 8 kept: position t of row r reads src[r * 8 + t - 1]
    _run(_program(("gather_window", 4, 2, 1, 8, -1, 0, [[2, 7, 8], [2, 1, 4], [4, 2, 1]])), src, dst)
    assert dst.reshape(2, 2, 4)[0].tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]
    src, dst = _arrays()
    _refused(_program(("gather_window", 4, 2, 0, 8, -1, 0, [[2, 7, 8], [2, 1, 4], [4, 2, 1]])), src, dst)
    src, dst = _arrays()
    _run(_program(("scatter_window", 4, 2, 1, 8, 0, -1, [[2, 8, 7], [2, 4, 1], [4, 1, 2]])), src, dst)
    src, dst = _arrays()
    _refused(_program(("scatter_window", 4, 2, 0, 8, 0, -1, [[2, 8, 7], [2, 4, 1], [4, 1, 2]])), src, dst)


def test_the_audits_crafted_programs_are_refused():
    """The sanitizer audit's programs: 4 KiB written into a 16-byte array, a negative start, loop counts whose
    rows times their cost overflow int64, a word width that int64 -> int truncation made 4, and strides a
    block tile's kernel ignores (they read and write where the loops do not say)."""
    src, dst = np.zeros(4, np.uint32), np.zeros(4, np.uint32)
    big = np.zeros(1024, np.uint32)
    _refused(_program(("contiguous", 4, 0, 0, 0, 0, 0, [[1, 0, 0], [1024, 1, 1]])), big, dst)  # 4 KiB into 16 bytes
    _refused(_program(("contiguous", 4, 0, 0, 0, -(1 << 40), 0, [[1, 0, 0], [4, 1, 1]])), src, dst)  # a negative start
    _refused(_program(("contiguous", 4, 0, 0, 0, 0, 0, [[1 << 40, 0, 0], [1 << 40, 0, 0], [1 << 40, 1, 1]])), src, dst)
    _refused(_program(("fill", 8, 0, 0, 0, 0, 0, [[2**59, 0, 0], [2**59, 0, 0], [1, 0, 1]])), src, dst)  # cost overflow
    _refused(_program(("contiguous", 2**32 + 4, 0, 0, 0, 0, 0, [[1, 0, 0], [4, 1, 1]])), src, dst)  # a truncated word
    _refused(_program(("contiguous", 4, 0, 0, 0, 2**62, 0, [[1, 0, 0], [4, 1, 1]])), src, dst)  # far start
    _refused(_program(("strided", 4, 0, 0, 0, 0, 0, [[2**59, 2**59, 0], [1, 1, 1]])), src, dst)  # (n - 1) * stride
    _refused(_program(("strided", 4, 0, 0, 0, 0, 0, [[2, 2**61, 1], [2, 1, 2]])), src, dst)  # a stride past 2**60
    _refused(_program(("contiguous", 4, 0, 0, 0, 0, 0, [[1, 0, 0], [4, 1, 2]])), src, big)  # l0 not contiguous
    _refused(_program(("gather", 4, 2, 0, 0, 0, 0, [[3, 1, 2], [2, 2, 1]])), src, dst)  # three rows for a block of 2
    _refused(_program(("scatter_window", 32, 2, 0, 4, 0, 0, [[2, 1, 1], [1, 2, 2]])), big, big)  # 32-byte scatter words
    _refused(_program(("gather_window", 4, 7, 0, 4, 0, 0, [[7, 1, 1], [1, 7, 1]])), big, big)  # a window block of 7


def test_units_reach_their_tables_offsets():
    """A UNITS step (SpaceToBatch of small images) reads src at each row's offset plus its table's entries:
    an entry before the array's first word or past its last is refused, and so is a unit past dst's end."""
    zero = -(2**31)
    src, dst = np.arange(1, 9, dtype=np.float32), np.full(10, -1, np.float32)
    step = [7, 4, 0, 0, 0, 0, 1, 3, 2, 2, 2, 2, 0, 4, 2, 0, 1, 1, zero, 0, 1]
    native_engine.core().run(np.array([1] + step, np.int64).tobytes(), src, dst, 1, 0)
    assert dst.tolist() == [-1, 2, 0, 4, 0, 1, 2, 3, 4, -1]
    for bad in (step[:17] + [-1] + step[18:],  # an entry before src
                step[:20] + [7],  # src0 + 1 * 2 + 7: past src's 8 words
                step[:6] + [7] + step[7:]):  # units at 7..10: past dst's 10 words
        src, dst = np.arange(1, 9, dtype=np.float32), np.full(10, -1, np.float32)
        _refused(np.array([1] + bad, np.int64).tobytes(), src, dst)


def test_read_only_destinations_and_views_are_taken_by_their_own_bounds():
    """The core takes each array's lowest address and extent from the buffer protocol itself: a read-only
    destination is refused, and a reversed or gapped view's reach is its own, not its base's."""
    src, dst = _arrays()
    program = _program(FITTING["contiguous"][0])
    read_only = np.zeros(16, np.uint32)
    read_only.setflags(write=False)
    with pytest.raises((BufferError, ValueError), match="read-only|not writable"):
        _run(program, src, read_only)
    base = np.zeros(32, np.uint32)
    _refused(program, src, base[::2][:8])  # 15 words from its first item to its last: 16 asked for
    _refused(program, src[:15], dst)  # a view of 15 words of a longer array
    _run(program, src[::-1], dst)  # reversed: offsets from its lowest address, the memory in order
    assert dst.tolist() == list(range(1, 17))


@pytest.mark.parametrize("engine", [lowering, numpy_engine])
def test_a_plan_runs_only_on_the_arrays_it_was_made_for(engine):
    """execute(plan, data, out) with arrays of other shapes or item sizes than the plan's is a DataMoveError
    naming both, before any byte moves (a plan for other shapes once ran far past both arrays)."""
    plan = plans.space_to_depth((2, 3, 8, 8), (2, 12, 4, 4), "blocks_first", 2)
    data, out = np.ones((2, 3, 8, 8), np.float32), np.zeros((2, 12, 4, 4), np.float32)
    engine.execute(plan, data, out)
    assert out.sum() == out.size
    bad = [(np.ones((2, 3, 4, 4), np.float32), np.zeros((2, 12, 4, 4), np.float32)),
           (data, np.zeros((2, 12, 2, 2), np.float32)),
           (data, np.zeros((2, 12, 4, 4), np.float64)),
           (np.ones((1, 3, 8, 8), np.float32), np.zeros((1, 12, 4, 4), np.float32))]
    for d, o in bad:
        with pytest.raises(dm.DataMoveError, match=r"a plan for input \(2, 3, 8, 8\) and output \(2, 12, 4, 4\) "
                                                   r"cannot run on data of shape"):
            engine.execute(plan, d, o)
        assert not o.any()


# ------------------------------------------------------------------ a fork during the first threaded call

_FORK_DURING_FIRST_THREADED_CALL = r"""
import ctypes, os, sys, threading, time
import numpy as np, datamove as dm
from datamove.engines.native import engine as native_engine
x = np.ones((16, 16, 256, 256), np.float32)  # 64 MiB
dm.set_num_threads(1)
dm.space_to_depth(x, "blocks_first", 2)  # everything imported: the core loaded, no thread started yet
dm.set_num_threads(2)
libc = ctypes.CDLL(None)
PREPARE = ctypes.CFUNCTYPE(None)
def prepare():
    # the process's first threaded call, from another thread, while fork() runs its prepare handlers (glibc
    # runs a handler registered now in no child), forking once its job holds the pool (a worker started)
    thread = threading.Thread(target=lambda: dm.space_to_depth(x, "blocks_first", 2))
    thread.start()
    deadline = time.monotonic() + 10
    while native_engine.core().workers() < 1 and time.monotonic() < deadline:  # its job started: it holds the pool
        time.sleep(0.0002)
hook = PREPARE(prepare)
libc.__register_atfork(hook, None, None, None)
pid = os.fork()
if pid == 0:
    y = dm.space_to_depth(x, "blocks_first", 2)  # threaded: waited forever on a call lock left locked
    os._exit(0 if y.shape == (16, 64, 128, 128) and bool((y == 1).all()) else 3)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("exit", os.waitstatus_to_exitcode(status))
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    print("hung")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "__register_atfork"),
                    reason="needs glibc's __register_atfork")
def test_a_fork_while_a_thread_makes_the_first_threaded_call_leaves_a_working_child():
    """The pool's fork handler is registered when the module loads. Registered by the first threaded call,
    under the pool's lock, from inside fork's prepare handlers (glibc runs the handlers registered then in
    no child), the child inherited the lock held by the job still running and no handler to reset it, and
    its first threaded call hung: every time, the fork landing while that job runs (it has started a
    worker). A child that hangs is killed after 30 s."""
    result = subprocess.run([sys.executable, "-c", _FORK_DURING_FIRST_THREADED_CALL], capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.split() == ["exit", "0"], (result.stdout, result.stderr)


# ------------------------------------------------------------------ guard pages at every instruction-set level

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through ctypes: Linux")
@pytest.mark.parametrize("level", ["sse2", "ssse3", "avx2", "avx512f", "avx512"])
def test_no_load_or_store_past_an_arrays_ends(level):
    """Inputs and outputs right against an unreadable page, before their first byte and after their last
    (tests/guard_page_cases.py, in a process of its own: a vector load or store past either end is a
    SIGSEGV there): the four ops, 7 dtypes from 1 to 32 bytes, channels-first and channels-last, reversed,
    plain and streamed, 1 and 3 threads, at each instruction-set level this CPU has, bit for bit."""
    if level not in native_engine.core().ISAS:
        pytest.skip(f"this CPU runs the core at most at {native_engine.core().CPU_ISA}")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard_page_cases.py")
    result = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "DATAMOVE_ISA": level})
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.split() == [level, "1008"]


# ------------------------------------------------------------------ the core under the sanitizers

def compile_core(flags, name):
    """The core's sources compiled here with ``flags`` (each file a job, one per core), linked as ``name``."""
    import shlex
    import shutil
    import sysconfig
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    from glob import glob

    cxx = shlex.split(sysconfig.get_config_var("CXX") or "c++")
    if shutil.which(cxx[0]) is None:
        pytest.skip("no C++ compiler")
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "native")
    out = tempfile.mkdtemp(prefix="datamove-core-")
    common = ["-std=c++17", "-fPIC", *flags, "-I", sysconfig.get_paths()["include"], "-I", folder]

    def one(source):
        target = os.path.join(out, os.path.basename(source) + ".o")
        subprocess.run(cxx + common + ["-c", source, "-o", target], check=True, capture_output=True, timeout=600)
        return target

    with ThreadPoolExecutor(max(1, len(os.sched_getaffinity(0)))) as pool:
        objects = list(pool.map(one, sorted(glob(os.path.join(folder, "*.cpp")))))
    target = os.path.join(out, name)
    subprocess.run(cxx + ["-shared", *flags, *objects, "-o", target, "-pthread"], check=True, capture_output=True,
                   timeout=300)
    return target


@pytest.fixture(scope="module")
def sanitized_core():
    runtime = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not sys.platform.startswith("linux") or not os.path.isfile(runtime):
        pytest.skip("needs GCC's AddressSanitizer runtime (Linux)")
    # -O0: the build takes a third of -O1's (about 45 s on 2 cores) and the runs are short
    flags = ["-O0", "-g1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    return compile_core(flags, "sanitized_native.so"), runtime


@pytest.mark.slow
@pytest.mark.parametrize("level", ["sse2", "ssse3", "avx2", "avx512f", "avx512"])
def test_the_core_under_address_and_undefined_behaviour_sanitizers(sanitized_core, level):
    """The core built with -fsanitize=address,undefined, its runtime preloaded into Python
    (tests/sanitizer_cases.py): the native tests' tile sweep and 100 random calls, plain and streamed, the
    guard-page cases in the sanitizer's redzones, repeated calls through the core's own table, and each
    pattern's out-of-bounds programs (refused before a
    byte moves), at each instruction-set level this CPU has; any report aborts the process."""
    if level not in native_engine.core().ISAS:
        pytest.skip(f"this CPU runs the core at most at {native_engine.core().CPU_ISA}")
    path, runtime = sanitized_core
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sanitizer_cases.py")
    env = {**os.environ, "DATAMOVE_ISA": level, "LD_PRELOAD": runtime,
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    result = subprocess.run([sys.executable, script, path], capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, (result.returncode, result.stderr[-4000:])
    # (repeats: 7 calls, 4 dtypes at every item offset in a line (65 + 33 + 17 + 9), each 3 times new and into out=)
    assert result.stdout.split() == [level, str(2 * 280 + 1008), str(7 * 124 * 3 * 2), "26"], result.stdout


@pytest.mark.parametrize("nbytes", [0, 1, 3, 65535, 65536, 65537, 3 * 65536 + 5, 1 << 21])
def test_the_core_copy_loop_the_bench_floor_uses(nbytes):
    """core.copy(src, dst, threads, stream): every byte of src into dst (64 KiB rows and a rest), plain or
    streamed, 1 to 3 threads, nothing past dst's end; buffers of other sizes, not contiguous, or read-only
    are refused."""
    core = native_engine.core()
    rng = np.random.default_rng(nbytes)
    src = rng.integers(0, 256, nbytes, dtype=np.uint8)
    for threads in (1, 3):
        for stream in (0, 1):
            dst = np.zeros(nbytes + 64, np.uint8)
            core.copy(src, dst[:nbytes], threads, stream)
            assert dst[:nbytes].tobytes() == src.tobytes() and not dst[nbytes:].any()
    with pytest.raises(ValueError, match="src has 16 bytes, dst 15"):
        core.copy(np.zeros(16, np.uint8), np.zeros(15, np.uint8), 1, 0)
    with pytest.raises((BufferError, ValueError), match="contiguous"):
        core.copy(np.zeros(32, np.uint8)[::2], np.zeros(16, np.uint8), 1, 0)
    read_only = np.zeros(16, np.uint8)
    read_only.setflags(write=False)
    with pytest.raises((BufferError, TypeError)):
        core.copy(np.zeros(16, np.uint8), read_only, 1, 0)
