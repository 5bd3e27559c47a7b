"""``hb.test`` (TF1's ``tf.test``): a unittest TestCase with sessions and array assertions, and
``main``, so TF1 test files run on hetbed."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import unittest
from collections.abc import Iterator
from typing import Any

import numpy as np

from hetbed.runtime.graph import Graph, Tensor, get_default_graph, reset_default_graph
from hetbed.runtime.session import Session, get_default_session

__all__ = [
    "TestCase",
    "main",
    "is_gpu_available",
    "gpu_device_name",
    "is_built_with_cuda",
    "is_built_with_gpu_support",
    "get_temp_dir",
    "compute_gradient",
    "compute_gradient_error",
]

_TEMP_DIR: str | None = None


def get_temp_dir() -> str:
    """A temporary directory for this process's tests (made once, removed at exit)."""
    global _TEMP_DIR
    if _TEMP_DIR is None:
        import atexit

        _TEMP_DIR = tempfile.mkdtemp(prefix="hetbed_test_")
        atexit.register(shutil.rmtree, _TEMP_DIR, True)
    return _TEMP_DIR


def main(argv: list[str] | None = None) -> Any:
    """Run the tests of ``__main__`` (``unittest.main``)."""
    return unittest.main(argv=argv)


def _gpus() -> list:
    from hetbed.devices import local_devices

    return [d for d in local_devices(None) if "gpu" in d.name.rsplit("/", 1)[-1].lower()]


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability: Any = None) -> bool:
    """Whether a Session here would have a GPU (cupy with a CUDA device)."""
    return bool(_gpus())


def gpu_device_name() -> str:
    """The first GPU's device name ("/device:GPU:0"), or "" without one."""
    gpus = _gpus()
    return "/device:GPU:0" if gpus else ""


def is_built_with_cuda() -> bool:
    """Whether GPU kernels can run here: cupy imports and sees a CUDA device."""
    from hetbed.devices.gpu import cupy_or_none

    return cupy_or_none() is not None


is_built_with_gpu_support = is_built_with_cuda


def _listify(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def compute_gradient(
    x: Any,
    x_shape: Any,
    y: Any,
    y_shape: Any,
    x_init_value: Any = None,
    delta: float = 1e-3,
    init_targets: Any = None,
    extra_feed_dict: dict | None = None,
) -> Any:
    """TF1's ``tf.test.compute_gradient`` in the default session: for each x, the (theoretical,
    numerical) Jacobians of shape (x size, y size); the numerical one by central differences
    of step ``delta``, at ``x_init_value`` (default: uniform in [-1, 1), seed 0)."""
    from hetbed.runtime.gradients import gradients
    from hetbed.runtime.ops.array import placeholder

    sess = get_default_session()
    if sess is None:
        raise ValueError("compute_gradient needs a default session (use `with sess.as_default()`)")
    if init_targets is not None:
        sess.run(init_targets)
    xs, shapes = _listify(x), _listify(x_shape) if isinstance(x, (list, tuple)) else [x_shape]
    inits = _listify(x_init_value) if isinstance(x, (list, tuple)) else [x_init_value]
    if x_init_value is None:
        inits = [None] * len(xs)
    rng = np.random.default_rng(0)
    values = [
        np.asarray(v, t.dtype.np) if v is not None else rng.uniform(-1, 1, s).astype(t.dtype.np)
        for t, s, v in zip(xs, shapes, inits)
    ]
    dy = placeholder(y.dtype, list(y_shape))
    grads = gradients(y, xs, grad_ys=dy)
    feed = dict(extra_feed_dict or {})
    base = {**feed, **dict(zip(xs, values))}
    ny = int(np.prod(y_shape))
    out = []
    for i, (t, v) in enumerate(zip(xs, values)):
        theory = np.zeros((v.size, ny))
        for j in range(ny):
            onehot = np.zeros(ny, y.dtype.np)
            onehot[j] = 1
            g = (
                sess.run(grads[i], {**base, dy: onehot.reshape(y_shape)})
                if grads[i] is not None
                else 0
            )
            theory[:, j] = np.asarray(g, float).reshape(-1) if np.ndim(g) else 0.0
        numeric = np.zeros((v.size, ny))
        for k in range(v.size):
            hi, lo = v.copy().reshape(-1), v.copy().reshape(-1)
            hi[k] += delta
            lo[k] -= delta
            y_hi = sess.run(y, {**base, t: hi.reshape(v.shape)})
            y_lo = sess.run(y, {**base, t: lo.reshape(v.shape)})
            numeric[k] = (np.asarray(y_hi, float) - np.asarray(y_lo, float)).reshape(-1) / (
                2 * delta
            )
        out.append((theory, numeric))
    return out if isinstance(x, (list, tuple)) else out[0]


def compute_gradient_error(
    x: Any,
    x_shape: Any,
    y: Any,
    y_shape: Any,
    x_init_value: Any = None,
    delta: float = 1e-3,
    init_targets: Any = None,
    extra_feed_dict: dict | None = None,
) -> float:
    """The largest absolute difference between the theoretical and numerical Jacobians."""
    res = compute_gradient(
        x, x_shape, y, y_shape, x_init_value, delta, init_targets, extra_feed_dict
    )
    pairs = res if isinstance(x, (list, tuple)) else [res]
    return float(max((np.max(np.abs(a - b)) if a.size else 0.0) for a, b in pairs))


def _value(x: Any) -> Any:
    if isinstance(x, Tensor) or hasattr(x, "_as_graph_element"):
        sess = get_default_session()
        if sess is None:
            raise ValueError(f"cannot evaluate {x!r} without a default session")
        return sess.run(x)
    return x


class TestCase(unittest.TestCase):
    """TF1's ``tf.test.TestCase``: each test starts on a fresh default graph; ``session()`` and
    ``cached_session()`` give hetbed Sessions (made the default), ``evaluate`` runs tensors, and
    the ``assertAll*`` methods compare arrays (tensors are evaluated first)."""

    def __init__(self, methodName: str = "runTest") -> None:
        super().__init__(methodName)
        # set here too, as TF's __init__ does: a subclass's setUp need not call ours
        # (tensorflow-wavenet's tests do not)
        self._cached: Session | None = None
        self._cached_cm: Any = None

    def setUp(self) -> None:
        super().setUp()
        if self._testMethodName == "test_session":
            self.skipTest("Not a test (TF1's test_session helper).")
        reset_default_graph()
        self._cached: Session | None = None
        self._cached_cm: Any = None

    def tearDown(self) -> None:
        self._close_cached()
        super().tearDown()

    def _close_cached(self) -> None:
        if getattr(self, "_cached_cm", None) is not None:
            self._cached_cm.close()
        self._cached, self._cached_cm = None, None

    def get_temp_dir(self) -> str:
        return get_temp_dir()

    # ---- sessions --------------------------------------------------------------------------
    @contextlib.contextmanager
    def session(
        self, graph: Graph | None = None, config: Any = None, use_gpu: bool = False, **_: Any
    ) -> Iterator[Session]:
        """A new Session on ``graph`` (the default graph if None), the default while open."""
        g = graph if graph is not None else get_default_graph()
        sess = Session(graph=g, config=config)
        try:
            with g.as_default(), sess.as_default():
                yield sess
        finally:
            sess.close()

    @contextlib.contextmanager
    def cached_session(
        self, graph: Graph | None = None, config: Any = None, use_gpu: bool = False, **_: Any
    ) -> Iterator[Session]:
        """The same Session for the whole test (closed in tearDown), the default while open."""
        g = graph if graph is not None else get_default_graph()
        if self._cached is None or self._cached.graph is not g:
            self._close_cached()
            self._cached_cm = contextlib.ExitStack()
            self._cached = Session(graph=g, config=config)
            self._cached_cm.callback(self._cached.close)
        with g.as_default(), self._cached.as_default():
            yield self._cached

    test_session = cached_session

    def evaluate(self, tensors: Any) -> Any:
        """Run ``tensors`` (any fetch structure) in the default session, or a cached one."""
        sess = get_default_session()
        if sess is None:
            with self.cached_session() as s:
                return s.run(tensors)
        return sess.run(tensors)

    # ---- assertions ------------------------------------------------------------------------
    def assertAllClose(self, a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-6, msg=None):  # noqa: N802
        a, b = _value(a), _value(b)
        if isinstance(a, dict) and isinstance(b, dict):
            self.assertEqual(sorted(a), sorted(b), msg)
            for k in a:
                self.assertAllClose(a[k], b[k], rtol, atol, msg)
            return
        if isinstance(a, (list, tuple)) and a and not np.isscalar(a[0]) and len(a) == len(b):
            try:
                np.asarray(a, dtype=float)
            except (ValueError, TypeError):
                for x, y in zip(a, b):
                    self.assertAllClose(x, y, rtol, atol, msg)
                return
        a, b = np.asarray(a), np.asarray(b)
        self.assertEqual(a.shape, b.shape, f"shape mismatch: {a.shape} vs {b.shape}. {msg or ''}")
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg or "", equal_nan=True)

    def assertAllCloseAccordingToType(  # noqa: N802
        self,
        a: Any,
        b: Any,
        rtol: float = 1e-6,
        atol: float = 1e-6,
        float_rtol: float = 1e-6,
        float_atol: float = 1e-6,
        half_rtol: float = 1e-3,
        half_atol: float = 1e-3,
        bfloat16_rtol: float = 1e-2,
        bfloat16_atol: float = 1e-2,
        msg: Any = None,
    ) -> None:
        """assertAllClose with tolerances widened for float32 and float16 operands."""
        a, b = np.asarray(_value(a)), np.asarray(_value(b))
        kinds = {a.dtype.type, b.dtype.type}
        if np.float32 in kinds:
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if np.float16 in kinds:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)

    def assertAllEqual(self, a: Any, b: Any, msg: Any = None) -> None:  # noqa: N802
        a, b = np.asarray(_value(a)), np.asarray(_value(b))
        self.assertEqual(a.shape, b.shape, f"shape mismatch: {a.shape} vs {b.shape}. {msg or ''}")
        np.testing.assert_array_equal(a, b, err_msg=msg or "")

    def assertNotAllClose(self, a: Any, b: Any, **kw: Any) -> None:  # noqa: N802
        try:
            self.assertAllClose(a, b, **kw)
        except AssertionError:
            return
        raise AssertionError("the two values are close at all elements")

    def assertAllGreater(self, a: Any, comparison_target: Any) -> None:  # noqa: N802
        self.assertGreater(np.min(np.asarray(_value(a))), comparison_target)

    def assertAllLess(self, a: Any, comparison_target: Any) -> None:  # noqa: N802
        self.assertLess(np.max(np.asarray(_value(a))), comparison_target)

    def assertShapeEqual(self, np_array: Any, tf_tensor: Any, msg: Any = None) -> None:  # noqa: N802
        """The numpy array's shape equals the tensor's static shape."""
        if not isinstance(tf_tensor, Tensor):
            raise TypeError(f"tf_tensor must be a Tensor, got {type(tf_tensor).__name__}")
        self.assertEqual(list(np.shape(np_array)), tf_tensor.shape.as_list(), msg=msg)

    def assertArrayNear(self, farray1: Any, farray2: Any, err: float, msg: Any = None) -> None:  # noqa: N802
        """Two float lists of equal length whose entries differ by at most ``err``."""
        self.assertEqual(len(farray1), len(farray2), msg=msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg=msg)

    def assertNear(self, f1: float, f2: float, err: float, msg: Any = None) -> None:  # noqa: N802
        self.assertTrue(
            f1 == f2 or abs(f1 - f2) <= err,
            f"{f1!r} != {f2!r} +/- {err!r}{' : ' + msg if msg else ''}",
        )

    def assertNDArrayNear(self, ndarray1: Any, ndarray2: Any, err: float, msg: Any = None) -> None:  # noqa: N802
        self.assertTrue(np.linalg.norm(np.asarray(ndarray1) - np.asarray(ndarray2)) <= err, msg)
