"""Shared by the front ends' tests: bit-for-bit comparison, random data, case counting."""

from __future__ import annotations

import numpy as np

# Every dtype the differential tests draw from; each test says which ones its framework runs.
DTYPES = (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
)


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random bits of ``dtype`` (floats include NaN payloads, -0.0, infinities: all must move unchanged)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return rng.integers(0, 2, size).astype(np.bool_).reshape(shape)
    raw = rng.integers(0, 256, size * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def bits(array) -> tuple:
    """What must match: shape, dtype and the bytes in C order."""
    array = np.asarray(array)
    return array.shape, array.dtype.str, np.ascontiguousarray(array).tobytes()


class Tally:
    """Counts the cases compared and the mismatches, per function and oracle."""

    def __init__(self) -> None:
        self.cases: dict = {}
        self.mismatches: list = []

    def compare(self, key: str, got, expected, case) -> None:
        self.cases[key] = self.cases.get(key, 0) + 1
        if bits(got) != bits(expected):
            self.mismatches.append((key, case, np.asarray(got).shape, np.asarray(expected).shape))

    def total(self, prefix: str) -> int:
        return sum(n for key, n in self.cases.items() if key.startswith(prefix))
