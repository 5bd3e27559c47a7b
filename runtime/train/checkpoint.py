"""Checkpoint files and the per-directory index of them (used by ``hb.train.Saver``).

File layout (no pickle; every number little-endian)::

    magic        8 bytes   b"HBCKPT\\x00\\x01" (name, format version 1)
    header_len   8 bytes   uint64
    header       JSON      {"format": 1, "data_length": D, "tensors": [{"name", "dtype", "shape",
                            "offset", "length"}, ...]}, space-padded so the data starts 64-aligned
    data         D bytes   raw tensor bytes, each tensor at a 64-aligned offset from the data start
                           (a string tensor: uint64 length of each element, then their bytes)
    digest       32 bytes  SHA-256 of everything before it

Files are written atomically (temporary file in the same directory, flush, fsync, rename, fsync of
the directory), so a crash mid-save leaves the previous checkpoint intact. Next to them, a JSON
index named ``checkpoint`` (written the same way) lists the latest and all kept checkpoints.

Checkpoints TensorFlow wrote (a ``PREFIX.index`` beside ``PREFIX.data-*``, and its text-format
``checkpoint`` index) are read too, through ``tf_bundle.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import struct
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...devices.fileio import atomic_write
from .. import dtypes as _dt
from ..errors import DataLossError, NotFoundError
from . import tf_bundle

MAGIC = b"HBCKPT\x00\x01"
_U64 = struct.Struct("<Q")
_ALIGN = 64
_DIGEST = 32
_PREFIX = len(MAGIC) + _U64.size
STATE_FILENAME = "checkpoint"
#: set by ``hetbed cluster`` in a task it restarted (the restart's number): a chief that then
#: restores a checkpoint, or finds none, says so in the cluster's log
RESTARTED_ENV = "HETBED_RESTARTED"


# ---- the file format -----------------------------------------------------------------------------


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _le_bytes(arr: np.ndarray) -> np.ndarray:
    """The array's bytes in little-endian order, as a flat uint8 view (a copy only if needed)."""
    le = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    return le.reshape(-1).view(np.uint8)


def write_checkpoint(path: str, tensors: dict[str, np.ndarray]) -> None:
    """Write ``tensors`` (name -> array) to ``path`` atomically, in the format above."""
    entries, blobs, offset = [], [], 0
    for name, value in tensors.items():
        arr = np.asarray(value)
        dt = _dt.as_dtype(arr.dtype)
        if dt.is_string:  # lengths, then bytes (see dtypes.pack_strings)
            raw = np.frombuffer(_dt.pack_strings(arr, f"checkpoint tensor {name!r}"), np.uint8)
        else:
            raw = _le_bytes(arr.astype(dt.np, copy=False))
        offset = _align(offset)
        entries.append(
            {
                "name": name,
                "dtype": dt.name,
                "shape": list(arr.shape),
                "offset": offset,
                "length": int(raw.nbytes),
            }
        )
        blobs.append((offset, raw))
        offset += raw.nbytes
    header = json.dumps(
        {"format": 1, "data_length": offset, "tensors": entries}, separators=(",", ":")
    ).encode()
    header += b" " * (_align(_PREFIX + len(header)) - _PREFIX - len(header))

    def chunks() -> Iterator[Any]:
        yield MAGIC
        yield _U64.pack(len(header))
        yield header
        pos = 0
        for off, raw in blobs:
            if off > pos:
                yield bytes(off - pos)
            yield raw
            pos = off + raw.nbytes

    atomic_write(path, chunks(), digest=True)


@dataclass(frozen=True)
class _Entry:
    name: str
    dtype: _dt.DType
    shape: tuple[int, ...]
    offset: int
    length: int


class CheckpointReader:
    """A checkpoint file read and fully validated up front (TF1's ``NewCheckpointReader``).

    Raises NotFoundError when the file does not exist and DataLossError, naming the file and the
    defect, when it is truncated, corrupt (checksum) or malformed.
    """

    def __init__(self, path: str):
        self.path = path
        self._bundle: list[bytes] | None = None
        if tf_bundle.is_bundle(path):  # a checkpoint TensorFlow wrote (tf_bundle.py)
            entries, self._bundle = tf_bundle.read_bundle(path)
            self._entries = {
                n: _Entry(n, dt, dims, off, size)
                for n, (dt, dims, _s, off, size) in entries.items()
            }
            self._bundle_entries = entries
            return
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            raise NotFoundError(f"checkpoint file {path!r} does not exist") from None
        except IsADirectoryError:
            raise NotFoundError(
                f"checkpoint {path!r} is a directory; pass a checkpoint file, "
                "e.g. hb.train.latest_checkpoint(directory)"
            ) from None
        self._entries, self._data = _parse(path, blob)

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {n: list(e.shape) for n, e in self._entries.items()}

    def get_variable_to_dtype_map(self) -> dict[str, _dt.DType]:
        return {n: e.dtype for n, e in self._entries.items()}

    def has_tensor(self, name: str) -> bool:
        return name in self._entries

    def entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            have = ", ".join(sorted(self._entries)[:12])
            raise NotFoundError(
                f"key {name!r} not found in checkpoint {self.path}; it holds: {have or 'nothing'}"
            ) from None

    def get_tensor(self, name: str) -> np.ndarray:
        """The tensor as a read-only array over the file's bytes (native byte order)."""
        e = self.entry(name)
        if self._bundle is not None:
            return tf_bundle.tensor(self.path, name, self._bundle_entries[name], self._bundle)
        if e.dtype.is_string:
            try:
                return _dt.unpack_strings(self._data[e.offset : e.offset + e.length], e.shape)
            except ValueError as err:
                raise DataLossError(f"checkpoint {self.path}: tensor {name!r}: {err}") from None
        le = e.dtype.np.newbyteorder("<")
        count = int(np.prod(e.shape, dtype=np.int64))
        arr = np.frombuffer(self._data, dtype=le, count=count, offset=e.offset).reshape(e.shape)
        return arr if le == e.dtype.np else arr.astype(e.dtype.np)


def _parse(path: str, blob: bytes) -> tuple[dict[str, _Entry], memoryview]:
    size = len(blob)
    if size < _PREFIX + _DIGEST:
        raise DataLossError(
            f"checkpoint {path} is truncated: {size} bytes, a checkpoint has at least "
            f"{_PREFIX + _DIGEST}"
        )
    if blob[: len(MAGIC)] != MAGIC:
        raise DataLossError(
            f"{path} is not a hetbed checkpoint: it starts with {blob[:8]!r}, expected {MAGIC!r}"
        )
    (hlen,) = _U64.unpack_from(blob, len(MAGIC))
    if _PREFIX + hlen + _DIGEST > size:
        raise DataLossError(
            f"checkpoint {path} is truncated: its header alone needs {_PREFIX + hlen + _DIGEST} "
            f"bytes, the file has {size}"
        )
    try:
        header = json.loads(blob[_PREFIX : _PREFIX + hlen])
    except (ValueError, UnicodeDecodeError):
        header = None
    if isinstance(header, dict) and isinstance(header.get("data_length"), int):
        want = _PREFIX + hlen + header["data_length"] + _DIGEST
        if size < want:
            raise DataLossError(
                f"checkpoint {path} is truncated: expected {want} bytes, found {size}"
            )
        if size > want:
            raise DataLossError(
                f"checkpoint {path} has {size - want} unexpected trailing bytes "
                f"(expected {want} bytes)"
            )
    view = memoryview(blob)
    if hashlib.sha256(view[:-_DIGEST]).digest() != blob[-_DIGEST:]:
        raise DataLossError(
            f"checkpoint {path} is corrupt: its SHA-256 checksum does not match its contents"
        )
    if not isinstance(header, dict):
        raise DataLossError(f"checkpoint {path}: the header is not a JSON object")
    data = view[_PREFIX + hlen : size - _DIGEST]
    return _entries(path, header, len(data)), data


_MAX_RANK = 32  # (numpy's arrays take at most 64 dimensions; TensorFlow's tensors 254)


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _entries(path: str, header: dict, data_length: int) -> dict[str, _Entry]:
    if not _whole(header.get("format")) or header.get("format") != 1:
        raise DataLossError(
            f"checkpoint {path} has format {header.get('format')!r}; this hetbed reads format 1"
        )
    raw = header.get("tensors")
    if not isinstance(raw, list):
        raise DataLossError(f"checkpoint {path}: header has no 'tensors' list")
    out: dict[str, _Entry] = {}
    for i, t in enumerate(raw):
        try:
            name, shape = t["name"], tuple(t["shape"])
            dtype = _dt.as_dtype(t["dtype"])
            offset, length = t["offset"], t["length"]
            ok = (
                isinstance(name, str)
                and len(shape) <= _MAX_RANK
                and all(_whole(d) and d >= 0 for d in shape)
                and _whole(offset)
                and _whole(length)
                and offset >= 0
            )
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise DataLossError(f"checkpoint {path}: tensor entry {i} is malformed: {t!r}")
        if name in out:
            raise DataLossError(f"checkpoint {path}: tensor {name!r} appears twice")
        want = math.prod(shape) * dtype.size  # Python ints: a shape like [2**64] cannot wrap
        if dtype.is_string:  # lengths then bytes: at least the lengths
            want = max(length, want)
        if length != want or offset + length > data_length:
            raise DataLossError(
                f"checkpoint {path}: tensor {name!r} ({dtype.name}{list(shape)}) claims bytes "
                f"[{offset}, {offset + length}) of {data_length}; it needs {want}"
            )
        out[name] = _Entry(name, dtype, shape, offset, length)
    return out


# ---- the index of checkpoints in a directory ----------------------------------------------------


@dataclass
class CheckpointState:
    """What a directory's ``checkpoint`` index says: the latest path and all kept paths."""

    model_checkpoint_path: str
    all_model_checkpoint_paths: list[str] = field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = field(default_factory=list)


def _state_path(checkpoint_dir: str, latest_filename: str | None) -> str:
    return os.path.join(checkpoint_dir, latest_filename or STATE_FILENAME)


def update_checkpoint_state(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: list[str] | None = None,
    latest_filename: str | None = None,
    all_model_checkpoint_timestamps: list[float] | None = None,
) -> None:
    """Atomically write the directory's index; paths inside the directory are stored relative
    (TF1's argument names)."""
    checkpoint_dir = save_dir

    def rel(p: str) -> str:
        a = os.path.abspath(p)
        if os.path.dirname(a) == os.path.abspath(checkpoint_dir):
            return os.path.basename(a)
        return a

    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths = [p for p in paths if p != model_checkpoint_path] + [model_checkpoint_path]
    doc = {
        "format": "hetbed-checkpoint-state-1",
        "model_checkpoint_path": rel(model_checkpoint_path),
        "all_model_checkpoint_paths": [rel(p) for p in paths],
        "all_model_checkpoint_timestamps": list(all_model_checkpoint_timestamps or []),
    }
    atomic_write(_state_path(checkpoint_dir, latest_filename), [json.dumps(doc, indent=1).encode()])


def _write_tf_state(save_dir: str, latest: str, paths: list, latest_filename: str | None) -> None:
    """The index in TensorFlow's text format (for a folder of checkpoints TensorFlow wrote)."""

    def rel(p: str) -> str:
        a = os.path.abspath(p)
        return os.path.basename(a) if os.path.dirname(a) == os.path.abspath(save_dir) else a

    lines = [f"model_checkpoint_path: {json.dumps(rel(latest))}"]
    lines += [f"all_model_checkpoint_paths: {json.dumps(rel(p))}" for p in paths]
    atomic_write(_state_path(save_dir, latest_filename), ["\n".join(lines).encode() + b"\n"])


def get_checkpoint_state(
    checkpoint_dir: str, latest_filename: str | None = None
) -> CheckpointState | None:
    """The directory's index with paths resolved against the directory, or None when it has no
    index. An unreadable index is reported with a warning and treated as absent (as TF1 does)."""
    p = _state_path(checkpoint_dir, latest_filename)
    try:
        with open(p, "rb") as f:
            raw = f.read()
        doc = _tf_state(raw) if not raw.lstrip().startswith(b"{") else json.loads(raw)
        latest = doc["model_checkpoint_path"]
        paths = doc.get("all_model_checkpoint_paths", [latest])
        stamps = doc.get("all_model_checkpoint_timestamps", [])
        if not isinstance(latest, str):
            raise ValueError("model_checkpoint_path must be a string")
        if not isinstance(paths, list) or not all(isinstance(x, str) for x in paths):
            raise ValueError("all_model_checkpoint_paths must be a list of strings")
        if not isinstance(stamps, list) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
            for t in stamps
        ):
            raise ValueError("all_model_checkpoint_timestamps must be a list of finite numbers")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(f"ignoring the checkpoint index {p}: {e}", stacklevel=2)
        return None

    def resolve(x: str) -> str:
        return x if os.path.isabs(x) else os.path.join(checkpoint_dir, x)

    return CheckpointState(resolve(latest), [resolve(x) for x in paths], list(stamps))


def latest_checkpoint(checkpoint_dir: str, latest_filename: str | None = None) -> str | None:
    """The newest checkpoint listed in the directory's index, or None (no index, or the listed
    file is missing)."""
    st = get_checkpoint_state(checkpoint_dir, latest_filename)
    if st is None or not st.model_checkpoint_path:
        return None
    return st.model_checkpoint_path if checkpoint_exists(st.model_checkpoint_path) else None


def checkpoint_exists(checkpoint_prefix: str) -> bool:
    """Whether a checkpoint is there: hetbed's file, or the index of one TensorFlow wrote."""
    return os.path.isfile(checkpoint_prefix) or tf_bundle.is_bundle(checkpoint_prefix)


def _tf_state(raw: bytes) -> dict:
    """The fields of the text-format ``CheckpointState`` TensorFlow writes as ``checkpoint``."""
    doc: dict = {"all_model_checkpoint_paths": []}
    for line in raw.decode("utf-8").splitlines():
        key, sep, value = line.partition(":")
        value = value.strip()
        if not sep or not (len(value) >= 2 and value[0] == value[-1] == '"'):
            continue
        text = value[1:-1].encode("latin-1").decode("unicode_escape")
        if key.strip() == "model_checkpoint_path":
            doc["model_checkpoint_path"] = text
        elif key.strip() == "all_model_checkpoint_paths":
            doc["all_model_checkpoint_paths"].append(text)
    if "model_checkpoint_path" not in doc:
        raise ValueError("no model_checkpoint_path in it")
    return doc


def _resolve(ckpt_dir_or_file: str) -> str:
    if os.path.isdir(ckpt_dir_or_file):
        p = latest_checkpoint(ckpt_dir_or_file)
        if p is None:
            raise NotFoundError(f"no checkpoint listed in directory {ckpt_dir_or_file!r}")
        return p
    return ckpt_dir_or_file


def load_checkpoint(ckpt_dir_or_file: str) -> CheckpointReader:
    """A reader for a checkpoint file, or for the latest checkpoint of a directory."""
    return CheckpointReader(_resolve(ckpt_dir_or_file))


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """[(name, shape)] of the tensors in a checkpoint, sorted by name."""
    return sorted(load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map().items())


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    return np.array(load_checkpoint(ckpt_dir_or_file).get_tensor(name))


def start_variable_from(var: Any, value: Any) -> None:
    """Make ``var``'s initializer assign ``value`` (a checkpoint's), instead of its own; a
    value of another dtype is refused (TF's rule: a float checkpoint does not truncate into an
    integer variable)."""
    from ..ops.array import constant
    from ..ops.state import assign

    g = var.graph
    value = np.asarray(value)
    if value.dtype != np.dtype(var.dtype.base_dtype.np):
        raise ValueError(
            f"{var.op.name} is {var.dtype.base_dtype.name}, but the checkpoint's value is "
            f"{value.dtype}"
        )
    with g.as_default(), g.control_dependencies(None), g.colocate_with(var._ref.op):
        var._initializer_op = assign(
            var._ref, constant(value), name=var.op.name + "/init_from_checkpoint"
        ).op


def init_from_checkpoint(ckpt_dir_or_file: str, assignment_map: Any) -> None:
    """TF1's ``tf.train.init_from_checkpoint``: the variables ``assignment_map`` names start
    from a checkpoint's values (their initializers are replaced; run them, e.g.
    ``global_variables_initializer()``, after this call). Each entry maps a tensor of the
    checkpoint to a variable (a ``Variable`` or its name), or a scope to a scope,
    ``"ckpt_scope/": "scope/"`` (every variable under ``scope`` from the tensor of the same
    name under ``ckpt_scope``; ``"/"`` is the root on either side). Raises ValueError naming a
    tensor the checkpoint lacks, a variable the graph lacks or shapes that differ."""
    from ..graph import GraphKeys, get_default_graph
    from ..variables import Variable

    reader = load_checkpoint(ckpt_dir_or_file)
    shapes = reader.get_variable_to_shape_map()
    g = get_default_graph()
    store: dict[str, Variable] = {}
    for key in (GraphKeys.GLOBAL_VARIABLES, GraphKeys.LOCAL_VARIABLES):
        for v in g.get_collection(key):
            if isinstance(v, Variable):
                store.setdefault(v.op.name, v)

    def start_from(var: Variable, tensor: str) -> None:
        if tensor not in shapes:
            raise ValueError(
                f"init_from_checkpoint: tensor {tensor!r} is not in {ckpt_dir_or_file}"
            )
        if not var.shape.is_compatible_with(shapes[tensor]):
            raise ValueError(
                f"init_from_checkpoint: variable {var.op.name} has shape {var.shape}, the "
                f"checkpoint's {tensor!r} {list(shapes[tensor])}"
            )
        want = reader.get_variable_to_dtype_map()[tensor]
        if want != var.dtype.base_dtype:
            raise ValueError(
                f"init_from_checkpoint: variable {var.op.name} is {var.dtype.base_dtype.name}, "
                f"the checkpoint's {tensor!r} {want.name}"
            )
        start_variable_from(var, reader.get_tensor(tensor))

    items = assignment_map.items() if isinstance(assignment_map, dict) else assignment_map
    for tensor, current in sorted(items, key=lambda kv: str(kv[0])):
        if isinstance(current, Variable) or (isinstance(current, str) and current in store):
            start_from(current if isinstance(current, Variable) else store[current], tensor)
            continue
        if not isinstance(current, str) or not (current.endswith("/") and tensor.endswith("/")):
            raise ValueError(
                f"init_from_checkpoint: {current!r} is no variable of the graph; a scope maps "
                f"to a scope, both ending with '/' ({tensor!r}: {current!r})"
            )
        scope = "" if current == "/" else current
        prefix = "" if tensor == "/" else tensor
        under = sorted(n for n in store if n.startswith(scope))
        if not under:
            raise ValueError(f"init_from_checkpoint: no variable of the graph is under {current!r}")
        for name in under:
            start_from(store[name], prefix + name[len(scope) :])


# ---- recovery at start-up -------------------------------------------------------------------------

_STEP_RE = re.compile(r"-(\d+)\Z")
_TEMP_RE = re.compile(r"\A\.(.+)\.[A-Za-z0-9_]+\.tmp\Z")


def is_checkpoint_file(path: str) -> bool:
    """Whether ``path`` is a regular file that starts as hetbed's checkpoints do."""
    return not os.path.islink(path) and _is_checkpoint_file(path)


def _is_checkpoint_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _is_graph_document(path: str) -> bool:
    """Whether ``path`` begins as the graph document a Saver writes beside a checkpoint."""
    try:
        with open(path, "rb") as f:
            return b"hetbed-graph" in f.read(64)  # (JSON or msgpack: the format's name)
    except OSError:
        return False


def _remove_stale_temps(checkpoint_dir: str, index_name: str) -> list[str]:
    """Remove what interrupted saves left: ``atomic_write`` temporaries of the index, of a
    checkpoint file (recognized by its magic number) or of its ``.meta`` graph (recognized by
    its format line). Other files are never touched."""
    removed = []
    for name in sorted(os.listdir(checkpoint_dir)):
        m = _TEMP_RE.match(name)
        path = os.path.join(checkpoint_dir, name)
        if m is None or not os.path.isfile(path):
            continue
        meta = m.group(1).endswith(".meta") and _is_graph_document(path)
        if (
            m.group(1) == index_name
            or _is_checkpoint_file(path)
            or meta
            or not os.path.getsize(path)
        ):
            with contextlib.suppress(OSError):
                os.remove(path)
                removed.append(path)
    return removed


def _stem(path: str) -> str:
    """A checkpoint's name without its step: ``model.ckpt`` of ``.../model.ckpt-120``."""
    return _STEP_RE.sub("", os.path.basename(path))


def recover_checkpoint(
    checkpoint_dir: str,
    latest_filename: str | None = None,
    basename: str | None = None,
    default_basename: str | None = None,
) -> str | None:
    """The newest checkpoint in ``checkpoint_dir`` that verifies (whole file, checksum), for a
    restart; None when the folder holds no checkpoint file at all.

    Never goes back silently: it removes stale temporary files of interrupted saves, scans the
    folder (not only the index, which a kill or a user may have left behind), tries checkpoints
    newest first (by global step, then time), warns naming each one that does not verify, and
    raises DataLossError, touching nothing, when checkpoint files exist but none verifies. When
    the index does not name the checkpoint found as its latest, it is rewritten to list the
    verified checkpoints, oldest first.

    Only checkpoints of one name are candidates (``basename``, ``model.ckpt`` for
    ``model.ckpt-<step>``; by default the name of the index's latest checkpoint, and
    ``default_basename`` (any name when None) when there is no readable index): checkpoints
    another Saver keeps in the folder under their own name (``best-7``) are never adopted, and
    so never rotated away.
    """
    index_name = latest_filename or STATE_FILENAME
    if not os.path.isdir(checkpoint_dir):
        return None
    for p in _remove_stale_temps(checkpoint_dir, index_name):
        warnings.warn(f"removed {p}, a temporary file left by an interrupted save", stacklevel=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = get_checkpoint_state(checkpoint_dir, latest_filename)
    index_trouble = [str(w.message) for w in caught]
    listed = set(state.all_model_checkpoint_paths) if state else set()
    found = {
        os.path.join(checkpoint_dir, n)
        for n in os.listdir(checkpoint_dir)
        if n != index_name and not n.startswith(".")
    }
    candidates = [p for p in found if _is_checkpoint_file(p) or (p in listed and os.path.isfile(p))]
    # checkpoints TensorFlow wrote: a PREFIX.index beside PREFIX.data-* (read through tf_bundle)
    candidates += [
        p[: -len(".index")]
        for p in found
        if p.endswith(".index") and tf_bundle.is_bundle(p[: -len(".index")])
    ]
    if basename is None:
        basename = _stem(state.model_checkpoint_path) if state is not None else default_basename
    if basename is not None:
        candidates = [p for p in candidates if _stem(p) == basename]
    if not candidates:
        return None

    def mtime(p: str) -> float:
        return os.path.getmtime(p if os.path.exists(p) else p + ".index")

    def newness(p: str) -> tuple[int, float]:
        m = _STEP_RE.search(p)
        return (int(m.group(1)) if m else -1, mtime(p))

    candidates.sort(key=newness, reverse=True)
    bad: list[str] = []
    chosen = None
    for p in candidates:
        try:
            CheckpointReader(p)
        except (DataLossError, NotFoundError, OSError) as e:
            bad.append(f"{p} ({e})")
            continue
        chosen = p
        break
    if chosen is None:
        raise DataLossError(
            f"{checkpoint_dir} holds {len(candidates)} checkpoint file(s) but none verifies; "
            "refusing to start again from step 0 over them (nothing was changed). Move them away "
            "to start afresh, or restore a copy. Failures: " + "; ".join(bad)
        )
    if bad:
        warnings.warn(
            f"recovering from {chosen}: skipped newer checkpoint(s) that do not verify: "
            + "; ".join(bad),
            stacklevel=2,
        )
    if state is None or os.path.abspath(state.model_checkpoint_path) != os.path.abspath(chosen):
        if index_trouble:
            why = index_trouble[0]
        else:
            why = f"it named {state.model_checkpoint_path}" if state else "there was none"
        older = [p for p in candidates if newness(p) < newness(chosen)]
        kept = older[::-1] + [chosen]  # older ones are listed so that max_to_keep counts them
        if tf_bundle.is_bundle(chosen):  # keep TensorFlow's text format: TF reads it too
            _write_tf_state(checkpoint_dir, chosen, kept, latest_filename)
        else:
            update_checkpoint_state(
                checkpoint_dir, chosen, kept, latest_filename, [mtime(p) for p in kept]
            )
        warnings.warn(
            f"rewrote the checkpoint index of {checkpoint_dir} ({why}): latest is now {chosen}",
            stacklevel=2,
        )
    return chosen


__all__ = [
    "MAGIC",
    "CheckpointReader",
    "CheckpointState",
    "atomic_write",
    "checkpoint_exists",
    "get_checkpoint_state",
    "is_checkpoint_file",
    "latest_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "recover_checkpoint",
    "update_checkpoint_state",
    "write_checkpoint",
]
