"""The reports that swept every kernel of a run for iteration=all read the GPU time an
ingest with --op-totals stored (schema/load/kernel_aggregates.sql: kernel_iteration_totals,
gpu_class_totals; launch_queue_totals from the report itself). Their rows must be those of
the views and SQL that swept (frozen copies in tests/reports_before/: kernel_views.sql as
TEMP views in front of today's on a cursor of their own, and the reports whose SQL
changed): iteration=all, the steady default and a numbered iteration, one run and every
run at once, on the traces of op_totals_db (PyTorch, record_shapes traces, GPT-2 with its
ncu counters, a CUPTI trace without step markers, TensorFlow with CPU kernels, JAX, the
two ranks of a DDP job with communication kernels, and an Nsight Systems export ingested
without the totals: swept as before). A database whose runs have no stored rows, a
read-only one made before the tables, and class rules changed since the ingest give the
same rows by the sweep."""
import math
import shutil
from pathlib import Path

import pytest

from conftest import OP_TOTALS_TRACES
from tracedb.store import db
from tracedb.store.sql import statements
from test_flop_sweeps import _rows as report_rows

BEFORE = Path(__file__).parent / "reports_before"
STORED_TABLES = ("kernel_iteration_totals", "gpu_class_totals", "launch_queue_totals", "copy_kernel_overlap",
                 "top_kernel_totals", "idle_totals")
REPORTS = ["launch_queue", "temporal_breakdown", "kernel_type_breakdown", "time_breakdown", "flop_utilization",
           "top_kernels", "occupancy", "system_metrics", "transfers", "utilization_levels", "utilization_by_layer",
           "idle_breakdown", "rank_summary", "gpu_utilization"]
STORED_RUNS = {"amp", "amp4", "gpt2", "mobilenet", "cupti", "tf", "jax", "ddp.rank0", "ddp.rank1"}


@pytest.fixture(scope="module")
def path(op_totals_db, tmp_path_factory):
    """op_totals_db and the amp trace in 4 copies (make_big_trace.py: 4 iterations whose
    kernels run past their step's end into the next), stored as run amp4."""
    import subprocess
    import sys
    from tracedb.ingest import ingest_file
    d = tmp_path_factory.mktemp("kagg")
    subprocess.run([sys.executable, str(Path(__file__).parents[1] / "benchmarks" / "make_big_trace.py"),
                    str(OP_TOTALS_TRACES["amp"]), "4", str(d / "amp4.json")], check=True, capture_output=True)
    p = d / "k.duckdb"
    shutil.copyfile(op_totals_db, p)
    c = db.connect(p)
    ingest_file(c, d / "amp4.json", run="amp4", options={"op_totals": True})
    c.close()
    return p


@pytest.fixture(scope="module")
def con(path):
    c = db.connect(path, read_only=True)
    yield c
    c.close()


def _before(con):
    """A cursor of the same database whose kernel views are those before the change."""
    cur = con.cursor()
    for stmt in statements((BEFORE / "kernel_views.sql").read_text()):
        cur.execute(stmt.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW"))
    return cur


def _rows(con, name, params, monkeypatch=None):
    """The report's rows; with monkeypatch, those of its frozen SQL before where it changed."""
    frozen = BEFORE / f"{name}.sql"
    if monkeypatch is None or not frozen.exists():
        return report_rows(con, name, params)
    return report_rows(con, name, params, frozen.read_text(), monkeypatch)


def _cases(con, name):
    """Every run at once (iteration=all and the default: each run's rows), and one run
    alone: stored with several iterations (amp4), swept (nsys: no totals), a job's rank
    (ddp.rank1: communication kernels), iteration=all, the default and a numbered one."""
    from tracedb.query import reports
    if not reports.get(name).param("iteration"):            # gpu_utilization: every iteration
        yield from ({}, {"run": "amp4"}, {"run": "nsys"})
        return
    yield from ({"iteration": "all"}, {}, {"run": "amp4"})
    for run in ("amp4", "nsys", "ddp.rank1"):
        yield {"run": run, "iteration": "all"}
        first = con.execute("SELECT min(iteration) FROM iterations WHERE run = ?", [run]).fetchall()[0][0]
        yield {"run": run, "iteration": str(first + 1)}
    if name == "launch_queue":
        yield {"iteration": "all", "series": "true", "run": "amp4"}
    if name == "idle_breakdown":            # (stored: by cause with the default short_gap_ns only)
        yield {"iteration": "all", "by": "gap", "run": "amp4"}
        yield {"iteration": "all", "short_gap_ns": "2000", "run": "amp4"}


def test_idle_totals_are_stored_with_the_default_short_gap():
    from tracedb.ingest.trace import _STORED_REPORTS
    from tracedb.query import reports
    stored = {n: p for n, _, _, p, _ in _STORED_REPORTS}
    assert int(reports.get("idle_breakdown").param("short_gap_ns").default) == stored["idle_breakdown"]["short_gap_ns"]


def _close(a, b):
    """Equal, but a DOUBLE may differ in its last bits: a sum of products (occupancy's
    weighted means) adds in the order rows reach it, which a plan decides (the SQL before
    gives such differences between two of its own runs on a large trace)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def _same(con, before, name, monkeypatch, cases=None):
    compared = 0
    for params in cases or _cases(con, name):
        new = _rows(con, name, params)
        old = _rows(before, name, params, monkeypatch)
        assert new == old or _close(new, old), (name, params)
        compared += isinstance(new, list) and len(new) > 0
    return compared


def test_every_trace_run_but_the_nsys_one_is_stored(con):
    for table in STORED_TABLES:         # (copies: only the runs with copies that overlap a kernel)
        runs = {r for (r,) in con.execute(f"SELECT DISTINCT run FROM {table}").fetchall()}
        assert runs == STORED_RUNS if table != "copy_kernel_overlap" else {"ddp.rank0", "ddp.rank1"} <= runs <= STORED_RUNS, table
    assert {r for (r,) in con.execute("SELECT run FROM kernel_stored_runs").fetchall()} == STORED_RUNS
    assert {r for (r,) in con.execute("SELECT run FROM gpu_class_stored_runs").fetchall()} == STORED_RUNS
    # top_kernels' rows are read while no kernel of the run is matched to counters: GPT-2's ncu
    # report, and the CUPTI trace's own counters, leave those runs to the sweep
    assert {r for (r,) in con.execute("SELECT DISTINCT run FROM top_kernel_totals WHERE rules IN (SELECT digest "
                                      "FROM layer_rules_version) AND run NOT IN (SELECT run FROM kernel_levels)"
                                      ).fetchall()} == \
        STORED_RUNS - {"gpt2", "cupti"}


@pytest.mark.parametrize("name", REPORTS)
def test_stored_rows_equal_the_sweep(con, name, monkeypatch):
    before = _before(con)
    try:
        assert _same(con, before, name, monkeypatch) >= 3
    finally:
        before.close()


def test_stored_runs_are_not_swept(con):
    """What makes the stored form fast: the sweeps the views keep for other runs leave
    the stored runs out before their sorts, and every other run in."""
    q = lambda sql: {r for (r,) in con.execute(sql).fetchall()}      # noqa: E731
    assert q("SELECT DISTINCT run FROM gpu_activity_sweep_of(true)") == {"nsys"}
    assert q("SELECT DISTINCT run FROM gpu_class_segments_of(true)") == {"nsys"}
    assert "nsys" in q("SELECT DISTINCT run FROM gpu_activity_sweep") and "amp" in q("SELECT DISTINCT run FROM gpu_activity_sweep")
    assert q("SELECT DISTINCT run FROM activity_segments_of(true)") <= {"nsys"}


def test_the_reports_read_the_stored_rows(path, tmp_path):
    """A stored value changed by hand shows in the reports: they read it, not a sweep."""
    copy = tmp_path / "changed.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        cases = [(n, {"run": "ddp.rank0" if n == "transfers" else "amp", "iteration": "all"})
                 for n in ("utilization_levels", "flop_utilization", "system_metrics", "time_breakdown",
                           "temporal_breakdown", "launch_queue", "transfers", "top_kernels", "idle_breakdown")]
        before = [report_rows(c, n, p) for n, p in cases]
        c.execute("UPDATE kernel_iteration_totals SET kernel_busy_ns = kernel_busy_ns - 1000, "
                  "window_busy_ns = window_busy_ns - 1000, gpu_kernel_ns = gpu_kernel_ns - 1000 WHERE run = 'amp'")
        c.execute("UPDATE gpu_class_totals SET compute_ns = compute_ns - 1000 WHERE run = 'amp'")
        c.execute("UPDATE launch_queue_totals SET max_queued = max_queued + 1 WHERE run = 'amp'")
        c.execute("UPDATE copy_kernel_overlap SET overlap_ns = overlap_ns + 1000 WHERE run = 'ddp.rank0'")
        c.execute("UPDATE top_kernel_totals SET launches = launches + 1 WHERE run = 'amp'")
        c.execute("UPDATE idle_totals SET gaps = gaps + 1 WHERE run = 'amp'")
        for (name, params), rows in zip(cases, before):
            assert report_rows(c, name, params) != rows, name
    finally:
        c.close()


def test_windows_that_cut_busy_time_and_copies_of_other_iterations(path, tmp_path, monkeypatch):
    """Cases the traces lack, made from them and stored again: iteration windows that cut
    kernel busy intervals (amp4's steps shortened at both ends: system_metrics clips the
    busy time to each window), and copies labelled with another iteration than the kernels
    they overlap (ddp.rank0's copies of iteration 2 moved to 3: transfers counts the
    overlap with their own iteration's kernels only). The stored rows are those of the
    sweep."""
    from tracedb.store.catalog import sql_text
    from tracedb.store.sql import run_script
    copy = tmp_path / "cut.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        c.execute("UPDATE iterations SET start_ns = start_ns + dur_ns // 10, end_ns = end_ns - dur_ns // 5, "
                  "dur_ns = end_ns - dur_ns // 5 - start_ns - dur_ns // 10 WHERE run = 'amp4'")
        c.execute("UPDATE kernels SET iteration = 3 WHERE run = 'ddp.rank0' AND kind IN ('memcpy', 'memset') "
                  "AND iteration = 2")
        for run in ("amp4", "ddp.rank0"):
            run_script(c, sql_text("schema", "load/kernel_aggregates.sql"), {"run": run})
        before = _before(c)
        try:
            for name in ("system_metrics", "transfers", "utilization_levels", "kernel_type_breakdown"):
                cases = [{"iteration": "all", "run": "amp4"}, {"iteration": "all", "run": "ddp.rank0"}]
                assert _same(c, before, name, monkeypatch, cases) == 2, name
        finally:
            before.close()
    finally:
        c.close()


def test_without_the_stored_rows(path, tmp_path, monkeypatch):
    """A database whose runs have no stored rows (an older tracedb's, migrated), and a
    read-only one without the tables (schema 5): the sweep gives the rows. One run stored
    and the others swept, every run at once and one of each."""
    old = tmp_path / "old.duckdb"
    shutil.copyfile(path, old)
    c = db.connect(old)
    for table in STORED_TABLES:
        c.execute(f"DELETE FROM {table} WHERE run <> 'amp'")             # amp stored, the others swept
    cases = [{"iteration": "all"}, {"iteration": "all", "run": "amp"}, {"run": "amp4"}]
    names = ["launch_queue", "kernel_type_breakdown", "time_breakdown", "flop_utilization", "system_metrics",
             "top_kernels", "idle_breakdown"]

    def same(c):
        before = _before(c)
        try:
            for name in names:
                assert _same(c, before, name, monkeypatch, cases) == len(cases), name
        finally:
            before.close()
    same(c)
    for table in STORED_TABLES:
        c.execute(f"DROP TABLE {table}")          # as the tracedb before them (schema 5) made it
    c.execute("UPDATE schema_info SET value = '5' WHERE key = 'version'")
    c.close()
    c = db.connect(old, read_only=True)
    try:
        same(c)
    finally:
        c.close()


def test_class_totals_follow_the_rules(path, tmp_path, monkeypatch):
    """Class times are cut under the kernel_class_rules of their ingest (users may add
    rules): once a rule changes, no run's class times are read and the reports cut the
    kernels again by the new rules, the rows of the sweep."""
    copy = tmp_path / "rules.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        params = {"iteration": "all", "run": "amp"}
        old = _rows(c, "kernel_type_breakdown", params)
        c.execute("INSERT INTO kernel_class_rules (priority, field, pattern, kernel_class) "
                  "VALUES (0, 'kind', '^kernel$', 'communication')")
        assert c.execute("SELECT count(*) FROM gpu_class_stored_runs").fetchone()[0] == 0
        before = _before(c)
        try:
            new = _rows(c, "kernel_type_breakdown", params)
            assert new == _rows(before, "kernel_type_breakdown", params, monkeypatch)
        finally:
            before.close()
        assert new != old                       # the new rule counts: no stale class times read
    finally:
        c.close()


def test_top_kernels_follow_the_layer_rules(path, tmp_path, monkeypatch):
    """top_kernels' stored rows carry the layer types of their ingest's layer_rules: once
    a rule is added, they are not read and the sweep types the kernels by the new rule."""
    copy = tmp_path / "layers.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        params = {"iteration": "all", "run": "amp4"}
        old = _rows(c, "top_kernels", params)
        c.execute("INSERT INTO layer_rules (priority, field, pattern, layer_type) VALUES (0, 'kind', '^kernel$', 'mine')")
        before = _before(c)
        try:
            new = _rows(c, "top_kernels", params)
            assert new == _rows(before, "top_kernels", params, monkeypatch)
        finally:
            before.close()
        assert new != old and {r["layer_type"] for r in new} == {"mine"}
    finally:
        c.close()


def test_an_nsys_export_stores_them_too(tmp_path, monkeypatch):
    """--op-totals on an Nsight Systems export (67 iterations by an NVTX range, two
    streams): its rows are stored, and the reports read the rows of the sweep."""
    from tracedb.ingest import ingest_file
    c = db.connect(tmp_path / "n.duckdb")
    try:
        ingest_file(c, OP_TOTALS_TRACES["nsys"], run="nsys",
                    options={"iterations_from": "FlashAttnFunc", "op_totals": True})
        assert {r for (r,) in c.execute("SELECT run FROM kernel_stored_runs").fetchall()} == {"nsys"}
        cases = [{"iteration": "all"}, {"iteration": "all", "run": "nsys"}]
        before = _before(c)
        try:
            for name in ("launch_queue", "kernel_type_breakdown", "system_metrics", "transfers", "top_kernels",
                         "utilization_levels", "time_breakdown"):
                assert _same(c, before, name, monkeypatch, cases) == 2, name
        finally:
            before.close()
    finally:
        c.close()


def test_totals_another_version_stored_are_not_read(path, tmp_path):
    """Totals stored by a tracedb whose views, load scripts or reports differ (its
    schema_info 'totals' another digest) may be stale: a read-only open hides them (the
    reports sweep, a stored value changed by hand does not show) and leaves the file
    as it is; a write open deletes them and stamps this version."""
    from tracedb.store.catalog import TOTALS_TABLES
    copy = tmp_path / "older.duckdb"
    shutil.copyfile(path, copy)
    cases = [("launch_queue", {"run": "amp", "iteration": "all"}), ("idle_breakdown", {"run": "amp", "iteration": "all"})]
    c = db.connect(copy)
    before = [report_rows(c, n, p) for n, p in cases]
    c.execute("UPDATE launch_queue_totals SET max_queued = max_queued + 1 WHERE run = 'amp'")
    c.execute("UPDATE idle_totals SET gaps = gaps + 1 WHERE run = 'amp'")
    assert [report_rows(c, n, p) for n, p in cases] != before          # read while current
    c.execute("UPDATE schema_info SET value = 'older' WHERE key = 'totals'")
    c.close()
    count = lambda con, t: con.execute(f"SELECT count(*) FROM older.main.{t}").fetchone()[0]     # noqa: E731
    r = db.connect(copy, read_only=True)
    assert [report_rows(r, n, p) for n, p in cases] == before
    assert count(r, "launch_queue_totals") and count(r, "op_iteration_totals")
    r.close()
    w = db.connect(copy)
    assert [count(w, t) for t in TOTALS_TABLES] == [0] * len(TOTALS_TABLES)
    assert w.execute("SELECT value FROM schema_info WHERE key = 'totals'").fetchone()[0] == db.totals_digest()
    assert [report_rows(w, n, p) for n, p in cases] == before
    w.close()


@pytest.mark.parametrize("table,macro,field", [("layer_rules", "layer_rules_digest()", "layer_type"),
                                               ("kernel_class_rules", "kernel_class_rules_digest()", "kernel_class"),
                                               ("flop_formulas", "flop_formulas_digest()", "category")])
def test_rule_digests_follow_the_counted_fields_alone(table, macro, field, tmp_path):
    """The digests that stored totals carry (one macro, rows_digest, under the three):
    the same rows written again in the other order, and another source, give the same
    digest (no false alarm: the stored totals stay read); one counted field changed, or a
    row added, gives another."""
    con = db.connect(tmp_path / "d.duckdb")
    digest = lambda: con.execute(f"SELECT {macro}").fetchone()[0]     # noqa: E731
    try:
        first = digest()
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] > 1     # (seeded)
        con.execute(f"CREATE TEMP TABLE kept AS SELECT * FROM {table}")
        con.execute(f"DELETE FROM {table}")
        con.execute(f"INSERT INTO {table} SELECT * FROM kept ORDER BY {field} DESC, pattern DESC"
                    if table != "flop_formulas" else f"INSERT INTO {table} SELECT * FROM kept ORDER BY op DESC")
        con.execute(f"UPDATE {table} SET source = 'elsewhere'")
        assert digest() == first
        key = "op" if table == "flop_formulas" else "pattern"
        con.execute(f"UPDATE {table} SET {field} = {field} || 'x' WHERE {key} = (SELECT min({key}) FROM {table})")
        changed = digest()
        assert changed != first
        con.execute(f"UPDATE {table} SET {field} = substr({field}, 1, length({field}) - 1) "
                    f"WHERE {key} = (SELECT min({key}) FROM {table})")
        assert digest() == first
        con.execute("INSERT INTO flop_formulas (op, formula, category) VALUES ('zz::op', 'none', 'other')"
                    if table == "flop_formulas" else
                    f"INSERT INTO {table} (priority, field, pattern, {field}) SELECT 999, field, '^zz$', {field} "
                    f"FROM kept LIMIT 1")
        assert digest() not in (first, changed)
    finally:
        con.close()
