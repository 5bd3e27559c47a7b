"""TF1's ``tf.gfile`` (= ``tf.io.gfile``'s older names) over the local file system.

TensorFlow's GFile reaches several file systems (local, GCS, HDFS); hetbed's reaches the local one,
which is what tutorials use. Errors are TF's: a missing path raises ``NotFoundError``, creating
what exists raises ``AlreadyExistsError``; both name the path.
"""

from __future__ import annotations

import glob as _glob
import os
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

from hetbed.runtime.errors import AlreadyExistsError, NotFoundError

__all__ = [
    "GFile",
    "Open",
    "FastGFile",
    "Exists",
    "IsDirectory",
    "ListDirectory",
    "Glob",
    "MkDir",
    "MakeDirs",
    "Remove",
    "DeleteRecursively",
    "Rename",
    "Copy",
    "Stat",
    "Walk",
]


class GFile:
    """A file handle like TF's: ``with tf.gfile.GFile(path, "r") as f: f.read()``.

    Modes as in ``open`` ("r", "rb", "w", "wb", "a", "ab"); text modes read ``str``, binary modes
    ``bytes``; ``write`` takes either in any mode, as TF's. Opening for reading a path that does not exist raises NotFoundError.
    Unlike TF, the file is opened at once (TF opens lazily on first use).
    """

    def __init__(self, name: str | os.PathLike, mode: str = "r"):
        self.name = os.fspath(name)
        self.mode = mode
        if mode.replace("b", "").replace("+", "") not in ("r", "w", "a"):
            raise ValueError(f"GFile: mode must be one of r, rb, w, wb, a, ab, got {mode!r}")
        try:
            self._f = open(self.name, mode)  # noqa: SIM115 - closed by close()/__exit__
        except FileNotFoundError as e:
            raise NotFoundError(f"{self.name}; No such file or directory") from e
        except IsADirectoryError as e:
            raise NotFoundError(f"{self.name} is a directory, not a file") from e

    def read(self, n: int = -1) -> Any:
        return self._f.read(n)

    def readline(self, size: int = -1) -> Any:
        return self._f.readline(size)

    def readlines(self, hint: int = -1) -> list:
        return self._f.readlines(hint)

    def write(self, data: Any) -> int:
        """Write ``data``: str or bytes in any mode, as TF's (bytes to a text file are UTF-8,
        a str to a binary file is encoded as UTF-8)."""
        if "b" in self.mode:
            return self._f.write(data.encode("utf-8") if isinstance(data, str) else data)
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data).decode("utf-8")
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def size(self) -> int:
        """The file's size in bytes."""
        self._f.flush()
        return os.path.getsize(self.name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._f)

    def __next__(self) -> Any:
        return next(self._f)

    @property
    def closed(self) -> bool:
        return self._f.closed

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> GFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def readable(self) -> bool:
        return self._f.readable()

    def writable(self) -> bool:
        return self._f.writable()


Open = GFile
FastGFile = GFile


def Exists(filename: str | os.PathLike) -> bool:
    return os.path.exists(filename)


def IsDirectory(dirname: str | os.PathLike) -> bool:
    return os.path.isdir(dirname)


def ListDirectory(dirname: str | os.PathLike) -> list[str]:
    """The names in ``dirname`` (not paths), in no particular order, as TF gives them."""
    if not os.path.isdir(dirname):
        raise NotFoundError(f"{os.fspath(dirname)}: could not find directory")
    return os.listdir(dirname)


def Glob(filename: str | os.PathLike) -> list[str]:
    """Paths matching the pattern (``*``, ``?``, ``[...]``), sorted."""
    return sorted(_glob.glob(os.fspath(filename)))


def MkDir(dirname: str | os.PathLike) -> None:
    """Create one directory; its parent must exist. AlreadyExistsError if it exists."""
    try:
        os.mkdir(dirname)
    except FileExistsError as e:
        raise AlreadyExistsError(f"{os.fspath(dirname)}: file or directory already exists") from e
    except FileNotFoundError as e:
        raise NotFoundError(f"{os.fspath(dirname)}: parent directory does not exist") from e


def MakeDirs(dirname: str | os.PathLike) -> None:
    """Create a directory and its missing parents; nothing happens when it exists."""
    os.makedirs(dirname, exist_ok=True)


def Remove(filename: str | os.PathLike) -> None:
    try:
        os.remove(filename)
    except FileNotFoundError as e:
        raise NotFoundError(f"{os.fspath(filename)}: no such file") from e


def DeleteRecursively(dirname: str | os.PathLike) -> None:
    """Delete a directory and everything under it (or a single file)."""
    if os.path.isdir(dirname) and not os.path.islink(dirname):
        shutil.rmtree(dirname)
    elif os.path.lexists(dirname):
        os.remove(dirname)
    else:
        raise NotFoundError(f"{os.fspath(dirname)}: no such file or directory")


def Rename(oldname: str | os.PathLike, newname: str | os.PathLike, overwrite: bool = False) -> None:
    if not os.path.lexists(oldname):
        raise NotFoundError(f"{os.fspath(oldname)}: no such file or directory")
    if os.path.exists(newname) and not overwrite:
        raise AlreadyExistsError(f"{os.fspath(newname)}: already exists (pass overwrite=True)")
    # The user's own rename, not a write of ours (those go through devices.fileio.atomic_write).
    pathlib.Path(oldname).replace(newname)


def Copy(oldpath: str | os.PathLike, newpath: str | os.PathLike, overwrite: bool = False) -> None:
    if not os.path.isfile(oldpath):
        raise NotFoundError(f"{os.fspath(oldpath)}: no such file")
    if os.path.exists(newpath) and not overwrite:
        raise AlreadyExistsError(f"{os.fspath(newpath)}: already exists (pass overwrite=True)")
    shutil.copyfile(oldpath, newpath)


class FileStatistics:
    """What ``Stat`` returns: ``length`` (bytes), ``mtime_nsec``, ``is_directory``."""

    __slots__ = ("length", "mtime_nsec", "is_directory")

    def __init__(self, length: int, mtime_nsec: int, is_directory: bool):
        self.length = length
        self.mtime_nsec = mtime_nsec
        self.is_directory = is_directory


def Stat(filename: str | os.PathLike) -> FileStatistics:
    try:
        st = os.stat(filename)
    except FileNotFoundError as e:
        raise NotFoundError(f"{os.fspath(filename)}: no such file or directory") from e
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(filename))


def Walk(top: str | os.PathLike, in_order: bool = True) -> Iterator[tuple[str, list, list]]:
    """(dirname, subdirectory names, file names) for ``top`` and every directory below it,
    parents first when ``in_order`` (TF's order), children first otherwise."""
    yield from os.walk(top, topdown=in_order)
