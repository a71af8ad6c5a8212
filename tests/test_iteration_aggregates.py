"""Reports with iteration=all read per-iteration aggregates stored at ingest
(schema/load/iteration_aggregates.sql: ops; flop_aggregates.sql: flops_by_op,
flop_utilization, bwd_fwd_ratio) instead of walking every event. Their rows
must be those of the SQL that walked them (a frozen copy in tests/reports_before/,
run on the same connection): iteration=all, the steady default and a numbered
iteration, one run and every run at once, on real traces of several kinds:
PyTorch with several iterations, record_shapes traces (tests/data/flops; GPT-2
paired with its ncu counters: hardware rows beside the stored analytic ones), one
without step markers and with its own CUPTI counters, TensorFlow, JAX through
XProf, the ranks of a DDP job (a folder ingest: the workers' tables carried into
the database), and an Nsight Systems export (no aggregate stored: the report walks
it as before). A database made before the aggregates (no rows, or no table at all
in a read-only file), and FLOP totals stored under other flop_formulas, give the
same rows by the walk."""
from pathlib import Path

import pytest

from conftest import OP_TOTALS_TRACES as TRACES
from tracedb.store import db
from tracedb.ingest import ingest_file
from test_flop_sweeps import _rows as report_rows

BEFORE = Path(__file__).parent / "reports_before"
# report -> the tables its stored form reads
STORED = {"ops": "op_iteration_totals", "flops_by_op": "op_flop_totals",
          "flop_utilization": "op_flop_totals", "bwd_fwd_ratio": "op_flop_totals"}


@pytest.fixture(scope="module")
def path(op_totals_db):
    return op_totals_db


@pytest.fixture(scope="module")
def con(path):
    c = db.connect(path)
    yield c
    c.close()


def _rows(con, name, params, monkeypatch=None):
    """The report's rows; with monkeypatch, those of its frozen SQL before (the walk)."""
    sql = (BEFORE / f"{name}.sql").read_text() if monkeypatch is not None else None
    return report_rows(con, name, params, sql, monkeypatch)


# iteration=all of one run, besides every run at once: the reports take it by the same
# SQL (ops.sql's stored/walked split and op_flop_sums_windows' union are per run, then
# filtered by `$run IS NULL OR run = $run`), so every run's rows are compared in the
# run=None case; one run per branch is compared filtered: gpt2 (stored totals, and for
# the FLOP reports the ncu rows swept beside them) and nsys (no totals: walked/swept)
ALL_OF_ONE_RUN = ("gpt2", "nsys")


def _cases(con, name):
    runs = [r for (r,) in con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY run").fetchall()]
    for run in [None] + runs:
        if run is None or run in ALL_OF_ONE_RUN:
            yield {"iteration": "all"} | ({"run": run} if run else {})
        if run:
            yield {"run": run}
            first = con.execute("SELECT min(iteration) FROM iterations WHERE run = ?", [run]).fetchall()[0][0]
            if first is not None:
                yield {"run": run, "iteration": str(first + 1)}


def _same(con, name, monkeypatch, cases=None):
    compared = 0
    for params in cases or _cases(con, name):
        new = _rows(con, name, params)
        assert new == _rows(con, name, params, monkeypatch), (name, params)
        compared += isinstance(new, list) and len(new) > 0
    return compared


@pytest.mark.parametrize("name", sorted(STORED))
def test_stored_rows_equal_the_walk(con, name, monkeypatch):
    table = STORED[name]
    stored = {r for (r,) in con.execute(f"SELECT DISTINCT run FROM {table}").fetchall()}
    # every trace read by the trace reader has its aggregate (the job's ranks through the
    # folder ingest's workers too); the nsys run has none and is walked
    assert stored == {"amp", "gpt2", "mobilenet", "cupti", "tf", "jax", "ddp.rank0", "ddp.rank1"}
    assert _same(con, name, monkeypatch) >= (13 if name == "ops" else 7)    # (17 and 12 compare rows)


@pytest.mark.parametrize("name", sorted(STORED))
def test_without_the_aggregates(path, tmp_path, name, monkeypatch):
    """A database whose runs have no stored rows (an older tracedb's, migrated), and a
    read-only one without the table: the walk gives the rows. (Every run at once, and
    one run stored and one walked, with iteration=all and the steady default: each
    run's every case is test_stored_rows_equal_the_walk's.)"""
    import shutil
    old = tmp_path / "old.duckdb"
    shutil.copyfile(path, old)
    c = db.connect(old)
    c.execute(f"DELETE FROM {STORED[name]} WHERE run <> 'amp'")     # amp stored, the others walked
    cases = [p | r for p in ({"iteration": "all"}, {}) for r in ({}, {"run": "amp"}, {"run": "gpt2"})]
    assert _same(c, name, monkeypatch, cases) == len(cases)
    c.execute(f"DROP TABLE {STORED[name]}")          # as the tracedb before it (schema 4) made it
    c.execute("UPDATE schema_info SET value = '4' WHERE key = 'version'")
    c.close()
    c = db.connect(old, read_only=True)
    try:
        assert _same(c, name, monkeypatch, cases) == len(cases)
    finally:
        c.close()


def test_both_forms_of_the_depth_sweep(path, tmp_path):
    """The load script's depth sweep has two forms, picked by DuckDB's threads (a
    streaming window up to 4, a window partitioned by thread above): each stores the
    rows the ingest stored, for every trace."""
    import shutil
    from tracedb.store.catalog import sql_text
    from tracedb.store.sql import run_script
    copy = tmp_path / "forms.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        q = "SELECT * FROM op_iteration_totals ORDER BY ALL"
        ingested = c.execute(q).fetchall()
        runs = [r for (r,) in c.execute("SELECT DISTINCT run FROM op_iteration_totals ORDER BY run").fetchall()]
        for threads in (1, 8):
            c.execute(f"SET threads = {threads}")
            c.execute("DELETE FROM op_iteration_totals")
            for run in runs:
                run_script(c, sql_text("schema", "load/iteration_aggregates.sql"), {"run": run})
            assert c.execute(q).fetchall() == ingested, threads
        assert len(ingested) > 500
    finally:
        c.close()


def test_stored_only_when_asked(tmp_path):
    """The totals cost ingest time (docs/benchmarks.md), so a plain ingest stores none
    and `--op-totals` stores them; the report's rows are the same either way."""
    from tracedb.cli import main
    dbs = {}
    for flag in ([], ["--op-totals"]):
        p = tmp_path / f"{len(flag)}.duckdb"
        assert main(["ingest", str(TRACES["amp"]), "--db", str(p), "--run", "amp", *flag]) == 0
        dbs[bool(flag)] = db.connect(p)
    for table, least in (("op_iteration_totals", 100), ("op_flop_totals", 20)):
        stored = {k: c.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for k, c in dbs.items()}
        assert stored[False] == 0 and stored[True] > least, table
    for name in sorted(STORED):
        assert _rows(dbs[False], name, {"iteration": "all"}) == _rows(dbs[True], name, {"iteration": "all"})
    for c in dbs.values():
        c.close()


FLOP_REPORTS = sorted(n for n, t in STORED.items() if t == "op_flop_totals")


def test_flop_totals_follow_the_formulas(path, tmp_path, monkeypatch):
    """FLOP totals are counted under the flop_formulas of their ingest (users may change
    them): once a formula changes, no run's totals are read and the reports count the
    ops again by the new formula, the rows of the walk; before, they are read."""
    import shutil
    copy = tmp_path / "formulas.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        stored = lambda: {r for (r,) in c.execute("SELECT run FROM flop_stored_runs").fetchall()}  # noqa: E731
        assert "amp" in stored()
        old = {n: _rows(c, n, {"iteration": "all"}) for n in FLOP_REPORTS}
        c.execute("UPDATE flop_formulas SET flops_per_element = flops_per_element + 1 WHERE formula = 'eltwise'")
        assert stored() == set()
        for name in FLOP_REPORTS:
            new = _rows(c, name, {"iteration": "all"})
            assert new == _rows(c, name, {"iteration": "all"}, monkeypatch), name
            assert new != old[name], name           # the new formula counts: no stale sums read
    finally:
        c.close()


def test_stored_runs_are_not_swept(con):
    """What makes the stored form fast: the FLOP reports' sweep (op_flops_of(true), the
    rows besides the stored sums) leaves the runs of flop_stored_runs out of the events
    scan, and keeps every other run's ops and every hardware row (GPT-2's ncu counts:
    kernels are matched after the ingest, so never stored)."""
    q = lambda sql: con.execute(sql).fetchall()     # noqa: E731
    stored = {r for (r,) in q("SELECT run FROM flop_stored_runs")}
    assert {"amp", "gpt2", "mobilenet"} <= stored and "nsys" not in stored
    swept = q("SELECT run, source, count(*) FROM op_flops_of(true) GROUP BY ALL ORDER BY ALL")
    every = q("SELECT run, source, count(*) FROM op_flops GROUP BY ALL ORDER BY ALL")
    assert swept == [r for r in every if r[1] != "analytic" or r[0] not in stored]
    assert ("gpt2", "ncu") in {(r, s) for r, s, _ in swept} and ("amp", "analytic", ) not in {r[:2] for r in swept}
    assert ("amp", "analytic") in {r[:2] for r in every}


def test_an_nsys_run_stores_its_totals_when_asked(tmp_path, monkeypatch):
    """--op-totals on an Nsight Systems export (its ops from emit_nvtx ranges): the
    totals are stored, and every report reads the rows of the walk."""
    c = db.connect(tmp_path / "n.duckdb")
    ingest_file(c, TRACES["nsys"], run="nsys", options={"iterations_from": "FlashAttnFunc", "op_totals": True})
    for name, table in STORED.items():
        assert c.execute(f"SELECT count(*) FROM {table} WHERE run = 'nsys'").fetchone()[0] > 0, table
        assert _same(c, name, monkeypatch) >= 1, name
    c.close()


def test_op_totals_through_the_api_and_refused_with_a_lake(tmp_path, capsys):
    """The Python API takes op_totals as the CLI takes --op-totals; a lake ingest, whose
    reports do not read the totals, refuses the flag in one line and writes nothing."""
    from tracedb.api import connect
    from tracedb.cli import main
    with connect(tmp_path / "api.duckdb", read_only=False) as t:
        t.ingest(str(TRACES["jax"]), run="jax", op_totals=True)
    c = db.connect(tmp_path / "api.duckdb", read_only=True)
    assert c.execute("SELECT count(*) FROM op_iteration_totals WHERE run = 'jax'").fetchone()[0] > 0
    c.close()
    assert main(["ingest", str(TRACES["jax"]), "--lake", str(tmp_path / "lake"), "--op-totals"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and not (tmp_path / "lake").exists()
    assert "--op-totals is refused with --lake" in err[0] and "stamp" in err[0] and "--db" in err[0]


def test_what_the_lake_refusal_says_is_so(tmp_path):
    """The refusal's reason, as the lake is: a lake ingest that stored totals would copy
    the totals tables into the lake (their rows, per run) but not schema_info, whose
    'totals' stamp is what lets a database tell another version's totals; without them
    it copies no totals at all."""
    from tracedb.query import lake
    from tracedb.store.catalog import TOTALS_TABLES
    for name, opts in (("with", {"op_totals": True}), ("without", {})):
        d = tmp_path / name
        assert lake.ingest([str(TRACES["jax"])], d, options=opts, report=lambda *a: None) == 0
        got = {t for t in TOTALS_TABLES if (d / t).exists()}
        if opts:
            assert {"op_iteration_totals", "kernel_iteration_totals", "top_kernel_totals"} <= got
        else:
            assert got == set()
        assert not (d / "schema_info").exists()
        assert "schema_info" not in (d / "manifest.json").read_text()
