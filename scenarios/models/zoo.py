"""The model zoo: each entry builds one model's full training step in the default graph.

    import hetbed as hb
    from hetbed.scenarios.models.zoo import ZOO

    with hb.Graph().as_default(), hb.device(hb.train.replica_device_setter(ps_tasks=4)):
        m = ZOO["inception_v3"](batch_size=32, optimizer="momentum")
    m.params, m.flops_per_example, m.variables, m.train_op

Every builder has the signature ``build(batch_size, dtype=hb.float32, optimizer="sgd",
image_size=None, **options)`` (optimizer "sgd", "momentum", "adam", "rmsprop" or an
``hb.train.Optimizer``; ``learning_rate=``, ``global_step=`` and model options as keywords) and
returns a ``ModelGraph``. Builders set no devices: they build in the caller's device scope.

| name | model | trainable parameters |
| --- | --- | --- |
| mlp | 784-512-512-10 | 669,706 |
| cnn | TF "Deep MNIST" CNN | 3,274,634 |
| alexnet | AlexNet 2012 channels, one tower | 62,378,344 |
| alexnet_owt | AlexNet "one weird trick" | 61,100,840 |
| overfeat | Overfeat fast | 145,920,872 |
| vgg_a / vgg16 / vgg19 | VGG configs A, D, E | 132,863,336 / 138,357,544 / 143,667,240 |
| googlenet | Inception v1, no aux heads | 6,998,552 |
| inception_v3 (_aux) | Inception-v3 (with aux head) | 23,817,352 (27,143,152) |
| resnet50 / 101 / 152 | ResNet v1.5 | 25,557,032 / 44,549,160 / 60,192,808 |
| lstm_lm (_sampled) | LSTM-512-512, 40k vocab, full (sampled) softmax | 43,099,200 |
| wide_embedding | 10M x 64 table in 8 shards, MLP head | 640,017,154 |
"""

from __future__ import annotations

import functools

from .convnets import alexnet, cnn, googlenet, mlp, overfeat, vgg, vgg_a
from .inception_v3 import inception_v3
from .language import lstm_lm, lstm_lm_sampled
from .modelgraph import Builder, ModelGraph, count_flops, make_optimizer
from .resnet import resnet50, resnet101, resnet152
from .sharded import embedding_lookup, wide_embedding

ZOO: dict[str, Builder] = {
    "mlp": mlp,
    # a 1.1 GB dense model (281M float32 parameters) for PS-count studies
    "dense_1gb": functools.partial(mlp, hidden=(16384, 16384)),
    "cnn": cnn,
    "alexnet": alexnet,
    "alexnet_owt": functools.partial(alexnet, variant="owt"),
    "overfeat": overfeat,
    "vgg_a": vgg_a,
    "vgg16": functools.partial(vgg, config="d"),
    "vgg19": functools.partial(vgg, config="e"),
    "googlenet": googlenet,
    "inception_v3": inception_v3,
    "inception_v3_aux": functools.partial(inception_v3, aux_logits=True),
    "resnet50": resnet50,
    "resnet101": resnet101,
    "resnet152": resnet152,
    "lstm_lm": lstm_lm,
    "lstm_lm_sampled": lstm_lm_sampled,
    "wide_embedding": wide_embedding,
}


def build(name: str, batch_size: int, **kw) -> ModelGraph:
    """``ZOO[name](batch_size, **kw)``; raises KeyError listing the zoo for an unknown name."""
    try:
        fn = ZOO[name]
    except KeyError:
        raise KeyError(f"no model {name!r} in the zoo; it has {', '.join(sorted(ZOO))}") from None
    return fn(batch_size, **kw)


__all__ = [
    "ZOO",
    "ModelGraph",
    "build",
    "count_flops",
    "embedding_lookup",
    "make_optimizer",
]
