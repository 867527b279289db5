"""Writing a file whole or not at all.

The command line writes its results with :func:`write_atomically`: into a
temporary file in the target's directory, flushed to disk, then renamed over
the target. A failed write (disk full, a file-size limit, an interrupt, an
error while encoding) leaves every existing file as it was, and a reader of
the target never sees a partial file. An input that is memory-mapped from
the target keeps reading the old file while the new one is written, so
``datamove run OP X.npy X.npy`` is safe.

Only regular files are written: a directory, a device, a FIFO or a socket as
the target is refused with :class:`~datamove.DataMoveError`, never renamed
over. A symbolic link is followed: the file it points to is replaced, the
link stays.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "out.txt")
>>> write_atomically(path, lambda file: file.write(b"whole"))
>>> open(path, "rb").read(), os.listdir(folder)
(b'whole', ['out.txt'])
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import BinaryIO, Callable, Union

from ..errors import DataMoveError, show

__all__ = ["write_atomically", "check_writable_target"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _umask() -> int:
    """The process's umask, read without changing it where the system allows (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere the only way to read it; restored at once
    os.umask(mask)
    return mask


def check_writable_target(path: Union[str, "os.PathLike[str]"]) -> str:
    """The real path a write to ``path`` replaces; a target that is not a regular file raises.

    Call it before the work that produces the file, so a bad target fails
    fast; :func:`write_atomically` checks again.
    """
    real = os.path.realpath(os.fspath(path))
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise DataMoveError(f"cannot write {show(os.fspath(path))}: {exc.strerror or exc}") from None
    if mode is not None:
        for test, kind in _KINDS:
            if test(mode):
                raise DataMoveError(f"cannot write {show(os.fspath(path))}: it is {kind}; "
                                    "datamove writes results only to regular files")
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        raise DataMoveError(f"cannot write {show(os.fspath(path))}: No such file or directory "
                            f"(the directory {show(folder)} does not exist)")
    return real


def write_atomically(path: Union[str, "os.PathLike[str]"], write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(file)`` on a temporary file, then make it ``path`` in one rename.

    Parameters
    ----------
    path : str or path
        The target: a regular file (replaced, keeping its permission bits) or
        a new name (created with the permissions ``open`` would give it).
    write : callable
        Writes the whole content to the binary file it is given (seekable,
        so ``zipfile`` works).

    Raises
    ------
    DataMoveError
        The target is not a regular file, or its directory does not exist.
    OSError
        The write failed; the target and every other file are unchanged and
        the temporary file is removed.
    """
    real = check_writable_target(path)
    folder, name = os.path.split(real)
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    descriptor, temporary = tempfile.mkstemp(prefix=f".{name[:64]}.", suffix=".tmp", dir=folder or ".")
    try:
        with os.fdopen(descriptor, "wb") as file:
            write(file)
            file.flush()
            # NumPy's tofile writes through C stdio, which may drop an error on a small write: a file
            # shorter than the position written to has lost bytes (disk full, a file-size limit)
            if os.fstat(file.fileno()).st_size < file.tell():
                raise OSError(errno.EIO, "a short write (is the disk full, or a file-size limit reached?)")
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        check_writable_target(real)  # it may have become a directory or a device while we wrote
        os.replace(temporary, real)
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        directory = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(directory)
    except OSError:
        pass
    finally:
        os.close(directory)
