"""tracedb as people use it: the terminal (formats by extension, tables that fit, help,
reports NAME), removing runs, settings from the CLI, TRACEDB_DB, pairing without
--pair-with, the trace_kernels view, the notebook API, and the Perfetto export."""
import csv
import gzip
import io
import json
import os
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq
import pytest

import tracedb
from tracedb.store import db
from tracedb.present import output
from tracedb.query import reports
from tracedb.ingest import ingest_file

from conftest import AMP_NCU, AMP_TRACE, DATA, raw_trace

AMP = "h100_resnet50_bs64_amp"
FP32 = "h100_resnet50_bs64_fp32"
BERT = "h100_bert_bs16_amp"
POWER = DATA / "power"
TORCH = DATA / "torch"


def cli(*args, env=None):
    e = {k: v for k, v in os.environ.items() if k != "TRACEDB_DB"}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *map(str, args)], capture_output=True, text=True, env=e)


def counts(path):
    """Rows per table of a database file (every table of the schema)."""
    con = db.connect(path, read_only=True)
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()]
    out = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables if t != "schema_info"}
    con.close()
    return out


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The amp trace, its ncu report and power log, paired in one command without --pair-with."""
    path = tmp_path_factory.mktemp("use") / "full.duckdb"
    r = cli("ingest", AMP_NCU, POWER / f"{AMP}.csv", TORCH / f"{AMP}.json.gz", "--db", path)
    assert r.returncode == 0, r.stderr
    return path, r.stdout


# ---- pairing without --pair-with --------------------------------------------------

def test_ingest_pairs_with_the_trace_of_the_command_and_says_so(full):
    path, out = full
    assert f"paired {AMP}_raw with trace {AMP} (the trace of this command)" in out
    assert f"paired {AMP}_power with trace {AMP} (the trace of this command)" in out
    con = db.connect(path, read_only=True)
    assert con.execute("SELECT ncu_run, matched FROM match_runs").fetchall() == [(f"{AMP}_raw", 852)]
    assert con.execute("SELECT power_run, trace_run FROM power_alignment").fetchall() == [(f"{AMP}_power", AMP)]
    assert dict(con.execute("SELECT run, paired_run FROM runs").fetchall()) == \
        {AMP: None, f"{AMP}_raw": AMP, f"{AMP}_power": AMP}
    con.close()


def test_pairing_by_time_overlap_and_refusal_when_ambiguous(tmp_path):
    path = tmp_path / "p.duckdb"
    assert cli("ingest", TORCH / f"{AMP}.json.gz", TORCH / f"{FP32}.json.gz", TORCH / f"{BERT}.json.gz",
               "--db", path).returncode == 0
    r = cli("ingest", POWER / f"{FP32}.csv", POWER / f"{BERT}.csv", AMP_NCU, "--db", path)
    assert r.returncode == 0, r.stderr
    assert f"paired {FP32}_power with trace {FP32} (overlapping absolute time)" in r.stdout
    assert f"paired {BERT}_power with trace {BERT} (overlapping absolute time)" in r.stdout
    assert f"not paired: 3 trace runs could own {AMP}_raw ({BERT}, {AMP}, {FP32}): give --pair-with RUN" in r.stdout
    # the trace of each power log, by independent reading of the files' clocks
    con = db.connect(path, read_only=True)
    got = dict(con.execute("SELECT power_run, trace_run FROM power_alignment").fetchall())
    con.close()
    for name in (FP32, BERT):
        doc = raw_trace(TORCH / f"{name}.json.gz")
        base = int(doc["baseTimeNanoseconds"])
        ts = [base + int(e["ts"] * 1000) for e in doc["traceEvents"] if e.get("ph") == "X"]
        with open(POWER / f"{name}.csv") as f:
            p = [int(r["timestamp_ns"]) for r in csv.DictReader(f)]
        assert min(p) <= max(ts) and min(ts) <= max(p)
        assert got[f"{name}_power"] == name
    # a second ncu report for a trace: the note names the one the reports use
    r = cli("ingest", DATA / "ncu" / "h100_resnet50_bs64_amp_raw_baseunits.csv.gz", "--pair-with", AMP, "--db", path)
    r2 = cli("match", AMP, f"{AMP}_raw", "--db", path)
    assert r.returncode == 0 and r2.returncode == 0
    r = cli("ingest", DATA / "ncu" / "h100_resnet50_bs64_amp_raw_baseunits.csv.gz", "--pair-with", AMP, "--db", path)
    assert "skipped" in r.stdout and f"note: trace {AMP} has 2 ncu runs paired" in r.stdout
    con = db.connect(path, read_only=True)
    used = con.execute("SELECT ncu_run FROM trace_ncu_pairs WHERE run = ?", [AMP]).fetchone()[0]
    con.close()
    assert f"the utilization reports use {used}, the last matched" in r.stdout


def test_pair_with_is_ignored_by_the_trace_itself(tmp_path):
    path = tmp_path / "t.duckdb"
    assert cli("ingest", TORCH / f"{AMP}.json.gz", "--db", path).returncode == 0
    r = cli("ingest", TORCH / f"{FP32}.json.gz", AMP_NCU, "--pair-with", AMP, "--db", path)
    assert r.returncode == 0, r.stderr
    assert f"with the 858 kernels of {AMP} iteration 2" in r.stdout


# ---- rm -------------------------------------------------------------------------

def test_rm_undoes_an_ingest_in_every_table(full, tmp_path):
    path, _ = full
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(path.read_bytes())
    only_ncu_power = tmp_path / "np.duckdb"
    con = db.connect(only_ncu_power)
    ingest_file(con, AMP_NCU)
    ingest_file(con, POWER / f"{AMP}.csv")
    con.close()
    r = cli("rm", AMP, "--db", copy)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"removed run {AMP} (") and "852 matches" in r.stdout
    # as if the trace had never been ingested; the ingest log keeps the other runs' history
    # (their pairing with the trace), and loses the trace's own lines
    got, want = counts(copy), counts(only_ncu_power)
    assert {k: v for k, v in got.items() if k != "ingest_log"} == {k: v for k, v in want.items() if k != "ingest_log"}
    con = db.connect(copy, read_only=True)
    assert con.execute("SELECT count(*) FROM ingest_log WHERE run = ?", [AMP]).fetchone()[0] == 0
    con.close()
    assert cli("rm", AMP, "--db", copy).stderr.strip().startswith(f"tracedb: error: rm: no run named '{AMP}' in the database")


def test_rm_pairing_keeps_the_run(full, tmp_path):
    path, _ = full
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(path.read_bytes())
    before = counts(copy)
    r = cli("rm", f"{AMP}_raw", f"{AMP}_power", "--pairing", "--db", copy)
    assert r.returncode == 0, r.stderr
    after = counts(copy)
    assert after["matches"] == after["match_runs"] == after["power_alignment"] == 0
    assert {t: n for t, n in after.items() if t not in ("matches", "match_runs", "power_alignment")} == \
        {t: n for t, n in before.items() if t not in ("matches", "match_runs", "power_alignment")}
    con = db.connect(copy, read_only=True)
    assert con.execute("SELECT count(*) FROM runs WHERE paired_run IS NOT NULL").fetchone()[0] == 0
    con.close()


# ---- settings and TRACEDB_DB -----------------------------------------------------

def test_settings_from_the_cli_change_reports_and_survive_reopening(full, tmp_path):
    path, _ = full
    copy = tmp_path / "s.duckdb"
    copy.write_bytes(path.read_bytes())
    env = {"TRACEDB_DB": str(copy)}
    r = cli("settings", "--format", "csv", env=env)
    tables = {row["table"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
    assert set(tables) >= {"layer_rules", "metric_sources", "ncu_metric_labels"}
    assert tables["layer_rules"]["user_rows"] == "0"
    r = cli("settings", "layer_rules", "set", "priority=1", "field=op", "pattern=^aten::cudnn_batch_norm$",
            "layer_type=batchnorm forward", env=env)
    assert r.returncode == 0, r.stderr
    db.connect(copy).close()                               # a writable reopen re-applies the seeds
    r = cli("query", "utilization_by_layer", "--format", "csv", env=env)
    layers = {row["layer_type"]: int(row["activities"]) for row in csv.DictReader(io.StringIO(r.stdout))}
    con = db.connect(copy, read_only=True)
    n = con.execute("SELECT count(*) FROM kernels WHERE run = ? AND op_name = 'aten::cudnn_batch_norm' "
                    "AND iteration = 2", [AMP]).fetchone()[0]
    assert con.execute("SELECT source FROM layer_rules WHERE pattern = '^aten::cudnn_batch_norm$'").fetchone() == ("user",)
    con.close()
    assert n > 0 and layers["batchnorm forward"] == n
    r = cli("settings", "layer_rules", "add", "priority=1", "field=op", "pattern=^aten::cudnn_batch_norm$",
            "layer_type=x", env=env)
    assert r.returncode == 1 and "exists (use `set` to replace it)" in r.stderr
    r = cli("settings", "layer_rules", "set", "priority=one", "field=op", "pattern=x", "layer_type=x", env=env)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Could not convert string 'one'" in r.stderr
    # a pattern RE2 cannot compile is refused (it was stored, and every report reading the rules failed)
    r = cli("settings", "layer_rules", "add", "priority=5", "field=op", "pattern=(", "layer_type=x", env=env)
    assert r.returncode == 1 and r.stderr.strip() == ("tracedb: error: settings: layer_rules.pattern '(' is not "
                                                      "an RE2 regular expression (missing ): ()")
    assert cli("query", "top_kernels", "--format", "csv", env=env).returncode == 0
    assert cli("settings", "layer_rules", "remove", "pattern=^aten::cudnn_batch_norm$", env=env).stdout == \
        "removed 1 row from layer_rules\n"
    r = cli("settings", "no_such", env=env)
    assert r.returncode == 1 and "no settings table 'no_such'" in r.stderr
    r = cli("query", "overview")
    assert r.returncode == 1 and "tracedb: error: give --db FILE or set TRACEDB_DB" in r.stderr
    for command in (("settings",), ("sql", "SELECT 1")):         # sql without a database was a traceback
        r = cli(*command)
        assert r.returncode == 1 and r.stderr.strip() == "tracedb: error: give --db FILE (or set TRACEDB_DB)"


# ---- the terminal ------------------------------------------------------------------

def test_output_format_follows_the_extension(full, tmp_path):
    path, _ = full
    want = reports.run(db.connect(path, read_only=True), "top_kernels", {}).to_pylist()
    for ext in ("csv", "json", "jsonl", "parquet"):
        out = tmp_path / f"top.{ext}"
        r = cli("query", "top_kernels", "--db", path, "-o", out)
        assert r.returncode == 0, r.stderr
        if ext == "csv":
            got = list(csv.DictReader(out.open()))
            assert [g["name"] for g in got] == [w["name"] for w in want]
        elif ext == "json":            # one JSON array
            assert json.loads(out.read_text()) == json.loads(json.dumps(want, default=str))
        elif ext == "jsonl":
            got = [json.loads(l) for l in out.read_text().splitlines()]
            assert got == json.loads(json.dumps(want, default=str))
        else:
            assert pq.read_table(out).to_pylist() == want
    r = cli("query", "top_kernels", "--db", path, "-o", tmp_path / "top.xlsx")
    assert r.returncode == 1 and "unknown extension '.xlsx'" in r.stderr
    r = cli("query", "top_kernels", "--db", path, "-o", tmp_path / "missing" / "top.csv")
    assert r.returncode == 1 and r.stderr.strip() == \
        f"tracedb: error: {tmp_path / 'missing' / 'top.csv'}: folder {tmp_path / 'missing'} does not exist"


def test_tables_fit_the_terminal(full):
    path, _ = full
    con = db.connect(path, read_only=True)
    levels = reports.run(con, "utilization_levels", {})
    top = reports.run(con, "top_kernels", {"limit": "3"})
    con.close()
    text = output.render(levels, width=80)
    assert all(len(l) <= 80 for l in text.splitlines())
    note = levels.column("note")[0].as_py()
    assert " ".join(" ".join(text.split()).split()) .count(" ".join(note.split())) == 1     # never cut
    cycles = int(levels.column('smsp_cycles_elapsed')[0].as_py())
    assert f" {cycles:,}\n" in text                     # a count: an integer, thousands separated
    total_ns = levels.column('total_ns')[0].as_py()      # one row: the value with its unit
    assert f" {total_ns / 1e6:.2f} ms\n" in text and 10e6 <= total_ns < 100e6
    for width in (80, 250):
        text = output.render(top, width=width)
        assert all(len(l) <= width for l in text.splitlines())
        flat = "".join(text.split())
        for name in top.column("name").to_pylist():       # every row's name is there, shortened
            assert "".join(output.short_name(name).split()) in flat and "<…>" in output.short_name(name)
    assert "(3 rows)" in text
    full_text = output.render(top, width=2000, full_names=True)
    assert all(name in full_text for name in top.column("name").to_pylist())
    assert output.short_name("void at::native::f<4, at::native::g<float> >(int, float*)") == "f<…>"


def test_help_version_and_report_headers(capsys):
    from tracedb.cli import main, parser
    p = parser()
    sub = next(a for a in p._actions if a.dest == "command")
    for name, sp in sub.choices.items():
        for a in sp._actions:
            if a.dest != "help":
                assert a.help, f"tracedb {name}: {a.option_strings or a.dest} has no help"
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip().startswith(f"tracedb {tracedb.__version__}")
    r = cli("calibrate", "--help")
    assert r.returncode == 0 and "usage: python -m tracedb.cuda_bench" in r.stdout and "--budget-s" in r.stdout
    capsys.readouterr()
    for name, rep in reports.all_reports().items():     # in this process: 46 interpreters took 20-30 s
        assert main(["reports", name]) == 0
        flat = " ".join(capsys.readouterr().out.split())
        for p_ in rep.params:
            assert f"{p_.name} {p_.type}{' ' + p_.floor if p_.floor else ''} (default" in flat
            for c in p_.choices:
                assert c in flat
        for col, type_, doc in rep.columns:
            assert f"{col} {type_}: {' '.join(doc.split())}" in flat
    r = cli("reports", "utilization_levels")
    method = r.stdout.strip().splitlines()[-1].removeprefix("method: ").split(" (")[0]
    assert os.path.isfile(method) and method.endswith("method.md")


def test_trace_kernels_leaves_out_the_ncu_replays(full):
    path, _ = full
    doc = raw_trace(AMP_TRACE)
    want = Counter(e["name"] for e in doc["traceEvents"]
                   if e.get("ph") == "X" and str(e.get("cat")).lower() in ("kernel", "gpu_memcpy", "gpu_memset"))
    con = db.connect(path, read_only=True)
    got = Counter(dict(con.execute("SELECT name, count(*) FROM trace_kernels GROUP BY name").fetchall()))
    in_kernels = con.execute("SELECT count(*) FROM kernels").fetchone()[0]
    con.close()
    assert got == want and in_kernels == sum(want.values()) + 852


# ---- notebooks ------------------------------------------------------------------

def test_notebook_api_reads_without_locking_the_cli_out(full, tmp_path):
    path, _ = full
    copy = tmp_path / "nb.duckdb"
    copy.write_bytes(path.read_bytes())
    t = tracedb.connect(copy)
    r = t.query("utilization_levels", batch_size=64)
    assert len(r) == 1 and r.report == "utilization_levels"
    # the CLI writes to the file while the notebook's object lives
    w = cli("ingest", TORCH / f"{FP32}.json.gz", "--db", copy)
    assert w.returncode == 0, w.stderr
    assert sorted(t.sql("SELECT run FROM runs WHERE kind = 'trace'").to_polars()["run"]) == [AMP, FP32]
    html = r._repr_html_()
    assert "<table>" in html and f"<td>{AMP}</td>" in html and "issue_slot_pct" in html
    assert AMP in repr(r) and "issue_slot_pct" in repr(r)
    fig = t.query("utilization_by_layer", run=AMP).chart()
    spec = fig.to_dict()
    assert {v["layer_type"] for v in spec["data"]["values"]} == \
        set(t.query("utilization_by_layer", run=AMP).to_polars()["layer_type"])
    assert "application/vnd.vegalite.v6+json" in fig._repr_mimebundle_()
    with pytest.raises(reports.ReportError, match="no chart for report overview"):
        t.query("overview").chart()
    try:
        import pandas  # noqa: F401
        assert r.to_pandas().shape == (1, r.arrow.num_columns)
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install 'tracedb\[pandas\]'"):
            r.to_pandas()
    # a block holds one read-only connection; the CLI can still read
    with tracedb.connect(copy) as held:
        assert len(held.query("gpu_utilization")) == 2
        q = cli("query", "overview", "--db", copy, "--format", "csv")
        assert q.returncode == 0, q.stderr
        with pytest.raises(PermissionError, match="opened read-only"):
            held.remove(FP32)
    assert t.remove(FP32)["runs"] == 1
    out = tmp_path / "nb.json"
    assert t.export(out, run=AMP, perfetto=True) > 9180
    with pytest.raises(FileNotFoundError, match="no such database"):
        tracedb.connect(tmp_path / "absent.duckdb").query("overview")


# ---- the timeline -----------------------------------------------------------------

def test_perfetto_export_in_windows_writes_the_same_file(full, tmp_path, monkeypatch):
    """The run's events are sorted and written a window of event ids at a time (one
    sort of a 10 GB trace's lines held 9.8 GB): windows of 997 events, cut inside
    kernels' args and flows, give the file one window gives, byte for byte."""
    from tracedb.present import perfetto
    path, _ = full
    con = db.connect(path, read_only=True)
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    n = perfetto.export(con, AMP, one)
    monkeypatch.setattr(perfetto, "WINDOW_EVENTS", 997)
    assert perfetto.export(con, AMP, many) == n
    con.close()
    assert n > 9 * 997 and one.read_bytes() == many.read_bytes()
    assert [e.get("name") for e in json.loads(one.read_text())["traceEvents"][:n - 1]
            if e.get("cat") != "tracedb"] == [e.get("name") for e in raw_trace(AMP_TRACE)["traceEvents"]]


def test_perfetto_export_is_chrome_trace_json_that_tracedb_reingests(full, tmp_path):
    path, _ = full
    out = tmp_path / "amp.perfetto.json.gz"
    r = cli("export", "--perfetto", "--run", AMP, "-o", out, "--db", path)
    assert r.returncode == 0, r.stderr
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    raw = raw_trace(AMP_TRACE)
    assert doc["baseTimeNanoseconds"] == raw["baseTimeNanoseconds"]
    assert doc["deviceProperties"] == json.loads(json.dumps(raw["deviceProperties"], default=float))
    for e in events:                # what the Chrome trace format asks of each phase
        assert isinstance(e["ph"], str) and isinstance(e["pid"], (int, str))
        if e["ph"] in ("X", "C", "i", "s", "f"):
            assert isinstance(e["ts"], (int, float))
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values())
        if e["ph"] == "M":
            assert e["args"] and e["name"]
    own = [e for e in events if e.get("cat") != "tracedb"]
    added = [e for e in events if e.get("cat") == "tracedb"]
    assert len(own) == len(raw["traceEvents"])
    assert Counter((e["ph"], e.get("name")) for e in own) == Counter((e["ph"], e.get("name")) for e in raw["traceEvents"])
    # what tracedb knows, in the kernels' args
    con = db.connect(path, read_only=True)
    layers = dict(con.execute("SELECT e.args->>'correlation', l.layer_type FROM kernel_layers l "
                              "JOIN events e ON e.run = l.run AND e.event_id = l.kernel_id WHERE l.run = ?", [AMP]).fetchall())
    levels = dict(con.execute("SELECT correlation::VARCHAR, issue_slot_pct FROM kernel_levels WHERE run = ?", [AMP]).fetchall())
    power = con.execute("SELECT count(*) FROM power p, (SELECT min(ts_ns) s, max(ts_ns + coalesce(dur_ns, 0)) e "
                        "FROM events WHERE run = ?) w WHERE p.ts_ns BETWEEN w.s AND w.e", [AMP]).fetchone()[0]
    con.close()
    gpu = [e for e in own if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(gpu) == len(layers) == 905
    for e in gpu:
        assert e["args"]["tracedb"]["layer_type"] == layers[str(e["args"]["correlation"])]
    matched = [e for e in gpu if e["args"]["tracedb"].get("ncu_id") is not None]
    assert len(matched) == 852
    assert all(e["args"]["tracedb"]["issue_slot_pct"] == pytest.approx(levels[str(e["args"]["correlation"])])
               for e in matched)
    assert [e["name"] for e in added if e["ph"] == "X" and e["tid"] != 4] == ["iteration 2 (steady)"]
    # the critical path track (tid 4): the critical_path report's segments of every iteration
    from tracedb.analysis import critpath
    segs = [r for r in critpath.path_table(db.connect(path, read_only=True), {"run": AMP, "iteration": "all"}).to_pylist()
            if r["dur_ns"] > 0]
    on_path = [e for e in added if e["ph"] == "X" and e["tid"] == 4]
    assert segs and {r["iteration"] for r in segs} == {2}
    assert [e["name"] for e in on_path] == [f"{r['category']}: {r['what']}" for r in segs]
    assert [e["dur"] for e in on_path] == pytest.approx([r["dur_ns"] / 1e3 for r in segs])
    assert power > 0 and Counter(e["name"].split(" (")[0] for e in added if e["ph"] == "C") == \
        {"GPU 0 power": power, "GPU 0 clocks": power, "GPU 0 temperature": power}
    # the findings of tracedb advise, as annotations at their iteration's start
    from tracedb.analysis import advise
    fired = [f for f in advise.evaluate_many(db.connect(path, read_only=True), AMP, "all")
             if f["severity"] not in ("ok", "skipped")]
    marks = [e for e in added if e["ph"] == "i"]
    assert fired and sorted(e["name"] for e in marks) == sorted(f"{f['rule']} ({f['severity']})" for f in fired)
    step = next(e for e in added if e["ph"] == "X" and e["tid"] != 4)
    assert all(e["ts"] == pytest.approx(step["ts"]) and e["args"]["evidence"] for e in marks)
    # tracedb reads its own export: the same kernels, iterations and per-op table
    again = tmp_path / "again.duckdb"
    con = db.connect(again)
    res = ingest_file(con, out, run="again")
    ingest_file(con, AMP_TRACE)
    q = lambda sql, run: con.execute(sql, [run]).fetchall()
    for sql in ("SELECT kind, name, ts_ns, dur_ns, stream, correlation, grid_x, op_name, iteration FROM kernels "
                "WHERE run = ? ORDER BY kernel_id",
                "SELECT iteration, start_ns, end_ns, dur_ns FROM iterations WHERE run = ?"):
        assert q(sql, "again") == q(sql, AMP)
    assert q("SELECT count(*) FROM events WHERE run = ?", "again")[0][0] == len(raw["traceEvents"]) + len(added)
    strip = lambda rows: sorted((r["iteration"] or -1, r["level"], r["name"], r["calls"], r["cpu_total_ns"],
                                 r["cpu_self_ns"], r["gpu_total_ns"]) for r in rows)
    mine = [r for r in reports.run(con, "ops", {"run": "again", "iteration": "all"}).to_pylist()]
    theirs = reports.run(con, "ops", {"run": AMP, "iteration": "all"}).to_pylist()
    assert strip(mine) == strip(theirs) and res.status == "loaded"
    con.close()
    r = cli("export", "--perfetto", "--run", f"{AMP}_raw", "-o", tmp_path / "x.json", "--db", path)
    assert r.returncode == 1 and "is of kind ncu" in r.stderr
    # a name that does not say JSON is refused before anything is written (it wrote JSON to x.txt)
    r = cli("export", "--perfetto", "--run", AMP, "-o", tmp_path / "x.txt", "--db", path)
    assert r.returncode == 1 and not (tmp_path / "x.txt").exists() and r.stderr.count("\n") == 1
    assert "x.txt: it writes Chrome-trace JSON: name the file FILE.json, or FILE.json.gz" in r.stderr
    # the suffix in capitals compresses too (the check let it through, the writer wrote plain JSON)
    r = cli("export", "--perfetto", "--run", AMP, "-o", tmp_path / "X.JSON.GZ", "--db", path)
    assert r.returncode == 0 and (tmp_path / "X.JSON.GZ").read_bytes()[:2] == b"\x1f\x8b", r.stderr


# ---- nothing silently empty ----------------------------------------------------------

def test_empty_results_and_misspelled_runs_are_explained(full, tmp_path):
    path, _ = full
    r = cli("query", "compare_runs", "--db", path, "--param", f"runs={AMP},{AMP}_typo")
    assert r.returncode == 1 and f"runs: no run named '{AMP}_typo'" in r.stderr and r.stderr.count("\n") == 1
    r = cli("query", "top_kernels", "--db", path, "--param", "iteration=9", "--format", "csv")
    assert r.returncode == 0 and r.stdout.count("\n") == 1          # the header only
    assert r.stderr.strip() == f"tracedb: note: report top_kernels returned no rows: no run has iteration 9 " \
                               f"(iterations: {AMP}: 2)"
    r = cli("query", "rank_summary", "--db", path, "--format", "csv")
    assert "no run has a rank: only traces with Kineto's distributedInfo" in r.stderr
    odd = tmp_path / "not_a_profile.json"
    odd.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')
    copy = tmp_path / "e.duckdb"
    copy.write_bytes(path.read_bytes())
    r = cli("ingest", odd, "--db", copy)
    assert r.returncode == 0
    assert f"note: {odd}: no GPU kernels, memcpy or memset in it" in r.stdout
    assert f"note: {odd}: no step markers (ProfilerStep#N, step_num)" in r.stdout


def test_calibrate_without_a_gpu_toolchain_is_one_line(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    r = subprocess.run([sys.executable, "-m", "tracedb.cli", "calibrate", str(tmp_path / "cal")],
                       capture_output=True, text=True, env=dict(os.environ, PATH=str(empty)), timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert r.stderr.startswith("tracedb: error: calibrate: ") and "not found: calibration runs on a machine with" in r.stderr


def test_json_output_is_json_and_o_names_a_file(tmp_path):
    """--format json writes null for NaN and infinities (bare NaN is not JSON: a
    JSON reader refuses it); -o naming a directory is one clear line."""
    path = tmp_path / "j.duckdb"
    db.connect(path).close()
    r = cli("sql", "SELECT 'nan'::DOUBLE AS x, 'inf'::DOUBLE AS y, 1.5::DOUBLE AS z", "--db", path, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == [{"x": None, "y": None, "z": 1.5}]
    # at any depth (DuckDB's to_json writes them bare), and types json.dumps could not write
    nested = ("SELECT ['nan'::DOUBLE, 2.5] AS l, {'k': '-inf'::FLOAT, 'v': [['inf'::DOUBLE]]} AS s, "
              "MAP {'a': 'nan'::DOUBLE} AS m, [{'q': 'nan'::DOUBLE}] AS ls, NULL::STRUCT(k DOUBLE) AS n, "
              "'infinity'::TIMESTAMP AS t, 18446744073709551615::UBIGINT AS u, 'a\"b' AS \"we\"\"ird\", "
              "{'ORBIT': 'nan'::DOUBLE} AS o")
    r = cli("sql", nested, "--db", path, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == [{
        "l": [None, 2.5], "s": {"k": None, "v": [[None]]}, "m": {"a": None}, "ls": [{"q": None}], "n": None,
        "t": "infinity", "u": 18446744073709551615, 'we"ird': 'a"b', "o": {"ORBIT": None}}]
    # a CSV cell holding a nested value is JSON too, with null for NaN (it was `[NaN,2.5]`:
    # json.loads reads that as Python's nan, a strict JSON reader refuses it)
    r = cli("sql", nested + ", row('nan'::DOUBLE, 2.5::DOUBLE) AS tup, ['inf'::DOUBLE, 1.0]::DOUBLE[2] AS arr",
            "--db", path, "--format", "csv")
    cells = next(csv.DictReader(io.StringIO(r.stdout)))
    assert r.returncode == 0 and {k: json.loads(cells[k]) for k in ("l", "s", "m", "ls", "o", "tup", "arr")} == {
        "l": [None, 2.5], "s": {"k": None, "v": [[None]]}, "m": {"a": None}, "ls": [{"q": None}], "o": {"ORBIT": None},
        "tup": [None, 2.5], "arr": [None, 1.0]}
    # a fixed-size ARRAY in JSON lines (its type's size child was taken for a type: a traceback)
    r = cli("sql", "SELECT ['nan'::DOUBLE, 1.0]::DOUBLE[2] AS a", "--db", path, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == [{"a": [None, 1.0]}], r.stderr
    # names that repeat or differ only in case keep every value (a dict per row lost them)
    r = cli("sql", "SELECT 1 AS a, 2 AS a, 3 AS A", "--db", path, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == [{"a": 1, "a_1": 2, "A_2": 3}]
    # types Arrow or its CSV and Parquet writers cannot hold, and 'infinity', in every format
    odd = ("SELECT INTERVAL 3 DAY AS i, union_value(num := 2)::UNION(num INT, str VARCHAR) AS u, "
           "'infinity'::TIMESTAMP AS t, 340282366920938463463374607431768211455::UHUGEINT AS uh, "
           "170141183460469231731687303715884105727::HUGEINT AS h, [1, 2] AS l, '\\xAA'::BLOB AS b, 1 AS a, 2 AS a, "
           "row(1, INTERVAL 1 DAY) AS tup, (INTERVAL 1 DAY)::VARIANT AS v")
    want = {"i": "3 days", "u": "2", "t": "infinity", "uh": "340282366920938463463374607431768211455",
            "h": "170141183460469231731687303715884105727", "l": "[1,2]", "b": "\\xAA", "a": "1", "a_1": "2",
            "tup": '[1,"1 day"]', "v": "1 day"}
    r = cli("sql", odd, "--db", path, "--format", "csv")
    assert r.returncode == 0 and list(csv.DictReader(io.StringIO(r.stdout))) == [want], r.stderr
    r = cli("sql", odd, "--db", path, "--format", "table")
    assert r.returncode == 0 and [l.split(None, 1) for l in r.stdout.splitlines()[:-1]] == [[k, v] for k, v in want.items()]
    r = cli("sql", odd, "--db", path, "-o", tmp_path / "odd.parquet")
    got = pq.read_table(tmp_path / "odd.parquet").drop_columns(["t"]).to_pylist()
    assert r.returncode == 0 and got == [{"i": "3 days", "u": "2", "uh": want["uh"], "h": int(want["h"]),
                                          "l": [1, 2], "b": b"\xaa", "a": 1, "a_1": 2, "tup": '[1,"1 day"]',
                                          "v": "1 day"}], r.stderr
    (tmp_path / "out").mkdir()
    r = cli("sql", "SELECT 1 AS one", "--db", path, "-o", tmp_path / "out", "--format", "csv")
    assert r.returncode == 1 and r.stderr.strip() == f"tracedb: error: {tmp_path / 'out'}: is a directory: " \
                                                      "give a file name for -o"
