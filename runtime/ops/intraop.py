"""Intra-op parallelism for the CPU kernels: one op's work split into blocks run on threads.

The large CPU kernels (convolutions by patch GEMMs or Winograd's algorithm, large MatMul and
BatchMatMul; ReLU, bias add and max pooling over large tensors, by rows or images) cut their
work into blocks and run them on a small pool of threads, each thread
taking the next block not yet taken and multiplying it with numpy's BLAS on that thread alone
(BLAS is held to one thread while any op runs blocks on threads; its count comes back when the
last one ends). This is TensorFlow's intra-op thread pool, with numpy's BLAS as the per-thread
GEMM.

Why not BLAS's own threads: OpenBLAS's workers spin on their core for a while after each
threaded call (about 0.1 s) waiting for more work, so a step that alternates threaded GEMMs with
compiled single-threaded loops (patch building, Winograd's transforms, pooling, elementwise ops)
runs those loops beside a core that spins uselessly, and any second thread of ours finds its
core taken. Measured on a 2-core machine, the CNN training step of bench/cnn_step.py (one
process, rounds alternating): 21.4 ms with BLAS's threads, 18.2 ms with convolutions on our
threads but the dense layers' GEMMs on BLAS's (their workers still spinning), 14.9 ms with every
large GEMM on our threads (SkylakeX kernels; Haswell kernels 24.4 / 25.2 / 17.9 ms). On a
machine shared with other jobs threads help again: a thread the OS deschedules delays only its
own block, where BLAS's split makes each GEMM wait for its slowest thread.

``HETBED_INTRA_OP_THREADS`` (``HETBED_CONV_THREADS`` is its older name) sets the threads: a
number (1 runs the blocks in turn on the calling thread, each GEMM on BLAS's own threads), or
``auto`` (the default): as many as numpy's BLAS may use, at most the CPUs this process may run
on. Where no single BLAS library can be found and set (threadpoolctl), blocks run in turn.
"""

from __future__ import annotations

import itertools
import os
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from ..threadname import name_this_thread


def _threads_from_env() -> int | None:
    name = "HETBED_INTRA_OP_THREADS"
    if name not in os.environ and "HETBED_CONV_THREADS" in os.environ:
        name = "HETBED_CONV_THREADS"
    v = os.environ.get(name, "").strip().lower()
    if v in ("", "auto"):
        return None
    try:
        return max(1, int(v))
    except ValueError:
        warnings.warn(f"{name}={v!r} is neither a number nor 'auto': using 'auto'", stacklevel=2)
        return None


THREADS: int | None = _threads_from_env()

_pool: ThreadPoolExecutor | None = None
_blas: Any = None  # threadpoolctl's controller of numpy's BLAS; False: none found
_blas_lock = threading.Lock()
_blas_users = 0  # ops running with BLAS on one thread
_blas_saved = 1  # BLAS's thread count before the first of them


_cpus: int | None = None  # CPUs this process may run on (read once)
_fast: Any = None  # (get, set) of BLAS's thread count


def _reset_after_fork() -> None:
    global _pool, _blas_lock, _blas_users, _cpus
    _pool, _blas_lock, _blas_users, _cpus = None, threading.Lock(), 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def cpus() -> int:
    """The CPUs this process may run on (read once per process)."""
    global _cpus
    if _cpus is None:
        try:
            _cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            _cpus = os.cpu_count() or 1
    return _cpus


def numpy_blas() -> Any:
    """threadpoolctl's controller of the BLAS numpy uses, or False when there is no single one
    (then blocks run in turn, each GEMM on BLAS's own threads)."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            libs = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
            libs = [c for c in libs if "numpy" in str(c.filepath)] or libs
            _blas = libs[0] if len(libs) == 1 else False
        except Exception:  # noqa: BLE001 - no threadpoolctl, or it cannot read the library
            _blas = False
    return _blas


def _blas_threads() -> tuple[Callable[[], int], Callable[[int], Any]]:
    """(get, set) of numpy's BLAS thread count. For OpenBLAS on its own pthreads pool (one pool
    and one count for the whole process), OpenBLAS's functions themselves: threadpoolctl's
    setter only obeys the first Python thread that used it while that thread lives, so a count
    set to one by a step on one thread (a server's handler) and given back by a step on
    another would stay at one. Otherwise threadpoolctl's."""
    global _fast
    if _fast is None:
        ctl = numpy_blas()
        get = put = None
        if ctl and getattr(ctl, "internal_api", "") == "openblas":
            if getattr(ctl, "threading_layer", "") == "pthreads":
                try:
                    get = ctl._get_symbol("openblas_get_num_threads")
                    put = ctl._get_symbol("openblas_set_num_threads")
                except Exception:  # noqa: BLE001 - a threadpoolctl without it: its own API
                    get = put = None
        if get is None or put is None:
            get, put = ctl.get_num_threads, ctl.set_num_threads
        _fast = (get, put)
    return _fast


def threads_for(nblocks: int) -> int:
    """How many threads run ``nblocks`` blocks: 1 (in turn, on the calling thread) unless there
    are at least two blocks and a BLAS whose threads can be set."""
    if nblocks < 2:
        return 1
    if not numpy_blas():
        return 1
    if THREADS is not None:
        want = THREADS
    else:
        with _blas_lock:  # while another op holds BLAS at one thread, its count from before
            have = _blas_saved if _blas_users else _blas_threads()[0]()
        want = min(have, cpus())
    return max(1, min(want, nblocks))


def hold_one_blas_thread() -> None:
    """numpy's BLAS on one thread from now until the matching ``release_blas``; the count it
    had before comes back when the last holder releases it."""
    global _blas_users, _blas_saved
    get, put = _blas_threads()
    with _blas_lock:
        if _blas_users == 0:
            _blas_saved = get()
            put(1)
        _blas_users += 1


def release_blas() -> None:
    global _blas_users
    with _blas_lock:
        _blas_users -= 1
        if _blas_users == 0:
            _blas_threads()[1](_blas_saved)


@contextmanager
def one_blas_thread():
    """numpy's BLAS on one thread while any op runs its blocks on threads (see
    ``hold_one_blas_thread``)."""
    hold_one_blas_thread()
    try:
        yield
    finally:
        release_blas()


def run_blocks(
    nblocks: int, threads: int, scratch: Callable[[], Any], work: Callable[[int, Any], None]
) -> None:
    """``work(i, buf)`` for each block i: in turn when ``threads`` is 1, else on ``threads``
    threads (the caller one of them), each with its own ``buf = scratch()``, each taking the next
    block not yet taken. The caller returns once every block is done, not waiting for a helper
    that has not started (on a busy machine it may start late, and then finds nothing to take);
    the first error of a block is raised, and the blocks not yet taken are skipped."""
    global _pool
    if threads <= 1:
        buf = scratch()
        for i in range(nblocks):
            work(i, buf)
        return
    taken = itertools.count()
    errors: list[BaseException] = []
    done = [0]
    lock = threading.Lock()
    finished = threading.Event()

    def loop() -> None:
        buf = None
        while (i := next(taken)) < nblocks:
            try:
                if not errors:
                    if buf is None:
                        buf = scratch()
                    work(i, buf)
            except BaseException as e:  # noqa: BLE001 - raised by the caller below
                errors.append(e)
            with lock:
                done[0] += 1
                if done[0] == nblocks:
                    finished.set()

    with one_blas_thread():
        if _pool is None or _pool._max_workers < threads - 1:
            _pool = ThreadPoolExecutor(
                max(threads - 1, cpus() - 1),
                "hetbed-intraop",
                initializer=name_this_thread,
                initargs=("hetbed-intraop",),
            )
        for _ in range(threads - 1):
            _pool.submit(loop)
        loop()
        finished.wait()
    if errors:
        raise errors[0]


# ---- compiled loops over rows ---------------------------------------------------------------

# A loop over at least this many elements is split over the threads, one block per thread (a
# helper's wake-up, 20-100 us, would cost more than a smaller loop gains).
_SPLIT_ELEMS = 1 << 18


def chunks(n: int, per_item: int, fn: Callable[[int, int], None]) -> None:
    """``fn(i0, i1)`` over the items [0, n) in consecutive chunks, one per intra-op thread, when
    the items hold at least _SPLIT_ELEMS elements (``per_item`` each); else one call
    ``fn(0, n)``. For loops whose items are independent (elementwise ops, pooling by image), so
    the result does not depend on the split."""
    threads = threads_for(n) if n * per_item >= _SPLIT_ELEMS else 1
    if threads <= 1:
        fn(0, n)
        return
    per = -(-n // threads)
    run_blocks(
        -(-n // per), threads, lambda: None, lambda i, _b: fn(i * per, min(n, i * per + per))
    )


# ---- GEMMs ---------------------------------------------------------------------------------

# Below this many multiply-adds a GEMM runs as one call (BLAS keeps small products on the
# calling thread anyway, and a helper's wake-up, 20-100 us, would cost more than it saves).
_MATMUL_SPLIT_MACS = 1 << 21
_MIN_BLOCK_ROWS = 16


def matmul(a, b):
    """``a @ b`` for numpy float arrays (2-D, or stacks of them broadcast as np.matmul does),
    split over the intra-op threads by rows of the result (or by the stack's leading axis) when
    large enough; the same as ``np.matmul`` within rounding otherwise."""
    import numpy as np

    if a.dtype == np.float16 and b.dtype == np.float16:  # numpy's half GEMM is hundreds of
        # times slower than its float32 one: computed in float32, rounded once (as oneDNN)
        return matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype.kind not in "fc":
        return a @ b
    m, k = a.shape[-2:]
    n = b.shape[-1]
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    batch = int(np.prod(lead)) if lead else 1
    if batch * m * n * k < _MATMUL_SPLIT_MACS or (batch < 2 and max(m, n) < 2 * _MIN_BLOCK_ROWS):
        return a @ b
    if batch >= 2:  # a stack: blocks of whole matrices
        a_b = np.broadcast_to(a, lead + (m, k)).reshape(batch, m, k)
        b_b = np.broadcast_to(b, lead + (k, n)).reshape(batch, k, n)
        out = np.empty((batch, m, n), dtype=a.dtype)
        threads = threads_for(batch)
        if threads <= 1:
            return a @ b
        per = -(-batch // threads)

        def stack(i: int, _buf) -> None:
            s = slice(i * per, min((i + 1) * per, batch))
            np.matmul(a_b[s], b_b[s], out=out[s])

        run_blocks(-(-batch // per), threads, lambda: None, stack)
        return out.reshape(lead + (m, n))
    a2, b2 = a.reshape(m, k), b.reshape(k, n)
    threads = threads_for(2)
    if threads <= 1:
        return a @ b
    out = np.empty((m, n), dtype=a.dtype)
    # One block per thread, cut across the longer side of the result: each block's GEMM packs
    # the other operand again, so the smaller one is repacked (rows: b; columns: a). Two
    # threads on 64x3136 @ 3136x256 (SkylakeX kernels): by rows of 16, 0.52 ms; by columns,
    # 0.26 ms, BLAS's own two threads 0.29 ms.
    if n > m:
        per = -(-n // threads)

        def cols(i: int, _buf) -> None:
            c = slice(i * per, min((i + 1) * per, n))
            np.matmul(a2, b2[:, c], out=out[:, c])

        run_blocks(-(-n // per), threads, lambda: None, cols)
    else:
        per = -(-m // threads)

        def rows(i: int, _buf) -> None:
            r = slice(i * per, min((i + 1) * per, m))
            np.matmul(a2[r], b2, out=out[r])

        run_blocks(-(-m // per), threads, lambda: None, rows)
    return out.reshape(lead + (m, n)) if lead else out


# Ops whose CPU kernels split their GEMMs over the intra-op threads: a step that runs one holds
# numpy's BLAS at one thread throughout (executor.run_step), so that no other kernel of the step
# leaves BLAS's workers spinning on the cores those threads need.
SPLIT_OPS = frozenset(
    {
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Conv2D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
    }
)


_usable: bool | None = None


def wanted() -> bool:
    """Whether ops split their work over threads here: more than one thread allowed, more than
    one CPU and a BLAS whose threads can be set."""
    global _usable
    if THREADS == 1:
        return False
    if _usable is None:
        _usable = bool(numpy_blas()) and cpus() > 1
    return _usable
