"""Saver: round trips, the checkpoint index, max_to_keep, and clean failures on damaged files."""

import json
import os
import struct

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.train.checkpoint import MAGIC


def _model():
    """Variables of several dtypes and shapes, and an op that changes all of them."""
    w = hb.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    b = hb.Variable(np.array([0.5, -1.5]), name="layer/b")  # float64
    n = hb.Variable(np.int64(7), name="n")
    flag = hb.Variable(np.array([True, False]), name="flag")
    bump = hb.group(
        hb.assign_add(w, np.ones((2, 3), np.float32)),
        hb.assign_add(b, [1.0, 1.0]),
        hb.assign_add(n, np.int64(1)),
        hb.assign(flag, hb.logical_not(flag)),
    )
    return [w, b, n, flag], bump


def _values(s, vs):
    return [np.array(x) for x in s.run(vs)]


def _assert_same(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def test_save_restore_round_trip(tmp_path):
    """Restoring gives back every saved value, dtype and shape; save returns prefix-step."""
    with hb.Graph().as_default():
        vs, bump = _model()
        saver = hb.train.Saver()
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            saved = _values(s, vs)
            path = saver.save(s, str(tmp_path / "model"), global_step=3)
            assert path == str(tmp_path / "model-3") and os.path.isfile(path)
            s.run(bump)
            assert not np.array_equal(s.run(vs[0]), saved[0])
            saver.restore(s, path)
            _assert_same(_values(s, vs), saved)
    assert hb.train.latest_checkpoint(str(tmp_path)) == path
    assert hb.train.list_variables(str(tmp_path)) == [
        ("flag", [2]), ("layer/b", [2]), ("n", []), ("w", [2, 3])
    ]  # fmt: skip
    np.testing.assert_array_equal(hb.train.load_variable(path, "w"), saved[0])
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]  # no temporaries left


def test_file_format_is_magic_json_index_raw_bytes_and_digest(tmp_path):
    """A checkpoint is magic, a JSON index, 64-aligned little-endian bytes, then a SHA-256."""
    import hashlib

    with hb.Graph().as_default():
        vs, _ = _model()
        saver = hb.train.Saver(vs[:1])
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            path = saver.save(s, str(tmp_path / "m"))
    blob = open(path, "rb").read()
    assert blob[:8] == MAGIC
    (hlen,) = struct.unpack_from("<Q", blob, 8)
    header = json.loads(blob[16 : 16 + hlen])
    assert (16 + hlen) % 64 == 0
    (entry,) = header["tensors"]
    assert entry == {"name": "w", "dtype": "float32", "shape": [2, 3], "offset": 0, "length": 24}
    data = blob[16 + hlen : 16 + hlen + 24]
    np.testing.assert_array_equal(np.frombuffer(data, "<f4"), np.arange(6))
    assert blob[-32:] == hashlib.sha256(blob[:-32]).digest()


def test_dict_var_list_and_finalized_graph(tmp_path):
    """A dict var_list saves under its keys; save and restore work after graph.finalize()."""
    with hb.Graph().as_default() as g:
        vs, bump = _model()
        saver = hb.train.Saver({"weights": vs[0], "count": vs[2]})
        init = hb.global_variables_initializer()
        g.finalize()
        with hb.Session() as s:
            s.run(init)
            saved = _values(s, [vs[0], vs[2]])
            path = saver.save(s, str(tmp_path / "ckpt"))
            s.run(bump)
            saver.restore(s, path)
            _assert_same(_values(s, [vs[0], vs[2]]), saved)
    assert [n for n, _ in hb.train.list_variables(path)] == ["count", "weights"]


def test_max_to_keep_and_index(tmp_path):
    """Only the newest max_to_keep checkpoints remain; the index lists them, newest last."""
    with hb.Graph().as_default():
        vs, bump = _model()
        saver = hb.train.Saver(max_to_keep=2)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            paths = [saver.save(s, str(tmp_path / "model"), global_step=i) for i in range(4)]
    assert [os.path.isfile(p) for p in paths] == [False, False, True, True]
    assert saver.last_checkpoints == paths[2:]
    st = hb.train.get_checkpoint_state(str(tmp_path))
    assert st.model_checkpoint_path == paths[3]
    assert st.all_model_checkpoint_paths == paths[2:]
    index = json.loads((tmp_path / "checkpoint").read_text())
    assert index["model_checkpoint_path"] == "model-3"  # relative: the directory can move


def test_latest_checkpoint_follows_the_index(tmp_path):
    """latest_checkpoint reads the index, not file times; no index or a missing file gives None."""
    assert hb.train.latest_checkpoint(str(tmp_path)) is None
    with hb.Graph().as_default():
        vs, _ = _model()
        saver = hb.train.Saver()
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            p1 = saver.save(s, str(tmp_path / "a"), global_step=1)
            p2 = saver.save(s, str(tmp_path / "a"), global_step=2)
    assert hb.train.latest_checkpoint(str(tmp_path)) == p2
    hb.train.update_checkpoint_state(str(tmp_path), p1, [p1, p2])
    assert hb.train.latest_checkpoint(str(tmp_path)) == p1
    os.remove(p1)
    assert hb.train.latest_checkpoint(str(tmp_path)) is None
    (tmp_path / "checkpoint").write_text("{not json")
    with pytest.warns(UserWarning, match="ignoring the checkpoint index"):
        assert hb.train.get_checkpoint_state(str(tmp_path)) is None


def _two_checkpoints(tmp_path, s, vs, bump, saver):
    s.run(hb.global_variables_initializer())
    old = _values(s, vs)
    p_old = saver.save(s, str(tmp_path / "model"), global_step=1)
    s.run(bump)
    p_new = saver.save(s, str(tmp_path / "model"), global_step=2)
    s.run(bump)
    return old, p_old, p_new


@pytest.mark.parametrize(
    "damage, message",
    [
        ("flip_data", "checksum"),
        ("flip_header", "checksum"),
        ("truncate", "truncated"),
        ("truncate_header", "truncated"),
        ("magic", "not a hetbed checkpoint"),
    ],
)
def test_damaged_checkpoint_fails_cleanly_and_previous_restores(tmp_path, damage, message):
    """A corrupt or truncated newest checkpoint raises DataLossError naming the file and leaves
    the variables as they were; the previous checkpoint still restores the older values."""
    with hb.Graph().as_default():
        vs, bump = _model()
        saver = hb.train.Saver()
        with hb.Session() as s:
            old, p_old, p_new = _two_checkpoints(tmp_path, s, vs, bump, saver)
            blob = bytearray(open(p_new, "rb").read())
            if damage == "flip_data":
                blob[-40] ^= 0x01
            elif damage == "flip_header":
                blob[20] ^= 0x20
            elif damage == "truncate":
                blob = blob[:-10]
            elif damage == "truncate_header":
                blob = blob[:30]
            else:
                blob[:8] = b"PK\x03\x04xxxx"
            open(p_new, "wb").write(bytes(blob))
            before = _values(s, vs)
            with pytest.raises(hb.errors.DataLossError, match=message) as err:
                saver.restore(s, hb.train.latest_checkpoint(str(tmp_path)))
            assert p_new in str(err.value)
            _assert_same(_values(s, vs), before)
            saver.restore(s, p_old)
            _assert_same(_values(s, vs), old)


def test_missing_variable_and_shape_mismatch_are_named(tmp_path):
    """A variable absent from the checkpoint raises NotFoundError naming it; a shape mismatch
    names the variable and both shapes; a missing file is NotFoundError."""
    with hb.Graph().as_default():
        w = hb.Variable(np.zeros((2, 3), np.float32), name="w")
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            path = hb.train.Saver([w]).save(s, str(tmp_path / "m"))
    with hb.Graph().as_default():
        w = hb.Variable(np.ones((2, 3), np.float32), name="w")
        extra = hb.Variable(np.ones(2, np.float32), name="extra")
        wide = hb.Variable(np.ones((3, 3), np.float32), name="wide")
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            with pytest.raises(hb.errors.NotFoundError, match="'extra' not found"):
                hb.train.Saver([w, extra]).restore(s, path)
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"wide.*\[2, 3\].*\(3, 3\)"):
                hb.train.Saver({"w": wide}).restore(s, path)
            with pytest.raises(hb.errors.NotFoundError, match="does not exist"):
                hb.train.Saver([w]).restore(s, str(tmp_path / "nope"))
            np.testing.assert_array_equal(s.run(w), np.ones((2, 3)))  # nothing was assigned
            with pytest.raises(ValueError, match="does not exist, cannot save"):  # two levels
                hb.train.Saver([w]).save(s, str(tmp_path / "no_dir" / "deeper" / "m"))


def test_resumed_training_equals_uninterrupted(tmp_path):
    """Saving Adam's slots and the global step makes a resumed run match an uninterrupted one."""
    with hb.Graph().as_default():
        w = hb.Variable(np.array([1.0, -2.0, 0.5], np.float32), name="w")
        gs = hb.train.get_or_create_global_step()
        train = hb.train.AdamOptimizer(0.1).minimize(hb.reduce_sum(hb.square(w - 1.0)), gs)
        saver = hb.train.Saver()
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            s.run(train)
            s.run(train)
            path = saver.save(s, str(tmp_path / "run"), global_step=gs)
            s.run(train)
            s.run(train)
            straight = s.run(w)
            s.run(hb.global_variables_initializer())  # forget everything
            saver.restore(s, path)
            assert hb.train.global_step(s, gs) == 2
            s.run(train)
            s.run(train)
            np.testing.assert_array_equal(s.run(w), straight)
    assert path.endswith("run-2")


def test_import_meta_graph_restores_a_model_without_its_code(tmp_path):
    """TF1's restore idiom: Saver.save writes the graph beside the checkpoint (<ckpt>.meta);
    import_meta_graph rebuilds it into an empty default graph and returns a Saver; tensors and
    collections are found by name; old checkpoints take their .meta with them."""
    import hetbed.compat.v1 as tf

    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        with tf.device("/cpu:0"):
            w = tf.Variable(tf.ones([3, 2]), name="w")
        y = tf.matmul(x, w, name="y")
        tf.add_to_collection("pred", y)
        step = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y * y))
        saver = tf.train.Saver(max_to_keep=1)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            saver.save(s, str(tmp_path / "model"), global_step=0)
            s.run(step, {x: xv})
            want = s.run(y, {x: xv})
            path = saver.save(s, str(tmp_path / "model"), global_step=1)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model-1", "model-1.meta"]
    with tf.Graph().as_default() as g, tf.Session() as s:
        restorer = tf.train.import_meta_graph(path + ".meta", clear_devices=True)
        restorer.restore(s, tf.train.latest_checkpoint(str(tmp_path)))
        got = s.run(g.get_tensor_by_name("y:0"), {g.get_tensor_by_name("x:0"): xv})
        again = s.run(tf.get_collection("pred")[0], {"x:0": xv})
        assert g.get_operation_by_name("w").device == ""
        with pytest.raises(tf.errors.InvalidArgumentError, match="already has ops named"):
            tf.train.import_meta_graph(path + ".meta")
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(again, want, rtol=1e-6)
    with tf.Graph().as_default():  # a py_func's Python function does not travel in the file
        v = tf.Variable(1.0)
        tf.py_func(lambda a: a * 2, [v], tf.float32, name="double")
        with tf.Session() as s:
            s.run(v.initializer)
            p2 = tf.train.Saver().save(s, str(tmp_path / "pyf"))
    with tf.Graph().as_default() as g, tf.Session() as s:
        tf.train.import_meta_graph(p2 + ".meta").restore(s, p2)
        with pytest.raises(tf.errors.OpError, match="double"):
            s.run(g.get_tensor_by_name("double:0"))
    with tf.Graph().as_default(), pytest.raises(tf.errors.NotFoundError, match="no meta graph"):
        tf.train.import_meta_graph(str(tmp_path / "missing.meta"))


def test_a_graph_that_cannot_be_written_leaves_the_checkpoint_and_warns_once(tmp_path, monkeypatch):
    import hetbed.compat.v1 as tf
    from hetbed.runtime import serialize

    def refuse(*a, **k):
        raise ValueError("attr of an unknown type")

    monkeypatch.setattr(serialize, "write_graph", refuse)
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        saver = tf.train.Saver()
        with tf.Session() as s, pytest.warns(UserWarning, match="not written beside") as rec:
            s.run(v.initializer)
            paths = [saver.save(s, str(tmp_path / "m"), global_step=i) for i in range(2)]
    assert all(os.path.isfile(p) and not os.path.exists(p + ".meta") for p in paths)
    assert len(rec) == 1


def _saved(d, name="model.ckpt", steps=(0,), max_to_keep=5, latest_filename=None):
    """A variable saved at each of ``steps`` into ``d/name-<step>``; the saver."""
    with hb.Graph().as_default():
        v = hb.Variable(1.0, name="v")
        saver = hb.train.Saver(max_to_keep=max_to_keep)
        with hb.Session() as s:
            s.run(v.initializer)
            for step in steps:
                saver.save(s, os.path.join(d, name), global_step=step,
                           latest_filename=latest_filename)  # fmt: skip
    return saver


def test_rotation_removes_only_checkpoint_files_whatever_the_index_lists(tmp_path):
    """An index edited (or a list given) to name other files: they are not adopted, and a
    listed file that is no checkpoint is never deleted by max_to_keep (TF's rotation removes
    only checkpoint files)."""
    d = str(tmp_path)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    with hb.Graph().as_default():
        v = hb.Variable(1.0, name="v")
        saver = hb.train.Saver(max_to_keep=1)
        with hb.Session() as s:
            s.run(v.initializer)
            saver.recover_last_checkpoints([str(precious), os.path.join(d, "missing")])
            assert saver.last_checkpoints == []
            saver.set_last_checkpoints_with_time([(str(precious), 0.0)])
            saver.save(s, os.path.join(d, "model"), global_step=1)
            saver.save(s, os.path.join(d, "model"), global_step=2)
            with pytest.raises(TypeError, match="expected a list of paths"):
                saver.recover_last_checkpoints("abc")
    assert precious.read_text() == "keep me"
    assert sorted(os.listdir(d)) == ["checkpoint", "model-2", "model-2.meta", "precious.txt"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("all_model_checkpoint_paths", "abc"),
        ("all_model_checkpoint_timestamps", "zz"),
        ("all_model_checkpoint_timestamps", [float("inf")]),
    ],
)
def test_an_index_of_the_wrong_types_is_ignored_with_a_warning(tmp_path, field, value):
    d = str(tmp_path)
    _saved(d)
    index = tmp_path / "checkpoint"
    doc = json.loads(index.read_text())
    doc[field] = value
    index.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match=field):
        assert hb.train.get_checkpoint_state(d) is None


def test_recovery_keeps_to_the_index_s_checkpoint_name(tmp_path):
    """Another Saver's checkpoints in the folder (a user's best-7, with its own index file) are
    neither restored from nor listed, so never rotated away."""
    from hetbed.runtime.train.checkpoint import recover_checkpoint

    d = str(tmp_path)
    _saved(d, steps=(0, 5))
    _saved(d, name="best", steps=(2, 7), latest_filename="best_checkpoint")
    index = (tmp_path / "checkpoint").read_text()
    assert recover_checkpoint(d) == os.path.join(d, "model.ckpt-5")
    assert (tmp_path / "checkpoint").read_text() == index  # nothing to recover
    assert {"best-2", "best-7"} <= set(os.listdir(d))
    os.remove(os.path.join(d, "model.ckpt-5"))  # the index's latest gone: the older one
    with pytest.warns(UserWarning, match="latest is now"):
        assert recover_checkpoint(d) == os.path.join(d, "model.ckpt-0")
    state = hb.train.get_checkpoint_state(d)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model.ckpt-0"]


def test_saving_over_the_index_or_into_a_file_is_refused_before_writing(tmp_path):
    d = str(tmp_path)
    with pytest.raises(ValueError, match="it is the folder's checkpoint index"):
        _saved(d, name="checkpoint", steps=(None,))
    assert os.listdir(d) == []
    (tmp_path / "ck").write_text("a file")
    with pytest.raises(ValueError, match="ck exists and is not a directory"):
        _saved(str(tmp_path / "ck"))


@pytest.mark.parametrize(
    "entry",
    [
        {"shape": [True]},  # a bool is no dimension
        {"offset": False},
        {"shape": [1] * 100},  # beyond any tensor's rank
    ],
)
def test_a_crafted_header_with_a_valid_digest_is_a_data_loss_error(tmp_path, entry):
    """Headers no hetbed writer makes (the digest recomputed over them) are refused naming the
    file and entry, never an internal error or a quiet reading of a bool as 0."""
    import hashlib

    from hetbed.runtime.errors import DataLossError

    t = {"name": "v", "dtype": "float32", "shape": [1], "offset": 0, "length": 4, **entry}
    h = json.dumps({"format": 1, "data_length": 4, "tensors": [t]}).encode()
    h += b" " * ((-(16 + len(h))) % 64)
    body = MAGIC + struct.pack("<Q", len(h)) + h + np.float32(1.0).tobytes()
    path = tmp_path / "c"
    path.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(DataLossError, match=r"c: tensor entry 0 is malformed"):
        hb.train.load_checkpoint(str(path)).get_tensor("v")


def test_rotation_keeps_to_the_folder_it_saves_into_and_recovery_to_its_name(tmp_path):
    """Checkpoints of another run (another folder), listed by path in this Saver's kept list,
    are never deleted by this folder's rotation; with the index gone, recovery takes only the
    default name's checkpoints (a MonitoredTrainingSession's model.ckpt), never a best-7."""
    from hetbed.runtime.train.checkpoint import recover_checkpoint

    other, here = tmp_path / "run1", tmp_path / "run2"
    other.mkdir()
    here.mkdir()
    _saved(str(other), steps=(0, 1))
    with hb.Graph().as_default():
        v = hb.Variable(1.0, name="v")
        saver = hb.train.Saver(max_to_keep=1)
        with hb.Session() as s:
            s.run(v.initializer)
            theirs = [str(here / ".." / "run1" / "model.ckpt-0"), str(other / "model.ckpt-1")]
            saver.recover_last_checkpoints(theirs)
            assert len(saver.last_checkpoints) == 2  # (real checkpoints: adopted as listed)
            for step in (5, 6):
                saver.save(s, str(here / "model.ckpt"), global_step=step)
    assert sorted(os.listdir(other)) == sorted(
        ["checkpoint", "model.ckpt-0", "model.ckpt-0.meta", "model.ckpt-1", "model.ckpt-1.meta"]
    )
    _saved(str(here), name="best", steps=(7,), latest_filename="best_checkpoint")
    os.remove(here / "checkpoint")
    with pytest.warns(UserWarning, match="latest is now .*model.ckpt-6"):
        assert recover_checkpoint(str(here), default_basename="model.ckpt").endswith("ckpt-6")
    assert "best-7" in os.listdir(here)
