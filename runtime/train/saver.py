"""``hb.train.Saver``: saves variables to, and restores them from, checkpoint files.

One file per checkpoint, written atomically with a SHA-256 digest (format in ``checkpoint.py``);
a JSON index named ``checkpoint`` beside them lists the latest and the kept checkpoints.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..graph import GraphKeys, get_default_graph
from ..ops import state
from ..ops.array import placeholder
from ..ops.control import group
from ..partitioned import PartitionedVariable, expand_partitioned
from ..variables import Variable
from .checkpoint import (
    STATE_FILENAME,
    CheckpointReader,
    is_checkpoint_file,
    update_checkpoint_state,
    write_checkpoint,
)

# ---- Saver -----------------------------------------------------------------------------------------


class Saver:
    """Saves and restores variables: ``saver.save(sess, "dir/model", global_step=step)``.

    All its graph ops (one read per variable to fetch, one Assign per variable fed through a
    placeholder, grouped as ``save/restore_all``) are built here, so a finalized graph can still
    be saved and restored. ``var_list``: variables (saved under their op names) or a dict
    name -> variable; default: all global variables.
    """

    def __init__(
        self,
        var_list: Any = None,
        reshape: bool = False,
        sharded: bool = False,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float = 10000.0,
        name: str | None = None,
        restore_sequentially: bool = False,
        saver_def: Any = None,
        builder: Any = None,
        defer_build: bool = False,
        allow_empty: bool = False,
        write_version: int = 2,
        pad_step_number: bool = False,
        save_relative_paths: bool = False,
        filename: str | None = None,
    ):
        g = get_default_graph()
        named = _names_to_vars(var_list, g)
        if not named and not allow_empty:
            raise ValueError("Saver: no variables to save (pass allow_empty=True to allow it)")
        self._graph = g
        self._max_to_keep = max_to_keep
        self._keep_every_s = keep_checkpoint_every_n_hours * 3600.0
        self._next_keep_time = time.time() + self._keep_every_s
        self._pad_step_number = pad_step_number
        self._filename = filename
        self._last: list[tuple[str, float]] = []
        self._meta_warned = False
        self._items: list[tuple[str, Variable, Any]] = []
        assigns = []
        with g.name_scope(name or "save"), g.control_dependencies(None), g.device(None):
            for key in sorted(named):
                var = named[key]
                full = var.shape.is_fully_defined()
                ph = placeholder(var.dtype, var.shape if full else None, name="restore_value")
                assigns.append(state.assign(var, ph, validate_shape=full, name="restore"))
                self._items.append((key, var, ph))
            self._restore_op = group(*assigns, name="restore_all")
        self._reads = [var.value() for _, var, _ in self._items]

    # ---- saving ----------------------------------------------------------------------------
    def save(
        self,
        sess: Any,
        save_path: str,
        global_step: Any = None,
        latest_filename: str | None = None,
        meta_graph_suffix: str = "meta",
        write_meta_graph: bool = True,
        write_state: bool = True,
        strip_default_attrs: bool = False,
        save_debug_info: bool = False,
    ) -> str:
        """Write the variables' values in ``sess`` to ``save_path`` (``save_path-<step>`` with a
        global step) and return that path. Updates the directory's index and deletes checkpoints
        beyond ``max_to_keep``. A missing directory is made when its own parent exists (as TF's V2
        checkpoints do: one level); otherwise ValueError."""
        if latest_filename and os.path.dirname(latest_filename):
            raise ValueError(f"latest_filename {latest_filename!r} must be a bare file name")
        if global_step is not None:
            if isinstance(global_step, np.ndarray) and global_step.ndim == 0:
                global_step = global_step[()]  # what sess.run(global_step) returns
            if isinstance(global_step, (bool, np.bool_)) or not isinstance(
                global_step, (int, np.integer)
            ):
                if isinstance(global_step, (float, np.floating, bool, np.bool_, str)):
                    raise TypeError(
                        f"Saver.save: global_step must be an integer, a Variable or a tensor, "
                        f"got {global_step!r}"
                    )
                from .training_util import global_step as _step_of

                global_step = _step_of(sess, global_step)
            step = f"{int(global_step):08d}" if self._pad_step_number else str(int(global_step))
            path = f"{save_path}-{step}"
        else:
            path = save_path
        directory = os.path.dirname(os.path.abspath(path))
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise ValueError(f"cannot save {path!r}: {directory} exists and is not a directory")
        if not os.path.isdir(directory) and os.path.isdir(os.path.dirname(directory)):
            # as TF's V2 checkpoints do: the missing parent is made, one level and no more
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory)
        if not os.path.isdir(directory):
            raise ValueError(f"parent directory of {path!r} does not exist, cannot save")
        if os.path.isdir(path):
            raise ValueError(f"save path {path!r} is a directory; pass a file prefix inside it")
        index = os.path.join(directory, latest_filename or STATE_FILENAME)
        if write_state and os.path.abspath(path) in (index, os.path.abspath(index) + ".tmp"):
            raise ValueError(
                f"cannot save to {path!r}: it is the folder's checkpoint index "
                f"({os.path.basename(index)}), which the save rewrites; choose another prefix "
                "(e.g. model.ckpt)"
            )
        values = sess.run(self._reads) if self._reads else []
        try:
            write_checkpoint(path, {k: v for (k, _, _), v in zip(self._items, values)})
        except OSError as e:
            raise OSError(e.errno, f"cannot write the checkpoint {path}: {e.strerror}") from e
        if write_meta_graph:
            self._write_meta(f"{path}.{meta_graph_suffix}", getattr(sess, "graph", self._graph))
        if write_state:
            self._record(path, directory, latest_filename)
        return path

    def _write_meta(self, meta_path: str, graph: Any) -> None:
        """The graph beside the checkpoint (hetbed's graph document, for import_meta_graph).
        A graph that cannot be written (a py_func, a dataset) leaves the checkpoint saved and
        warns once."""
        from ..serialize import write_graph

        try:
            write_graph(graph, meta_path, format="msgpack")
        except (TypeError, ValueError) as e:
            if not self._meta_warned:
                self._meta_warned = True
                warnings.warn(
                    f"Saver: the graph is not written beside the checkpoint ({e}); the "
                    "variables are saved",
                    stacklevel=3,
                )

    def _record(self, path: str, directory: str, latest_filename: str | None) -> None:
        now = time.time()
        self._last = [(p, t) for p, t in self._last if p != path] + [(path, now)]
        doomed = []
        if self._max_to_keep:
            while len(self._last) > self._max_to_keep:
                p, t = self._last.pop(0)
                if t > self._next_keep_time:  # keep one checkpoint every n hours
                    self._next_keep_time += self._keep_every_s
                else:
                    doomed.append(p)
        kept = [p for p, _ in self._last] if self._max_to_keep else [path]
        stamps = [t for _, t in self._last] if self._max_to_keep else [now]
        update_checkpoint_state(directory, path, kept, latest_filename, stamps)
        for p in doomed:  # only after the index no longer lists them
            if os.path.dirname(os.path.abspath(p)) != directory or not is_checkpoint_file(p):
                # never a file that is not a checkpoint (an index edited to list one, a
                # checkpoint replaced since), nor one outside the folder this save writes
                # into (another run's, listed by path): rotation is this folder's
                continue
            for f in (p, p + ".meta"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(f)

    @property
    def last_checkpoints(self) -> list[str]:
        """The checkpoints this Saver keeps, oldest first."""
        return [p for p, _ in self._last]

    def recover_last_checkpoints(self, checkpoint_paths: list[str]) -> None:
        """Adopt existing checkpoints (e.g. from ``get_checkpoint_state``) as kept ones."""
        if isinstance(checkpoint_paths, (str, bytes)) or not all(
            isinstance(p, str) for p in checkpoint_paths
        ):
            raise TypeError(
                f"recover_last_checkpoints: expected a list of paths, got {checkpoint_paths!r}"
            )
        now = time.time()
        self._last = [(p, now) for p in checkpoint_paths if is_checkpoint_file(p)]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time: list) -> None:
        self._last = [(p, float(t)) for p, t in last_checkpoints_with_time]

    # ---- restoring ---------------------------------------------------------------------------
    def restore(self, sess: Any, save_path: str) -> None:
        """Assign the values stored in ``save_path`` to the variables in ``sess``.

        The whole file is validated before anything is assigned, so on error the variables keep
        their values. Raises NotFoundError (missing file or variable), DataLossError (truncated or
        corrupt file) or InvalidArgumentError (dtype or shape mismatch), each naming the file.
        """
        if save_path is None:
            raise ValueError(
                "restore: save_path is None; pass a checkpoint path, e.g. "
                "hb.train.latest_checkpoint(directory)"
            )
        reader = CheckpointReader(save_path)
        feeds = {}
        for key, var, ph in self._items:
            whole = _whole_of_shard(reader, key, var)
            if whole is not None:  # a shard, from the whole tensor TensorFlow saved in slices
                feeds[ph] = _shard_value(reader, whole, var, save_path)
                continue
            e = reader.entry(key)
            if e.dtype != var.dtype:
                raise InvalidArgumentError(
                    f"restoring {var.op.name} from {save_path}: the checkpoint's {key!r} is "
                    f"{e.dtype.name}, the variable is {var.dtype.name}"
                )
            if not var.shape.is_compatible_with(e.shape):
                raise InvalidArgumentError(
                    f"restoring {var.op.name} from {save_path}: checkpoint shape "
                    f"{list(e.shape)} for {key!r} does not match the variable's shape {var.shape}"
                )
            feeds[ph] = reader.get_tensor(key)
        if self._items:
            sess.run(self._restore_op, feeds)

    def export_meta_graph(self, filename: str | None = None, **kwargs: Any) -> dict:
        """TF1's ``Saver.export_meta_graph``: ``export_meta_graph`` of this Saver's graph."""
        kwargs.setdefault("graph", self._graph)
        return export_meta_graph(filename, **kwargs)

    def as_saver_def(self) -> dict:
        return {
            "restore_op_name": self._restore_op.name,
            "max_to_keep": self._max_to_keep,
            "keep_checkpoint_every_n_hours": self._keep_every_s / 3600.0,
            "variables": [k for k, _, _ in self._items],
        }


def _whole_of_shard(reader: CheckpointReader, key: str, var: Variable) -> str | None:
    """The checkpoint name of the whole partitioned variable ``var`` is a shard of, where the
    checkpoint holds that (TensorFlow saves a partitioned variable whole, in slices) and not
    the shard under ``key`` (hetbed saves each shard)."""
    info = var._save_slice_info
    if info is None or reader.has_tensor(key):
        return None
    suffix = var.op.name[len(info.full_name) :] if var.op.name.startswith(info.full_name) else ""
    whole = key[: -len(suffix)] if suffix and key.endswith(suffix) else info.full_name
    return whole if reader.has_tensor(whole) else None


def _shard_value(reader: CheckpointReader, whole: str, var: Variable, path: str) -> np.ndarray:
    info = var._save_slice_info
    e = reader.entry(whole)
    if e.dtype != var.dtype or list(e.shape) != info.full_shape:
        raise InvalidArgumentError(
            f"restoring {var.op.name} from {path}: the checkpoint's {whole!r} is "
            f"{e.dtype.name} {list(e.shape)}, the partitioned variable {var.dtype.name} "
            f"{info.full_shape}"
        )
    where = tuple(slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))
    return reader.get_tensor(whole)[where]


def _names_to_vars(var_list: Any, graph: Any) -> dict[str, Variable]:
    if var_list is None:
        var_list = graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
    if isinstance(var_list, dict):
        items = []
        for key, v in var_list.items():
            if isinstance(v, PartitionedVariable):  # each shard under KEY/part_i
                items.extend((f"{key}/part_{i}", s) for i, s in enumerate(v))
            else:
                items.append((key, v))
    else:
        items = []
        for v in expand_partitioned(var_list):
            if not isinstance(v, Variable):
                raise TypeError(f"Saver saves hb.Variable objects; got {v!r}")
            items.append((v.op.name, v))
    out: dict[str, Variable] = {}
    for key, v in items:
        if not isinstance(key, str) or not key:
            raise TypeError(f"Saver: checkpoint names must be non-empty strings, got {key!r}")
        if not isinstance(v, Variable):
            raise TypeError(f"Saver: {key!r} maps to {v!r}, not an hb.Variable")
        if key in out:
            if out[key] is v:
                continue
            raise ValueError(f"Saver: two variables would be saved under the name {key!r}")
        out[key] = v
    return out


__all__ = ["Saver"]


# ---- meta graphs -------------------------------------------------------------------------------


def export_meta_graph(filename: str | None = None, graph: Any = None, **unused: Any) -> dict:
    """Write ``graph`` (default: the default graph) to ``filename`` as hetbed's graph document
    (msgpack), as ``Saver.save`` does beside each checkpoint; return the document."""
    from ..serialize import graph_to_dict, write_graph

    g = graph if graph is not None else get_default_graph()
    if filename is not None:
        write_graph(g, filename, format="msgpack")
    return graph_to_dict(g)


def import_meta_graph(
    meta_graph_or_file: Any, clear_devices: bool = False, import_scope: str | None = None, **unused
) -> Saver | None:
    """TF1's ``tf.train.import_meta_graph``: rebuild the graph ``Saver.save`` wrote beside a
    checkpoint (``<checkpoint>.meta``, or a document from ``export_meta_graph``) into the default
    graph, which must have no op of the same names; return a Saver of its variables (None when
    it has none) to ``restore`` them. ``clear_devices`` drops the ops' device requests;
    ``import_scope`` puts every imported name under that scope (the Saver still reads the
    checkpoint's names, without it)."""
    from ..serialize import graph_from_dict, read_graph_document

    if isinstance(meta_graph_or_file, dict):
        doc = meta_graph_or_file
    else:
        path = os.fspath(meta_graph_or_file)
        if not os.path.isfile(path):
            from ..errors import NotFoundError

            raise NotFoundError(f"import_meta_graph: no meta graph file {path!r}")
        with open(path, "rb") as f:
            doc = read_graph_document(f.read())
    if clear_devices and isinstance(doc, dict) and isinstance(doc.get("nodes"), list):
        doc = dict(
            doc, nodes=[dict(n, device="") if isinstance(n, dict) else n for n in doc["nodes"]]
        )
    g = get_default_graph()
    prefix = ""
    if import_scope:
        from ..graph_import import scoped_document

        if not isinstance(doc, dict):
            raise ValueError("import_meta_graph: not a graph document")
        with g.name_scope(import_scope) as scope:
            prefix = scope
        doc = scoped_document(doc, prefix)
    before = set(g.get_collection(GraphKeys.GLOBAL_VARIABLES))
    graph_from_dict(doc, into=g)
    new = [v for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES) if v not in before]
    if not new:
        return None
    # the checkpoint keys are the names the variables had when saved, without the scope
    return Saver({v.op.name[len(prefix) :]: v for v in new}) if prefix else Saver(new)
