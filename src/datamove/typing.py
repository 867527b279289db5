"""Types for code that calls datamove: the parameters' literal values, dims and shapes.

The string parameters are :data:`~typing.Literal` types, so a type checker
(mypy, pyright) flags a misspelt mode before the code runs:

>>> import typing
>>> from datamove.typing import DataFormat, Mode
>>> typing.get_args(Mode)
('blocks_first', 'depth_first')
>>> typing.get_args(DataFormat)
('channels_first', 'channels_last')

The operations are overloaded on the array type: a ``numpy.ndarray`` in
gives a ``numpy.ndarray`` of the same dtype out, a ``torch.Tensor`` gives a
``torch.Tensor``, and any other array (JAX, CuPy, Dask, array API: an
:class:`Array`) gives its own type back. None of this costs anything at run
time: the aliases are plain ``typing`` objects, and PyTorch is named only for
type checkers.
"""

from .rules.types import *  # noqa: F401,F403 (the face: the rules' types, every name of their __all__)
from .rules.types import __all__ as __all__
