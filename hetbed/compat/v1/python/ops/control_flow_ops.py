"""``tensorflow.python.ops.control_flow_ops``: each name a TF1 program takes from it is
``tf.<name>``, and ``with_dependencies``, ``switch`` and ``merge`` (the two primitives of
``cond``, as inception preprocessing's ``apply_with_random_selector`` uses them)."""

from __future__ import annotations

from typing import Any

from .._forward import forward


def with_dependencies(dependencies: Any, output_tensor: Any, name: str | None = None) -> Any:
    """TF1's: ``output_tensor`` (an identity of it, on its device) once ``dependencies`` ran."""
    import hetbed.compat.v1 as tf

    with tf.name_scope(name or "control_dependency"):
        with tf.colocate_with(output_tensor), tf.control_dependencies(list(dependencies)):
            return tf.identity(output_tensor)


from hetbed.runtime.ops.cond import merge, switch  # noqa: E402

__getattr__ = forward(
    __name__, {"with_dependencies": with_dependencies, "switch": switch, "merge": merge}
)
