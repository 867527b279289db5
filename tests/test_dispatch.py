"""datamove.dispatch: one class of steps per kind of array, chosen once per call (``dispatch.call``)."""

from __future__ import annotations

import numpy as np
import pytest

import datamove as dm
import reference as ref
from datamove import dispatch
from datamove.arrays import libraries
from datamove.dispatch import calls, numpy_calls, recipes, tensorflow as tf_calls, torch_calls


def _chosen(monkeypatch, data):
    """The class of steps dispatch.call hands ``data`` to (each class's run recorded, then passed on)."""
    seen = []
    for kind in (calls.Calls, numpy_calls.NumPyCalls, torch_calls.TracedCalls, tf_calls.TensorFlowCalls):
        run = kind.__dict__.get("run")
        if run is not None:
            def recorded(self, *args, _run=run, **kwargs):
                seen.append(type(self))
                return _run(self, *args, **kwargs)
            monkeypatch.setattr(kind, "run", recorded)
    dispatch.call("space_to_depth", data, ("blocks_first", 2), "channels_first", None, "numpy")
    return seen[0]


def test_each_kind_of_array_takes_its_own_steps(monkeypatch):
    from datamove import ops

    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert ops._numpy_run.__self__ is numpy_calls.NUMPY  # (the operations call an exact ndarray's steps straight)
    assert _chosen(monkeypatch, x) is numpy_calls.NumPyCalls
    assert _chosen(monkeypatch, x.tolist()) is numpy_calls.NumPyCalls  # np.asarray's
    assert _chosen(monkeypatch, x.view(type("Sub", (np.ndarray,), {}))) is numpy_calls.NumPyCalls  # a subclass
    strict = pytest.importorskip("array_api_strict")
    assert _chosen(monkeypatch, strict.asarray(x)) is calls.Calls  # any other library: the shared steps


def test_pytorch_tensors_take_torch_steps(monkeypatch):
    torch = pytest.importorskip("torch")
    assert _chosen(monkeypatch, torch.zeros(1, 1, 4, 4)) is torch_calls.TorchCalls
    assert dispatch.BY_LIBRARY[libraries.TORCH] is torch_calls.TORCH


def test_a_library_added_in_one_place(monkeypatch):
    """A new kind of array's steps: a Calls subclass entered in BY_LIBRARY, nothing else changed."""
    strict = pytest.importorskip("array_api_strict")
    x = strict.asarray(np.arange(128, dtype=np.int16).reshape(1, 8, 4, 4))
    library = libraries.of(x)
    made = []

    class Logged(calls.Calls):
        def made(self, recipe_key, call, data, out, engine):
            made.append(call.op)
            return super().made(recipe_key, call, data, out, engine)

    monkeypatch.setitem(dispatch.BY_LIBRARY, library, Logged())
    recipes.RECIPES.clear()
    for _ in range(3):
        got = dm.depth_to_space(x, "depth_first", 2)
        assert np.array_equal(np.asarray(got), ref.depth_to_space(np.asarray(x), "depth_first", 2))
    assert made == ["depth_to_space"]  # (validated and made once; its repeats are the recipe's)
    recipes.RECIPES.clear()


@pytest.mark.parametrize("op, args", [("space_to_depth", ("blocks_first", 2)), ("depth_to_space", ("depth_first", 2)),
                                      ("batch_to_space", ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1])),
                                      ("space_to_batch", ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]))])
def test_the_numpy_key_inline_is_the_key_method(op, args):
    """NumPyCalls.run builds a depth op's key inline (a call less): the same as NumPyCalls.key, which is
    recipes.key's form with the NumPy adapter's fields."""
    x = np.arange(4 * 4 * 8 * 8, dtype=np.float32).reshape(4, 4, 8, 8)
    if op == "depth_to_space":
        x = x.reshape(4, 16, 4, 4)
    recipes.RECIPES.clear(), numpy_calls.SEEN.clear()
    for _ in range(2):  # (the first call of a layout is the core's alone: the second makes the recipe)
        getattr(dm, op)(x, *args, engine="numpy")
    key = numpy_calls.NUMPY.key(op, tuple(args), x, "numpy")
    assert key in recipes.RECIPES
    assert key[-3:] == libraries.NUMPY.key(x)
    assert numpy_calls.NUMPY.key(op, tuple(args), x.tolist(), "numpy") is None  # no recipe for a list
    assert numpy_calls.NUMPY.key(op, tuple(args), x, None) is None
    recipes.RECIPES.clear()


def test_a_depth_ops_data_format_is_checked_on_every_kind():
    x = np.zeros((1, 4, 4, 4), np.float32)
    for data in (x, x.tolist()):
        with pytest.raises(TypeError, match="data_format must be a string"):
            dm.space_to_depth(data, "blocks_first", 2, data_format=None)
        with pytest.raises(Exception, match="data_format"):
            dm.depth_to_space(data, "blocks_first", 2, data_format="NHWC")
    tf = pytest.importorskip("tensorflow")
    with pytest.raises(TypeError, match="data_format must be a string"):  # (was taken as channels_first)
        dm.space_to_depth(tf.zeros((1, 4, 4, 4)), "blocks_first", 2, data_format=None)
