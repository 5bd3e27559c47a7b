"""``tensorflow.python.training.optimizer``: the base class of TF1's optimizers, with its
protocol for subclasses (``_create_slots``, ``_prepare``, ``_apply_dense``, ``_apply_sparse``,
``_finish``, ``get_slot``, ``_zeros_slot``, ``_get_or_make_slot``, ...)."""

from hetbed.runtime.train.optimizers import Optimizer  # noqa: F401
