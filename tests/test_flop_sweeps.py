"""The FLOP views sweep a run's ops once per report, not once per use: kernel_flop_ops
reads flop_ops only for runs whose kernels are matched to counters (flop_ops_of(true)),
so op_flops of a run without counters does not sweep its ops twice, and bwd_fwd_ratio
gives each op name its layer type from the rows it reads instead of view op_layers
(whose names sweep every op again). The rows must be those of the views and SQL as
they were before (kept in tests/reports_before/ and put on a connection of their own
as temporary views, which DuckDB finds first), on real record_shapes traces with ncu
counters, CUPTI counters (a run without step markers) and none: every FLOP report with
iteration=all, the steady default and iteration N, every run and all runs at once."""
import dataclasses
from pathlib import Path

import pytest

from conftest import DATA
from tracedb.store import db
from tracedb.store.sql import statements
from tracedb.query import reports
from tracedb.ingest import ingest_file

FLOPS = DATA / "flops"
BEFORE = Path(__file__).parent / "reports_before"
PAIRED = ("h100_gpt2_bs8_amp", "h100_mobilenet_v2_ops")
PLAIN = "h100_resnet50_bs32_amp"                      # no counters: analytic rows only
CUPTI = "a100_cupti_range_profiler"                   # its own counters, no step markers
REPORTS = ("bwd_fwd_ratio", "flop_utilization", "flops_by_op", "flops_batch_consistency", "kernel_flops")


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    c = db.connect(tmp_path_factory.mktemp("fsweep") / "f.duckdb")
    for name in PAIRED + (PLAIN,):
        ingest_file(c, FLOPS / f"{name}.json.gz")
    for name in PAIRED:
        ingest_file(c, FLOPS / f"{name}_ncu_raw_baseunits.csv.gz", pair_with=name)
    ingest_file(c, DATA / "cupti" / f"{CUPTI}.json.gz")
    yield c
    c.close()


def _cases():
    for name in REPORTS:
        rep = reports.get(name)
        its = [None, "all", "first"] if rep.param("iteration") else [None]
        runs = [None, PAIRED[0], PLAIN] if rep.param("run") else [None]
        for run in runs:
            for it in its:
                if it == "first" and run is None:     # the CUPTI run (in all runs) has no iterations
                    continue
                params = {k: v for k, v in (("run", run), ("iteration", it)) if v is not None}
                yield name, params


def _before(con):
    """A connection of the same database whose FLOP views are those before the change."""
    cur = con.cursor()
    for stmt in statements((BEFORE / "flops_views.sql").read_text()):
        cur.execute(stmt.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW")
                        .replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO"))
    return cur


def _rows(con, name, params, sql=None, monkeypatch=None):
    if sql is not None:
        rep = dataclasses.replace(reports.get(name), sql=sql)
        get = reports.get
        monkeypatch.setattr(reports, "get", lambda n: rep if n == name else get(n))
    try:
        return reports.run(con, name, params).to_pylist()
    except reports.ReportError as e:
        return str(e)
    finally:
        if monkeypatch is not None:
            monkeypatch.undo()


# the rewrite's proof against the SQL it replaced (a frozen copy): `-m slow`, as the
# views are not meant to go back to it; test_paired_only_sweep and the FLOP tests
# against the raw traces hold the rows in the default run
@pytest.mark.slow
def test_reports_equal_before(con, monkeypatch):
    before = _before(con)
    try:
        compared = 0
        for name, params in _cases():
            if params.get("iteration") == "first":     # a number, not the steady one
                params["iteration"] = str(con.execute("SELECT min(iteration) FROM iterations WHERE run = ?",
                                                      [params["run"]]).fetchall()[0][0])
            old_sql = (BEFORE / f"{name}.sql").read_text() if (BEFORE / f"{name}.sql").exists() else None
            new = _rows(con, name, params)
            old = _rows(before, name, params, old_sql, monkeypatch if old_sql else None)
            assert new == old, (name, params)
            compared += isinstance(new, list) and len(new) > 0
    finally:
        before.close()
    assert compared >= 24       # rows on both sides, not errors alike


def test_paired_only_sweep(con):
    """flop_ops_of(true) holds exactly the matched runs' counted ops; a run without
    counters (and the CUPTI run's own counters, which match it to itself) as flop_ops says."""
    q = lambda sql: sorted(con.execute(sql).fetchall())     # noqa: E731
    matched = {r for (r,) in con.execute("SELECT DISTINCT trace_run FROM match_runs").fetchall()}
    assert set(PAIRED) | {CUPTI} == matched
    assert q("SELECT * FROM flop_ops_of(true)") == q(
        "SELECT * FROM flop_ops WHERE run IN (SELECT trace_run FROM match_runs)")
    assert q(f"SELECT count(*) FROM flop_ops_of(true) WHERE run = '{PLAIN}'") == [(0,)]
    assert q(f"SELECT count(*) > 0 FROM flop_ops WHERE run = '{PLAIN}'") == [(True,)]
    assert q(f"SELECT count(*) FROM kernel_flop_ops WHERE run = '{PLAIN}'") == [(0,)]
    # the hardware rows of op_flops come from the matched runs only, and exist there
    assert {r for (r,) in con.execute("SELECT DISTINCT run FROM op_flops WHERE source <> 'analytic'").fetchall()} \
        == matched
