"""Reports that declare windows read the views that sweep a whole run (the FLOP
views, activity_segments) only in the time windows of the iterations they
report (windows.py): the rows must be those of the unnarrowed views, for every
iteration, the steady default, all runs at once and the cross-run batch
report, on real record_shapes traces with hardware counters (ncu, CUPTI), a run
without step markers, TensorFlow eager runs (CPU kernels, the eager queue), and
a small trace whose ops straddle the step markers."""
import dataclasses
import gzip
import json
import re

import pytest

from conftest import DATA, TF
from tracedb.store import db, tuning
from tracedb.query import reports
from tracedb.query import windows
from tracedb.ingest import ingest_file

FLOPS = DATA / "flops"
CAP = DATA / "capture_h100" / "resnet18_bs32"
NARROWED = sorted(n for n, r in reports.all_reports().items()
                  if r.op_windows or r.segment_windows or r.gpu_time_windows)


def _straddling_trace(path):
    """Two steps, [0, 1000] and [1000, 2000] us. Thread 1: mm A (fp32, 950-1300) holds
    mm B (fp16, 1100-1200), then mm C in step 2. Thread 2: a backward node from 500 to
    1600 holds mm D (1450-1480). Thread 3: mm E (800-1700) holds mm F (1050-1060). So
    step 2's ops are C and D, B and F are nested in ops of step 1, A takes B's fp16,
    and D is backward by a span that began in step 1. A GPU kernel runs from 900 to
    1200, across the start of step 2."""
    mm = lambda name, tid, ts, dur, t: {  # noqa: E731
        "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
        "args": {"Input Dims": [[64, 32], [32, 16]], "Input type": [t, t], "Concrete Inputs": ["", ""]}}
    ev = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
           "ts": 1000 * (n - 1), "dur": 1000} for n in (1, 2)]
    ev += [mm("aten::mm", 1, 950, 350, "float"), mm("aten::mm", 1, 1100, 100, "c10::Half"),
           mm("aten::mm", 1, 1400, 100, "float"),
           {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0",
            "pid": 1, "tid": 2, "ts": 500, "dur": 1100, "args": {}},
           mm("aten::mm", 2, 1450, 30, "float"),
           mm("aten::mm", 3, 800, 900, "float"), mm("aten::mm", 3, 1050, 10, "float"),
           {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 900, "dur": 300, "args": {}}]
    with gzip.open(path, "wt") as f:
        json.dump({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}, f)
    return path


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("opw")
    c = db.connect(tmp / "w.duckdb")
    for name in ("h100_gpt2_bs8_amp", "h100_gpt2_bs16_amp", "h100_mobilenet_v2_ops"):
        ingest_file(c, FLOPS / f"{name}.json.gz")
    ingest_file(c, FLOPS / "h100_gpt2_bs8_amp_ncu_raw_baseunits.csv.gz", pair_with="h100_gpt2_bs8_amp")
    ingest_file(c, FLOPS / "h100_mobilenet_v2_ops_ncu_raw_baseunits.csv.gz", pair_with="h100_mobilenet_v2_ops")
    ingest_file(c, DATA / "cupti" / "a100_cupti_range_profiler.json.gz")     # no step markers
    files = json.loads((CAP / "capture.json").read_text())["files"]
    ingest_file(c, CAP / files["trace"])                                      # three steps
    ingest_file(c, _straddling_trace(tmp / "straddle.json.gz"), run="straddle")
    for p in TF:
        if "lenet" in p.name:                                                 # eager async and sync
            ingest_file(c, p)
    yield c
    c.close()


def test_the_reports_that_declare_windows():
    assert NARROWED == ["bwd_fwd_ratio", "compare_runs", "flop_utilization", "flops_batch_consistency",
                        "flops_by_op", "time_breakdown"]


def _asked(con):
    """Parameter sets: each trace run with its default, each iteration of the runs
    with more than one, and all runs at once."""
    out = [{}]
    for run, its in con.execute("SELECT r.run, list(i.iteration ORDER BY i.iteration) FILTER (i.iteration IS NOT NULL) "
                                "FROM runs r LEFT JOIN iterations i USING (run) WHERE r.kind = 'trace' "
                                "GROUP BY r.run ORDER BY r.run").fetchall():
        out += [{"run": run}] + [{"run": run, "iteration": str(i)} for i in its or [] if len(its) > 1]
    return out


@pytest.mark.parametrize("name", [n for n in NARROWED if n not in ("flops_batch_consistency", "compare_runs")])
def test_narrowed_rows_are_the_full_rows(con, name):
    compared = 0
    for params in _asked(con):
        try:
            want = reports.run(con, name, params, resolve=False)
        except reports.ReportError as e:       # a run without iterations: the same message either way
            with pytest.raises(reports.ReportError, match=re.escape(str(e))):
                reports.run(con, name, params)
            continue
        got = reports.run(con, name, params)
        assert got.to_pylist() == want.to_pylist(), (name, params)
        compared += got.num_rows > 0
    assert compared >= 7
    assert con.execute("SELECT getvariable('tracedb_op_windows')").fetchone()[0] is None


@pytest.mark.parametrize("pattern", [r"_bs(\d+)", r"(\d+)_amp"])
def test_batch_consistency_narrowed_is_the_same(con, pattern):
    params = {"batch_pattern": pattern}
    want = reports.run(con, "flops_batch_consistency", params, resolve=False)
    got = reports.run(con, "flops_batch_consistency", params)
    assert want.num_rows > 0 and got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("params", [{}, {"runs": "resnet18_bs32,h100_gpt2_bs8_amp,cpu_async_lenet_bs64"},
                                    {"runs": "h100_gpt2_bs16_amp,straddle", "baseline": "straddle"},
                                    {"runs": "h100_gpt2_bs8_amp"}])
def test_compare_runs_narrowed_is_the_same(con, params):
    """Each run's steady iteration (GPU and CPU kernels, the ncu-matched gpt2 run): the
    same rows when iteration_gpu_time sweeps only those iterations."""
    want = reports.run(con, "compare_runs", params, resolve=False).to_pylist()
    got = reports.run(con, "compare_runs", params).to_pylist()
    runs = params["runs"].split(",") if params else [r for (r,) in con.execute(
        "SELECT DISTINCT run FROM iterations ORDER BY run").fetchall()]
    assert got == want and [r["run"] for r in want] == runs and len(runs) >= (1 if params else 7)
    assert all(r["total_ns"] > 0 for r in want) and any(r["gpu_util_pct"] > 0 for r in want)
    assert _unset(con)


def test_gpu_time_reads_only_the_steady_iterations(con):
    """Narrowed for compare_runs, iteration_gpu_time sweeps one iteration per run: the
    others read as no GPU time; the steady ones as in full."""
    q = "SELECT run, iteration, kernel_busy_ns, gpu_event_busy_ns, kernels FROM iteration_gpu_time ORDER BY ALL"
    full = con.execute(q).fetchall()
    with windows.narrowed(con, reports.get("compare_runs"), {}):
        narrow = con.execute(q).fetchall()
    steady = set(con.execute("SELECT run, iteration FROM iteration_steadiness WHERE steady").fetchall())
    assert [r for r in narrow if r[:2] in steady] == [r for r in full if r[:2] in steady]
    assert all(r[2:] == (0, 0, 0) for r in narrow if r[:2] not in steady)
    busy = lambda rows: {r[:2] for r in rows if r[4] > 0}        # noqa: E731  (iterations with kernels)
    assert busy(narrow) == busy(full) & steady and len(busy(narrow)) >= 4 and len(busy(full)) > len(busy(narrow))


def test_hardware_sources_are_narrowed_too(con):
    """The ncu and CUPTI rows (kernels in the window) are in what the tests compare."""
    rows = reports.run(con, "flops_by_op", {"run": "h100_gpt2_bs8_amp"}).to_pylist()
    assert {"analytic", "ncu"} <= {r["source"] for r in rows}
    rows = reports.run(con, "flops_by_op", {"run": "a100_cupti_range_profiler"}).to_pylist()
    assert {"analytic", "cupti"} <= {r["source"] for r in rows}


def test_a_window_reads_only_its_iteration(con):
    """resnet18's step 4 window holds fewer ops than the trace, and the narrowed views
    give exactly the full views' ops of that step."""
    report = reports.get("flops_by_op")
    run = "resnet18_bs32"
    its = windows.iterations(con, "iteration", {"run": run, "iteration": 4})
    (lo, hi, first, last), = windows.op_windows(con, its).values()
    start, end = con.execute("SELECT start_ns, marker_end_ns FROM iterations WHERE run = ? AND iteration = 4",
                             [run]).fetchone()
    assert lo <= start and hi >= end and first <= last
    full = con.execute("SELECT event_id, pass, dtype, flops FROM flop_ops WHERE run = ? AND iteration = 4 "
                       "ORDER BY event_id", [run]).fetchall()
    every = con.execute("SELECT count(*) FROM flop_ops WHERE run = ?", [run]).fetchone()[0]
    with windows.narrowed(con, report, {"run": run, "iteration": 4}):
        narrow = con.execute("SELECT event_id, pass, dtype, flops FROM flop_ops WHERE run = ? AND iteration = 4 "
                             "ORDER BY event_id", [run]).fetchall()
        seen = con.execute("SELECT count(*) FROM flop_ops WHERE run = ?", [run]).fetchone()[0]
    assert narrow == full and len(full) > 100
    assert seen < every * 0.6


def test_straddling_ops_keep_their_nesting_pass_and_dtype(con):
    report = reports.get("flops_by_op")
    for it in (1, 2):
        with windows.narrowed(con, report, {"run": "straddle", "iteration": it}):
            got = con.execute("SELECT ts_ns, pass, dtype FROM flop_ops WHERE run = 'straddle' AND iteration = ? "
                              "ORDER BY ts_ns", [it]).fetchall()
        want = con.execute("SELECT ts_ns, pass, dtype FROM flop_ops WHERE run = 'straddle' AND iteration = ? "
                           "ORDER BY ts_ns", [it]).fetchall()
        assert got == want
    base = con.execute("SELECT start_ns FROM iterations WHERE run = 'straddle' AND iteration = 1").fetchone()[0]
    steps = {it: [((ts - base) // 1000, p, d) for ts, p, d in con.execute(
        "SELECT ts_ns, pass, dtype FROM flop_ops WHERE run = 'straddle' AND iteration = ? ORDER BY ts_ns",
        [it]).fetchall()] for it in (1, 2)}
    assert steps[1] == [(800, "forward", "fp32"), (950, "forward", "fp16")]      # E; A with B's type
    assert steps[2] == [(1400, "forward", "fp32"), (1450, "backward", "fp32")]   # C; D in the node of step 1


def test_iteration_all_and_bad_values_are_not_narrowed(con):
    assert windows.iterations(con, "iteration", {"run": "straddle", "iteration": "all"}) is None
    assert windows.iterations(con, "iteration", {"run": "straddle", "iteration": "x"}) is None
    with pytest.raises(reports.ReportError, match="flops_by_op: .*'x'"):
        reports.run(con, "flops_by_op", {"run": "straddle", "iteration": "x"})
    assert con.execute("SELECT getvariable('tracedb_op_windows')").fetchone()[0] is None


def _joins(con, sql):
    plan = "\n".join(str(r[1]) for r in con.execute("EXPLAIN " + sql).fetchall())
    return set(re.findall(r"─ ([A-Za-z ]*Join) ─", plan))


def test_unnarrowed_asof_joins_sort(con):
    """iteration=all reads the FLOP views whole: their ASOF join of ops to iterations
    must sort, not loop (tuning.asof_by_sort). DuckDB loops where it estimates the left side
    under 64 rows, as it does here and for the million ops of a 10 GB trace, whose
    loop made 1.6 G rows (docs/benchmarks.md, History: change 15)."""
    joins = _joins(con, "SELECT * FROM flop_ops")
    assert "Asof Join" in joins and "Nested Loop Join" not in joins
    con.execute("SET asof_loop_join_threshold = 64")                     # DuckDB's default
    try:
        assert "Nested Loop Join" in _joins(con, "SELECT * FROM flop_ops")
    finally:
        tuning.asof_by_sort(con)
    assert con.execute("SELECT current_setting('asof_loop_join_threshold')").fetchone()[0] == 0


@pytest.mark.parametrize("run, iteration", [("resnet18_bs32", 3), ("cpu_async_lenet_bs64", 1),
                                            ("cpu_sync_lenet_bs64", 1), ("straddle", 2)])
def test_a_segment_window_cuts_the_same_segments(con, run, iteration):
    """GPU kernels (resnet18), CPU kernels and the eager queue (lenet), a kernel that
    began before the iteration (straddle): the narrowed activity_segments of the
    iteration are the full ones, from fewer intervals."""
    q = ("SELECT start_ns, end_ns, queued, dequeuing, gpu_kernel, memory_transfer, cpu_kernel, category "
         "FROM activity_segments WHERE run = ? AND iteration = ? ORDER BY start_ns")
    full, every = con.execute(q, [run, iteration]).fetchall(), con.execute(
        "SELECT count(*) FROM activity_segments WHERE run = ?", [run]).fetchone()[0]
    with windows.narrowed(con, reports.get("time_breakdown"), {"run": run, "iteration": iteration}):
        narrow, seen = con.execute(q, [run, iteration]).fetchall(), con.execute(
            "SELECT count(*) FROM activity_segments WHERE run = ?", [run]).fetchone()[0]
    assert narrow == full and len(full) > (1 if run == "straddle" else 10)
    assert seen < every or run == "straddle"     # (its one kernel overlaps both steps)
    if run == "straddle":                       # the kernel runs on into step 2: 1000-1200 us
        assert full[0][4] and full[0][1] - full[0][0] == 200_000 and not full[1][4]
    if "lenet" in run:
        assert any(r[2] for r in full) == ("async" in run) and any(r[6] for r in full)


def _unset(con):
    return con.execute("SELECT getvariable('tracedb_op_windows') IS NULL AND "
                       "getvariable('tracedb_segment_windows') IS NULL AND "
                       "getvariable('tracedb_gpu_time_iterations') IS NULL").fetchone()[0]


def test_windows_are_unset_after_an_error_in_a_transaction(con):
    """The report's error aborts the caller's transaction: the variables are unset all
    the same (or every later read of the views would be narrowed), and the error is
    the report's."""
    report = dataclasses.replace(reports.get("time_breakdown"), op_windows="iteration")   # both kinds set
    con.begin()
    with pytest.raises(Exception, match="Could not convert"):
        with windows.narrowed(con, report, {"run": "straddle", "iteration": "2"}):
            assert con.execute("SELECT getvariable('tracedb_segment_windows') IS NOT NULL").fetchone()[0]
            con.execute("SELECT CAST('x' AS INTEGER)")
    assert _unset(con)


def test_a_leftover_window_does_not_narrow_the_next_report(con):
    con.execute("SET VARIABLE tracedb_op_windows = {'lo_ns': 0, 'hi_ns': 0, 'first_event_id': 0, "
                "'last_event_id': 0, 'first_kernel_id': 0, 'last_kernel_id': 0, 'runs': MAP {}}")
    got = reports.run(con, "flops_by_op", {"run": "resnet18_bs32", "iteration": "4"})
    assert got.num_rows > 10 and _unset(con)
    assert got.to_pylist() == reports.run(con, "flops_by_op", {"run": "resnet18_bs32", "iteration": "4"},
                                          resolve=False).to_pylist()


@pytest.mark.parametrize("value", ["\u0663", "99999999999", "3.0"])
def test_iteration_values_as_the_sql_casts_them(con, value):
    """Python's int() and DuckDB's CAST disagree ('\u0663' is 3 to Python): the window
    is the iteration the report's SQL picks, or none where the SQL refuses it."""
    params = {"run": "resnet18_bs32", "iteration": value}
    try:
        want = reports.run(con, "flops_by_op", params, resolve=False).to_pylist()
    except reports.ReportError as e:
        with pytest.raises(reports.ReportError, match=re.escape(str(e))):
            reports.run(con, "flops_by_op", params)
    else:
        assert reports.run(con, "flops_by_op", params).to_pylist() == want and want
    assert _unset(con)
