"""``tf.distributions`` (TF1's): Normal, Bernoulli, Categorical, Uniform, Exponential and Laplace,
with ``sample``, ``log_prob``, ``prob``, ``entropy``, ``mean``, ``mode``, ``stddev``,
``variance`` and (where TF has them) ``cdf``/``log_cdf``; ``kl_divergence`` with
``RegisterKL`` for pairs of the same family. Built from graph ops, so every value is
differentiable where TF's is (Normal, Uniform, Laplace and Exponential samples are
reparameterized). Values follow TF's formulas; samples come from hetbed's generator, so they
differ from TF's under the same seeds (their distribution does not).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import hetbed as _hb
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.graph import TensorShape


class ReparameterizationType:
    """TF's marker of how a sample depends on the parameters."""

    def __init__(self, rep_type: str):
        self._rep_type = rep_type

    def __repr__(self) -> str:
        return f"<Reparameterization Type: {self._rep_type}>"


FULLY_REPARAMETERIZED = ReparameterizationType("FULLY_REPARAMETERIZED")
NOT_REPARAMETERIZED = ReparameterizationType("NOT_REPARAMETERIZED")


def _t(x: Any, dtype: Any = None) -> Any:
    return _hb.convert_to_tensor(x, dtype=dtype)


def _shape_list(s: Any) -> list:
    return [int(v) for v in np.asarray(s, dtype=np.int64).reshape(-1)]


class Distribution:
    """The part of TF's ``Distribution`` every family shares: shapes, ``sample`` from
    ``_sample_n``, ``prob`` from ``log_prob``, and ``kl_divergence``."""

    reparameterization_type = NOT_REPARAMETERIZED

    validate_args = False
    allow_nan_stats = True

    def __init__(self, dtype: Any, params: dict, name: str):
        self._dtype = dtype
        self._parameters = dict(params)
        self._name = name

    # shapes
    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def name(self) -> str:
        return self._name

    @property
    def parameters(self) -> dict:
        return dict(self._parameters)

    @property
    def batch_shape(self) -> TensorShape:
        return self._batch_shape()

    def batch_shape_tensor(self) -> Any:
        return self._batch_shape_tensor()

    @property
    def event_shape(self) -> TensorShape:
        return TensorShape([])

    def event_shape_tensor(self) -> Any:
        return _hb.constant([], dtype=_dt.int32)

    def _like(self) -> Any:
        """A zero tensor of the batch shape (for broadcasting a parameter to it)."""
        raise NotImplementedError

    def _batch_shape(self) -> TensorShape:
        return self._like().shape

    def _batch_shape_tensor(self) -> Any:
        return _hb.shape(self._like())

    # sampling
    def _n_shape(self, n: int) -> Any:
        """The shape of ``n`` samples: ``[n] + batch_shape``."""
        return _hb.concat([[n], self.batch_shape_tensor()], 0)

    def sample(self, sample_shape: Any = (), seed: Any = None, name: str = "sample") -> Any:
        """Samples of shape ``sample_shape + batch_shape + event_shape``."""
        with _hb.name_scope(f"{self._name}/{name}"):
            shape = _shape_list(sample_shape)
            n = int(np.prod(shape)) if shape else 1
            s = self._sample_n(n, seed)
            tail = _hb.shape(s)[1:]
            out = _hb.reshape(s, _hb.concat([_hb.constant(shape, _dt.int32), tail], 0))
            out.set_shape(TensorShape(shape).concatenate(s.shape[1:]))
            return out

    def prob(self, value: Any, name: str = "prob") -> Any:
        return _hb.exp(self.log_prob(value))

    def cdf(self, value: Any, name: str = "cdf") -> Any:
        return _hb.exp(self.log_cdf(value))

    def log_cdf(self, value: Any, name: str = "log_cdf") -> Any:
        return _hb.log(self.cdf(value))

    def survival_function(self, value: Any, name: str = "survival_function") -> Any:
        return 1.0 - self.cdf(value)

    def stddev(self, name: str = "stddev") -> Any:
        return _hb.sqrt(self.variance())

    def variance(self, name: str = "variance") -> Any:
        return _hb.square(self.stddev())

    def kl_divergence(self, other: Distribution, name: str = "kl_divergence") -> Any:
        return kl_divergence(self, other)

    def cross_entropy(self, other: Distribution, name: str = "cross_entropy") -> Any:
        return self.entropy() + kl_divergence(self, other)

    def __repr__(self) -> str:
        return f"<hb.distributions.{type(self).__name__} '{self._name}' dtype={self._dtype.name}>"


def _guarded(validate_args: bool, kind: str, checks: list, *values: Any) -> tuple:
    """``values`` through identities that wait for ``checks`` (``(assert function, tensor,
    what must hold)``) when ``validate_args``, as TF's distributions check their parameters."""
    if not validate_args:
        return values
    asserts = [
        fn(*(t if isinstance(t, tuple) else (t,)), message=f"{kind}: {what} (validate_args=True)")
        for fn, t, what in checks
    ]
    with _hb.control_dependencies(asserts):
        return tuple(_hb.identity(v) for v in values)


class _LocScale(Distribution):
    """A family of a location and a scale (Normal, Laplace)."""

    reparameterization_type = FULLY_REPARAMETERIZED

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name=None):
        loc = _t(loc)
        scale = _t(scale, loc.dtype)
        kind = type(self).__name__
        self.loc, self.scale = _guarded(
            validate_args,
            kind,
            [(_hb.assert_positive, scale, "scale must be positive")],
            loc,
            scale,
        )
        super().__init__(
            self.loc.dtype, {"loc": self.loc, "scale": self.scale}, name or type(self).__name__
        )

    def _like(self):
        return _hb.zeros_like(self.loc) + _hb.zeros_like(self.scale)


class Normal(_LocScale):
    """N(loc, scale^2)."""

    def _sample_n(self, n, seed):
        shape = self._n_shape(n)
        z = _hb.random_normal(shape, dtype=self.dtype, seed=seed)
        out = z * self.scale + self.loc
        out.set_shape(TensorShape([n]).concatenate(self.batch_shape))
        return out

    def _z(self, x):
        return (x - self.loc) / self.scale

    def log_prob(self, value, name="log_prob"):
        z = self._z(_t(value, self.dtype))
        return -0.5 * _hb.square(z) - (0.5 * math.log(2.0 * math.pi) + _hb.log(self.scale))

    def cdf(self, value, name="cdf"):
        return 0.5 * _hb.erfc(-self._z(_t(value, self.dtype)) / math.sqrt(2.0))

    def log_cdf(self, value, name="log_cdf"):
        return _hb.log(self.cdf(value))

    def entropy(self, name="entropy"):
        return (0.5 * math.log(2.0 * math.pi * math.e) + _hb.log(self.scale)) + _hb.zeros_like(
            self.loc
        )

    def mean(self, name="mean"):
        return self.loc + _hb.zeros_like(self.scale)

    def mode(self, name="mode"):
        return self.mean()

    def stddev(self, name="stddev"):
        return self.scale + _hb.zeros_like(self.loc)

    def variance(self, name="variance"):
        return _hb.square(self.stddev())


class _LogitsOrProbs(Distribution):
    """A discrete family given by ``logits`` or by ``probs`` (exactly one), each derived from
    the other by the subclass's ``_probs_of``/``_logits_of``."""

    def __init__(
        self,
        logits=None,
        probs=None,
        dtype=_dt.int32,
        validate_args=False,
        allow_nan_stats=True,
        name=None,
    ):
        kind = type(self).__name__
        if (logits is None) == (probs is None):
            raise ValueError(f"{kind}: give exactly one of logits and probs")
        if logits is not None:
            self.logits = _t(logits)
            self.probs = self._probs_of(self.logits)
        else:
            (self.probs,) = _guarded(validate_args, kind, self._prob_checks(_t(probs)), _t(probs))
            self.logits = self._logits_of(self.probs)
        params = {"logits": self.logits, "probs": self.probs}
        super().__init__(_dt.as_dtype(dtype), params, name or kind)


class Bernoulli(_LogitsOrProbs):
    """A coin that comes up 1 with probability ``probs`` (= sigmoid(``logits``))."""

    @staticmethod
    def _prob_checks(p):
        return [
            (_hb.assert_non_negative, p, "probs must be >= 0"),
            (_hb.assert_less_equal, (p, _hb.ones_like(p)), "probs must be <= 1"),
        ]

    @staticmethod
    def _probs_of(logits):
        return _hb.sigmoid(logits)

    @staticmethod
    def _logits_of(probs):
        return _hb.log(probs) - _hb.log1p(-probs)

    def _like(self):
        return _hb.zeros_like(self.logits)

    def _sample_n(self, n, seed):
        shape = self._n_shape(n)
        u = _hb.random_uniform(shape, dtype=self.probs.dtype, seed=seed)
        return _hb.cast(_hb.less(u, self.probs), self.dtype)

    def log_prob(self, value, name="log_prob"):
        x = _hb.cast(value, self.logits.dtype)
        return -_hb.nn.sigmoid_cross_entropy_with_logits(
            labels=x + _hb.zeros_like(self.logits), logits=self.logits + _hb.zeros_like(x)
        )

    def entropy(self, name="entropy"):
        return -self.logits * (_hb.sigmoid(self.logits) - 1) + _hb.nn.softplus(-self.logits)

    def mean(self, name="mean"):
        return self.probs

    def variance(self, name="variance"):
        return self.probs * (1 - self.probs)

    def mode(self, name="mode"):
        return _hb.cast(_hb.greater(self.probs, 0.5), self.dtype)


class Categorical(_LogitsOrProbs):
    """One of ``K`` classes with probabilities ``probs`` (= softmax(``logits``)) over the last
    axis."""

    @staticmethod
    def _prob_checks(p):
        tol = 10 * float(np.finfo(np.dtype(p.dtype.np)).eps)  # TF's assert_near default
        off = _hb.abs(_hb.reduce_sum(p, -1) - 1.0)
        return [
            (_hb.assert_non_negative, p, "probs must be >= 0"),
            (_hb.assert_less_equal, (off, _hb.ones_like(off) * tol), "probs does not sum to 1"),
        ]

    @staticmethod
    def _probs_of(logits):
        return _hb.nn.softmax(logits)

    @staticmethod
    def _logits_of(probs):
        return _hb.log(probs)

    @property
    def event_size(self):
        return _hb.shape(self.logits)[-1]

    def _like(self):
        return _hb.zeros_like(self.logits[..., 0])

    def _sample_n(self, n, seed):
        k = _hb.shape(self.logits)[-1]
        flat = _hb.reshape(self.logits, _hb.stack([-1, k]))
        draws = _hb.multinomial(flat, n, seed=seed, output_dtype=self.dtype)  # [rows, n]
        out = _hb.reshape(_hb.transpose(draws), _hb.concat([[n], self.batch_shape_tensor()], 0))
        out.set_shape(TensorShape([n]).concatenate(self.batch_shape))
        return out

    def log_prob(self, value, name="log_prob"):
        k = _hb.cast(value, _dt.int32)
        logits = self.logits + _hb.expand_dims(_hb.zeros_like(k, dtype=self.logits.dtype), -1)
        k = k + _hb.zeros_like(logits[..., 0], dtype=_dt.int32)
        return -_hb.nn.sparse_softmax_cross_entropy_with_logits(labels=k, logits=logits)

    def entropy(self, name="entropy"):
        return -_hb.reduce_sum(_hb.nn.log_softmax(self.logits) * self.probs, axis=-1)

    def mode(self, name="mode"):
        return _hb.cast(_hb.argmax(self.logits, axis=-1), self.dtype)


class Uniform(Distribution):
    """Uniform on [low, high)."""

    reparameterization_type = FULLY_REPARAMETERIZED

    def __init__(
        self, low=0.0, high=1.0, validate_args=False, allow_nan_stats=True, name="Uniform"
    ):
        low = _t(low)
        high = _t(high, low.dtype)
        self.low, self.high = _guarded(
            validate_args,
            name,
            [(_hb.assert_less, (low, high), "low must be below high")],
            low,
            high,
        )
        super().__init__(self.low.dtype, {"low": self.low, "high": self.high}, name)

    def range(self, name="range"):
        return self.high - self.low

    def _like(self):
        return _hb.zeros_like(self.low) + _hb.zeros_like(self.high)

    def _sample_n(self, n, seed):
        shape = self._n_shape(n)
        u = _hb.random_uniform(shape, dtype=self.dtype, seed=seed)
        return self.low + self.range() * u

    def prob(self, value, name="prob"):
        x = _t(value, self.dtype)
        inside = _hb.logical_and(_hb.greater_equal(x, self.low), _hb.less(x, self.high))
        density = (1.0 / self.range()) + _hb.zeros_like(x)
        return _hb.where(inside, density, _hb.zeros_like(density))

    def log_prob(self, value, name="log_prob"):
        return _hb.log(self.prob(value))

    def cdf(self, value, name="cdf"):
        x = _t(value, self.dtype)
        c = (x - self.low) / self.range()
        return _hb.minimum(_hb.maximum(c, 0.0), 1.0)

    def entropy(self, name="entropy"):
        return _hb.log(self.range())

    def mean(self, name="mean"):
        return (self.low + self.high) / 2.0

    def variance(self, name="variance"):
        return _hb.square(self.range()) / 12.0


class Exponential(Distribution):
    """rate * exp(-rate x) on x >= 0."""

    reparameterization_type = FULLY_REPARAMETERIZED

    def __init__(self, rate, validate_args=False, allow_nan_stats=True, name="Exponential"):
        rate = _t(rate)
        (self.rate,) = _guarded(
            validate_args, name, [(_hb.assert_positive, rate, "rate must be positive")], rate
        )
        super().__init__(self.rate.dtype, {"rate": self.rate}, name)

    def _like(self):
        return _hb.zeros_like(self.rate)

    def _sample_n(self, n, seed):
        shape = self._n_shape(n)
        tiny = float(np.finfo(np.dtype(self.dtype.np)).tiny)
        u = _hb.random_uniform(shape, minval=tiny, maxval=1.0, dtype=self.dtype, seed=seed)
        return -_hb.log(u) / self.rate

    def log_prob(self, value, name="log_prob"):
        return _hb.log(self.rate) - self.rate * _t(value, self.dtype)

    def cdf(self, value, name="cdf"):
        return -_hb.expm1(-self.rate * _t(value, self.dtype))

    def entropy(self, name="entropy"):
        return 1.0 - _hb.log(self.rate)

    def mean(self, name="mean"):
        return 1.0 / self.rate

    def variance(self, name="variance"):
        return 1.0 / _hb.square(self.rate)

    def mode(self, name="mode"):
        return _hb.zeros_like(self.rate)


class Laplace(_LocScale):
    """exp(-|x - loc| / scale) / (2 scale)."""

    def _sample_n(self, n, seed):
        shape = self._n_shape(n)
        kind = np.dtype(self.dtype.np).type
        lo = float(np.nextafter(kind(-1.0), kind(0.0)))
        u = _hb.random_uniform(shape, minval=lo, maxval=1.0, dtype=self.dtype, seed=seed)
        return self.loc - self.scale * _hb.sign(u) * _hb.log1p(-_hb.abs(u))

    def log_prob(self, value, name="log_prob"):
        x = _t(value, self.dtype)
        return -math.log(2.0) - _hb.log(self.scale) - _hb.abs(x - self.loc) / self.scale

    def cdf(self, value, name="cdf"):
        y = _t(value, self.dtype) - self.loc
        return 0.5 - 0.5 * _hb.sign(y) * _hb.expm1(-_hb.abs(y) / self.scale)

    def entropy(self, name="entropy"):
        return (math.log(2.0) + 1.0 + _hb.log(self.scale)) + _hb.zeros_like(self.loc)

    def mean(self, name="mean"):
        return self.loc + _hb.zeros_like(self.scale)

    def mode(self, name="mode"):
        return self.mean()

    def stddev(self, name="stddev"):
        return math.sqrt(2.0) * self.scale + _hb.zeros_like(self.loc)


# ---- KL divergence ------------------------------------------------------------------------------

_KL: dict = {}


class RegisterKL:
    """Decorator: ``@RegisterKL(A, B) def kl(a, b, name=None)`` is ``kl_divergence`` of an A and
    a B (and of their subclasses)."""

    def __init__(self, dist_cls_a: type, dist_cls_b: type):
        self._key = (dist_cls_a, dist_cls_b)

    def __call__(self, fn):
        if self._key in _KL:
            raise ValueError(
                f"KL({self._key[0].__name__} || {self._key[1].__name__}) has already been "
                "registered"
            )
        _KL[self._key] = fn
        return fn


def kl_divergence(distribution_a, distribution_b, allow_nan_stats=True, name=None):
    """KL(a || b), by the function registered for the pair of classes (the nearest by their
    method resolution orders)."""
    for ca in type(distribution_a).__mro__:
        for cb in type(distribution_b).__mro__:
            fn = _KL.get((ca, cb))
            if fn is not None:
                return fn(distribution_a, distribution_b, name=name)
    raise NotImplementedError(
        f"No KL(distribution_a || distribution_b) registered for distribution_a type "
        f"{type(distribution_a).__name__} and distribution_b type "
        f"{type(distribution_b).__name__}"
    )


@RegisterKL(Normal, Normal)
def _kl_normal(a, b, name=None):
    ratio = _hb.square(a.scale / b.scale)
    diff = _hb.square((a.loc - b.loc) / b.scale)
    return 0.5 * diff + 0.5 * (ratio - 1.0 - _hb.log(ratio))


@RegisterKL(Bernoulli, Bernoulli)
def _kl_bernoulli(a, b, name=None):
    d0 = _hb.nn.softplus(-b.logits) - _hb.nn.softplus(-a.logits)
    d1 = _hb.nn.softplus(b.logits) - _hb.nn.softplus(a.logits)
    return _hb.sigmoid(a.logits) * d0 + _hb.sigmoid(-a.logits) * d1


@RegisterKL(Categorical, Categorical)
def _kl_categorical(a, b, name=None):
    la, lb = _hb.nn.log_softmax(a.logits), _hb.nn.log_softmax(b.logits)
    return _hb.reduce_sum(_hb.nn.softmax(a.logits) * (la - lb), axis=-1)


__all__ = [
    "FULLY_REPARAMETERIZED",
    "NOT_REPARAMETERIZED",
    "Bernoulli",
    "Categorical",
    "Distribution",
    "Exponential",
    "Laplace",
    "Normal",
    "RegisterKL",
    "ReparameterizationType",
    "Uniform",
    "kl_divergence",
]
