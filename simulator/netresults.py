"""What a ``Network`` reports: its finished flows and its links' bytes, busy time and
utilization, as pandas DataFrames (``network.py`` holds the model itself)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


FLOW_COLUMNS = ("src", "dst", "tag", "bytes", "start_s", "first_byte_s", "end_s", "path")
LINK_COLUMNS = ("link", "bandwidth_bytes_per_s", "latency_s", "bytes", "busy_s", "utilization")


_FLOW_TIMES = ("start_s", "first_byte_s", "end_s")


class ShiftedFlows(Sequence):
    """A replayed step's flow records: a template's rows (dicts of ``FLOW_COLUMNS``, times from
    its step's start) with ``at`` added to their times, made when first read (a step's flows
    are often never read, and copying them was most of a replayed step's cost)."""

    __slots__ = ("_rows", "_at", "_list")

    def __init__(self, rows: list[dict[str, Any]], at: float):
        self._rows, self._at, self._list = rows, at, None

    def _made(self) -> list[dict[str, Any]]:
        if self._list is None:
            at, out = self._at, []
            for f in self._rows:
                r = f.copy()
                for k in _FLOW_TIMES:
                    r[k] += at
                out.append(r)
            self._list = out
        return self._list

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        return self._made()[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._made())


class FlowLog(Sequence):
    """A network's finished flows, oldest first (dicts of ``FLOW_COLUMNS``): a list to which the
    network appends, and to which a replayed step adds its flows whole (``add_shifted``), kept
    as ``ShiftedFlows`` until read. ``log[n:]`` from where a step began gives that step's
    flows (the replayed step's ``ShiftedFlows`` itself); ``del log[:n]`` drops the oldest."""

    __slots__ = ("_parts", "_tail", "_closed", "append")

    def __init__(self) -> None:
        self._parts: list[Sequence] = []  # the last is ``_tail``, the list appended to
        self._closed = 0  # records in the parts before the tail
        self._open_tail()

    def _open_tail(self) -> None:
        self._tail: list[dict[str, Any]] = []
        self._parts.append(self._tail)
        self.append = self._tail.append

    def add_shifted(self, rows: list[dict[str, Any]], at: float) -> None:
        """Add a template's flow records, their times shifted by ``at`` (see ``ShiftedFlows``)."""
        if self._tail:
            self._closed += len(self._tail)
        else:
            self._parts.pop()
        self._parts.append(ShiftedFlows(rows, at))
        self._closed += len(rows)
        self._open_tail()

    def __len__(self) -> int:
        return self._closed + len(self._tail)

    def extend(self, rows: Any) -> None:
        self._tail.extend(rows)

    def clear(self) -> None:
        self._parts, self._closed = [], 0
        self._open_tail()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for p in self._parts:
            yield from p

    def _from(self, n: int) -> list[Sequence]:
        """The parts holding records ``n`` on (the first cut to start at ``n``)."""
        out, seen = [], 0
        for p in self._parts:
            k = len(p)
            if k and seen + k > n:
                out.append(p if seen >= n else p[n - seen :])
            seen += k
        return out

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice) and i.stop is None and i.step is None and (i.start or 0) >= 0:
            parts = self._from(i.start or 0)
            if len(parts) == 1 and isinstance(parts[0], ShiftedFlows):
                return parts[0]  # (a replayed step's, still unread)
            return [r for p in parts for r in p]
        return list(self)[i]

    def __delitem__(self, i: Any) -> None:
        if not (isinstance(i, slice) and i.start is None and i.step is None and i.stop is not None):
            raise TypeError("FlowLog: only the oldest records can be dropped (del log[:n])")
        n = i.stop if i.stop >= 0 else max(len(self) + i.stop, 0)
        had_tail = bool(self._tail) and n < len(self)
        self._parts = self._from(n)
        if had_tail:  # (the last part left is the tail, or what is left of it)
            last = self._parts.pop()
            self._closed = sum(map(len, self._parts))
            self._tail = last
            self._parts.append(last)
            self.append = last.append
        else:
            self._closed = sum(map(len, self._parts))
            self._open_tail()


class NetworkResults:
    """The results methods of ``Network`` (``records``, ``links`` and ``env`` are the network's)."""

    __slots__ = ()

    def flow_frame(self) -> pd.DataFrame:
        """One row per finished flow: src, dst, tag, bytes, start_s (request), first_byte_s
        (after the path latency), end_s (last byte), path (link names joined by '>')."""
        import pandas as pd

        return pd.DataFrame(list(self.records), columns=list(FLOW_COLUMNS))

    def carried_bytes(self) -> dict[str, float]:
        """Bytes each link has carried so far (cheaper than ``link_frame`` for per-step diffs)."""
        now = self.env.now
        return {name: link._books._carried(now) for name, link in self.links.items()}

    def link_frame(self, horizon_s: float | None = None) -> pd.DataFrame:
        """One row per link: bytes carried and busy time so far, and utilization.

        ``busy_s`` is the time during which at least one flow was transferring over the link;
        ``utilization`` is bytes / (bandwidth x horizon), the horizon defaulting to the current
        simulated time (NaN while it is 0).
        """
        import pandas as pd

        now = self.env.now
        horizon = now if horizon_s is None else float(horizon_s)
        rows = []
        for link in self.links.values():
            carried = link._books._carried(now)
            busy = link._books._busy(now)
            capacity = link.bandwidth_bytes_per_s * horizon
            rows.append(
                {
                    "link": link.name,
                    "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
                    "latency_s": link.latency_s,
                    "bytes": carried,
                    "busy_s": busy,
                    "utilization": carried / capacity if capacity > 0 else math.nan,
                }
            )
        return pd.DataFrame(rows, columns=list(LINK_COLUMNS))
