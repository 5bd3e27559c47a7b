"""Partitioned variables (TF1's ``get_variable(partitioner=...)``): partitioners, shards,
``PartitionedVariable``, the sharded ``embedding_lookup``, placement over PS tasks, training and
checkpoints."""

from __future__ import annotations

import math
import socket

import numpy as np
import pytest
from opcheck import check_forward, check_gradient

import hetbed as hb
from hetbed.runtime.partitioned import PartitionInfo
from hetbed.scenarios.models import sharded


def _table(rows: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def _mod_layout(table: np.ndarray, n: int) -> np.ndarray:
    """The contiguous initial value whose "mod" lookup gives ``table[ids]``: shard p holds rows
    p, p + n, p + 2n, ... of ``table``."""
    return np.concatenate([table[p::n] for p in range(n)])


# ---- partitioners -----------------------------------------------------------------------------


def test_fixed_size_partitioner():
    """fixed_size_partitioner cuts the axis into min(num_shards, size) and nothing else."""
    p = hb.fixed_size_partitioner(4)
    assert p(shape=hb.TensorShape([10, 3]), dtype=hb.float32) == [4, 1]
    assert p(shape=hb.TensorShape([2, 3]), dtype=hb.float32) == [2, 1]
    assert hb.fixed_size_partitioner(3, axis=1)(shape=hb.TensorShape([5, 7])) == [1, 3]
    with pytest.raises(ValueError, match="num_shards must be >= 1"):
        hb.fixed_size_partitioner(0)
    with pytest.raises(ValueError, match="axis 2"):
        hb.fixed_size_partitioner(2, axis=2)(shape=hb.TensorShape([5, 7]))


@pytest.mark.parametrize(
    "shape,max_bytes,max_shards,want",
    [
        ([1000, 64], 10_000, None, 26),  # 256 B rows, 39 rows a shard: ceil(1000 / 39)
        ([1000, 64], 10_000, 10, 10),  # capped
        ([1000, 64], 100, None, 1000),  # a row is over the limit: a shard per row
        ([1000, 64], 256_000, None, 1),  # everything fits
        ([1000, 64], 256 * 500, None, 2),  # exactly 500 rows a shard
    ],
)
def test_variable_axis_size_partitioner(shape, max_bytes, max_shards, want):
    """Shards = ceil(rows / max(1, floor(max_shard_bytes / bytes per row))), capped by max_shards."""
    p = hb.variable_axis_size_partitioner(max_bytes, max_shards=max_shards)
    per_row = math.prod(shape[1:]) * 4
    closed = math.ceil(shape[0] / max(1, max_bytes // per_row))
    closed = min(closed, max_shards) if max_shards else closed
    assert p(shape=hb.TensorShape(shape), dtype=hb.float32) == [want, 1] == [closed, 1]


def test_variable_axis_size_partitioner_axis_and_errors():
    """Another axis counts the bytes of one index of it; non-positive sizes raise."""
    p = hb.variable_axis_size_partitioner(8 * 100 * 3, axis=1)  # 3 columns of 100 float64
    assert p(shape=hb.TensorShape([100, 10]), dtype=hb.float64) == [1, 4]
    with pytest.raises(ValueError, match="must be positive"):
        hb.variable_axis_size_partitioner(0)
    with pytest.raises(ValueError, match="max_shards must be positive"):
        hb.variable_axis_size_partitioner(10, max_shards=0)
    with pytest.raises(ValueError, match="not fully defined"):
        p(shape=hb.TensorShape([None, 10]), dtype=hb.float32)


@pytest.mark.parametrize(
    "shape,dtype,max_parts,min_slice,want",
    [
        ([1024, 1024], hb.float32, 32, 256 << 10, 16),  # 4 MiB / 256 KiB (TF's docstring example)
        ([1024, 1024], hb.float32, 4, 256 << 10, 4),  # capped by max_partitions
        ([10, 3], hb.float32, 8, 256 << 10, 1),  # small: one partition
        ([3, 100_000], hb.float32, 100, 256 << 10, 3),  # capped by the axis size
        ([1000, 10], hb.float64, 100, 7000, 12),  # ceil(80000 / 7000)
    ],
)
def test_min_max_variable_partitioner(shape, dtype, max_parts, min_slice, want):
    """Partitions = max(1, min(size, max_partitions, ceil(bytes / min_slice_size)))."""
    p = hb.min_max_variable_partitioner(max_parts, min_slice_size=min_slice)
    closed = max(1, min(shape[0], max_parts, -(-math.prod(shape) * dtype.size // min_slice)))
    assert p(shape=hb.TensorShape(shape), dtype=dtype) == [want, 1] == [closed, 1]


def test_partitioners_in_compat_v1():
    """The partitioners and PartitionedVariable are TF1 top-level names in hetbed.compat.v1."""
    import hetbed.compat.v1 as tf

    assert tf.fixed_size_partitioner is hb.fixed_size_partitioner
    assert tf.min_max_variable_partitioner is hb.min_max_variable_partitioner
    assert tf.variable_axis_size_partitioner is hb.variable_axis_size_partitioner
    assert tf.PartitionedVariable is hb.PartitionedVariable


# ---- PartitionedVariable ------------------------------------------------------------------------


def test_shards_names_shapes_and_collections():
    """Shards are Variables name/part_i, the first rows % n one row longer, in the variable
    collections one by one; the PartitionedVariable has the full shape and the partitions."""
    with hb.Graph().as_default() as g:
        pv = hb.get_variable("emb", [10, 3], partitioner=hb.fixed_size_partitioner(3))
        assert isinstance(pv, hb.PartitionedVariable)
        assert len(pv) == 3 and pv.name == "emb" and pv.dtype == hb.float32
        assert pv.shape == hb.TensorShape([10, 3]) == pv.get_shape()
        assert pv._get_partitions() == [3, 1] and pv._partition_axes() == [0]
        shards = list(pv)
        assert shards == pv.get_variable_list() and all(isinstance(v, hb.Variable) for v in shards)
        assert [v.op.name for v in shards] == ["emb/part_0", "emb/part_1", "emb/part_2"]
        assert [v.shape.as_list() for v in shards] == [[4, 3], [3, 3], [3, 3]]
        assert hb.global_variables() == shards == hb.trainable_variables()
        assert [v._save_slice_info.spec for v in shards] == [
            "10 3 0,4:0,3",
            "10 3 4,3:0,3",
            "10 3 7,3:0,3",
        ]
        cols = hb.get_variable("w", [5, 7], partitioner=hb.fixed_size_partitioner(3, axis=1))
        assert [v.shape.as_list() for v in cols] == [[5, 3], [5, 2], [5, 2]]
        assert cols.partition_axis == 1 and cols._get_partitions() == [1, 3]
        one = hb.get_variable("b", [4], partitioner=hb.fixed_size_partitioner(1))
        assert [v.op.name for v in one] == ["b/part_0"]  # TF1: one shard is still part_0
        assert "emb" not in [op.name for op in g.get_operations()]


@pytest.mark.parametrize("axis", [0, 1])
def test_as_tensor_is_the_full_initial_value(axis):
    """as_tensor() (and use as a tensor, e.g. in matmul) concatenates the shards back into the
    full value, whether it came from an array, a Tensor or constant_initializer(full array)."""
    full = _table(10, 7)
    x = np.random.default_rng(1).standard_normal((2, 10)).astype(np.float32)
    part = hb.fixed_size_partitioner(3, axis=axis)
    with hb.Graph().as_default():
        a = hb.get_variable("a", initializer=full, partitioner=part)
        b = hb.get_variable("b", initializer=hb.constant(full), partitioner=part)
        c = hb.get_variable(
            "c", [10, 7], initializer=hb.constant_initializer(full), partitioner=part
        )
        assert [v.shape[axis] for v in a] == [4, 3, 3] if axis == 0 else [3, 2, 2]
        y = hb.matmul(x, c)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            got = s.run([a.as_tensor(), b.as_tensor(), c.as_tensor(), y, a])
    for v in got[:3] + got[4:]:
        np.testing.assert_array_equal(v, full)
    np.testing.assert_allclose(got[3], x @ full, rtol=1e-5)


def test_assign_splits_the_value():
    """assign / assign_add on a PartitionedVariable write each shard its piece of the value."""
    full = _table(7, 2)
    with hb.Graph().as_default():
        pv = hb.get_variable(
            "v",
            [7, 2],
            initializer=hb.zeros_initializer(),
            partitioner=hb.fixed_size_partitioner(3),
        )
        ops = pv.assign(full)
        add = pv.assign_add(full)
        assert len(ops) == 3
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            s.run(ops)
            s.run(add)
            np.testing.assert_array_equal(s.run(pv.as_tensor()), 2 * full)
        with pytest.raises(ValueError, match=r"v.assign: value .* has shape \(2, 7\)"):
            pv.assign(full.T)


def test_glorot_with_partition_info_scales_by_the_full_shape():
    """Variance-scaling initializers use the full shape's fans for a shard (TF1): glorot_uniform's
    limit is sqrt(6 / (fan_in + fan_out)) of the whole variable in every shard."""
    full, shard = [4000, 50], [1000, 50]
    limit = math.sqrt(6.0 / (4000 + 50))
    with hb.Graph().as_default():
        hb.set_random_seed(0)
        init = hb.glorot_uniform_initializer()
        x = init(shard, partition_info=PartitionInfo(full, [1000, 0]))
        alone = init(shard)
        normal = hb.variance_scaling_initializer(2.0, "fan_in", "untruncated_normal")
        z = normal(shard, partition_info=PartitionInfo(full, [3000, 0]))
        pv = hb.get_variable("w", full, partitioner=hb.fixed_size_partitioner(4))  # default glorot
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            xv, av, zv, shards = s.run([x, alone, z, list(pv)])
    assert limit * 0.98 < np.abs(xv).max() <= limit
    assert np.abs(av).max() > limit * 1.3  # alone, the shard's own fans give a wider limit
    assert abs(zv.std() - math.sqrt(2.0 / 4000)) < 0.02 * math.sqrt(2.0 / 4000)
    for v in shards:
        assert limit * 0.98 < np.abs(v).max() <= limit


def test_partition_info():
    """PartitionInfo gives the shard's slice dimension, offset and slices; bad offsets raise."""
    info = PartitionInfo([10, 3], [4, 0])
    assert info.full_shape == [10, 3] and info.var_offset == [4, 0]
    assert info.single_slice_dim([3, 3]) == 0 and info.single_offset([3, 3]) == 4
    assert info.slices([3, 3]) == (slice(4, 7), slice(0, 3))
    with pytest.raises(ValueError, match="outside full_shape"):
        PartitionInfo([10, 3], [10, 0])
    with pytest.raises(ValueError, match="differ in length"):
        PartitionInfo([10, 3], [0])


# ---- reuse ----------------------------------------------------------------------------------


def test_reuse_rules():
    """Reuse returns the same PartitionedVariable (with or without the partitioner); a different
    partitioning, shape or a missing variable raise ValueError naming it, as do mixes of
    partitioned and unpartitioned variables under one name."""
    fixed = hb.fixed_size_partitioner
    with hb.Graph().as_default():
        with hb.variable_scope("s"):
            pv = hb.get_variable("emb", [10, 3], partitioner=fixed(2))
            plain = hb.get_variable("w", [4, 4])
        with hb.variable_scope("s", reuse=True):
            assert hb.get_variable("emb", [10, 3], partitioner=fixed(2)) is pv
            assert hb.get_variable("emb") is pv
            with pytest.raises(
                ValueError,
                match=r"partitioned variable s/emb, but specified "
                r"partitions \[5, 1\] and found partitions \[2, 1\]",
            ):
                hb.get_variable("emb", [10, 3], partitioner=fixed(5))
            with pytest.raises(
                ValueError, match="reuse partitioned variable s/emb, but specified shape"
            ):
                hb.get_variable("emb", [11, 3], partitioner=fixed(2))
            with pytest.raises(ValueError, match="PartitionedVariable s/nope does not exist"):
                hb.get_variable("nope", [10, 3], partitioner=fixed(2))
            with pytest.raises(
                ValueError,
                match="partitioner was provided, but an unpartitioned "
                "version of the variable was found: s/w",
            ):
                hb.get_variable("w", [4, 4], partitioner=fixed(2))
        with hb.variable_scope("s", reuse=hb.AUTO_REUSE):
            assert hb.get_variable("emb", [10, 3], partitioner=fixed(2)) is pv
            assert hb.get_variable("w") is plain
        with hb.variable_scope("s"):
            with pytest.raises(
                ValueError, match="Partitioned variable with name s/emb already exists"
            ):
                hb.get_variable("emb", [10, 3], partitioner=fixed(2))
            with pytest.raises(
                ValueError,
                match="No partitioner was provided, but a partitioned "
                "version of the variable was found: s/emb/part_0",
            ):
                hb.get_variable("emb", [10, 3])
        assert len(hb.global_variables()) == 3


def test_variable_scope_partitioner():
    """variable_scope(partitioner=...) is get_variable's default, inherited by nested scopes and
    by re-entered scope objects; scalars are never partitioned; an explicit one wins."""
    with hb.Graph().as_default():
        with hb.variable_scope("outer", partitioner=hb.fixed_size_partitioner(2)) as outer:
            assert outer.partitioner is not None
            with hb.variable_scope("inner"):
                a = hb.get_variable("a", [6, 2])
                step = hb.get_variable("step", [], dtype=hb.int64)
                c = hb.get_variable("c", initializer=np.float32(1.0))
                d = hb.get_variable("d", [6, 2], partitioner=hb.fixed_size_partitioner(3))
        with hb.variable_scope(outer):
            b = hb.get_variable("b", [4])
        with hb.variable_scope("plain"):
            e = hb.get_variable("e", [6, 2])
    assert isinstance(a, hb.PartitionedVariable) and len(a) == 2 and a.name == "outer/inner/a"
    assert isinstance(step, hb.Variable) and isinstance(c, hb.Variable)
    assert len(d) == 3 and isinstance(b, hb.PartitionedVariable) and len(b) == 2
    assert isinstance(e, hb.Variable)


def test_bad_partitioner_results():
    """A partitioner cutting two dimensions, more slices than rows or the wrong rank raises
    ValueError naming the variable; so does a shape that is not fully defined."""
    with hb.Graph().as_default():
        with pytest.raises(ValueError, match="partitioner for two .* only be sliced along one"):
            hb.get_variable("two", [4, 4], partitioner=lambda shape, dtype: [2, 2])
        with pytest.raises(
            ValueError, match=r"partitioner for many asks for 5 slices of dimension 0 \(size 4\)"
        ):
            hb.get_variable("many", [4, 4], partitioner=lambda shape, dtype: [5, 1])
        with pytest.raises(ValueError, match="partitioner for rank returned \\[2\\]"):
            hb.get_variable("rank", [4, 4], partitioner=lambda shape, dtype: [2])
        with pytest.raises(ValueError, match=r"new partitioned variable \(undef\) must be fully"):
            hb.get_variable("undef", [None, 4], partitioner=hb.fixed_size_partitioner(2))
        assert hb.global_variables() == []


# ---- embedding_lookup -------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("ids", [[9, 0, 3, 3, 7, 9, 1], [[4, 4, 0], [9, 2, 5]]])
def test_lookup_matches_numpy(strategy, ids):
    """A lookup in a PartitionedVariable (or its list of shards) equals numpy indexing of the
    table: "div" indexes the concatenated shards, "mod" the table whose id i is in shard i % n."""
    table = _table(10, 3)
    init = table if strategy == "div" else _mod_layout(table, 4)
    ids = np.array(ids, np.int64)
    with hb.Graph().as_default():
        pv = hb.get_variable("emb", initializer=init, partitioner=hb.fixed_size_partitioner(4))
        out = hb.nn.embedding_lookup(pv, ids, partition_strategy=strategy)
        out_list = hb.nn.embedding_lookup(list(pv), hb.constant(ids.astype(np.int32)), strategy)
        assert out.shape.as_list() == [*ids.shape, 3] == out_list.shape.as_list()
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            got, got_list = s.run([out, out_list])
    np.testing.assert_array_equal(got, table[ids])
    np.testing.assert_array_equal(got_list, table[ids])


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_lookup_gradient_finite_differences(strategy):
    """The gradient w.r.t. each shard matches central finite differences (shards of 3, 2, 2
    rows, duplicated ids, rank-2 ids)."""
    rng = np.random.default_rng(3)
    shards = [rng.standard_normal((r, 2)) for r in (3, 2, 2)]
    ids = np.array([[6, 0, 6], [1, 5, 3]], np.int32)
    check_gradient(
        lambda a, b, c: hb.nn.embedding_lookup([a, b, c], ids, partition_strategy=strategy),
        shards,
    )


def test_lookup_unknown_id_dimensions():
    """ids with several unknown dimensions give the right rows and shape, and gradients."""
    table = _table(7, 2)
    ids = np.array([[1, 6], [6, 0], [3, 3]], np.int32)
    check_forward(
        lambda a, b, i: hb.nn.embedding_lookup([a, b], i, "div"),
        [table[:4], table[4:], ids],
        lambda a, b, i: table[i],
    )
    with hb.Graph().as_default():
        p = hb.placeholder(hb.int32, [None, None])
        out = hb.nn.embedding_lookup([hb.constant(table[:4]), hb.constant(table[4:])], p, "div")
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(out, {p: ids}), table[ids])


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_lookup_gradients_and_one_step_equal_unsharded(strategy):
    """Each shard's gradient is an IndexedSlices; laid out by the strategy they equal the whole
    table's gradient, and one Adam step on the shards equals the step on the whole table."""
    table = _table(11, 4)
    init = table if strategy == "div" else _mod_layout(table, 3)
    ids = np.array([[3, 10, 3], [0, 7, 3]], np.int64)
    w = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    with hb.Graph().as_default():
        pv = hb.get_variable("emb", initializer=init, partitioner=hb.fixed_size_partitioner(3))
        whole = hb.get_variable("whole", initializer=table)
        loss_p = hb.reduce_sum(hb.nn.embedding_lookup(pv, ids, strategy) * w)
        loss_w = hb.reduce_sum(hb.nn.embedding_lookup(whole, ids) * w)
        grads = hb.gradients(loss_p, list(pv))
        assert all(isinstance(gr, hb.IndexedSlices) for gr in grads)
        (gw,) = hb.gradients(loss_w, [whole])
        opt = hb.train.AdamOptimizer(0.1)
        step = hb.group(
            opt.minimize(loss_p, var_list=list(pv)), opt.minimize(loss_w, var_list=[whole])
        )
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            gvals, gwv = s.run(grads), s.run(gw)
            s.run(step)
            after, after_w = s.run([pv.as_tensor(), whole])
    dense = np.concatenate([gv.to_dense() for gv in gvals])
    if strategy == "mod":
        dense, after = [np.stack([a[_row_of(i, 11, 3)] for i in range(11)]) for a in (dense, after)]
    np.testing.assert_allclose(dense, gwv.to_dense(), rtol=1e-6)
    np.testing.assert_allclose(after, after_w, rtol=1e-6)
    assert not np.allclose(after_w, table)


def _row_of(i: int, rows: int, n: int) -> int:
    """Where id i sits in the concatenated shards under "mod"."""
    sizes = sharded.shard_rows(rows, n)
    return sum(sizes[: i % n]) + i // n


def test_lookup_errors():
    """Bad strategies, shard layouts, row shapes and partition axes raise ValueError."""
    with hb.Graph().as_default():
        shards = [hb.constant(np.zeros((r, 2), np.float32)) for r in (3, 4)]
        with pytest.raises(ValueError, match="partition_strategy must be 'mod' or 'div'"):
            hb.nn.embedding_lookup(shards, [0], partition_strategy="hash")
        with pytest.raises(ValueError, match=r"shards of \[3, 4\] rows do not hold 7 ids"):
            hb.nn.embedding_lookup(shards, [0])
        with pytest.raises(ValueError, match="different row shapes"):
            hb.nn.embedding_lookup([shards[1], hb.constant(np.zeros((3, 5), np.float32))], [0])
        with pytest.raises(ValueError, match="empty list"):
            hb.nn.embedding_lookup([], [0])
        cols = hb.get_variable("c", [4, 6], partitioner=hb.fixed_size_partitioner(2, axis=1))
        with pytest.raises(ValueError, match="c is partitioned along axis 1"):
            hb.nn.embedding_lookup(cols, [0])
        with pytest.raises(hb.errors.UnimplementedError, match="max_norm"):
            hb.nn.embedding_lookup(shards[0], [0], max_norm=1.0)


# ---- placement --------------------------------------------------------------------------------


def test_shards_spread_over_ps_tasks():
    """Under replica_device_setter(ps_tasks=3) the shards go to ps tasks 0, 1, 2 (round robin,
    then again) and each shard's gather runs on its shard's task; greedy balances bytes."""
    setter = hb.train.replica_device_setter(ps_tasks=3, worker_device="/job:worker/task:0")
    with hb.Graph().as_default() as g, hb.device(setter):
        pv = hb.get_variable("emb", [600, 8], partitioner=hb.fixed_size_partitioner(6))
        out = hb.nn.embedding_lookup(pv, hb.constant([1, 2, 3]))
        assert [v.op.device for v in pv] == [f"/job:ps/task:{i % 3}" for i in range(6)]
        gathers = [op for op in g.get_operations() if op.type.startswith("Gather")]
        assert [op.device for op in gathers] == [f"/job:ps/task:{i % 3}" for i in range(6)]
        assert out.op.device == "/job:worker/task:0"
    greedy = hb.train.replica_device_setter(ps_tasks=2, ps_strategy="greedy")
    with hb.Graph().as_default(), hb.device(greedy):
        big = hb.get_variable("big", [1000, 4])  # task 0
        pv = hb.get_variable("emb", [900, 4], partitioner=hb.fixed_size_partitioner(3))
        # loads: 4000 | 0 -> part_0 (300 rows) to 1; 4000 | 1200 -> 1; 4000 | 2400 -> 1
        assert big.op.device == "/job:ps/task:0"
        assert [v.op.device for v in pv] == ["/job:ps/task:1"] * 3


# ---- training -----------------------------------------------------------------------------------


def _train(
    partitioned: bool, strategy: str, steps: int = 60, target: str = "", cluster=None
) -> tuple[list[float], np.ndarray]:
    """SGD on an embedding + softmax classifier; the table is 4-way sharded or whole, with the
    same initial values (laid out for ``strategy`` when sharded). With ``cluster`` the variables
    go to its PS tasks (replica_device_setter) and ``target`` runs the steps. Returns the losses
    and the final table value (as concatenated shards)."""
    vocab, dim, classes, batch = 23, 5, 3, 8
    rng = np.random.default_rng(7)
    table = _table(vocab, dim, seed=11)
    w0 = rng.standard_normal((dim, classes)).astype(np.float32)
    batches = [rng.integers(0, vocab, (batch, 3)) for _ in range(4)]
    data = [(x, x[:, 0] % classes) for x in batches]  # a learnable rule
    setter = hb.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")
    with hb.Graph().as_default() as g, hb.device(setter):
        ids = hb.placeholder(hb.int64, [batch, 3])
        labels = hb.placeholder(hb.int32, [batch])
        if partitioned:
            init = table if strategy == "div" else _mod_layout(table, 4)
            emb = hb.get_variable("emb", initializer=init, partitioner=hb.fixed_size_partitioner(4))
        else:
            emb = hb.get_variable("emb", initializer=table)
        w = hb.get_variable("w", initializer=w0)
        h = hb.reduce_mean(hb.nn.embedding_lookup(emb, ids, partition_strategy=strategy), axis=1)
        logits = hb.matmul(h, w)
        loss = hb.reduce_mean(
            hb.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        train = hb.train.GradientDescentOptimizer(1.0).minimize(loss)
        final = emb.as_tensor() if partitioned else emb.value()
        losses = []
        with hb.Session(target, graph=g) as s:
            s.run(hb.global_variables_initializer())
            for k in range(steps):
                x, y = data[k % len(data)]
                losses.append(float(s.run([loss, train], {ids: x, labels: y})[0]))
            return losses, s.run(final)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_training_sharded_equals_unsharded(strategy):
    """SGD with a 4-way sharded embedding gives the same losses as with the whole table."""
    whole, _ = _train(False, strategy)
    shards, _ = _train(True, strategy)
    np.testing.assert_allclose(shards, whole, rtol=1e-5)
    assert np.mean(whole[-4:]) < 0.6 * np.mean(whole[:4])  # it does learn


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_training_on_three_ps_tasks_matches_local_run():
    """With 3 PS tasks and a worker (gRPC servers in this process) the 4 shards live on ps tasks
    0, 1, 2, 0, each holding its rows, and the losses equal the local run's."""
    cluster = hb.train.ClusterSpec(
        {
            "ps": [f"127.0.0.1:{_free_port()}" for _ in range(3)],
            "worker": [f"127.0.0.1:{_free_port()}"],
        }
    )
    servers = [hb.train.Server(cluster, "ps", i) for i in range(3)]
    servers.append(hb.train.Server(cluster, "worker", 0))
    try:
        remote, table = _train(True, "div", 12, servers[-1].target, cluster)
        held = [
            servers[i].worker.resources[f"/job:ps/replica:0/task:{i}/device:cpu:0"]
            for i in range(3)
        ]
        rows = {f"emb/part_{k}": held[k % 3][f"emb/part_{k}"].read() for k in range(4)}
    finally:
        for s in servers:
            s.stop(grace=0)
    local, local_table = _train(True, "div", 12)
    np.testing.assert_allclose(remote, local, rtol=1e-5)
    np.testing.assert_allclose(table, local_table, rtol=1e-5)
    starts = [0, 6, 12, 18, 23]  # 23 rows in 4 shards: 6, 6, 6, 5
    for k in range(4):
        np.testing.assert_allclose(rows[f"emb/part_{k}"], local_table[starts[k] : starts[k + 1]])
    assert "emb/part_1" not in held[0] and "emb/part_0" not in held[1]


def test_saver_round_trip(tmp_path):
    """Saver saves the shards under name/part_i and restores them."""
    full = _table(9, 2)
    with hb.Graph().as_default():
        pv = hb.get_variable("emb", initializer=full, partitioner=hb.fixed_size_partitioner(2))
        saver = hb.train.Saver()
        zero = pv.assign(np.zeros_like(full))
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            path = saver.save(s, str(tmp_path / "model"))
            s.run(zero)
            np.testing.assert_array_equal(s.run(pv.as_tensor()), 0.0)
            saver.restore(s, path)
            np.testing.assert_array_equal(s.run(pv.as_tensor()), full)
    reader = hb.train.load_checkpoint(path)
    np.testing.assert_array_equal(reader.get_tensor("emb/part_0"), full[:5])
    np.testing.assert_array_equal(reader.get_tensor("emb/part_1"), full[5:])


def test_partitioned_variables_in_var_lists(tmp_path):
    """Optimizers, Savers (list and dict) and regularized layers accept a PartitionedVariable as
    TF1 does: it stands for its shards."""
    full = _table(6, 2)
    with hb.Graph().as_default():
        pv = hb.get_variable("emb", initializer=full, partitioner=hb.fixed_size_partitioner(3))
        other = hb.get_variable("other", initializer=np.ones(2, np.float32))
        loss = hb.reduce_sum(hb.square(pv.as_tensor())) + hb.reduce_sum(other)
        grads = hb.train.GradientDescentOptimizer(0.1).compute_gradients(loss, var_list=[pv])
        assert [v.name for _, v in grads] == [f"emb/part_{i}:0" for i in range(3)]
        step = hb.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[pv])
        by_list = hb.train.Saver([pv])
        by_dict = hb.train.Saver({"table": pv})
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            s.run(step)
            np.testing.assert_allclose(s.run(pv.as_tensor()), full * 0.8, rtol=1e-6)
            np.testing.assert_array_equal(s.run(other), 1.0)  # not in var_list
            a = by_list.save(s, str(tmp_path / "a"))
            b = by_dict.save(s, str(tmp_path / "b"))
        ra, rb = hb.train.load_checkpoint(a), hb.train.load_checkpoint(b)
        for i, rows in enumerate((slice(0, 2), slice(2, 4), slice(4, 6))):
            np.testing.assert_allclose(ra.get_tensor(f"emb/part_{i}"), full[rows] * 0.8, rtol=1e-6)
            np.testing.assert_allclose(
                rb.get_tensor(f"table/part_{i}"), full[rows] * 0.8, rtol=1e-6
            )
    with hb.Graph().as_default():
        x = hb.constant(np.ones((4, 6), np.float32))
        with hb.variable_scope("net", partitioner=hb.fixed_size_partitioner(2)):
            layer = hb.layers.Dense(3, kernel_regularizer=lambda w: 0.5 * hb.reduce_sum(w * w))
            layer(x)
        assert isinstance(layer.kernel, hb.PartitionedVariable)
        assert len(layer.losses) == 2  # one regularization loss per shard, as in TF1
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            k = s.run(layer.kernel.as_tensor())
            np.testing.assert_allclose(sum(s.run(layer.losses)), 0.5 * np.sum(k * k), rtol=1e-5)


def test_sharded_module_names():
    """scenarios.models.sharded keeps its names: shard_rows and sharded_variable (a list of
    get_variable shards) and its embedding_lookup (hb.nn's)."""
    assert sharded.shard_rows(10, 3) == [4, 3, 3] and sharded.shard_rows(8, 4) == [2] * 4
    with hb.Graph().as_default():
        shards = sharded.sharded_variable("t", (10, 2), 3, initializer=hb.ones_initializer())
        assert isinstance(shards, list) and [v.op.name for v in shards] == [
            "t/part_0",
            "t/part_1",
            "t/part_2",
        ]
        out = sharded.embedding_lookup(shards, [9, 0])
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            np.testing.assert_array_equal(s.run(out), np.ones((2, 2)))
        with pytest.raises(ValueError, match="cannot cut 2 rows into 3"):
            sharded.sharded_variable("u", (2, 2), 3)
