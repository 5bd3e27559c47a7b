"""``hb.initializers`` (TF1's ``tf.initializers``): initializer classes by their short names."""

from hetbed.runtime.initializers import (
    Constant as constant,
)
from hetbed.runtime.initializers import (
    GlorotNormal as glorot_normal,
)
from hetbed.runtime.initializers import (
    GlorotUniform as glorot_uniform,
)
from hetbed.runtime.initializers import (
    Identity as identity,
)
from hetbed.runtime.initializers import (
    Initializer,
    get,
    he_normal,
    he_uniform,
    lecun_normal,
    lecun_uniform,
)
from hetbed.runtime.initializers import (
    Ones as ones,
)
from hetbed.runtime.initializers import (
    Orthogonal as orthogonal,
)
from hetbed.runtime.initializers import (
    RandomNormal as random_normal,
)
from hetbed.runtime.initializers import (
    RandomUniform as random_uniform,
)
from hetbed.runtime.initializers import (
    TruncatedNormal as truncated_normal,
)
from hetbed.runtime.initializers import (
    VarianceScaling as variance_scaling,
)
from hetbed.runtime.initializers import (
    Zeros as zeros,
)
from hetbed.runtime.variables import global_variables_initializer as global_variables
from hetbed.runtime.variables import local_variables_initializer as local_variables
from hetbed.runtime.variables import variables_initializer as variables

__all__ = [
    "Initializer",
    "constant",
    "get",
    "global_variables",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "identity",
    "lecun_normal",
    "lecun_uniform",
    "local_variables",
    "ones",
    "orthogonal",
    "random_normal",
    "random_uniform",
    "truncated_normal",
    "variables",
    "variance_scaling",
    "zeros",
]
