"""The library adapters (datamove.arrays.libraries), the engines' one protocol, and the recipes of every library."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import datamove as dm
from datamove import engines
from datamove.arrays import libraries
from datamove.dispatch import recipes
from datamove.engines import route
from datamove.engines.call import Call
from datamove.errors import DataMoveError

from reference import space_to_depth as ref_space_to_depth


def test_numpy_and_what_is_not_an_array():
    x = np.zeros((2, 3), np.float32)
    assert libraries.of(x) is libraries.NUMPY
    assert libraries.of(np.memmap) is None  # the class itself is not an array
    for value in ([1, 2], 3, "x", None, {"a": 1}):
        assert libraries.of(value) is None and not libraries.foreign(value)
    assert libraries.of(x.view(np.recarray)) is libraries.NUMPY  # subclasses too
    assert libraries.NUMPY.key(x) == ((2, 3), (12, 4), np.dtype(np.float32))
    assert libraries.NUMPY.view(x) is x
    assert libraries.name(x) == "numpy.ndarray" and libraries.name([1]) == "builtins.list"


def test_found_once_per_type():
    class Thing:
        def __dlpack__(self):  # pragma: no cover - never called
            raise AssertionError

        def __dlpack_device__(self):
            return (2, 0)  # CUDA: no NumPy view

    first = libraries.of(Thing())
    assert first is libraries.of(Thing()) and libraries._BY_TYPE[Thing] is first
    assert first.name.endswith("Thing") and libraries.foreign(Thing())
    assert first.view(Thing()) is None and first.key(Thing()) is None  # never cached


def test_torch_adapter():
    torch = pytest.importorskip("torch")
    t = torch.arange(12.0).reshape(3, 4)
    lib = libraries.of(t)
    assert lib is libraries.TORCH and libraries.of(torch.nn.Parameter(t)) is lib
    assert lib.key(t) != lib.key(t.conj()) or not t.is_complex()
    c = torch.zeros(2, dtype=torch.complex64)
    assert lib.key(c) != lib.key(c.conj())  # a lazy conjugate: other values over the same strides
    assert lib.view(t).base is not None and np.shares_memory(lib.view(t), t.numpy())
    assert lib.view(t.requires_grad_()) is None  # a view would cut it off the graph
    assert libraries.overlap(t, t[1:]) and not libraries.overlap(t, t.clone())
    with pytest.raises(TypeError, match="out must be a torch.Tensor like data, got numpy.ndarray"):
        lib.check_out(t, np.zeros((3, 4), np.float32), (3, 4))
    with pytest.raises(DataMoveError, match="out must not repeat elements"):
        lib.check_out(t, torch.zeros(1, 4).expand(3, 4), (3, 4))
    with pytest.raises(DataMoveError, match=r"out.dtype must be data.dtype = torch.float32, got torch.float64"):
        lib.check_out(t, torch.zeros(3, 4, dtype=torch.float64), (3, 4))


@pytest.mark.parametrize("module, message", [
    ("jax.numpy", "out= cannot be used with JAX arrays: they are immutable"),
    ("dask.array", "out= cannot be used with Dask arrays: they are lazy"),
])
def test_immutable_and_lazy_libraries_refuse_out(module, message):
    xp = pytest.importorskip(module)
    x = xp.zeros((1, 4, 2, 2))
    assert libraries.of(x).name in ("jax.Array", "dask.array.Array") and not libraries.of(x).writable
    with pytest.raises(TypeError, match=message):
        dm.space_to_depth(x, "blocks_first", 2, out=x)


def test_engines_share_one_protocol():
    call = Call("space_to_depth", {"mode": "blocks_first", "block_size": 2}, (1, 2, 4, 4), (1, 8, 2, 2))
    x = np.arange(32, dtype=np.int32).reshape(1, 2, 4, 4)
    expected = ref_space_to_depth(x, "blocks_first", 2)
    for name in route.ENGINES:
        engine = engines.get(name)
        assert callable(engine.can_take) and callable(engine.run)
        assert not hasattr(engine, "execute") or name in ("numpy", "native")  # no stub that only raises
        if not engine.can_take(x):
            continue
        assert np.array_equal(engine.run(call, x, None), expected)
        out = np.full(call.out_shape, -1, np.int32)
        assert engine.run(call, x, out) is out and np.array_equal(out, expected)


def test_a_call_plans_only_when_an_engine_needs_it():
    call = Call("depth_to_space", {"mode": "depth_first", "block_size": 2}, (1, 4, 1, 1), (1, 1, 2, 2))
    assert call._plan is None and call.args == ("depth_first", 2)
    engines.get("array_api").run(call, np.arange(4).reshape(1, 4, 1, 1), None)
    assert call._plan is None  # the formula engine never asked for it
    assert call.plan is call.plan  # made once


def test_select_follows_the_route_table():
    small, large = np.zeros(8, np.uint8), np.zeros(engines.NATIVE_MIN_BYTES, np.uint8)
    assert engines.select("auto", small).__name__.endswith("numpy_engine")
    assert engines.select("auto", large).__name__.endswith("native.engine")
    assert engines.select("native", small).__name__.endswith("native.engine")  # forced
    assert engines.select("auto", large.astype(object)).__name__.endswith("numpy_engine")
    assert route.able(engines.facts(small.astype(object), "auto")) == ["numpy"]
    with pytest.raises(DataMoveError, match=r"engine 'array_api' cannot take a numpy.ndarray; engines that can: \['numpy'"):
        engines.select("array_api", np.zeros(2, "U3"))
    with pytest.raises(TypeError, match="engine must be a string, got int 3"):
        engines.select(3, small)


@pytest.mark.parametrize("module", ["jax.numpy", "dask.array", "array_api_strict"])
def test_calls_of_other_libraries_are_kept_as_recipes(module):
    xp = pytest.importorskip(module)
    x = np.arange(2 * 8 * 4 * 4, dtype=np.float32).reshape(2, 8, 4, 4)
    data = xp.asarray(x)
    recipes.RECIPES.clear()
    first = dm.depth_to_space(data, "blocks_first", 2)
    kept = [r for r in recipes.RECIPES.values() if isinstance(r, recipes.ForeignRecipe)]
    assert len(kept) == 1 and kept[0].call.out_shape == (2, 2, 8, 8)
    again = dm.depth_to_space(data, "blocks_first", 2)
    assert len(recipes.RECIPES) == 1
    for got in (first, again):
        assert libraries.of(got) is libraries.of(data)  # the library's own kind: Dask stays lazy
        assert np.array_equal(np.asarray(got), dm.depth_to_space(x, "blocks_first", 2))
    with pytest.raises(DataMoveError, match="block_size"):  # a new shape is validated again
        dm.depth_to_space(xp.asarray(x[:, :6]), "blocks_first", 2)


def test_jax_jit_traces_through_a_kept_recipe():
    jax = pytest.importorskip("jax")
    x = np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4)
    f = jax.jit(lambda a: dm.space_to_depth(a, "depth_first", 2) * 2)
    expected = dm.space_to_depth(x, "depth_first", 2) * 2
    for _ in range(2):
        assert np.array_equal(np.asarray(f(x)), expected)
    assert np.array_equal(np.asarray(f(x[:, :, :2, :2])), dm.space_to_depth(x[:, :, :2, :2], "depth_first", 2) * 2)


def test_a_new_library_is_one_subclass(monkeypatch):
    """What the design page promises: an adapter overrides what differs and is recognised by one line."""

    class Boxed:
        def __init__(self, array):
            self.array = array
            self.shape, self.dtype = array.shape, array.dtype

        def __array_namespace__(self, api_version=None):  # pragma: no cover - not asked here
            raise TypeError("no namespace")

    class BoxedLibrary(libraries.Library):
        name = "tests.Boxed"

        def key(self, array):
            return (type(array), array.shape, array.dtype)

        def view(self, array):
            return array.array

        def from_numpy(self, result, like):
            return Boxed(result)

    adapter = BoxedLibrary()
    original = libraries._recognise
    monkeypatch.setattr(libraries, "_recognise", lambda a, k: adapter if k is Boxed else original(a, k))
    got = dm.space_to_depth(Boxed(np.arange(16).reshape(1, 1, 4, 4)), "blocks_first", 2)
    assert type(got) is Boxed and got.array.tolist() == [[[[0, 2], [8, 10]], [[1, 3], [9, 11]],
                                                           [[4, 6], [12, 14]], [[5, 7], [13, 15]]]]
    libraries._BY_TYPE.pop(Boxed, None)


def test_no_module_of_a_library_is_imported_to_recognise_one():
    code = ("import sys, numpy as np, datamove as dm; dm.space_to_depth(np.zeros((1, 1, 2, 2)), 'blocks_first', 2);"
            "dm.arrays.libraries.of([1]); print(sorted(m for m in ('torch', 'jax', 'cupy', 'dask', 'array_api_compat') "
            "if m in sys.modules))")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    assert importlib.util.find_spec("datamove.arrays.libraries") is not None


def test_a_torch_out_ready_for_the_gpu_recipe_is_one_check_out_takes():
    """libraries.TORCH.out_ready (the GPU recipe's test before it launches, never raising) says yes only to an
    ``out=`` that check_out takes and whose memory holds its own values (TORCH.lazy: no conjugate or negative
    view); each fault alone makes it say no."""
    torch = pytest.importorskip("torch")
    from datamove.arrays import libraries

    lib = libraries.TORCH
    data = torch.zeros((1, 4, 4, 4), dtype=torch.complex64)
    shape = (1, 16, 2, 2)
    good = torch.empty(shape, dtype=torch.complex64)
    faults = {
        "a NumPy array": np.empty(shape, np.complex64),
        "another shape": torch.empty((1, 16, 4, 1), dtype=torch.complex64),
        "another dtype": torch.empty(shape, dtype=torch.complex128),
        "another device": torch.empty(shape, dtype=torch.complex64, device="meta"),
        "a leaf that requires grad": torch.empty(shape, dtype=torch.complex64, requires_grad=True),
        "repeated elements": torch.empty((1, 16, 2, 1), dtype=torch.complex64).expand(shape),
        "a conjugate view": good.conj(),
        "a negative view": torch._neg_view(good),
    }
    assert lib.out_ready(data, good, shape) and not lib.lazy(good)
    lib.check_out(data, good, shape)
    for fault, out in faults.items():
        assert not lib.out_ready(data, out, shape), fault
    assert lib.lazy(faults["a conjugate view"]) and lib.lazy(faults["a negative view"])
    for fault in ("a conjugate view", "a negative view"):  # checked fine: a lazy view is written by copy_
        lib.check_out(data, faults[fault], shape)
    for fault in ("a NumPy array", "another shape", "another dtype", "another device", "a leaf that requires grad",
                  "repeated elements"):
        with pytest.raises((TypeError, dm.DataMoveError)):
            lib.check_out(data, faults[fault], shape)
