"""``Model.summary()``: TF1 Keras's table of layers, output shapes and parameter counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _count(weights: list) -> int:
    return int(sum(np.prod(w.shape.as_list()) for w in weights))


def _shape_of(layer: Any) -> str:
    try:
        shape = layer.output_shape
    except AttributeError:
        return "multiple"
    if type(layer).__name__ == "InputLayer":
        return f"[{shape}]".replace("'", "")
    return str(shape).replace("'", "")


def _row(fields: list[str], positions: list[int]) -> str:
    line = ""
    for text, end in zip(fields, positions):
        line = (line + text)[:end].ljust(end)
    return line


def print_summary(
    model: Any, line_length: int | None, positions: Any, print_fn: Callable = print
) -> None:
    """Sequential-like models (a chain of single-input layers): columns Layer (type), Output
    Shape, Param #; other functional models add Connected to."""
    from .models import Sequential

    layers = model.layers
    chain = isinstance(model, Sequential) or all(
        len(layer._inbound_nodes) <= 1
        and all(len(n.input_tensors) <= 1 for n in layer._inbound_nodes)
        for layer in layers
    )
    line_length = line_length or (65 if chain else 98)
    fractions = positions or ([0.45, 0.85, 1.0] if chain else [0.33, 0.55, 0.67, 1.0])
    if fractions[-1] <= 1:
        cols = [int(line_length * p) for p in fractions]
    else:
        cols = list(fractions)
    header = ["Layer (type)", "Output Shape", "Param #"] + ([] if chain else ["Connected to"])
    print_fn(f'Model: "{model.name}"')
    print_fn("_" * line_length)
    print_fn(_row(header, cols))
    print_fn("=" * line_length)
    for i, layer in enumerate(layers):
        fields = [f"{layer.name} ({type(layer).__name__})", _shape_of(layer)]
        fields.append(str(layer.count_params()))
        if not chain:
            sources = []
            for node in layer._inbound_nodes[:1]:
                for t in node.input_tensors:
                    src = t.op.name.split("/")[0]
                    sources.append(f"{src}[0][0]")
            fields.append(sources[0] if sources else "")
        print_fn(_row(fields, cols))
        if not chain:
            for extra in sources[1:] if sources else []:
                print_fn(_row(["", "", "", extra], cols))
        print_fn(("=" if i == len(layers) - 1 else "_") * line_length)
    trainable = _count(model.trainable_weights)
    total = _count(model.weights)
    print_fn(f"Total params: {total:,}")
    print_fn(f"Trainable params: {trainable:,}")
    print_fn(f"Non-trainable params: {total - trainable:,}")
    print_fn("_" * line_length)
