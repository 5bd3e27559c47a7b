"""``compile``, ``fit``, ``evaluate``, ``predict`` and the ``*_on_batch`` methods, as TF1 Keras
runs them in graph mode: compile adds target placeholders (``<output>_target``), the losses
and metrics and the optimizer's update to the model's graph; each batch is one ``Session.run``
in ``keras.backend.get_session()`` with the learning phase fed (True to train). An epoch's loss
and metrics are the means over its samples (batch values weighted by batch size)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.runtime.graph import Tensor

from . import backend as K
from . import losses as _losses
from . import metrics as _metrics
from . import optimizers as _optimizers


def _as_list(x: Any) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _out_name(t: Tensor) -> str:
    from .engine import node_of

    node = node_of(t)
    return node.layer.name if node is not None else t.op.name.split("/")[0]


class Training:
    """The training half of ``keras.Model`` (mixed into it)."""

    def _training_init(self) -> None:
        self.optimizer: Any = None
        self._compiled: dict | None = None
        self._compile_args: dict | None = None
        self.history: Any = None
        self.stop_training = False

    # ---- compile ------------------------------------------------------------------------------
    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        metrics: Any = None,
        loss_weights: Any = None,
        sample_weight_mode: Any = None,
        weighted_metrics: Any = None,
        target_tensors: Any = None,
        **kwargs: Any,
    ) -> None:
        """Choose the optimizer (a name, a keras or a ``tf.train`` optimizer), the loss (a name,
        a function ``fn(y_true, y_pred)``, or one per output) and the metrics."""
        if loss is None:
            raise ValueError(f"model {self.name!r}: compile needs a loss")
        self.optimizer = _optimizers.get(optimizer)
        self._compile_args = {"loss": loss, "metrics": metrics, "loss_weights": loss_weights}
        self._compiled = None
        if self.outputs:
            self._build_training()

    def _per_output(self, value: Any, what: str) -> list:
        names = [_out_name(t) for t in self.outputs]
        if isinstance(value, dict):
            missing = [k for k in value if k not in names]
            if missing:
                raise ValueError(f"compile: {what} for unknown outputs {missing}; outputs: {names}")
            return [value.get(n) for n in names]
        if isinstance(value, (list, tuple)) and what != "metrics":
            if len(value) != len(names):
                raise ValueError(
                    f"compile: {len(value)} {what} for the {len(names)} outputs {names}"
                )
            return list(value)
        return [value] * len(names)

    def _build_training(self) -> None:
        args = self._compile_args
        g = self.outputs[0].graph
        with g.as_default():
            loss_fns = [_losses.get(x) for x in self._per_output(args["loss"], "losses")]
            weights = self._per_output(args["loss_weights"], "loss_weights")
            metric_ids = self._per_output(args["metrics"], "metrics")
            multi = len(self.outputs) > 1
            targets, sample_weights, out_losses = [], [], []
            names: list[str] = ["loss"]
            metric_tensors: list[Tensor] = []
            for out, fn, w, mids in zip(self.outputs, loss_fns, weights, metric_ids):
                name = _out_name(out)
                rank = out.shape.ndims
                target = hb.placeholder(out.dtype, shape=[None] * rank, name=f"{name}_target")
                sw = hb.placeholder(out.dtype, shape=[None], name=f"{name}_sample_weights")
                targets.append(target)
                sample_weights.append(sw)
                with hb.name_scope(f"loss/{name}_loss"):
                    # a Loss object gives its per-sample losses (Loss.call), weighted and
                    # reduced here as Keras's compile does; a function's per-sample value too
                    per_sample = isinstance(fn, _losses.Loss)
                    value = fn.call(target, out) if per_sample else fn(target, out)
                    if value.shape.ndims != 0:
                        shape = [-1] + [1] * ((value.shape.ndims or 1) - 1)
                        value = value * hb.reshape(sw, shape)
                        summed = per_sample and fn.reduction == "sum"
                        value = hb.reduce_sum(value) if summed else hb.reduce_mean(value)
                out_losses.append(value if w is None else value * float(w))
                if multi:
                    names.append(f"{name}_loss")
                    metric_tensors.append(value)
                for mid in _as_list(mids):
                    mfn = _metrics.get_for_loss(mid, fn, out.shape.as_list())
                    # TF1's names: "acc" for accuracy, else the function's ("mae" ->
                    # mean_absolute_error)
                    label = "acc" if mid in ("accuracy", "acc") else mfn.__name__
                    names.append(f"{name}_{label}" if multi else label)
                    with hb.name_scope(f"metrics/{label}"):
                        metric_tensors.append(hb.reduce_mean(mfn(target, out)))
            with hb.name_scope("loss"):
                total = hb.add_n(out_losses) if multi else out_losses[0]
                if self.losses:
                    total = total + hb.add_n([hb.cast(x, total.dtype) for x in self.losses])
            with hb.name_scope("training"):
                params = self.trainable_weights
                if not params:
                    raise ValueError(f"model {self.name!r} has no trainable weights to fit")
                train_op = self.optimizer.minimize(total, var_list=params)
                updates = hb.group(train_op, *self.updates)
        self._compiled = {
            "targets": targets,
            "sample_weights": sample_weights,
            "loss_fns": loss_fns,
            "total": total,
            "metrics": metric_tensors,
            "train": updates,
        }
        self.metrics_names = names

    def _ready(self, x: Any) -> dict:
        if not self.outputs:
            self._build_from_data(x)
        if self._compile_args is None:
            raise RuntimeError(
                f"model {self.name!r} must be compiled before training or evaluating: "
                "model.compile(optimizer, loss)"
            )
        if self._compiled is None:
            self._build_training()
        return self._compiled

    # ---- data --------------------------------------------------------------------------------
    def _inputs_feed(self, x: Any) -> list[np.ndarray]:
        """The input arrays in the order of ``self.inputs`` (a dict by input name), checked
        against the inputs' shapes and for one number of samples."""
        xs = [np.asarray(a) for a in _by_name(x, [t.op.name for t in self.inputs])]
        if len(xs) != len(self.inputs):
            raise ValueError(
                f"model {self.name!r} expects {len(self.inputs)} input array(s), got {len(xs)}"
            )
        for t, a in zip(self.inputs, xs):
            want = t.shape.as_list()
            ok = a.ndim == len(want) and all(w is None or w == d for w, d in zip(want, a.shape))
            if not ok:
                raise ValueError(
                    f"Error when checking input: expected {t.op.name} to have shape "
                    f"{tuple(want[1:])} but got array with shape {a.shape[1:]}"
                )
        if len({len(a) for a in xs}) > 1:
            raise ValueError(
                "All input arrays (x) should have the same number of samples. Got array shapes: "
                + str([a.shape for a in xs])
            )
        return xs

    def _targets_feed(self, y: Any) -> list[np.ndarray]:
        names = [_out_name(t) for t in self.outputs]
        ys = [np.asarray(a) for a in _by_name(y, names)]
        if len(ys) != len(self.outputs):
            raise ValueError(
                f"model {self.name!r} has {len(self.outputs)} output(s), got {len(ys)} target arrays"
            )
        out = []
        for t, a in zip(self.outputs, ys):
            rank = t.shape.ndims
            if a.ndim == rank - 1:
                a = a[..., None]
            if a.ndim != rank or a.ndim == 0:
                raise ValueError(
                    f"Error when checking target: expected {_out_name(t)} to have {rank} "
                    f"dimensions, but got array with shape {a.shape}"
                )
            out.append(a)
        if len({len(a) for a in out}) > 1:
            raise ValueError(
                "All target arrays (y) should have the same number of samples. Got array "
                "shapes: " + str([a.shape for a in out])
            )
        return out

    def _weights_feed(self, sample_weight: Any, ys: list[np.ndarray]) -> list:
        """One 1-D weight array (or None) per output: ``sample_weight`` is one array for every
        output, a list with one per output, or a dict by output name. Each must have one weight
        per target sample."""
        names = [_out_name(t) for t in self.outputs]
        if sample_weight is None:
            return [None] * len(ys)
        if isinstance(sample_weight, dict):
            unknown = [k for k in sample_weight if k not in names]
            if unknown:
                raise ValueError(
                    f"Unknown entries in sample_weight dictionary: {unknown}. Only expected "
                    f"following keys: {names}"
                )
            sws = [sample_weight.get(n) for n in names]
        elif (
            len(names) > 1
            and isinstance(sample_weight, (list, tuple))
            and len(sample_weight) == len(names)
            and all(w is None or np.ndim(w) >= 1 for w in sample_weight)
        ):
            sws = list(sample_weight)
        else:
            sws = [sample_weight] * len(names)
        out: list = []
        for w, y in zip(sws, ys):
            if w is None:
                out.append(None)
                continue
            w = np.asarray(w, dtype=np.float64)
            if w.ndim != 1:
                raise ValueError(
                    f"Found a sample_weight array with shape {w.shape}. hetbed's keras takes "
                    "sample-wise weights only (no sample_weight_mode='temporal'): make sure "
                    "your sample_weight array is 1D."
                )
            if w.shape != y.shape[:1]:
                raise ValueError(
                    f"Found a sample_weight array with shape {w.shape} for an input with shape "
                    f"{y.shape}. sample_weight cannot be broadcast."
                )
            out.append(w)
        return out

    def _standardize(self, x: Any, y: Any, sample_weight: Any = None) -> tuple:
        """Inputs, targets and weights checked as Keras checks them before running any step:
        shapes, one number of samples for all, targets that fit the output for its loss."""
        xs = self._inputs_feed(x)
        ys = self._targets_feed(y)
        sws = self._weights_feed(sample_weight, ys)
        if xs and ys and len(xs[0]) != len(ys[0]):
            raise ValueError(
                "Input arrays should have the same number of samples as target arrays. Found "
                f"{len(xs[0])} input samples and {len(ys[0])} target samples."
            )
        for a, fn, t in zip(ys, self._compiled["loss_fns"], self.outputs):
            _check_loss_and_target(a, fn, tuple(t.shape.as_list()))
        return xs, ys, sws

    def _feed(self, xs: list, ys: list | None, idx: Any, sws: Any, training: bool) -> dict:
        feed = {t: a[idx] for t, a in zip(self.inputs, xs)}
        if ys is not None:
            c = self._compiled
            sws = sws or [None] * len(ys)
            for t, s, a, w in zip(c["targets"], c["sample_weights"], ys, sws):
                feed[t] = a[idx]
                feed[s] = np.ones(len(feed[t]), np.float32) if w is None else w[idx]
        feed.update(K._phase_feed(training))
        return feed

    # ---- one batch ---------------------------------------------------------------------------
    def train_on_batch(self, x: Any, y: Any = None, sample_weight: Any = None, **kw: Any) -> Any:
        c = self._ready(x)
        xs, ys, sws = self._standardize(x, y, sample_weight)
        _not_empty(len(xs[0]), "train_on_batch got 0 samples")
        out = self._run([c["train"], c["total"], *c["metrics"]], xs, ys, slice(None), sws)
        return _scalar_or_list(out[1:])

    def test_on_batch(self, x: Any, y: Any = None, sample_weight: Any = None, **kw: Any) -> Any:
        c = self._ready(x)
        xs, ys, sws = self._standardize(x, y, sample_weight)
        _not_empty(len(xs[0]), "test_on_batch got 0 samples")
        out = self._run([c["total"], *c["metrics"]], xs, ys, slice(None), sws, False)
        return _scalar_or_list(out)

    def predict_on_batch(self, x: Any) -> Any:
        if not self.outputs:
            self._build_from_data(x)
        xs = self._inputs_feed(x)
        out = self._run(list(self.outputs), xs, None, slice(None), None, False)
        return out[0] if len(out) == 1 else out

    def _run(self, fetches: list, xs, ys, idx, sws, training: bool = True) -> list:
        return K.get_session().run(fetches, self._feed(xs, ys, idx, sws, training))

    # ---- loops -------------------------------------------------------------------------------
    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: int | None = None,
        epochs: int = 1,
        verbose: int = 1,
        callbacks: Sequence | None = None,
        validation_split: float = 0.0,
        validation_data: Any = None,
        shuffle: Any = True,
        class_weight: Any = None,
        sample_weight: Any = None,
        initial_epoch: int = 0,
        steps_per_epoch: Any = None,
        validation_steps: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Train for ``epochs`` over numpy arrays; returns the History callback (``.history``
        maps 'loss', each metric and 'val_' ones to per-epoch values). Shuffling uses numpy's
        global random state, as Keras does. All the data (validation data too) is checked
        before the first step, so a bad argument changes no weight."""
        from .callbacks import CallbackList, History

        if class_weight is not None:
            raise NotImplementedError("fit: class_weight is not supported; use sample_weight")
        if steps_per_epoch is not None:
            raise NotImplementedError("fit: steps_per_epoch (tensor inputs) is not supported")
        bs = _batch_size(batch_size)
        split = validation_split or 0.0
        if not 0.0 <= split < 1.0:
            raise ValueError(f"fit: validation_split must be in [0, 1), got {validation_split}")
        c = self._ready(x)
        xs, ys, sws = self._standardize(x, y, sample_weight)
        val = None
        if validation_data is not None:
            if not isinstance(validation_data, (list, tuple)) or len(validation_data) not in (2, 3):
                raise ValueError(
                    "When passing a `validation_data` argument, it must contain either 2 items "
                    "(x_val, y_val), or 3 items (x_val, y_val, val_sample_weights). However we "
                    f"received `validation_data={_short(validation_data)}`"
                )
            val = self._standardize(*validation_data)
            if not len(val[0][0]):
                raise ValueError("fit: validation_data holds 0 samples")
        elif split:
            n_all = len(xs[0])
            cut = int(n_all * (1.0 - split))
            val = (
                [a[cut:] for a in xs],
                [a[cut:] for a in ys],
                [None if w is None else w[cut:] for w in sws],
            )
            xs, ys = [a[:cut] for a in xs], [a[:cut] for a in ys]
            sws = [None if w is None else w[:cut] for w in sws]
            _not_empty(
                cut, f"fit got {n_all} samples and validation_split={split} holds out all of them"
            )
        n = len(xs[0])
        _not_empty(n, "fit got 0 samples")
        self.history = History()
        cbs = CallbackList([self.history, *(callbacks or [])], self)
        cbs.set_params(
            {"batch_size": bs, "epochs": epochs, "steps": None, "samples": n, "verbose": verbose}
        )
        if verbose:
            print(
                f"Train on {n} samples" + (f", validate on {len(val[0][0])} samples" if val else "")
            )
        self.stop_training = False
        cbs.call("on_train_begin")
        fetches = [c["train"], c["total"], *c["metrics"]]
        for epoch in range(initial_epoch, epochs):
            cbs.call("on_epoch_begin", epoch)
            order = np.arange(n)
            if shuffle:
                np.random.shuffle(order)
            start = time.perf_counter()
            sums = np.zeros(len(fetches) - 1)
            for b, lo in enumerate(range(0, n, bs)):
                idx = order[lo : lo + bs]
                cbs.call("on_batch_begin", b, {"batch": b, "size": len(idx)})
                vals = self._run(fetches, xs, ys, idx, sws)[1:]
                sums += np.asarray(vals, dtype=np.float64) * len(idx)
                logs = {"batch": b, "size": len(idx)}
                logs.update(zip(self.metrics_names, (float(v) for v in vals)))
                cbs.call("on_batch_end", b, logs)
                if self.stop_training:
                    break
            epoch_logs = dict(zip(self.metrics_names, (float(v) for v in sums / n)))
            if val is not None:
                scores = self._evaluate_arrays(*val, bs)
                epoch_logs.update(
                    {f"val_{k}": float(v) for k, v in zip(self.metrics_names, scores)}
                )
            if verbose:
                _print_epoch(epoch, epochs, n, time.perf_counter() - start, epoch_logs, verbose)
            cbs.call("on_epoch_end", epoch, epoch_logs)
            if self.stop_training:
                break
        cbs.call("on_train_end")
        return self.history

    def evaluate(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: int | None = None,
        verbose: int = 1,
        sample_weight: Any = None,
        steps: Any = None,
        callbacks: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The loss (and metrics: a list) over ``x``, ``y``: means over the samples."""
        bs = _batch_size(batch_size)
        self._ready(x)
        xs, ys, sws = self._standardize(x, y, sample_weight)
        n = len(xs[0])
        _not_empty(n, "evaluate got 0 samples")
        start = time.perf_counter()
        means = self._evaluate_arrays(xs, ys, sws, bs)
        if verbose == 1:
            logs = dict(zip(self.metrics_names, means))
            print(_progress(n, time.perf_counter() - start, logs))
        return means[0] if len(means) == 1 else means

    def _evaluate_arrays(self, xs: list, ys: list, sws: list, bs: int) -> list[float]:
        c = self._compiled
        n = len(xs[0])
        fetches = [c["total"], *c["metrics"]]
        sums = np.zeros(len(fetches))
        for lo in range(0, n, bs):
            idx = np.arange(lo, min(lo + bs, n))
            sums += np.asarray(self._run(fetches, xs, ys, idx, sws, False)) * len(idx)
        return [float(v) for v in sums / n]

    def predict(
        self, x: Any, batch_size: int | None = None, verbose: int = 0, steps: Any = None, **kw: Any
    ) -> Any:
        """The outputs for ``x``, computed batch by batch (learning phase: test); for 0 samples,
        empty arrays of the outputs' shapes."""
        bs = _batch_size(batch_size)
        if not self.outputs:
            self._build_from_data(x)
        xs = self._inputs_feed(x)
        n = len(xs[0])
        parts: list[list] = [[] for _ in self.outputs]
        for lo in range(0, max(n, 1), bs):  # one (empty) batch for 0 samples
            idx = np.arange(lo, min(lo + bs, n))
            for p, v in zip(parts, self._run(list(self.outputs), xs, None, idx, None, False)):
                p.append(v)
        outs = [np.concatenate(p) for p in parts]
        return outs[0] if len(outs) == 1 else outs


def _by_name(data: Any, names: list[str]) -> list:
    """``data`` as a list in the order of ``names``: a dict must hold every name."""
    if isinstance(data, dict):
        for n in names:
            if n not in data:
                raise ValueError(f'No data provided for "{n}". Need data for each key in: {names}')
        return [data[n] for n in names]
    return _as_list(data)


def _check_loss_and_target(y: np.ndarray, loss: Any, shape: tuple) -> None:
    """Keras's check that a target fits its loss: categorical_crossentropy takes one-hot rows,
    and mean_squared_error, binary_crossentropy and categorical_crossentropy take targets of
    the output's shape."""
    if _losses.is_categorical_crossentropy(loss) and y.shape[-1] == 1:
        raise ValueError(
            f"You are passing a target array of shape {y.shape} while using as loss "
            "`categorical_crossentropy`. `categorical_crossentropy` expects targets to be binary "
            "matrices (1s and 0s) of shape (samples, classes). If your targets are integer "
            "classes, you can convert them to the expected format via "
            "`keras.utils.to_categorical(y_int)`, or use the loss "
            "`sparse_categorical_crossentropy` instead, which does expect integer targets."
        )
    if _losses.expects_output_shape(loss):
        for target_dim, out_dim in zip(y.shape[1:], shape[1:]):
            if out_dim is not None and target_dim != out_dim:
                raise ValueError(
                    f"A target array with shape {y.shape} was passed for an output of shape "
                    f"{shape} while using as loss `{_losses.name_of(loss)}`. This loss expects "
                    "targets to have the same shape as the output."
                )


def _batch_size(batch_size: Any) -> int:
    if batch_size is None:
        return 32
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    return int(batch_size)


def _not_empty(n: int, what: str) -> None:
    if n == 0:
        raise ValueError(f"Empty training data. ({what})")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _scalar_or_list(values: list) -> Any:
    vals = [np.float32(v) for v in values]
    return vals[0] if len(vals) == 1 else vals


def _fmt(logs: dict) -> str:
    parts = []
    for k, v in logs.items():
        parts.append(f" - {k}: {v:.4f}" if abs(v) > 1e-3 else f" - {k}: {v:.4e}")
    return "".join(parts)


def _progress(n: int, seconds: float, logs: dict) -> str:
    per = seconds / max(n, 1)
    unit = (
        f"{per:.0f}s" if per >= 1 else f"{per * 1e3:.0f}ms" if per >= 1e-3 else f"{per * 1e6:.0f}us"
    )
    return f"{n}/{n} [{'=' * 30}] - {seconds:.0f}s {unit}/sample{_fmt(logs)}"


def _print_epoch(epoch: int, epochs: int, n: int, seconds: float, logs: dict, verbose: int) -> None:
    if verbose == 1:
        print(f"Epoch {epoch + 1}/{epochs}")
        print(_progress(n, seconds, logs))
    else:
        print(f"Epoch {epoch + 1}/{epochs}")
        print(f"{n}/{n} - {seconds:.0f}s{_fmt(logs)}")
