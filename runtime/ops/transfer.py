"""_Send and _Recv: the two ends of a cut edge, meeting at the step's rendezvous.

Both are asynchronous kernels (``fn(ctx, step, inputs, done)``). With ``compress`` set, a float32
tensor travels as float16 and is cast back on arrival (the paper's lossy parameter transfers).
"""

from __future__ import annotations

import numpy as np

from ..registry import DEAD, Cost, defop, nbytes

Send = defop("_Send", stateful=True, differentiable=False)


@Send.shape
def _send_shape(op):
    return []


@Send.kernel("cpu", "gpu", is_async=True, inline_in_order=True)
def _send(ctx, step, inputs, done):
    if inputs and inputs[0] is DEAD:  # an untaken branch: the receiver's side is dead too
        step.rendezvous.send(ctx.attrs["key"], DEAD)
        done(None)
        return
    if inputs:
        v = inputs[0]
        if ctx.attrs["compress"]:
            v = v.astype(np.float16)
        v = ctx.device.to_host(v) if ctx.attrs.get("to_host") else v
        if not isinstance(v, np.ndarray):
            # a device array leaves its stream: the receiver reads it on another stream (or the
            # host), so the kernels that made it must have finished
            sync = getattr(ctx.device, "synchronize", None)
            if sync is not None:
                sync()
    else:
        v = _EMPTY
    step.rendezvous.send(ctx.attrs["key"], v)
    done(None)


_EMPTY = np.zeros(0, dtype=np.bool_)
_EMPTY.setflags(write=False)


@Send.cost
def _send_cost(op, ins, outs):
    b = nbytes(ins[0], op.inputs[0].dtype) if ins else 0
    return Cost(0.0, float(b), 0.0)


Recv = defop("_Recv", stateful=True, differentiable=False)


@Recv.shape
def _recv_shape(op):
    return [(op.outputs[0].shape, op.attrs["dtype"])]


@Recv.kernel("cpu", "gpu", is_async=True, inline_in_order=True)
def _recv(ctx, step, inputs, done):
    compress = ctx.attrs["compress"]
    dev = ctx.device

    def arrived(value=None, error=None):
        if error is not None:
            done(None, error)
            return
        if value is DEAD:
            done(DEAD)
            return
        if compress:
            value = value.astype(np.float32)
        done(dev.to_device(value))

    step.rendezvous.recv(ctx.attrs["key"], arrived)


@Recv.cost
def _recv_cost(op, ins, outs):
    b = nbytes(outs[0], op.outputs[0].dtype) if outs else 0
    return Cost(0.0, 0.0, float(b))
