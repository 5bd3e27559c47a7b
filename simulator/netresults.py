"""What a ``Network`` reports: its finished flows and its links' bytes, busy time and
utilization, as pandas DataFrames (``network.py`` holds the model itself)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


FLOW_COLUMNS = ("src", "dst", "tag", "bytes", "start_s", "first_byte_s", "end_s", "path")
LINK_COLUMNS = ("link", "bandwidth_bytes_per_s", "latency_s", "bytes", "busy_s", "utilization")


class NetworkResults:
    """The results methods of ``Network`` (``records``, ``links`` and ``env`` are the network's)."""

    __slots__ = ()

    def flow_frame(self) -> pd.DataFrame:
        """One row per finished flow: src, dst, tag, bytes, start_s (request), first_byte_s
        (after the path latency), end_s (last byte), path (link names joined by '>')."""
        import pandas as pd

        return pd.DataFrame(self.records, columns=list(FLOW_COLUMNS))

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
