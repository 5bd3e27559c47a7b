"""tf.contrib.framework's variable helpers (slim's, under TF1's other name) and filter_variables."""

import hetbed.compat.v1 as tf


def test_filter_variables_and_the_slim_helpers_under_framework():
    with tf.Graph().as_default():
        a = tf.get_variable("net/conv1/w", [1])
        b = tf.get_variable("net/logits/w", [1])
        c = tf.get_variable("aux/w", [1])
        f = tf.contrib.framework
        names = lambda vs: [v.op.name for v in vs]  # noqa: E731
        assert names(f.filter_variables([a, b, c], ["net"], ["logits"])) == ["net/conv1/w"]
        assert names(f.filter_variables([a, b, c], ["w"], reg_search=False)) == []  # match at start
        assert names(f.filter_variables([a, b, c], exclude_patterns=["^net"])) == ["aux/w"]
        assert names(f.get_variables_to_restore(exclude=["net/logits"])) == ["net/conv1/w", "aux/w"]
        assert f.assign_from_checkpoint_fn is tf.contrib.slim.assign_from_checkpoint_fn
        assert names(f.get_variables("net")) == ["net/conv1/w", "net/logits/w"]
