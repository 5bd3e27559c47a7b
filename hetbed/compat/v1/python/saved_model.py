"""``tensorflow.python.saved_model``: ``builder``, ``loader``, ``tag_constants``,
``signature_constants``, ``signature_def_utils`` and ``utils`` (hetbed/saved_model.py)."""

from hetbed.saved_model import (  # noqa: F401
    builder,
    loader,
    signature_constants,
    signature_def_utils,
    tag_constants,
    utils,
)
