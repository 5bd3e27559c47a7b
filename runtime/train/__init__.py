"""Training: optimizers (fused update ops), the global step, learning-rate schedules, Saver."""

from . import checkpoint, optimizers, saver, training_ops, training_util  # noqa: F401  (registers the ops)
