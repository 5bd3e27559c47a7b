"""Sharded embeddings: a large table kept as N shard variables ``<name>/part_i`` (one per
parameter-server task under a ``replica_device_setter``) and looked up like TF1's
``tf.nn.embedding_lookup(params=[part_0, ...], ids, partition_strategy)``: the ids are split by
shard, each shard gathers its rows (colocated with the shard, so only those rows travel), and the
rows are stitched back in the ids' order. Each shard's gradient is an IndexedSlices of the rows
it served: the table never receives a dense update.

The ops TF uses for this, ``DynamicPartition`` and ``DynamicStitch`` (and ``RangeLike``, the
indices 0..n-1 of a tensor with n elements), are defined here with their TF1 semantics and
gradients. Their outputs have a data-dependent first dimension (None in the static shape).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hetbed as hb
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import Tensor

# ---- DynamicPartition(data, partitions) -> num_partitions outputs -----------------------------
from hetbed.runtime.ops.dynamic import dynamic_partition, dynamic_stitch, range_like  # noqa: F401
from hetbed.runtime.registry import convert_to_tensor

from .modelgraph import ModelGraph, Recorder, training_step


def shard_rows(total: int, num_shards: int) -> list[int]:
    """Rows of each shard as TF's fixed_size_partitioner cuts them: the first ``total %
    num_shards`` shards hold one row more."""
    base, extra = divmod(int(total), int(num_shards))
    return [base + (1 if i < extra else 0) for i in range(num_shards)]


def sharded_variable(
    name: str,
    shape: tuple[int, ...],
    num_shards: int,
    dtype: Any = hb.float32,
    initializer: Any = None,
) -> list:
    """``num_shards`` variables ``name/part_i`` splitting a ``shape`` table along its rows.

    Raises ValueError when there are fewer rows than shards.
    """
    rows, *rest = (int(d) for d in shape)
    if num_shards < 1 or rows < num_shards:
        raise ValueError(f"sharded_variable {name!r}: cannot cut {rows} rows into {num_shards}")
    with hb.variable_scope(name):
        return [
            hb.get_variable(f"part_{i}", [r, *rest], dtype=dtype, initializer=initializer)
            for i, r in enumerate(shard_rows(rows, num_shards))
        ]


def _static_rows(params: list) -> int:
    total = 0
    for p in params:
        d = p.shape[0] if p.shape.ndims else None
        if d is None:
            raise InvalidArgumentError(
                f"embedding_lookup: shard {p.name} needs a static number of rows, got {p.shape}"
            )
        total += int(d)
    return total


def _assign(flat_ids: Tensor, params: list, strategy: str) -> tuple[Tensor, Tensor]:
    """(shard of each id as int32, row of each id inside its shard), as TF1 computes them."""
    n = len(params)
    if strategy == "mod":
        return hb.cast(hb.floormod(flat_ids, n), hb.int32), hb.floordiv(flat_ids, n)
    total = _static_rows(params)
    per, extras = divmod(total, n)
    if per == 0:
        raise InvalidArgumentError(
            f"embedding_lookup: 'div' needs at least one row per shard, got {total} rows in {n}"
        )
    shard = hb.maximum(hb.floordiv(flat_ids, per + 1), hb.floordiv(flat_ids - extras, per))
    first = hb.less(shard, extras)
    row = hb.where(first, hb.floormod(flat_ids, per + 1), hb.floormod(flat_ids - extras, per))
    return hb.cast(shard, hb.int32), row


def embedding_lookup(
    params: Any, ids: Any, partition_strategy: str = "mod", name: str | None = None
) -> Tensor:
    """Rows of a table kept whole or as a list of shards, with TF1's partition strategies.

    With ``partition_strategy="mod"`` id ``i`` lives in shard ``i % n`` at row ``i // n``; with
    ``"div"`` the ids are cut into contiguous ranges (the first ``rows % n`` shards one id
    longer). The result has shape ``ids.shape + row shape``. Raises InvalidArgumentError for an
    unknown strategy or when ``ids`` has more than one unknown dimension.
    """
    if partition_strategy not in ("mod", "div"):
        raise InvalidArgumentError(
            f"embedding_lookup: partition_strategy must be 'mod' or 'div', got "
            f"{partition_strategy!r}"
        )
    params = list(params) if isinstance(params, (list, tuple)) else [params]
    if len(params) == 1:
        return hb.gather(params[0], ids, name=name or "embedding_lookup")
    g = hb.get_default_graph()
    with g.name_scope(name or "embedding_lookup"):
        ids = convert_to_tensor(ids)
        dims = ids.shape.as_list() if ids.shape.ndims is not None else None
        if dims is None or sum(d is None for d in dims) > 1:
            raise InvalidArgumentError(
                f"embedding_lookup: ids {ids.name} may have at most one unknown dimension, got "
                f"{ids.shape}"
            )
        flat = hb.reshape(ids, [-1])
        shard, row = _assign(flat, params, partition_strategy)
        rows_by_shard = dynamic_partition(row, shard, len(params))
        positions = dynamic_partition(range_like(flat), shard, len(params))
        gathered = []
        for p, r in zip(params, rows_by_shard):
            with hb.colocate_with(p):  # the gather runs where the shard lives
                gathered.append(hb.gather(p, r))
        out = dynamic_stitch(positions, gathered)
        rest = params[0].shape.as_list()[1:]
        return hb.reshape(out, [-1 if d is None else d for d in dims] + rest)


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
