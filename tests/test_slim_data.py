"""TF-Slim's data pipeline (slim.dataset, tfexample_decoder, dataset_data_provider,
parallel_reader, prefetch_queue, queues), as research/slim's train_image_classifier.py uses it:
items decoded from tf.Examples against the values written; against tf_slim on TensorFlow where
both are installed."""

import io
import os

import numpy as np
import pytest

import hetbed.compat.v1 as tf

slim = tf.contrib.slim
N = 6


def _examples(folder: str) -> dict:
    """One serialized tf.Example a file (PNG or raw images, a label, boxes, a list); the
    values written, by file name."""
    from PIL import Image

    rng = np.random.default_rng(3)
    b = lambda v: tf.train.Feature(bytes_list=tf.train.BytesList(value=v))  # noqa: E731
    i = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
    f = lambda v: tf.train.Feature(float_list=tf.train.FloatList(value=v))  # noqa: E731
    written = {}
    for k in range(N):
        img = rng.integers(0, 256, (5 + k, 4 + k, 3), dtype=np.uint8)
        if k % 2:
            enc, fmt = img.tobytes(), b"raw"
        else:
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, format="PNG")
            enc, fmt = buf.getvalue(), b"png"
        boxes = np.concatenate(
            [rng.uniform(0, 0.5, (1 + k % 3, 2)), rng.uniform(0.5, 1, (1 + k % 3, 2))], 1
        ).astype(np.float32)
        feature = {
            "image/encoded": b([enc]),
            "image/format": b([fmt]),
            "image/height": i([img.shape[0]]),
            "image/width": i([img.shape[1]]),
            "image/class/label": i([k % 4]),
            "tags": i(list(range(k))),
        }
        for j, side in enumerate(("ymin", "xmin", "ymax", "xmax")):
            feature[f"image/object/bbox/{side}"] = f(list(boxes[:, j]))
        name = f"{k:02d}.ex"
        ex = tf.train.Example(features=tf.train.Features(feature=feature))
        with open(os.path.join(folder, name), "wb") as fh:
            fh.write(ex.SerializeToString())
        written[name] = {"img": img, "label": k % 4, "boxes": boxes, "tags": np.arange(k)}
    return written


def _pipeline(t, tfd, dsm, ddp, folder: str, shuffle: bool) -> dict:
    """research/slim's decoding of the examples; a dict of the tensors one record gives."""
    keys_to_features = {
        "image/encoded": t.FixedLenFeature((), t.string, default_value=""),
        "image/format": t.FixedLenFeature((), t.string, default_value="png"),
        "image/height": t.FixedLenFeature([1], t.int64),
        "image/width": t.FixedLenFeature([1], t.int64),
        "image/class/label": t.FixedLenFeature([], t.int64, default_value=0),
        "tags": t.VarLenFeature(t.int64),
    }
    for side in ("ymin", "xmin", "ymax", "xmax"):
        keys_to_features[f"image/object/bbox/{side}"] = t.VarLenFeature(t.float32)
    handlers = {
        "image": tfd.Image(channels=3),
        "label": tfd.Tensor("image/class/label"),
        "hw": tfd.ItemHandlerCallback(
            ["image/height", "image/width"],
            lambda k: t.concat([k["image/height"], k["image/width"]], 0),
        ),
        "boxes": tfd.BoundingBox(["ymin", "xmin", "ymax", "xmax"], "image/object/bbox/"),
        "tags": tfd.Tensor("tags", default_value=-1),
        "tags_or_label": tfd.BackupHandler(
            tfd.Tensor("tags"), tfd.Tensor("image/class/label", shape=[1])
        ),
    }
    decoder = tfd.TFExampleDecoder(keys_to_features, handlers)
    ds = dsm.Dataset(
        data_sources=os.path.join(folder, "*.ex"),
        reader=t.WholeFileReader,
        decoder=decoder,
        num_samples=N,
        items_to_descriptions={},
        num_classes=4,
    )
    prov = ddp.DatasetDataProvider(
        ds, num_readers=2, shuffle=shuffle, num_epochs=1, common_queue_capacity=8,
        common_queue_min=2, seed=5,
    )  # fmt: skip
    names = ["image", "label", "hw", "boxes", "tags", "tags_or_label", "record_key"]
    image, label, hw, boxes, tags, tol, key = prov.get(names)
    img = t.reshape(image, t.concat([t.cast(hw, t.int32), [3]], 0))  # (raw images' shape)
    return {"img": img, "label": label, "boxes": boxes, "tags": tags, "tol": tol, "key": key}


def _read_all(t, queues, fetches: dict) -> dict:
    out = {}
    with t.Session() as s:
        s.run(t.local_variables_initializer())
        with queues.QueueRunners(s):
            for _ in range(N):
                v = s.run(fetches)
                out[os.path.basename(v.pop("key").decode())] = v
            with pytest.raises(t.errors.OutOfRangeError):
                s.run(fetches)
    return out


@pytest.mark.parametrize("shuffle", [False, True])
def test_dataset_data_provider_decodes_every_record_once(tmp_path, shuffle):
    written = _examples(str(tmp_path))
    with tf.Graph().as_default():
        fetches = _pipeline(
            tf, slim.tfexample_decoder, slim.dataset, slim.dataset_data_provider, str(tmp_path),
            shuffle,
        )  # fmt: skip
        got = _read_all(tf, slim.queues, fetches)
    assert sorted(got) == sorted(written)  # each record once in the epoch, shuffled or not
    for name, want in written.items():
        g = got[name]
        np.testing.assert_array_equal(g["img"], want["img"])
        assert g["label"] == want["label"]
        np.testing.assert_allclose(g["boxes"], want["boxes"])
        np.testing.assert_array_equal(g["tags"], want["tags"])
        backup = want["tags"] if len(want["tags"]) else [want["label"]]  # empty: the backup
        np.testing.assert_array_equal(g["tol"], backup)


def test_prefetch_queue_keeps_a_dict_batch_and_errors_name_the_problem(tmp_path):
    with tf.Graph().as_default():
        x = tf.Variable(0).assign_add(1)  # 1, 2, 3, ... as the runner's thread enqueues
        q = slim.prefetch_queue.prefetch_queue({"x": x, "y": x * 10}, capacity=3)
        nxt = q.dequeue()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            with slim.queues.QueueRunners(s):
                seen = [s.run(nxt) for _ in range(5)]
                with pytest.raises(slim.queues.NestedQueueRunnerError):
                    with slim.queues.QueueRunners(s):
                        pass
        with pytest.raises(ValueError, match="No data files found"):
            slim.parallel_reader.get_data_files(str(tmp_path / "*.none"))
        prov = slim.data_provider.DataProvider({"a": x}, 5)
        with pytest.raises(ValueError, match=r"item \[b\] is invalid"):
            prov.get(["b"])
        with pytest.raises(TypeError, match="common_queue.dtypes"):
            slim.parallel_reader.ParallelReader(tf.WholeFileReader, tf.FIFOQueue(2, [tf.int32]))
    assert [(int(d["x"]), int(d["y"])) for d in seen] == [(k, 10 * k) for k in range(1, 6)]


def test_slim_pipeline_equals_tf_slims(tmp_path, monkeypatch):
    tf_ = pytest.importorskip("tensorflow")
    pytest.importorskip("tf_slim")
    from tensorflow.python.ops import control_flow_ops as cfo

    if not hasattr(cfo, "case"):  # (tf_slim's decoder calls what TF 2.21 moved)
        from tensorflow.python.ops import control_flow_case

        monkeypatch.setattr(cfo, "case", control_flow_case.case, raising=False)
        monkeypatch.setattr(cfo, "cond", tf_.cond, raising=False)
    from tf_slim import queues
    from tf_slim.data import dataset, dataset_data_provider, tfexample_decoder

    _examples(str(tmp_path))
    v1 = tf_.compat.v1
    with tf_.Graph().as_default():
        theirs = _read_all(
            v1,
            queues,
            _pipeline(v1, tfexample_decoder, dataset, dataset_data_provider, str(tmp_path), False),
        )
    with tf.Graph().as_default():
        ours = _read_all(
            tf,
            slim.queues,
            _pipeline(
                tf, slim.tfexample_decoder, slim.dataset, slim.dataset_data_provider,
                str(tmp_path), False,
            ),
        )  # fmt: skip
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        for k, v in theirs[name].items():
            assert np.asarray(ours[name][k]).dtype == np.asarray(v).dtype, (name, k)
            np.testing.assert_array_equal(ours[name][k], v, err_msg=f"{name} {k}")
