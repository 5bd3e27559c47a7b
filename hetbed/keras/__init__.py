"""TF1's ``tf.keras`` in graph mode over hetbed (``from hetbed.compat.v1 import keras``).

Layers are hetbed's ``tf.layers`` with Keras's names, defaults and learning phase
(``engine.py``); models are Sequential, functional ``Model(inputs, outputs)`` and subclassed
``Model`` (``models.py``), trained by ``compile``/``fit`` in ``keras.backend.get_session()``
(``training.py``). Weights files are ``.npz`` archives (no pickle, no HDF5)."""

from . import (  # noqa: F401
    activations,
    backend,
    callbacks,
    datasets,
    initializers,
    layers,
    losses,
    metrics,
    models,
    optimizers,
    preprocessing,
    regularizers,
    utils,
)
from .engine import Input  # noqa: F401
from .models import Model, Sequential  # noqa: F401

__version__ = "2.2.4-tf"
