"""All-reduce schedules as flows: a ring (NCCL's ring) and a double binary tree (NCCL's tree).

Both are written once over three callbacks, so that the op-level simulation
(``SimRendezvous.all_reduce``, ranks are devices) and the step-level driver (``AllReduceRing``
with ``algorithm="tree"``, ranks are workers) run the same schedule on the one network model:

- ``send(i, j, nbytes, arrived)``: a flow of ``nbytes`` from rank ``i`` to rank ``j``;
  ``arrived()`` when its last byte is there;
- ``after(seconds, fn)``: ``fn()`` that much later (a rank adding a received chunk into its own);
- ``done(j)``: rank ``j`` holds the whole result.

``add_s[j]`` is what adding one received chunk costs rank ``j`` (0: free); ``alive()`` says
whether the step still runs (a failed step's flows finish but start nothing more).

**Ring** (``ring_all_reduce``): 2(n-1) rounds; in each, rank i sends a chunk of nbytes/n to rank
i+1. Rank i sends round r once it has received round r-1 (and, in the n-1 reduce-scatter rounds,
added it) and its own round r-1 has arrived. Equal links of bandwidth b and latency L, nothing
else on them: 2(n-1) (L + nbytes/(n b)).

**Double binary tree** (``tree_all_reduce``): two binary trees over the ranks, each reducing and
broadcasting half of the buffer: tree A in heap order (rank 0 the root, the parent of rank v is
(v-1)//2), tree B the same over the ranks in reverse order (rank n-1 the root), so that a rank
that is a leaf in one tree is an inner node in the other and every link carries about the same
load. Each half is cut into chunks of at most ``chunk_bytes`` (at most ``max_chunks``), which
pipeline: a rank sends chunk j to its parent once it has received (and added) chunk j from every
child and its own chunk j-1 has arrived; the root then holds chunk j's sum and sends it down; a
rank forwards a chunk to each child as it arrives, one chunk at a time per child. A rank is done
when it holds every chunk of both halves. In the latency-bound regime (a tiny buffer) this takes
2 d L for trees of depth d = floor(log2 n), against the ring's 2 (n-1) L.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

#: chunk size of the tree's pipeline (NCCL's tree works in chunks of this order) and the most
#: chunks one half is cut into (it bounds the flows a simulated all-reduce makes)
TREE_CHUNK_BYTES = 1 << 20
TREE_MAX_CHUNKS = 64

Send = Callable[[int, int, float, Callable[[], None]], None]
After = Callable[[float, Callable[[], None]], None]


def ring_all_reduce(
    n: int,
    nbytes: float,
    send: Send,
    after: After,
    done: Callable[[int], None],
    add_s: Sequence[float] | None = None,
    alive: Callable[[], bool] = lambda: True,
) -> None:
    """Start a ring all-reduce of ``nbytes`` per rank among ``n`` ranks (module docstring)."""
    if n <= 1:
        for j in range(n):
            done(j)
        return
    adds = list(add_s) if add_s is not None else [0.0] * n
    chunk = nbytes / n
    last = 2 * (n - 1) - 1
    got = [0] * n  # rounds rank i has received (and reduced)
    sent = [0] * n  # rounds of rank i that have arrived at i+1

    def go(i: int) -> None:
        r = sent[i]
        send(i, (i + 1) % n, chunk, lambda: arrived(i, r))

    def arrived(i: int, r: int) -> None:
        if not alive():
            return
        j = (i + 1) % n
        sent[i] = r + 1
        if r < last and got[i] > r:  # i had received round r already: it sends r + 1
            go(i)
        if r == last:
            done(j)
        elif r < n - 1 and adds[j] > 0.0:  # reduce-scatter: j adds the chunk first
            after(adds[j], lambda: received(j, r))
        else:
            received(j, r)

    def received(j: int, r: int) -> None:
        if not alive():
            return
        got[j] = r + 1
        if sent[j] == r + 1:  # j's own round r has arrived too
            go(j)

    for i in range(n):
        go(i)


def tree_parents(n: int) -> tuple[list[int], list[int]]:
    """The parent of every rank in trees A and B (-1 at a root)."""
    a = [(v - 1) // 2 if v else -1 for v in range(n)]
    b = []
    for r in range(n):
        pos = n - 1 - r  # tree B: heap order over the ranks reversed
        b.append(-1 if pos == 0 else n - 1 - (pos - 1) // 2)
    return a, b


def tree_depth(n: int) -> int:
    """Depth of a binary tree of ``n`` ranks in heap order (0 for one rank)."""
    return int(math.floor(math.log2(n))) if n > 0 else 0


def tree_all_reduce(
    n: int,
    nbytes: float,
    send: Send,
    after: After,
    done: Callable[[int], None],
    add_s: Callable[[float], Sequence[float]] | Sequence[float] | None = None,
    alive: Callable[[], bool] = lambda: True,
    chunk_bytes: float = TREE_CHUNK_BYTES,
    max_chunks: int = TREE_MAX_CHUNKS,
) -> None:
    """Start a double-binary-tree all-reduce of ``nbytes`` per rank among ``n`` ranks (module
    docstring). ``add_s``: per rank, seconds to add one received chunk; or a function of the
    chunk's bytes giving them."""
    if n <= 1:
        for j in range(n):
            done(j)
        return
    half = nbytes / 2
    k = max(1, min(int(max_chunks), math.ceil(half / chunk_bytes) if half > 0 else 1))
    c = half / k
    if add_s is None:
        adds = [0.0] * n
    elif callable(add_s):
        adds = list(add_s(c))
    else:
        adds = list(add_s)
    trees_done = [0] * n

    def finished(v: int) -> None:
        trees_done[v] += 1
        if trees_done[v] == 2:
            done(v)

    for parent in tree_parents(n):
        _Tree(n, parent, k, c, send, after, adds, alive, finished).start()


class _Tree:
    """One binary tree's pipelined reduce and broadcast (``tree_all_reduce``)."""

    def __init__(self, n, parent, k, c, send, after, adds, alive, finished):
        self.parent = parent
        self.children: list[list[int]] = [[] for _ in range(n)]
        for v, p in enumerate(parent):
            if p >= 0:
                self.children[p].append(v)
        self.root = parent.index(-1)
        self.k, self.c = k, c
        self.send, self.after, self.adds = send, after, adds
        self.alive, self.finished = alive, finished
        self.counts = [[0] * k for _ in range(n)]  # chunk j received from how many children
        # chunks reduced at v (in order; leaves: all of theirs)
        self.ready = [0 if self.children[v] else k for v in range(n)]
        self.up_next = [0] * n  # the next chunk v sends to its parent
        self.up_busy = [False] * n
        self.have = [0] * n  # chunks of the result v holds (in order)
        self.down_next = [dict.fromkeys(ch, 0) for ch in self.children]
        self.down_busy = [dict.fromkeys(ch, False) for ch in self.children]

    def start(self) -> None:
        for v in range(len(self.parent)):
            if v != self.root:
                self._up(v)

    # ---- reduce: chunks go up ---------------------------------------------------------------

    def _up(self, v: int) -> None:
        j = self.up_next[v]
        if self.up_busy[v] or j >= self.k or j >= self.ready[v]:
            return
        self.up_busy[v] = True
        self.send(v, self.parent[v], self.c, lambda: self._up_arrived(v, j))

    def _up_arrived(self, v: int, j: int) -> None:
        if not self.alive():
            return
        self.up_busy[v] = False
        self.up_next[v] = j + 1
        self._up(v)
        p = self.parent[v]
        if self.adds[p] > 0.0:
            self.after(self.adds[p], lambda: self._reduced(p, j))
        else:
            self._reduced(p, j)

    def _reduced(self, p: int, j: int) -> None:
        if not self.alive():
            return
        self.counts[p][j] += 1
        moved = False
        while self.ready[p] < self.k and self.counts[p][self.ready[p]] == len(self.children[p]):
            self.ready[p] += 1
            moved = True
        if not moved:
            return
        if p == self.root:
            self.have[p] = self.ready[p]
            self._down_all(p)
            if self.have[p] == self.k:
                self.finished(p)
        else:
            self._up(p)

    # ---- broadcast: the sums go down ---------------------------------------------------------

    def _down_all(self, v: int) -> None:
        for ch in self.children[v]:
            self._down(v, ch)

    def _down(self, v: int, ch: int) -> None:
        j = self.down_next[v][ch]
        if self.down_busy[v][ch] or j >= self.have[v]:
            return
        self.down_busy[v][ch] = True
        self.send(v, ch, self.c, lambda: self._down_arrived(v, ch, j))

    def _down_arrived(self, v: int, ch: int, j: int) -> None:
        if not self.alive():
            return
        self.down_busy[v][ch] = False
        self.down_next[v][ch] = j + 1
        self._down(v, ch)
        self.have[ch] = j + 1
        self._down_all(ch)
        if self.have[ch] == self.k:
            self.finished(ch)
