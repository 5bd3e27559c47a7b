"""Atomic file writes: the one helper every hetbed package uses to replace a file (and to
publish a folder written under a temporary name, ``publish_dir``).

It lives here, in ``devices/``, because dependencies point down (``hetbed/`` -> ``scenarios/`` ->
``simulator/`` and ``reports/`` -> ``runtime/`` -> ``devices/``): the bottom package is the only one
that all of them (the cost-model tables in ``devices/`` included) may import. Like
``devices/errors.py`` it imports nothing but the standard library.

A write goes to a temporary file beside the target, named ``.<name>.<random>.tmp`` (so that
``stale_temp_files`` can find what an interrupted write left), is flushed and fsynced, renamed over
the target, and the folder is fsynced: a crash leaves either the old file or the new one, never a
mix. A failed write removes its temporary file and leaves the target as it was. The new file keeps
the permissions of the one it replaces, or gets those the umask gives a new file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

_TMP_SUFFIX = ".tmp"


def atomic_write(
    path: str | os.PathLike,
    data: bytes | bytearray | memoryview | str | Iterable[Any] | Callable[[str], Any],
    digest: bool = False,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    ``data`` is bytes (or a str, written as UTF-8), an iterable of byte chunks, or a function
    that writes the whole file to the temporary path it is given (``lambda p: df.to_parquet(p)``).
    With ``digest``, the SHA-256 of the bytes written is appended (not for a function).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(
        prefix="." + os.path.basename(path) + ".", suffix=_TMP_SUFFIX, dir=directory
    )
    try:
        if callable(data):
            if digest:
                raise ValueError("atomic_write: digest=True needs bytes or chunks, not a function")
            os.close(fd)
            data(tmp)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            if isinstance(data, str):
                data = data.encode("utf-8")
            chunks = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
            with os.fdopen(fd, "wb") as f:
                h = hashlib.sha256() if digest else None
                for c in chunks:
                    if h is not None:
                        h.update(c)
                    f.write(c)
                if h is not None:
                    f.write(h.digest())
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def publish_dir(temp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Give the folder ``temp``, written in full, its name ``final`` in one rename (a reader
    sees no folder or all of it); refuses to replace an existing ``final``."""
    temp, final = os.fspath(temp), os.fspath(final)
    if os.path.exists(final):
        raise FileExistsError(f"publish_dir: {final} exists")
    os.rename(temp, final)
    fsync_dir(os.path.dirname(os.path.abspath(final)))


def _mode_for(path: str) -> int:
    """The permissions a replaced file keeps, or that a new one gets from the umask, as
    ``open(path, "w")`` would give it (a temporary file is made readable by its owner alone)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """This process's umask, read without changing it where the platform says it (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, but brief)
    os.umask(mask)
    return mask


def stale_temp_files(path: str | os.PathLike) -> list[str]:
    """The temporary files that interrupted ``atomic_write`` calls for ``path`` left behind."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    pattern = re.compile(re.escape("." + os.path.basename(path) + ".") + r"[A-Za-z0-9_]+\.tmp\Z")
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names if pattern.match(n))


def fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (where the platform can open folders)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
