"""``hb.image`` (TF1's ``tf.image``): flips, crops, padding, resizing, photometric ops, bounding boxes
(crop_and_resize, non_max_suppression, draw_bounding_boxes, sample_distorted_bounding_box) and
image files (decode_jpeg/png/gif/bmp/image, encode_png/jpeg)."""

from hetbed.runtime.ops.image import *  # noqa: F403
from hetbed.runtime.ops.image import __all__ as _image_all
from hetbed.runtime.ops.image_boxes import *  # noqa: F403
from hetbed.runtime.ops.image_boxes import __all__ as _boxes_all
from hetbed.runtime.ops.image_codecs import *  # noqa: F403
from hetbed.runtime.ops.image_codecs import __all__ as _codecs_all

__all__ = [*_image_all, *_boxes_all, *_codecs_all]
