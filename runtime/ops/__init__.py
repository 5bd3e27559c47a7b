"""Op modules. Importing this package registers every op."""

from . import array, control, manip, math, nn, random, state, transfer  # noqa: F401
