"""Reference computations straight from the raw JSON, in plain Python, for the tests."""
from decimal import Decimal

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
            "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}


def ns(doc, ts):
    return int(Decimal(str(ts)) * 1000) + (doc.get("baseTimeNanoseconds") or 0)


def gpu_events(doc):
    return [(i, e) for i, e in enumerate(doc["traceEvents"])
            if e.get("ph") == "X" and e.get("cat") in GPU_CATS]


def launches(doc):
    """correlation -> (event index, event) of the first launch call."""
    out = {}
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and "correlation" in (e.get("args") or {}):
            c = e["args"]["correlation"]
            if c not in out or ns(doc, e["ts"]) < ns(doc, out[c][1]["ts"]):
                out[c] = (i, e)
    return out


def innermost_op(doc, launch):
    """The innermost cpu_op on the launch's thread enclosing the launch start (brute force
    over the thread's cpu_ops, listed once per document)."""
    t = ns(doc, launch["ts"])
    best = None
    for s, end, i in _cpu_ops(doc).get((launch["pid"], launch["tid"]), ()):
        if s <= t <= end:
            key = (s, -end, i)
            if best is None or key > best[0]:
                best = (key, i)
    return best[1] if best else None


_CPU_OPS = [None, None]         # the last document asked about, and its cpu_ops by thread


def _cpu_ops(doc):
    """(pid, tid) -> [(start_ns, end_ns, event index)] of the document's cpu_op X events
    with a positive duration, in the document's order."""
    if _CPU_OPS[0] is not doc:
        by = {}
        for i, e in enumerate(doc["traceEvents"]):
            if e.get("ph") == "X" and e.get("cat") == "cpu_op" and Decimal(str(e["dur"])) > 0:
                s = ns(doc, e["ts"])
                by.setdefault((e.get("pid"), e.get("tid")), []).append((s, s + int(Decimal(str(e["dur"])) * 1000), i))
        _CPU_OPS[:] = [doc, by]
    return _CPU_OPS[1]


def iterations(doc):
    """step -> (start_ns, marker_end_ns) from ProfilerStep#N (CPU side) or step_num events."""
    out = {}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation":
            step = int(name.split("#")[1])
        elif "step_num" in (e.get("args") or {}):
            step = int(e["args"]["step_num"])
        else:
            continue
        s = ns(doc, e["ts"])
        out.setdefault(step, (s, s + int(Decimal(str(e["dur"])) * 1000)))
    return out


def steady_step(doc):
    """The steady step (METHOD.md section 2): the first whose step marker lasts within 5%
    of the median of the later ones' (its own when it is the last)."""
    durs = [(k, e - s) for k, (s, e) in sorted(iterations(doc).items(), key=lambda kv: kv[1][0])]
    for i, (k, d) in enumerate(durs):
        later = sorted(x for _, x in durs[i + 1:]) or [d]
        mid = len(later) // 2
        median = later[mid] if len(later) % 2 else (later[mid - 1] + later[mid]) / 2
        if abs(d - median) <= 0.05 * median:
            return k


def utilization(doc):
    """step -> dict(total_ns, busy_ns, sum_ns, kernels) with kernels assigned by launch time."""
    its = iterations(doc)
    la = launches(doc)
    per = {k: [] for k in its}
    for _, e in gpu_events(doc):
        if GPU_CATS[e["cat"]] != "kernel":
            continue
        c = (e.get("args") or {}).get("correlation")
        t = ns(doc, la[c][1]["ts"]) if c in la else ns(doc, e["ts"])
        for k, (s, m) in its.items():
            if s <= t <= m:
                st = ns(doc, e["ts"])
                per[k].append((st, st + int(Decimal(str(e["dur"])) * 1000)))
    out = {}
    for k, (s, m) in its.items():
        iv = per[k]
        end = max([m] + [b for _, b in iv])
        out[k] = {"total_ns": end - s, "busy_ns": union_ns(iv), "sum_ns": sum(b - a for a, b in iv), "kernels": len(iv)}
    return out


def union_ns(intervals):
    """Length of the union of [start, end] intervals, ns: merged in start order."""
    busy, cur = 0, None
    for a, b in sorted(intervals):
        if cur is None or a > cur[1]:
            if cur:
                busy += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    if cur:
        busy += cur[1] - cur[0]
    return busy


def iteration_activities(doc, step):
    """[(name, kind, dur_ns)] of the GPU activities launched inside iteration `step`."""
    return [(e["name"], kind, end - start) for e, kind, start, end in _launched_in(doc, step)]


def iteration_intervals(doc, step):
    """[(kind, start_ns, end_ns)] of the GPU activities launched inside iteration `step`."""
    return [(kind, start, end) for _, kind, start, end in _launched_in(doc, step)]


def iteration_unions(doc, step):
    """(kernels_ns, all_ns): the lengths of the unions of the kernels, and of all GPU
    activity (kernels, memcpy, memset), launched inside iteration `step`."""
    spans = iteration_intervals(doc, step)
    return union_ns([(a, b) for kind, a, b in spans if kind == "kernel"]), union_ns([(a, b) for _, a, b in spans])


def _launched_in(doc, step):
    """(event, kind, start_ns, end_ns) of each GPU activity launched inside iteration
    `step` (by its launch's time, else its own start)."""
    s, m = iterations(doc)[step]
    la = launches(doc)
    for _, e in gpu_events(doc):
        c = (e.get("args") or {}).get("correlation")
        t = ns(doc, la[c][1]["ts"]) if c in la else ns(doc, e["ts"])
        if s <= t <= m:
            start = ns(doc, e["ts"])
            yield e, GPU_CATS[e["cat"]], start, start + int(Decimal(str(e["dur"])) * 1000)


def idle_gaps(kernels, short_gap_ns=10000):
    """{cause: ns} of the gaps between kernels of one stream, as idle_breakdown names
    them: kernels = [(start_ns, end_ns, launch_ts_ns or None, event index)], taken by
    start (ties by event index); a gap is waiting_on_host when the next kernel's launch
    came after the previous end, else short_gap up to short_gap_ns, else other."""
    cause = {"waiting_on_host": 0, "short_gap": 0, "other": 0}
    prev_end = None
    for st, en, lt, _ in sorted(kernels, key=lambda k: (k[0], k[3])):
        if prev_end is not None and st > prev_end:
            c = "waiting_on_host" if lt is not None and lt > prev_end else \
                ("short_gap" if st - prev_end <= short_gap_ns else "other")
            cause[c] += st - prev_end
        prev_end = en if prev_end is None else max(prev_end, en)
    return {k: v for k, v in cause.items() if v}


def ncu_counters(header, data, metric):
    """ncu ID -> value of `metric` from a base-units raw export (independent parse)."""
    i, k = header.index(metric), header.index("ID")
    return {int(r[k]): float(r[i].replace(",", "")) for r in data}


def launch_queue(doc, start, end, launched=None):
    """stream -> (mean length, max length, % of [start, end) with the stream's queue empty
    and no kernel running on any stream) of the launch queue over the window: every
    kernel with its launch call waits from the call's end (or its own start, when
    earlier) to its start. A sweep over the window, clipped to it. launched=(a, b):
    only the kernels whose launch call (or, without one, the kernel) starts in [a, b]:
    a step's kernels."""
    la = launches(doc)
    waits, runs = {}, []
    for _, g in gpu_events(doc):
        if GPU_CATS[g["cat"]] != "kernel":
            continue
        c = (g.get("args") or {}).get("correlation")
        at = ns(doc, la[c][1]["ts"] if c in la else g["ts"])     # a kernel without its call: its own start
        if launched and not launched[0] <= at <= launched[1]:
            continue
        st = ns(doc, g["ts"])
        runs.append((st, st + int(Decimal(str(g["dur"])) * 1000)))
        c = (g.get("args") or {}).get("correlation")
        if c in la:
            call = la[c][1]
            q_in = min(ns(doc, call["ts"]) + int(Decimal(str(call["dur"])) * 1000), st)
            waits.setdefault(g["args"].get("stream"), []).append((q_in, st))
    def clipped(intervals, kind):
        return [(t, kind, d) for a, b in intervals if max(a, start) < min(b, end)
                for t, d in ((max(a, start), 1), (min(b, end), -1))]

    out = {}
    for stream, w in waits.items():
        edges = sorted(clipped(w, 0) + clipped(runs, 1))
        area = top = idle = 0
        count, t, i = [0, 0], start, 0
        while i < len(edges):
            when = edges[i][0]
            area += count[0] * (when - t)
            idle += (when - t) if count == [0, 0] else 0
            while i < len(edges) and edges[i][0] == when:     # every change at one time, netted
                count[edges[i][1]] += edges[i][2]
                i += 1
            t, top = when, max(top, count[0])
        area += count[0] * (end - t)
        idle += (end - t) if count == [0, 0] else 0
        out[stream] = (area / (end - start), top, 100 * idle / (end - start))
    return out


def _union(intervals):
    """The merged intervals of [start, end] intervals."""
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def tiny_kernel_idle(doc, step):
    """(tiny kernels, ns their streams waited, ns the GPU sat idle waiting) of iteration
    `step`: kernels launched inside it by a launch call (not a graph launch) that lasts
    longer than the kernel; a stream waited when the call started after the stream's
    previous kernel (of the iteration) ended, from that end to the kernel's start; the
    GPU sat idle in the union of those waits where no GPU activity launched in the
    iteration (kernel, memcpy, memset) ran."""
    la = launches(doc)
    acts = list(_launched_in(doc, step))
    by_stream = {}
    for e, kind, a, b in acts:
        if kind == "kernel":
            by_stream.setdefault(e["args"].get("stream"), []).append((a, b, e))
    tiny, waited, waits = 0, 0, []
    for ks in by_stream.values():
        prev = None
        for a, b, e in sorted(ks, key=lambda k: k[0]):
            c = la.get((e.get("args") or {}).get("correlation"))
            if c is not None and "GraphLaunch" not in c[1]["name"]:
                call_s = ns(doc, c[1]["ts"])
                if b - a < int(Decimal(str(c[1]["dur"])) * 1000):
                    tiny += 1
                    if prev is not None and call_s > prev and a > prev:
                        waited += a - prev
                        waits.append((prev, a))
            prev = b if prev is None else max(prev, b)
    busy = _union([(a, b) for _, _, a, b in acts])
    lost = 0
    for a, b in _union(waits):
        lost += (b - a) - sum(max(0, min(b, y) - max(a, x)) for x, y in busy)
    return tiny, waited, lost
