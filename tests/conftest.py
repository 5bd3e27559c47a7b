"""Test-session settings shared by every file."""

import os

# TensorFlow (an optional peer, imported only by the tests that compare against it) gives
# TF1's Keras-backed APIs (tf.compat.v1.layers, nn.rnn_cell, tf.keras as Keras 2) only with
# tf_keras and this variable, which must be set before TensorFlow is imported: set here so
# that a TF-backed file run alone sees the same TensorFlow as in the whole suite.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
