"""The ``datamove`` command: ``app`` (the parser, and the commands on shapes and ``.npy`` files), ``models`` (the commands on IR models), ``common`` and ``files`` (reading and writing files safely), ``info``.

:func:`main` is the entry point of ``datamove`` and ``python -m datamove``.
"""

from .app import main

__all__ = ["main"]
