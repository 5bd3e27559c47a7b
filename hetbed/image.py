"""``hb.image`` (TF1's ``tf.image``): flips, crops, padding, resizing and photometric ops."""

from hetbed.runtime.ops.image import *  # noqa: F403
from hetbed.runtime.ops.image import __all__  # noqa: F401
