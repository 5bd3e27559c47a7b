"""Op modules. Importing this package registers every op."""

from . import array, control, manip, math, nn, random, state  # noqa: F401  (registration side effects)  # noqa: F401
