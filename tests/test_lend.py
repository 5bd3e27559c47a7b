"""Copy on write of lent variable buffers (``VarHandle.lend`` / ``writable``): every kernel that
updates a variable in place leaves a lent buffer as it was and writes the right values to a copy;
with nothing lent (or the loan over) it updates in place."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.graph import TensorShape
from hetbed.runtime.ops.state import VarHandle


class _Borrower:
    def __init__(self, array):
        self.array = array
        self.borrowing = True


def test_writable_copies_only_while_a_borrower_borrows():
    h = VarHandle("v", hb.float32, TensorShape([3]))
    h.set(np.arange(3, dtype=np.float32))
    first = h.value
    assert h.writable() is first  # nothing lent
    b = _Borrower(first)
    h.lend(b)
    w = h.writable()
    w += 10
    assert w is h.value and w is not first
    np.testing.assert_array_equal(b.array, [0, 1, 2])
    np.testing.assert_array_equal(h.value, [10, 11, 12])
    assert h.writable() is w  # the copy is not lent
    done = _Borrower(w)
    h.lend(done)
    done.borrowing = False  # sent: the loan is over
    assert h.writable() is w
    gone = _Borrower(w)
    h.lend(gone)
    del gone
    gc.collect()
    assert h.writable() is w  # a borrower freed without release ends its loan too
    h.lend(_Borrower(w))
    h.set(np.zeros(3, np.float32))  # assign binds a new buffer: nothing of it is lent
    z = h.value
    assert h.writable() is z


N = 2000  # rows of the test variable; each case checks values against numpy


def _cases():
    """(name, build(v) -> (update op, numpy function of the old value), 2-D variable?)."""
    idx = np.array([3, 1, 3, 7])
    rows = np.arange(4 * 2, dtype=np.float32).reshape(4, 2) + 1

    def scatter_add(old):
        new = old.copy()
        np.add.at(new, idx, rows)
        return new

    def scatter_sub(old):
        new = old.copy()
        np.subtract.at(new, idx, rows)
        return new

    def scatter_update(old):
        new = old.copy()
        new[[1, 7]] = rows[[1, 3]]
        new[3] = rows[2]  # the last write of a repeated row wins
        return new

    def sgd_sparse_rows(old, lr=0.5):
        new = old.copy()
        np.subtract.at(new, idx, lr * rows)
        return new

    return [
        ("assign_add", lambda v: (hb.assign_add(v, np.ones((N, 2), np.float32)), lambda o: o + 1)),
        ("assign_sub", lambda v: (hb.assign_sub(v, np.ones((N, 2), np.float32)), lambda o: o - 1)),
        ("scatter_add", lambda v: (hb.scatter_add(v, idx, rows), scatter_add)),
        ("scatter_sub", lambda v: (hb.scatter_sub(v, idx, rows), scatter_sub)),
        ("scatter_update", lambda v: (hb.scatter_update(v, idx, rows), scatter_update)),
        (
            "scatter_nd_add",
            lambda v: (hb.scatter_nd_add(v, idx.reshape(-1, 1), rows), scatter_add),
        ),
        (
            "gradient_descent",
            lambda v: (
                hb.train.GradientDescentOptimizer(0.5).apply_gradients(
                    [(hb.constant(np.full((N, 2), 2.0, np.float32)), v)]
                ),
                lambda o: o - 1.0,
            ),
        ),
        (
            "gradient_descent_sparse",
            lambda v: (
                hb.train.GradientDescentOptimizer(0.5).apply_gradients(
                    [(hb.IndexedSlices(hb.constant(rows), hb.constant(idx)), v)]
                ),
                sgd_sparse_rows,
            ),
        ),
    ]


@pytest.mark.parametrize("name,build", [(n, b) for n, b in _cases()], ids=[n for n, _ in _cases()])
def test_update_kernels_copy_a_lent_buffer(name, build):
    g = hb.Graph()
    with g.as_default():
        init = np.arange(N * 2, dtype=np.float32).reshape(N, 2)
        v = hb.Variable(init, name="v")
        op, want = build(v)
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
    h = next(r["v"] for r in sess._resources.values() if "v" in r)
    old = h.value
    lent = _Borrower(old)
    h.lend(lent)
    sess.run(op)
    np.testing.assert_array_equal(lent.array, init)  # the lent buffer is as it was
    assert h.value is not old
    np.testing.assert_allclose(sess.run(v), want(init), rtol=1e-6)
    after = h.value
    sess.run(op)  # nothing lent now: in place
    assert h.value is after
    np.testing.assert_allclose(sess.run(v), want(want(init)), rtol=1e-6)


def test_momentum_and_sparse_adam_copy_lent_slots():
    """Slots are lent like variables: Momentum's accumulator and (non-lazy) Adam's m and v."""
    g = hb.Graph()
    with g.as_default():
        v = hb.Variable(np.ones((N, 2), np.float32), name="v")
        idx = hb.constant(np.array([0, 5]))
        grad = hb.IndexedSlices(hb.constant(np.ones((2, 2), np.float32)), idx)
        mom = hb.train.MomentumOptimizer(0.1, 0.9).apply_gradients(
            [(hb.constant(np.ones((N, 2), np.float32)), v)]
        )
        adam = hb.train.AdamOptimizer(0.1).apply_gradients([(grad, v)])
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
    handles = {k: h for r in sess._resources.values() for k, h in r.items()}
    sess.run(mom)
    acc = next(h for k, h in handles.items() if "Momentum" in k)
    m = next(h for k, h in handles.items() if k.endswith("Adam"))
    lent_acc, lent_m = _Borrower(acc.value), _Borrower(m.value)
    acc_before, m_before = acc.value.copy(), m.value.copy()
    acc.lend(lent_acc)
    m.lend(lent_m)
    sess.run([mom, adam])
    np.testing.assert_array_equal(lent_acc.array, acc_before)
    np.testing.assert_array_equal(lent_m.array, m_before)
    np.testing.assert_allclose(acc.value, 0.9 * acc_before + 1.0, rtol=1e-6)  # accum = m*a + g
    assert np.count_nonzero(m.value) == 4  # Adam's m: only the two gradient rows moved
