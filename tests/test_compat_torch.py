"""``datamove.compat.torch`` against PyTorch itself, bit for bit.

The oracle is ``torch.nn.functional.pixel_shuffle`` / ``pixel_unshuffle`` on the CPU, on the same data.
Where PyTorch cannot run a case, the test says what it compares against instead:
- dtypes without CPU kernels (uint16/32/64): the same bytes as int16/32/64 through PyTorch;
- a zero-element input to ``pixel_unshuffle``: the CPU kernel returns the input's shape
  (pytorch/pytorch#192816), so the shape is PyTorch's ``meta`` device's (the documented one).
"""

from __future__ import annotations

import numpy as np
import pytest

import datamove as dm
from compat_helpers import DTYPES, Tally, random_array
from datamove.compat import torch as dtorch

torch = pytest.importorskip("torch", reason="torch (2.13.0 CPU, a test extra) is not installed")
F = torch.nn.functional

CASES = 300  # per function; the issue asks for >= 200
MAX_ELEMENTS = 2000
SIGNED = {np.dtype(np.uint16): np.int16, np.dtype(np.uint32): np.int32, np.dtype(np.uint64): np.int64}


def _through_torch(function, x, factor):
    """PyTorch's result for x (unsigned types it has no kernel for go through as signed of the same width)."""
    as_signed = SIGNED.get(x.dtype)
    data = x.view(as_signed) if as_signed is not None else x
    result = function(torch.from_numpy(np.ascontiguousarray(data)), factor).numpy()
    return result.view(x.dtype) if as_signed is not None else result


def _case(rng, kind):
    factor = int(rng.choice([1, 2, 2, 3, 3, 4]))
    lead = [int(d) for d in rng.integers(0 if rng.random() < 0.1 else 1, 3, rng.integers(0, 4))]
    if kind == "shuffle":
        c = factor * factor * int(rng.integers(0 if rng.random() < 0.05 else 1, 3))
        h, w = (int(rng.integers(0 if rng.random() < 0.05 else 1, 4)) for _ in range(2))
    else:
        c = int(rng.integers(0 if rng.random() < 0.05 else 1, 4))
        h, w = (factor * int(rng.integers(0 if rng.random() < 0.05 else 1, 4)) for _ in range(2))
    shape = [*lead, c, h, w]
    while int(np.prod(shape)) > MAX_ELEMENTS and lead:
        shape.pop(0)
        lead.pop(0)
    return tuple(shape), factor


@pytest.mark.parametrize("kind", ["shuffle", "unshuffle"])
def test_against_torch(kind):
    rng = np.random.default_rng(40040 + (kind == "unshuffle"))
    tally = Tally()
    ours = dtorch.pixel_shuffle if kind == "shuffle" else dtorch.pixel_unshuffle
    theirs = F.pixel_shuffle if kind == "shuffle" else F.pixel_unshuffle
    for _ in range(CASES):
        shape, factor = _case(rng, kind)
        dtype = np.dtype(rng.choice(DTYPES))
        x = random_array(rng, shape, dtype)
        view = np.flip(np.flip(x, -1).copy(), -1) if rng.random() < 0.25 else x  # sometimes negative strides
        got = ours(view, factor)
        case = (shape, factor, dtype.name)
        if kind == "unshuffle" and x.size == 0:
            meta = tuple(F.pixel_unshuffle(torch.empty(shape, device="meta"), factor).shape)
            tally.compare("unshuffle/torch meta shape (CPU: wrong shape)", got, np.empty(meta, dtype), case)
            continue
        key = "torch" if dtype not in SIGNED else "torch (same bytes as signed)"
        tally.compare(f"{kind}/{key}", got, _through_torch(theirs, x, factor), case)
    assert tally.total(kind) == CASES >= 200
    assert tally.total(f"{kind}/torch") == CASES
    assert tally.mismatches == [], tally.mismatches[:5]


def test_zero_element_pixel_unshuffle_has_the_output_shape():
    # Not copied: PyTorch's CPU kernel returns the input's shape here (pytorch/pytorch#192816).
    x = np.zeros((0, 1, 4, 4), np.float32)
    assert tuple(F.pixel_unshuffle(torch.from_numpy(x), 2).shape) == (0, 1, 4, 4)
    assert tuple(F.pixel_unshuffle(torch.empty(0, 1, 4, 4, device="meta"), 2).shape) == (0, 4, 2, 2)
    assert dtorch.pixel_unshuffle(x, 2).shape == (0, 4, 2, 2)
    assert dtorch.pixel_unshuffle(np.zeros((2, 0, 3, 1, 4, 4)), 2).shape == (2, 0, 3, 4, 2, 2)
    assert dtorch.pixel_shuffle(np.zeros((2, 0, 3, 4, 2, 2)), 2).shape == (2, 0, 3, 1, 4, 4)


def test_leading_dims_and_rank_three():
    x = np.arange(2 * 3 * 8 * 2 * 2).reshape(2, 3, 8, 2, 2)
    y = dtorch.pixel_shuffle(x, 2)
    assert y.shape == (2, 3, 2, 4, 4)
    assert y.tobytes() == F.pixel_shuffle(torch.from_numpy(x), 2).numpy().tobytes()
    assert dtorch.pixel_unshuffle(y, 2).tobytes() == x.tobytes()
    assert dtorch.pixel_shuffle(x[0, 0], 2).tolist() == F.pixel_shuffle(torch.from_numpy(x[0, 0]), 2).tolist()


def test_torch_tensors_go_to_the_core_op_untouched():
    t = torch.arange(16.0).reshape(1, 4, 2, 2)
    try:
        got = dtorch.pixel_shuffle(t, 2)
    except dm.DataMoveError as exc:  # the core op does not take torch tensors (yet): it says so
        assert "torch" in str(exc)
        pytest.skip(f"the core op does not take torch tensors yet: {exc}")
    assert isinstance(got, torch.Tensor) and torch.equal(got, F.pixel_shuffle(t, 2))


# ------------------------------------------------------------------ errors: every rule broken once

X = np.zeros((1, 4, 2, 2), np.float32)
ERRORS = [
    # (id, our call, exception, message, PyTorch's call that must fail too, or None)
    ("shuffle-rank", lambda: dtorch.pixel_shuffle(np.zeros((4, 2)), 2), dm.DataMoveError,
     r"pixel_shuffle expects input to have at least 3 dimensions \(\*, C, H, W\), got rank 2, shape \[4, 2\]",
     lambda: F.pixel_shuffle(torch.zeros(4, 2), 2)),
    ("shuffle-factor-zero", lambda: dtorch.pixel_shuffle(X, 0), dm.DataMoveError,
     r"upscale_factor must be >= 1 \(pixel_shuffle expects a positive upscale_factor\), got 0",
     lambda: F.pixel_shuffle(torch.zeros(1, 4, 2, 2), 0)),
    ("shuffle-factor-negative", lambda: dtorch.pixel_shuffle(X, -2), dm.DataMoveError,
     r"upscale_factor must be >= 1 .*, got -2", lambda: F.pixel_shuffle(torch.zeros(1, 4, 2, 2), -2)),
    ("shuffle-factor-float", lambda: dtorch.pixel_shuffle(X, 2.0), TypeError,
     r"upscale_factor must be an integer, got float 2.0", lambda: F.pixel_shuffle(torch.zeros(1, 4, 2, 2), 2.0)),
    ("shuffle-channels", lambda: dtorch.pixel_shuffle(np.zeros((1, 6, 2, 2)), 2), dm.DataMoveError,
     r"input.shape\[-3\] = 6 \(channels\) must be divisible by upscale_factor\*\*2 = 4",
     lambda: F.pixel_shuffle(torch.zeros(1, 6, 2, 2), 2)),
    ("unshuffle-rank", lambda: dtorch.pixel_unshuffle(np.zeros(4), 2), dm.DataMoveError,
     r"pixel_unshuffle expects input to have at least 3 dimensions \(\*, C, H, W\), got rank 1",
     lambda: F.pixel_unshuffle(torch.zeros(4), 2)),
    ("unshuffle-factor-zero", lambda: dtorch.pixel_unshuffle(X, 0), dm.DataMoveError,
     r"downscale_factor must be >= 1 \(pixel_unshuffle expects a positive downscale_factor\), got 0",
     lambda: F.pixel_unshuffle(torch.zeros(1, 4, 2, 2), 0)),
    ("unshuffle-factor-bool", lambda: dtorch.pixel_unshuffle(X, True), TypeError,
     r"downscale_factor must be an integer, got bool True", None),
    ("unshuffle-height", lambda: dtorch.pixel_unshuffle(np.zeros((1, 1, 5, 4)), 2), dm.DataMoveError,
     r"input.shape\[-2\] = H = 5 must be divisible by downscale_factor = 2",
     lambda: F.pixel_unshuffle(torch.zeros(1, 1, 5, 4), 2)),
    ("unshuffle-width", lambda: dtorch.pixel_unshuffle(np.zeros((1, 1, 4, 5)), 2), dm.DataMoveError,
     r"input.shape\[-1\] = W = 5 must be divisible by downscale_factor = 2",
     lambda: F.pixel_unshuffle(torch.zeros(1, 1, 4, 5), 2)),
    ("unshuffle-input", lambda: dtorch.pixel_unshuffle(None, 2), TypeError, r"input must be an array, got NoneType", None),
]


@pytest.mark.parametrize("name, ours, exception, message, theirs", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_rule_and_torch_rejects_too(name, ours, exception, message, theirs):
    with pytest.raises(exception, match=message):
        ours()
    if theirs is not None:
        with pytest.raises(Exception):
            theirs()
