"""The compiled core of a step program's replay (see ``program.py``).

``replay`` runs the executor's timed schedule (``run_clocked``) and the network's fluid max-min
model (``Network``) on arrays: every branch below mirrors one there, in the same order and with
the same floating-point operations, so that a replayed step gives the full schedule's results to
the last bit. It is compiled with numba when numba is installed (a dependency of hetbed) and
runs as plain Python otherwise (same results, much slower).

Arrays are int64 or float64; CSR pairs (``*_ptr``, ``*_idx``) hold per-node and per-flow lists.
"""

from __future__ import annotations

import heapq

import numpy as np

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a dependency; plain Python still works

    def njit(*_args, **_kwargs):  # type: ignore[no-redef]
        return lambda fn: fn


from hetbed.devices.memory import ALLOCATES, VIEWS

from .network import _REL_EPS as REL_EPS
from .program import SEND, TIMED

_ARRIVE, _RECOMPUTE, _TIMER = 0, 1, 2  # clock events of the network

# int state (``ist``): flows in flight, a recomputation pending, the timer version, the clock's
# event counter, the network's flow counter, recomputations, completions queued, dirty links,
# finished flows, whether a timer is armed, the marking epoch, an error
ACTIVE, PENDING, TV, EID, SEQ, RECOMP, CTAIL, NDIRTY, NFIN, HAS_AT, EPOCH, ERR = range(12)
N_IST = 12

# the network tuple (``net``) the helpers share: flow paths (CSR), each link's flows in
# arrival order, int and float rows per flow (FI, FF) and per link (LI, LFL), the finish
# heap, the clock's events, the armed timer's time
(
    N_FL_PTR,
    N_FL_LINKS,
    N_LF,
    N_FI,
    N_FF,
    N_LI,
    N_LFL,
    N_FHEAP,
    N_EVENTS,
    N_FST,
) = range(10)
# rows of FI
(
    R_FRECV,
    R_FSEQ,
    R_MOVING,
    R_FVER,
    R_FORDER,
    R_RSTATE,
    R_COMP_F,
    R_FSEEN,
    R_RATED,
) = range(9)
# rows of FF
(
    R_FSIZE,
    R_FREM,
    R_FRATE,
    R_FT0,
    R_FFIN,
    R_FFIRST,
    R_FEND,
    R_NEWRATE,
) = range(8)
# rows of LI
(
    R_LFCNT,
    R_DIRTY,
    R_DFLAG,
    R_COMP_L,
    R_LSEEN,
    R_COUNT,
) = range(6)
# rows of LFL
(
    R_BW,
    R_LLOAD,
    R_LSINCE,
    R_LBYTES,
    R_LBUSY,
    R_CAP,
) = range(6)


@njit(cache=True)
def _tol(t):
    """network._time_tol: a few units in the last place of ``t``."""
    x = abs(t)
    if x < 1.0:
        x = 1.0
    return 4.0 * (np.nextafter(x, np.inf) - x)


@njit(cache=True)
def _settle(k, now, lload, lsince, lbytes, lbusy):
    dt = now - lsince[k]
    if lload[k] > 0 and dt > 0:
        lbytes[k] += lload[k] * dt
        lbusy[k] += dt
    lsince[k] = now


@njit(cache=True)
def _schedule(events, t, code, arg, ist):
    heapq.heappush(events, (t, ist[EID], code, arg))
    ist[EID] += 1


@njit(cache=True)
def _mark_dirty(k, dirty, dflag, ist):
    if not dflag[k]:
        dflag[k] = 1
        dirty[ist[NDIRTY]] = k
        ist[NDIRTY] += 1


@njit(cache=True)
def _clear_dirty(dirty, dflag, ist):
    for j in range(ist[NDIRTY]):
        dflag[dirty[j]] = 0
    ist[NDIRTY] = 0


@njit(cache=True)
def _finish_flow(f, now, net, ist, comps):
    fl_ptr = net[N_FL_PTR]
    fl_links = net[N_FL_LINKS]
    frecv = net[N_FI][R_FRECV]
    lf = net[N_LF]
    lfcnt = net[N_LI][R_LFCNT]
    moving = net[N_FI][R_MOVING]
    fver = net[N_FI][R_FVER]
    fend = net[N_FF][R_FEND]
    forder = net[N_FI][R_FORDER]
    rstate = net[N_FI][R_RSTATE]
    dirty = net[N_LI][R_DIRTY]
    dflag = net[N_LI][R_DFLAG]
    a = fl_ptr[f]
    b = fl_ptr[f + 1]
    if b > a and moving[f]:  # it was transferring (not zero bytes)
        moving[f] = 0
        ist[ACTIVE] -= 1
        for p in range(a, b):
            k = fl_links[p]
            c = lfcnt[k]
            j = 0
            while lf[k, j] != f:
                j += 1
            for q in range(j, c - 1):
                lf[k, q] = lf[k, q + 1]
            lfcnt[k] = c - 1
            _mark_dirty(k, dirty, dflag, ist)
    fver[f] = -1
    fend[f] = now
    forder[ist[NFIN]] = f
    ist[NFIN] += 1
    if rstate[f] == 1:  # its Recv waits: it completes now
        comps[ist[CTAIL]] = frecv[f]
        ist[CTAIL] += 1
    else:
        rstate[f] = 2


@njit(cache=True)
def _arm_timer(now, net, ist):
    fver, fheap, events, fst = net[N_FI][R_FVER], net[N_FHEAP], net[N_EVENTS], net[N_FST]
    while len(fheap) and fheap[0][2] != fver[fheap[0][3]]:
        heapq.heappop(fheap)  # a rate changed since, or the flow finished
    has = 1 if len(fheap) else 0
    at = fheap[0][0] if has else 0.0
    if has == ist[HAS_AT] and (not has or at == fst[0]):
        return
    ist[TV] += 1
    ist[HAS_AT] = has
    fst[0] = at
    if has:
        d = at - now
        _schedule(events, now + (d if d > 0.0 else 0.0), _TIMER, ist[TV], ist)


@njit(cache=True)
def _request_recompute(now, net, ist):
    if not ist[PENDING]:
        ist[PENDING] = 1
        _schedule(net[N_EVENTS], now + 0.0, _RECOMPUTE, 0, ist)


@njit(cache=True)
def _start_alone(f, now, net, ist):
    fl_ptr = net[N_FL_PTR]
    fl_links = net[N_FL_LINKS]
    fseq = net[N_FI][R_FSEQ]
    bw = net[N_LFL][R_BW]
    lf = net[N_LF]
    lfcnt = net[N_LI][R_LFCNT]
    moving = net[N_FI][R_MOVING]
    fver = net[N_FI][R_FVER]
    frem = net[N_FF][R_FREM]
    frate = net[N_FF][R_FRATE]
    ffin = net[N_FF][R_FFIN]
    lload = net[N_LFL][R_LLOAD]
    lsince = net[N_LFL][R_LSINCE]
    lbytes = net[N_LFL][R_LBYTES]
    lbusy = net[N_LFL][R_LBUSY]
    fheap = net[N_FHEAP]
    rate = np.inf
    for p in range(fl_ptr[f], fl_ptr[f + 1]):
        k = fl_links[p]
        _settle(k, now, lload, lsince, lbytes, lbusy)
        lf[k, lfcnt[k]] = f
        lfcnt[k] += 1
        if bw[k] < rate:
            rate = bw[k]
    moving[f] = 1
    for p in range(fl_ptr[f], fl_ptr[f + 1]):
        lload[fl_links[p]] = rate
    frate[f] = rate
    fver[f] += 1
    ffin[f] = now + frem[f] / rate
    heapq.heappush(fheap, (ffin[f], fseq[f], fver[f], f))
    _arm_timer(now, net, ist)


@njit(cache=True)
def _arrive(f, now, net, ist, comps):
    fl_ptr = net[N_FL_PTR]
    fl_links = net[N_FL_LINKS]
    fsize = net[N_FF][R_FSIZE]
    lf = net[N_LF]
    lfcnt = net[N_LI][R_LFCNT]
    moving = net[N_FI][R_MOVING]
    ft0 = net[N_FF][R_FT0]
    ffirst = net[N_FF][R_FFIRST]
    dirty = net[N_LI][R_DIRTY]
    dflag = net[N_LI][R_DFLAG]
    ffirst[f] = now
    a = fl_ptr[f]
    b = fl_ptr[f + 1]
    if fsize[f] == 0 or b == a:
        _finish_flow(f, now, net, ist, comps)
        return
    ft0[f] = now
    ist[ACTIVE] += 1
    alone = True
    for p in range(a, b):
        if lfcnt[fl_links[p]]:
            alone = False
            break
    if alone:  # every link idle: the flow gets its narrowest link at once
        _start_alone(f, now, net, ist)
        return
    for p in range(a, b):
        k = fl_links[p]
        lf[k, lfcnt[k]] = f
        lfcnt[k] += 1
        _mark_dirty(k, dirty, dflag, ist)
    moving[f] = 1
    _request_recompute(now, net, ist)


@njit(cache=True)
def _component(net, ist):
    """Links and flows connected to the dirty links, in discovery order (scratch arrays)."""
    fl_ptr, fl_links, lf, lfcnt, dirty = (
        net[N_FL_PTR],
        net[N_FL_LINKS],
        net[N_LF],
        net[N_LI][R_LFCNT],
        net[N_LI][R_DIRTY],
    )
    comp_l, comp_f, lseen, fseen = (
        net[N_LI][R_COMP_L],
        net[N_FI][R_COMP_F],
        net[N_LI][R_LSEEN],
        net[N_FI][R_FSEEN],
    )
    ist[EPOCH] += 1
    epoch = ist[EPOCH]
    nl = 0
    for j in range(ist[NDIRTY]):
        k = dirty[j]
        if lseen[k] != epoch:
            lseen[k] = epoch
            comp_l[nl] = k
            nl += 1
    nf = 0
    i = 0
    while i < nl:
        k = comp_l[i]
        for q in range(lfcnt[k]):
            f = lf[k, q]
            if fseen[f] != epoch:
                fseen[f] = epoch
                comp_f[nf] = f
                nf += 1
                for p in range(fl_ptr[f], fl_ptr[f + 1]):
                    o = fl_links[p]
                    if lseen[o] != epoch:
                        lseen[o] = epoch
                        comp_l[nl] = o
                        nl += 1
        i += 1
    return nl, nf


@njit(cache=True)
def _rates(nl, live, net, ist):
    """Max-min fair rates of the live flows of the component (``newrate``), by progressive
    filling; ties between links broken by their creation order (their ids here)."""
    nlive = live.shape[0]
    fl_ptr, fl_links, bw, lf, lfcnt = (
        net[N_FL_PTR],
        net[N_FL_LINKS],
        net[N_LFL][R_BW],
        net[N_LF],
        net[N_LI][R_LFCNT],
    )
    comp_l, cap, count, newrate, rated = (
        net[N_LI][R_COMP_L],
        net[N_LFL][R_CAP],
        net[N_LI][R_COUNT],
        net[N_FF][R_NEWRATE],
        net[N_FI][R_RATED],
    )
    simple = True
    for j in range(nl):
        if lfcnt[comp_l[j]] > 1:
            simple = False
            break
    if simple:  # disjoint flows: each gets its narrowest link
        for j in range(nlive):
            f = live[j]
            r = np.inf
            for p in range(fl_ptr[f], fl_ptr[f + 1]):
                if bw[fl_links[p]] < r:
                    r = bw[fl_links[p]]
            newrate[f] = r
        return
    heap = [(0.0, 0, 0, 0)]  # every heap here holds (float, int, int, int): one compilation
    heap.pop()
    for j in range(nl):
        k = comp_l[j]
        n = lfcnt[k]
        count[k] = n
        if n:
            cap[k] = bw[k]
            heap.append((bw[k] / n, k, 0, 0))
    heapq.heapify(heap)
    ist[EPOCH] += 1
    epoch = ist[EPOCH]
    done = 0
    while len(heap) and done < nlive:
        share, k, _a, _b = heapq.heappop(heap)
        n = count[k]
        if n == 0:
            continue
        c = cap[k]
        if share != (0.0 if c < 0.0 else c) / n:
            continue  # stale: the link's share changed and a newer entry was pushed
        for q in range(lfcnt[k]):
            f = lf[k, q]
            if rated[f] == epoch:
                continue
            rated[f] = epoch
            newrate[f] = share
            done += 1
            for p in range(fl_ptr[f], fl_ptr[f + 1]):
                o = fl_links[p]
                if o != k:
                    m = count[o] - 1
                    count[o] = m
                    cap[o] -= share
                    if m:
                        c = cap[o]
                        heapq.heappush(heap, ((0.0 if c < 0.0 else c) / m, o, 0, 0))
        count[k] = 0


@njit(cache=True)
def _recompute(now, net, ist, comps):
    fl_ptr = net[N_FL_PTR]
    fl_links = net[N_FL_LINKS]
    fsize = net[N_FF][R_FSIZE]
    fseq = net[N_FI][R_FSEQ]
    fver = net[N_FI][R_FVER]
    frem = net[N_FF][R_FREM]
    frate = net[N_FF][R_FRATE]
    ft0 = net[N_FF][R_FT0]
    ffin = net[N_FF][R_FFIN]
    lload = net[N_LFL][R_LLOAD]
    lsince = net[N_LFL][R_LSINCE]
    lbytes = net[N_LFL][R_LBYTES]
    lbusy = net[N_LFL][R_LBUSY]
    dirty = net[N_LI][R_DIRTY]
    dflag = net[N_LI][R_DFLAG]
    fheap = net[N_FHEAP]
    comp_l = net[N_LI][R_COMP_L]
    comp_f = net[N_FI][R_COMP_F]
    newrate = net[N_FF][R_NEWRATE]
    ist[PENDING] = 0
    ist[RECOMP] += 1
    tol = _tol(now)
    nl, nf = _component(net, ist)
    _clear_dirty(dirty, dflag, ist)
    for j in range(nl):
        k = comp_l[j]
        _settle(k, now, lload, lsince, lbytes, lbusy)
        lload[k] = 0.0
    live = np.empty(nf, np.int64)
    nlive = 0
    for j in range(nf):
        f = comp_f[j]
        frem[f] -= frate[f] * (now - ft0[f])
        ft0[f] = now
        if frem[f] <= fsize[f] * REL_EPS or ffin[f] <= now + tol:
            _finish_flow(f, now, net, ist, comps)
        else:
            live[nlive] = f
            nlive += 1
    _clear_dirty(dirty, dflag, ist)
    _rates(nl, live[:nlive], net, ist)
    for j in range(nlive):
        f = live[j]
        rate = newrate[f]
        if rate != frate[f]:  # an unchanged rate keeps its finish time and heap entry
            if not rate > 0:
                ist[ERR] = 1
                return
            frate[f] = rate
            fver[f] += 1
            ffin[f] = now + frem[f] / rate
            heapq.heappush(fheap, (ffin[f], fseq[f], fver[f], f))
        for p in range(fl_ptr[f], fl_ptr[f + 1]):
            lload[fl_links[p]] += rate
    _arm_timer(now, net, ist)


@njit(cache=True)
def _on_timer(version, now, net, ist, comps):
    lfcnt, fver, lload, dirty, dflag, fheap = (
        net[N_LI][R_LFCNT],
        net[N_FI][R_FVER],
        net[N_LFL][R_LLOAD],
        net[N_LI][R_DIRTY],
        net[N_LI][R_DFLAG],
        net[N_FHEAP],
    )
    lsince, lbytes, lbusy = net[N_LFL][R_LSINCE], net[N_LFL][R_LBYTES], net[N_LFL][R_LBUSY]
    if version != ist[TV]:
        return  # stale: rates changed after this timer was set
    ist[HAS_AT] = 0
    limit = now + _tol(now)
    done = np.empty(len(fheap), np.int64)
    nd = 0
    while len(fheap) and fheap[0][0] <= limit:
        e = heapq.heappop(fheap)
        if e[2] == fver[e[3]]:
            done[nd] = e[3]
            nd += 1
    for j in range(nd):
        f = done[j]
        _finish_flow(f, now, net, ist, comps)
    if not nd:
        _arm_timer(now, net, ist)
        return
    for j in range(ist[NDIRTY]):
        if lfcnt[dirty[j]]:  # flows left on a changed link: re-rate its component
            _request_recompute(now, net, ist)
            return
    for j in range(ist[NDIRTY]):  # the finished flows had their links to themselves
        k = dirty[j]
        _settle(k, now, lload, lsince, lbytes, lbusy)
        lload[k] = 0.0
    _clear_dirty(dirty, dflag, ist)
    _arm_timer(now, net, ist)


@njit(cache=True)
def replay(now, nodes, flows, links, mem, ist, out):
    """Run one step; returns (ok, now, number of timed nodes started).

    ``nodes``: the program's node arrays; ``flows``: each Send's flow (links, bytes, the Recv
    node, latency); ``links``: bandwidths, then the links' load, since, bytes and busy time
    (updated in place), then the most flows a link can carry; ``mem``: per-device busy-until,
    busy seconds, bytes in use, peak, limit (0: none), persistent bytes (updated in place);
    ``ist``: the int state (see the names above; SEQ and TV start at the network's counters);
    ``out``: each node's start and end, the timed nodes in start order, each flow's start,
    first byte and last byte, and the flows in finishing order. Not ok: the step would fail
    (out of memory, stuck, a bad rate); the caller then runs the full schedule, which raises.
    """
    (kind, dev, dur, ins_ptr, ins_idx, cons_ptr, cons_idx, how, al_ptr, al_slot, al_n, out_ptr,
     out_idx, slot_dev, flow_of, pending0, refs0, roots, fetch) = nodes  # fmt: skip
    fl_ptr, fl_links, fsize, frecv, flat = flows
    bw, lload, lsince, lbytes, lbusy, maxcap = links
    busy, busy_s, in_use, peak, limit, persistent = mem
    begin, end_, order, fstart, ffirst, fend, forder = out
    n = kind.shape[0]
    nfl = fsize.shape[0]
    nlk = bw.shape[0]
    fheap = [(0.0, 0, 0, 0)]
    fheap.pop()
    events = [(0.0, 0, 0, 0)]
    events.pop()
    comps = np.empty(n + 1, np.int64)
    fi = np.zeros((R_RATED + 1, nfl), np.int64)
    ff = np.zeros((R_NEWRATE + 1, nfl))
    for f in range(nfl):  # (loops: no broadcasting code to compile)
        fi[R_FRECV, f] = frecv[f]
        ff[R_FSIZE, f] = fsize[f]
        ff[R_FREM, f] = fsize[f]
        ff[R_FFIN, f] = np.inf
    li = np.zeros((R_COUNT + 1, nlk), np.int64)
    lfl = np.zeros((R_CAP + 1, nlk))
    for k in range(nlk):
        lfl[R_BW, k] = bw[k]
        lfl[R_LLOAD, k] = lload[k]
        lfl[R_LSINCE, k] = lsince[k]
        lfl[R_LBYTES, k] = lbytes[k]
        lfl[R_LBUSY, k] = lbusy[k]
    net = (
        fl_ptr, fl_links, np.empty((nlk, maxcap), np.int64), fi, ff, li, lfl, fheap, events,
        np.zeros(1),
    )  # fmt: skip
    rstate = fi[R_RSTATE]
    fseq = fi[R_FSEQ]
    pending = pending0.copy()
    refs = refs0.copy()
    n_slots = refs.shape[0]
    charged = np.zeros(n_slots, np.int64)
    owner = np.arange(n_slots)
    shares = np.zeros(n_slots, np.int64)
    deadflag = np.zeros(ins_idx.shape[0], np.int8)
    ready = np.empty(n + 1, np.int64)
    top = 0
    for j in range(roots.shape[0] - 1, -1, -1):  # popped first to last, as run_clocked does
        ready[top] = roots[j]
        top += 1
    timers = [(0.0, 0, 0, 0)]
    timers.pop()
    seq = 0
    chead = 0
    outstanding = 0
    norder = 0
    while True:
        while top:
            top -= 1
            i = ready[top]
            for p in range(ins_ptr[i], ins_ptr[i + 1]):
                s = ins_idx[p]
                left = refs[s] - 1
                refs[s] = left
                if not left:
                    deadflag[p] = 1
            k = kind[i]
            if k == TIMED:
                d = dev[i]
                b = busy[d]
                t0 = now if now > b else b
                t = dur[i]
                e = t0 + t
                busy[d] = e
                busy_s[d] += t
                begin[i] = t0
                end_[i] = e
                order[norder] = i
                norder += 1
                heapq.heappush(timers, (e, seq, i, 0))
                seq += 1
            else:
                f = flow_of[i]
                if k == SEND:  # the flow starts; the Send completes at once
                    fseq[f] = ist[SEQ]
                    ist[SEQ] += 1
                    fstart[f] = now
                    lat = flat[f]
                    if lat > 0:
                        _schedule(events, now + lat, _ARRIVE, f, ist)
                    else:
                        _arrive(f, now, net, ist, comps)
                    comps[ist[CTAIL]] = i
                    ist[CTAIL] += 1
                elif rstate[f] == 2:  # delivered before the Recv started
                    comps[ist[CTAIL]] = i
                    ist[CTAIL] += 1
                else:
                    rstate[f] = 1
            outstanding += 1
        if not outstanding:
            break
        if chead < ist[CTAIL]:
            i = comps[chead]
            chead += 1
        elif len(timers) and (not len(events) or timers[0][0] < events[0][0]):
            e3 = heapq.heappop(timers)
            now = e3[0]
            i = e3[2]
        elif len(events):
            ev = heapq.heappop(events)
            now = ev[0]
            code = ev[2]
            if code == _ARRIVE:
                _arrive(ev[3], now, net, ist, comps)
            elif code == _TIMER:
                _on_timer(ev[3], now, net, ist, comps)
            else:
                _recompute(now, net, ist, comps)
            if ist[ERR]:
                return False, now, norder
            continue
        else:
            return False, now, norder  # stuck: the full schedule names the waiting nodes
        outstanding -= 1
        h = how[i]
        if h == ALLOCATES:
            total = 0
            for p in range(al_ptr[i], al_ptr[i + 1]):
                total += al_n[p]
            if total:
                d = dev[i]
                used = in_use[d] + total + persistent[d]
                if limit[d] and used > limit[d]:
                    return False, now, norder  # simulated out of memory
                if used > peak[d]:
                    peak[d] = used
                in_use[d] += total
                for p in range(al_ptr[i], al_ptr[i + 1]):
                    charged[al_slot[p]] = al_n[p]
        elif h == VIEWS:  # the outputs share input 0's buffer and keep it alive
            b0 = owner[ins_idx[ins_ptr[i]]]
            for p in range(out_ptr[i], out_ptr[i + 1]):
                owner[out_idx[p]] = b0
                shares[b0] += 1
        for p in range(ins_ptr[i], ins_ptr[i + 1]):
            if deadflag[p]:
                b0 = owner[ins_idx[p]]
                if shares[b0]:
                    shares[b0] -= 1
                else:
                    m = charged[b0]
                    if m:
                        charged[b0] = 0
                        d = slot_dev[b0]
                        left = in_use[d] - m
                        in_use[d] = left if left > 0 else 0
        for p in range(cons_ptr[i], cons_ptr[i + 1]):
            c = cons_idx[p]
            left = pending[c] - 1
            pending[c] = left
            if not left:
                ready[top] = c
                top += 1
    # What is left is fetched: freed as the step ends.
    freed = np.zeros(n_slots, np.int8)
    for j in range(fetch.shape[0]):
        b0 = owner[fetch[j]]
        if not freed[b0]:
            freed[b0] = 1
            m = charged[b0]
            if m:
                d = slot_dev[b0]
                left = in_use[d] - m
                in_use[d] = left if left > 0 else 0
    # Hand back the flows' times and order and the links' books.
    for f in range(nfl):
        ffirst[f] = ff[R_FFIRST, f]
        fend[f] = ff[R_FEND, f]
        forder[f] = fi[R_FORDER, f]
    for k in range(nlk):
        lload[k] = lfl[R_LLOAD, k]
        lsince[k] = lfl[R_LSINCE, k]
        lbytes[k] = lfl[R_LBYTES, k]
        lbusy[k] = lfl[R_LBUSY, k]
    # A step leaves the network idle; anything else is for the full schedule.
    ok = not ist[ACTIVE] and not ist[PENDING] and not ist[HAS_AT]
    return ok, now, norder
