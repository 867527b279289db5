"""The checks of ``datamove.keras`` on one Keras backend, run by ``tests/test_keras.py`` as
``KERAS_BACKEND=<name> python tests/keras_checks.py`` (Keras picks its backend once, at import).

Prints one JSON object: ``{check: "ok" | "skipped: why" | "FAILED: what"}``. Every check compares with
datamove's NumPy path bit for bit (itself checked against the specs).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's own start-up lines (not datamove's)

# Quiet: whatever datamove's imports write to stdout and stderr, at the level of the file descriptors. Keras is
# imported first, on its own: its backend's start-up lines are the backend's (TensorFlow 2.21 writes its oneDNN
# line before absl's logging reads TF_CPP_MIN_LOG_LEVEL), not datamove's.
import keras  # noqa: E402
import numpy as np  # noqa: E402

_SAVED = [os.dup(1), os.dup(2)]
_CAPTURED = tempfile.TemporaryFile()
os.dup2(_CAPTURED.fileno(), 1)
os.dup2(_CAPTURED.fileno(), 2)
try:
    import datamove as dm  # noqa: E402
    from datamove import DataMoveError  # noqa: E402
    from datamove.keras import BatchToSpace, DepthToSpace, SpaceToBatch, SpaceToDepth  # noqa: E402
finally:
    sys.stdout.flush(), sys.stderr.flush()
    os.dup2(_SAVED[0], 1)
    os.dup2(_SAVED[1], 2)
_CAPTURED.seek(0)
PRINTED_AT_IMPORT = _CAPTURED.read().decode(errors="replace")

BACKEND = keras.backend.backend()
RNG = np.random.default_rng(4450)

# (layer, input shape, the datamove call it is)
CASES = [
    (SpaceToDepth("blocks_first", 2, data_format="channels_last"), (2, 4, 6, 3),
     lambda x: dm.space_to_depth(x, "blocks_first", 2, data_format="channels_last")),
    (SpaceToDepth("depth_first", 2, data_format="channels_first"), (2, 3, 4, 2, 6),
     lambda x: dm.space_to_depth(x, "depth_first", 2)),
    (DepthToSpace("depth_first", 3, data_format="channels_last"), (1, 2, 3, 18),
     lambda x: dm.depth_to_space(x, "depth_first", 3, data_format="channels_last")),
    (DepthToSpace("blocks_first", 2, data_format="channels_first"), (2, 8, 3),
     lambda x: dm.depth_to_space(x, "blocks_first", 2)),
    (SpaceToBatch([1, 2, 3, 1], [0, 1, 0, 0], [0, 1, 2, 0]), (2, 4, 4, 3),
     lambda x: dm.space_to_batch(x, [1, 2, 3, 1], [0, 1, 0, 0], [0, 1, 2, 0])),
    (BatchToSpace([1, 2, 2, 1], [0, 1, 0, 0], [0, 0, 3, 0]), (8, 3, 2, 3),
     lambda x: dm.batch_to_space(x, [1, 2, 2, 1], [0, 1, 0, 0], [0, 0, 3, 0])),
]


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _same(got, expected):
    got = _numpy(got)
    return got.shape == expected.shape and got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def check_quiet_import():
    """``import datamove, datamove.keras`` after ``import keras`` writes nothing."""
    assert PRINTED_AT_IMPORT == "", PRINTED_AT_IMPORT


def check_eager():
    for i, (layer, shape, call) in enumerate(CASES):
        for dtype in ("float32", "int32")[: 1 + (i % 2)]:  # (each new shape costs JAX a compile: a few int32)
            x = RNG.standard_normal(shape).astype(np.float32)
            x = (x * 100).astype(dtype)
            assert _same(layer(keras.ops.convert_to_tensor(x)), call(x)), (layer.name, dtype)


def check_compute_output_shape():
    for layer, shape, call in CASES:
        expected = call(np.zeros(shape, np.float32)).shape
        assert layer.compute_output_shape(shape) == expected, layer.name
        assert tuple(layer.compute_output_spec(keras.KerasTensor(shape)).shape) == expected
    # unknown dims stay None; a Dim interval (pads on an unknown dim) is None for Keras
    assert SpaceToBatch([1, 2, 1], [0, 1, 0], [0, 1, 0]).compute_output_shape((None, None, 5)) == (None, None, 5)
    assert DepthToSpace("blocks_first", 2, data_format="channels_last").compute_output_shape(
        (None, None, 7, 12)) == (None, None, 14, 3)
    try:
        DepthToSpace("blocks_first", 2, data_format="channels_last").compute_output_shape((None, 3, 3, 6))
    except DataMoveError as exc:
        assert "data.shape[3] = 6 is not divisible by block_size ** 2 = 4" in str(exc), exc
    else:
        raise AssertionError("no DataMoveError")


def check_bad_parameters():
    for build, said in [(lambda: SpaceToDepth("blocks-first", 2), "mode must be 'blocks_first' or 'depth_first'"),
                        (lambda: DepthToSpace("depth_first", 0), "block_size must be >= 1"),
                        (lambda: SpaceToDepth("depth_first", 2, data_format="NHWC"), "data_format must be"),
                        (lambda: SpaceToBatch([1, 2], [0, 0, 0], [0, 0]), "must have the same length"),
                        (lambda: BatchToSpace([2, 1], [0, 0], [0, 0]), "block_shape[0] must be 1")]:
        try:
            build()
        except DataMoveError as exc:
            assert said in str(exc), (said, str(exc))
        else:
            raise AssertionError(f"no DataMoveError: {said}")


def check_default_data_format():
    assert SpaceToDepth("blocks_first", 2).data_format == keras.config.image_data_format()


def check_config_round_trip():
    for layer, shape, call in CASES:
        config = layer.get_config()
        again = type(layer).from_config(config)
        assert again.get_config() == config and again.compute_output_shape(shape) == call(np.zeros(shape)).shape


def _model():
    """A convolution, then SpaceToDepth and DepthToSpace (channels last), with unknown height and width."""
    inputs = keras.Input((None, None, 3))
    x = keras.layers.Conv2D(4, 3, padding="same")(inputs)
    x = SpaceToDepth("depth_first", 2, data_format="channels_last")(x)
    x = keras.layers.Conv2D(8, 1)(x)
    outputs = DepthToSpace("blocks_first", 2, data_format="channels_last")(x)
    return keras.Model(inputs, outputs)


def check_dynamic_dims():
    """A model built with unknown batch, height and width takes any size (one graph where the backend traces)."""
    inputs = keras.Input((None, None, 3))
    x = SpaceToDepth("depth_first", 2, data_format="channels_last")(inputs)
    x = SpaceToBatch([1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 1, 0])(x)
    model = keras.Model(inputs, DepthToSpace("blocks_first", 2, data_format="channels_last")(x))
    assert tuple(model.output.shape) == (None, None, None, 3)
    for shape in [(1, 4, 4, 3), (3, 8, 12, 3)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        y = dm.space_to_depth(x, "depth_first", 2, data_format="channels_last")
        y = dm.space_to_batch(y, [1, 1, 2, 1], [0, 0, 1, 0], [0, 0, 1, 0])
        assert _same(model(x), dm.depth_to_space(y, "blocks_first", 2, data_format="channels_last")), shape


def check_save_load():
    model = _model()
    x = RNG.standard_normal((2, 6, 4, 3)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
    assert [type(layer).__name__ for layer in loaded.layers][2] == "SpaceToDepth"
    assert np.array_equal(_numpy(loaded(x)), _numpy(model(x)))


def check_gradients():
    """The layer's gradient is the adjoint op applied to the upstream gradient, exactly (the backend's own autodiff)."""
    layer, shape, call = CASES[1]  # SpaceToDepth depth_first, channels first, 3 spatial dims
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal(call(x).shape).astype(np.float32)
    expected = dm.depth_to_space(w, "depth_first", 2)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        t = tf.Variable(x)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(t) * w)
        grad = tape.gradient(loss, t)
    elif BACKEND == "jax":
        import jax

        grad = jax.grad(lambda t: (layer(t) * w).sum())(x)
    else:
        import torch

        t = torch.tensor(x, requires_grad=True)
        (layer(t) * torch.tensor(w)).sum().backward()
        grad = t.grad
    assert _same(grad, expected)


def check_training():
    """One step of model.fit (compiled as the backend compiles by default: XLA on JAX and TensorFlow)."""
    model = _model()
    model.compile(optimizer="sgd", loss="mse")
    x = RNG.standard_normal((4, 4, 4, 3)).astype(np.float32)
    before = [_numpy(w).copy() for w in model.trainable_weights]
    history = model.fit(x, np.zeros((4, 4, 4, 2), np.float32), epochs=1, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert all(not np.array_equal(a, _numpy(b)) for a, b in zip(before, model.trainable_weights))


def check_compiled():
    """Each layer inside the backend's compiler: jax.jit, tf.function(jit_compile=True)."""
    if BACKEND == "jax":
        import jax

        compile_ = jax.jit
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        compile_ = lambda f: tf.function(f, jit_compile=True)  # noqa: E731
    else:
        return "skipped: torch.compile takes about 20 s per graph on the CI machine; eager and autograd are checked"
    for layer, shape, call in CASES:
        x = RNG.standard_normal(shape).astype(np.float32)
        assert _same(compile_(lambda t: layer(t))(x), call(x)), layer.name
    return "ok"


def check_export():
    """TensorFlow backend: model.export to a SavedModel, reloaded by TensorFlow alone, on sizes it never saw."""
    if BACKEND != "tensorflow":
        return "skipped: model.export(format='tf_saved_model') is the TensorFlow backend's"
    import tensorflow as tf

    model = _model()
    with tempfile.TemporaryDirectory() as folder:
        model.export(folder, format="tf_saved_model", verbose=False)
        served = tf.saved_model.load(folder)
        for shape in [(1, 4, 6, 3), (2, 10, 2, 3)]:
            x = RNG.standard_normal(shape).astype(np.float32)
            assert np.array_equal(served.serve(x).numpy(), _numpy(model(x))), shape
    return "ok"


def main():
    results = {}
    for name, check in list(globals().items()):
        if name.startswith("check_"):
            try:
                said = check()
                results[name[len("check_"):]] = said or "ok"
            except Exception:
                results[name[len("check_"):]] = "FAILED: " + traceback.format_exc()[-2000:]
    print(json.dumps({"backend": BACKEND, "results": results}))


if __name__ == "__main__":
    sys.exit(main())
