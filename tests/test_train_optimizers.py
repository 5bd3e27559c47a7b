"""Optimizers, global step and learning-rate schedules against numpy re-implementations of TF1."""

import math

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.train import training_ops

LR = 0.05

# ---- numpy references (TensorFlow's training_ops formulas, in float64) --------------------------


def sgd(w, g, st, t):
    w -= LR * g


def momentum(nesterov):
    def rule(w, g, st, t):
        st["accum"] = 0.9 * st["accum"] + g
        w -= LR * (g + 0.9 * st["accum"]) if nesterov else LR * st["accum"]

    return rule


def adagrad(w, g, st, t):
    st["acc"] += g * g
    w -= LR * g / np.sqrt(st["acc"])


def adam(w, g, st, t):
    b1, b2, eps = 0.9, 0.999, 1e-8
    lr_t = LR * math.sqrt(1 - b2**t) / (1 - b1**t)
    st["m"] = b1 * st["m"] + (1 - b1) * g
    st["v"] = b2 * st["v"] + (1 - b2) * g * g
    w -= lr_t * st["m"] / (np.sqrt(st["v"]) + eps)


def rmsprop(mom, centered):
    def rule(w, g, st, t):
        rho, eps = 0.9, 1e-10
        st["ms"] = rho * st["ms"] + (1 - rho) * g * g
        denom = st["ms"] + eps
        if centered:
            st["mg"] = rho * st["mg"] + (1 - rho) * g
            denom = st["ms"] - st["mg"] ** 2 + eps
        st["mom"] = mom * st["mom"] + LR * g / np.sqrt(denom)
        w -= st["mom"]

    return rule


CASES = {
    "sgd": (lambda: hb.train.GradientDescentOptimizer(LR), sgd, {}),
    "momentum": (lambda: hb.train.MomentumOptimizer(LR, 0.9), momentum(False), {"accum": 0}),
    "nesterov": (
        lambda: hb.train.MomentumOptimizer(LR, 0.9, use_nesterov=True),
        momentum(True),
        {"accum": 0},
    ),
    "adagrad": (lambda: hb.train.AdagradOptimizer(LR, 0.1), adagrad, {"acc": 0.1}),
    "adam": (lambda: hb.train.AdamOptimizer(LR), adam, {"m": 0, "v": 0}),
    "rmsprop": (lambda: hb.train.RMSPropOptimizer(LR), rmsprop(0.0, False), {"ms": 1, "mom": 0}),
    "rmsprop_momentum": (
        lambda: hb.train.RMSPropOptimizer(LR, momentum=0.9),
        rmsprop(0.9, False),
        {"ms": 1, "mom": 0},
    ),
    "rmsprop_centered": (
        lambda: hb.train.RMSPropOptimizer(LR, momentum=0.5, centered=True),
        rmsprop(0.5, True),
        {"ms": 1, "mg": 0, "mom": 0},
    ),
}


def _state(init, shape):
    return {k: np.full(shape, float(v)) for k, v in init.items()}


@pytest.mark.parametrize("shape", [(3, 4), (30, 257)], ids=["small", "blocked"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_dense_update_matches_tf_formula(case, shape, monkeypatch):
    """Three dense steps of each optimizer equal TF1's update formulas (also across blocks)."""
    monkeypatch.setattr(training_ops, "BLOCK", 1000)  # 30 * 257 elements: 8 blocks, one partial
    make, rule, init = CASES[case]
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(shape).astype(np.float32)
    with hb.Graph().as_default():
        w = hb.Variable(w0, name="w")
        g = hb.placeholder(hb.float32, shape, name="g")
        train = make().apply_gradients([(g, w)])
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            ref, st = w0.astype(np.float64), _state(init, shape)
            for t in range(1, 4):
                gv = rng.standard_normal(shape).astype(np.float32)
                s.run(train, {g: gv})
                rule(ref, gv.astype(np.float64), st, t)
                np.testing.assert_allclose(s.run(w), ref, rtol=2e-5, atol=2e-6, err_msg=f"step {t}")


SPARSE_STEPS = [([0, 2, 0], 3), ([1, 2, 2], 3), ([5, 0, 3, 3], 4)]


def _dedup(idx, vals):
    uniq, inv = np.unique(idx, return_inverse=True)
    out = np.zeros((len(uniq),) + vals.shape[1:])
    np.add.at(out, inv, vals)
    return uniq, out


def _sparse_reference(case, lazy, w, st, idx, vals, t):
    rows, gs = _dedup(np.asarray(idx), vals)
    if case == "adam" and not lazy:  # TF1: dense decay of m and v, sparse add, dense var update
        b1, b2, eps = 0.9, 0.999, 1e-8
        lr_t = LR * math.sqrt(1 - b2**t) / (1 - b1**t)
        st["m"] *= b1
        st["m"][rows] += (1 - b1) * gs
        st["v"] *= b2
        st["v"][rows] += (1 - b2) * gs * gs
        w -= lr_t * st["m"] / (np.sqrt(st["v"]) + eps)
        return
    sub = {k: v[rows] for k, v in st.items()}
    wr = w[rows]
    CASES[case][1](wr, gs, sub, t)
    w[rows] = wr
    for k in st:
        st[k][rows] = sub[k]


@pytest.mark.parametrize(
    "case, lazy", [(c, False) for c in sorted(CASES)] + [("adam", True)], ids=str
)
def test_sparse_update_matches_tf_formula(case, lazy):
    """IndexedSlices gradients use SparseApply* ops (duplicates summed) equal to TF1's updates;
    TF1's Adam decays m and v on every row, LazyAdam only on the gradient's rows."""
    make, _, init = CASES[case]
    if lazy:
        make = lambda: hb.train.LazyAdamOptimizer(LR)  # noqa: E731
    rng = np.random.default_rng(1)
    shape = (6, 3)
    w0 = rng.standard_normal(shape).astype(np.float32)
    with hb.Graph().as_default():
        w = hb.Variable(w0, name="w")
        vals = hb.placeholder(hb.float32, [None, 3], name="values")
        idx = hb.placeholder(hb.int32, [None], name="indices")
        train = make().apply_gradients([(hb.IndexedSlices(vals, idx, w.value()), w)])
        update = next(op for op in hb.get_default_graph().get_operations() if "Apply" in op.type)
        assert update.type.startswith("SparseApply")
        assert vals in update.inputs and idx in update.inputs  # never densified
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            ref, st = w0.astype(np.float64), _state(init, shape)
            for t, (ids, k) in enumerate(SPARSE_STEPS, start=1):
                gv = rng.standard_normal((k, 3)).astype(np.float32)
                s.run(train, {vals: gv, idx: ids})
                _sparse_reference(case, lazy, ref, st, ids, gv.astype(np.float64), t)
                np.testing.assert_allclose(s.run(w), ref, rtol=2e-5, atol=2e-6, err_msg=f"step {t}")
            if case != "adam" or lazy:
                np.testing.assert_array_equal(s.run(w)[4], w0[4])  # row 4 never had a gradient


def test_gather_gradient_stays_sparse_through_the_optimizer():
    """minimize through hb.gather uses SparseApplyAdagrad; repeated ids sum their gradients."""
    with hb.Graph().as_default():
        emb = hb.Variable(np.ones((5, 2), np.float32), name="emb")
        ids = hb.placeholder(hb.int32, [None], name="ids")
        train = hb.train.AdagradOptimizer(0.5).minimize(hb.reduce_sum(hb.gather(emb, ids) * 3.0))
        types = {op.type for op in hb.get_default_graph().get_operations()}
        assert "SparseApplyAdagrad" in types and "ApplyAdagrad" not in types
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            s.run(train, {ids: [1, 3, 1]})
            got = s.run(emb)
    want = np.ones((5, 2))
    for row, g in ((1, 6.0), (3, 3.0)):
        want[row] -= 0.5 * g / np.sqrt(0.1 + g * g)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_sparse_index_out_of_range_names_variable():
    """A sparse gradient row outside the variable is an InvalidArgumentError naming it."""
    with hb.Graph().as_default():
        w = hb.Variable(np.zeros((3, 2), np.float32), name="emb")
        grad = hb.IndexedSlices(
            hb.constant(np.ones((1, 2), np.float32)), hb.constant([7]), w.value()
        )
        train = hb.train.GradientDescentOptimizer(0.1).apply_gradients([(grad, w)])
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"index 7 out of range.*emb"):
                s.run(train)
            np.testing.assert_array_equal(s.run(w), np.zeros((3, 2)))


def test_minimize_quadratic_converges():
    """minimize on sum((w - target)^2) drives w to the target for GD, Momentum and Adam."""
    target = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    for opt, steps in [
        (hb.train.GradientDescentOptimizer(0.1), 60),
        (hb.train.MomentumOptimizer(0.02, 0.9), 200),
        (hb.train.AdamOptimizer(0.1), 300),
    ]:
        with hb.Graph().as_default():
            w = hb.Variable(np.zeros(4, np.float32), name="w")
            loss = hb.reduce_sum(hb.square(w - target))
            train = opt.minimize(loss)
            with hb.Session() as s:
                s.run(hb.global_variables_initializer())
                first = s.run(loss)
                for _ in range(steps):
                    s.run(train)
                assert s.run(loss) < 1e-4 * first, type(opt).__name__
                np.testing.assert_allclose(s.run(w), target, atol=1e-2)


def test_global_step_increments_once_per_apply():
    """apply_gradients with global_step adds 1 per run, after the updates; without it, nothing."""
    with hb.Graph().as_default():
        w = hb.Variable([1.0, 2.0], name="w")
        gs = hb.train.get_or_create_global_step()
        loss = hb.reduce_sum(w * w)
        opt = hb.train.GradientDescentOptimizer(0.1)
        train = opt.minimize(loss, global_step=gs)
        plain = opt.minimize(loss, name="no_step")
        assert train.type == "AssignAdd" and train.name == "GradientDescent"
        assert train in hb.get_collection(hb.GraphKeys.TRAIN_OP)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            for _ in range(3):
                s.run(train)
            s.run(plain)
            assert hb.train.global_step(s, gs) == 3
            np.testing.assert_allclose(s.run(w), np.array([1.0, 2.0]) * 0.8**4, rtol=1e-6)


def test_updates_follow_their_variable_not_the_device_scope():
    """Slots and updates built under another device scope are colocated with their variable."""
    with hb.Graph().as_default():
        with hb.device("/cpu:0"):
            w = hb.Variable(np.ones(3, np.float32), name="w")
        with hb.device("/cpu:1"):
            gs = hb.train.get_or_create_global_step()
            opt = hb.train.MomentumOptimizer(0.1, 0.5)
            train = opt.minimize(hb.reduce_sum(w * w), global_step=gs)
        update = hb.get_default_graph().get_operation_by_name("Momentum/update_w/ApplyMomentum")
        assert update.colocation_groups == ["w"] and update.device == w.op.device
        assert opt.get_slot(w, "momentum").op.colocation_groups == ["w"]
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": 2})) as s:
            s.run(hb.global_variables_initializer())
            s.run(train)
            np.testing.assert_allclose(s.run(w), np.full(3, 0.8), rtol=1e-6)


def test_global_step_helpers():
    """The global step is one int64 scalar non-trainable variable named global_step."""
    with hb.Graph().as_default() as g:
        assert hb.train.get_global_step() is None
        with hb.name_scope("inner"):
            gs = hb.train.get_or_create_global_step()
        assert gs.op.name == "global_step" and gs.dtype == hb.int64 and gs.shape == ()
        assert hb.train.get_or_create_global_step() is gs
        assert hb.train.get_global_step(g) is gs
        assert gs not in hb.trainable_variables() and gs in hb.global_variables()
        with pytest.raises(ValueError, match="already exists"):
            hb.train.create_global_step()


def test_nesterov_differs_from_momentum_as_formula_says():
    """With a constant gradient c: plain momentum moves lr*c then lr*(1+m)*c; Nesterov moves
    lr*(1+m)*c then lr*(1+m+m^2)*c."""
    c, lr, m = np.array([1.0, -2.0], np.float32), 0.1, 0.5
    got = {}
    for nesterov in (False, True):
        with hb.Graph().as_default():
            w = hb.Variable(np.zeros(2, np.float32), name="w")
            opt = hb.train.MomentumOptimizer(lr, m, use_nesterov=nesterov)
            train = opt.minimize(hb.reduce_sum(w * c))
            with hb.Session() as s:
                s.run(hb.global_variables_initializer())
                got[nesterov] = [s.run([train, w])[1] for _ in range(2)]
    np.testing.assert_allclose(got[False][0], -lr * c, rtol=1e-6)
    np.testing.assert_allclose(got[False][1], -lr * c - lr * (1 + m) * c, rtol=1e-6)
    np.testing.assert_allclose(got[True][0], -lr * (1 + m) * c, rtol=1e-6)
    np.testing.assert_allclose(
        got[True][1], -lr * (1 + m) * c - lr * (1 + m + m * m) * c, rtol=1e-6
    )


def test_slots_are_named_colocated_and_initialized():
    """Slots are non-trainable global variables named like TF, colocated with their variable,
    initialized by global_variables_initializer (Adam zeros, Adagrad 0.1, RMSProp rms ones)."""
    with hb.Graph().as_default():
        w = hb.Variable(np.ones((2, 3), np.float32), name="w")
        b = hb.Variable(np.ones(3, np.float32), name="b")
        big = hb.Variable(np.ones(5000, np.float32), name="big")
        loss = hb.reduce_sum(w * 2.0) + hb.reduce_sum(b) + hb.reduce_sum(big)
        adam = hb.train.AdamOptimizer(0.1)
        train = adam.minimize(loss)
        ada = hb.train.AdagradOptimizer(0.1, initial_accumulator_value=0.1)
        ada.minimize(loss, var_list=[w])
        rms = hb.train.RMSPropOptimizer(0.1)
        rms.minimize(loss, var_list=[big])
        mom = hb.train.MomentumOptimizer(0.1, 0.9)
        mom.minimize(loss, var_list=[w])
        m, v = adam.get_slot(w, "m"), adam.get_slot(w, "v")
        assert (m.op.name, v.op.name) == ("w/Adam", "w/Adam_1")
        assert adam.get_slot_names() == ["m", "v"]
        assert adam.get_slot(w, "nope") is None
        assert [x.op.name for x in adam.variables()] == [
            "b/Adam", "b/Adam_1", "beta1_power", "beta2_power", "big/Adam", "big/Adam_1",
            "w/Adam", "w/Adam_1",
        ]  # fmt: skip
        assert ada.get_slot(w, "accumulator").op.name == "w/Adagrad"
        assert mom.get_slot(w, "momentum").op.name == "w/Momentum"
        assert rms.get_slot(big, "rms").op.name == "big/RMSProp"
        assert rms.get_slot(big, "momentum").op.name == "big/RMSProp_1"
        for s_ in adam.variables():
            assert s_ in hb.global_variables() and s_ not in hb.trainable_variables()
        assert m.op.colocation_groups == ["w"]
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            np.testing.assert_array_equal(s.run(m), np.zeros((2, 3)))
            np.testing.assert_array_equal(s.run(adam.get_slot(big, "v")), np.zeros(5000))
            np.testing.assert_allclose(s.run(ada.get_slot(w, "accumulator")), np.full((2, 3), 0.1))
            np.testing.assert_array_equal(s.run(rms.get_slot(big, "rms")), np.ones(5000))
            b1p, b2p = adam._get_beta_accumulators()
            assert s.run(b1p) == pytest.approx(0.9)
            s.run(train)
            assert s.run(b1p) == pytest.approx(0.81) and s.run(b2p) == pytest.approx(0.998001)
            np.testing.assert_allclose(s.run(m), np.full((2, 3), 0.2), rtol=1e-6)


def test_compute_gradients_gives_none_for_unused_variables():
    """compute_gradients pairs every variable with its gradient, None where loss ignores it."""
    with hb.Graph().as_default():
        a = hb.Variable(1.0, name="a")
        unused = hb.Variable(2.0, name="unused")
        opt = hb.train.GradientDescentOptimizer(0.1)
        gv = opt.compute_gradients(a * 3.0)
        assert [v for _, v in gv] == [a, unused]
        assert gv[1][0] is None
        gated = opt.compute_gradients(a * 3.0, var_list=[a], gate_gradients=opt.GATE_GRAPH)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            assert s.run(gv[0][0]) == pytest.approx(3.0) == s.run(gated[0][0])
        with pytest.raises(ValueError, match="no gradients.*unused"):
            opt.minimize(a * 3.0, var_list=[unused])
        with pytest.raises(ValueError, match="no gradients provided"):
            opt.apply_gradients([(None, a)])
        with pytest.raises(ValueError, match="a appears twice"):
            opt.apply_gradients([(gv[0][0], a), (gv[0][0], a)])


def test_learning_rate_tensor_and_float64_variable():
    """A fed learning-rate tensor is cast to a float64 variable's dtype; use_locking works."""
    with hb.Graph().as_default():
        w = hb.Variable(np.array([1.0, 2.0]), name="w")
        lr = hb.placeholder(hb.float32, [], name="lr")
        train = hb.train.GradientDescentOptimizer(lr, use_locking=True).minimize(
            hb.reduce_sum(w * w)
        )
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            s.run(train, {lr: 0.25})
            out = s.run(w)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [0.5, 1.0])


def test_gradient_shape_mismatch_is_reported_at_build_time():
    """A gradient whose shape differs from its variable's names both shapes."""
    with hb.Graph().as_default():
        w = hb.Variable(np.zeros(3, np.float32), name="w")
        g = hb.constant(np.ones(2, np.float32))
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"ApplyGradientDescent.*\(2,\).*\(3,\)"
        ):
            hb.train.GradientDescentOptimizer(0.1).apply_gradients([(g, w)])
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        hb.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)


def test_update_ops_declare_cost():
    """Fused updates declare flops per element and read/write the variable and its slots."""
    with hb.Graph().as_default():
        w = hb.Variable(np.zeros((10, 20), np.float32), name="w")
        hb.train.AdamOptimizer().minimize(hb.reduce_sum(w))
        op = next(o for o in hb.get_default_graph().get_operations() if o.type == "ApplyAdam")
        shapes = [tuple(t.shape.as_list()) for t in op.inputs]
        cost = op.op_def.cost_fn(op, shapes, [(10, 20)])
    assert cost.flops == 18 * 200
    assert cost.bytes_written == 3 * 200 * 4 and cost.bytes_read >= 4 * 200 * 4


def _at_steps(make_lr, steps):
    out = []
    with hb.Graph().as_default():
        gs = hb.train.get_or_create_global_step()
        lr = make_lr(gs)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            for k in steps:
                gs.load(np.int64(k), s)
                out.append(float(s.run(lr)))
    return np.array(out)


def test_learning_rate_schedules_match_closed_forms():
    """exponential, inverse-time, natural-exp, polynomial and piecewise schedules follow TF1."""
    steps = np.array([0, 5, 10, 25])
    t = hb.train
    cases = [
        (lambda gs: t.exponential_decay(0.1, gs, 10, 0.5), 0.1 * 0.5 ** (steps / 10)),
        (
            lambda gs: t.exponential_decay(0.1, gs, 10, 0.5, staircase=True),
            0.1 * 0.5 ** np.floor(steps / 10),
        ),
        (lambda gs: t.inverse_time_decay(0.1, gs, 10, 0.5), 0.1 / (1 + 0.5 * steps / 10)),
        (lambda gs: t.natural_exp_decay(0.1, gs, 10, 0.5), 0.1 * np.exp(-0.5 * steps / 10)),
        (
            lambda gs: t.polynomial_decay(0.1, gs, 10, 0.01, power=2.0),
            0.09 * (1 - np.minimum(steps, 10) / 10) ** 2 + 0.01,
        ),
        (
            lambda gs: t.polynomial_decay(0.1, gs, 10, 0.01, cycle=True),
            0.09 * (1 - steps / (10 * np.maximum(1, np.ceil(steps / 10)))) + 0.01,
        ),
        (lambda gs: t.piecewise_constant(gs, [5, 20], [1.0, 0.5, 0.1]), [1.0, 1.0, 0.5, 0.1]),
    ]
    for make, want in cases:
        np.testing.assert_allclose(_at_steps(make, steps), want, rtol=1e-6)
    with pytest.raises(ValueError, match="one more value"):
        t.piecewise_constant(1, [5], [1.0])
    with pytest.raises(ValueError, match="needs a global_step"):
        t.exponential_decay(0.1, None, 10, 0.5)
