"""The route table (datamove.engines.route): plain facts about a call -> its path, tested as a table (no PyTorch, no GPU)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from datamove import DataMoveError
from datamove import engines
from datamove.engines import route
from datamove.engines.route import NATIVE_MIN_BYTES as NATIVE, PALLAS_MIN_BYTES as PALLAS, TRITON_MIN_BYTES as GPU, Facts, Route

BIG, SMALL = 1 << 30, 4096
T, J, D, C, S = "torch.Tensor", "jax.Array", "dask.array.Array", "cupy.ndarray", "array_api_strict.Array"


def f(kind, engine="auto", view=False, namespace=True, triton=False, cuda=False, nbytes=BIG, out_view=True, pallas=False):
    return Facts(kind, engine, view, namespace, triton, cuda, nbytes, out_view, pallas=pallas)


ROUTES = [
    # a PyTorch CPU tensor, no gradient: zero copy on a NumPy view, the compiled core from NATIVE bytes
    (f(T, view=True, nbytes=NATIVE), Route("native", True)),
    (f(T, view=True, nbytes=NATIVE - 1), Route("numpy", True)),
    # ... but an out= tensor without a NumPy view (it needs a gradient): the generic path
    (f(T, view=True, out_view=False), Route("array_api", False)),
    # a tensor that needs a gradient, or on a GPU without Triton: generic (autograd differentiates it)
    (f(T), Route("array_api", False)),
    (f(T, cuda=True), Route("array_api", False)),
    # a CUDA tensor with Triton: the kernel from GPU bytes, PyTorch's ops below
    (f(T, triton=True, cuda=True, nbytes=GPU), Route("triton", False)),
    (f(T, triton=True, cuda=True, nbytes=GPU - 1), Route("array_api", False)),
    (f(C, triton=True, cuda=True, nbytes=GPU), Route("triton", False)),
    # a CPU tensor under Triton's interpreter is not a GPU call: the view
    (f(T, view=True, triton=True, cuda=False, nbytes=GPU), Route("native", True)),
    # arrays of libraries with a namespace stay there even with a view (their result must be their kind)
    (f(J, view=True), Route("array_api", False)),
    # a JAX array on a GPU: the Pallas kernel from PALLAS bytes, XLA's own ops below, or where Pallas cannot
    # take it (a sub-byte dtype, a sharded array); on the CPU XLA's ops at any size
    (f(J, cuda=True, pallas=True, nbytes=PALLAS), Route("pallas", False)),
    (f(J, cuda=True, pallas=True, nbytes=PALLAS - 1), Route("array_api", False)),
    (f(J, cuda=True, pallas=False), Route("array_api", False)),
    (f(J, view=True, pallas=True), Route("array_api", False)),
    (f(J, pallas=True), Route("array_api", False)),  # a tracer under jit off a GPU
    (f(D), Route("array_api", False)),
    (f(S, view=True, nbytes=SMALL), Route("array_api", False)),
    # an object that only speaks DLPack: the view
    (f("foo.Bar", view=True, namespace=False, nbytes=SMALL), Route("numpy", True)),
    # forced engines, where they can run
    (f(T, "numpy", view=True), Route("numpy", True)),
    (f(T, "native", view=True, nbytes=SMALL), Route("native", True)),
    (f(T, "array_api", view=True), Route("array_api", False)),
    (f(J, "numpy", view=True), Route("numpy", True)),
    (f(T, "triton", triton=True, cuda=True, nbytes=SMALL), Route("triton", False)),
    (f(T, "triton", view=True, triton=True), Route("triton", False)),
    (f(J, "pallas", view=True, pallas=True, nbytes=SMALL), Route("pallas", False)),  # on the CPU: interpreted
    (f(J, "pallas", cuda=True, pallas=True, nbytes=SMALL), Route("pallas", False)),
]


@pytest.mark.parametrize("facts, expected", ROUTES, ids=[f"{i}" for i in range(len(ROUTES))])
def test_route_table(facts, expected):
    assert route.route(facts) == expected


REFUSED = [
    (f("foo.Bar", namespace=False), "no engine of this version can take a foo.Bar; convert it with numpy.asarray"),
    (f(T, "numpy"), "engine 'numpy' cannot take this torch.Tensor; engines that can: ['array_api']"),
    (f(T, "native", cuda=True, triton=True), "engine 'native' cannot take this torch.Tensor; engines that can: "
                                             "['array_api', 'triton']"),
    (f(J, "triton", view=True), "engine 'triton' cannot take this jax.Array (it takes PyTorch and CuPy arrays on a "
                                "CUDA device"),
    (f("foo.Bar", "array_api", view=True, namespace=False), "engine 'array_api' cannot take this foo.Bar; engines "
                                                             "that can: ['numpy', 'native']"),
    (f(T, "pallas", cuda=True, triton=True), "engine 'pallas' cannot take this torch.Tensor (it takes JAX arrays of "
                                             "whole-byte dtypes"),
    (f(J, "pallas", cuda=True), "engine 'pallas' cannot take this jax.Array (it takes JAX arrays of whole-byte dtypes, "
                                "fewer than 2**31 words, on one device; off a GPU in Pallas' interpreter); engines "
                                "that can: ['array_api']"),
]


@pytest.mark.parametrize("facts, message", REFUSED, ids=[f"{i}" for i in range(len(REFUSED))])
def test_refusals_name_the_engines_that_can(facts, message):
    with pytest.raises(DataMoveError, match=re.escape(message)):
        route.route(facts)


def test_able_follows_the_facts():
    assert route.able(f(T, view=True, triton=True)) == ["numpy", "native", "array_api", "triton"]
    assert route.able(f(J, view=True, pallas=True)) == ["numpy", "native", "array_api", "pallas"]
    assert route.able(f(D)) == ["array_api"]
    assert route.able(f("foo.Bar", namespace=False)) == []


def test_facts_of_real_arrays():
    x = np.zeros((2, 3), np.float32)
    facts = engines.facts(x)
    assert (facts.kind, facts.view, facts.namespace, facts.triton, facts.cuda, facts.nbytes) == (
        "numpy.ndarray", True, True, False, False, 24)
    assert engines.facts(np.zeros(2, object)).namespace is False  # outside the standard's dtypes
    torch = pytest.importorskip("torch")
    t = torch.zeros(4, 4)
    assert route.route(engines.facts(t)) == Route("numpy", True)
    needs_grad = torch.zeros(4, 4, requires_grad=True)
    assert route.route(engines.facts(needs_grad)) == Route("array_api", False)
    assert route.route(engines.facts(t, out=needs_grad)).engine == "array_api"


N = "numpy.ndarray"
REPEAT, TEMP = route.REPEAT_NATIVE_MIN_BYTES, route.TEMPORARY_MAX_BYTES


def n(engine="auto", nbytes=SMALL, plain=True, core=True):
    return Facts(N, engine, True, True, False, False, nbytes, plain=plain, core=core)


# A kept NumPy recipe on the NumPy engine: the core from its second call, asked for "auto" only, items it can
# copy, the core loaded, from REPEAT bytes.
REPEATS_ON_CORE = [
    (n(), True), (n(nbytes=REPEAT), True), (n(nbytes=REPEAT - 1), False),
    (n("numpy"), False), (n("native"), False), (n(plain=False), False), (n(core=False), False),
    (f(T, view=True, nbytes=SMALL), False),  # a tensor's repeats are TorchRecipe's
]


@pytest.mark.parametrize("facts, expected", REPEATS_ON_CORE, ids=[f"{i}" for i in range(len(REPEATS_ON_CORE))])
def test_repeats_on_core(facts, expected):
    assert route.repeats_on_core(facts) is expected


# SpaceToBatch / BatchToSpace with margins on the NumPy engine: through one temporary below NATIVE bytes, the
# temporary up to TEMP bytes; without margins never.
TWO_STEP = [
    ((n(), TEMP, True), True), ((n(), TEMP + 1, True), False), ((n(), 64, False), False),
    ((n(nbytes=NATIVE - 1), 64, True), True), ((n(nbytes=NATIVE), 64, True), False),
    ((n("numpy"), 64, True), True),
]


@pytest.mark.parametrize("args, expected", TWO_STEP, ids=[f"{i}" for i in range(len(TWO_STEP))])
def test_two_step(args, expected):
    assert route.two_step(*args) is expected


# A NumPy call's first call of a layout: to the core in one C call with engine auto or native, where data and
# any out= are exact ndarrays; every other engine (or an engine that is no string) and any subclass: the recipe.
FIRST_ON_CORE = [
    (("auto", True), True), (("native", True), True), (("auto", False), False), (("native", False), False),
    (("numpy", True), False), (("array_api", True), False), (("triton", True), False), ((None, True), False),
]


@pytest.mark.parametrize("args, expected", FIRST_ON_CORE, ids=[f"{i}" for i in range(len(FIRST_ON_CORE))])
def test_first_on_core(args, expected):
    assert route.first_on_core(*args) is expected


def test_first_calls_follow_the_table(monkeypatch):
    """datamove.ops asks route.first_on_core, and only it, whether a first call goes to the core."""
    import numpy as np
    import datamove as dm
    from datamove.dispatch import numpy_calls
    from datamove.engines.native import engine as native_engine

    if native_engine._native is None:
        pytest.skip("the compiled core is not loaded")
    asked = []
    monkeypatch.setattr(route, "first_on_core", lambda engine, ndarrays: asked.append((engine, ndarrays)) or False)
    monkeypatch.setattr(native_engine, "first_call", lambda *args: pytest.fail("the table said no"))
    from datamove.dispatch import recipes
    # Another test in this worker may have kept this layout's recipe: then no first call is made.
    numpy_calls.SEEN.clear(), recipes.RECIPES.clear()
    x = np.arange(2 * 4 * 6 * 6, dtype=np.float32).reshape(2, 4, 6, 10 - 4)
    shape = (2, 16, 3, 3)
    y = dm.space_to_depth(x + 0, "blocks_first", 2)  # a new layout's first call: the recipe's way
    assert y.shape == shape and asked and all(a == ("auto", True) for a in asked)
    assert (y == dm.space_to_depth(x, "blocks_first", 2, engine="numpy")).all()


def t(engine="auto", view=True, nbytes=SMALL, core=True, cuda=False, triton=False):
    return Facts(T, engine, view, True, triton, cuda, nbytes, core=core)


# A kept PyTorch recipe without out=: (PyTorch's own op straight away, the core from the tensor's address).
TENSOR_REPEATS = [
    ((t(), True, True, True), (True, True)),
    ((t(), False, True, True), (False, False)),  # a large temporary: neither (the dispatcher's numpy engine)
    ((t(), True, False, True), (False, False)),  # PyTorch cannot take it as it is (channels last, a rare dtype)
    ((t(), True, True, False), (True, False)),  # the core cannot read it (conjugate, a subclass, a GPU)
    ((t(nbytes=NATIVE), True, True, True), (False, True)),  # the native engine's: its repeats too
    ((t(nbytes=NATIVE, core=False), True, True, True), (False, False)),
    ((t(view=False), True, True, True), (True, False)),  # it needs a gradient: no NumPy view; PyTorch's op differentiates
    ((t("numpy"), True, True, True), (False, False)),  # an engine asked for runs as asked
    ((t("native", nbytes=SMALL), True, True, True), (False, True)),
    ((t(view=False, cuda=True), True, True, False), (True, False)),  # a CUDA tensor without Triton: PyTorch's op
]


@pytest.mark.parametrize("args, expected", TENSOR_REPEATS, ids=[f"{i}" for i in range(len(TENSOR_REPEATS))])
def test_tensor_repeats(args, expected):
    assert route.tensor_repeats(*args) == expected
