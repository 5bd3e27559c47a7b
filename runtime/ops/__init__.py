"""Op modules. Importing this package registers every op."""

from . import array, collective, control, manip, math, nn, random, state, transfer  # noqa: F401
