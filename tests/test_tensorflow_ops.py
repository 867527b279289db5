"""The four operations on TensorFlow's own tensors (``datamove.dispatch.tensorflow``), against TensorFlow itself.

Eager tensors and variables, ``tf.function`` with unknown dims (one trace for every size), ``jit_compile=True``,
``tf.GradientTape`` against TensorFlow's own ops' gradients, SavedModel export and reload, and every rule broken:
known sizes raise DataMoveError while tracing, with the NumPy path's very message; unknown ones fail when the
graph runs, with a message in the same words.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import re
import subprocess
import sys

import numpy as np
import pytest

import datamove as dm
from compat_helpers import bits
from datamove import DataMoveError

tf = pytest.importorskip("tensorflow", reason="TensorFlow (tensorflow-cpu, a test extra) is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes")

DTYPES = ("bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128", "string")
OPS = ("space_to_depth", "depth_to_space", "space_to_batch", "batch_to_space")
CASES = 240  # per op


def _array(rng, shape, dtype):
    """Random bits of a TensorFlow dtype, as the NumPy array TensorFlow gives back for it."""
    if dtype == "string":
        words = np.array([b"", b"a", b"bc", b"\x00d"], dtype=object)
        return words[rng.integers(0, 4, shape)]
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    kind = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    raw = rng.integers(0, 256, int(np.prod(shape)) * kind.itemsize, dtype=np.uint8)
    return raw.view(kind).reshape(shape)


def _numpy(x):
    """The NumPy path's input: TensorFlow's strings as fixed-width bytes, where datamove pads with b''."""
    return x.astype(bytes) if x.dtype == object else x


def _same(got, expected):
    got = got.numpy() if hasattr(got, "numpy") else got
    if got.dtype == object:
        return got.shape == expected.shape and got.astype(bytes).tolist() == expected.tolist()
    return bits(got) == bits(expected)


def _case(rng, op):
    """(shape, args, kwargs) of a valid call of ``op``: ranks 2-5, both modes and data formats, crops and pads."""
    if op in ("space_to_depth", "depth_to_space"):
        size = int(rng.choice([1, 2, 2, 3]))
        spatial = int(rng.choice([1, 2, 2, 3]))
        last = bool(rng.random() < 0.6)
        c = int(rng.integers(1, 4)) * (size**spatial if op == "depth_to_space" else 1)
        dims = [int(rng.integers(0 if rng.random() < 0.05 else 1, 4)) * (size if op == "space_to_depth" else 1)
                for _ in range(spatial)]
        n = int(rng.integers(0 if rng.random() < 0.05 else 1, 3))
        shape = (n, *dims, c) if last else (n, c, *dims)
        mode = str(rng.choice(["blocks_first", "depth_first"]))
        return shape, (mode, size), {"data_format": "channels_last" if last else "channels_first"}
    rank = int(rng.integers(2, 6))
    block = [1] + [int(rng.choice([1, 1, 2, 3])) for _ in range(rank - 1)]
    dims, begin, end = [], [0], [0]
    for b in block[1:]:
        if op == "space_to_batch":
            padded = b * int(rng.integers(0 if rng.random() < 0.05 else 1, 4))
            d = int(rng.integers(0, padded + 1))
            first = int(rng.integers(0, padded - d + 1))
            dims.append(d), begin.append(first), end.append(padded - d - first)
        else:
            d = int(rng.integers(0 if rng.random() < 0.05 else 1, 4))
            total = int(rng.integers(0, d * b + 1))
            first = int(rng.integers(0, total + 1))
            dims.append(d), begin.append(first), end.append(total - first)
    n = int(rng.integers(0 if rng.random() < 0.05 else 1, 3)) * (int(np.prod(block)) if op == "batch_to_space" else 1)
    return (n, *dims), (block, begin, end), {}


@pytest.mark.parametrize("op", OPS)
def test_random_cases_bit_for_bit(op):
    """Eager tensors of every dtype TensorFlow has, against datamove's NumPy path (itself checked against the specs),
    and a tf.Tensor comes back."""
    rng = np.random.default_rng(4400 + OPS.index(op))
    function = getattr(dm, op)
    seen = set()
    for i in range(CASES):
        shape, args, kwargs = _case(rng, op)
        dtype = DTYPES[i % len(DTYPES)]
        x = _array(rng, shape, dtype)
        data = tf.constant(x) if i % 5 else tf.Variable(x)
        got = function(data, *args, **kwargs)
        assert isinstance(got, tf.Tensor) and got.dtype == data.dtype, (shape, args, kwargs, dtype)
        expected = function(_numpy(x), *args, **kwargs)
        assert _same(got, expected), (shape, args, kwargs, dtype)
        seen.add(dtype)
    assert seen == set(DTYPES)


def test_tensorflows_own_ops_where_they_are_the_op():
    """NHWC blocks_first runs tf.nn.space_to_depth/depth_to_space; the ND ops run SpaceToBatchND/BatchToSpaceND
    (their dtypes); and each equals TensorFlow's op called directly."""
    rng = np.random.default_rng(4410)
    x = tf.constant(rng.standard_normal((2, 6, 4, 3)), tf.float32)

    def traced(function, data):
        graph = tf.function(function).get_concrete_function(tf.TensorSpec(data.shape, data.dtype)).graph
        return {op.type for op in graph.get_operations()}

    s2d = lambda t: dm.space_to_depth(t, "blocks_first", 2, data_format="channels_last")  # noqa: E731
    assert "SpaceToDepth" in traced(s2d, x) and bits(s2d(x)) == bits(tf.nn.space_to_depth(x, 2))
    y = tf.nn.space_to_depth(x, 2)
    d2s = lambda t: dm.depth_to_space(t, "blocks_first", 2, data_format="channels_last")  # noqa: E731
    assert "DepthToSpace" in traced(d2s, y) and bits(d2s(y)) == bits(x)
    s2b = lambda t: dm.space_to_batch(t, [1, 2, 3, 1], [0, 1, 1, 0], [0, 1, 1, 0])  # noqa: E731
    assert "SpaceToBatchND" in traced(s2b, x)
    assert bits(s2b(x)) == bits(tf.space_to_batch_nd(x, [2, 3], [[1, 1], [1, 1]]))
    b2s = lambda t: dm.batch_to_space(t, [1, 2, 1, 1], [0, 1, 0, 0], [0, 2, 0, 0])  # noqa: E731
    assert "BatchToSpaceND" in traced(b2s, x) and bits(b2s(x)) == bits(tf.batch_to_space(x, [2, 1], [[1, 2], [0, 0]]))
    # no kernel for bool in the ND ops, NCHW only on GPU for the depth ops: the spec's formula
    assert "SpaceToBatchND" not in traced(s2b, tf.cast(x, tf.bool))
    assert "SpaceToDepth" not in traced(lambda t: dm.space_to_depth(t, "blocks_first", 2), tf.zeros((1, 3, 4, 4)))


SIGNATURES = {  # an input_signature with unknown dims, the call, and inputs of several sizes
    "space_to_depth": ([None, None, None, 3], ("depth_first", 2), {"data_format": "channels_last"},
                       [(1, 4, 6, 3), (3, 8, 2, 3), (2, 0, 4, 3)]),
    "depth_to_space": ([None, 12, None, None], ("blocks_first", 2), {}, [(1, 12, 3, 5), (4, 12, 1, 1)]),
    "space_to_batch": ([None, None, None, 2], ([1, 2, 3, 1], [0, 1, 0, 0], [0, 0, 2, 0]), {},
                       [(1, 3, 4, 2), (2, 5, 1, 2), (3, 1, 7, 2)]),
    "batch_to_space": ([None, None, None], ([1, 2, 2], [0, 1, 0], [0, 0, 3]), {}, [(4, 3, 2), (8, 1, 5)]),
}


@pytest.mark.parametrize("op", OPS)
def test_tf_function_with_unknown_dims_traces_once(op):
    spec, args, kwargs, sizes = SIGNATURES[op]
    function = getattr(dm, op)
    traced = tf.function(lambda t: function(t, *args, **kwargs), input_signature=[tf.TensorSpec(spec, tf.float32)])
    compiled = tf.function(lambda t: function(t, *args, **kwargs), jit_compile=True)
    rng = np.random.default_rng(4420)
    for shape in sizes:
        x = rng.standard_normal(shape).astype(np.float32)
        expected = function(x, *args, **kwargs)
        assert bits(traced(tf.constant(x))) == bits(expected), shape
        assert bits(compiled(tf.constant(x))) == bits(expected), shape
    assert traced.experimental_get_tracing_count() == 1
    # the output's static shape keeps what is known (the channels, a block product) and no more
    out = traced.get_concrete_function().structured_outputs
    assert out.shape.rank == len(spec)
    known = dm.shapes.__dict__[op](tuple(spec), *args, **kwargs)
    assert out.shape.as_list() == [d if isinstance(d, int) else None for d in known]


@pytest.mark.parametrize("op", OPS)
def test_gradients_are_tensorflows(op):
    """GradientTape through the call, on a tf.Variable: the gradient TensorFlow's own op gives (NHWC, blocks_first,
    the ND ops) or the adjoint op's result (the other paths), exactly."""
    rng = np.random.default_rng(4430 + OPS.index(op))
    spec, args, kwargs, sizes = SIGNATURES[op]
    function = getattr(dm, op)
    x = tf.Variable(rng.standard_normal(sizes[0]).astype(np.float64))
    with tf.GradientTape() as tape:
        y = function(x, *args, **kwargs)
        weights = tf.constant(rng.standard_normal(y.shape.as_list()))
        loss = tf.reduce_sum(y * weights)
    grad = tape.gradient(loss, x)
    assert grad is not None
    if op in ("space_to_depth", "depth_to_space"):
        inverse = dm.depth_to_space if op == "space_to_depth" else dm.space_to_depth
        expected = inverse(weights.numpy(), *args, **kwargs)
    else:
        inverse = dm.batch_to_space if op == "space_to_batch" else dm.space_to_batch
        expected = inverse(weights.numpy(), *args)
    assert bits(grad) == bits(expected)
    # against TensorFlow's own op's gradient, where it is the op
    native = {"space_to_depth": (lambda t: tf.nn.space_to_depth(t, 2),
                                 lambda t: dm.space_to_depth(t, "blocks_first", 2, data_format="channels_last")),
              "depth_to_space": (lambda t: tf.nn.depth_to_space(t, 2),
                                 lambda t: dm.depth_to_space(t, "blocks_first", 2, data_format="channels_last")),
              "space_to_batch": (lambda t: tf.space_to_batch_nd(t, [2, 1], [[1, 1], [0, 0]]),
                                 lambda t: dm.space_to_batch(t, [1, 2, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0])),
              "batch_to_space": (lambda t: tf.batch_to_space(t, [2, 1], [[0, 1], [0, 0]]),
                                 lambda t: dm.batch_to_space(t, [1, 2, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0]))}[op]
    x = tf.Variable(rng.standard_normal((4, 4, 6, 8)))
    grads = []
    for call in native:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(call(x) * tf.constant(np.arange(np.prod(call(x).shape)).reshape(call(x).shape), x.dtype))
        grads.append(tape.gradient(loss, x))
    assert bits(grads[0]) == bits(grads[1])


def test_savedmodel_export_and_reload(tmp_path):
    """A tf.Module calling two ops exports with unknown batch and spatial dims; the reloaded model (TensorFlow ops
    only: no Python of datamove in it) takes sizes it never saw."""

    class Model(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
        def __call__(self, x):
            y = dm.space_to_depth(x, "depth_first", 2, data_format="channels_last")
            return dm.space_to_batch(y, [1, 2, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0])

    model = Model()
    tf.saved_model.save(model, str(tmp_path / "model"))
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    rng = np.random.default_rng(4440)
    for shape in [(1, 4, 4, 3), (2, 8, 10, 3), (3, 12, 2, 3)]:
        x = rng.standard_normal(shape).astype(np.float32)
        y = dm.space_to_depth(x, "depth_first", 2, data_format="channels_last")
        expected = dm.space_to_batch(y, [1, 2, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0])
        assert bits(loaded(tf.constant(x))) == bits(expected), shape
    graph_ops = {op.type for f in loaded.__call__.concrete_functions for op in f.graph.get_operations()}
    assert not {t for t in graph_ops if "Py" in t}, graph_ops


# ------------------------------------------------------------------ every rule broken


BROKEN = [  # (op, shape, args, kwargs): each breaks one rule of datamove.rules.shapes
    ("space_to_depth", (1, 3, 4, 6), ("blocks_first", 4), {}),                           # D not divisible
    ("space_to_depth", (1, 3, 4), ("blocks-first", 2), {}),                               # mode
    ("space_to_depth", (1, 4, 4, 3), ("blocks_first", 0), {"data_format": "channels_last"}),  # block_size >= 1
    ("space_to_depth", (1, 4), ("blocks_first", 2), {}),                                  # rank >= 3
    ("space_to_depth", (1, 4, 4, 3), ("blocks_first", 2), {"data_format": "NHWC"}),       # data_format
    ("depth_to_space", (1, 6, 2, 2), ("depth_first", 2), {}),                             # C not divisible
    ("depth_to_space", (1, 2, 2, 6), ("depth_first", 2), {"data_format": "channels_last"}),
    ("batch_to_space", (6, 2, 2), ([1, 2, 2], [0, 0, 0], [0, 0, 0]), {}),                # batch not divisible
    ("batch_to_space", (4, 2, 2), ([1, 2, 2], [0, 3, 0], [0, 2, 0]), {}),                # crops exceed
    ("batch_to_space", (4, 2, 2), ([2, 2, 1], [0, 0, 0], [0, 0, 0]), {}),                # block_shape[0] = 1
    ("batch_to_space", (4, 2, 2), ([1, 2], [0, 0], [0, 0]), {}),                         # lengths
    ("batch_to_space", (4, 2, 2), ([1, 2, 2], [1, 0, 0], [0, 0, 0]), {}),                # crops_begin[0] = 0
    ("space_to_batch", (1, 3, 4), ([1, 2, 2], [0, 0, 0], [0, 0, 0]), {}),                # pads not divisible
    ("space_to_batch", (1, 3, 4), ([1, 0, 2], [0, 0, 0], [0, 0, 0]), {}),                # block >= 1
    ("space_to_batch", (1, 3, 4), ([1, 1, 2], [0, -1, 0], [0, 0, 0]), {}),               # pads >= 0
]


def _message(function, *args, **kwargs):
    with pytest.raises((DataMoveError, TypeError)) as info:
        function(*args, **kwargs)
    return info.type, str(info.value)


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: f"{c[0]}{c[1]}")
def test_each_rule_raises_the_numpy_paths_error(case):
    op, shape, args, kwargs = case
    function = getattr(dm, op)
    expected = _message(function, np.zeros(shape, np.float32), *args, **kwargs)
    assert _message(function, tf.zeros(shape), *args, **kwargs) == expected
    assert _message(function, tf.Variable(tf.zeros(shape)), *args, **kwargs) == expected
    # inside tf.function, with known sizes: while tracing, the same DataMoveError (AutoGraph adds the traced lines)
    kind, message = _message(tf.function(lambda t: function(t, *args, **kwargs)), tf.zeros(shape))
    assert kind is expected[0] and expected[1] in message


RUN_TIME = [  # (op, input_signature, args, kwargs, a size that breaks the rule, what the message says)
    ("space_to_depth", [None, 3, None, None], ("blocks_first", 2), {}, (1, 3, 4, 5),
     "space_to_depth: data.shape[3] must be divisible by block_size = 2"),
    ("depth_to_space", [None, None, None, None], ("depth_first", 2), {"data_format": "channels_last"}, (1, 2, 2, 6),
     "depth_to_space: data.shape[3] must be divisible by block_size ** 2 = 4"),
    ("batch_to_space", [None, 2, 2], ([1, 2, 1], [0, 0, 0], [0, 0, 0]), {}, (3, 2, 2),
     "batch_to_space: data.shape[0] must be divisible by the product of block_shape [1, 2, 1] = 2"),
    ("batch_to_space", [2, None, 2], ([1, 2, 1], [0, 2, 0], [0, 1, 0]), {}, (2, 1, 2),
     "batch_to_space: crops_begin[1] + crops_end[1] = 3 must not exceed data.shape[1] * block_shape[1]"),
    ("space_to_batch", [1, None, 2], ([1, 3, 1], [0, 1, 0], [0, 0, 0]), {}, (1, 3, 2),
     "space_to_batch: data.shape[1] + pads_begin[1] + pads_end[1] (= data.shape[1] + 1) must be divisible by "
     "block_shape[1] = 3"),
]


@pytest.mark.parametrize("case", RUN_TIME, ids=lambda c: c[0])
def test_rules_on_unknown_dims_are_checked_when_the_graph_runs(case):
    op, spec, args, kwargs, bad, said = case
    function = getattr(dm, op)
    traced = tf.function(lambda t: function(t, *args, **kwargs), input_signature=[tf.TensorSpec(spec, tf.float32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(said)):
        traced(tf.zeros(bad))
    with pytest.raises(DataMoveError):  # eager: every dim known, the NumPy path's error
        function(tf.zeros(bad), *args, **kwargs)


def test_what_tensorflow_tensors_refuse():
    x = tf.zeros((1, 2, 4, 4))
    with pytest.raises(TypeError, match=r"out= cannot be used with TensorFlow tensors: they are immutable"):
        dm.space_to_depth(x, "blocks_first", 2, out=tf.zeros((1, 8, 2, 2)))
    with pytest.raises(DataMoveError, match=r"engine 'native' cannot take a tf.Tensor: .* use engine='auto'"):
        dm.depth_to_space(x, "blocks_first", 1, engine="native")
    with pytest.raises(DataMoveError, match=r"engine must be 'auto' or one of"):
        dm.depth_to_space(x, "blocks_first", 1, engine="cuda")
    with pytest.raises(DataMoveError, match=r"engine 'numpy' cannot take a tf.Variable"):
        dm.batch_to_space(tf.Variable(x), [1, 1, 1, 1], [0] * 4, [0] * 4, engine="numpy")
    with pytest.raises(TypeError, match=r"block_size is required"):
        dm.space_to_depth(x, "blocks_first", None)
    unknown_rank = tf.function(lambda t: dm.space_to_depth(t, "blocks_first", 2),
                               input_signature=[tf.TensorSpec(None, tf.float32)])
    with pytest.raises(DataMoveError, match=r"data has an unknown rank .* input_signature of known rank"):
        unknown_rank.get_concrete_function()
    traced_size = tf.function(lambda t, b: dm.space_to_depth(t, "blocks_first", b))
    with pytest.raises(TypeError, match=r"block_size must be an integer, got SymbolicTensor .* pass a Python int"):
        traced_size(x, tf.constant(2))
    assert traced_size(x, 2).shape == (1, 8, 2, 2)  # a Python int: static


def test_import_datamove_imports_no_framework_and_prints_nothing():
    code = ("import sys, datamove, datamove.compat.tensorflow, datamove.ir; "
            "print(sorted(m for m in ('tensorflow', 'keras', 'jax', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")
