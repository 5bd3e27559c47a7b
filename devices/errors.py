"""Error types, named as in TensorFlow 1.x so that programs catching them keep working.

They live here, below the runtime, so that devices (a simulated device's out-of-memory error) and
the runtime raise the same classes; ``hetbed.runtime.errors`` re-exports them.
"""

from __future__ import annotations

#: TensorFlow's error codes (its ``error_codes.proto``), as ``tf.errors`` lists them
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND = 0, 1, 2, 3, 4, 5
ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION = 6, 7, 8, 9
ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS = 10, 11, 12, 13, 14, 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """An error raised while building or running an op; ``op`` names it when known.

    Made as hetbed makes it, ``OpError(message, op=None)``, or as TF1 programs do,
    ``OutOfRangeError(node_def, op, message)`` (three arguments, or ``message=`` with
    ``node_def=``); ``node_def``, ``op``, ``message`` and ``error_code`` as TF's."""

    error_code = UNKNOWN

    def __init__(self, *args: object, **kwargs: object):
        if len(args) >= 3 or "node_def" in kwargs:  # TF's (node_def, op, message[, code])
            names = ("node_def", "op", "message", "error_code")
            got = dict(zip(names, args))
            for k in list(kwargs):
                if k not in names or k in got:
                    raise TypeError(f"{type(self).__name__}: unexpected argument {k!r}")
                got[k] = kwargs.pop(k)
            node_def, op, message = got.get("node_def"), got.get("op"), got.get("message", "")
            if got.get("error_code") is not None:
                self.error_code = int(got["error_code"])  # type: ignore[call-overload]
        else:
            if len(args) > 2 or set(kwargs) - {"message", "op"}:
                raise TypeError(
                    f"{type(self).__name__}: expected (message, op=None) or (node_def, op, "
                    f"message), got {len(args)} arguments and {sorted(kwargs)}"
                )
            message = args[0] if args else kwargs.get("message", "")
            op = args[1] if len(args) > 1 else kwargs.get("op")
            node_def = None
        message = "" if message is None else str(message)
        super().__init__(message)
        self.message = message
        self.op = op
        self.node_def = node_def


class InvalidArgumentError(OpError, ValueError):
    """Bad shapes, dtypes, feeds or attribute values."""

    error_code = INVALID_ARGUMENT


class NotFoundError(OpError, KeyError):
    """A named thing (device, checkpoint, tensor) does not exist."""

    error_code = NOT_FOUND

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return self.message


class FailedPreconditionError(OpError):
    """The system is not in a state to run the op (e.g. an uninitialized variable)."""

    error_code = FAILED_PRECONDITION


class UnimplementedError(OpError, NotImplementedError):
    """No kernel or rule exists for what was asked."""

    error_code = UNIMPLEMENTED


class DataLossError(OpError):
    """Stored data is corrupt or truncated (e.g. a checkpoint with a bad checksum)."""

    error_code = DATA_LOSS


class ResourceExhaustedError(OpError, MemoryError):
    """A device ran out of memory (real or simulated)."""

    error_code = RESOURCE_EXHAUSTED


class DeadlineExceededError(OpError, TimeoutError):
    """A step or remote call did not finish in time."""

    error_code = DEADLINE_EXCEEDED


class AbortedError(OpError):
    """A step was cancelled because another part of it failed."""

    error_code = ABORTED


class UnauthenticatedError(OpError):
    """A server rejected the cluster token (missing or wrong)."""

    error_code = UNAUTHENTICATED


class UnavailableError(OpError):
    """A task of the cluster cannot be reached."""

    error_code = UNAVAILABLE


class OutOfRangeError(OpError):
    """Iteration ran past the end: a dequeue from a closed, empty queue. MonitoredTrainingSession
    takes it as a clean stop (as TF's does)."""

    error_code = OUT_OF_RANGE


class CancelledError(OpError):
    """An operation was cancelled: an enqueue into a closed queue, or one waiting for room when
    the queue was closed with ``cancel_pending_enqueues``."""

    error_code = CANCELLED


class InternalError(OpError):
    """A server failed in a way that is not the request's fault."""

    error_code = INTERNAL


class AlreadyExistsError(OpError, FileExistsError):
    """What was to be created exists already (a file, a directory)."""

    error_code = ALREADY_EXISTS


class UnknownError(OpError):
    """An error of no other kind (TF's UNKNOWN)."""


class PermissionDeniedError(OpError, PermissionError):
    """The caller may not do what it asked (TF's PERMISSION_DENIED)."""

    error_code = PERMISSION_DENIED
