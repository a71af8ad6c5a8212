"""Runtime queues: TensorFlow eager phases and queue, CUDA launch queues, and
XProf GPU traces (JAX), against independent computations from the raw JSON."""
from decimal import Decimal

import pytest

import independent as ref
from conftest import DATA, TF, TORCH, raw_trace, run_name
from tracedb.present import charts
from tracedb.store import db
from tracedb.query import reports
from tracedb.store.sql import rows
from tracedb.ingest import ingest_file

JAX = DATA / "jax" / "h200_jax_mlp.trace.json.gz"
ASYNC = [p for p in TF if "async" in p.name]
SYNC = [p for p in TF if "sync_" in p.name and "async" not in p.name]


@pytest.fixture(scope="module")
def qdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("q") / "q.duckdb")
    for p in TF + TORCH + [JAX]:
        ingest_file(con, p)
    yield con
    con.close()


def thread_names(doc):
    return {(str(e["pid"]), str(e.get("tid"))): e["args"]["name"] for e in doc["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


def xs(doc, name):
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") == name:
            s = ref.ns(doc, e["ts"])
            out.append((s, s + int(Decimal(str(e["dur"])) * 1000), str(e["pid"]), str(e.get("tid")), e))
    return sorted(out, key=lambda x: x[0])


def _by_thread(events):
    out = {}
    for x in events:
        out.setdefault(x[2:4], []).append(x)
    return {k: (v, [x[0] for x in v]) for k, v in out.items()}


def independent_nodes(doc, mode):
    """FIFO (async) or containment (sync) pairing, in plain Python with bisect."""
    from bisect import bisect_left, bisect_right
    enq = xs(doc, "EagerExecute")
    kex = xs(doc, "EagerKernelExecute")
    runs = _by_thread(xs(doc, "KernelAndDeviceFunc::Run"))
    kex_t = _by_thread(kex)
    calls = _by_thread(xs(doc, "TFE_Py_FastPathExecute_C") + xs(doc, "TFE_Py_ExecuteCancelable"))
    fast = {k: sorted(v, key=lambda x: x[0]) for k, (v, _) in calls.items()}     # each thread's, by start
    fast = {k: (v, [x[0] for x in v]) for k, v in fast.items()}
    out = []
    for i, (s, e, pid, tid, ev) in enumerate(enq):
        f, fs = fast.get((pid, tid), ([], []))
        j = bisect_right(fs, s) - 1                      # latest fast-path call starting at or before
        start = f[j][0] if j >= 0 and f[j][1] >= e else s
        if mode == "async":
            d = kex[i]
        else:
            k, ks = kex_t[(pid, tid)]
            d = k[bisect_left(ks, s)]
            assert d[1] <= e
        r, rs = runs.get(d[2:4], ([], []))
        cpu = sum(x[1] - x[0] for x in r[bisect_left(rs, d[0]):bisect_right(rs, d[1])] if x[1] <= d[1])
        node = {"op": ev["args"].get("eager_op"), "dequeue_ns": (d[1] - d[0]) - cpu, "cpu_exec_ns": cpu}
        if mode == "async":
            node.update(enqueue_ns=e - start, queue_wait_ns=max(0, d[0] - e))
        else:
            node.update(enqueue_ns=(e - start) - (d[1] - d[0]), queue_wait_ns=None)
        out.append(node)
    return out


@pytest.mark.parametrize("path", TF, ids=run_name)
def test_eager_phases_match_the_raw_json(qdb, path):
    run = run_name(path)
    mode = "sync" if path in SYNC else "async"
    want = independent_nodes(raw_trace(path), mode)
    got = reports.run(qdb, "eager_phases", {"run": run}).to_pylist()
    assert len(got) == len(want) > 200
    assert {g["mode"] for g in got} == {mode}
    for g, w in zip(got, want):
        assert {k: g[k] for k in w} == w
    if mode == "async":
        assert sum(g["queue_wait_ns"] > 0 for g in got) > len(got) / 2


@pytest.mark.parametrize("path", TF, ids=run_name)
def test_queue_split_adds_up_to_each_iteration(qdb, path):
    run = run_name(path)
    t = reports.run(qdb, "queue_utilization", {"run": run}).to_pylist()
    its = ref.iterations(raw_trace(path))
    for step, (s, m) in its.items():
        mine = [r for r in t if r["iteration"] == step]
        assert sum(r["dur_ns"] for r in mine) == rows(qdb, "SELECT dur_ns FROM iterations WHERE run = ? AND iteration = ?", [run, step])[0][0]
        assert sum(r["share_pct"] for r in mine) == pytest.approx(100, abs=0.01)
        states = {r["queue_state"] for r in mine}
        if path in SYNC:
            assert states == {"no_queue"}
        else:
            ne = sum(r["dur_ns"] for r in mine if r["queue_state"] == "non_empty")
            assert states == {"empty", "non_empty"} and 0 < ne < sum(r["dur_ns"] for r in mine)
    assert {r["category"] for r in t} <= {"gpu_kernel", "cpu_kernel", "dequeuing", "memory_transfer", "waiting"}


def union_ns(iv, s, e):
    iv = sorted((max(a, s), min(b, e)) for a, b in iv if b > s and a < e)
    tot, cur = 0, None
    for a, b in iv:
        if cur is None or a > cur[1]:
            tot += (cur[1] - cur[0]) if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return tot + ((cur[1] - cur[0]) if cur else 0)


@pytest.mark.parametrize("path", TF, ids=run_name)
def test_time_breakdown_cpu_kernel_time_is_the_union_of_kernel_calls(qdb, path):
    run = run_name(path)
    doc = raw_trace(path)
    cpu = [(a, b) for a, b, *_ in xs(doc, "KernelAndDeviceFunc::Run") + xs(doc, "ThreadpoolListener::Region")]
    t = reports.run(qdb, "time_breakdown", {"run": run, "iteration": "all"}).to_pylist()
    per, whole = t[:-1], t[-1]
    assert len(per) == rows(qdb, "SELECT count(*) FROM iterations WHERE run = ?", [run])[0][0] > 1
    for r in per:
        s, e = rows(qdb, "SELECT start_ns, end_ns FROM iterations WHERE run = ? AND iteration = ?", [run, r["iteration"]])[0]
        assert r["cpu_kernel_ns"] == union_ns(cpu, s, e)
        assert r["gpu_kernel_ns"] == 0 and r["overlap_ns"] == 0
        assert r["cpu_kernel_ns"] + r["overhead_ns"] == r["total_ns"]
    assert whole["iteration"] is None           # every iteration together: the sums
    for col in ("total_ns", "cpu_kernel_ns", "overhead_ns"):
        assert whole[col] == sum(r[col] for r in per)
    steady = rows(qdb, "SELECT iteration FROM iteration_steadiness WHERE run = ? AND steady", [run])[0][0]
    assert reports.run(qdb, "time_breakdown", {"run": run}).to_pylist() == [r for r in per if r["iteration"] == steady]


def test_queue_occupancy(qdb):
    for p in ASYNC:
        t = reports.run(qdb, "queue_occupancy", {"run": run_name(p)}).to_pylist()
        assert max(r["nodes_waiting"] for r in t) >= 1 and t[-1]["nodes_waiting"] == 0
        assert min(r["nodes_waiting"] for r in t) == 0
    s = reports.run(qdb, "queue_occupancy", {"run": run_name(SYNC[0])}).to_pylist()
    assert len(s) == 1 and s[0]["ts_ns"] is None and "no scheduling queue" in s[0]["note"]


def test_phase_stats(qdb):
    t = {(r["run"], r["phase"]): r for r in reports.run(qdb, "eager_phase_stats").to_pylist()}
    nodes = reports.run(qdb, "eager_phases", {"run": "cpu_async_lenet_bs64"}).to_pylist()
    enq = sorted(n["enqueue_ns"] for n in nodes)
    r = t[("cpu_async_lenet_bs64", "enqueue")]
    assert (r["min_ns"], r["max_ns"], r["nodes"]) == (enq[0], enq[-1], len(enq))
    assert r["mean_ns"] == pytest.approx(sum(enq) / len(enq), abs=0.1)
    assert ("cpu_sync_lenet_bs64", "queue_wait") not in t and ("cpu_sync_lenet_bs64", "dequeue") in t


@pytest.mark.parametrize("path", TORCH, ids=run_name)
def test_launch_delay_and_idle_gaps_match_the_raw_json(qdb, path):
    run = run_name(path)
    doc = raw_trace(path)
    la = ref.launches(doc)
    its = ref.iterations(doc)
    s, m = its[2]
    want, ks, every = {}, [], []
    for i, e in ref.gpu_events(doc):
        c = (e.get("args") or {}).get("correlation")
        st = ref.ns(doc, e["ts"])
        l = la[c][1] if c in la else None
        lt = ref.ns(doc, l["ts"]) if l else None
        k = (st, st + int(Decimal(str(e["dur"])) * 1000), lt, i)
        if ref.GPU_CATS[e["cat"]] == "kernel":
            every.append(k)
        if s <= (lt if l else st) <= m:       # the iteration: by launch, or by start without a launch
            if l:
                want[i] = st - (lt + int(Decimal(str(l["dur"])) * 1000))
            if ref.GPU_CATS[e["cat"]] == "kernel":
                ks.append(k)
    got = {r["kernel_id"]: r["delay_ns"] for r in reports.run(qdb, "launch_delay", {"run": run, "iteration": "2"}).to_pylist()}
    assert got == want
    # idle gaps on the (single) stream: waiting on the host when the launch came after the previous end
    got = {r["cause"]: r["idle_ns"] for r in reports.run(qdb, "idle_breakdown", {"run": run}).to_pylist()}
    assert got == ref.idle_gaps(ks)
    assert got["waiting_on_host"] > 0.5 * sum(got.values())
    # iteration=all: the step's rows, then the whole trace: every kernel, in the step or not
    t = reports.run(qdb, "idle_breakdown", {"run": run, "iteration": "all"}).to_pylist()
    assert {r["cause"]: r["idle_ns"] for r in t if r["iteration"] == 2} == got
    assert {r["cause"]: r["idle_ns"] for r in t if r["iteration"] is None} == ref.idle_gaps(every)
    assert [r["iteration"] for r in t] == sorted((r["iteration"] for r in t), key=lambda i: (i is None, i))


@pytest.mark.parametrize("path", TORCH, ids=run_name)
def test_launch_queue_matches_a_sweep(qdb, path):
    run = run_name(path)
    doc = raw_trace(path)
    la = ref.launches(doc)
    s, e = rows(qdb, "SELECT start_ns, end_ns FROM iterations WHERE run = ? AND iteration = 2", [run])[0]
    ev = []
    for i, g in ref.gpu_events(doc):
        c = (g.get("args") or {}).get("correlation")
        if ref.GPU_CATS[g["cat"]] == "kernel" and c in la:
            l = la[c][1]
            lt = ref.ns(doc, l["ts"])
            m0, m1 = ref.iterations(doc)[2]
            if m0 <= lt <= m1:
                st = ref.ns(doc, g["ts"])
                ev += [(min(lt + int(Decimal(str(l["dur"])) * 1000), st), 1), (st, -1)]
    ev.sort()
    area, q, t_prev, mx = 0, 0, s, 0
    for t, d in ev:
        area += q * (t - t_prev)
        q += d
        t_prev = t
        mx = max(mx, q)
    area += q * (e - t_prev)
    r = reports.run(qdb, "launch_queue", {"run": run}).to_pylist()
    assert len(r) == 1
    assert r[0]["mean_queued"] == round(area / (e - s), 3) and r[0]["max_queued"] == mx
    assert 0 < r[0]["empty_gpu_idle_pct"] <= r[0]["empty_pct"] < 100
    ((_, (mean, top, idle)),) = ref.launch_queue(doc, s, e, launched=ref.iterations(doc)[2]).items()
    assert (r[0]["mean_queued"], r[0]["max_queued"]) == (round(mean, 3), top)
    assert r[0]["empty_gpu_idle_pct"] == pytest.approx(idle, abs=0.005)
    series = reports.run(qdb, "launch_queue", {"run": run, "series": "true"}).to_pylist()
    assert max(x["queued"] for x in series) == mx
    # iteration=all: the step, then the whole trace over the same window: every kernel of
    # the run (the fp32 trace has kernels outside the step) and the GPU idle of all of them
    step, whole = reports.run(qdb, "launch_queue", {"run": run, "iteration": "all"}).to_pylist()
    assert step == r[0] and whole["iteration"] is None
    ((_, (mean, top, idle)),) = ref.launch_queue(doc, s, e).items()
    assert whole["mean_queued"] == pytest.approx(mean, abs=0.0005) and whole["max_queued"] == top
    assert whole["empty_gpu_idle_pct"] == pytest.approx(idle, abs=0.005)


def test_xprof_gpu_trace_from_jax(qdb):
    run = run_name(JAX)
    doc = raw_trace(JAX)
    gpu_pids = {str(e["pid"]) for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"
                and str(e["args"]["name"]).startswith("/device:GPU")}
    want = [e for e in doc["traceEvents"] if e.get("ph") == "X" and str(e.get("pid")) in gpu_pids]
    k = rows(qdb, "SELECT name, grid_x, block_x, registers_per_thread, launch_name, stream, device FROM kernels "
                  "WHERE run = ? ORDER BY ts_ns", [run])
    assert len(k) == len(want) == 30
    first = sorted(want, key=lambda e: Decimal(str(e["ts"])))[0]
    assert k[0][0] == first["name"] and k[0][4].startswith("cuGraphLaunch") and k[0][5] == 14 and k[0][6] == 0
    assert f"grid:{k[0][1]}," in first["args"]["kernel_details"] and f"regs:{k[0][3]} " in first["args"]["kernel_details"]
    u = reports.run(qdb, "gpu_utilization", {"run": run}).to_pylist()
    assert [r["kernels"] for r in u] == [15, 15] and all(0 < r["gpu_util_pct"] < 100 for r in u)


@pytest.mark.parametrize("name,mark", [("queue", "mark-line"), ("queue_split", "mark-rect")])
def test_queue_charts_render(qdb, tmp_path, name, mark):
    params = {"run": "cpu_async_lenet_bs64"} if name == "queue" else {}
    chart = charts.build(qdb, name, params)
    p = tmp_path / f"{name}.svg"
    charts.save(chart, p)
    assert mark in p.read_text()
    charts.save(chart, tmp_path / f"{name}.png")
    assert (tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
