"""``tensorflow.python.framework.dtypes``."""

from hetbed import DType, as_dtype, bool_, float16, float32, float64, int32, int64  # noqa: F401

bool = bool_  # noqa: A001 - TF's name
