"""Op modules. Importing this package registers every op."""

from . import (  # noqa: F401
    array,
    collective,
    cond,
    control,
    conv_transpose,
    data_flow,
    dynamic,
    iterator,
    linalg,
    loop,
    manip,
    math,
    math_extra,
    nn,
    random,
    sampled,
    state,
    summary,
    transfer,
)
