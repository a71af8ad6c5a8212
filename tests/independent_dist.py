"""Reference computations of the distributed reports straight from the raw JSON
of rank traces, in plain Python (no tracedb code): kernel classes by HTA's
patterns, interval sweeps, collectives joined across ranks by process group and
sequence number, nccl-tests bandwidth."""
import gzip
import json
import math
import re
from decimal import Decimal

from independent import GPU_CATS, gpu_events, iterations, launches, ns

# HTA hta/common/types.py: CommunicateKernelGroupingPattern (re.match, anchored)
HTA_COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
BPE = {"Float": 4, "Int": 4, "Long": 8, "BFloat16": 2, "Half": 2, "Bool": 1, "Byte": 1, "Double": 8, "Short": 2}


def dur_ns(e):
    return int(Decimal(str(e["dur"])) * 1000)


def activities(doc):
    """[(start_ns, end_ns, class, iteration, event)] of every GPU activity. Class:
    memory for memcpy/memset, communication for a kernel HTA calls one or that
    carries `Collective name`, else compute. Iteration: the step whose marker
    holds the launch call's start."""
    its = iterations(doc)
    la = launches(doc)
    out = []
    for _, e in gpu_events(doc):
        args = e.get("args") or {}
        kind = GPU_CATS[e["cat"]]
        if kind != "kernel":
            cls = "memory"
        elif HTA_COMM.match(e["name"]) or "Collective name" in args:
            cls = "communication"
        else:
            cls = "compute"
        c = args.get("correlation")
        t = ns(doc, la[c][1]["ts"]) if c in la else ns(doc, e["ts"])
        it = next((k for k, (s, m) in sorted(its.items()) if s <= t <= m), None)
        s = ns(doc, e["ts"])
        out.append((s, s + dur_ns(e), cls, it, e))
    return out


def union(iv):
    """Merged intervals of [(a, b)]."""
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(iv):
    return sum(b - a for a, b in iv)


def intersect(x, y):
    """Intersection of two merged interval lists."""
    i = j = 0
    out = []
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append([a, b])
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def breakdown(acts):
    """Class-state times of a set of activities: {frozenset(classes): ns} and the
    unions per class (brute-force over elementary segments)."""
    acts = [a for a in acts if a[1] > a[0]]
    pts = sorted({p for a in acts for p in a[:2]})
    # an activity covers an elementary segment [a, b) iff it starts at or before a and ends
    # at or after b: count each class's activities open across each segment, in one sweep
    opens, closes = {}, {}
    for x in acts:
        opens.setdefault(x[0], []).append(x[2])
        closes.setdefault(x[1], []).append(x[2])
    count, states = {}, {}
    for a, b in zip(pts, pts[1:]):
        for c in closes.get(a, ()):
            count[c] -= 1
        for c in opens.get(a, ()):
            count[c] = count.get(c, 0) + 1
        on = frozenset(c for c, n in count.items() if n > 0)
        if on:
            states[on] = states.get(on, 0) + (b - a)
    unions = {c: union([(x[0], x[1]) for x in acts if x[2] == c]) for c in ("compute", "communication", "memory")}
    return states, unions


def per_iteration(doc):
    """iteration (None: the whole trace) -> dict(window_ns, states, unions, busy_ns)."""
    acts = activities(doc)
    its = iterations(doc)
    out = {}
    for k, (s, m) in its.items():
        mine = [a for a in acts if a[3] == k]
        end = max([m] + [a[1] for a in mine])
        states, unions = breakdown(mine)
        out[k] = {"window_ns": end - s, "states": states, "unions": unions,
                  "busy_ns": length(union([(a[0], a[1]) for a in mine]))}
    states, unions = breakdown(acts)
    busy = union([(a[0], a[1]) for a in acts if a[1] > a[0]])
    out[None] = {"window_ns": busy[-1][1] - busy[0][0] if busy else 0, "states": states, "unions": unions,
                 "busy_ns": length(busy)}
    return out


def collectives(doc):
    """[dict] of the communication kernels with their args, the iteration, and the
    sequence number: the order, within the process group, of the record_param_comms
    ops that launched them (the op holding the launch call, found by time on the
    launch's thread; its `Seq` instead where every op has one); None for a kernel
    without a launch call in the trace."""
    ev = doc["traceEvents"]
    la = launches(doc)
    rpc = [e for e in ev if e.get("name") == "record_param_comms" and e.get("ph") == "X"]
    out = []
    for s, end, cls, it, e in activities(doc):
        if cls != "communication":
            continue
        a = e.get("args") or {}
        op = None
        c = a.get("correlation")
        if c in la:
            l = la[c][1]
            t = ns(doc, l["ts"])
            holders = [r for r in rpc if r.get("tid") == l.get("tid") and r.get("pid") == l.get("pid")
                       and ns(doc, r["ts"]) <= t <= ns(doc, r["ts"]) + dur_ns(r)]
            if holders:
                op = max(holders, key=lambda r: ns(doc, r["ts"]))
        out.append({"ts": s, "dur": end - s, "iteration": it, "pg": str(a.get("Process Group Name", "unknown")),
                    "collective": a.get("Collective name") or re.search(r"(AllReduce|AllGather|ReduceScatter)",
                                                                        e["name"]).group(1).lower(),
                    "dtype": a.get("dtype"), "in": a.get("In msg nelems"), "out": a.get("Out msg nelems"),
                    "group_size": a.get("Group size"), "op": op, "seq": None})
    for pg in {c["pg"] for c in out}:
        linked = sorted((c for c in out if c["pg"] == pg and c["op"]), key=lambda c: ns(doc, c["op"]["ts"]))
        by_seq = all("Seq" in c["op"]["args"] for c in linked)
        for i, c in enumerate(linked):
            c["seq"] = c["op"]["args"]["Seq"] if by_seq else i
    return out


def busbw_factor(name, n):
    name = name.lower()
    if "allreduce" in name or "all_reduce" in name:
        return 2 * (n - 1) / n
    if any(k in name for k in ("allgather", "all_gather", "reduce_scatter", "reducescatter", "all_to_all", "alltoall")):
        return (n - 1) / n
    return 1.0


def joined_calls(docs_by_rank):
    """(pg, seq) -> dict(skew_ns, last_rank, min_dur, msg_bytes, busbw_gbps, iteration, ranks) over ranks."""
    calls = {}
    for rank, doc in docs_by_rank.items():
        for c in collectives(doc):
            if c["seq"] is not None:
                calls.setdefault((c["pg"], c["seq"]), {})[rank] = c
    out = {}
    for key, by_rank in calls.items():
        starts = {r: c["ts"] for r, c in by_rank.items()}
        last = max(starts.values())
        one = next(iter(by_rank.values()))
        nel = one["out"] if "gather" in one["collective"].lower() else one["in"]
        size = nel * BPE[one["dtype"]]
        min_dur = min(c["dur"] for c in by_rank.values())
        out[key] = {"skew_ns": last - min(starts.values()),
                    "last_rank": min(r for r, t in starts.items() if t == last),
                    "min_dur": min_dur, "msg_bytes": size, "iteration": min(c["iteration"] for c in by_rank.values()),
                    "busbw_gbps": size / min_dur * busbw_factor(one["collective"], one["group_size"]),
                    # a send/recv pair names its call by the least name over the ranks (recv)
                    "ranks": len(by_rank), "collective": min(c["collective"] for c in by_rank.values())}
    return out


# --- HTA, as it computes (µs, integerised: ts = ceil(ts), end = floor(ts + dur)) ---

def hta_us(e):
    ts = Decimal(str(e["ts"]))
    s = math.ceil(ts)
    return s, math.floor(ts + Decimal(str(e["dur"])))


def hta_overlap_pct(doc):
    """HTA get_comm_comp_overlap on one rank (whole trace, no last-step filter): round(100 *
    |U(comp) ∩ U(comm)| / |U(comm)|, 2) in integer µs."""
    comp, comm = [], []
    for _, e in gpu_events(doc):
        if GPU_CATS[e["cat"]] != "kernel":
            continue
        (comm if HTA_COMM.match(e["name"]) else comp).append(hta_us(e))
    u_comm = union(comm)
    return round(100 * length(intersect(union(comp), u_comm)) / length(u_comm), 2)


def make_job(src, d, ranks):
    """`ranks` rank traces in d, from the 2-rank capture in folder src: rank k is a copy of source rank k % 2 with world size
    `ranks`, `Group size` `ranks` on its collectives and its clock k µs later. Each source
    is edited once, as JSON; its copies differ only in two numbers, set in its text."""
    d.mkdir(parents=True, exist_ok=True)
    text = {}
    for r in (0, 1):
        with gzip.open(src / f"rank{r}.json.gz", "rt") as f:
            doc = json.load(f)
        doc["distributedInfo"].update(rank="@RANK@", world_size=ranks)
        base = doc.get("baseTimeNanoseconds") or 0
        doc["baseTimeNanoseconds"] = "@BASE@"
        for e in doc["traceEvents"]:
            a = e.get("args")
            if a and "Group size" in a:
                a["Group size"] = ranks
        text[r] = (json.dumps(doc), base)
    for k in range(ranks):
        src, base = text[k % 2]
        out = src.replace('"@RANK@"', str(k), 1).replace('"@BASE@"', str(base + 1000 * k), 1)
        with gzip.open(d / f"rank{k}.json.gz", "wt", compresslevel=1) as f:
            f.write(out)
    return d
