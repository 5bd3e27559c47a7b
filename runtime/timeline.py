"""Step timelines: tidy per-op records and their Chrome trace / Perfetto JSON form.

The same format serves real steps (``RunMetadata.step_stats`` from a traced ``Session.run``) and
simulated ones (the simulator's run records): one track per device, and one per link for flows.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .executor import StepObserver

OP_COLUMNS = ["op", "type", "device", "start_s", "end_s", "duration_s"]
FLOW_COLUMNS = ["src", "dst", "tag", "bytes", "start_s", "end_s", "path"]


class RunOptions:
    """Per-call options for ``Session.run`` (TF1 names): ``trace_level=RunOptions.FULL_TRACE``."""

    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3

    def __init__(self, trace_level: int = 0, timeout_in_ms: int = 0):
        self.trace_level = trace_level
        self.timeout_in_ms = timeout_in_ms


class RunMetadata:
    """Filled by a traced ``Session.run``: ``step_stats`` is a DataFrame with one row per op."""

    def __init__(self) -> None:
        self.step_stats: Any = None
        self.flow_stats: Any = None

    def chrome_trace(self) -> str:
        """The step as Chrome trace JSON (open in chrome://tracing or ui.perfetto.dev)."""
        return json.dumps(chrome_trace(self.step_stats, self.flow_stats))


class TracingObserver(StepObserver):
    """Records wall-clock start and end of every node of one step. An asynchronous node (a
    queue's dequeue, an accumulator's take, a Recv) ends when its kernel calls ``done``, as in
    TensorFlow's step stats, not when the schedule gets to its completion: an accumulator's
    take that finds its gradients in place is done in microseconds even when the schedule first
    runs the other nodes that were ready (a profile would otherwise charge their time to it)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        #: the wall-clock time (time.time) of ``t0``: rows of tasks in other processes or on
        #: other machines, each relative to its own tracer, are placed on this one's axis by it
        self.t0_wall = time.time()
        self.starts: dict[int, float] = {}
        self.dones: dict[int, float] = {}
        self.rows: list[dict] = []

    def node_started(self, node: Any) -> None:
        self.starts[node.index] = time.perf_counter() - self.t0

    def node_done(self, node: Any) -> None:
        self.dones[node.index] = time.perf_counter() - self.t0  # (any thread: one dict store)

    def node_finished(self, node: Any, result: Any, released: Any = ()) -> None:
        end = self.dones.pop(node.index, None)
        if end is None:
            end = time.perf_counter() - self.t0
        start = self.starts.get(node.index, end)
        self.rows.append(
            {
                "op": node.op.name,
                "type": node.op.type,
                "device": node.device.name,
                "start_s": start,
                "end_s": end,
                "duration_s": end - start,
            }
        )

    def frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=OP_COLUMNS)

    def wire_rows(self) -> dict:
        """The rows as a remote task sends them to its master (``add_remote``): plain lists."""
        cols = ("op", "type", "device", "start_s", "end_s")
        return {"t0_wall": self.t0_wall, "rows": [[r[c] for c in cols] for r in self.rows]}

    def add_remote(self, trace: Any, where: str) -> None:
        """Add the rows a task traced for its part of a distributed step (``wire_rows``), moved
        from its clock to this tracer's by the two clocks' wall-clock anchors (on one machine
        they agree; across machines, to within their clocks' offset). Raises ValueError naming
        ``where`` for a malformed trace."""
        try:
            shift = float(trace["t0_wall"]) - self.t0_wall
            for op, kind, device, start, end in trace["rows"]:
                if not (isinstance(op, str) and isinstance(kind, str) and isinstance(device, str)):
                    raise TypeError("op, type and device must be strings")
                start, end = float(start) + shift, float(end) + shift
                self.rows.append(
                    {
                        "op": op,
                        "type": kind,
                        "device": device,
                        "start_s": start,
                        "end_s": end,
                        "duration_s": end - start,
                    }
                )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: malformed trace ({type(e).__name__}: {e})") from None


def chrome_trace(ops: Any, flows: Any = None) -> dict:
    """Trace Event Format dict: a process per device (ops) and per link (flows), times in us."""
    events: list[dict] = []
    pids: dict[str, int] = {}

    def pid(name: str) -> int:
        if name not in pids:
            pids[name] = len(pids) + 1
            events.append(
                {"ph": "M", "name": "process_name", "pid": pids[name], "args": {"name": name}}
            )
        return pids[name]

    if ops is not None:
        for r in ops.itertuples(index=False):
            events.append(
                {
                    "ph": "X",
                    "name": r.op,
                    "cat": r.type,
                    "pid": pid(r.device),
                    "tid": 0,
                    "ts": r.start_s * 1e6,
                    "dur": max(r.end_s - r.start_s, 0.0) * 1e6,
                    "args": {"type": r.type},
                }
            )
    if flows is not None:
        for r in flows.itertuples(index=False):
            track = f"link {r.path}" if getattr(r, "path", "") else f"{r.src} -> {r.dst}"
            events.append(
                {
                    "ph": "X",
                    "name": str(r.tag or f"{r.src}->{r.dst}"),
                    "cat": "flow",
                    "pid": pid(track),
                    "tid": 0,
                    "ts": r.start_s * 1e6,
                    "dur": max(r.end_s - r.start_s, 0.0) * 1e6,
                    "args": {"bytes": int(r.bytes)},
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ms"}
