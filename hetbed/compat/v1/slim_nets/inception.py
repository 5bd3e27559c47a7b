"""``slim.nets.inception``: Inception v1, v2 and v3 (their nets, bases and arg scopes) under
one name, as TF's module."""

from .inception_v1 import inception_v1, inception_v1_arg_scope, inception_v1_base
from .inception_v2 import inception_v2, inception_v2_arg_scope, inception_v2_base
from .inception_v3 import inception_v3, inception_v3_arg_scope, inception_v3_base

__all__ = [
    "inception_v1",
    "inception_v1_arg_scope",
    "inception_v1_base",
    "inception_v2",
    "inception_v2_arg_scope",
    "inception_v2_base",
    "inception_v3",
    "inception_v3_arg_scope",
    "inception_v3_base",
]
