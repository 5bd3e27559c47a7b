"""tf.saved_model (hetbed/saved_model.py): export a trained graph with simple_save or the
builder, load it into a new session and get the trained outputs; tag sets, signatures, the
main op run at load, and errors that say what is wrong."""

import os

import numpy as np
import pytest

import hetbed.compat.v1 as tf

W0 = np.arange(6, dtype=np.float32).reshape(3, 2)
X = np.array([[1, 2, 3], [0, -1, 2]], np.float32)


def _trained(export_dir, **kw):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.Variable(W0, name="w")
        counter = tf.Variable(0, name="counter", collections=[tf.GraphKeys.LOCAL_VARIABLES])
        main = tf.group(tf.local_variables_initializer(), name="main_op")
        y = tf.identity(tf.matmul(x, w) + tf.cast(counter, tf.float32), name="y")
        with tf.Session() as s:
            s.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            s.run([tf.assign_add(w, tf.ones([3, 2])), tf.assign(counter, 5)])
            tf.saved_model.simple_save(s, export_dir, {"x": x}, {"y": y}, legacy_init_op=main)
    return X @ (W0 + 1)  # counter is reset to 0 by the main op at load


def test_simple_save_then_load_gives_the_trained_model(tmp_path):
    d = str(tmp_path / "model")
    want = _trained(d)
    assert sorted(os.listdir(d)) == ["saved_model.pb", "variables"]
    assert tf.saved_model.loader.maybe_saved_model_directory(d)
    with tf.Graph().as_default() as g, tf.Session() as s:
        meta = tf.saved_model.loader.load(s, [tf.saved_model.tag_constants.SERVING], d)
        sig = meta.signature_def[
            tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
        ]
        assert sig.method_name == "tensorflow/serving/predict"
        assert sig.inputs["x"].name == "x:0" and sig.inputs["x"].dtype == 1  # DT_FLOAT
        assert [d.size for d in sig.inputs["x"].tensor_shape.dim] == [-1, 3]
        x = tf.saved_model.utils.get_tensor_from_tensor_info(sig.inputs["x"], g)
        y = g.get_tensor_by_name(sig.outputs["y"].name)
        np.testing.assert_allclose(s.run(y, {x: X}), want)
        assert len(tf.global_variables()) == 1


def test_builder_tag_sets_and_errors(tmp_path):
    d = str(tmp_path / "b")
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.Variable(np.ones((3, 2), np.float32), name="w")
        y = tf.matmul(x, w, name="y")
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            b = tf.saved_model.builder.SavedModelBuilder(d)
            with pytest.raises(AssertionError, match="add_meta_graph_and_variables"):
                b.add_meta_graph(["train"])
            sig = tf.saved_model.signature_def_utils.predict_signature_def({"in": x}, {"out": y})
            b.add_meta_graph_and_variables(s, ["serve", "gpu"], signature_def_map={"pred": sig})
            b.add_meta_graph(["train"])
            with pytest.raises(AssertionError, match="added twice"):
                b.add_meta_graph(["gpu", "serve"])
            assert b.save() == os.path.join(d, "saved_model.pb").encode()
    with pytest.raises(AssertionError, match="already exists, and isn't empty"):
        tf.saved_model.builder.SavedModelBuilder(d)
    with tf.Graph().as_default(), tf.Session() as s:
        with pytest.raises(RuntimeError, match=r"tags \['serve'\] could not be found.*\['gpu', "):
            tf.saved_model.loader.load(s, ["serve"], d)
        m = tf.saved_model.loader.load(s, ["gpu", "serve"], d)
        assert list(m.signature_def) == ["pred"]
        np.testing.assert_allclose(s.run("y:0", {"x:0": X}), X @ np.ones((3, 2)))
    with tf.Graph().as_default(), tf.Session() as s:
        tf.saved_model.loader.load(s, ["train"], d)  # the same variables, restored
        assert s.run("w:0").tolist() == np.ones((3, 2)).tolist()
    with tf.Graph().as_default(), tf.Session() as s:
        with pytest.raises(OSError, match="SavedModel file does not exist"):
            tf.saved_model.loader.load(s, ["serve"], str(tmp_path))
        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "saved_model.pb").write_bytes(b"\x12\x50garbage")
        with pytest.raises(tf.errors.DataLossError, match="not a SavedModel file"):
            tf.saved_model.loader.load(s, ["serve"], str(bad))


def test_the_file_is_tensorflows_saved_model_message(tmp_path):
    pytest.importorskip("tensorflow")
    from tensorflow.core.protobuf import saved_model_pb2

    d = str(tmp_path / "m")
    _trained(d)
    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(d, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    assert sm.saved_model_schema_version == 1 and len(sm.meta_graphs) == 1
    meta = sm.meta_graphs[0]
    assert list(meta.meta_info_def.tags) == ["serve"]
    assert meta.signature_def["serving_default"].outputs["y"].name == "y:0"
