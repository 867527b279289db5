"""Arrays right against an unreadable page: run by tests/test_core_safety.py in a process of its own (a read or
write past an array's ends is a SIGSEGV there, not a crash of the test run), at the level DATAMOVE_ISA names.

Every input and output lies with its first byte just after a PROT_NONE page, or its last byte just before
one, and the four ops run on it through the compiled core, plain and streamed, on 1 and 3 threads, bit for
bit against the NumPy engine. Prints the number of calls compared.
"""

from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np

import datamove as dm
from datamove.engines.native import engine as native_engine

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_kept = []  # the mappings stay mapped for the life of the process (views of them are returned)


def guarded(nbytes: int, at_end: bool) -> np.ndarray:
    """``nbytes`` of writable memory (uint8) whose first byte follows an unreadable page, or (``at_end``)
    whose last byte precedes one."""
    pages = -(-max(nbytes, 1) // PAGE)
    mm = mmap.mmap(-1, (pages + 2) * PAGE)
    _kept.append(mm)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    for page in (0, pages + 1):
        if _libc.mprotect(base + page * PAGE, PAGE, 0) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")
    start = PAGE + (pages * PAGE - nbytes if at_end else 0)
    return np.frombuffer(mm, np.uint8, nbytes, start)


def placed(array: np.ndarray, at_end: bool, reverse: bool) -> np.ndarray:
    """A copy of ``array`` in guarded memory (C order, or its last axis reversed)."""
    raw = guarded(array.nbytes, at_end).view(array.dtype).reshape(array.shape)
    raw[...] = array
    return raw[..., ::-1] if reverse else raw


# (op, input shape, args): small images, odd rows, crops and pads on both sides, blocks 2-4
CASES = [
    ("space_to_depth", (2, 3, 12, 20), ("blocks_first", 2)),
    ("space_to_depth", (1, 5, 9, 15), ("depth_first", 3)),
    ("space_to_depth", (2, 2, 8, 68), ("depth_first", 4)),
    ("depth_to_space", (2, 12, 7, 9), ("blocks_first", 2)),
    ("depth_to_space", (1, 18, 5, 11), ("depth_first", 3)),
    ("space_to_batch", (1, 3, 7, 13), ([1, 1, 2, 3], [0, 0, 1, 2], [0, 0, 0, 0])),
    ("space_to_batch", (2, 2, 30, 46), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])),
    ("batch_to_space", (12, 3, 5, 9), ([1, 1, 2, 3], [0, 0, 1, 2], [0, 0, 2, 1])),
    ("batch_to_space", (4, 2, 16, 64), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])),
]
DTYPES = [np.uint8, np.float16, np.float32, np.float64, np.complex128, np.dtype("V3"), np.dtype("V32")]


def count_calls() -> int:
    """Every case, compared: the number of calls."""
    rng = np.random.default_rng(48)
    compared = 0
    native_engine.core()
    for stream in (1 << 62, 0):  # plain, then streaming stores wherever the program can
        native_engine.STREAM_BYTES = stream
        for op, shape, args in CASES:
            for dtype in map(np.dtype, DTYPES):
                data = rng.integers(0, 256, int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8).view(dtype).reshape(shape)
                channels_last = np.moveaxis(np.ascontiguousarray(np.moveaxis(data, 1, -1)), -1, 1)
                for x in (data, channels_last):
                    expected = getattr(dm, op)(x, *args, engine="numpy")
                    for at_end in (False, True):
                        for reverse in (False, True):
                            src = placed(x if not reverse else x[..., ::-1], at_end, reverse)
                            dst = guarded(expected.nbytes, not at_end).view(dtype).reshape(expected.shape)
                            dm.set_num_threads(1 + 2 * (compared % 2))
                            getattr(dm, op)(src, *args, out=dst, engine="native")
                            assert dst.tobytes() == expected.tobytes(), (op, shape, dtype, at_end, reverse)
                            compared += 1
    return compared


def main() -> int:
    print(native_engine.core().ISA, count_calls())
    return 0


if __name__ == "__main__":
    sys.exit(main())
