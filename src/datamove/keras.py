"""Keras 3 layers for the four operations: ``datamove.keras``.

:class:`SpaceToDepth`, :class:`DepthToSpace`, :class:`SpaceToBatch` and
:class:`BatchToSpace` hold their parameters, checked when the layer is built
(the operations' own rules and messages), and compute through ``keras.ops``
only (the spec's pad/reshape/transpose/reshape/crop,
``datamove.plans.formulas.follow``), so they run on every Keras backend
(TensorFlow, JAX, PyTorch), inside ``jit``/``tf.function``, with gradients.
``compute_output_shape`` is :mod:`datamove.shapes`' (a dim Keras does not
know stays ``None``), the rules on known sizes raise
:class:`~datamove.DataMoveError` while the model is built, ``get_config``
lists every argument, and a model holding them saves to ``.keras`` and loads
back (``register_keras_serializable``, package ``"datamove"``). They are
stateless: no weights.

This module imports Keras (and so its backend); ``import datamove`` does not.

Examples
--------
A sub-pixel upsampling head (ESPCN) in Keras' channels-last images: a
convolution to ``3 * 2 ** 2`` channels, then :class:`DepthToSpace` in
TensorFlow's (``blocks_first``) order; height and width stay unknown:

>>> import keras
>>> from datamove.keras import DepthToSpace
>>> inputs = keras.Input((None, None, 8))
>>> features = keras.layers.Conv2D(12, 3, padding="same")(inputs)
>>> model = keras.Model(inputs, DepthToSpace("blocks_first", 2, data_format="channels_last")(features))
>>> model.output.shape
(None, None, None, 3)
>>> tuple(model(keras.ops.zeros((1, 5, 7, 8))).shape)
(1, 10, 14, 3)
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, SupportsIndex, Tuple

try:
    import keras
except ModuleNotFoundError as exc:  # pragma: no cover - keras is a test extra (with tensorflow-cpu)
    raise ModuleNotFoundError(
        "datamove.keras needs Keras 3 (pip install keras, and a backend: tensorflow, jax or torch)", name=exc.name
    ) from exc

from .plans import formulas
from .rules import shapes
from .rules.params import data_format_arg
from .rules.types import DataFormat, IntVector, Mode

__all__ = ["SpaceToDepth", "DepthToSpace", "SpaceToBatch", "BatchToSpace"]


def _keras_dims(shape: Any) -> Optional[Tuple[Optional[int], ...]]:
    """A shape of :mod:`datamove.shapes` as Keras writes one: an interval dim (``Dim``) is ``None``."""
    if shape is None:
        return None
    return tuple(d if d is None or isinstance(d, int) else None for d in shape)


def _pad(x: Any, pairs: Sequence[Tuple[int, int]]) -> Any:
    return keras.ops.pad(x, [list(p) for p in pairs])


class _Layer(keras.layers.Layer):  # type: ignore[misc]  # (Keras has no type information)
    """What the four layers share: ``call`` through ``keras.ops``, ``compute_output_shape`` from the rule."""

    op = ""

    def _resolve(self, shape: Any) -> shapes.Resolved:
        raise NotImplementedError

    def _data_format(self) -> str:
        return "channels_first"

    def call(self, inputs: Any) -> Any:
        shape: Any = keras.ops.shape(inputs)  # ints, or (TensorFlow) scalar tensors for the unknown dims
        sizes: List[Any] = list(shape)
        resolved = self._resolve(tuple(d if isinstance(d, int) else None for d in sizes))
        last = self._data_format() == "channels_last"
        rank = len(sizes)
        if last:  # channels-last images: the spec's channels-first formula between two transposes
            first = (0, rank - 1, *range(1, rank - 1))
            inputs, sizes = keras.ops.transpose(inputs, first), [sizes[i] for i in first]
        dims: Any = tuple(sizes)
        steps = formulas.steps(self.op, resolved.params, dims)
        result = formulas.follow(steps, inputs, keras.ops.reshape, keras.ops.transpose, _pad)
        return keras.ops.transpose(result, (0, *range(2, rank), 1)) if last else result

    def compute_output_shape(self, input_shape: Any) -> Any:
        return _keras_dims(self._resolve(tuple(input_shape)).public())


class _DepthLayer(_Layer):
    """SpaceToDepth / DepthToSpace: ``mode``, ``block_size``, ``data_format``."""

    def __init__(self, mode: Mode, block_size: SupportsIndex, data_format: Optional[DataFormat] = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        chosen = data_format_arg(keras.config.image_data_format() if data_format is None else data_format)
        params = self._rule(None, mode, block_size, chosen).params  # the rules on the parameters alone
        self.mode: Mode = params["mode"]
        self.block_size: int = params["block_size"]
        self.data_format: DataFormat = chosen

    @staticmethod
    def _rule(shape: Any, mode: Any, block_size: Any, data_format: Any) -> shapes.Resolved:
        raise NotImplementedError

    def _resolve(self, shape: Any) -> shapes.Resolved:
        return self._rule(shape, self.mode, self.block_size, self.data_format)

    def _data_format(self) -> str:
        return self.data_format

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "mode": self.mode, "block_size": self.block_size,
                "data_format": self.data_format}


@keras.saving.register_keras_serializable(package="datamove")
class SpaceToDepth(_DepthLayer):
    """SpaceToDepth-1 as a Keras layer: :func:`datamove.space_to_depth` through ``keras.ops``.

    Parameters
    ----------
    mode : {"blocks_first", "depth_first"}
        Output channels ordered ``[block_size, ..., block_size, C]``
        (blocks_first: TensorFlow's ``tf.nn.space_to_depth``, ONNX's DCR) or
        ``[C, block_size, ..., block_size]`` (depth_first: PyTorch's ``pixel_unshuffle``).
    block_size : int
        ``>= 1``; every spatial dim must be divisible by it.
    data_format : {"channels_first", "channels_last"}, optional
        Default: ``keras.config.image_data_format()`` (``"channels_last"``
        unless configured). Any number of spatial dims (rank >= 3).
    **kwargs
        Keras' own (``name``, ``dtype``, ...).

    Examples
    --------
    >>> import keras, numpy as np
    >>> from datamove.keras import SpaceToDepth
    >>> layer = SpaceToDepth("blocks_first", 2, data_format="channels_last")
    >>> layer.compute_output_shape((None, 4, None, 3))
    (None, 2, None, 12)
    >>> keras.ops.convert_to_numpy(layer(np.arange(4.0).reshape(1, 2, 2, 1))).ravel()
    array([0., 1., 2., 3.], dtype=float32)
    """

    op = "space_to_depth"

    @staticmethod
    def _rule(shape: Any, mode: Any, block_size: Any, data_format: Any) -> shapes.Resolved:
        return shapes.resolve_space_to_depth(shape, mode, block_size, data_format)


@keras.saving.register_keras_serializable(package="datamove")
class DepthToSpace(_DepthLayer):
    """DepthToSpace-1 as a Keras layer: :func:`datamove.depth_to_space` through ``keras.ops``.

    Parameters
    ----------
    mode : {"blocks_first", "depth_first"}
        Input channels read as ``[block_size, ..., block_size, C']``
        (blocks_first: TensorFlow's ``tf.nn.depth_to_space``, ONNX's DCR) or
        ``[C', block_size, ..., block_size]`` (depth_first: PyTorch's ``pixel_shuffle``).
    block_size : int
        ``>= 1``; the channels must be divisible by ``block_size ** K`` (K spatial dims).
    data_format : {"channels_first", "channels_last"}, optional
        Default: ``keras.config.image_data_format()``.
    **kwargs
        Keras' own (``name``, ``dtype``, ...).

    Examples
    --------
    >>> from datamove.keras import DepthToSpace
    >>> DepthToSpace("depth_first", 2, data_format="channels_first").compute_output_shape((None, 12, 5, None))
    (None, 3, 10, None)
    """

    op = "depth_to_space"

    @staticmethod
    def _rule(shape: Any, mode: Any, block_size: Any, data_format: Any) -> shapes.Resolved:
        return shapes.resolve_depth_to_space(shape, mode, block_size, data_format)


class _SpaceLayer(_Layer):
    """SpaceToBatch / BatchToSpace: ``block_shape`` and the two margins (pads or crops), per axis."""

    _margins = ("", "")

    def __init__(self, block_shape: IntVector, begin: IntVector, end: IntVector, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        params = self._rule(None, block_shape, begin, end).params  # the rules on the parameters alone
        self.block_shape: List[int] = list(params["block_shape"])
        self._begin: List[int] = list(params[self._margins[0]])
        self._end: List[int] = list(params[self._margins[1]])

    @staticmethod
    def _rule(shape: Any, block_shape: Any, begin: Any, end: Any) -> shapes.Resolved:
        raise NotImplementedError

    def _resolve(self, shape: Any) -> shapes.Resolved:
        return self._rule(shape, self.block_shape, self._begin, self._end)

    def get_config(self) -> Dict[str, Any]:
        names = self._margins
        return {**super().get_config(), "block_shape": self.block_shape, names[0]: self._begin, names[1]: self._end}


@keras.saving.register_keras_serializable(package="datamove")
class SpaceToBatch(_SpaceLayer):
    """SpaceToBatch-2 as a Keras layer: :func:`datamove.space_to_batch` through ``keras.ops``.

    Parameters
    ----------
    block_shape, pads_begin, pads_end : sequence of N ints
        One entry per input axis, the batch axis included (block 1, pads 0
        there), as in the spec; ``D_i + pads_begin[i] + pads_end[i]`` must be
        divisible by ``block_shape[i]``.
    **kwargs
        Keras' own (``name``, ``dtype``, ...).

    Examples
    --------
    >>> from datamove.keras import SpaceToBatch
    >>> SpaceToBatch([1, 2, 2, 1], [0, 1, 0, 0], [0, 1, 0, 0]).compute_output_shape((None, 6, 4, 3))
    (None, 4, 2, 3)
    """

    op = "space_to_batch"
    _margins = ("pads_begin", "pads_end")

    def __init__(self, block_shape: IntVector, pads_begin: IntVector, pads_end: IntVector, **kwargs: Any) -> None:
        super().__init__(block_shape, pads_begin, pads_end, **kwargs)

    @staticmethod
    def _rule(shape: Any, block_shape: Any, begin: Any, end: Any) -> shapes.Resolved:
        return shapes.resolve_space_to_batch(shape, block_shape, begin, end)

    @property
    def pads_begin(self) -> List[int]:
        return self._begin

    @property
    def pads_end(self) -> List[int]:
        return self._end


@keras.saving.register_keras_serializable(package="datamove")
class BatchToSpace(_SpaceLayer):
    """BatchToSpace-2 as a Keras layer: :func:`datamove.batch_to_space` through ``keras.ops``.

    Parameters
    ----------
    block_shape, crops_begin, crops_end : sequence of N ints
        One entry per input axis, the batch axis included (block 1, crops 0
        there); the batch must be divisible by ``prod(block_shape)``.
    **kwargs
        Keras' own (``name``, ``dtype``, ...).

    Examples
    --------
    >>> from datamove.keras import BatchToSpace
    >>> BatchToSpace([1, 2, 2, 1], [0, 1, 0, 0], [0, 1, 0, 0]).compute_output_shape((8, 3, 2, 3))
    (2, 4, 4, 3)
    """

    op = "batch_to_space"
    _margins = ("crops_begin", "crops_end")

    def __init__(self, block_shape: IntVector, crops_begin: IntVector, crops_end: IntVector, **kwargs: Any) -> None:
        super().__init__(block_shape, crops_begin, crops_end, **kwargs)

    @staticmethod
    def _rule(shape: Any, block_shape: Any, begin: Any, end: Any) -> shapes.Resolved:
        return shapes.resolve_batch_to_space(shape, block_shape, begin, end)

    @property
    def crops_begin(self) -> List[int]:
        return self._begin

    @property
    def crops_end(self) -> List[int]:
        return self._end
