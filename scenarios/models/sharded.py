"""Sharded embeddings: the wide embedding model, built on hetbed's partitioned variables.

The table is ``hb.get_variable(name, shape, partitioner=hb.fixed_size_partitioner(n))``: N shard
variables ``<name>/part_i`` (one per parameter-server task under a ``replica_device_setter``),
looked up with ``hb.nn.embedding_lookup(shards, ids, partition_strategy)``, which splits the ids
by shard, gathers each shard's rows where the shard lives and stitches them back in the ids'
order; each shard's gradient is an IndexedSlices of the rows it served.

The names this module had before those moved into the runtime stay importable from here:
``shard_rows``, ``sharded_variable``, ``embedding_lookup``, ``dynamic_partition``,
``dynamic_stitch`` and ``range_like``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hetbed as hb
from hetbed.runtime.graph import Tensor
from hetbed.runtime.ops.dynamic import dynamic_partition, dynamic_stitch, range_like  # noqa: F401
from hetbed.runtime.partitioned import iter_slices

from .modelgraph import ModelGraph, Recorder, training_step


def shard_rows(total: int, num_shards: int) -> list[int]:
    """Rows of each shard as TF's fixed_size_partitioner cuts them: the first ``total %
    num_shards`` shards hold one row more."""
    return [s[0] for _, s in iter_slices([int(total)], int(num_shards), 0)]


def sharded_variable(
    name: str,
    shape: tuple[int, ...],
    num_shards: int,
    dtype: Any = hb.float32,
    initializer: Any = None,
) -> list:
    """The ``num_shards`` shard variables ``name/part_i`` of a ``shape`` table cut along its
    rows (``hb.get_variable`` with a ``fixed_size_partitioner``), as a list.

    Raises ValueError when there are fewer rows than shards.
    """
    rows = int(shape[0])
    if num_shards < 1 or rows < num_shards:
        raise ValueError(f"sharded_variable {name!r}: cannot cut {rows} rows into {num_shards}")
    table = hb.get_variable(
        name,
        list(shape),
        dtype=dtype,
        initializer=initializer,
        partitioner=hb.fixed_size_partitioner(num_shards),
    )
    return list(table)


def embedding_lookup(
    params: Any, ids: Any, partition_strategy: str = "mod", name: str | None = None
) -> Tensor:
    """``hb.nn.embedding_lookup`` (kept here for this module's callers)."""
    return hb.nn.embedding_lookup(params, ids, partition_strategy=partition_strategy, name=name)


# ---- the wide embedding model ----------------------------------------------------------------------


def wide_embedding(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    vocab_size: int = 10_000_000,
    dim: int = 64,
    num_shards: int = 8,
    ids_per_example: int = 32,
    hidden: tuple[int, ...] = (256,),
    num_classes: int = 2,
    partition_strategy: str = "mod",
    **kw: Any,
) -> ModelGraph:
    """A sparse-features classifier: ``ids_per_example`` ids per example looked up in a
    ``vocab_size x dim`` table (10M x 64 = 640M parameters by default) kept as ``num_shards``
    variables ``embedding/part_i``, averaged, then ReLU layers and a softmax over
    ``num_classes``. Built for sharding across parameter servers: each step touches only
    ``batch_size * ids_per_example`` rows, and the gradient of each shard is sparse."""
    if image_size is not None:
        raise ValueError("wide_embedding takes no image_size")
    with Recorder() as rec:
        ids = hb.placeholder(hb.int64, [batch_size, ids_per_example], name="ids")
        labels = hb.placeholder(hb.int32, [batch_size], name="labels")
        table = sharded_variable(
            "embedding",
            (vocab_size, dim),
            num_shards,
            dtype=dtype,
            initializer=hb.truncated_normal_initializer(stddev=1.0 / np.sqrt(dim)),
        )
        rows = embedding_lookup(table, ids, partition_strategy)
        h = hb.reduce_mean(rows, axis=1)
        for i, n in enumerate(hidden):
            h = hb.layers.dense(h, n, activation=hb.nn.relu, name=f"fc{i + 1}")
        logits = hb.layers.dense(h, num_classes, name="logits")
        loss = hb.reduce_mean(
            hb.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
            name="loss",
        )
    return training_step(
        "wide_embedding",
        rec,
        {"ids": ids, "labels": labels},
        loss,
        optimizer=optimizer,
        logits=logits,
        input_high={"ids": vocab_size, "labels": num_classes},
        **kw,
    )
