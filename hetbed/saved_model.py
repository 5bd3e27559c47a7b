"""``tf.saved_model`` (TF1's): export a trained graph with its variables and signatures, and load
it into another session.

A SavedModel directory holds ``saved_model.pb`` (TensorFlow's ``SavedModel`` message: one
``MetaGraphDef`` per tag set, with its tags, its ``SignatureDef`` map and, in collection
``hetbed_graph``, hetbed's graph document of the graph, collections included, which is what
``loader.load`` rebuilds; no pickle) and ``variables/variables`` (hetbed's checkpoint of the
variables, written once, by the first meta graph). ``loader.load`` rebuilds the meta graph whose
tags match into the session's graph, restores the variables, runs the main op (or legacy init
op) given at export, and returns the ``MetaGraphDef``, whose ``signature_def[...]`` name the
tensors to feed and fetch. TensorFlow's SavedModels cannot be loaded (their graphs hold
TensorFlow's ops) and TensorFlow cannot load hetbed's.
"""

from __future__ import annotations

import json
import os
import types
from typing import Any

from hetbed.devices.fileio import atomic_write
from hetbed.runtime.errors import NotFoundError
from hetbed.runtime.graph import GraphKeys, Operation, Tensor, get_default_graph

SAVED_MODEL_FILENAME_PB = "saved_model.pb"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
_GRAPH_KEY = "hetbed_graph"
_MAIN_OP_KEY = "saved_model_main_op"
_LEGACY_INIT_OP_KEY = "legacy_init_op"

tag_constants = types.SimpleNamespace(SERVING="serve", TRAINING="train", GPU="gpu", TPU="tpu")
signature_constants = types.SimpleNamespace(
    DEFAULT_SERVING_SIGNATURE_DEF_KEY="serving_default",
    PREDICT_METHOD_NAME="tensorflow/serving/predict",
    PREDICT_INPUTS="inputs",
    PREDICT_OUTPUTS="outputs",
    CLASSIFY_METHOD_NAME="tensorflow/serving/classify",
    CLASSIFY_INPUTS="inputs",
    CLASSIFY_OUTPUT_CLASSES="classes",
    CLASSIFY_OUTPUT_SCORES="scores",
    REGRESS_METHOD_NAME="tensorflow/serving/regress",
    REGRESS_INPUTS="inputs",
    REGRESS_OUTPUTS="outputs",
)

# TensorFlow's DataType enum (types.proto) for the dtypes hetbed has
_DT_ENUM = {
    "float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7,
    "int64": 9, "bool": 10, "uint16": 17, "float16": 19, "uint32": 22, "uint64": 23,
}  # fmt: skip


def _pb() -> Any:
    from tensorboard.compat.proto import meta_graph_pb2

    return meta_graph_pb2


# ---- signatures ---------------------------------------------------------------------------


def build_tensor_info(tensor: Any) -> Any:
    """TF1's ``saved_model.utils.build_tensor_info``: a ``TensorInfo`` naming ``tensor`` with its
    dtype and static shape."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"build_tensor_info: expected a Tensor, got {type(tensor).__name__}")
    info = _pb().TensorInfo(name=tensor.name, dtype=_DT_ENUM.get(tensor.dtype.base_dtype.name, 0))
    if tensor.shape.dims is None:
        info.tensor_shape.unknown_rank = True
    else:
        for d in tensor.shape.dims:
            info.tensor_shape.dim.add(size=-1 if d is None else int(d))
    return info


def get_tensor_from_tensor_info(tensor_info: Any, graph: Any = None, import_scope: Any = None):
    """The tensor of ``graph`` (default: the default graph) a ``TensorInfo`` names."""
    g = graph if graph is not None else get_default_graph()
    name = tensor_info.name
    if import_scope:
        name = f"{import_scope}/{name}"
    return g.get_tensor_by_name(name)


def build_signature_def(inputs: Any = None, outputs: Any = None, method_name: Any = None) -> Any:
    """A ``SignatureDef`` of ``inputs`` and ``outputs`` (dicts of key to ``TensorInfo``)."""
    sig = _pb().SignatureDef()
    for key, info in (inputs or {}).items():
        sig.inputs[key].CopyFrom(info)
    for key, info in (outputs or {}).items():
        sig.outputs[key].CopyFrom(info)
    if method_name is not None:
        sig.method_name = method_name
    return sig


def predict_signature_def(inputs: dict, outputs: dict) -> Any:
    """A predict ``SignatureDef`` of ``inputs`` and ``outputs`` (dicts of key to tensor)."""
    if not inputs or not outputs:
        raise ValueError("predict_signature_def: inputs and outputs must not be empty")
    return build_signature_def(
        {k: build_tensor_info(t) for k, t in inputs.items()},
        {k: build_tensor_info(t) for k, t in outputs.items()},
        signature_constants.PREDICT_METHOD_NAME,
    )


def classification_signature_def(examples: Any, classes: Any, scores: Any) -> Any:
    """A classify ``SignatureDef``: a string ``examples`` input, ``classes`` and/or ``scores``."""
    if examples is None or (classes is None and scores is None):
        raise ValueError("classification_signature_def: examples and classes or scores needed")
    outs = {}
    if classes is not None:
        outs[signature_constants.CLASSIFY_OUTPUT_CLASSES] = build_tensor_info(classes)
    if scores is not None:
        outs[signature_constants.CLASSIFY_OUTPUT_SCORES] = build_tensor_info(scores)
    return build_signature_def(
        {signature_constants.CLASSIFY_INPUTS: build_tensor_info(examples)},
        outs,
        signature_constants.CLASSIFY_METHOD_NAME,
    )


def regression_signature_def(examples: Any, predictions: Any) -> Any:
    """A regress ``SignatureDef``: a string ``examples`` input and ``predictions``."""
    return build_signature_def(
        {signature_constants.REGRESS_INPUTS: build_tensor_info(examples)},
        {signature_constants.REGRESS_OUTPUTS: build_tensor_info(predictions)},
        signature_constants.REGRESS_METHOD_NAME,
    )


def is_valid_signature(signature_def: Any) -> bool:
    """Whether ``signature_def`` has a method name, inputs and outputs."""
    return bool(signature_def.method_name and signature_def.inputs and signature_def.outputs)


# ---- the SavedModel message (field 1: schema version, field 2: repeated MetaGraphDef) ---------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _encode_saved_model(metas: list) -> bytes:
    out = bytearray(b"\x08" + _varint(1))
    for m in metas:
        body = m.SerializeToString()
        out += b"\x12" + _varint(len(body)) + body
    return bytes(out)


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def _decode_saved_model(data: bytes, path: str) -> list:
    from google.protobuf.message import DecodeError

    metas, i = [], 0
    try:
        while i < len(data):
            key, i = _read_varint(data, i)
            field, wire = key >> 3, key & 7
            if wire == 0:
                _, i = _read_varint(data, i)
            elif wire == 2:
                n, i = _read_varint(data, i)
                if i + n > len(data):
                    raise ValueError("truncated field")
                if field == 2:
                    m = _pb().MetaGraphDef()
                    m.ParseFromString(data[i : i + n])
                    metas.append(m)
                i += n
            else:
                raise ValueError(f"unexpected wire type {wire}")
    except (ValueError, DecodeError) as e:  # DecodeError is a ValueError in some protobufs
        from hetbed.runtime.errors import DataLossError

        raise DataLossError(f"{path}: not a SavedModel file ({e})") from None
    return metas


# ---- builder ------------------------------------------------------------------------------


class SavedModelBuilder:
    """TF1's ``saved_model.builder.SavedModelBuilder``: ``add_meta_graph_and_variables`` once,
    ``add_meta_graph`` for other tag sets of the same graph, then ``save``."""

    def __init__(self, export_dir: str):
        self._dir = os.fsdecode(export_dir)  # TF1 programs pass tf.compat.as_bytes(path)
        if os.path.exists(self._dir) and (not os.path.isdir(self._dir) or os.listdir(self._dir)):
            raise AssertionError(
                f"Export directory already exists, and isn't empty: {self._dir!r}. Please choose "
                "a different export directory, or delete all the contents of the specified "
                "directory."
            )
        self._metas: list = []
        self._has_variables = False

    def _meta(self, graph: Any, tags: Any, signature_def_map: Any, main_op: Any, legacy: Any):
        from hetbed.runtime.serialize import graph_to_dict

        if isinstance(tags, str) or not tags:
            raise TypeError(f"SavedModelBuilder: tags must be a non-empty list, got {tags!r}")
        for t in self._metas:
            if set(t.meta_info_def.tags) == set(tags):
                raise AssertionError(f"SavedModelBuilder: tag set {sorted(tags)} added twice")
        m = _pb().MetaGraphDef()
        m.meta_info_def.tags.extend(tags)
        m.meta_info_def.meta_graph_version = "hetbed"
        for key, sig in (signature_def_map or {}).items():
            if not is_valid_signature(sig):
                raise AttributeError(
                    f"SavedModelBuilder: signature {key!r} needs a method name, inputs and outputs"
                )
            m.signature_def[key].CopyFrom(sig)
        doc = json.dumps(graph_to_dict(graph), separators=(",", ":")).encode()
        m.collection_def[_GRAPH_KEY].bytes_list.value.append(doc)
        for key, op in ((_MAIN_OP_KEY, main_op), (_LEGACY_INIT_OP_KEY, legacy)):
            if op is not None:
                if not isinstance(op, (Operation, Tensor)):
                    raise TypeError(f"SavedModelBuilder: {key} must be an op, got {op!r}")
                name = op.name if isinstance(op, Operation) else op.op.name
                m.collection_def[key].node_list.value.append(name)
        self._metas.append(m)

    def add_meta_graph_and_variables(
        self,
        sess: Any,
        tags: Any,
        signature_def_map: Any = None,
        assets_collection: Any = None,
        legacy_init_op: Any = None,
        clear_devices: bool = False,
        main_op: Any = None,
        strip_default_attrs: bool = False,
        saver: Any = None,
        train_op: Any = None,
    ) -> None:
        """Record ``sess``'s graph under ``tags`` and write its variables' current values."""
        from hetbed.runtime.train.saver import Saver

        if self._has_variables:
            raise AssertionError(
                "Graph state including variables and assets has already been saved; use "
                "add_meta_graph for more tag sets"
            )
        g = sess.graph
        self._meta(g, tags, signature_def_map, main_op, legacy_init_op)
        var_dir = os.path.join(self._dir, VARIABLES_DIRECTORY)
        os.makedirs(var_dir, exist_ok=True)
        if saver is None and g.get_collection(GraphKeys.GLOBAL_VARIABLES):
            saver = Saver(g.get_collection(GraphKeys.GLOBAL_VARIABLES))
        if saver is not None:
            saver.save(
                sess,
                os.path.join(var_dir, VARIABLES_FILENAME),
                write_meta_graph=False,
                write_state=False,
            )
        self._has_variables = True

    def add_meta_graph(
        self,
        tags: Any,
        signature_def_map: Any = None,
        assets_collection: Any = None,
        legacy_init_op: Any = None,
        clear_devices: bool = False,
        main_op: Any = None,
        strip_default_attrs: bool = False,
        saver: Any = None,
    ) -> None:
        """Record the default graph under another tag set (variables saved already)."""
        if not self._has_variables:
            raise AssertionError(
                "Graph state including variables and assets has not been saved yet. Please "
                "invoke `add_meta_graph_and_variables()` first."
            )
        self._meta(get_default_graph(), tags, signature_def_map, main_op, legacy_init_op)

    def save(self, as_text: bool = False) -> bytes:
        """Write ``saved_model.pb`` and return its path (as bytes, as TF1's)."""
        if as_text:
            raise ValueError("SavedModelBuilder.save: as_text is not supported (binary only)")
        if self._dir:  # "" is the current directory, as in TF
            os.makedirs(self._dir, exist_ok=True)
        path = os.path.join(self._dir, SAVED_MODEL_FILENAME_PB)
        atomic_write(path, _encode_saved_model(self._metas))
        return path.encode()


def simple_save(
    session: Any, export_dir: str, inputs: dict, outputs: dict, legacy_init_op: Any = None
) -> None:
    """TF1's ``saved_model.simple_save``: the session's graph and variables under the
    ``serve`` tag with one predict signature, ``serving_default``, of ``inputs`` and
    ``outputs`` (dicts of key to tensor)."""
    b = SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(
        session,
        [tag_constants.SERVING],
        {
            signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY: predict_signature_def(
                inputs, outputs
            )
        },
        legacy_init_op=legacy_init_op,
        main_op=legacy_init_op,
    )
    b.save()


# ---- loader -------------------------------------------------------------------------------


def maybe_saved_model_directory(export_dir: str) -> bool:
    """Whether ``export_dir`` holds a ``saved_model.pb``."""
    return os.path.isfile(os.path.join(os.fsdecode(export_dir), SAVED_MODEL_FILENAME_PB))


contains_saved_model = maybe_saved_model_directory


def load(
    sess: Any, tags: Any, export_dir: str, import_scope: Any = None, **saver_kwargs: Any
) -> Any:
    """TF1's ``saved_model.loader.load``: rebuild the meta graph saved under exactly ``tags``
    into ``sess``'s graph (which must not hold ops of the same names), restore its variables,
    run its main op, and return its ``MetaGraphDef``."""
    from hetbed.runtime.serialize import graph_from_dict, read_graph_document
    from hetbed.runtime.train.saver import Saver

    if import_scope:
        raise ValueError("saved_model.loader.load: import_scope is not supported")
    export_dir = os.fsdecode(export_dir)
    path = os.path.join(export_dir, SAVED_MODEL_FILENAME_PB)
    if not os.path.isfile(path):
        raise OSError(
            f"SavedModel file does not exist at: {export_dir}/{{{SAVED_MODEL_FILENAME_PB}}}"
        )
    with open(path, "rb") as f:
        metas = _decode_saved_model(f.read(), path)
    want = set([tags] if isinstance(tags, str) else tags)
    found = [m for m in metas if set(m.meta_info_def.tags) == want]
    if not found:
        have = [sorted(m.meta_info_def.tags) for m in metas]
        raise RuntimeError(
            f"MetaGraphDef associated with tags {sorted(want)} could not be found in SavedModel "
            f"{export_dir!r}; it has the tag sets {have}"
        )
    meta = found[0]
    coll = meta.collection_def
    if _GRAPH_KEY not in coll:
        raise NotFoundError(
            f"{path}: the meta graph for tags {sorted(want)} holds no hetbed graph (a SavedModel "
            "TensorFlow wrote cannot be loaded)"
        )
    g = sess.graph
    before = set(g.get_collection(GraphKeys.GLOBAL_VARIABLES))
    with g.as_default():
        graph_from_dict(read_graph_document(coll[_GRAPH_KEY].bytes_list.value[0]), into=g)
        new = [v for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES) if v not in before]
        if new:
            prefix = os.path.join(export_dir, VARIABLES_DIRECTORY, VARIABLES_FILENAME)
            Saver(new, **saver_kwargs).restore(sess, prefix)
        for key in (_MAIN_OP_KEY, _LEGACY_INIT_OP_KEY):
            if key in coll:
                sess.run(g.get_operation_by_name(coll[key].node_list.value[0]))
                break
    return meta


def _module(name: str, doc: str, **names: Any) -> types.ModuleType:
    """A namespace of this module's names, importable as ``hetbed.saved_model.<name>``."""
    import sys

    m = types.ModuleType(f"{__name__}.{name}", doc)
    m.__dict__.update(names)
    sys.modules[m.__name__] = m
    return m


loader = _module(
    "loader",
    "tf.saved_model.loader",
    load=load,
    maybe_saved_model_directory=maybe_saved_model_directory,
)
builder = _module("builder", "tf.saved_model.builder", SavedModelBuilder=SavedModelBuilder)
utils = _module(
    "utils",
    "tf.saved_model.utils",
    build_tensor_info=build_tensor_info,
    get_tensor_from_tensor_info=get_tensor_from_tensor_info,
)
signature_def_utils = _module(
    "signature_def_utils",
    "tf.saved_model.signature_def_utils",
    build_signature_def=build_signature_def,
    predict_signature_def=predict_signature_def,
    classification_signature_def=classification_signature_def,
    regression_signature_def=regression_signature_def,
    is_valid_signature=is_valid_signature,
)
tag_constants = _module("tag_constants", "tf.saved_model.tag_constants", **vars(tag_constants))
signature_constants = _module(
    "signature_constants", "tf.saved_model.signature_constants", **vars(signature_constants)
)
Builder = SavedModelBuilder

__all__ = [
    "Builder",
    "build_signature_def",
    "build_tensor_info",
    "builder",
    "classification_signature_def",
    "contains_saved_model",
    "get_tensor_from_tensor_info",
    "is_valid_signature",
    "load",
    "loader",
    "maybe_saved_model_directory",
    "predict_signature_def",
    "regression_signature_def",
    "signature_constants",
    "signature_def_utils",
    "simple_save",
    "tag_constants",
    "utils",
]
