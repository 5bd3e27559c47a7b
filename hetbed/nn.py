"""``hb.nn``: neural-network ops under their TensorFlow 1.x ``tf.nn`` names."""

from hetbed.runtime import rnn_cell
from hetbed.runtime.ops.conv_transpose import conv2d_transpose
from hetbed.runtime.ops.nn import (
    avg_pool,
    batch_normalization,
    bias_add,
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    dropout,
    elu,
    embedding_lookup,
    fused_batch_norm,
    in_top_k,
    l2_loss,
    l2_normalize,
    leaky_relu,
    log_softmax,
    max_pool,
    moments,
    relu,
    relu6,
    sigmoid,
    sigmoid_cross_entropy_with_logits,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    softplus,
    sparse_softmax_cross_entropy_with_logits,
    tanh,
    xw_plus_b,
)
from hetbed.runtime.ops.sampled import (
    fixed_unigram_candidate_sampler,
    log_uniform_candidate_sampler,
    nce_loss,
    sampled_softmax_loss,
)
from hetbed.runtime.rnn_cell import (
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    static_bidirectional_rnn,
    static_rnn,
)

__all__ = [
    "rnn_cell",
    "static_rnn",
    "static_bidirectional_rnn",
    "dynamic_rnn",
    "bidirectional_dynamic_rnn",
    "conv2d_transpose",
    "fixed_unigram_candidate_sampler",
    "log_uniform_candidate_sampler",
    "nce_loss",
    "sampled_softmax_loss",
    "avg_pool",
    "batch_normalization",
    "bias_add",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "dropout",
    "elu",
    "embedding_lookup",
    "fused_batch_norm",
    "in_top_k",
    "l2_loss",
    "l2_normalize",
    "leaky_relu",
    "log_softmax",
    "max_pool",
    "moments",
    "relu",
    "relu6",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "softplus",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
    "xw_plus_b",
]

# ---- WP3: nn ops composed in runtime/ops/nn_extra.py ----
from hetbed.runtime.ops.nn_extra import (  # noqa: E402
    atrous_conv2d,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    convolution,
    crelu,
    depthwise_conv2d,
    depthwise_conv2d_native,
    local_response_normalization,
    lrn,
    max_pool1d,
    max_pool2d,
    max_pool_with_argmax,
    pool,
    relu_layer,
    selu,
    separable_conv2d,
    softsign,
    swish,
    weighted_cross_entropy_with_logits,
    zero_fraction,
)

__all__ += [
    "atrous_conv2d",
    "avg_pool1d",
    "avg_pool2d",
    "conv1d",
    "convolution",
    "crelu",
    "depthwise_conv2d",
    "depthwise_conv2d_native",
    "local_response_normalization",
    "lrn",
    "max_pool1d",
    "max_pool2d",
    "max_pool_with_argmax",
    "pool",
    "relu_layer",
    "selu",
    "separable_conv2d",
    "softsign",
    "swish",
    "weighted_cross_entropy_with_logits",
    "zero_fraction",
]
# ---- WP1: top_k ----
from hetbed.runtime.ops.math_extra import top_k  # noqa: E402

__all__ += ["top_k"]
# ---- end WP1 ----

# ---- moments from sums, global batch norm ----
# isort: split
from hetbed.runtime.ops.nn_extra import (  # noqa: E402
    batch_norm_with_global_normalization,
    normalize_moments,
    sufficient_statistics,
)

__all__ += ["batch_norm_with_global_normalization", "normalize_moments", "sufficient_statistics"]

# ---- lookups of SparseTensor ids (runtime/ops/sparse.py) ----
from hetbed.runtime.ops.sparse import embedding_lookup_sparse  # noqa: E402

__all__ += ["embedding_lookup_sparse"]

# ---- 3-D convolution and pooling (runtime/ops/conv3d.py) ----
from hetbed.runtime.ops.conv3d import (  # noqa: E402
    avg_pool3d,
    conv3d,
    conv3d_transpose,
    max_pool3d,
)

__all__ += ["avg_pool3d", "conv3d", "conv3d_transpose", "max_pool3d"]

# ---- connectionist temporal classification (runtime/ops/ctc.py) ----
from hetbed.runtime.ops.ctc import (  # noqa: E402
    ctc_beam_search_decoder,
    ctc_greedy_decoder,
    ctc_loss,
)

__all__ += ["ctc_beam_search_decoder", "ctc_greedy_decoder", "ctc_loss"]
