"""Memory accounting of simulated devices through the buffer lifetimes of a step.

``BufferAccounting`` is a step observer (the executor calls ``node_finished`` and
``step_finished``; see runtime/executor.py's StepObserver) that the simulated devices' session
hands to the executor: when a node whose outputs are new buffers finishes, their bytes are
allocated on its device (``device.alloc(nbytes, op)``, which may raise the device's
out-of-memory error and so fail the node); the outputs of a node that returns a view share its
input 0's buffer. A buffer is freed on its producer's device (``device.free(nbytes)``) when the
last consumer of the last slot holding it has finished; what is still charged when the step ends
(fetched values, or everything after a failure) is freed then.
"""

from __future__ import annotations

from typing import Any

#: per node: its outputs are new buffers, or views of its input 0 (0: neither, e.g. ref outputs)
ALLOCATES, VIEWS = 1, 2


def charges_of(nodes: list) -> list[int]:
    """Each prepared node's ``ALLOCATES``/``VIEWS``/0 (ref-typed or output-less nodes: 0)."""
    out = []
    for n in nodes:
        if n.op.op_def.is_ref or not n.n_out:
            out.append(0)
        else:
            out.append(VIEWS if n.kernel.aliases_input else ALLOCATES)
    return out


class BufferAccounting:
    """One step's buffer charges on the devices of ``prepared``'s nodes (see the module doc)."""

    __slots__ = ("charges", "charged", "owner", "shares", "slot_node")

    def __init__(self, prepared: Any, charges: list[int]):
        n = prepared.n_slots
        self.charges = charges
        self.charged = [0] * n  # bytes charged for the buffer each slot owns
        self.owner = list(range(n))  # the slot whose buffer a slot uses (views: another)
        self.shares = [0] * n  # live slots sharing a buffer, beyond the first
        self.slot_node = prepared.slot_node

    def node_started(self, node: Any) -> None:
        pass

    def node_finished(self, node: Any, r: Any, released: Any = ()) -> None:
        how = self.charges[node.index]
        charged = self.charged
        if how == ALLOCATES:
            if node.n_out == 1:
                s = node.outs[0]
                if s is not None:
                    n = getattr(r, "nbytes", 0)
                    if n:
                        node.device.alloc(n, node.op)  # may raise the simulated OOM
                        charged[s] = n
            else:
                sizes = [
                    (s, getattr(v, "nbytes", 0)) for s, v in zip(node.outs, r) if s is not None
                ]
                total = sum(n for _s, n in sizes)
                if total:  # all or none
                    node.device.alloc(total, node.op)
                    for s, n in sizes:
                        charged[s] = n
        elif how == VIEWS:  # the outputs share input 0's buffer and keep it alive
            owner, shares = self.owner, self.shares
            b = owner[node.ins[0]]
            for s in node.outs:
                if s is not None:
                    owner[s] = b
                    shares[b] += 1
        if released:
            owner, shares = self.owner, self.shares
            for s in released:
                b = owner[s]
                if shares[b]:
                    shares[b] -= 1  # another slot still holds the buffer
                else:
                    n = charged[b]
                    if n:
                        charged[b] = 0
                        self.slot_node[b].device.free(n)

    def step_finished(self, prepared: Any, error: BaseException | None) -> None:
        """Free what is still charged: the fetched buffers (they go to the client), or all of
        it after a failure."""
        charged, slot_node = self.charged, self.slot_node
        if error is None:
            slots: Any = {self.owner[s] for s in prepared.fetch_slots if s is not None}
        else:
            slots = range(len(charged))
        for s in slots:
            if charged[s]:
                slot_node[s].device.free(charged[s])
                charged[s] = 0
