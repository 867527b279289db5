"""PyTorch CPU tensors without grad run on the NumPy engines through a view of their memory, and come back as tensors."""

from __future__ import annotations

import numpy as np
import pytest

import datamove as dm
from datamove.arrays import libraries

torch = pytest.importorskip("torch")


def test_the_view_is_the_tensors_memory():
    t = torch.arange(24, dtype=torch.float32).reshape(1, 2, 3, 4)
    view = libraries.TORCH.view(t)
    assert view.ctypes.data == t.data_ptr() and view.shape == (1, 2, 3, 4)
    assert libraries.TORCH.view(t.requires_grad_()) is None  # would cut the graph
    with torch.no_grad():
        assert libraries.TORCH.view(t) is not None


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "complex32", "bool", "uint16", "int64"])
def test_dtypes_numpy_lacks_are_reinterpreted(name):
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip("not in this torch")
    width = torch.empty((), dtype=dtype).element_size()
    word = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
    high = 2 if dtype == torch.bool else 256
    t = torch.randint(0, high, (96 * width,), dtype=torch.uint8).view(dtype).reshape(1, 4, 4, 6)
    args = ([1, 2, 2, 3], [0, 0, 1, 1], [0, 2, 1, 2])
    fast = dm.space_to_batch(t, *args)
    assert type(fast) is torch.Tensor and fast.dtype == dtype
    expected = dm.space_to_batch(t.view(word).numpy(), *args)
    assert np.array_equal(fast.view(word).numpy(), expected)
    generic = dm.space_to_batch(t, *args, engine="array_api")
    assert torch.equal(generic.view(word), fast.view(word))


def test_strided_inputs_and_channels_last():
    x = torch.arange(2 * 8 * 6 * 4, dtype=torch.int32).reshape(2, 8, 6, 4)
    for t in (x.to(memory_format=torch.channels_last), x.transpose(2, 3), x[:, ::2]):
        expected = dm.space_to_depth(t.contiguous().numpy(), "depth_first", 2)
        assert np.array_equal(dm.space_to_depth(t, "depth_first", 2).numpy(), expected)
        assert np.array_equal(dm.space_to_depth(t, "depth_first", 2, engine="array_api").numpy(), expected)


def test_out_is_written_through_its_view():
    t = torch.arange(16, dtype=torch.float32).reshape(1, 4, 2, 2)
    out = torch.empty(1, 1, 4, 4)
    pointer = out.data_ptr()
    assert dm.depth_to_space(t, "depth_first", 2, out=out) is out and out.data_ptr() == pointer
    assert torch.equal(out, torch.nn.functional.pixel_shuffle(t, 2))
    assert torch.equal(dm.space_to_depth(out, "depth_first", 2), torch.nn.functional.pixel_unshuffle(out, 2))


def test_large_tensor_matches_pixel_unshuffle_on_every_engine():
    t = torch.randn(2, 16, 64, 64)
    expected = torch.nn.functional.pixel_unshuffle(t, 2)
    for engine in ("auto", "numpy", "native", "array_api"):
        assert torch.equal(dm.space_to_depth(t, "depth_first", 2, engine=engine), expected)


@pytest.mark.parametrize("rank", [4, 5])
@pytest.mark.parametrize("nbytes", [1 << 10, 1 << 20])  # a small call (recipe) and a large one (native, zero copy)
def test_channels_last_inputs_give_channels_last_results(rank, nbytes):
    # as PyTorch's own pixel_shuffle/pixel_unshuffle and convolutions keep the memory format
    torch = pytest.importorskip("torch")
    fmt = torch.channels_last if rank == 4 else torch.channels_last_3d
    side = max(4, round((nbytes / 4 / 8) ** (1 / (rank - 2)) / 2) * 2)
    x = torch.randn((4, 8) + (side,) * (rank - 2)).contiguous(memory_format=fmt)
    calls = [
        lambda t: dm.space_to_depth(t, "blocks_first", 2),
        lambda t: dm.depth_to_space(t, "depth_first", 2),
        lambda t: dm.batch_to_space(t, [1, 1, 2] + [1] * (rank - 3), [0, 0, 1] + [0] * (rank - 3), [0] * rank),
        lambda t: dm.space_to_batch(t, [1, 1] + [2] * (rank - 2), [0, 0, 1] + [0] * (rank - 3), [0, 0, 1] + [0] * (rank - 3)),
    ]
    for call in calls:
        for _ in range(2):  # the second call from the recipe
            got = call(x)
            assert got.is_contiguous(memory_format=fmt)  # (and not contiguous, unless one channel)
            assert np.array_equal(got.numpy(), call(x.numpy()))
        grad = x.clone().requires_grad_()
        assert call(grad).is_contiguous(memory_format=fmt)
