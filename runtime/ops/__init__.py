"""Op modules. Importing this package registers every op."""

from . import (  # noqa: F401
    array,
    collective,
    complex_ops,
    cond,
    control,
    conv_transpose,
    data_flow,
    debug,  # WP4
    dynamic,
    iterator,
    linalg,
    lookup,
    loop,
    manip,
    math,
    math_extra,
    nn,
    nn_extra,
    py_func,  # WP4
    random,
    readers,
    records,
    sampled,
    scatter,
    segments,
    shape_ops,
    signal_ops,
    spectral,
    state,
    strings,
    summary,
    transfer,
)

# ---- WP7 ----
# isort: split
from . import (  # noqa: F401, E402
    ctc,
    depthwise,
    edit_distance,
    gather_tree,
    hashing,
    image_transform,
    sets,
    sparse_extra,
    strings_extra,
)

# ---- image files ----
# isort: split
from . import image_boxes, image_codecs  # noqa: F401, E402

# ---- audio files and speech features ----
# isort: split
from . import audio  # noqa: F401, E402

# ---- sparse gradients across replicas ----
# isort: split
from . import sparse, sparse_accumulator  # noqa: F401, E402

# ---- k-means (contrib.factorization) ----
# isort: split
from . import clustering  # noqa: F401, E402
