"""Framework front ends: TensorFlow's, ONNX's and PyTorch's semantics on the four core ops.

- :mod:`datamove.compat.tensorflow`: ``batch_to_space``, ``space_to_batch``
  (the ND ops), ``space_to_depth``, ``depth_to_space`` (NHWC / NCHW).
- :mod:`datamove.compat.onnx`: ``space_to_depth``, ``depth_to_space`` (DCR / CRD).
- :mod:`datamove.compat.torch`: ``pixel_shuffle``, ``pixel_unshuffle``.

Each translates its framework's conventions (argument names, layouts, mode
names, extra dims) onto one core op call; none imports its framework.

>>> import numpy as np
>>> from datamove.compat import onnx, torch
>>> x = np.arange(16).reshape(1, 4, 2, 2)
>>> bool((onnx.depth_to_space(x, 2, mode="CRD") == torch.pixel_shuffle(x, 2)).all())
True
"""

from . import onnx, tensorflow, torch

__all__ = ["onnx", "tensorflow", "torch"]
