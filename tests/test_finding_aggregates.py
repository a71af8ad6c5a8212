"""findings with iteration=all reads per-iteration sums an ingest with --op-totals
stored (schema/load/finding_aggregates.sql into finding_iteration_totals) instead of
sweeping the kernels and events once per rule. Findings are claims: their rows must
be those of the rules before (a frozen copy of the sweeping rules and of
finding_iterations in tests/reports_before/, run on the same connection), for
iteration=all, the steady default and a numbered iteration, on real traces where each
stored rule fires and where it does not: PyTorch ResNet-50 (amp, fp32) and BERT, the
DataLoader-bound run and its fix, CUDA graphs (the evidence's graph part), an eager and
a compiled GPT, JAX, an Nsight Systems export, and the ranks of a job with a straggler
(sync_in_step's evidence names it: read at report time, not stored). A run ingested
without --op-totals beside them, a database whose rows are gone, and a read-only file of
the schema before (no table at all) give the same rows by the sweep. (The what_if
predictions added to fired findings are left out: they read the step graph, not the
rules, and take most of the time; so are the rules that read neither finding_iterations
nor the stored sums.)"""
import shutil
from pathlib import Path

import pytest

from conftest import DATA
from tracedb.analysis import advise
from tracedb.ingest import ingest_file
from tracedb.query import reports
from tracedb.store import db

BEFORE = Path(__file__).parent / "reports_before"
STORED_RULES = ("host_bound", "tiny_kernels", "fusion_candidates", "data_loader_wait", "sync_in_step",
                "layout_conversions")
READERS = STORED_RULES + ("pageable_memcpy",)         # the rules that read finding_iterations
TRACES = {
    "amp": DATA / "torch" / "h100_resnet50_bs64_amp.json.gz",
    "fp32": DATA / "torch" / "h100_resnet50_bs64_fp32.json.gz",
    "bert": DATA / "torch" / "h100_bert_bs16_amp.json.gz",
    "slow": DATA / "torch_loader" / "loader_slow.json.gz",
    "fixed": DATA / "torch_loader" / "loader_fixed.json.gz",
    "graphs": DATA / "graph_h200" / "h200_graph_train.json.gz",
    "decode": DATA / "graph_h200" / "h200_graph_decode.json.gz",
    "compiled": DATA / "graph_h200" / "h200_gpt_compiled.json.gz",
    "jax": DATA / "jax" / "h200_jax_mlp.trace.json.gz",
    "nsys": DATA / "nsys" / "mfu_2gpu_before.sqlite.gz",
}
PLAIN = "eager"             # ingested without --op-totals: swept beside the stored runs


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    from tracedb.cli import main
    p = tmp_path_factory.mktemp("findagg") / "f.duckdb"
    con = db.connect(p)
    for run, f in TRACES.items():
        ingest_file(con, f, run=run, options={"op_totals": True} | (
            {"iterations_from": "FlashAttnFunc"} if run == "nsys" else {}))
    ingest_file(con, DATA / "graph_h200" / "h200_gpt_eager.json.gz", run=PLAIN)
    con.close()
    assert main(["ingest", str(DATA / "dist" / "ddp_straggler"), "--db", str(p), "--op-totals"]) == 0
    return p


@pytest.fixture(autouse=True)
def _no_predictions(monkeypatch):
    from tracedb.analysis import critpath
    monkeypatch.setattr(critpath, "predicted_savings", lambda con, found: found)


@pytest.fixture(scope="module")
def con(path):
    c = db.connect(path)
    yield c
    c.close()


def _rules(before):
    """The rules that read finding_iterations (the others read neither it nor the stored
    sums); before: as they were, the frozen rules reading the frozen finding_iterations
    (a temp macro _before)."""
    if not before:
        return {n: r for n, r in advise.all_rules().items() if n in READERS}
    return {f.stem: advise.parse(f.read_text().replace("finding_iterations(", "finding_iterations_before("), f.stem)
            for f in sorted((BEFORE / "rules").glob("*.sql"))}


def _install_before(con):
    text = (BEFORE / "findings_views.sql").read_text()
    macro = text[text.index("CREATE OR REPLACE MACRO finding_iterations("):text.index("-- The evidence's")]
    con.execute(macro.replace("CREATE OR REPLACE MACRO finding_iterations(",
                              "CREATE OR REPLACE TEMP MACRO finding_iterations_before("))


def _findings(con, params, before=False):
    """The findings report's rows; before: those of the rules before."""
    if before:
        _install_before(con)
    rules = _rules(before)
    real = advise.all_rules
    advise.all_rules = lambda: rules
    try:
        return reports.run(con, "findings", params | {"show": "all"}).to_pylist()
    finally:
        advise.all_rules = real


def _runs(con):
    return [r for (r,) in con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY run").fetchall()]


def _same(con, cases):
    fired = {}
    for params in cases:
        new = _findings(con, params)
        assert new == _findings(con, params, before=True), params
        for f in new:
            if f["rule"] in STORED_RULES:
                fired.setdefault(f["rule"], set()).add(f["severity"])
    return fired


def test_stored_for_every_run_ingested_with_the_flag(con):
    stored = {r for (r,) in con.execute("SELECT run FROM finding_stored_runs").fetchall()}
    assert stored == set(TRACES) | {"ddp_straggler.rank0", "ddp_straggler.rank1"}
    n = con.execute("SELECT count(*) FROM finding_iteration_totals").fetchone()[0]
    its = con.execute("SELECT count(*) FROM iterations WHERE run <> ?", [PLAIN]).fetchone()[0]
    assert n == its > 30          # one row per iteration of each stored run


def test_iteration_all_equals_the_rules_before(con):
    """Every run, iteration=all: stored runs read their rows, the plain one is swept.
    Each stored rule fires somewhere and passes somewhere (claims and no false alarms)."""
    fired = _same(con, [{"run": r, "iteration": "all"} for r in _runs(con)])
    for rule in STORED_RULES:
        assert fired[rule] & {"high", "medium", "low"} and fired[rule] & {"ok"}, (rule, fired[rule])


def test_steady_and_numbered_iterations_equal_the_rules_before(con):
    """The steady default and a numbered iteration sweep as before (one iteration each)."""
    cases = [{"run": run} for run in _runs(con)]
    for run in ("slow", "compiled", "ddp_straggler.rank1", PLAIN):
        second = con.execute("SELECT min(iteration) + 1 FROM iterations WHERE run = ?", [run]).fetchone()[0]
        cases.append({"run": run, "iteration": str(second)})
    _same(con, cases)


def test_the_stored_rows_are_what_is_read(path, tmp_path):
    """What makes it fast: with iteration=all a stored run's sums are read, not swept.
    Changed stored sums change its findings (and only with iteration=all); rows deleted,
    a run is swept again and the rows are the rules' before."""
    copy = tmp_path / "changed.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        all_amp = {"run": "amp", "iteration": "all"}
        before = _findings(c, all_amp)
        steady = _findings(c, {"run": "amp"})
        c.execute("UPDATE finding_iteration_totals SET host_starved_ns = host_starved_ns + 1000000, "
                  "fusion_runs = fusion_runs + 100, sync_lost_ns = sync_lost_ns + 1000000 WHERE run = 'amp'")
        changed = _findings(c, all_amp)
        differ = {a["rule"] for a, b in zip(before, changed) if a != b}
        assert {"host_bound", "fusion_candidates", "sync_in_step"} <= differ
        assert _findings(c, {"run": "amp"}) == steady
        c.execute("DELETE FROM finding_iteration_totals WHERE run IN ('amp', 'slow')")
        assert _same(c, [all_amp, {"run": "slow", "iteration": "all"}])
    finally:
        c.close()


def test_a_read_only_file_of_the_schema_before(path, tmp_path):
    """A file made before the table existed (schema 5), opened read-only: an empty stand-in,
    every run swept, the rows the rules gave."""
    old = tmp_path / "old.duckdb"
    shutil.copyfile(path, old)
    c = db.connect(old)
    c.execute("DROP VIEW finding_stored_runs")
    c.execute("DROP TABLE finding_iteration_totals")
    c.execute("UPDATE schema_info SET value = '5' WHERE key = 'version'")
    c.close()
    c = db.connect(old, read_only=True)
    try:
        assert not c.execute("SELECT count(*) FROM finding_stored_runs").fetchone()[0]
        _same(c, [{"run": r, "iteration": "all"} for r in ("amp", "slow", "decode")])
    finally:
        c.close()


def test_the_sweeps_where_their_short_form_does_not_apply(path, tmp_path):
    """host_bound's sweep takes the union of each activity's pending and busy time where
    every activity is launched before it starts, and counts both at every boundary where
    one is not (a GPU clock ahead of the host's); tiny_kernels' takes a union where every
    activity has its end, and the busy islands elsewhere: an iteration of each kind, the
    rules' rows before, stored and swept."""
    from tracedb.store.sql import run_script
    from tracedb.store.catalog import sql_text
    copy = tmp_path / "skew.duckdb"
    shutil.copyfile(path, copy)
    c = db.connect(copy)
    try:
        # one kernel of the second iteration starts before the iteration (and its launch)
        it, start = c.execute("SELECT iteration, start_ns FROM iterations WHERE run = 'slow' "
                              "ORDER BY iteration LIMIT 1 OFFSET 1").fetchone()
        c.execute("UPDATE kernels SET ts_ns = ? - 5000 WHERE run = 'slow' AND kernel_id = (SELECT min(kernel_id) "
                  "FROM kernels WHERE run = 'slow' AND iteration = ? AND kind = 'kernel')", [start, it])
        # and in the third one an activity has no duration (tiny_kernels' islands, as the view forms them)
        c.execute("UPDATE kernels SET dur_ns = NULL WHERE run = 'slow' AND kernel_id = (SELECT max(kernel_id) "
                  "FROM kernels WHERE run = 'slow' AND iteration = ? AND kind = 'kernel')", [it + 1])
        kinds = c.execute("SELECT count(*) FILTER (NOT n), count(*) FILTER (n) FROM (SELECT bool_and("
                          "greatest(least(k.launch_end_ns, k.ts_ns), i.start_ns) <= k.ts_ns) AS n FROM kernels k "
                          "JOIN iterations i USING (run, iteration) WHERE run = 'slow' AND k.launch_end_ns IS NOT NULL "
                          "GROUP BY iteration)").fetchone()
        assert kinds[0] == 1 and kinds[1] > 0
        c.begin()
        run_script(c, sql_text("schema", "load/finding_aggregates.sql"), {"run": "slow"})
        c.commit()
        cases = [{"run": "slow", "iteration": "all"}, {"run": "slow", "iteration": str(it)},
                 {"run": "slow", "iteration": str(it + 1)}]
        _same(c, cases)
        c.execute("DELETE FROM finding_iteration_totals WHERE run = 'slow'")
        _same(c, cases[:1])
    finally:
        c.close()


def test_stored_only_when_asked(tmp_path):
    """The sums cost ingest time (docs/benchmarks.md): a plain ingest stores none."""
    p = tmp_path / "plain.duckdb"
    c = db.connect(p)
    try:
        ingest_file(c, TRACES["amp"], run="amp")
        assert c.execute("SELECT count(*) FROM finding_iteration_totals").fetchone()[0] == 0
    finally:
        c.close()
