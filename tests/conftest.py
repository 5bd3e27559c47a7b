"""Test-session settings shared by every file."""

import importlib.util
import os

# TensorFlow (an optional peer, imported only by the tests that compare against it) gives
# TF1's Keras-backed APIs (tf.compat.v1.layers, nn.rnn_cell, tf.keras as Keras 2) beside Keras 3
# only with tf_keras and this variable, which must be set before TensorFlow is imported: set
# here so that a TF-backed file run alone sees the same TensorFlow as in the whole suite (not
# where tf_keras is missing: a TensorFlow of Keras 2 then fails to import with it).
if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
