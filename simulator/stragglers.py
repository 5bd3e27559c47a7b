"""Straggler models: how much slower than its profiled compute time a worker's step runs.

Every model is a ``StragglerModel`` with ``factor(worker, step, now) -> float`` (> 0; 1 = the
profiled time); a driver multiplies ``ReplicaProfile.compute_s`` by the product of its models'
factors, drawn once per computed gradient at the start of its compute. Models compose with ``*``
or ``combine(...)``. Randomness comes only from the ``numpy.random.Generator`` each model is given;
draws are buffered (fast) and consumed in call order, so one seed gives one run.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "Combined",
    "Empirical",
    "Interference",
    "LogNormal",
    "ParetoTail",
    "SlowWorkers",
    "StragglerModel",
    "combine",
]

_BLOCK = 4096


class StragglerModel:
    """Base class: ``factor(worker, step, now)`` is the slowdown of one computation (> 0)."""

    def factor(self, worker: int, step: int, now: float) -> float:
        raise NotImplementedError(f"{type(self).__name__} needs a factor(worker, step, now)")

    def __mul__(self, other: StragglerModel) -> Combined:
        return combine(self, other)


class Combined(StragglerModel):
    """The product of several models' factors."""

    def __init__(self, models: Iterable[StragglerModel]):
        self.models = list(models)

    def factor(self, worker: int, step: int, now: float) -> float:
        f = 1.0
        for m in self.models:
            f *= m.factor(worker, step, now)
        return f

    def __repr__(self) -> str:
        return " * ".join(repr(m) for m in self.models) or "Combined([])"


def combine(*models: StragglerModel | None) -> Combined:
    """One model whose factor is the product of ``models``' (Nones and nesting flattened)."""
    flat: list[StragglerModel] = []
    for m in models:
        if m is None:
            continue
        if isinstance(m, Combined):
            flat.extend(m.models)
        elif isinstance(m, StragglerModel):
            flat.append(m)
        else:
            raise TypeError(f"not a StragglerModel: {m!r} (give objects with factor(w, step, now))")
    return Combined(flat)


def _check_rng(rng: Any, who: str) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{who} needs a seeded numpy.random.Generator, e.g. np.random.default_rng(0); "
            f"got {rng!r}"
        )
    return rng


class _Draws:
    """Random numbers drawn ``_BLOCK`` at a time from ``draw(rng, size)`` and handed out singly."""

    __slots__ = ("rng", "draw", "buf", "i")

    def __init__(self, rng: np.random.Generator, draw: Callable[[np.random.Generator, int], Any]):
        self.rng, self.draw = rng, draw
        self.buf: list[float] = []
        self.i = 0

    def next(self) -> float:
        if self.i == len(self.buf):
            self.buf = self.draw(self.rng, _BLOCK).tolist()
            self.i = 0
        x = self.buf[self.i]
        self.i += 1
        return x


def _workers(workers: Iterable[int] | None) -> frozenset[int] | None:
    return None if workers is None else frozenset(int(w) for w in workers)


class LogNormal(StragglerModel):
    """I.i.d. factor exp(sigma Z), Z standard normal: median 1, mean exp(sigma^2 / 2).

    ``workers`` limits it to those workers (others get 1). Raises ValueError for sigma < 0.
    """

    def __init__(
        self, sigma: float, rng: np.random.Generator, workers: Iterable[int] | None = None
    ):
        if not (math.isfinite(sigma) and sigma >= 0):
            raise ValueError(f"LogNormal: sigma must be finite and >= 0, got {sigma!r}")
        self.sigma = float(sigma)
        self.workers = _workers(workers)
        s = self.sigma
        self._draws = _Draws(
            _check_rng(rng, "LogNormal"), lambda r, n: np.exp(s * r.standard_normal(n))
        )

    def factor(self, worker: int, step: int, now: float) -> float:
        if self.workers is not None and worker not in self.workers:
            return 1.0
        return self._draws.next()

    def __repr__(self) -> str:
        return f"LogNormal(sigma={self.sigma})"


class ParetoTail(StragglerModel):
    """With probability ``probability``, factor 1 + scale x X with X ~ Lomax(alpha) (so 1 + X is
    Pareto with minimum 1 and tail index alpha: P(1 + X > x) = x^-alpha); else 1. Always >= 1.

    Raises ValueError for alpha <= 0, a probability outside [0, 1] or a negative scale.
    """

    def __init__(
        self,
        alpha: float,
        rng: np.random.Generator,
        probability: float = 1.0,
        scale: float = 1.0,
        workers: Iterable[int] | None = None,
    ):
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"ParetoTail: alpha must be > 0, got {alpha!r}")
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"ParetoTail: probability must be in [0, 1], got {probability!r}")
        if not (math.isfinite(scale) and scale >= 0):
            raise ValueError(f"ParetoTail: scale must be finite and >= 0, got {scale!r}")
        self.alpha, self.probability, self.scale = float(alpha), float(probability), float(scale)
        self.workers = _workers(workers)
        a, p, sc = self.alpha, self.probability, self.scale

        def draw(r: np.random.Generator, n: int) -> np.ndarray:
            hit = r.random(n) < p
            return 1.0 + sc * r.pareto(a, n) * hit

        self._draws = _Draws(_check_rng(rng, "ParetoTail"), draw)

    def factor(self, worker: int, step: int, now: float) -> float:
        if self.workers is not None and worker not in self.workers:
            return 1.0
        return self._draws.next()

    def __repr__(self) -> str:
        return f"ParetoTail(alpha={self.alpha}, probability={self.probability}, scale={self.scale})"


class SlowWorkers(StragglerModel):
    """Persistently slow machines: ``{worker: factor}``, or a set of workers and one ``factor``."""

    def __init__(self, workers: Mapping[int, float] | Iterable[int], factor: float | None = None):
        if isinstance(workers, Mapping):
            if factor is not None:
                raise ValueError(
                    "SlowWorkers: give a {worker: factor} mapping or a factor, not both"
                )
            table = {int(w): float(f) for w, f in workers.items()}
        else:
            if factor is None:
                raise ValueError("SlowWorkers: a set of workers needs factor=...")
            table = dict.fromkeys((int(w) for w in workers), float(factor))
        for w, f in table.items():
            if not (math.isfinite(f) and f > 0):
                raise ValueError(
                    f"SlowWorkers: worker {w} factor must be finite and > 0, got {f!r}"
                )
        self.table = table

    def factor(self, worker: int, step: int, now: float) -> float:
        return self.table.get(worker, 1.0)

    def __repr__(self) -> str:
        return f"SlowWorkers({self.table})"


class Interference(StragglerModel):
    """Transient interference episodes on each worker: episodes start as a Poisson process of
    ``rate_per_s`` per worker and last ``duration_s`` (exponentially distributed with that mean if
    ``random_duration``, else exactly); a computation that starts inside an episode is
    ``slowdown`` times slower. Each worker's episodes are drawn lazily as its clock advances.

    Raises ValueError for a negative rate or duration or a slowdown <= 0.
    """

    def __init__(
        self,
        rate_per_s: float,
        duration_s: float,
        slowdown: float,
        rng: np.random.Generator,
        random_duration: bool = True,
        workers: Iterable[int] | None = None,
    ):
        for name, v in (("rate_per_s", rate_per_s), ("duration_s", duration_s)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"Interference: {name} must be finite and >= 0, got {v!r}")
        if not (math.isfinite(slowdown) and slowdown > 0):
            raise ValueError(f"Interference: slowdown must be finite and > 0, got {slowdown!r}")
        self.rate, self.duration, self.slowdown = float(rate_per_s), float(duration_s), slowdown
        self.random_duration = random_duration
        self.workers = _workers(workers)
        self.rng = _check_rng(rng, "Interference")
        self._state: dict[int, list[float]] = {}  # worker -> [next start, end of current]
        self._gaps = _Draws(self.rng, lambda r, n: r.exponential(1.0, n))

    def _gap(self) -> float:
        return self._gaps.next() / self.rate

    def factor(self, worker: int, step: int, now: float) -> float:
        if self.rate == 0 or (self.workers is not None and worker not in self.workers):
            return 1.0
        st = self._state.get(worker)
        if st is None:
            st = self._state[worker] = [self._gap(), -math.inf]
        while st[0] <= now:  # episodes that began by now
            d = self.duration * self._gaps.next() if self.random_duration else self.duration
            st[1] = max(st[1], st[0] + d)
            st[0] += self._gap()
        return self.slowdown if now < st[1] else 1.0

    def __repr__(self) -> str:
        return (
            f"Interference(rate_per_s={self.rate}, duration_s={self.duration}, "
            f"slowdown={self.slowdown})"
        )


class Empirical(StragglerModel):
    """Factors resampled (i.i.d., with replacement) from measured step times, divided by their
    median. ``samples`` is an array of seconds or a path: a ``.csv`` file (the column ``column``,
    else its only numeric one) or plain text of whitespace-separated seconds.

    Raises ValueError naming the file for no values, values that are not finite and > 0, or a
    CSV of several numeric columns and no ``column``.
    """

    def __init__(
        self,
        samples: Any,
        rng: np.random.Generator,
        column: str | None = None,
        workers: Iterable[int] | None = None,
    ):
        where = "samples"
        if isinstance(samples, (str, os.PathLike)):
            where = str(samples)
            values = _load_times(where, column)
        else:
            values = np.asarray(samples, dtype=float).reshape(-1)
        if values.size == 0:
            raise ValueError(f"Empirical: no step times in {where}")
        bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
        if bad.size:  # a file's values are not quoted: it may be something else than times
            found = (
                f"{bad.size} of {values.size} values are not (the first is value {bad[0] + 1})"
                if where != "samples"
                else f"found {values[bad[:3]].tolist()}"
            )
            raise ValueError(
                f"Empirical: step times in {where} must be finite and > 0 seconds; {found}"
            )
        self.median_s = float(np.median(values))
        self.factors = values / self.median_s
        self.workers = _workers(workers)
        table = self.factors
        self._draws = _Draws(
            _check_rng(rng, "Empirical"), lambda r, n: table[r.integers(0, table.size, n)]
        )

    def factor(self, worker: int, step: int, now: float) -> float:
        if self.workers is not None and worker not in self.workers:
            return 1.0
        return self._draws.next()

    def __repr__(self) -> str:
        return f"Empirical({self.factors.size} samples, median {self.median_s:.4g} s)"


def _load_times(path: str, column: str | None) -> np.ndarray:
    if not os.path.isfile(path):
        raise ValueError(f"Empirical: no such file {path!r}")
    if path.lower().endswith(".csv"):
        import pandas as pd

        frame = pd.read_csv(path)
        if column is not None:
            if column not in frame.columns:
                raise ValueError(f"Empirical: {path} has no column {column!r}")
            series = frame[column]
        else:
            numeric = frame.select_dtypes("number")
            if numeric.empty:
                raise ValueError(f"Empirical: {path} has no numeric column")
            if numeric.shape[1] > 1:  # (a step index beside the times, say): never guess
                names = ", ".join(repr(str(c)) for c in numeric.columns[:8])
                raise ValueError(
                    f"Empirical: {path} has {numeric.shape[1]} numeric columns ({names}); "
                    "name the one of step times"
                )
            series = numeric.iloc[:, 0]
        return series.dropna().to_numpy(dtype=float)
    try:
        with warnings.catch_warnings():  # an empty file: "no step times" says it, once
            warnings.simplefilter("ignore", UserWarning)
            return np.loadtxt(path, dtype=float, ndmin=1).reshape(-1)
    except ValueError:
        # numpy's message quotes the offending line: never echo a file's contents
        raise ValueError(
            f"Empirical: {path} is not plain text of seconds (whitespace-separated numbers)"
        ) from None
