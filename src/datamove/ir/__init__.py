"""OpenVINO IR: read, check and run models safely.

>>> from datamove.ir import read_model
>>> model = read_model("examples/ir/batch_to_space_2d.xml")
>>> print(model.check())  # doctest: +ELLIPSIS
model 'batch_to_space_2d' (examples/ir/batch_to_space_2d.xml): 6 layers, 6 inferred, 0 opaque
OK: every recorded shape agrees with the inferred one

:func:`read_model` treats the files as untrusted (see :mod:`datamove.ir.reader`);
:meth:`Model.check` and :meth:`Model.run` are described in :mod:`datamove.ir.model`.
``defusedxml`` is imported only when a model is read. :func:`verify` runs a
model in OpenVINO and checks its data-movement layers against datamove;
OpenVINO is imported only when it runs.
"""

from .model import CheckReport, Layer, Mismatch, Model, Port
from .reader import read_model
# The function shadows its module's name on the package: imported here, once, so that
# datamove.ir.verify is always the function (a lazy __getattr__ would lose to the
# submodule attribute the first plain "import datamove.ir.verify" sets). The module
# imports nothing heavy; OpenVINO only inside verify().
from .verify import LayerReport, VerifyReport, verify

__all__ = ["read_model", "Model", "Layer", "Port", "CheckReport", "Mismatch", "verify", "VerifyReport",
           "LayerReport"]
