"""``hb.summary`` (TF1's ``tf.summary``): summary ops and a FileWriter for TensorBoard.

``scalar``, ``histogram``, ``image`` and ``text`` add an op whose value is a serialized
``Summary`` (see ``hetbed.runtime.ops.summary``) and put it in the ``summaries`` collection;
``merge`` joins summaries and ``merge_all`` joins the collection. ``FileWriter`` writes TensorBoard
event files through the ``tensorboard`` package's own writer (``EventFileWriter``), so TensorBoard
and its ``EventAccumulator`` read them. ``add_graph`` writes a ``GraphDef`` with each node's name,
op, inputs (``^name`` for control inputs) and device.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.graph import GraphKeys, Tensor, get_collection, get_default_graph
from hetbed.runtime.registry import apply_op, convert_to_tensor

_log = logging.getLogger("hetbed")

__all__ = [
    "FileWriter",
    "audio",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "scalar",
    "text",
]


def _summary_op(
    op_type: str, name: str, inputs: list, attrs: dict, collections: Any, graph: Any = None
) -> Tensor:
    if not isinstance(name, str) or not name:
        raise ValueError(f"tf.summary: a summary needs a non-empty name, got {name!r}")
    clean = _clean_tag(name)
    op = apply_op(op_type, inputs, dict(attrs, tag=""), name=clean, graph=graph)
    op.attrs["tag"] = op.name  # TF1: the tag is the op's scoped, uniquified name
    t = op.outputs[0]
    for key in [GraphKeys.SUMMARIES] if collections is None else collections:
        op.graph.add_to_collection(key, t)
    return t


_INVALID_TAG_CHARS = re.compile(r"[^-/\w\.]")


def _clean_tag(name: str) -> str:
    """TF1's cleaning of a summary name: characters an op name cannot have become ``_`` and
    leading slashes go (``loss (raw)`` -> ``loss__raw_``), with a log line saying so."""
    clean = _INVALID_TAG_CHARS.sub("_", name).lstrip("/")
    if clean != name:
        _log.info("Summary name %s is illegal; using %s instead.", name, clean)
    return clean or "_"


def scalar(name: str, tensor: Any, collections: Any = None, family: Any = None) -> Tensor:
    """A ``Summary`` with one ``simple_value``: the scalar ``tensor``'s value."""
    return _summary_op("ScalarSummary", name, [_as_float(tensor)], {}, collections)


def histogram(name: str, values: Any, collections: Any = None, family: Any = None) -> Tensor:
    """A ``Summary`` with a ``HistogramProto`` of ``values`` (TF's default buckets)."""
    return _summary_op("HistogramSummary", name, [_as_float(values)], {}, collections)


def image(
    name: str, tensor: Any, max_outputs: int = 3, collections: Any = None, family: Any = None
) -> Tensor:
    """Up to ``max_outputs`` PNG images of a ``[batch, h, w, 1|3|4]`` tensor, tagged
    ``name/image/i`` (``name/image`` when ``max_outputs`` is 1)."""
    n = int(max_outputs)
    if n < 1:
        raise ValueError(f"tf.summary.image {name!r}: max_outputs must be positive, got {n}")
    return _summary_op("ImageSummary", name, [tensor], {"max_outputs": n}, collections)


def audio(
    name: str,
    tensor: Any,
    sample_rate: Any,
    max_outputs: int = 3,
    collections: Any = None,
    family: Any = None,
) -> Tensor:
    """Up to ``max_outputs`` WAV clips (16-bit PCM) of a float ``[batch, frames]`` or ``[batch,
    frames, channels]`` tensor in [-1, 1], tagged ``name/audio/i`` (``name/audio`` when
    ``max_outputs`` is 1); ``sample_rate`` a scalar in Hz (a tensor or a number)."""
    n = int(max_outputs)
    if n < 1:
        raise ValueError(f"tf.summary.audio {name!r}: max_outputs must be positive, got {n}")
    rate = convert_to_tensor(sample_rate, dtype=_dt.float32)
    return _summary_op(
        "AudioSummaryV2", name, [_as_float(tensor), rate], {"max_outputs": n}, collections
    )


def text(name: str, tensor: Any, collections: Any = None) -> Tensor:
    """A text summary of a string tensor's value, or of a Python str (fixed with the graph)."""
    if isinstance(tensor, bytes):
        tensor = tensor.decode("utf-8")
    if isinstance(tensor, str):
        g = get_default_graph()
        return _summary_op("TextSummary", name, [], {"text": tensor}, collections, g)
    t = convert_to_tensor(tensor)
    if t.dtype != _dt.string:
        raise TypeError(f"tf.summary.text {name!r}: {t.name} is {t.dtype.name}, not a string")
    return _summary_op("TextSummary", name, [t], {"text": None}, collections)


def merge(inputs: Any, collections: Any = None, name: str | None = None) -> Tensor:
    """One ``Summary`` holding the values of every summary in ``inputs``."""
    ts = [convert_to_tensor(t) for t in inputs]
    if not ts:
        raise ValueError("tf.summary.merge: no summaries to merge")
    t = apply_op("MergeSummary", ts, {}, name=name or "Merge/MergeSummary").outputs[0]
    for key in collections or []:
        t.graph.add_to_collection(key, t)
    return t


def merge_all(key: str = GraphKeys.SUMMARIES, scope: str | None = None, name: str | None = None):
    """``merge`` of the summaries in collection ``key`` (optionally under ``scope``); None when
    there are none, as in TF."""
    items = get_collection(key, scope) if scope is not None else get_collection(key)
    return merge(items, name=name) if items else None


def _as_float(x: Any) -> Tensor:
    t = convert_to_tensor(x)
    if t.dtype == _dt.string:
        raise TypeError(f"tf.summary: {t.name} is a summary, not a numeric tensor")
    return t


# ---- FileWriter ------------------------------------------------------------------------------


def _pb():
    from tensorboard.compat.proto import event_pb2, graph_pb2, node_def_pb2, summary_pb2

    return event_pb2, graph_pb2, node_def_pb2, summary_pb2


def _as_summary(summary: Any) -> Any:
    _, _, _, summary_pb2 = _pb()
    if isinstance(summary, summary_pb2.Summary):
        return summary
    if isinstance(summary, np.ndarray):
        if summary.shape != () or not isinstance(summary.item(), bytes):
            raise TypeError(
                f"FileWriter.add_summary: expected a fetched summary (a 0-d array holding bytes), "
                f"got an array of shape {list(summary.shape)} and dtype {summary.dtype}"
            )
        summary = summary.item()
    if not isinstance(summary, (bytes, bytearray)):
        raise TypeError(
            "FileWriter.add_summary: expected a Summary proto, serialized bytes or a fetched "
            f"summary, got {type(summary).__name__}"
        )
    s = summary_pb2.Summary()
    s.ParseFromString(bytes(summary))
    return s


def graph_def(graph: Any) -> Any:
    """TensorFlow's ``GraphDef`` message of a hetbed graph (TensorBoard's copy of it): names,
    ops, inputs and devices, and in attribute ``_hetbed`` what ``import_graph_def`` needs to
    rebuild each node (runtime/graph_import.py)."""
    from hetbed.runtime.graph_import import HETBED_ATTR, node_payload

    _, graph_pb2, node_def_pb2, _ = _pb()
    nodes = []
    for op in graph.get_operations():
        ins = [t.name[:-2] if t.name.endswith(":0") else t.name for t in op.inputs]
        ins += ["^" + c.name for c in op.control_inputs]
        device = op.device if isinstance(op.device, str) else op.device.to_string()
        nd = node_def_pb2.NodeDef(name=op.name, op=op.type, input=ins, device=device)
        payload = node_payload(op)
        if payload is not None:
            nd.attr[HETBED_ATTR].s = payload
        nodes.append(nd)
    return graph_pb2.GraphDef(node=nodes)


def _run_metadata_proto(step_stats: Any) -> bytes:
    """TF's ``RunMetadata`` (serialized) of a traced step's rows (op, type, device, start_s,
    end_s): one ``DeviceStepStats`` per device, one ``NodeExecStats`` per op, in microseconds
    from the step's start."""
    from tensorboard.compat.proto import config_pb2

    md = config_pb2.RunMetadata()
    if step_stats is not None and len(step_stats):
        by_device: dict[str, Any] = {}
        for r in step_stats.itertuples(index=False):
            dev = by_device.get(r.device)
            if dev is None:
                dev = by_device[r.device] = md.step_stats.dev_stats.add(device=r.device)
            start, took = int(round(r.start_s * 1e6)), int(round((r.end_s - r.start_s) * 1e6))
            dev.node_stats.add(
                node_name=r.op,
                timeline_label=f"{r.op} = {r.type}()",
                all_start_micros=start,
                op_start_rel_micros=0,
                op_end_rel_micros=took,
                all_end_rel_micros=took,
            )

    return md.SerializeToString()


class FileWriter:
    """TF1's ``tf.summary.FileWriter``: an event file in ``logdir`` for TensorBoard.

    ``graph`` (optional) is written first, as ``add_graph`` does. Events are queued and written
    by the ``tensorboard`` package's ``EventFileWriter``; ``flush`` forces them out and ``close``
    ends the file (a closed writer refuses more events; ``reopen`` starts a new file).
    """

    def __init__(
        self,
        logdir: str,
        graph: Any = None,
        max_queue: int = 10,
        flush_secs: float = 120,
        graph_def: Any = None,
        filename_suffix: str | None = None,
        session: Any = None,
    ):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._args = (str(logdir), int(max_queue), float(flush_secs), filename_suffix or "")
        self._make = EventFileWriter
        self._writer = EventFileWriter(*self._args)
        self._closed = False
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)

    def get_logdir(self) -> str:
        return self._writer.get_logdir()

    def _event(self, step: Any = None, **fields: Any) -> None:
        if self._closed:
            raise RuntimeError(f"FileWriter for {self._args[0]!r} is closed (call reopen())")
        event_pb2 = _pb()[0]
        ev = event_pb2.Event(wall_time=time.time(), **fields)
        if step is not None:
            ev.step = int(step)
        self._writer.add_event(ev)

    def add_summary(self, summary: Any, global_step: Any = None) -> None:
        """Write a summary: a fetched summary, its bytes or a ``Summary`` proto, at
        ``global_step`` (any integer, numpy integers included)."""
        self._event(global_step, summary=_as_summary(summary))

    def add_graph(self, graph: Any, global_step: Any = None, graph_def: Any = None) -> None:
        """Write ``graph`` (a hetbed Graph, or a ``GraphDef`` proto as TF1's ``FileWriter(logdir,
        sess.graph_def)`` gives it) or ``graph_def``."""
        if graph_def is None and hasattr(graph, "SerializeToString"):
            graph_def, graph = graph, None
        gd = graph_def if graph_def is not None else globals()["graph_def"](graph)
        self._event(global_step, graph_def=gd.SerializeToString())

    def add_run_metadata(self, run_metadata: Any, tag: str, global_step: Any = None) -> None:
        """Write a traced step's metadata under ``tag`` (TensorBoard's graph page shows each
        node's compute time from it): hetbed's ``RunMetadata`` becomes TF's proto, a
        ``NodeExecStats`` per op on its device, times from the step's start; a TF
        ``RunMetadata`` proto is written as it is."""
        event_pb2 = _pb()[0]
        if hasattr(run_metadata, "SerializeToString"):
            data = run_metadata.SerializeToString()
        else:
            data = _run_metadata_proto(getattr(run_metadata, "step_stats", None))
        tagged = event_pb2.TaggedRunMetadata(tag=str(tag), run_metadata=data)
        self._event(global_step, tagged_run_metadata=tagged)

    def add_event(self, event: Any) -> None:
        if self._closed:
            raise RuntimeError(f"FileWriter for {self._args[0]!r} is closed (call reopen())")
        self._writer.add_event(event)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        if not self._closed:
            self._writer.close()
            self._closed = True

    def reopen(self) -> None:
        if self._closed:
            self._writer = self._make(*self._args)
            self._closed = False

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
