"""Op modules. Importing this package registers every op."""

from . import (  # noqa: F401
    array,
    collective,
    control,
    dynamic,
    manip,
    math,
    nn,
    random,
    sampled,
    state,
    transfer,
)
