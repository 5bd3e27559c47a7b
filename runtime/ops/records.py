"""TFRecord files and ``tf.train.Example`` (TF1's record format), with protobuf (a dependency of
tensorboard, which hetbed requires).

* ``Example`` and its parts (``Features``, ``Feature``, ``BytesList``, ``FloatList``,
  ``Int64List``) are protobuf message classes built here from the schema TensorFlow publishes
  (package ``tensorflow``, the same field numbers), so their bytes are TensorFlow's.
* A TFRecord file is a sequence of records: the length (uint64, little-endian), its masked
  CRC-32C, the data, the data's masked CRC-32C. ``TFRecordWriter`` writes them;
  ``TFRecordDataset`` and ``tf_record_iterator`` read them and fail with DataLossError naming the
  file and offset on a bad checksum or a truncated record.
* ``parse_single_example`` / ``parse_example`` (ops ``ParseExample``, CPU) decode serialized
  Examples into dense tensors (``FixedLenFeature``, with ``default_value``) and SparseTensors
  (``VarLenFeature``).
"""

from __future__ import annotations

import struct
from collections import namedtuple
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import DataLossError, InvalidArgumentError
from ..graph import TensorShape
from ..registry import Cost, apply_op, convert_to_tensor, defop

# ---- the Example protos --------------------------------------------------------------------


def _build_messages() -> dict:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(
        name="hetbed/example.proto", package="tensorflow", syntax="proto3"
    )
    FD = descriptor_pb2.FieldDescriptorProto  # noqa: N806

    def msg(name: str, fields: list, nested: list | None = None, oneofs: list | None = None):
        m = f.message_type.add(name=name)
        for o in oneofs or []:
            m.oneof_decl.add(name=o)
        for fname, number, ftype, label, type_name, oneof in fields:
            fd = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                fd.type_name = type_name
            if oneof is not None:
                fd.oneof_index = oneof
            if ftype in (FD.TYPE_FLOAT, FD.TYPE_INT64) and label == FD.LABEL_REPEATED:
                fd.options.packed = True
        for n in nested or []:
            m.nested_type.add().CopyFrom(n)
        return m

    rep, opt = FD.LABEL_REPEATED, FD.LABEL_OPTIONAL
    msg("BytesList", [("value", 1, FD.TYPE_BYTES, rep, None, None)])
    msg("FloatList", [("value", 1, FD.TYPE_FLOAT, rep, None, None)])
    msg("Int64List", [("value", 1, FD.TYPE_INT64, rep, None, None)])
    msg(
        "Feature",
        [
            ("bytes_list", 1, FD.TYPE_MESSAGE, opt, ".tensorflow.BytesList", 0),
            ("float_list", 2, FD.TYPE_MESSAGE, opt, ".tensorflow.FloatList", 0),
            ("int64_list", 3, FD.TYPE_MESSAGE, opt, ".tensorflow.Int64List", 0),
        ],
        oneofs=["kind"],
    )
    entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=FD.TYPE_STRING, label=opt)
    entry.field.add(
        name="value", number=2, type=FD.TYPE_MESSAGE, label=opt, type_name=".tensorflow.Feature"
    )
    msg(
        "Features",
        [("feature", 1, FD.TYPE_MESSAGE, rep, ".tensorflow.Features.FeatureEntry", None)],
        nested=[entry],
    )
    msg("Example", [("features", 1, FD.TYPE_MESSAGE, opt, ".tensorflow.Features", None)])
    # WP7: SequenceExample (context features and feature lists of frames), TF's schema
    msg("FeatureList", [("feature", 1, FD.TYPE_MESSAGE, rep, ".tensorflow.Feature", None)])
    fl_entry = descriptor_pb2.DescriptorProto(name="FeatureListEntry")
    fl_entry.options.map_entry = True
    fl_entry.field.add(name="key", number=1, type=FD.TYPE_STRING, label=opt)
    fl_entry.field.add(
        name="value", number=2, type=FD.TYPE_MESSAGE, label=opt, type_name=".tensorflow.FeatureList"
    )
    msg(
        "FeatureLists",
        [
            (
                "feature_list",
                1,
                FD.TYPE_MESSAGE,
                rep,
                ".tensorflow.FeatureLists.FeatureListEntry",
                None,
            )
        ],
        nested=[fl_entry],
    )
    msg(
        "SequenceExample",
        [
            ("context", 1, FD.TYPE_MESSAGE, opt, ".tensorflow.Features", None),
            ("feature_lists", 2, FD.TYPE_MESSAGE, opt, ".tensorflow.FeatureLists", None),
        ],
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    names = ("BytesList", "FloatList", "Int64List", "Feature", "Features", "Example")
    names += ("FeatureList", "FeatureLists", "SequenceExample")  # WP7
    return {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.{n}"))
        for n in names
    }


_MESSAGES = _build_messages()
BytesList = _MESSAGES["BytesList"]
FloatList = _MESSAGES["FloatList"]
Int64List = _MESSAGES["Int64List"]
Feature = _MESSAGES["Feature"]
Features = _MESSAGES["Features"]
Example = _MESSAGES["Example"]


# ---- TFRecord files ------------------------------------------------------------------------


def _masked_crc(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return masked_crc32c(data)


class TFRecordWriter:
    """Writes records (bytes, e.g. ``example.SerializeToString()``) to a TFRecord file;
    a context manager; ``close()`` flushes."""

    def __init__(self, path: Any, options: Any = None):
        if options not in (None, "", 0) and str(
            getattr(options, "compression_type", options)
        ) not in ("", "0", "None"):
            raise ValueError("TFRecordWriter: compressed records are not supported")
        self.path = path
        self._f = open(path, "wb")  # noqa: SIM115 - closed by close()

    def write(self, record: bytes) -> None:
        data = bytes(record)
        head = struct.pack("<Q", len(data))
        self._f.write(head + struct.pack("<I", _masked_crc(head)) + data)
        self._f.write(struct.pack("<I", _masked_crc(data)))

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def tfrecords(data: bytes, path: Any) -> Any:
    """(offset, record) for each record of a TFRecord file's bytes, checked (DataLossError
    naming the file and offset)."""
    offset = 0
    while offset < len(data):
        head = data[offset : offset + 12]
        if len(head) < 12:
            raise DataLossError(f"{path}: truncated record header at offset {offset}")
        (n,) = struct.unpack("<Q", head[:8])
        if struct.unpack("<I", head[8:])[0] != _masked_crc(head[:8]):
            raise DataLossError(f"{path}: corrupted record length at offset {offset}")
        body = data[offset + 12 : offset + 16 + n]
        if len(body) < n + 4:
            raise DataLossError(f"{path}: truncated record at offset {offset}")
        rec = body[:n]
        if struct.unpack("<I", body[n:])[0] != _masked_crc(rec):
            raise DataLossError(f"{path}: corrupted record data at offset {offset}")
        yield offset, rec
        offset += 16 + n


def tf_record_iterator(path: Any, options: Any = None) -> Any:
    """The records of a TFRecord file, checked (DataLossError naming the file and offset)."""
    with open(path, "rb") as f:
        data = f.read()
    for _, rec in tfrecords(data, path):
        yield rec


# ---- parsing -------------------------------------------------------------------------------

FixedLenFeature = namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])
FixedLenFeature.__new__.__defaults__ = (None,)
VarLenFeature = namedtuple("VarLenFeature", ["dtype"])


def _values(feature: Any, dtype: _dt.DType, key: str, where: str) -> list:
    kind = feature.WhichOneof("kind")
    want = "bytes_list" if dtype.is_string else "float_list" if dtype.is_floating else "int64_list"
    if kind is None:
        return []
    if kind != want:
        raise InvalidArgumentError(
            f"{where}: feature {key!r} is a {kind}, the spec wants {dtype.name}"
        )
    return list(getattr(feature, kind).value)


def _no_cost(op: Any, ins: list, outs: list) -> Cost:
    return Cost()


ParseExample = defop("ParseExample", differentiable=False, cost=_no_cost)


@ParseExample.shape
def _parse_shape(op):
    single = op.attrs["single"]
    lead = [] if single else [op.inputs[0].shape.dims[0] if op.inputs[0].shape.dims else None]
    out = []
    for spec in op.attrs["specs"]:
        kind, dtype = spec[0], _dt.as_dtype(spec[2])
        if kind == "fixed":
            out.append((TensorShape([*lead, *spec[3]]), dtype))
        else:  # indices, values, dense_shape of a sparse feature
            rank = 1 if single else 2
            out += [
                (TensorShape([None, rank]), _dt.int64),
                (TensorShape([None]), dtype),
                (TensorShape([rank]), _dt.int64),
            ]
    return out


@ParseExample.kernel("cpu")
def _parse(ctx, serialized, *defaults):
    single = ctx.attrs["single"]
    records = (
        [serialized.item()] if single else list(np.asarray(serialized, dtype=object).reshape(-1))
    )
    where = f"ParseExample {ctx.op.name!r}"
    parsed = []
    for i, rec in enumerate(records):
        try:
            parsed.append(Example.FromString(bytes(rec)).features.feature)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise InvalidArgumentError(
                f"{where}: record {i} is not a tf.train.Example ({e})", ctx.op
            ) from None
    return _features_out(ctx, parsed, ctx.attrs["specs"], iter(defaults), single, where)


def _features_out(ctx: Any, parsed: list, specs: Any, d: Any, single: bool, where: str) -> Any:
    """The outputs for ``specs`` (fixed: a dense array; var: indices, values, dense_shape) from
    the feature maps ``parsed`` (one per record); ``d`` yields the default values in order."""
    out: list = []
    for spec in specs:
        kind, key, dname = spec[0], spec[1], spec[2]
        dtype = _dt.as_dtype(dname)
        npt = object if dtype.is_string else dtype.np
        if kind == "fixed":
            shape = list(spec[3])
            default = next(d) if spec[4] else None
            n = int(np.prod(shape)) if shape else 1
            rows = []
            for i, feats in enumerate(parsed):
                vals = _values(feats[key], dtype, key, where) if key in feats else []
                if not vals:
                    if default is None:
                        raise InvalidArgumentError(
                            f"{where}: record {i} has no feature {key!r} and it has no default_value",
                            ctx.op,
                        )
                    arr = np.broadcast_to(np.asarray(default, dtype=npt), shape).copy()
                else:
                    if len(vals) != n:
                        raise InvalidArgumentError(
                            f"{where}: feature {key!r} of record {i} has {len(vals)} values, its shape {shape} wants {n}",
                            ctx.op,
                        )
                    arr = np.array(vals, dtype=npt).reshape(shape)
                rows.append(arr)
            out.append(
                rows[0] if single else np.stack(rows) if rows else np.zeros([0, *shape], npt)
            )
        else:
            idx, vals_all = [], []
            longest = 0
            for i, feats in enumerate(parsed):
                vals = _values(feats[key], dtype, key, where) if key in feats else []
                longest = max(longest, len(vals))
                for j, v in enumerate(vals):
                    idx.append([j] if single else [i, j])
                    vals_all.append(v)
            rank = 1 if single else 2
            out.append(np.array(idx, dtype=np.int64).reshape(-1, rank))
            out.append(np.array(vals_all, dtype=npt))
            out.append(np.array([longest] if single else [len(parsed), longest], dtype=np.int64))
    return out[0] if len(out) == 1 else tuple(out)


def _parse(serialized: Any, features: dict, single: bool, name: str | None) -> dict:
    from .strings import SparseTensor

    s = convert_to_tensor(serialized, dtype=_dt.string)
    specs, defaults = [], []
    for key in sorted(features):
        f = features[key]
        if isinstance(f, FixedLenFeature):
            dt = _dt.as_dtype(f.dtype)
            has = f.default_value is not None
            specs.append(("fixed", key, dt.name, tuple(int(x) for x in (f.shape or [])), has))
            if has:
                defaults.append(convert_to_tensor(f.default_value, dtype=dt))
        elif isinstance(f, VarLenFeature):
            specs.append(("var", key, _dt.as_dtype(f.dtype).name))
        else:
            raise TypeError(f"parse_example: feature {key!r} has an unsupported spec {f!r}")
    op = apply_op(
        "ParseExample",
        [s, *defaults],
        {"specs": tuple(specs), "single": single},
        name=name or "ParseExample",
    )
    outs = iter(op.outputs)
    result: dict = {}
    for spec in specs:
        if spec[0] == "fixed":
            result[spec[1]] = next(outs)
        else:
            result[spec[1]] = SparseTensor(next(outs), next(outs), next(outs))
    return result


def parse_single_example(
    serialized: Any, features: dict, name: str | None = None, example_names: Any = None
) -> dict:
    """One serialized Example (a string scalar) as a dict of tensors by ``features``."""
    return _parse(serialized, features, True, name)


def parse_example(
    serialized: Any, features: dict, name: str | None = None, example_names: Any = None
) -> dict:
    """A vector of serialized Examples as a dict of batched tensors by ``features``."""
    return _parse(serialized, features, False, name)


# ---- WP7: tf.train.SequenceExample and parse_single_sequence_example ---------------------------

FeatureList = _MESSAGES["FeatureList"]
FeatureLists = _MESSAGES["FeatureLists"]
SequenceExample = _MESSAGES["SequenceExample"]


class FixedLenSequenceFeature(
    namedtuple("FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])
):
    """A feature list of frames with ``shape`` each; parsed to a dense [frames, *shape] tensor.
    With ``allow_missing`` an absent list gives zero frames."""

    __slots__ = ()

    def __new__(cls, shape: Any, dtype: Any, allow_missing: bool = False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


ParseSingleSequenceExample = defop(
    "ParseSingleSequenceExample", differentiable=False, cost=_no_cost
)


@ParseSingleSequenceExample.shape
def _parse_seq_shape(op):
    ser = op.inputs[0]
    if ser.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"ParseSingleSequenceExample: serialized must be a scalar, got shape {ser.shape}"
        )
    out = []
    for spec in op.attrs["context"]:
        dtype = _dt.as_dtype(spec[2])
        if spec[0] == "fixed":
            out.append((TensorShape(list(spec[3])), dtype))
        else:
            out += [
                (TensorShape([None, 1]), _dt.int64),
                (TensorShape([None]), dtype),
                (TensorShape([1]), _dt.int64),
            ]
    for spec in op.attrs["sequence"]:
        dtype = _dt.as_dtype(spec[2])
        if spec[0] == "fixedseq":
            out.append((TensorShape([None, *spec[3]]), dtype))
        else:
            out += [
                (TensorShape([None, 2]), _dt.int64),
                (TensorShape([None]), dtype),
                (TensorShape([2]), _dt.int64),
            ]
    return out


def _expected_seq_shapes(op, in_shapes):
    """Shape-only simulation: one frame per feature list, one value per sparse feature."""
    out = []
    for spec in op.attrs["context"]:
        out += [tuple(spec[3])] if spec[0] == "fixed" else [(1, 1), (1,), (1,)]
    for spec in op.attrs["sequence"]:
        out += [(1, *spec[3])] if spec[0] == "fixedseq" else [(1, 2), (1,), (2,)]
    return out


ParseSingleSequenceExample.expected_shapes = _expected_seq_shapes


@ParseSingleSequenceExample.kernel("cpu")
def _parse_seq(ctx, serialized, *defaults):
    where = f"ParseSingleSequenceExample {ctx.op.name!r}"
    try:
        ex = SequenceExample.FromString(bytes(serialized.item()))
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise InvalidArgumentError(
            f"{where}: the record is not a tf.train.SequenceExample ({e})", ctx.op
        ) from None
    out = list(_as_list(_features_out(ctx, [ex.context.feature], ctx.attrs["context"],
                                      iter(defaults), True, where)))  # fmt: skip
    lists = ex.feature_lists.feature_list
    for spec in ctx.attrs["sequence"]:
        kind, key, dtype = spec[0], spec[1], _dt.as_dtype(spec[2])
        npt = object if dtype.is_string else dtype.np
        frames = list(lists[key].feature) if key in lists else None
        if kind == "fixedseq":
            shape = list(spec[3])
            if frames is None and not spec[4]:
                raise InvalidArgumentError(
                    f"{where}: feature list {key!r} is missing (use allow_missing=True)", ctx.op
                )
            n = int(np.prod(shape)) if shape else 1
            rows = []
            for i, fr in enumerate(frames or []):
                vals = _values(fr, dtype, key, where)
                if len(vals) != n:
                    raise InvalidArgumentError(
                        f"{where}: frame {i} of feature list {key!r} has {len(vals)} values, "
                        f"its shape {shape} wants {n}",
                        ctx.op,
                    )
                rows.append(np.array(vals, dtype=npt).reshape(shape))
            out.append(np.stack(rows) if rows else np.zeros([0, *shape], npt))
        else:
            idx, vals_all, longest = [], [], 0
            for i, fr in enumerate(frames or []):
                vals = _values(fr, dtype, key, where)
                longest = max(longest, len(vals))
                idx += [[i, j] for j in range(len(vals))]
                vals_all += vals
            out.append(np.array(idx, dtype=np.int64).reshape(-1, 2))
            out.append(np.array(vals_all, dtype=npt))
            out.append(np.array([len(frames or []), longest], dtype=np.int64))
    return out[0] if len(out) == 1 else tuple(out)


def _as_list(x: Any) -> Any:
    return x if isinstance(x, tuple) else [] if x is None else [x]


def parse_single_sequence_example(
    serialized: Any,
    context_features: dict | None = None,
    sequence_features: dict | None = None,
    example_name: Any = None,
    name: str | None = None,
) -> tuple:
    """One serialized SequenceExample as ``(context, sequence)`` dicts of tensors: context
    features as in ``parse_single_example``; ``FixedLenSequenceFeature`` lists as dense
    [frames, *shape] tensors, ``VarLenFeature`` lists as SparseTensors [frames, longest]."""
    from .strings import SparseTensor

    s = convert_to_tensor(serialized, dtype=_dt.string)
    context_features, sequence_features = context_features or {}, sequence_features or {}
    ctx_specs, defaults = [], []
    for key in sorted(context_features):
        f = context_features[key]
        if isinstance(f, FixedLenFeature):
            dt = _dt.as_dtype(f.dtype)
            has = f.default_value is not None
            ctx_specs.append(("fixed", key, dt.name, tuple(int(x) for x in (f.shape or [])), has))
            if has:
                defaults.append(convert_to_tensor(f.default_value, dtype=dt))
        elif isinstance(f, VarLenFeature):
            ctx_specs.append(("var", key, _dt.as_dtype(f.dtype).name))
        else:
            raise TypeError(
                f"parse_single_sequence_example: context feature {key!r} has an unsupported "
                f"spec {f!r}"
            )
    seq_specs = []
    for key in sorted(sequence_features):
        f = sequence_features[key]
        if isinstance(f, FixedLenSequenceFeature):
            shape = tuple(int(x) for x in (f.shape or []))
            seq_specs.append(
                ("fixedseq", key, _dt.as_dtype(f.dtype).name, shape, bool(f.allow_missing))
            )
        elif isinstance(f, VarLenFeature):
            seq_specs.append(("var", key, _dt.as_dtype(f.dtype).name))
        else:
            raise TypeError(
                f"parse_single_sequence_example: sequence feature {key!r} has an unsupported "
                f"spec {f!r} (FixedLenSequenceFeature or VarLenFeature)"
            )
    op = apply_op(
        "ParseSingleSequenceExample",
        [s, *defaults],
        {"context": tuple(ctx_specs), "sequence": tuple(seq_specs)},
        name=name or "ParseSingleSequenceExample",
    )
    outs = iter(op.outputs)
    result: tuple = ({}, {})
    for part, specs in ((0, ctx_specs), (1, seq_specs)):
        for spec in specs:
            if spec[0] in ("fixed", "fixedseq"):
                result[part][spec[1]] = next(outs)
            else:
                result[part][spec[1]] = SparseTensor(next(outs), next(outs), next(outs))
    return result
