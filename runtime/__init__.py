"""hetbed.runtime: graph IR, ops, autodiff, session and executor, placement, training."""

from . import dtypes, errors, graph, ops, registry  # noqa: F401
