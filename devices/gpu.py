"""GPU device on cupy (CUDA). Present only when cupy imports and sees a CUDA device.

Kernels written against ``ctx.xp`` run here unchanged (cupy mirrors numpy); kernels registered
for "cpu" only fall back to a CPU device under soft placement, with Send/Recv copying the tensor.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .base import Device


def cupy_or_none() -> Any:
    """The cupy module when it imports and a CUDA device is visible, else None."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return cupy
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device: no GPU here
        return None


def gpu_devices(task: str, limit: int | None = None, threads: int = 0) -> list[Device]:
    cp = cupy_or_none()
    if cp is None or limit == 0:
        return []
    n = cp.cuda.runtime.getDeviceCount()
    if limit is not None:
        n = min(n, limit)
    return [GPUDevice(f"{task}/device:gpu:{i}", i, cp) for i in range(n)]


class GPUDevice(Device):
    """One CUDA device. Kernels, host-to-device copies and reads are enqueued on the device's own
    stream (``self.stream``), so a copy made on another thread (Recv on the rendezvous thread)
    is ordered before the kernels that consume it.

    The stream is a blocking one by default (ordered with the legacy default stream, which plain
    ``cupy`` calls on other threads use); ``non_blocking = True`` makes it a non-blocking stream,
    which stays correct because every hand-off to another stream synchronises (``synchronize``).
    """

    device_type = "gpu"
    #: kernels are enqueued inline, on the calling thread, on this device's one stream: the order
    #: of the stream stands in for completion (as in TensorFlow's GPU executor), so a step on one
    #: GPU takes the straight-line schedule and the host runs ahead of the kernels
    synchronous = True
    #: ...except when a StepObserver watches the step (traces, calibration): then the executor
    #: hands each node to ``run``, which completes it when its kernels have finished on the GPU,
    #: so that what is timed is kernels, not launches. ``run_step`` waits for the stream at the
    #: end of every step (TensorFlow's sync_on_finish), so a step returns with its work done.
    kernels_on_stream = True
    non_blocking = False

    def __init__(self, name: str, index: int, cupy: Any):
        self.index = index
        self.cp = cupy
        self.xp = cupy
        with cupy.cuda.Device(index):
            free, total = cupy.cuda.runtime.memGetInfo()
            self.stream = cupy.cuda.Stream(non_blocking=self.non_blocking)
        super().__init__(name, int(total))
        self._spec: Any = None
        self._pending: queue.SimpleQueue | None = None
        self._thread: threading.Thread | None = None
        self._waiter_lock = threading.Lock()

    @property
    def memory_in_use_bytes(self) -> int:  # type: ignore[override]
        """Bytes this device's memory pool has handed out (cupy's pool is per device)."""
        with self.cp.cuda.Device(self.index):
            return int(self.cp.get_default_memory_pool().used_bytes())

    @memory_in_use_bytes.setter
    def memory_in_use_bytes(self, v: int) -> None:
        if v:  # Device.__init__ sets 0; any other value would be a lie about real memory
            raise AttributeError(
                f"{self.name}: memory_in_use_bytes is read from the device's memory pool"
            )

    def bind_kernel(self, fn: Callable) -> Callable:
        """``fn`` as the executor calls it inline: on this device and its stream, host arrays
        among the inputs (fed values) copied here first."""
        device, stream, here = self.cp.cuda.Device(self.index), self.stream, self._here
        ndarray = np.ndarray

        def on_gpu(ctx: Any, *ins: Any) -> Any:
            with device, stream:
                for x in ins:
                    if isinstance(x, ndarray):
                        return fn(ctx, *[here(y) for y in ins])
                return fn(ctx, *ins)

        return on_gpu

    def run(self, node: Any, inputs: list, done: Callable, step: Any = None) -> None:
        """Enqueue the node's kernels; ``done`` fires when they have finished on the GPU (an event
        recorded after them completes), so traces and calibration time kernels, not launches.
        The executor calls it only for an observed step (see ``kernels_on_stream``)."""
        try:
            with self.cp.cuda.Device(self.index), self.stream:
                ins = [self._here(x) for x in inputs]
                r = node.fn(node.ctx, *ins)
                ev = self.cp.cuda.Event(disable_timing=True)
                ev.record(self.stream)
        except Exception as e:  # noqa: BLE001 - handed to the executor, which names the node
            done(None, e)
            return
        self._waiter().put((ev, done, r))

    def _waiter(self) -> queue.SimpleQueue:
        """The queue of this device's completion thread (started on first use)."""
        with self._waiter_lock:
            if self._pending is None:
                self._pending = queue.SimpleQueue()
                t = threading.Thread(
                    target=self._complete_loop,
                    args=(self._pending,),
                    name=f"{self.name} completions",
                    daemon=True,
                )
                t.start()
                self._thread = t
            return self._pending

    def _complete_loop(self, pending: queue.SimpleQueue) -> None:
        # One stream: kernels finish in the order they were enqueued, so events are waited in order.
        while True:
            item = pending.get()
            if item is None:
                return
            ev, done, r = item
            try:
                with self.cp.cuda.Device(self.index):
                    ev.synchronize()
            except Exception as e:  # noqa: BLE001 - a failed kernel fails its node
                done(None, e)
                continue
            done(r)

    def close(self) -> None:
        """Stop the completion thread after the completions already queued."""
        with self._waiter_lock:
            pending, self._pending = self._pending, None
            t, self._thread = self._thread, None
        if pending is not None:
            pending.put(None)
            if t is not None and t is not threading.current_thread():
                t.join(timeout=10)

    def _here(self, x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.dtype.kind in "biufc":  # strings stay on the host
            return self.cp.asarray(x)
        return x

    def synchronize(self) -> None:
        """Wait until every kernel enqueued on this device's stream has finished."""
        self.stream.synchronize()

    def to_device(self, value: Any) -> Any:
        """``value`` on this device: host data copied in, another GPU's array copied over (its
        producer must have synchronised, as Send does), on this device's stream."""
        cp = self.cp
        with cp.cuda.Device(self.index), self.stream:
            if isinstance(value, cp.ndarray):
                if value.device.id == self.index:
                    return value
                return value.copy()  # cupy copies to the current device
            return cp.asarray(value)

    def to_host(self, value: Any) -> Any:
        if not isinstance(value, self.cp.ndarray):
            return value
        with self.cp.cuda.Device(value.device.id):
            return value.get(stream=self.stream if value.device.id == self.index else None)

    def spec(self) -> Any:
        """The catalog entry of this GPU (matched by its name), or None when none matches."""
        if self._spec is None:
            self._spec = catalog_spec(self.model()) or False
        return self._spec or None

    def model(self) -> str:
        props = self.cp.cuda.runtime.getDeviceProperties(self.index)
        n = props["name"]
        return n.decode() if isinstance(n, bytes) else str(n)

    def perf(self) -> tuple[float, float, float]:
        """(peak FLOP/s, memory bytes/s, launch s) of the detected GPU's catalog entry; a GPU not
        in the catalog gets the generic estimate (and ``describe`` says so)."""
        s = self.spec()
        if s is None:
            return (50e12, 2e12, 5e-6)
        return (s.peak("float32"), s.memory_rate, s.kernel_launch_overhead_s)

    def link(self, other: Device) -> tuple[float, float]:
        """(bytes/s, latency s) from ``other``: the peer link between two GPUs of the same model,
        the host link otherwise, as the catalog entry says."""
        from .catalog import load_link

        s = self.spec()
        if s is None:
            return (20e9, 10e-6)
        key = s.host_link
        if (
            other.device_type == "gpu"
            and s.peer_link
            and getattr(other, "spec", lambda: None)() == s
        ):
            key = s.peer_link
        if key is None:
            return (20e9, 10e-6)
        ln = load_link(key)
        return (ln.bandwidth_bytes_per_s, ln.latency_s)

    def describe(self) -> dict:
        d = super().describe()
        d["model"] = self.model()
        s = self.spec()
        d["catalog"] = s.key if s is not None else None
        return d


# (substring of the CUDA device name, lower case) -> catalog key; first match wins
_MODELS = [
    ("h100", "h100_sxm5"),
    ("a100", "a100_sxm4_40gb"),
    ("v100", "v100_sxm2"),
    ("p100", "p100_sxm2"),
    ("k80", "k80"),
    ("k40", "k40"),
    ("titan x", "titan_x_maxwell"),
]


def catalog_spec(model: str) -> Any:
    """The catalog device for a CUDA device name such as ``"Tesla V100-SXM2-16GB"``, or None."""
    from .catalog import load_device

    m = model.lower()
    for sub, key in _MODELS:
        if sub in m:
            return load_device(key)
    return None
