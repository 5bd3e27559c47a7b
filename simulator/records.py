"""``RunRecord``: what a simulated step did, as tidy DataFrames."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


LINK_STEP_COLUMNS = ["link", "bandwidth_bytes_per_s", "bytes", "utilization"]


OP_COLUMNS = ["op", "type", "device", "start_s", "end_s", "duration_s"]
FLOW_STEP_COLUMNS = ["src", "dst", "tag", "bytes", "start_s", "first_byte_s", "end_s", "path"]
DEVICE_COLUMNS = [
    "device",
    "kind",
    "busy_s",
    "utilization",
    "memory_peak_bytes",
    "memory_capacity_bytes",
]


class RunRecord:
    """What a simulated step did, as tidy DataFrames (times in simulated seconds, from the
    step's start): ``ops`` (op, type, device, start_s, end_s, duration_s), ``flows`` (src, dst,
    tag, bytes, start_s, first_byte_s, end_s, path), ``devices`` (busy time, utilization, memory
    peak and capacity) and ``links`` (bytes and utilization of each link that carried bytes).

    The frames are built on first access: a step keeps only the raw tuples it recorded.
    """

    def __init__(
        self,
        step_time_s: float,
        op_rows: list,
        flow_rows: list,
        device_rows: list,
        link_rows: list | None = None,
        start_s: float = 0.0,
    ):
        self.step_time_s = step_time_s
        self._raw = (op_rows, flow_rows, device_rows, link_rows or [], start_s)
        self._frames: dict[str, pd.DataFrame] = {}

    @property
    def start_s(self) -> float:
        """When the step began, on the cluster's clock (simulated seconds since it started)."""
        return self._raw[4]

    @property
    def ops(self) -> pd.DataFrame:
        import pandas as pd

        f = self._frames.get("ops")
        if f is None:
            start = self._raw[4]
            rows = [
                (op.name, op.type, dev, s - start, e - start, e - s)
                for dev, recs in self._raw[0]
                for (op, s, e) in recs
            ]
            f = pd.DataFrame(rows, columns=OP_COLUMNS)
            f = f.sort_values(["start_s", "device"], kind="stable", ignore_index=True)
            self._frames["ops"] = f
        return f

    @property
    def flows(self) -> pd.DataFrame:
        import pandas as pd

        f = self._frames.get("flows")
        if f is None:
            start = self._raw[4]
            rows = []
            for r in self._raw[1]:
                r = dict(r)
                for k in ("start_s", "end_s", "first_byte_s"):
                    if k in r:
                        r[k] -= start
                rows.append(r)
            f = self._frames["flows"] = pd.DataFrame(rows, columns=FLOW_STEP_COLUMNS)
        return f

    @property
    def devices(self) -> pd.DataFrame:
        import pandas as pd

        f = self._frames.get("devices")
        if f is None:
            f = self._frames["devices"] = pd.DataFrame(self._raw[2], columns=DEVICE_COLUMNS)
        return f

    @property
    def links(self) -> pd.DataFrame:
        """One row per link that carried bytes in the step: bytes, utilization over the step."""
        import pandas as pd

        f = self._frames.get("links")
        if f is None:
            f = self._frames["links"] = pd.DataFrame(self._raw[3], columns=LINK_STEP_COLUMNS)
        return f

    def chrome_trace(self) -> dict:
        from hetbed.runtime.timeline import chrome_trace

        return chrome_trace(self.ops, self.flows)

    def __repr__(self) -> str:
        return (
            f"<RunRecord step_time_s={self.step_time_s:.6g} ops={len(self.ops)} "
            f"flows={len(self.flows)}>"
        )
