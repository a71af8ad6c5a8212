"""The critical path of a step and what a change would buy (method.md, "Critical
path and what-if").

The step graph is SQL (schema/views/step_graph.sql: step_graph_nodes, _edges,
_rank_edges). This module reads one iteration of it (one run, or every rank of a
job) and

- walks the critical path back from the step's last end, at each point taking the
  dependency that finished last (with measured times this is the longest path of
  the graph; HTA's networkx longest path gives the same on its test traces, see
  tests/test_critical_path_hta.py), so the path's segments tile the step: their
  durations add up to the step time;
- replays the graph with changed durations (what_if): points in topological
  order, each at the latest of (its predecessor's new time + the edge's weight);
  an edge that bound a point keeps its measured gap, one that did not keeps at
  most the typical binding gap of its kind (so nothing unchanged moves, and a
  kernel queued behind a shortened one starts as soon as its stream lets it).

It registers the preparers of the critical_path, critical_path_summary and
what_if reports with the report engine.
"""
import concurrent.futures
import contextlib
import dataclasses
import functools
import gc
import heapq
import itertools
import re
import statistics
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from . import critpath_workers
from ..query import reports
from ..query.reports import ReportError
from ..store import db, tuning
from ..store.sql import rows

# A kernel-to-kernel gap of a CUDA graph replay, ns: the median gap between
# consecutive kernels of one stream inside one graph launch in
# tests/data/graph_h200/h200_graph_train.json.gz (H200, 132 gaps; 416 ns in
# tests/data/whatif/graph_b.json.gz too, 954 gaps; tests/test_critical_path.py
# measures it).
GRAPH_NODE_GAP_NS = 416

# Synchronizing runtime calls (the sync edges of step_graph_edges; remove_syncs).
SYNC_CALL = re.compile(r"^cu(da)?((Device|Stream|Event|Ctx)Synchronize|Memcpy(?!.*Async))|^cuMemcpy")
ITEM_COPY = re.compile(r"^cu(da)?MemcpyAsync|^cuMemcpyDtoHAsync")
# Runtime calls that launch GPU work (their CPU time: launch overhead).
LAUNCH_CALL = re.compile(r"Launch|Memcpy|Memset", re.I)
# A point with a dependency known to be missing costs more than this, ns, before its
# segment is named 'unknown dependency' (a kernel launched long after its
# predecessor, which no edge of the trace explains).
UNKNOWN_GAP_NS = 50_000

CATEGORIES = ("cpu op", "launch overhead", "kernel", "memcpy", "communication", "waiting for another rank",
              "sync", "idle", "previous iteration", "unknown dependency")


@dataclass(slots=True)
class Node:
    run: str
    node_id: int
    kind: str
    name: str
    thread: tuple         # (pid, tid) of CPU events, None for GPU activity
    stream: object        # GPU: stream
    start: int
    end: int
    layer: str = None     # GPU: layer type (kernel_layers)
    rank: int = None
    launch: int = None    # GPU: the launch call (node_id), None when the trace links none
    op_name: str = None   # GPU: the innermost op around its launch
    pg: str = None        # collective kernel: process group
    arrival: int = None   # collective kernel: the last rank's arrival (its kernel start), ns
    last_rank: int = None  # collective kernel: the rank that arrived last
    parent: int = None    # CPU: innermost enclosing event on its thread (index), computed


@dataclass
class Graph:
    nodes: list = field(default_factory=list)
    # point (node index, is_end) -> list of (src point, kind, gap_ns)
    preds: dict = field(default_factory=dict)
    after_open: dict = field(default_factory=dict)   # CPU point -> innermost open node index after it
    open_sets: dict = field(default_factory=dict)    # CPU point -> tuple of open node indexes after it
    start_ns: int = 0       # the iteration's start (earliest over ranks for a job)
    end_ns: int = 0         # the iteration's end as stored (latest over ranks)
    dur_ns: int = 0
    runs: dict = field(default_factory=dict)         # run -> rank

    def ts(self, p):
        n = self.nodes[p[0]]
        return n.end if p[1] else n.start


def _order_key(g, p):
    """The order of a point among those with its time: as step_graph_edges orders a
    thread (an end before a start, a parent's start first, a child's end first)."""
    n = g.nodes[p[0]]
    if p[1]:
        return (n.end, 2 if n.end == n.start else 0, -n.start, p[0])
    return (n.start, 1, -n.end, p[0])


# ---- reading the graph ---------------------------------------------------------

_NODES = """
SELECT n.run, n.node_id, n.kind, n.name, n.pid, n.tid, n.stream, n.start_ns, n.end_ns,
       l.layer_type, k.launch_event_id, k.op_name, c.process_group, n.iteration
FROM step_graph_nodes n
LEFT JOIN kernels k ON k.run = n.run AND k.kernel_id = n.node_id AND n.pid IS NULL
LEFT JOIN kernel_layers l ON l.run = n.run AND l.kernel_id = n.node_id AND n.pid IS NULL
LEFT JOIN collectives c ON c.run = n.run AND c.kernel_id = n.node_id AND n.pid IS NULL
WHERE n.run IN (SELECT unnest($runs)) AND n.iteration IS NOT NULL
ORDER BY n.run, n.iteration, n.start_ns, n.node_id
"""

# The nodes of a chunk of iterations (chunk_rows): the joins with the kernels read
# only theirs, not the whole window's (the window holds the iteration before and a
# second after: ten or more iterations of a big trace).
_CHUNK_NODES = _NODES.replace("AND n.iteration IS NOT NULL", "AND n.iteration IN (SELECT unnest($its))")
if _CHUNK_NODES == _NODES:          # (not an assert: it would be gone under python -O)
    raise RuntimeError("critpath: _NODES lost the iteration filter _CHUNK_NODES replaces")

# The edges of several runs in one statement: the views sweep the runs' events once
# (per run, each statement swept every run's: 0.9 CPU s a rank of a 64-rank job);
# sorted, so that ties in the walk go the same way whatever DuckDB's threads did.
_EDGES = """
SELECT run, src_id, src_end, dst_id, dst_end, kind, gap_ns FROM step_graph_edges
WHERE run IN (SELECT unnest($runs))
ORDER BY run, dst_id, dst_end, src_id, src_end, kind
"""

_RANK_EDGES = """
SELECT e.src_run, e.src_id, e.dst_id, e.dst_run, r.rank, k.ts_ns
FROM step_graph_rank_edges e JOIN kernels k ON k.run = e.src_run AND k.kernel_id = e.src_id
JOIN runs r ON r.run = e.src_run
WHERE e.dst_run IN (SELECT unnest($runs))
"""


@contextlib.contextmanager
def step_window(con, lo, hi, runs=None):
    """The step graph's views read only events starting in [lo, hi] inside the block
    (macro in_step_window), of the runs (None: all): one iteration's graph without
    sweeping the whole run, nor the database's other runs."""
    con.execute("SET VARIABLE tracedb_step_window = {'lo': $lo::BIGINT, 'hi': $hi::BIGINT, 'runs': $runs::VARCHAR[]}",
                {"lo": lo, "hi": hi, "runs": None if runs is None else list(runs)})
    try:
        yield
    finally:
        con.execute("RESET VARIABLE tracedb_step_window")


def _window_of(con, runs, iteration, last=None):
    """[lo, hi] that holds iteration's events (through iteration last's, a chunk of
    iterations) and the iteration before it (the work an iteration's first points
    wait for), over the runs; None when unknown."""
    got = rows(con, "SELECT min(p.start_ns) FROM iterations i "
                    "LEFT JOIN iterations p ON p.run = i.run AND p.iteration = i.iteration - 1 "
                    "WHERE i.run IN (SELECT unnest($runs)) AND i.iteration = $iteration",
               {"runs": list(runs), "iteration": iteration})
    lo_prev = got[0][0] if got else None
    lo, hi = rows(con, "SELECT min(start_ns) FILTER (WHERE iteration = $iteration), max(end_ns) FROM iterations "
                       "WHERE run IN (SELECT unnest($runs)) AND iteration BETWEEN $iteration AND $last",
                  {"runs": list(runs), "iteration": iteration,
                   "last": iteration if last is None else last})[0]
    if hi is None:
        return None
    lo = lo_prev if lo_prev is not None else lo
    if lo is None:
        return None
    return lo, hi + 1_000_000_000     # CPU events that start in it may end a second later


def _run_rows(con, run, cache):
    """The run's nodes by iteration and its edges by the iteration of their dst
    (read once per run, or per chunk of iterations: in the step window the views
    are read in then)."""
    if run not in cache:
        _read_runs(con, [run], cache)
    return cache[run]


def _read_runs(con, runs, cache):
    """_run_rows of each of the runs not in cache, read in one statement each for
    nodes and edges."""
    need = [r for r in runs if r not in cache]
    if not need:
        return
    nodes, edges = {}, {}
    for r in rows(con, _NODES, {"runs": need}):
        nodes.setdefault(r[0], []).append(r)
    for e in rows(con, _EDGES, {"runs": need}):
        edges.setdefault(e[0], []).append(e[1:])
    for r in need:
        cache[r] = _grouped(nodes.get(r, ()), edges.get(r, ()))


def _grouped(node_rows, edge_rows):
    nodes, it_of = {}, {}
    for r in node_rows:
        got = nodes.get(r[-1])
        if got is None:
            nodes[r[-1]] = [r]
        else:
            got.append(r)
        it_of[r[1]] = r[-1]
    edges = {}
    for e in edge_rows:
        it = it_of.get(e[2])
        if it is not None:
            got = edges.get(it)
            if got is None:
                edges[it] = [e]
            else:
                got.append(e)
    return nodes, edges


def _arrow_rows(table):
    """An Arrow table's rows as tuples (what fetchall gives)."""
    return zip(*(c.to_pylist() for c in table.columns))


def _load_run(con, g, run, iteration, rank, cache):
    idx = {}
    nodes, edges = _run_rows(con, run, cache)
    gn = g.nodes
    for (r, nid, kind, name, pid, tid, stream, s, e, layer, launch, op, pg, _) in nodes.get(iteration, ()):
        idx[nid] = len(gn)
        gn.append(Node(r, nid, kind, name, (pid, tid) if pid is not None else None, stream, s, e,
                       layer, rank, launch, op, pg))
    outside = {}
    preds = g.preds
    for (src, src_end, dst, dst_end, kind, gap) in edges.get(iteration, ()):
        di = idx.get(dst)
        if di is None:
            continue
        si = idx.get(src)
        if si is None:             # work of another iteration: a point fixed at its measured time
            d = gn[di]
            t = (d.end if dst_end else d.start) - gap
            key = (src, src_end)
            if key not in outside:
                outside[key] = len(gn)
                gn.append(Node(run, src, "outside", None, None, None, t, t, rank=rank))
            src_p = (outside[key], True)
        else:
            src_p = (si, src_end)
        p = (di, dst_end)
        got = preds.get(p)
        if got is None:
            preds[p] = [(src_p, kind, gap)]
        else:
            got.append((src_p, kind, gap))
    for i in idx.values():        # a GPU activity's end waits for its start
        n = gn[i]
        if n.thread is None:
            preds.setdefault((i, True), []).append(((i, False), "duration", n.end - n.start))
    return idx


def _runs_of(con, run, job):
    if job is not None:
        return rows(con, "SELECT run, rank FROM job_runs WHERE job = $job ORDER BY rank, run", {"job": job})
    return rows(con, "SELECT r.run, r.rank FROM runs r WHERE r.run = $run", {"run": run})


def load(con, run=None, iteration=None, job=None, cache=None):
    """The step graph of one iteration: of one run, or of every rank of a job (with
    the collectives' edges across ranks). None when the iteration has no nodes.
    cache: the run's rows read before (graphs(): a chunk of iterations), else the
    views are read in the iteration's window."""
    g = Graph()
    runs = _runs_of(con, run, job)
    if cache is None:        # one iteration: read the views in its window only
        names = [r for r, _ in runs]
        win = _window_of(con, names, iteration)
        if win is not None:
            # as a chunk of one (graphs()): the window's rows stay Arrow, and only the
            # iteration's are made Python rows (a tenth of them on a big trace)
            return _load(con, g, runs, iteration, job, _chunk_tables(con, names, [iteration], win))
        cache = {}
    return _load(con, g, runs, iteration, job, cache)


# Iterations read at once by graphs(): the views are read in the window of each
# chunk of this many iterations (and the one before it, and the second after it a
# one-iteration window reads too), so the rows held stay a chunk's (as Arrow), not
# the run's. The 1 GB trace (6,000 nodes and 12,700 edges an iteration): the SQL
# 14.9 CPU s for 300 iterations in chunks of 50, 22.3 s in chunks of 20 (a window's
# tail is ~10 iterations); peak RSS 1.41 GB (docs/benchmarks.md).
CHUNK_ITERATIONS = 50


@contextlib.contextmanager
def _gc_paused():
    """The cyclic garbage collector off while graphs are built: they hold no cycles,
    and with it on each of the many small objects they are made of triggers passes
    over all of them (half the time of iteration=all on a 1 GB trace)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def graphs(con, its):
    """(run, job, iteration, graph or None) for each (run, job, iteration) of its
    (iterations()); the same graphs load() gives one at a time. Several
    iterations of one run or job are read a chunk of consecutive ones at a time: the
    views once per chunk, in the window that holds the chunk and the iteration
    before it (each iteration's graph sees at least what its own window holds),
    the next chunk's SQL on a second connection while this chunk's graphs are
    built (DuckDB runs without Python's lock: the two overlap on two cores)."""
    if len(its) == 1:
        run, job, it = its[0]
        yield run, job, it, load(con, run, it, job)
        return
    with _reader(con) as read:
        for (run, job), group in itertools.groupby(its, key=lambda x: (x[0], x[1])):
            runs = _runs_of(con, run, job)
            names = [r for r, _ in runs]
            group = [it for _, _, it in group]
            shared = shared_rows(con, names)
            chunks = [group[k:k + CHUNK_ITERATIONS] for k in range(0, len(group), CHUNK_ITERATIONS)]
            ahead = read(names, chunks[0])
            for k, chunk in enumerate(chunks):
                tables = ahead.result()
                if k + 1 < len(chunks):
                    ahead = read(names, chunks[k + 1])
                yield from chunk_graphs(con, runs, run, job, chunk, shared, tables)
                del tables


def shared_rows(con, names):
    """What every chunk of the runs' iterations reads: the runs' iterations and the
    job's edges across ranks (_load's cache)."""
    shared = {}
    for r in names:
        _spans(con, r, shared)
    _rank_edges(con, names, shared)
    return shared


def chunk_graphs(con, runs, run, job, chunk, shared, tables):
    """(run, job, iteration, graph or None) of each iteration of a chunk, from the
    rows read (shared_rows, _chunk_tables: no SQL)."""
    cache = dict(shared)
    cache.update(tables)
    for it in chunk:
        yield run, job, it, _load(con, Graph(), runs, it, job, cache)


def _chunk_tables(con, names, chunk, win=None):
    """The runs' nodes and edges (Arrow) read in the window of a chunk of iterations
    (win: _window_of's, where the caller has it), only the chunk's: the iteration before
    it and the window's tail are left here, before they are made Python rows (a third
    of the window's)."""
    win = win or _window_of(con, names, chunk[0], max(chunk))
    out = {}
    with step_window(con, *win, names) if win is not None else contextlib.nullcontext():
        for r, (n, e) in chunk_rows(con, names, chunk).items():
            out[r] = (_Slices(n, "iteration"), _Slices(e, "_it"))
    return out


def chunk_rows(con, runs, chunk):
    """run -> (nodes, edges) of the runs' nodes of the chunk's iterations and the edges
    into them (Arrow), as the views give them in the window set (step_window), read
    in one statement each: nodes sorted by iteration, edges by their dst's (column
    _it), each stable, in the order read."""
    n_all = con.sql(_CHUNK_NODES, params={"runs": list(runs), "its": list(chunk)}).to_arrow_table()
    e_all = con.sql(_EDGES, params={"runs": list(runs)}).to_arrow_table()
    # only the edges into the chunk's nodes are kept: the window's tail and the iteration
    # before are let go before the runs are split (node ids repeat across runs: each run's
    # own are matched below)
    e_all = e_all.filter(pc.is_in(e_all.column("dst_id"), value_set=n_all.column("node_id").combine_chunks()))
    out = {}
    for run in runs:
        n = n_all.filter(pc.equal(n_all.column("run"), run)) if len(runs) > 1 else n_all
        e = (e_all.filter(pc.equal(e_all.column("run"), run)) if len(runs) > 1 else e_all).drop_columns(["run"])
        ids = n.column("node_id").combine_chunks()
        e = e.filter(pc.is_in(e.column("dst_id"), value_set=ids))
        # each edge under its dst's iteration (as _grouped)
        e = e.append_column("_it", pc.take(n.column("iteration"), pc.index_in(e.column("dst_id"), value_set=ids)))
        out[run] = (n.sort_by("iteration"), e.sort_by("_it"))
    return out


class _Slices:
    """A chunk's rows (Arrow, sorted by iteration), made Python rows one iteration at
    a time (what _grouped gives for it): Python holds one iteration's rows, not the
    chunk's."""

    def __init__(self, table, by):
        self.table = table.drop_columns([by]) if by.startswith("_") else table
        self.at, k = {}, 0
        for v in pc.value_counts(table.column(by).combine_chunks()).to_pylist():
            self.at[v["values"]] = (k, v["counts"])
            k += v["counts"]

    def get(self, iteration, default=()):
        got = self.at.get(iteration)
        if got is None:
            return default
        return list(_arrow_rows(self.table.slice(*got)))


@contextlib.contextmanager
def _reader(con):
    """read(names, chunk) -> a future of _chunk_tables: on a worker thread with a
    second connection (a cursor: the same database, with this version's views and
    the connection's settings), or, where one cannot be made, here."""
    try:
        cur = con.cursor()
        tuning.asof_by_sort(cur)
        db.shadow_stale_views(cur)
    except Exception:            # (a sandboxed connection's locked settings): read here
        cur = None
    if cur is None:
        def here(names, chunk):
            f = concurrent.futures.Future()
            f.set_result(_chunk_tables(con, names, chunk))
            return f
        yield here
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            yield lambda names, chunk: pool.submit(_chunk_tables, cur, names, chunk)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            cur.close()


def _spans(con, run, cache):
    """The run's iterations: iteration -> (start_ns, end_ns)."""
    key = ("spans", run)
    if key not in cache:
        cache[key] = {i: (s, e) for i, s, e in rows(
            con, "SELECT iteration, start_ns, end_ns FROM iterations WHERE run = $run", {"run": run})}
    return cache[key]


def _rank_edges(con, runs, cache):
    """The edges across ranks into the runs' collectives: (dst_run, dst_id) -> rows."""
    key = ("rank_edges", tuple(runs))
    if key not in cache:
        by_dst = {}
        for r in rows(con, _RANK_EDGES, {"runs": list(runs)}):
            by_dst.setdefault((r[3], r[2]), []).append(r)
        cache[key] = by_dst
    return cache[key]


def _load(con, g, runs, iteration, job, cache):
    spans = []
    index = {}
    _read_runs(con, [r for r, _ in runs], cache)
    for r, rank in runs:
        it = _spans(con, r, cache).get(iteration)
        if it is None:
            continue
        spans.append(it)
        g.runs[r] = rank
        index[r] = _load_run(con, g, r, iteration, rank, cache)
    if not spans or not g.nodes:
        return None
    g.start_ns = min(s for s, _ in spans)
    g.end_ns = max(e for _, e in spans)
    g.dur_ns = g.end_ns - g.start_ns
    # collectives: the rank that arrived last (per run: its arrival; in a job: an edge)
    by_dst = _rank_edges(con, [r for r, _ in runs], cache)
    if by_dst:
        for dst_run, idx in index.items():
            for dst_id, di in idx.items():
                n = g.nodes[di]
                if n.thread is not None:
                    continue
                for (src_run, src_id, _, _, src_rank, src_ts) in by_dst.get((dst_run, dst_id), ()):
                    n.last_rank = src_rank
                    if src_run != dst_run and src_ts > n.start:
                        n.arrival = src_ts
                        si = index.get(src_run, {}).get(src_id) if job is not None else None
                        if si is not None:
                            g.preds.setdefault((di, True), []).append(((si, False), "collective", n.end - src_ts))
    _threads(g)
    return g


def _threads(g):
    """Each CPU point's innermost open event after it, and the events open there."""
    by_thread = {}
    for i, n in enumerate(g.nodes):
        if n.thread is not None:
            s, e = n.start, n.end
            pts = by_thread.get((n.run, n.thread))
            if pts is None:
                pts = by_thread[(n.run, n.thread)] = []
            # _order_key's, the point last (the keys differ in their second item)
            pts.append((s, 1, -e, i, False))
            pts.append((e, 2 if e == s else 0, -s, i, True))
    after_open, open_sets, nodes = g.after_open, g.open_sets, g.nodes
    for pts in by_thread.values():
        pts.sort()
        stack = []
        for (_, _, _, i, at_end) in pts:
            if at_end:
                if i in stack:
                    while stack[-1] != i:
                        stack.pop()
                    stack.pop()
            else:
                if stack:
                    nodes[i].parent = stack[-1]
                stack.append(i)
            p = (i, at_end)
            after_open[p] = stack[-1] if stack else None
            open_sets[p] = tuple(stack)


# ---- the critical path ---------------------------------------------------------

_PRIORITY = {"collective": 0, "sync": 1, "join": 2, "event_wait": 3, "gpu_wait": 3, "stream": 4, "launch": 5, "fork": 6,
             "thread": 7, "duration": 8}


def binding(g, p):
    """The dependency of point p that finished last (its measured time at most p's):
    (src point, kind, gap) or None."""
    nodes = g.nodes
    n = nodes[p[0]]
    t = n.end if p[1] else n.start
    best = best_key = None
    for pred in g.preds.get(p, ()):
        src = pred[0]
        m = nodes[src[0]]
        st = m.end if src[1] else m.start
        if st > t:
            continue
        key = (st, -_PRIORITY.get(pred[1], 9))
        if best is None or key > best_key:
            best, best_key = pred, key
    return best


def _sink(g):
    return max(((i, True) for i, n in enumerate(g.nodes) if n.kind != "outside"), key=lambda p: (g.ts(p), -_order_key(g, p)[1]))


@dataclass
class Segment:
    node: int            # node index the time is attributed to (None: nothing ran)
    category: str
    edge: str            # the edge kind that bound the later point (duration: the node's own time)
    start: int
    dur: int
    missing: str = None  # the edge kind a trace lacked where the category is 'unknown dependency'
    run: str = None


def _gpu_category(n):
    if n.pg is not None:
        return "communication"
    return "memcpy" if n.kind in ("memcpy", "memset") else "kernel"


def _cpu_category(g, i):
    if i is None:
        return "idle"
    n = g.nodes[i]
    if n.kind == "runtime":
        return "sync" if SYNC_CALL.search(n.name or "") else "launch overhead"
    return "cpu op"


def critical_path(g, per_rank_waits=True):
    """The path's segments, earliest first, from the step's last end back to its
    start; their durations add up to the time from the path's first point to the
    step's last end (the iteration's start to end when the first point is its start)."""
    segs = []
    p = _sink(g)
    while True:
        n = g.nodes[p[0]]
        t = g.ts(p)
        if p[1] and n.thread is None and n.arrival is not None and per_rank_waits and \
                not any(k == "collective" for _, k, _ in g.preds.get(p, ())):
            # one rank's view: the collective ended after the last rank arrived
            segs.append(Segment(p[0], "communication", "collective", n.arrival, n.end - n.arrival, run=n.run))
            segs.append(Segment(p[0], "waiting for another rank", "collective", n.start, n.arrival - n.start,
                                run=n.run))
            p = (p[0], False)
            continue
        b = binding(g, p)
        if b is None:
            if n.kind == "outside" and t > g.start_ns:
                segs.append(Segment(None, "previous iteration", "none", g.start_ns, t - g.start_ns, run=n.run))
            elif t > g.start_ns:
                missing = "launch" if (n.thread is None and not p[1] and n.launch is None) else None
                segs.append(Segment(None, "unknown dependency" if missing else "idle", "none", g.start_ns,
                                    t - g.start_ns, missing, n.run))
            break
        src, kind, _ = b
        st = g.ts(src)
        seg = _segment(g, src, p, kind, st, t)
        if seg.dur > 0 or kind == "duration":
            segs.append(seg)
        if st <= g.start_ns and t > g.start_ns:
            seg.dur, seg.start = t - g.start_ns, g.start_ns
            break
        p = src
    segs.reverse()
    return _unseen_host_wait(g, segs)


def _unseen_host_wait(g, segs):
    """Name the wait a trace does not show: a step whose path never reaches the GPU,
    in a trace with no synchronize call (XLA's host waits for the GPU in
    block_until_ready, which no runtime call marks), ends on a host range inside which
    the step's last GPU work ended. Up to that end the range waited on the GPU
    through an edge the trace lacks: an 'unknown dependency' with missing_edge 'sync',
    never CPU time."""
    if not segs or any(s.category in GPU_CATEGORIES for s in segs):
        return segs
    last = segs[-1]
    if last.node is None or g.nodes[last.node].thread is None:
        return segs
    if any(n.thread is not None and n.kind == "runtime" and SYNC_CALL.search(n.name or "") for n in g.nodes):
        return segs                     # the trace shows its syncs: the walk saw them
    gpu_end = max((n.end for n in g.nodes if n.thread is None and n.kind != "outside"
                   and n.end <= last.start + last.dur), default=None)
    if gpu_end is None or gpu_end - last.start <= UNKNOWN_GAP_NS:
        return segs
    wait = Segment(last.node, "unknown dependency", "none", last.start, gpu_end - last.start, "sync", last.run)
    last.start, last.dur = gpu_end, last.start + last.dur - gpu_end
    return segs[:-1] + [wait] + ([last] if last.dur > 0 else [])


def _segment(g, src, p, kind, st, t):
    n = g.nodes[p[0]]
    dur = t - st
    if kind == "duration":
        return Segment(p[0], _gpu_category(n), kind, st, dur, run=n.run)
    if kind == "collective":
        return Segment(p[0], "communication", kind, st, dur, run=n.run)
    if kind == "thread":
        owner = g.after_open.get(src)
        cat = _cpu_category(g, owner)
        missing = None
        if owner is not None and cat == "sync" and dur > UNKNOWN_GAP_NS and src == (owner, False) and p == (owner, True):
            cat, missing = "unknown dependency", "sync"     # a call that blocked on nothing the trace shows
        return Segment(owner, cat, kind, st, dur, missing, n.run)
    if kind == "launch":
        return Segment(p[0], "launch overhead", kind, st, dur, run=n.run)
    if kind == "sync":
        return Segment(p[0], "sync", kind, st, dur, run=n.run)
    if kind == "launch" and n.kind == "kernel" and dur > UNKNOWN_GAP_NS:
        # the stream was free and the launch long made: a wait the trace does not show
        return Segment(p[0], "unknown dependency", kind, st, dur, "event_wait", n.run)
    if kind == "stream" and n.launch is None and dur > UNKNOWN_GAP_NS:
        return Segment(p[0], "unknown dependency", kind, st, dur, "launch", n.run)
    return Segment(None, "idle", kind, st, dur, run=n.run)


# ---- what-if -------------------------------------------------------------------

def like(pattern):
    """A SQL LIKE pattern (% any text, _ one character, case-sensitive) as a
    compiled regular expression for fullmatch; None stays None."""
    if pattern is None:
        return None
    return re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern), re.S)


@dataclass
class Change:
    scale: float = 1.0
    kernel_layer: str = None
    kernel_like: str = None
    op_like: str = None
    remove_cpu_like: str = None
    remove_syncs: bool = False
    zero_launch_overhead: bool = False
    remove_rank_lateness: str = None
    overlap_comm: str = None

    def selects_kernels(self):
        return self.kernel_layer is not None or self.kernel_like is not None or self.op_like is not None

    def __post_init__(self):
        self.kernel_re = like(self.kernel_like)
        self.op_re = like(self.op_like)
        self.cpu_re = like(self.remove_cpu_like)

    def selected(self, n):
        if n.thread is not None or n.kind == "outside" or not self.selects_kernels():
            return False
        if self.kernel_layer is not None and n.layer != self.kernel_layer:
            return False
        if self.kernel_re is not None and not self.kernel_re.fullmatch(n.name or ""):
            return False
        if self.op_re is not None and not self.op_re.fullmatch(n.op_name or ""):
            return False
        return True

    def late(self, n):
        if self.remove_rank_lateness is None or n.arrival is None:
            return False
        v = str(self.remove_rank_lateness).strip().lower()
        return v == "all" or (n.last_rank is not None and v == str(n.last_rank))

    def overlapped(self, n):
        if self.overlap_comm is None or n.pg is None:
            return False
        v = str(self.overlap_comm).strip()
        return v.lower() == "all" or v == n.pg


def _launching(g):
    """CPU nodes under which GPU work was launched: the runtime call and every range
    open around it (ops and user ranges: ProfilerStep#N, record_function)."""
    out = set()
    for i, n in enumerate(g.nodes):
        if n.thread is not None and n.kind == "runtime" and LAUNCH_CALL.search(n.name or ""):
            out.update(g.open_sets.get((i, False), ()))
    return out


def _launch_time(g, src, launching):
    """Whether the thread's time after point src is the launching's: inside an op
    that launches GPU work, or in the own time of a range that does (the Python
    between the ops of a step). Ranges that launch nothing (a data loader) keep
    their time."""
    owner = g.after_open.get(src)
    if owner is None:
        return False
    if owner in launching:
        return True
    return any(j in launching and g.nodes[j].kind != "user" for j in g.open_sets.get(src, ()))


def replay(g, change):
    """The step's predicted duration under change, and the replayed point times
    (point -> ns). Unchanged, every point keeps its measured time."""
    removed = set()
    if change.cpu_re is not None:
        removed = {i for i, n in enumerate(g.nodes) if n.thread is not None and change.cpu_re.fullmatch(n.name or "")}
    launching = _launching(g) if change.zero_launch_overhead else set()
    # the typical binding gap of each edge kind: the most a non-binding edge keeps
    bound = {}
    binds = {}
    for p in g.preds:
        b = binding(g, p)
        binds[p] = b
        if b is not None:
            bound.setdefault(b[1], []).append(g.ts(p) - g.ts(b[0]))
    floor = {k: statistics.median(v) for k, v in bound.items()}

    def weight(src, p, kind, is_binding):
        gap = g.ts(p) - g.ts(src)
        n = g.nodes[p[0]]
        if kind == "duration":
            if change.overlapped(n):
                return 0
            if n.arrival is not None:       # a collective: the transfer after the last arrival
                job_view = any(k == "collective" for _, k, _ in g.preds.get(p, ()))
                return n.end - n.arrival if (job_view or change.late(n)) else gap
            return round(gap * change.scale) if change.selected(n) else gap
        if kind == "collective" and (change.overlapped(n) or change.late(n)):
            return None
        if kind == "sync" and change.remove_syncs:
            return None
        if kind == "thread":
            opened = g.open_sets.get(src, ())
            owner = g.after_open.get(src)
            if removed and any(j in removed for j in opened):
                return 0
            if change.remove_syncs and owner is not None and (
                    SYNC_CALL.search(g.nodes[owner].name or "") or _item_copy(g, owner)):
                return 0
            if change.zero_launch_overhead and _launch_time(g, src, launching):
                return 0
        if kind == "launch" and change.zero_launch_overhead:
            return 0
        if kind == "stream" and change.zero_launch_overhead:
            return min(gap, GRAPH_NODE_GAP_NS) if is_binding else min(gap, 0)
        if is_binding:
            return gap
        return min(gap, floor.get(kind, 0))

    order = _topological(g)
    new = {}
    for p in order:
        preds = g.preds.get(p, ())
        b = binds.get(p)
        best = None
        for pred in preds:
            src, kind, _ = pred
            if src not in new:
                continue
            w = weight(src, p, kind, b is not None and pred is b)
            if w is None:
                continue
            v = new[src] + w
            best = v if best is None or v > best else best
        new[p] = g.ts(p) if best is None else best
    end_old = max(g.ts(p) for p in new)
    kept = _kept_ranks(g, change)
    end_new = max(v for p, v in new.items() if kept is None or g.nodes[p[0]].run in kept)
    return g.dur_ns - (end_old - end_new), new


def _kept_ranks(g, change):
    """A job's runs whose end makes the predicted step: all of them, but the rank
    whose lateness is removed (taken to keep pace with the others, who no longer
    wait for it). None: every run (one run's graph, or no such change)."""
    if len(g.runs) < 2 or change.remove_rank_lateness is None:
        return None
    v = str(change.remove_rank_lateness).strip().lower()
    if v == "all":
        return None
    kept = {r for r, rank in g.runs.items() if str(rank) != v}
    return kept or None


def _item_copy(g, i):
    """A cudaMemcpyAsync whose copy the call itself waited for (`.item()`, `.cpu()`):
    a sync edge enters its end."""
    n = g.nodes[i]
    return bool(ITEM_COPY.search(n.name or "")) and any(k == "sync" for _, k, _ in g.preds.get((i, True), ()))


def _topological(g):
    """Every point, each after its predecessors (Kahn's algorithm, earliest measured
    time first); an edge whose source comes later in time than its end is ignored,
    as the walk ignores it."""
    points = [(i, False) for i in range(len(g.nodes))] + [(i, True) for i in range(len(g.nodes))]
    succ, indeg = {}, dict.fromkeys(points, 0)
    for p, preds in g.preds.items():
        for src, kind, _ in preds:
            # a stream's order holds even where the next kernel was measured starting a
            # few ns before the last one ended (programmatic launch, clock jitter):
            # dropping it let a replay run a stream's kernels side by side
            if kind == "stream" or _order_key(g, src) < _order_key(g, p):
                succ.setdefault(src, []).append(p)
                indeg[p] += 1
    heap = [(_order_key(g, p), p) for p in points if indeg[p] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, p = heapq.heappop(heap)
        out.append(p)
        for q in succ.get(p, ()):
            indeg[q] -= 1
            if indeg[q] == 0:
                heapq.heappush(heap, (_order_key(g, q), q))
    if len(out) < len(points):        # a circle of edges: its points in measured order
        seen = set(out)
        out += sorted((p for p in points if p not in seen), key=lambda p: _order_key(g, p))
    return out


def replayed_graph(g, new):
    """A copy of g with the replayed times as measured ones (the new critical path)."""
    h = Graph(preds=g.preds, after_open=g.after_open, open_sets=g.open_sets, start_ns=g.start_ns, runs=g.runs)
    for i, n in enumerate(g.nodes):
        m = dataclasses.replace(n)
        m.start, m.end = new.get((i, False), n.start), new.get((i, True), n.end)
        if m.arrival is not None:
            m.arrival = None if m.end - m.start <= n.end - n.arrival else m.end - (n.end - n.arrival)
        h.nodes.append(m)
    h.end_ns = max(new.values())
    h.dur_ns = h.end_ns - h.start_ns
    return h


# ---- reports' input ------------------------------------------------------------

def iterations(con, run, job, iteration):
    """[(run, job, iteration)] the parameters name: a run's (or job's) steady
    iteration by default, iteration N, or every iteration (all)."""
    text = None if iteration is None else str(iteration).strip().lower()
    if job is not None:
        if text in (None, "", "steady"):
            its = rows(con, "SELECT iteration FROM job_iterations WHERE job = $job AND steady", {"job": job})
        elif text == "all":
            its = rows(con, "SELECT iteration FROM job_iterations WHERE job = $job ORDER BY iteration", {"job": job})
        elif reports._is_step(text):
            its = [(int(text),)]
        else:
            raise ReportError(f"parameter iteration must be an iteration number, steady or all, got {iteration!r}")
        return [(None, job, i) for (i,) in its]
    runs = [r for (r,) in rows(con, "SELECT run FROM runs WHERE kind = 'trace' AND ($run IS NULL OR run = $run) "
                                    "ORDER BY run", {"run": run})]
    out = []
    for r in runs:
        if text in (None, "", "steady"):
            its = rows(con, "SELECT iteration FROM iteration_steadiness WHERE run = $run AND steady", {"run": r})
        elif text == "all":
            its = rows(con, "SELECT iteration FROM iterations WHERE run = $run ORDER BY iteration", {"run": r})
        elif reports._is_step(text):
            its = [(int(text),)]
        else:
            raise ReportError(f"parameter iteration must be an iteration number, steady or all, got {iteration!r}")
        out += [(r, None, i) for (i,) in its]
    return out


GPU_CATEGORIES = ("kernel", "memcpy", "communication", "waiting for another rank")
PATH_TYPES = {"run": pa.string(), "job": pa.string(), "iteration": pa.int32(), "seq": pa.int32(),
              "rank": pa.int32(), "what": pa.string(), "category": pa.string(), "layer_type": pa.string(),
              "node_id": pa.int64(), "node_kind": pa.string(), "place": pa.string(), "edge": pa.string(),
              "start_ns": pa.int64(), "dur_ns": pa.int64(), "missing_edge": pa.string(),
              "step_ns": pa.int64()}


def _place(n):
    if n.thread is not None:
        return f"thread {n.thread[0]}/{n.thread[1]}"
    return f"stream {n.stream}"


def path_rows(g, segs, run, job, iteration):
    out = []
    for k, s in enumerate(segs):
        n = g.nodes[s.node] if s.node is not None else None
        out.append({"run": n.run if n else s.run, "job": job, "iteration": iteration, "seq": k,
                    "rank": n.rank if n else g.runs.get(s.run),
                    "what": n.name if n else _unnamed(s.category),
                    "category": s.category,
                    "layer_type": n.layer if n is not None and s.category in GPU_CATEGORIES else None,
                    "node_id": n.node_id if n else None, "node_kind": n.kind if n else None,
                    "place": _place(n) if n else None, "edge": s.edge,
                    "start_ns": s.start, "dur_ns": s.dur, "missing_edge": s.missing,
                    "step_ns": g.dur_ns})
    return out


def _unnamed(category):
    return {"idle": "(nothing ran)", "previous iteration": "(the previous iteration's work)"}.get(
        category, "(unknown)")


def _table(recs, types):
    return pa.table({c: pa.array([r[c] for r in recs], t) for c, t in types.items()})


class PathColumns:
    """The critical_path table built column by column (the rows of path_rows), a
    chunk of iterations at a time into Arrow: iteration=all of a 1 GB trace is 3 M
    segments."""

    def __init__(self):
        self.cols = {c: [] for c in PATH_TYPES}
        self.tables = []

    def add(self, g, segs, run, job, iteration):
        c = self.cols
        nodes, runs, step = g.nodes, g.runs, g.dur_ns
        n_segs = len(segs)
        c["job"] += [job] * n_segs
        c["iteration"] += [iteration] * n_segs
        c["seq"] += range(n_segs)
        c["step_ns"] += [step] * n_segs
        c["category"] += [s.category for s in segs]
        c["edge"] += [s.edge for s in segs]
        c["start_ns"] += [s.start for s in segs]
        c["dur_ns"] += [s.dur for s in segs]
        c["missing_edge"] += [s.missing for s in segs]
        run_, rank, what, layer, node_id, kind, place = (c[k] for k in (
            "run", "rank", "what", "layer_type", "node_id", "node_kind", "place"))
        for s in segs:
            if s.node is None:
                run_.append(s.run)
                rank.append(runs.get(s.run))
                what.append(_unnamed(s.category))
                layer.append(None)
                node_id.append(None)
                kind.append(None)
                place.append(None)
            else:
                n = nodes[s.node]
                run_.append(n.run)
                rank.append(n.rank)
                what.append(n.name)
                layer.append(n.layer if s.category in GPU_CATEGORIES else None)
                node_id.append(n.node_id)
                kind.append(n.kind)
                place.append(_place(n))

    def flush(self):
        if self.cols["seq"]:
            self.tables.append(pa.table({c: pa.array(v, PATH_TYPES[c]) for c, v in self.cols.items()}))
            self.cols = {c: [] for c in PATH_TYPES}

    def table(self):
        self.flush()
        if not self.tables:
            return _table([], PATH_TYPES)
        return pa.concat_tables(self.tables) if len(self.tables) > 1 else self.tables[0]


def path_table(con, values):
    its = iterations(con, values.get("run"), values.get("job"), values.get("iteration"))
    plan = critpath_workers.plan(con, its, CHUNK_ITERATIONS)
    if plan is None:
        return paths_of(graphs(con, its))
    src, chunks, n = plan             # many iterations, cores for them: chunks in worker processes
    return pa.concat_tables(critpath_workers.in_workers(functools.partial(_in_worker, src, None), chunks, n,
                                                        lambda: [paths_of(graphs(con, its))]))


def paths_of(gs):
    """The critical_path table of the graphs gs ((run, job, iteration, graph or None),
    as graphs() gives them; critpath_spark.py: built from a lake on Spark)."""
    out = PathColumns()
    with _gc_paused():
        for k, (run, job, it, g) in enumerate(gs):
            if g is not None:
                out.add(g, critical_path(g, per_rank_waits=job is None), run, job, it)
            if k % 10 == 9:            # into Arrow: Python holds 10 iterations' segments
                out.flush()
    return out.table()


_WORKER_SHARED = {}


def _in_worker(src, change, chunk, path=True):
    """In a worker process (critpath_workers): the critical_path table of a chunk
    (run, job, iterations) (change None), or what_if's two tables."""
    gs = worker_graphs(src, chunk)
    return paths_of(gs) if change is None else what_ifs_of(gs, change, path)


def worker_graphs(src, chunk):
    """In a worker process: the graphs of a chunk (run, job, iterations), from the
    database of src (critpath_workers.plan) read-only, as graphs() reads the chunk."""
    run, job, its = chunk
    con = critpath_workers.connection(src)
    runs = _runs_of(con, run, job)
    names = [r for r, _ in runs]
    key = (src[0], tuple(names))
    if key not in _WORKER_SHARED:       # (this worker's next chunk of the same runs reuses it)
        _WORKER_SHARED.clear()
        _WORKER_SHARED[key] = shared_rows(con, names)
    return chunk_graphs(con, runs, run, job, its, _WORKER_SHARED[key], _chunk_tables(con, names, list(its)))


def _flag(v):
    return str(v).strip().lower() in ("true", "1") if v is not None else False


def change_of(values):
    scale = values.get("scale")
    return Change(scale=1.0 if scale is None else float(scale), kernel_layer=values.get("kernel_layer"),
                  kernel_like=values.get("kernel_like"), op_like=values.get("op_like"),
                  remove_cpu_like=values.get("remove_cpu_like"), remove_syncs=_flag(values.get("remove_syncs")),
                  zero_launch_overhead=_flag(values.get("zero_launch_overhead")),
                  remove_rank_lateness=values.get("remove_rank_lateness"), overlap_comm=values.get("overlap_comm"))


WHATIF_TYPES = {"run": pa.string(), "job": pa.string(), "iteration": pa.int32(), "step_ns": pa.int64(),
                "predicted_step_ns": pa.int64(), "saving_ns": pa.int64(), "saving_pct": pa.float64(),
                "changed_nodes": pa.int64()}


def what_if(con, values):
    """(rows of what_if, rows of the new critical path)."""
    its = iterations(con, values.get("run"), values.get("job"), values.get("iteration"))
    path = _flag(values.get("path"))      # (the new critical path made only for path=true)
    plan = critpath_workers.plan(con, its, CHUNK_ITERATIONS)
    if plan is None:
        return what_ifs_of(graphs(con, its), change_of(values), path)
    src, chunks, n = plan
    done = critpath_workers.in_workers(functools.partial(_in_worker, src, change_of(values), path=path), chunks, n,
                                       lambda: [what_ifs_of(graphs(con, its), change_of(values), path)])
    return pa.concat_tables([t for t, _ in done]), pa.concat_tables([p for _, p in done])


def what_ifs_of(gs, change, path=True):
    """(rows of what_if, rows of the new critical path) of the graphs gs (paths_of);
    without path, no new path is made (its rows empty: the report shows them only
    with path=true, and making them took 40% of a replay's time)."""
    recs, paths = [], PathColumns()
    with _gc_paused():
        for k, (run, job, it, g) in enumerate(gs):
            if g is not None:
                recs.append(_what_if_one(g, change, run, job, it, paths if path else None))
            if k % 10 == 9:
                paths.flush()
    return _table(recs, WHATIF_TYPES), paths.table()


def _what_if_one(g, change, run, job, it, paths):
    """One iteration's what_if row; its new critical path added to paths (None: not made)."""
    pred, new = replay(g, change)
    changed = sum(1 for n in g.nodes if change.selected(n))
    if paths is not None:
        h = replayed_graph(g, new)
        paths.add(h, critical_path(h, per_rank_waits=job is None), run, job, it)
    return {"run": run, "job": job, "iteration": it, "step_ns": g.dur_ns, "predicted_step_ns": pred,
            "saving_ns": g.dur_ns - pred, "saving_pct": round(100.0 * (g.dur_ns - pred) / g.dur_ns, 3)
            if g.dur_ns else None, "changed_nodes": changed}


PATH_PARAMS = ("run", "job", "iteration")
WHATIF_PARAMS = PATH_PARAMS + ("scale", "kernel_layer", "kernel_like", "op_like", "remove_cpu_like",
                               "remove_syncs", "zero_launch_overhead", "remove_rank_lateness", "overlap_comm")


@contextlib.contextmanager
def _registered(con, tables):
    for name, t in tables.items():
        con.register(name, t)
    try:
        yield
    finally:
        for name in tables:
            con.unregister(name)


def prepared_path(con, values):
    return _registered(con, {"_critical_path": path_table(con, values)})


def prepared_what_if(con, values):
    t, p = what_if(con, values)
    return _registered(con, {"_what_if": t, "_critical_path": p})


reports.register_preparer("critical_path", PATH_PARAMS, prepared_path)
reports.register_preparer("what_if", WHATIF_PARAMS, prepared_what_if)


# ---- the findings' predicted savings (advise) ----------------------------------

# The what-if that models a finding rule's suggestion: its parameters.
RULE_WHAT_IF = {
    "data_loader_wait": {"remove_cpu_like": "enumerate(DataLoader)%"},
    "sync_in_step": {"remove_syncs": "true"},
    "host_bound": {"zero_launch_overhead": "true"},
    "tiny_kernels": {"zero_launch_overhead": "true"},
    "low_comm_overlap": {"overlap_comm": "all"},
    "straggler_rank": {"remove_rank_lateness": "all"},
}
FIRED = ("high", "medium", "low")


def predicted_savings(con, findings):
    """Add to each fired finding whose suggestion a what-if models its predicted
    saving (`saving_ns`, and a sentence at the end of its evidence); advise orders
    the findings of one severity by it. A finding without a run or iteration, or
    whose iteration has no graph, is left as it is."""
    graphs, on_gpu, replayed = {}, {}, {}
    for f in findings:
        params = RULE_WHAT_IF.get(f.get("rule"))
        if params is None or f.get("severity") not in FIRED or f.get("run") is None or f.get("iteration") is None:
            continue
        key = (f["run"], f["iteration"])
        if key not in graphs:
            try:
                graphs[key] = load(con, f["run"], f["iteration"])       # its window only
            except Exception:          # a database without the step graph's views: no prediction
                graphs[key] = None
        g = graphs[key]
        if g is None or not g.dur_ns:
            continue
        if key not in on_gpu:
            on_gpu[key] = any(s.category in GPU_CATEGORIES for s in critical_path(g))
        if not on_gpu[key]:
            # a step whose path never reaches the GPU although its end waits for it (an XLA
            # trace shows no synchronize call): a replay would call every GPU change free
            f["evidence"] = (f"{f['evidence']}; no what_if prediction: the step's critical path holds no GPU "
                             f"work (the trace shows no host wait on the GPU to join them)")
            continue
        what = (key, tuple(sorted(params.items())))       # (host_bound and tiny_kernels: one what-if)
        if what not in replayed:
            replayed[what] = replay(g, change_of(params))[0]
        saving = g.dur_ns - replayed[what]
        f["saving_ns"] = saving
        args = ", ".join(f"{k}={v}" for k, v in params.items())
        f["evidence"] = (f"{f['evidence']}; what_if ({args}) predicts {saving / 1e6:.2f} ms saved a step "
                         f"({100.0 * saving / g.dur_ns:.1f}% of {g.dur_ns / 1e6:.2f} ms)")
    return findings
