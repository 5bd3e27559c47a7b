"""The one atomic-write helper (devices/fileio.py) and its users."""

from __future__ import annotations

import hashlib
import os
import pathlib
import re

import pytest

from hetbed.devices.fileio import atomic_write, stale_temp_files

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_writes_bytes_text_chunks_and_functions(tmp_path):
    p = tmp_path / "f.bin"
    atomic_write(p, b"abc")
    assert p.read_bytes() == b"abc"
    atomic_write(p, "h\u00e9")
    assert p.read_bytes() == "h\u00e9".encode()
    atomic_write(p, [b"12", bytearray(b"34"), memoryview(b"56")], digest=True)
    assert p.read_bytes() == b"123456" + hashlib.sha256(b"123456").digest()
    atomic_write(p, lambda tmp: pathlib.Path(tmp).write_text("via path"))
    assert p.read_text() == "via path"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_failure_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    p = tmp_path / "f.txt"
    atomic_write(p, "old")

    def chunks():
        yield b"new, half"
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(p, chunks())
    with pytest.raises(ValueError, match="digest"):
        atomic_write(p, lambda tmp: None, digest=True)
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_stale_temp_files_finds_only_its_own_naming(tmp_path):
    p = tmp_path / "ckpt"
    mine = [tmp_path / ".ckpt.abc_12.tmp", tmp_path / ".ckpt.zz9.tmp"]
    others = [tmp_path / ".ckpt.tmp", tmp_path / ".ckpt2.abc.tmp", tmp_path / "ckpt.abc.tmp"]
    for f in mine + others:
        f.write_bytes(b"")
    assert stale_temp_files(p) == sorted(str(f) for f in mine)
    assert stale_temp_files(tmp_path / "missing" / "x") == []


def test_no_package_replaces_files_by_hand():
    """Every package writes files through atomic_write: no other os.replace or rename of a temp."""
    offenders = []
    for sub in ("devices", "runtime", "simulator", "scenarios", "reports", "hetbed"):
        for f in (ROOT / sub).rglob("*.py"):
            if f.name == "fileio.py" and f.parent.name == "devices":
                continue
            text = f.read_text()
            if re.search(r"os\.(replace|rename)\(|tempfile\.mkstemp", text):
                offenders.append(str(f.relative_to(ROOT)))
    assert offenders == []
