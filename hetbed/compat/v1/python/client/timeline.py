"""``tensorflow.python.client.timeline``: a traced step's ``RunMetadata.step_stats`` as a
Chrome trace (``chrome://tracing``, Perfetto), how TF1 programs save a step's timeline."""

from __future__ import annotations

import json
from typing import Any

from hetbed.runtime.timeline import chrome_trace


class Timeline:
    """A traced step (``step_stats`` of a ``RunMetadata`` filled by ``Session.run`` with
    ``RunOptions(trace_level=FULL_TRACE)``, local, distributed or simulated)."""

    def __init__(self, step_stats: Any, graph: Any = None):
        if step_stats is None or not hasattr(step_stats, "itertuples"):
            raise TypeError(
                "Timeline: step_stats must be RunMetadata.step_stats of a traced step (run with "
                f"options=RunOptions(trace_level=RunOptions.FULL_TRACE)), got {type(step_stats).__name__}"
            )
        self._ops = step_stats

    def generate_chrome_trace_format(
        self, show_dataflow: bool = True, show_memory: bool = False
    ) -> str:
        """The Trace Event Format JSON: one process per device, one event per op (times in us
        from the step's start). ``show_dataflow`` and ``show_memory`` are accepted for TF's
        signature; the arrows and memory tracks TF can add are not drawn."""
        return json.dumps(chrome_trace(self._ops))
