"""tf.import_graph_def and tf.graph_util (runtime/graph_import.py, hetbed/graph_util.py): a model
frozen to a GraphDef file and imported again gives the trained model's outputs; prefixes,
input_map and return_elements as TF1 has them; errors that name the node."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

W0 = np.arange(6, dtype=np.float32).reshape(3, 2)
B0 = np.array([0.5, -0.5], np.float32)
X = np.array([[1, 2, 3], [-1, 0, 1]], np.float32)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _frozen(tmp_path):
    """Train-like updates, then freeze 'output' to a file; returns (file, expected output)."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="input")
        w = tf.Variable(W0, name="w")
        b = tf.get_variable("b", initializer=tf.constant(B0))
        y = tf.cond(tf.constant(True), lambda: tf.nn.relu(tf.matmul(x, w) + b), lambda: x[:, :2])
        tf.identity(tf.nn.softmax(y), name="output")
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))  # nodes to leave out
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(tf.assign_add(w, tf.ones([3, 2])))
            gd = tf.graph_util.convert_variables_to_constants(s, s.graph.as_graph_def(), ["output"])
    path = tmp_path / "frozen.pb"
    with tf.gfile.GFile(str(path), "wb") as f:
        f.write(gd.SerializeToString())
    want = _softmax(np.maximum(X @ (W0 + 1) + B0, 0))
    return path, gd, want


def test_a_frozen_graph_reloads_without_variables_and_gives_the_trained_outputs(tmp_path):
    path, gd, want = _frozen(tmp_path)
    ops = {n.op for n in gd.node}
    assert "VariableV2" not in ops and "Assign" not in ops and "ApplyGradientDescent" not in ops
    loaded = tf.GraphDef()
    with tf.gfile.GFile(str(path), "rb") as f:
        loaded.ParseFromString(f.read())
    with tf.Graph().as_default() as g:
        tf.import_graph_def(loaded, name="prefix")
        assert tf.global_variables() == []
        x = g.get_tensor_by_name("prefix/input:0")
        y = g.get_tensor_by_name("prefix/output:0")
        with tf.Session() as s:
            np.testing.assert_allclose(s.run(y, {x: X}), want, rtol=1e-6)


def test_prefixes_input_map_and_return_elements(tmp_path):
    _, gd, want = _frozen(tmp_path)
    with tf.Graph().as_default() as g:
        z = tf.constant(X[:1])
        (o, op) = tf.import_graph_def(
            gd, input_map={"input": z}, return_elements=["output:0", "output"]
        )
        (o2,) = tf.import_graph_def(gd, input_map={"input:0": z}, return_elements=["output:0"])
        tf.import_graph_def(gd, name="")
        assert o.name == "import/output:0" and op.name == "import/output"
        assert o2.name == "import_1/output:0"
        assert g.get_operation_by_name("output").type == "Identity"
        with tf.Session() as s:
            a, b = s.run([o, o2])
        np.testing.assert_allclose(a, want[:1], rtol=1e-6)
        np.testing.assert_allclose(b, want[:1], rtol=1e-6)
        with pytest.raises(tf.errors.InvalidArgumentError, match="already has ops named"):
            tf.import_graph_def(gd, name="")
        with pytest.raises(ValueError, match="names no output of an imported node"):
            tf.import_graph_def(gd, input_map={"nothing:0": z})
        with pytest.raises(ValueError, match="'missing:0' not found"):
            tf.import_graph_def(gd, return_elements=["missing:0"])


def test_a_graph_def_tensorflow_wrote_is_refused_by_node():
    gd = tf.GraphDef()
    gd.node.add(name="x", op="Placeholder")
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="node 'x' .Placeholder. carries no hetbed"):
            tf.import_graph_def(gd)


def test_extract_sub_graph_and_remove_training_nodes():
    with tf.Graph().as_default() as g:
        a = tf.placeholder(tf.float32, name="a")
        b = tf.identity(a, name="b")
        c = tf.identity(tf.multiply(b, tf.constant(2.0, name="two"), name="mul"), name="c")
        tf.add(a, 1.0, name="unrelated")
        with tf.control_dependencies([c]):
            tf.no_op(name="after_c")
        gd = g.as_graph_def()
    sub = tf.graph_util.extract_sub_graph(gd, ["c"])
    assert [n.name for n in sub.node] == ["a", "b", "two", "mul", "c"]
    pruned = tf.graph_util.remove_training_nodes(sub, protected_nodes=["c"])
    assert [n.name for n in pruned.node] == ["a", "two", "mul", "c"]
    assert list(next(n for n in pruned.node if n.name == "mul").input) == ["a", "two"]
    with tf.Graph().as_default():
        tf.import_graph_def(pruned, name="")
        with tf.Session() as s:
            assert s.run("c:0", {"a:0": 3.0}) == 6.0
    with pytest.raises(AssertionError, match="nope is not in graph"):
        tf.graph_util.extract_sub_graph(gd, ["nope"])


def test_frozen_outputs_match_tensorflow(tmp_path):
    tf1 = pytest.importorskip("tensorflow.compat.v1")

    def run(t):
        g = t.Graph()
        with g.as_default():
            x = t.placeholder(t.float32, [None, 3], name="input")
            w = t.Variable(W0, name="w")
            t.identity(t.nn.softmax(t.matmul(x, w) + B0), name="output")
            with t.Session(graph=g) as s:
                s.run(t.global_variables_initializer())
                s.run(t.assign_add(w, t.ones([3, 2])))
                gd = t.graph_util.convert_variables_to_constants(s, g.as_graph_def(), ["output"])
        g2 = t.Graph()
        with g2.as_default():
            (y,) = t.import_graph_def(gd, return_elements=["output:0"], name="m")
            with t.Session(graph=g2) as s:
                return s.run(y, {"m/input:0": X})

    np.testing.assert_allclose(run(tf), run(tf1), rtol=1e-6)


def test_a_failed_import_leaves_the_graph_as_it_was():
    with tf.Graph().as_default() as g:
        a = tf.placeholder(tf.float32, [2], name="a")
        tf.identity(tf.add(a, 1.0, name="b"), name="c")
        gd = g.as_graph_def()
    bad_input = type(gd)()
    bad_input.CopyFrom(gd)
    bad_input.node[-1].input[0] = "b:5"
    unknown = type(gd)()
    unknown.CopyFrom(gd)
    unknown.node[-1].op = "NoSuchOp"
    nested = type(gd)()
    nested.CopyFrom(gd)
    nested.node[-1].attr["_hetbed"].s = b"[" * 100000 + b"]" * 100000
    for case, kw in (
        (bad_input, {}),
        (unknown, {}),
        (nested, {}),
        (gd, {"return_elements": ["zz"]}),
    ):
        with tf.Graph().as_default() as g2:
            with pytest.raises((ValueError, tf.errors.UnimplementedError)):
                tf.import_graph_def(case, **kw)
            assert g2.get_operations() == []
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="names no output"):
            tf.import_graph_def(gd, input_map={"a:7": tf.constant([1.0, 2.0])})
