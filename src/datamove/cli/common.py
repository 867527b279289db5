"""What the command line's commands share: their error, and reading and writing ``.npy`` files safely.

:mod:`datamove.cli.app` and the IR's commands (:mod:`datamove.cli.models`,
:mod:`datamove.ir.verify`) import this module, never each other's.

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
>>> save_npy(path, np.arange(6).reshape(2, 3))
>>> load_npy(path).tolist()
[[0, 1, 2], [3, 4, 5]]
>>> open(path + ".txt", "w").write("not numpy")
9
>>> try:
...     load_npy(path + ".txt")
... except CommandError as error:
...     print(str(error).endswith("is not a .npy file (it does not start with NumPy's magic string)"))
True
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Sequence

from ..errors import DataMoveError, number, quote, show

__all__ = ["CommandError", "add_engine_option", "load_npy", "load_inputs", "save_npy", "write_file", "check_target"]


class CommandError(Exception):
    """A problem with the command line or its files; printed as one line, exit status 2."""


def add_model_arguments(parser: Any) -> None:
    """``MODEL.xml`` and its repeatable ``-i NAME=FILE.npy``: the arguments every command on an IR model takes.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_model_arguments(parser)
    >>> parser.format_usage().strip()
    'usage: demo [-h] [-i NAME=FILE.npy] MODEL.xml'
    """
    parser.add_argument("model", metavar="MODEL.xml", help="the IR's .xml file")
    parser.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy",
                        help="a Parameter's input (repeat for each Parameter)")


def add_engine_option(parser: Any, what: str) -> None:
    """``--engine``, whose choices are the engine registry's names (:data:`datamove.engines.route.ENGINES`) and auto.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_engine_option(parser, "the engine")
    >>> parser.format_usage().strip()
    'usage: demo [-h] [--engine {auto,numpy,native,array_api,triton,pallas}]'
    """
    from ..engines.route import ENGINES

    parser.add_argument("--engine", default="auto", choices=("auto", *ENGINES),
                        help=f"{what} (default: auto, chosen by the array's library, device and size)")


def _magic(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(6)
    except OSError:
        return b""


def _has_npy_magic(path: str) -> bool:
    return _magic(path) == b"\x93NUMPY"


def _check_npy_header(path: str) -> None:
    """Refuse a .npy file whose header promises more bytes than the file holds, before NumPy maps it.

    NumPy would multiply the shape out with overflow warnings, or map past the
    end of the file; a header of ``2**60`` elements must be one clear error.
    """
    import math

    import numpy as np

    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    try:
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            if version not in readers:  # a later format: NumPy's own reader checks it
                return
            shape, _, dtype = readers[version](file)
            offset = file.tell()
            size = os.fstat(file.fileno()).st_size
    except OSError as exc:
        raise CommandError(f"cannot read {show(path)}: {exc.strerror or exc}") from None
    except Exception:  # not a .npy header: np.load says what it is
        return
    if dtype.hasobject:
        raise CommandError(f"{show(path)} holds Python objects (object dtype or pickled data), which are not "
                           "loaded (allow_pickle=False)")
    needed = math.prod(shape) * dtype.itemsize
    if offset + needed > size:
        shown = "(" + ", ".join(number(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        raise CommandError(f"{show(path)} is not a readable .npy file: it is truncated or corrupt, its header says shape {shown} of {dtype}, "
                           f"{number(needed)} bytes, but the file has {size - offset} after the header")


def load_npy(path: str) -> Any:
    """The .npy file at ``path``, memory-mapped read-only; anything else (an .npz, a pickle, a truncated
    or corrupt file, a header promising more than the file holds) is one CommandError."""
    import warnings

    import numpy as np

    if _magic(path).startswith(b"PK"):  # np.load would open it as a zip and, if broken, leave it open
        raise CommandError(f"{show(path)} is an .npz archive, not a .npy file")
    _check_npy_header(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a corrupt header's overflow is an error, never a printed warning
            data = np.load(path, mmap_mode="r", allow_pickle=False)
    except OSError as exc:
        raise CommandError(f"cannot read {show(path)}: {exc.strerror or exc}") from None
    except Exception as exc:  # a corrupt file can raise almost anything (ValueError, EOFError, SyntaxError)
        if not _has_npy_magic(path):  # NumPy calls anything but .npy and .npz "pickled data"
            raise CommandError(f"{show(path)} is not a .npy file (it does not start with NumPy's magic string)") from None
        if isinstance(exc, ValueError) and ("pickle" in str(exc) or "object" in str(exc).lower()):
            raise CommandError(
                f"{show(path)} holds Python objects (object dtype or pickled data), which are not loaded "
                "(allow_pickle=False)"
            ) from None
        raise CommandError(f"{show(path)} is not a readable .npy file: {type(exc).__name__}: "
                           f"{quote(str(exc), 200)[1:-1]}") from None
    if not isinstance(data, np.ndarray):  # an .npz archive
        close = getattr(data, "close", None)
        if close is not None:
            close()
        raise CommandError(f"{show(path)} is an .npz archive, not a .npy file")
    return data


def save_npy(path: str, array: Any) -> None:
    """``array`` as a .npy file at exactly ``path``, written whole or not at all."""
    import numpy as np

    # not np.save(path): it would append ".npy" to other names
    write_file(path, lambda file: np.save(file, array, allow_pickle=False))


def write_file(path: str, write: Callable[[Any], object]) -> None:
    """:func:`datamove.cli.files.write_atomically`, with its errors as CommandError."""
    from .files import write_atomically

    try:
        write_atomically(path, write)
    except DataMoveError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {show(path)}: {exc.strerror or exc} (no file was changed)") from None


def check_target(path: str) -> None:
    """Refuse an output that is not a regular file before doing the work."""
    from .files import check_writable_target

    try:
        check_writable_target(path)
    except DataMoveError as exc:
        raise CommandError(str(exc)) from None


def load_inputs(items: Sequence[str]) -> Dict[str, Any]:
    """``-i NAME=FILE.npy`` options (``datamove run-model``, ``datamove verify``) as ``{name: array}``."""
    inputs: Dict[str, Any] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise CommandError(f"-i {quote(item)}: write NAME=FILE.npy")
        if name in inputs:
            raise CommandError(f"-i {quote(name)}=...: given twice")
        inputs[name] = load_npy(path)
    return inputs
