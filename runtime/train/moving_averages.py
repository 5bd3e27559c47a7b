"""TF1's ``tf.train.ExponentialMovingAverage``: shadow variables that follow other variables or
tensors, ``shadow -= (1 - decay) * (shadow - value)`` each time the op ``apply`` returns runs."""

from __future__ import annotations

from typing import Any

from ..graph import GraphKeys, Tensor, get_default_graph
from ..ops import state
from ..ops.control import group
from ..registry import convert_to_tensor
from ..variables import Variable


class ExponentialMovingAverage:
    """Moving averages of variables (and tensors) with ``decay`` (and, with ``num_updates``,
    ``min(decay, (1 + num_updates) / (10 + num_updates))``, so early averages move faster).

    ``apply(var_list)`` makes one non-trainable shadow variable per item, named
    ``<item>/<name>``, starting at the variable's initial value (zeros for a tensor), adds the
    variables to ``GraphKeys.MOVING_AVERAGE_VARIABLES`` and returns the update op;
    ``average(var)`` is the shadow; ``variables_to_restore()`` maps saved names so that a Saver
    restores the averages into the variables themselves (evaluation with averaged weights).
    """

    def __init__(
        self,
        decay: float,
        num_updates: Any = None,
        zero_debias: bool = False,
        name: str = "ExponentialMovingAverage",
    ):
        if zero_debias:
            raise ValueError("ExponentialMovingAverage: zero_debias is not supported")
        self._decay = decay
        self._num_updates = num_updates
        self._name = name
        self._averages: dict[Any, Variable] = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list: Any = None) -> Any:
        g = get_default_graph()
        items = (
            list(var_list)
            if var_list is not None
            else g.get_collection(GraphKeys.TRAINABLE_VARIABLES)
        )
        for v in items:
            if not isinstance(v, (Variable, Tensor)):
                raise TypeError(
                    f"ExponentialMovingAverage.apply: {v!r} is not a variable or tensor"
                )
            if not v.dtype.is_floating:
                raise TypeError(
                    f"ExponentialMovingAverage.apply: {v.name} is {v.dtype.name}; averages need "
                    "floats"
                )
            if v in self._averages:
                raise ValueError(f"ExponentialMovingAverage.apply: {v.name} is averaged already")
        with g.control_dependencies(None):
            for v in items:
                if isinstance(v, Variable):
                    init = v.initial_value
                else:
                    if not v.shape.is_fully_defined():
                        raise ValueError(
                            f"ExponentialMovingAverage.apply: {v.name} needs a fully known shape"
                        )
                    from ..ops.manip import zeros

                    init = zeros(v.shape.as_list(), v.dtype)
                with g.name_scope(v.op.name + "/"):
                    shadow = Variable(init, trainable=False, name=self._name)
                self._averages[v] = shadow
                if isinstance(v, Variable):
                    g.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, v)
        with g.name_scope(self._name):
            decay = convert_to_tensor(float(self._decay))
            if self._num_updates is not None:
                from ..ops.array import cast
                from ..ops.math import divide, minimum

                n = cast(convert_to_tensor(self._num_updates), decay.dtype)
                decay = minimum(decay, divide(1.0 + n, 10.0 + n))
            updates = []
            for v in items:
                shadow = self._averages[v]
                value = v.read_value() if isinstance(v, Variable) else v  # (after deps)
                keep = 1.0 - decay
                delta = (shadow.value() - convert_to_tensor(value)) * keep
                updates.append(state.assign_sub(shadow, delta))
            return group(*updates, name=self._name)

    def average(self, var: Any) -> Variable | None:
        """The shadow variable of ``var`` (None when it is not averaged)."""
        return self._averages.get(var)

    def average_name(self, var: Any) -> str:
        """The name ``var``'s average is saved under: ``<var>/<name>``."""
        return f"{var.op.name}/{self._name}"

    def variables_to_restore(self, moving_avg_variables: Any = None) -> dict:
        """Saved names -> variables for a Saver that restores the averages into the variables:
        each averaged variable (default: MOVING_AVERAGE_VARIABLES and the trainable ones) under
        its average's name, every other global variable under its own."""
        g = get_default_graph()
        avg = (
            list(moving_avg_variables)
            if moving_avg_variables is not None
            else list(
                dict.fromkeys(
                    g.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES)
                    + g.get_collection(GraphKeys.TRAINABLE_VARIABLES)
                )
            )
        )
        out = {self.average_name(v): v for v in avg}
        shadows = set(self._averages.values())
        for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES):
            if v not in avg and v not in shadows:
                out[v.op.name] = v
        return out
