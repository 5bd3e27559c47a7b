"""Candidate sampling: a log-uniform (Zipfian) candidate sampler and the sampled softmax loss.

``sampled_softmax_loss`` follows TF1's ``tf.nn.sampled_softmax_loss``: one set of
``num_sampled`` candidates per call (shared by the batch) is drawn from a log-uniform
distribution over ``[0, num_classes)``, the rows of ``weights`` and ``biases`` for the true and
the sampled classes are gathered, logits are corrected by ``log Q`` (the expected count of each
class) and a softmax cross entropy over ``num_true + num_sampled`` columns is returned. Because the
rows are gathered, the gradient w.r.t. ``weights`` is an IndexedSlices: a large softmax never
becomes a dense update.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, UnimplementedError
from ..graph import Tensor, TensorShape
from ..registry import Cost, apply, convert_to_tensor, defop, nbytes

# ---- LogUniformCandidateSampler --------------------------------------------------------------
# outputs: sampled_candidates int64 [num_sampled], true_expected_count float32 [batch, num_true],
#          sampled_expected_count float32 [num_sampled]

LogUniformCandidateSampler = defop(
    "LogUniformCandidateSampler", stateful=True, differentiable=False
)


@LogUniformCandidateSampler.shape
def _sampler_shape(op):
    (true_classes,) = op.inputs
    at = op.attrs
    if true_classes.dtype != _dt.int64:
        raise InvalidArgumentError(
            f"LogUniformCandidateSampler: true_classes must be int64, got {true_classes.dtype.name}"
        )
    s = true_classes.shape
    if s.ndims is not None and s.ndims != 2:
        raise InvalidArgumentError(
            f"LogUniformCandidateSampler: true_classes must be [batch, num_true], got shape {s}"
        )
    if s.ndims == 2 and s[1] is not None and s[1] != at["num_true"]:
        raise InvalidArgumentError(
            f"LogUniformCandidateSampler: true_classes shape {s} does not have "
            f"num_true={at['num_true']} columns"
        )
    batch = s[0] if s.ndims == 2 else None
    k = at["num_sampled"]
    return [
        (TensorShape([k]), _dt.int64),
        (TensorShape([batch, at["num_true"]]), _dt.float32),
        (TensorShape([k]), _dt.float32),
    ]


def log_uniform_prob(classes: np.ndarray, range_max: int) -> np.ndarray:
    """P(class) = (log(class + 2) - log(class + 1)) / log(range_max + 1), in float64."""
    c = np.asarray(classes, dtype=np.float64)
    return np.log1p(1.0 / (c + 1.0)) / np.log(range_max + 1.0)


def _draw(rng: np.random.Generator, n: int, range_max: int) -> np.ndarray:
    """``n`` log-uniform classes as TF draws them: floor(exp(u * log(range_max + 1))) - 1."""
    v = np.floor(np.exp(rng.random(n) * np.log(range_max + 1.0))).astype(np.int64) - 1
    return v % range_max


def _sample(
    rng: np.random.Generator, k: int, unique: bool, range_max: int, draw: Any = None
) -> tuple:
    """(k candidates, number of draws it took); ``draw(rng, n)`` draws n classes (default:
    log-uniform over ``range_max``)."""
    draw = draw or (lambda r, n: _draw(r, n, range_max))
    if not unique:
        return draw(rng, k), k
    draws = np.empty(0, dtype=np.int64)
    while True:  # draw until k distinct classes; the draws before the k-th new one are the tries
        draws = np.concatenate([draws, draw(rng, max(2 * k, 64))])
        _, first = np.unique(draws, return_index=True)
        if first.size >= k:
            first.sort()
            return draws[first[:k]], int(first[k - 1]) + 1


def _expected_count(p: np.ndarray, k: int, tries: int) -> np.ndarray:
    """Expected times a class of probability p appears in the sample (TF's ExpectedCountHelper)."""
    if tries == k:
        return p * k
    return -np.expm1(tries * np.log1p(-p))


@LogUniformCandidateSampler.kernel("cpu", "gpu")
def _log_uniform_sampler(ctx, true_classes):
    at = ctx.attrs
    k, range_max = at["num_sampled"], at["range_max"]
    true_host = np.asarray(ctx.device.to_host(true_classes))
    sampled, tries = _sample(ctx.rng, k, at["unique"], range_max)
    true_count = _expected_count(log_uniform_prob(true_host, range_max), k, tries)
    sampled_count = _expected_count(log_uniform_prob(sampled, range_max), k, tries)
    to_dev = ctx.device.to_device
    return (
        to_dev(sampled),
        to_dev(true_count.astype(np.float32)),
        to_dev(sampled_count.astype(np.float32)),
    )


@LogUniformCandidateSampler.cost
def _sampler_cost(op, ins, outs):
    n = outs[0][0] if outs[0] else 0
    m = int(np.prod(outs[1])) if outs[1] else 0
    return Cost(
        float(30 * n + 10 * m),
        float(nbytes(ins[0], _dt.int64)),
        float(nbytes(outs[0], _dt.int64) + 4 * (n + m)),
    )


def log_uniform_candidate_sampler(
    true_classes: Any,
    num_true: int,
    num_sampled: int,
    unique: bool,
    range_max: int,
    seed: int | None = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Sample ``num_sampled`` classes of [0, range_max) with P(c) ∝ log((c + 2) / (c + 1)).

    Returns ``(sampled_candidates, true_expected_count, sampled_expected_count)`` as TF1 does;
    with ``unique`` the candidates are distinct (draws are repeated until they are) and the
    expected counts account for the number of draws it took. ``true_classes`` is an int64
    ``[batch, num_true]`` tensor. Raises InvalidArgumentError for ``unique`` with
    ``num_sampled > range_max`` or non-positive sizes.
    """
    num_true, num_sampled, range_max = int(num_true), int(num_sampled), int(range_max)
    if num_true < 1 or num_sampled < 1 or range_max < 1:
        raise InvalidArgumentError(
            f"log_uniform_candidate_sampler: num_true ({num_true}), num_sampled ({num_sampled}) "
            f"and range_max ({range_max}) must be positive"
        )
    if unique and num_sampled > range_max:
        raise InvalidArgumentError(
            f"log_uniform_candidate_sampler: cannot draw {num_sampled} unique candidates from "
            f"range_max={range_max} classes; pass unique=False or sample fewer"
        )
    attrs = {
        "num_true": num_true,
        "num_sampled": num_sampled,
        "unique": bool(unique),
        "range_max": range_max,
        "seed": seed,
    }
    t = convert_to_tensor(true_classes)
    if t.dtype != _dt.int64:
        from .array import cast

        t = cast(t, _dt.int64)
    out = apply("LogUniformCandidateSampler", [t], attrs, name or "LogUniformCandidateSampler")
    return tuple(out)


# ---- FixedUnigramCandidateSampler -------------------------------------------------------------

FixedUnigramCandidateSampler = defop(
    "FixedUnigramCandidateSampler", stateful=True, differentiable=False
)
FixedUnigramCandidateSampler.shape(_sampler_shape)
FixedUnigramCandidateSampler.cost(_sampler_cost)


@FixedUnigramCandidateSampler.kernel("cpu", "gpu")
def _fixed_unigram_sampler(ctx, true_classes):
    at = ctx.attrs
    k, range_max, p = at["num_sampled"], at["range_max"], at["probs"]
    true_host = np.asarray(ctx.device.to_host(true_classes))
    cdf = np.cumsum(p)

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return np.minimum(
            np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right"), range_max - 1
        )

    sampled, tries = _sample(ctx.rng, k, at["unique"], range_max, draw)
    true_count = _expected_count(p[np.clip(true_host, 0, range_max - 1)], k, tries)
    sampled_count = _expected_count(p[sampled], k, tries)
    to_dev = ctx.device.to_device
    return (
        to_dev(sampled.astype(np.int64)),
        to_dev(true_count.astype(np.float32)),
        to_dev(sampled_count.astype(np.float32)),
    )


def fixed_unigram_candidate_sampler(
    true_classes: Any,
    num_true: int,
    num_sampled: int,
    unique: bool,
    range_max: int,
    vocab_file: str = "",
    distortion: float = 1.0,
    num_reserved_ids: int = 0,
    num_shards: int = 1,
    shard: int = 0,
    unigrams: Any = (),
    seed: int | None = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """TF1's: sample ``num_sampled`` classes of [0, range_max) with P(c) ∝ count(c) ^
    ``distortion``, the counts from ``unigrams`` or ``vocab_file`` (a line per class, the count
    its last comma-separated field), after ``num_reserved_ids`` classes of count 0; returns
    ``(sampled_candidates, true_expected_count, sampled_expected_count)`` as
    ``log_uniform_candidate_sampler`` does. Sharded vocabularies are not supported."""
    num_true, num_sampled, range_max = int(num_true), int(num_sampled), int(range_max)
    fn = "fixed_unigram_candidate_sampler"
    if num_true < 1 or num_sampled < 1 or range_max < 1:
        raise InvalidArgumentError(f"{fn}: num_true, num_sampled and range_max must be positive")
    if int(num_shards) != 1 or int(shard) != 0:
        raise UnimplementedError(f"{fn}: num_shards/shard (a sharded vocabulary) are not supported")
    if vocab_file and len(unigrams):
        raise InvalidArgumentError(f"{fn}: give vocab_file or unigrams, not both")
    if vocab_file:
        with open(vocab_file, encoding="utf-8") as f:
            counts = [float(line.rsplit(",", 1)[-1]) for line in f if line.strip()]
    else:
        counts = [float(c) for c in unigrams]
    w = np.concatenate([np.zeros(int(num_reserved_ids)), np.asarray(counts, np.float64)])
    if w.size != range_max:
        raise InvalidArgumentError(
            f"{fn}: {int(num_reserved_ids)} reserved ids and {len(counts)} unigrams make "
            f"{w.size} classes; range_max is {range_max}"
        )
    if (w < 0).any() or not w.sum() > 0:
        raise InvalidArgumentError(f"{fn}: the unigram counts must be >= 0, some > 0")
    w = w ** float(distortion)
    w[: int(num_reserved_ids)] = 0.0
    probs = w / w.sum()
    if unique and num_sampled > int((probs > 0).sum()):
        raise InvalidArgumentError(
            f"{fn}: cannot draw {num_sampled} unique candidates from {int((probs > 0).sum())} "
            "classes of nonzero count"
        )
    attrs = {
        "num_true": num_true,
        "num_sampled": num_sampled,
        "unique": bool(unique),
        "range_max": range_max,
        "probs": probs,
        "seed": seed,
    }
    t = convert_to_tensor(true_classes)
    if t.dtype != _dt.int64:
        from .array import cast

        t = cast(t, _dt.int64)
    out = apply("FixedUnigramCandidateSampler", [t], attrs, name or fn)
    return tuple(out)


# ---- sampled logits and the sampled softmax loss ---------------------------------------------


def _single(fn: str, params: Any) -> Any:
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise UnimplementedError(
                f"{fn}: sharded weights ({len(params)} shards) are not supported; pass one "
                "variable (a replica_device_setter still places it on a PS task)"
            )
        return params[0]
    return params


def compute_sampled_logits(
    weights: Any,
    biases: Any,
    labels: Any,
    inputs: Any,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values: Any = None,
    subtract_log_q: bool = True,
    remove_accidental_hits: bool = False,
    seed: int | None = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """(logits, labels) of shape [batch, num_true + num_sampled] for a sampled softmax.

    ``weights`` is ``[num_classes, dim]`` (a variable or tensor), ``biases`` ``[num_classes]``,
    ``labels`` int ``[batch, num_true]``, ``inputs`` ``[batch, dim]``. ``sampled_values`` may
    give the sampler's three outputs; otherwise a log-uniform sampler (unique) draws them.
    ``remove_accidental_hits`` pushes to -FLT_MAX the logit of a sampled class that is one of the
    row's true classes (as TF does, computed here with a dense [batch, num_sampled] mask).
    """
    from . import array, manip, math

    weights = _single("compute_sampled_logits", weights)
    biases = _single("compute_sampled_logits", biases)
    g = convert_to_tensor(inputs).graph
    with g.name_scope(name or "compute_sampled_logits"):
        inputs = convert_to_tensor(inputs)
        labels = convert_to_tensor(labels)
        if labels.dtype != _dt.int64:
            labels = array.cast(labels, _dt.int64)
        if labels.shape.ndims == 1:
            labels = manip.expand_dims(labels, 1)
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(
                labels, num_true, num_sampled, True, num_classes, seed=seed
            )
        sampled, true_count, sampled_count = (
            array.stop_gradient(convert_to_tensor(v)) for v in sampled_values
        )
        if sampled.dtype != _dt.int64:
            sampled = array.cast(sampled, _dt.int64)
        labels_flat = array.reshape(labels, [-1])
        all_ids = manip.concat([labels_flat, sampled], 0)
        all_w = manip.gather(weights, all_ids)  # sparse gradient: rows all_ids
        all_b = manip.gather(biases, all_ids)
        true_w, sampled_w = manip.split(all_w, [-1, num_sampled], axis=0)
        true_b, sampled_b = manip.split(all_b, [-1, num_sampled], axis=0)
        dim = inputs.shape[-1] if inputs.shape.ndims == 2 else None
        if dim is None:
            raise InvalidArgumentError(
                f"compute_sampled_logits: inputs {inputs.name} must be [batch, dim] with a known "
                f"dim, got {inputs.shape}"
            )
        # true logits: row-wise dot products of each input with its num_true weight rows
        true_w = array.reshape(true_w, [-1, num_true, dim])
        true_logits = math.reduce_sum(math.multiply(manip.expand_dims(inputs, 1), true_w), axis=2)
        true_logits = math.add(true_logits, array.reshape(true_b, [-1, num_true]))
        sampled_logits = math.add(math.matmul(inputs, sampled_w, transpose_b=True), sampled_b)
        if remove_accidental_hits:
            hits = math.reduce_any(
                math.equal(manip.expand_dims(labels, 2), array.reshape(sampled, [1, 1, -1])),
                axis=1,
            )
            lowest = np.finfo(inputs.dtype.np).min
            penalty = math.where(
                hits,
                convert_to_tensor(lowest, dtype=inputs.dtype),
                convert_to_tensor(0.0, dtype=inputs.dtype),
            )
            sampled_logits = math.add(sampled_logits, penalty)
        if subtract_log_q:
            true_logits = math.subtract(true_logits, math.log(_as(true_count, inputs.dtype)))
            sampled_logits = math.subtract(
                sampled_logits, math.log(_as(sampled_count, inputs.dtype))
            )
        out_logits = manip.concat([true_logits, sampled_logits], 1)
        out_labels = manip.concat(
            [
                math.divide(math.ones_like(true_logits), float(num_true)),
                math.zeros_like(sampled_logits),
            ],
            1,
        )
    return out_logits, out_labels


def _as(t: Tensor, dtype: _dt.DType) -> Tensor:
    from .array import cast

    return t if t.dtype == dtype else cast(t, dtype)


def sampled_softmax_loss(
    weights: Any,
    biases: Any,
    labels: Any,
    inputs: Any,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values: Any = None,
    remove_accidental_hits: bool = True,
    partition_strategy: str = "mod",
    name: str = "sampled_softmax_loss",
    seed: int | None = None,
) -> Tensor:
    """Per-example sampled softmax loss ``[batch]`` (TF1's ``tf.nn.sampled_softmax_loss``).

    A training-time approximation of the full softmax over ``num_classes``: see
    ``compute_sampled_logits`` for the arguments. ``weights`` must be one variable or tensor
    (a list of one is accepted; ``partition_strategy`` is then irrelevant); sharded lists raise
    UnimplementedError.
    """
    from .array import stop_gradient
    from .nn import softmax_cross_entropy_with_logits_v2

    if partition_strategy not in ("mod", "div"):
        raise InvalidArgumentError(
            f"sampled_softmax_loss: partition_strategy must be 'mod' or 'div', "
            f"got {partition_strategy!r}"
        )
    logits, labels_ = compute_sampled_logits(
        weights,
        biases,
        labels,
        inputs,
        num_sampled,
        num_classes,
        num_true=num_true,
        sampled_values=sampled_values,
        subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits,
        seed=seed,
        name=name,
    )
    return softmax_cross_entropy_with_logits_v2(
        labels=stop_gradient(labels_), logits=logits, name=name
    )


def nce_loss(
    weights: Any,
    biases: Any,
    labels: Any,
    inputs: Any,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values: Any = None,
    remove_accidental_hits: bool = False,
    partition_strategy: str = "mod",
    name: str = "nce_loss",
    seed: int | None = None,
) -> Tensor:
    """Per-example noise-contrastive estimation loss ``[batch]`` (TF1's ``tf.nn.nce_loss``).

    The same sampled logits as ``sampled_softmax_loss`` (true classes and ``num_sampled``
    classes from the log-uniform sampler, each logit minus the log of its expected count), scored
    as independent logistic regressions: the sum over the row of
    ``sigmoid_cross_entropy_with_logits`` with target 1/num_true for each true class and 0 for
    each sampled one. As in TF1, accidental hits are kept unless ``remove_accidental_hits``.
    """
    from .array import stop_gradient
    from .math import reduce_sum
    from .nn import sigmoid_cross_entropy_with_logits

    if partition_strategy not in ("mod", "div"):
        raise InvalidArgumentError(
            f"nce_loss: partition_strategy must be 'mod' or 'div', got {partition_strategy!r}"
        )
    logits, labels_ = compute_sampled_logits(
        weights,
        biases,
        labels,
        inputs,
        num_sampled,
        num_classes,
        num_true=num_true,
        sampled_values=sampled_values,
        subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits,
        seed=seed,
        name=name,
    )
    per_logit = sigmoid_cross_entropy_with_logits(labels=stop_gradient(labels_), logits=logits)
    return reduce_sum(per_logit, axis=1, name=name)


__all__ = [
    "nce_loss",
    "compute_sampled_logits",
    "log_uniform_candidate_sampler",
    "log_uniform_prob",
    "sampled_softmax_loss",
]
