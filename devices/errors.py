"""Error types, named as in TensorFlow 1.x so that programs catching them keep working.

They live here, below the runtime, so that devices (a simulated device's out-of-memory error) and
the runtime raise the same classes; ``hetbed.runtime.errors`` re-exports them.
"""

from __future__ import annotations


class OpError(Exception):
    """An error raised while building or running an op; ``op`` names it when known."""

    def __init__(self, message: str, op: object = None):
        super().__init__(message)
        self.message = message
        self.op = op


class InvalidArgumentError(OpError, ValueError):
    """Bad shapes, dtypes, feeds or attribute values."""


class NotFoundError(OpError, KeyError):
    """A named thing (device, checkpoint, tensor) does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return self.message


class FailedPreconditionError(OpError):
    """The system is not in a state to run the op (e.g. an uninitialized variable)."""


class UnimplementedError(OpError, NotImplementedError):
    """No kernel or rule exists for what was asked."""


class DataLossError(OpError):
    """Stored data is corrupt or truncated (e.g. a checkpoint with a bad checksum)."""


class ResourceExhaustedError(OpError, MemoryError):
    """A device ran out of memory (real or simulated)."""


class DeadlineExceededError(OpError, TimeoutError):
    """A step or remote call did not finish in time."""


class AbortedError(OpError):
    """A step was cancelled because another part of it failed."""


class UnauthenticatedError(OpError):
    """A server rejected the cluster token (missing or wrong)."""


class UnavailableError(OpError):
    """A task of the cluster cannot be reached."""


class OutOfRangeError(OpError):
    """Iteration ran past the end: a dequeue from a closed, empty queue. MonitoredTrainingSession
    takes it as a clean stop (as TF's does)."""


class CancelledError(OpError):
    """An operation was cancelled: an enqueue into a closed queue, or one waiting for room when
    the queue was closed with ``cancel_pending_enqueues``."""


class InternalError(OpError):
    """A server failed in a way that is not the request's fault."""


class AlreadyExistsError(OpError, FileExistsError):
    """What was to be created exists already (a file, a directory)."""
