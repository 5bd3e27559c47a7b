"""Second hostile review of this round's TF1 work: each case once gave a wrong value silently,
lost data or failed with an unhelpful error; now TF's value or a clear error."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def _drain(s, x):
    out = []
    try:
        while True:
            out.append(s.run(x))
    except tf.errors.OutOfRangeError:
        return out


def test_captured_values_are_copies_taken_when_the_iterator_starts():
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        feed = np.arange(4, dtype=np.float32)
        p = tf.placeholder(tf.float32, [4])
        it = (
            tf.data.Dataset.range(2)
            .map(lambda i: v + tf.cast(i, tf.float32))
            .make_initializable_iterator()
        )
        it2 = tf.data.Dataset.from_tensor_slices(p).make_initializable_iterator()
        x, y = it.get_next(), it2.get_next()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run([it.initializer, it2.initializer], {p: feed})
            s.run(tf.assign_add(v, 10.0))
            feed[:] = -1  # the caller refills its array
            assert s.run(x) == 1.0  # the variable's value when the iterator started, as TF
            assert [float(s.run(y)) for _ in range(4)] == [0.0, 1.0, 2.0, 3.0]


def test_nested_dataset_functions_and_reduce_capture_the_callers_tensors():
    with tf.Graph().as_default():
        k = tf.placeholder(tf.int64, [])
        nested = tf.data.Dataset.range(1, 3).flat_map(
            lambda i: tf.data.Dataset.from_tensors(i).map(lambda j: j + k)
        )
        it = nested.make_initializable_iterator()
        x = it.get_next()
        total = tf.data.Dataset.range(4).reduce(np.int64(0), lambda acc, v: acc + v * k)
        with tf.Session() as s:
            s.run(it.initializer, {k: 100})
            assert [int(v) for v in _drain(s, x)] == [101, 102]
            assert s.run(total, {k: 10}) == 60


def test_padded_batch_pads_strings_with_empty_bytes_and_checks_padding_values():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(tf.constant(["a", "a b"])).map(
            lambda s: tf.string_split([s]).values
        )
        x = ds.padded_batch(2, padded_shapes=[None]).make_one_shot_iterator().get_next()
        with tf.Session() as s:
            assert s.run(x).tolist() == [[b"a", b""], [b"a", b"b"]]
        ints = tf.data.Dataset.range(3).map(lambda i: tf.fill([i], i))
        with pytest.raises(TypeError, match="not of that kind"):
            ints.padded_batch(2, padded_shapes=[None], padding_values=np.int64(0) + 0.5)
        with pytest.raises(ValueError, match="should be scalars"):
            ints.padded_batch(2, padded_shapes=[None], padding_values=np.array([7, 8], np.int64))
        with pytest.raises(TypeError, match="must be an integer"):
            ints.batch(2.5)
        with pytest.raises(TypeError, match="integer scalar"):
            ints.take(tf.constant(2.0))
        with pytest.raises(ValueError, match="Cannot capture a placeholder"):
            tf.data.Dataset.from_tensors(tf.placeholder(tf.int32, [])).make_one_shot_iterator()


def test_unknown_dimensions_refuse_to_become_tensors():
    x = tf.placeholder(tf.float32, [None, 3])
    u = x.shape[0]
    with pytest.raises(ValueError, match="unknown Dimension"):
        tf.constant(u)
    with pytest.raises((TypeError, ValueError)):
        u + tf.constant(1)
    with pytest.raises(ValueError, match="unknown Dimension"):
        tf.stack([u, -1])


def test_nchw_bias_and_empty_sparse_reduce_max():
    with tf.Graph().as_default(), tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="channels"):
            tf.nn.bias_add(tf.zeros([2, 1, 4, 4]), tf.ones([5]), data_format="NCHW")
        empty = tf.SparseTensor(np.zeros((0, 2), np.int64), np.zeros(0, np.float32), [2, 3])
        assert s.run(tf.sparse_reduce_max(empty, axis=1)).tolist() == [0.0, 0.0]
        assert s.run(tf.sparse_reduce_max(empty, axis=1, keepdims=True)).shape == (2, 1)


def test_tensorflow_checkpoints_are_checked_and_not_overwritten(tmp_path):
    tf_real = pytest.importorskip("tensorflow")
    v1 = tf_real.compat.v1
    with v1.Graph().as_default():
        w = v1.Variable([1.0, 2.0, 3.0, 4.0], name="w")
        gs = v1.train.get_or_create_global_step()
        with v1.Session() as s:
            s.run(v1.global_variables_initializer())
            s.run(gs.assign(100))
            v1.train.Saver().save(s, str(tmp_path / "ok" / "model.ckpt"), global_step=100)
            v1.train.Saver().save(s, str(tmp_path / "bad" / "model.ckpt"), global_step=100)
    meta = (tmp_path / "ok" / "model.ckpt-100.meta").read_bytes()
    with tf.Graph().as_default():
        w = tf.Variable(np.zeros(4, np.float32), name="w")
        gs = tf.train.get_or_create_global_step()
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path / "ok"), save_checkpoint_secs=None
        ) as s:
            assert s.run(gs) == 100 and s.run(w).tolist() == [1, 2, 3, 4]
    assert (tmp_path / "ok" / "model.ckpt-100.meta").read_bytes() == meta  # TF's file left alone
    data = tmp_path / "bad" / "model.ckpt-100.data-00000-of-00001"
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0x40
    data.write_bytes(bytes(blob))
    with pytest.raises(tf.errors.DataLossError, match="checksum"):
        tf.train.load_variable(str(tmp_path / "bad" / "model.ckpt-100"), "w")


def test_dimension_arithmetic_gives_dimensions():
    x = tf.placeholder(tf.float32, [None, 3, 4])
    s = x.shape
    assert (s[1] * s[2]).value == 12 and (s[0] * s[1]).value is None and (2 + s[1]).value == 5
    assert s[1].merge_with(3).value == 3 and s[1].is_compatible_with(s[0])
    with pytest.raises(ValueError, match="not compatible"):
        s[1].merge_with(4)


def test_get_variable_from_a_value_takes_its_dtype_as_tensorflow():
    # TF1: Python ints int32, floats float32, numpy its own; an explicit dtype must agree
    with tf.Graph().as_default():
        made = {
            "i": tf.get_variable("i", initializer=5),
            "f": tf.get_variable("f", initializer=2.5),
            "n64": tf.get_variable("n64", initializer=np.float64(2.5)),
            "b": tf.get_variable("b", initializer=True),
            "l": tf.get_variable("l", initializer=[1, 2]),
            "big": tf.get_variable("big", initializer=np.int64(2**24)),
        }
        want = {"i": "int32", "f": "float32", "n64": "float64", "b": "bool", "l": "int32"}
        for k, name in want.items():
            assert made[k].dtype.name == name, k
        with pytest.raises(ValueError, match="'int32' and explicit dtype 'float32'"):
            tf.get_variable("x", initializer=5, dtype=tf.float32)
        with pytest.raises(ValueError, match="'float64' and explicit dtype 'float32'"):
            tf.get_variable("y", initializer=np.zeros(2), dtype=tf.float32)
        text = tf.get_variable("text", initializer="abc")  # a string (not an initializer's name)
        assert text.dtype == tf.string
        inc = tf.assign_add(made["big"], 1)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run(inc) == 2**24 + 1  # an int64 counter, not float32's 2**24


def test_nchw_wrappers_name_the_users_op_for_a_wrong_rank():
    x = np.ones([3, 5, 5], np.float32)
    with tf.Graph().as_default():
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="Conv2D: input must be 4-D in NCHW"
        ):
            tf.nn.conv2d(
                x, np.ones([3, 3, 3, 4], np.float32), [1, 1, 1, 1], "SAME", data_format="NCHW"
            )
        with pytest.raises(tf.errors.InvalidArgumentError, match="MaxPool: input must be 4-D"):
            tf.nn.max_pool(x, [1, 1, 2, 2], [1, 1, 2, 2], "SAME", data_format="NCHW")
        with pytest.raises(tf.errors.InvalidArgumentError, match="output_shape must have 4 values"):
            tf.nn.conv2d_transpose(
                x[None],
                np.ones([3, 3, 4, 3], np.float32),
                [1, 4, 10],
                [1, 1, 2, 2],
                "SAME",
                data_format="NCHW",
            )
        with pytest.raises(tf.errors.InvalidArgumentError, match="output_shape must have 4 values"):
            tf.nn.conv2d_transpose(
                x[None],
                np.ones([3, 3, 4, 3], np.float32),
                tf.constant([1, 4, 10]),
                [1, 1, 2, 2],
                "SAME",
                data_format="NCHW",
            )


def test_tf_data_build_errors_and_tensor_arguments_as_tensorflow():
    R = tf.data.Dataset.range
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="predicate must return a bool scalar"):
            R(3).map(lambda x: tf.fill([2], x)).filter(lambda v: v > 0)
        with pytest.raises(TypeError, match="expected a tf.data.Dataset"):
            tf.data.experimental.get_single_element(tf.constant(3))
        with pytest.raises(ValueError, match="must return tensors"):
            R(2).map(lambda x: None)
        with pytest.raises(tf.errors.InvalidArgumentError, match="step must be a non-zero"):
            R(0, 5, 0)
        n = tf.placeholder(tf.int64, [])
        lens = tf.placeholder(tf.int64, [1])
        v = tf.get_variable("v", initializer=[1.0, 2.0])
        nested = R(4).flat_map(lambda x: R(x))  # range of a tensor inside a function
        fed = (
            R(n)
            .map(lambda x: tf.fill([x + 1], x))
            .padded_batch(2, lens, padding_values=np.int64(-1))
        )
        const_shape = (
            R(1, 3).map(lambda x: tf.fill([x], x)).padded_batch(2, tf.constant([4], tf.int64))
        )
        from_var = tf.data.Dataset.from_tensor_slices(v)
        its = [d.make_initializable_iterator() for d in (nested, fed, const_shape, from_var)]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run([it.initializer for it in its], {n: 3, lens: [5]})
            assert _drain(s, its[0].get_next()) == [0, 0, 1, 0, 1, 2]
            got = _drain(s, its[1].get_next())
            np.testing.assert_array_equal(got[0], [[0, -1, -1, -1, -1], [1, 1, -1, -1, -1]])
            np.testing.assert_array_equal(got[1], [[2, 2, 2, -1, -1]])
            np.testing.assert_array_equal(s.run(its[2].get_next()), [[1, 0, 0, 0], [2, 2, 0, 0]])
            assert _drain(s, its[3].get_next()) == [1.0, 2.0]


def test_strings_follow_tensorflows_base64_re2_and_icu_rules():
    with tf.Graph().as_default():
        with tf.Session() as s:
            for good, want in (
                (b"QQ", b"A"),
                (b"QUI", b"AB"),
                (b"QUI=", b"AB"),
                (b"QQ==", b"A"),
                (b"", b""),
            ):
                assert s.run(tf.io.decode_base64(tf.constant(good))) == want
            for bad in (b"QUJD==", b"QQ=", b"=", b"A", b"Q===", b"QUJD====", b"QUJD+/"):
                with pytest.raises(tf.errors.InvalidArgumentError, match="DecodeBase64"):
                    s.run(tf.io.decode_base64(tf.constant(bad)))
            m = tf.strings.regex_full_match
            for pat, what in (
                (r"(a)\1", "backreference"),
                (r"ab\Z", "Z"),
                (r"a(?=b)b", "lookahead"),
                (r"a++", "possessive"),
            ):
                with pytest.raises(tf.errors.InvalidArgumentError, match=what):
                    m(tf.constant(["aa"]), pat)
            text = tf.constant([b"\xff", "é".encode(), b"ab", b"a+"])
            assert s.run(m(text, r".")).tolist() == [False, True, False, False]  # TF's answers
            assert s.run(m(text, r"\w")).tolist() == [False, False, False, False]  # ASCII \w
            assert s.run(m(text, r"ab\z")).tolist() == [False, False, True, False]
            assert s.run(m(text, r"a\++")).tolist() == [False, False, False, True]
            for pat, xs, want in (  # TF 2.21's answers (RE2's syntax and classes)
                ("[[:alpha:]]+", ["ab", "ab1"], [True, False]),
                (r"\s", ["\x0b", " "], [False, True]),
                ("(?i)é", ["É"], [True]),
                (r"\Qa.b\E", ["a.b", "axb"], [True, False]),
                (r"\101", ["A"], [True]),
                (r"\x{1F600}", ["😀"], [True]),
                ("a{,3}", ["a{,3}", "aa"], [True, False]),
                ("ab$\n", ["ab\n"], [False]),
                (r"\bab\b", ["ab"], [True]),
                (r"\w+", ["é", "a_1"], [False, True]),
            ):
                assert s.run(m(tf.constant([x.encode() for x in xs]), pat)).tolist() == want, pat
            with pytest.raises(tf.errors.InvalidArgumentError, match="cannot match"):
                m(text, r"\pL+")  # (Python's re has no Unicode classes: said, not mismatched)
            p = tf.placeholder(tf.string, [])
            assert s.run(m(text, p), {p: "a."}).tolist() == [False, False, True, True]
            assert s.run(m(text, tf.constant("a."))).tolist() == [False, False, True, True]
            with pytest.raises(tf.errors.InvalidArgumentError, match="lookahead"):
                s.run(m(text, p), {p: "(?=a)a"})
            xs = [b"AB\xffC", b"a\x00B", b"\xe2\x82A", b"\xed\xa0\x80", b"\xc3\x84\xff"]
            low = s.run(tf.strings.lower(tf.constant(xs), encoding="utf-8")).tolist()
            bad = "\ufffd".encode()  # TF 2.21's answers: to the first NUL, U+FFFD per bad run
            assert low == [b"ab" + bad + b"c", b"a", bad + b"a", bad * 3, "ä".encode() + bad]


def test_sparse_split_refuses_more_pieces_than_rows():
    with tf.Graph().as_default():
        sp = tf.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [2, 3])
        with tf.Session() as s:
            parts = s.run(tf.sparse_split(sp_input=sp, num_split=2, axis=0))
            assert [p.dense_shape.tolist() for p in parts] == [[1, 3], [1, 3]]
            with pytest.raises(tf.errors.InvalidArgumentError, match="num_split 3 is more than"):
                s.run(tf.sparse_split(sp_input=sp, num_split=3, axis=0))


def test_group_by_window_reduce_computes_with_its_key_and_maps_drop_outer_control_inputs():
    gbw = tf.data.experimental.group_by_window
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(10).apply(gbw(lambda x: x % 2, lambda k, w: w.batch(k + 2), 4))
        tens = tf.data.Dataset.range(10).apply(
            gbw(lambda x: x % 2, lambda k, w: tf.data.Dataset.from_tensors(k * 10), 4)
        )
        v = tf.get_variable("w", initializer=np.float32(0))
        inc = tf.assign_add(v, 1.0)

        def f(x):
            with tf.control_dependencies([inc]):  # the caller's op: dropped, as TF's functions do
                return x + 0

        mapped = tf.data.Dataset.range(3).map(f)
        its = [d.make_initializable_iterator() for d in (ds, tens, mapped)]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run([it.initializer for it in its])
            got = [b.tolist() for b in _drain(s, its[0].get_next())]
            assert got == [[0, 2], [4, 6], [1, 3, 5], [7], [8], [9]]  # TF 2.21's batches
            assert _drain(s, its[1].get_next()) == [0, 10, 0, 10]
            assert _drain(s, its[2].get_next()) == [0, 1, 2] and s.run(v) == 0.0


def test_a_map_that_assigns_to_a_callers_variable_changes_it():
    # TF 2.21 with a resource variable: elements 1, 2, 3 and the variable 3
    with tf.Graph().as_default():
        v = tf.get_variable("count", initializer=0.0, use_resource=True)
        it = (
            tf.data.Dataset.range(3)
            .map(lambda x: tf.assign_add(v, 1.0))
            .make_initializable_iterator()
        )
        nx = it.get_next()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(it.initializer)
            assert [s.run(nx) for _ in range(3)] == [1.0, 2.0, 3.0]
            assert s.run(v) == 3.0


def test_a_scan_state_that_grows_is_traced_again_on_a_relaxed_shape():
    scan = tf.data.experimental.scan
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(4).apply(
            scan(np.zeros([0], np.int64), lambda s, x: (tf.concat([s, [x]], 0), s))
        )
        assert ds.output_shapes.as_list() == [None]  # TF 2.21's relaxed shape
        it = ds.make_initializable_iterator()
        with tf.Session() as s:
            s.run(it.initializer)
            got = [v.tolist() for v in _drain(s, it.get_next())]
        assert got == [[], [0], [0, 1], [0, 1, 2]]


def test_padded_shapes_of_unknown_length_leave_the_shape_unknown():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(np.array([1, 2, 3], np.int64)).map(
            lambda x: tf.fill([x], x)
        )
        sh = tf.placeholder(tf.int64, [None])
        b = ds.padded_batch(2, padded_shapes=sh)
        assert b.output_shapes.ndims is None  # (TF: <unknown>)
        it = b.make_initializable_iterator()
        with tf.Session() as s:
            s.run(it.initializer, {sh: [4]})
            assert [v.tolist() for v in _drain(s, it.get_next())] == [
                [[1, 0, 0, 0], [2, 2, 0, 0]],
                [[3, 3, 3, 0]],
            ]
