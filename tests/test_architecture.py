"""The seams of the architecture: one reader registry, settings as seed data,
docs generated from the headers and DDL, the lake derived from the reports' SQL."""
import duckdb
import gzip
import json
import os
import re

import pytest

from conftest import AMP_NCU, AMP_TRACE, DATA, raw_trace
from tracedb.present import docgen
from tracedb.query import lake, reports, transpile
from tracedb.store import catalog, db, sql
from tracedb.store import template as db_template
from tracedb.ingest import IngestError, ingest_file
from tracedb.ingest.registry import KINDS, detect, readers

AMP = "h100_resnet50_bs64_amp"
POWER = DATA / "power" / "h100_resnet50_bs64_amp.csv"


@pytest.mark.parametrize("path, kind, fmt", [
    (AMP_TRACE, "trace", "chrome-json"),
    (DATA / "jax" / "h200_jax_mlp.xplane.pb", "trace", "xplane"),
    (AMP_NCU, "ncu", "ncu-csv"),
    (DATA / "ncu" / "h200_small_cnn_details.csv.gz", "ncu", "ncu-csv"),
    (POWER, "power", "power-log"),
    (DATA / "tf" / "cpu_sync_lenet_bs64.json.gz", "trace", "chrome-json"),
    (DATA / "nsys" / "mock.sqlite.gz", "trace", "nsys-sqlite"),
])
def test_one_registry_detects_every_real_format(path, kind, fmt):
    reader, found = detect(path)
    assert (reader.kind, found) == (kind, fmt)
    assert {r.kind for r in readers()} == set(KINDS)


def test_ncu_rep_is_an_ncu_run(tmp_path):
    """A .ncu-rep is read by the ncu reader (kind ncu, so it can be matched); its
    format goes to the metadata. (Reading one needs Nsight Compute: tests/test_ncu_rep_device.py.)"""
    p = tmp_path / "r.ncu-rep"
    p.write_bytes(b"\x00not really a report")
    reader, fmt = detect(p)
    assert (reader.kind, fmt, reader.pairs) == ("ncu", "ncu-rep", True)


def test_runs_keep_their_format_and_ingest_pairs_in_one_command(tmp_path):
    """The trace, its ncu report and its power log in one command with --pair-with the
    trace: the trace ignores --pair-with, the others pair with it; each run's format
    is in its metadata."""
    con = db.connect(tmp_path / "a.duckdb")
    results = [ingest_file(con, p, pair_with=AMP) for p in (AMP_TRACE, AMP_NCU, POWER)]
    assert [r.kind for r in results] == ["trace", "ncu", "power"]
    assert results[1].match["matched"] == 852
    assert results[2].pairing.startswith(f"aligned with {AMP}")
    fmts = dict(con.execute("SELECT kind, metadata->>'source_format' FROM runs").fetchall())
    assert fmts == {"trace": "chrome-json", "ncu": "ncu-csv", "power": "sampler"}
    con.close()


def test_failed_pairing_leaves_no_run(tmp_path):
    """Ingest and pairing are one transaction: a power log paired with a trace that has
    no timed events is refused, and the power run is not left behind."""
    con = db.connect(tmp_path / "b.duckdb")
    t = tmp_path / "untimed.json"
    t.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1,
                                              "args": {"name": "p"}}]}))
    ingest_file(con, t, run="untimed")
    with pytest.raises(IngestError, match="no timed events"):
        ingest_file(con, POWER, pair_with="untimed")
    assert con.execute("SELECT count(*) FROM runs WHERE kind = 'power'").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM power").fetchone()[0] == 0
    con.close()


def test_settings_edits_survive_reopening(tmp_path):
    """Shipped rows carry source 'tracedb'; a user's rows and edits survive a writable
    reopen; a new tracedb's seed rows replace only shipped rows, never a user's."""
    path = tmp_path / "s.duckdb"
    con = db.connect(path)
    shipped = con.execute("SELECT count(*) FROM layer_rules WHERE source = 'tracedb'").fetchone()[0]
    seed_rows = [l for l in db.sql_text("schema", "seeds/layer_rules.sql").splitlines() if l.startswith("    (")]
    assert shipped == len(seed_rows) == 19          # 16 + issue 50: NCCL/XLA collectives, XLA convert and loop/input fusions
    con.execute("UPDATE layer_rules SET layer_type = 'my pooling' WHERE pattern = '(?i)pool' AND field = 'op'")
    con.execute("INSERT INTO layer_rules (priority, field, pattern, layer_type) VALUES (5, 'op', '^my::op$', 'mine')")
    con.execute("INSERT OR REPLACE INTO metric_sources (quantity, priority, metric, scale, note, source) "
                "VALUES ('tc_inst', 1, 'smsp__inst_executed_pipe_tensor.sum', 1, 'my note', 'user')")
    con.close()
    con = db.connect(path)
    rule = lambda p: con.execute("SELECT layer_type, source FROM layer_rules WHERE field = 'op' AND pattern = ?",
                                 [p]).fetchall()
    assert rule("(?i)pool") == [("my pooling", "tracedb")] and rule("^my::op$") == [("mine", "user")]
    # A new version of tracedb ships other seed rows: shipped rows are rewritten,
    # the user's own rows (and their override of a shipped key) stay.
    con.execute("UPDATE schema_info SET value = 'older' WHERE key LIKE 'seed:%'")
    con.close()
    con = db.connect(path)
    assert rule("(?i)pool") == [("pooling", "tracedb")] and rule("^my::op$") == [("mine", "user")]
    assert con.execute("SELECT note, source FROM metric_sources WHERE quantity = 'tc_inst' AND priority = 1"
                       ).fetchall() == [("my note", "user")]
    assert con.execute("SELECT count(*) FROM layer_rules WHERE source = 'tracedb'").fetchone()[0] == shipped
    con.close()


def test_database_of_an_older_tracedb_is_migrated(tmp_path):
    """Settings tables without source (and the old citation column of the published
    energies), and a .ncu-rep run of the old kind 'ncu-rep', are brought up to date."""
    import duckdb
    path = tmp_path / "old.duckdb"
    con = db.connect(path)
    ingest_file(con, AMP_NCU, run="rep")
    for t in ("layer_rules", "metric_sources", "ncu_metric_labels"):
        con.execute(f"ALTER TABLE {t} DROP COLUMN source")
    con.execute("DROP TABLE calibration_reference")
    con.execute("CREATE TABLE calibration_reference (gpu VARCHAR NOT NULL, level VARCHAR NOT NULL, "
                "eps_pj DOUBLE NOT NULL, source VARCHAR, PRIMARY KEY (gpu, level))")
    con.execute("INSERT INTO calibration_reference VALUES ('NVIDIA A100 (published)', 'dram', 2090, "
                "'METHOD.md section 7, A100 at base clock'), ('My GPU', 'dram', 1, 'my lab')")
    con.execute("INSERT INTO layer_rules VALUES (5, 'op', '^old::op$', 'old')")
    con.execute("UPDATE runs SET kind = 'ncu-rep' WHERE run = 'rep'")
    con.execute("DELETE FROM schema_info WHERE key LIKE 'seed:%'")
    con.close()
    con = db.connect(path)
    assert con.execute("SELECT kind, metadata->>'source_format' FROM runs WHERE run = 'rep'").fetchall() == \
        [("ncu", "ncu-rep")]
    refs = dict(con.execute("SELECT gpu, source FROM calibration_reference WHERE level = 'dram'").fetchall())
    assert refs == {"NVIDIA A100 (published)": "tracedb", "My GPU": "user"}
    assert con.execute("SELECT source FROM layer_rules WHERE pattern = '^old::op$'").fetchall() == [("user",)]
    assert con.execute("SELECT count(*) FROM layer_rules WHERE source = 'tracedb'").fetchone()[0] > 10
    con.close()
    assert duckdb.connect(str(path), read_only=True).execute("SELECT count(*) FROM runs").fetchone()[0] == 1


def test_docs_are_generated_from_headers_and_ddl():
    assert docgen.main(["--check"]) == 0
    text = (docgen.DOCS / "reports.md").read_text()
    for r in reports.all_reports().values():
        assert f"### {r.name}\n" in text
        assert all(f"| {c} | {t} |" in text for c, t, _ in r.columns), r.name
    schema = (docgen.DOCS / "schema.md").read_text()
    assert "| content_hash | VARCHAR |" in schema and "view `kernel_busy_intervals`" in schema


def test_column_comments_are_in_the_database(tmp_path):
    con = db.connect(tmp_path / "c.duckdb")
    docs = dict(con.execute("SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'kernels'"
                            ).fetchall())
    assert docs["dur_ns"] == "duration, ns (ncu: gpu__time_duration.sum)"
    assert docs["seq"].startswith("launch order")
    con.close()


def _build(path):
    db.connect(path, _template=False).close()


def test_view_doc_comments_are_perfetto_style():
    doc, cols, sources = catalog._doc_comment([
        "CREATE TABLE x (a INTEGER);", "-- What the view is,", "-- and why.", "--",
        "-- @column start_ns  start of the thing,", "--                   ns",
        "-- @column steady    true for one row", "-- @columns_from kernels"])
    assert doc == "What the view is, and why."
    assert [(c.name, c.doc) for c in cols] == [("start_ns", "start of the thing, ns"), ("steady", "true for one row")]
    assert sources == ["kernels"]


def _view_blocks(text):
    """View name -> its part of the generated views list of docs/schema.md."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^- view `(\w+)`(.*?)(?=^- |\Z)", text, re.M | re.S)}


def test_every_view_column_is_documented_in_its_sql():
    """Each column of each view has a meaning in the view's SQL (its `@column` lines, or
    the relation its `@columns_from` names), no `@column` line names a column the view
    lacks, and the meanings are the ones docs/schema.md shows."""
    cols, docs = docgen.view_columns(), docgen.column_docs()
    views = {r.name: r for r in docgen.relations() if r.kind == "view"}
    assert set(cols) == set(views)
    blank = [f"{v}.{c}" for v, cs in cols.items() for c, _ in cs if not docs[v].get(c, "").strip()]
    assert not blank, f"document with `-- @column NAME meaning` above the CREATE VIEW: {blank}"
    stale = [f"{v}.{c.name}" for v, r in views.items() for c in r.columns if c.name not in dict(cols[v])]
    assert not stale, f"@column lines for columns the view does not have: {stale}"
    idle = [f"{v} <- {src}" for v, r in views.items() for src in r.columns_from
            if not (set(dict(cols[v])) - {c.name for c in r.columns}) & set(docs[src])]
    assert not idle, f"@columns_from that documents none of the view's columns: {idle}"
    shown = _view_blocks((docgen.DOCS / "schema.md").read_text())
    for v, cs in cols.items():
        for c, t in cs:
            assert f"| {c} | {t} | {docgen._cell(docs[v][c])} |" in shown[v], (v, c)


def test_view_docs_are_in_the_database(tmp_path):
    """Each view carries its doc and its columns' meanings as its comment, also after
    a reopen (which replaces the views, and with them their comments)."""
    for _ in range(2):
        con = db.connect(tmp_path / "v.duckdb")
        comments = dict(con.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal").fetchall())
        con.close()
        assert all(comments.values()), [v for v, c in comments.items() if not c]
        assert comments["iteration_gpu_time"].startswith("GPU time of each iteration")
        assert "\nidle_ns: total_ns - kernel_busy_ns, ns\n" in comments["iteration_gpu_time"]
        assert comments["kernel_levels"].endswith("\nother columns: as in matched_kernels")


def test_lake_datasets_follow_the_reports_sql(tmp_path):
    """Every relation a Spark report reads is in the lake (a view materialized per run,
    or a global dataset); no table with a run column is left out."""
    con = db.connect(tmp_path / "l.duckdb")
    ds = lake.datasets_of(con)
    spark = [r for r in reports.all_reports().values() if "spark" in r.engines]
    # a report prepared by an analysis with a form of its own on Spark reads what the form says
    read = set().union(*(set(reports.SPARK_FORMS[r.prepared_by].reads) if r.prepared_by in reports.SPARK_FORMS
                         else transpile.relations_read(r) for r in spark))
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()}
    assert read <= set(ds.tables) | set(ds.views) | set(ds.global_) | set(ds.jobs) | tables
    # the views that join a job's runs are defined by the engine from what the lake holds
    assert {"job_runs", "job_iterations", "collective_calls"} <= set(ds.jobs)
    by_jobs = set().union(*(transpile.relations_of(sql) for _, sql in lake.job_views()))
    assert by_jobs - set(ds.jobs) <= set(ds.tables) | set(ds.views) | set(ds.global_)
    assert not set(ds.jobs) & (set(ds.views) | set(ds.global_))
    assert {"kernels", "events", "counters", "matches"} <= set(ds.tables)
    assert "iteration_utilization" in ds.views and "layer_rules" in ds.global_
    assert ds.run_column["matches"] == "trace_run"
    con.close()


def test_one_sql_literal_helper():
    assert sql.sql_literal("it's") == "'it''s'" and sql.sql_literal(None) == "NULL"
    assert sql.sql_literal(True) == "TRUE" and sql.sql_literal(3) == "3"
    assert sql.sql_literal(float("nan")) == "NULL" and sql.sql_literal(["a", 1]) == "['a', 1]"
    assert sql.sql_ident('we"ird') == '"we""ird"'


def test_load_sql_headers_say_what_they_read_and_create():
    """Each per-reader load file and matching step names the temp relations it
    creates; the names in its header are those of its CREATE statements."""
    import re
    for name in db.sql_files("schema", "load") + db.sql_files("schema", "match"):
        text = db.sql_text("schema", name)
        head = {k: v for k, v in re.findall(r"^-- (reads|creates): (.*)$", text, re.M)}
        assert set(head) == {"reads", "creates"}, name
        made = set(re.findall(r"CREATE OR REPLACE TEMP (?:TABLE|VIEW) (\w+)", text))
        named = set(re.findall(r"\b_\w+", head["creates"].split("(")[0])) if made else set()
        assert named == made, (name, named, made)


def test_an_ingest_leaves_no_temp_relation_or_variable(tmp_path):
    con = db.connect(tmp_path / "t.duckdb")
    for p in (AMP_TRACE, AMP_NCU, POWER):
        ingest_file(con, p, pair_with=AMP)
    left = con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary UNION ALL "
                       "SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal").fetchall()
    assert left == []
    assert con.execute("SELECT count(*) FROM duckdb_variables()").fetchone()[0] == 0
    con.close()


def test_read_only_open_of_older_views_reads_this_versions(tmp_path):
    """A database whose views an older tracedb wrote, opened read-only (tracedb
    query): this version's views shadow them as temporary ones, so the reports read
    the columns they were written for, and the file keeps its own."""
    import duckdb
    path = tmp_path / "old_views.duckdb"
    con = db.connect(path)
    ingest_file(con, AMP_TRACE)
    con.execute("CREATE OR REPLACE VIEW flop_pass_spans AS SELECT run, pid, tid, ts_ns AS start_ns, "
                "ts_ns + dur_ns AS end_ns, 'backward' AS pass FROM events WHERE false")   # no event_id
    con.execute("DROP MACRO flop_event_in_window")
    con.execute("UPDATE schema_info SET value = 'older' WHERE key = 'views'")
    con.close()
    cols = lambda c: [r[0] for r in c.execute("DESCRIBE flop_pass_spans").fetchall()]  # noqa: E731
    ro = db.connect(path, read_only=True)
    assert "event_id" in cols(ro)
    assert reports.run(ro, "flops_by_op", {}).num_rows > 10          # the views it needs are there
    ro.close()
    raw = duckdb.connect(str(path), read_only=True)
    assert "event_id" not in cols(raw)                                # the file is as it was
    raw.close()
    current = db.connect(path)                                        # a write open brings it up to date
    current.close()
    raw = duckdb.connect(str(path), read_only=True)
    assert "event_id" in cols(raw)
    raw.close()


def test_a_write_open_replaces_the_views_only_when_they_are_another_versions(tmp_path):
    """Binding every view was most of an open's time (0.3 s): a database whose views
    are this version's keeps them as they are (here one changed by hand stays);
    another schema version's are all replaced."""
    path = tmp_path / "views.duckdb"

    def views_on_reopen():      # as DuckDB renders them from the file
        con = db.connect(path)
        con.close()
        con = duckdb.connect(str(path), read_only=True)
        found = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
        con.close()
        return found

    con = db.connect(path)
    ingest_file(con, AMP_TRACE)
    con.close()
    first = views_on_reopen()
    con = duckdb.connect(str(path))
    con.execute("CREATE OR REPLACE VIEW flop_pass_spans AS SELECT 1 AS changed")
    con.close()
    kept = views_on_reopen()
    assert kept.keys() == first.keys() and len(first) > 40
    assert "changed" in kept["flop_pass_spans"]
    con = duckdb.connect(str(path))
    con.execute("UPDATE schema_info SET value = '3' WHERE key = 'version'")     # what older writers stamp
    con.close()
    assert views_on_reopen()["flop_pass_spans"] == first["flop_pass_spans"]
    con = duckdb.connect(str(path))
    con.execute("DROP VIEW trace_kernels")
    con.execute("DROP MACRO energy_at")
    con.close()
    assert views_on_reopen().keys() == first.keys()        # a dropped view (or macro) is put back
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = 'energy_at'").fetchone()[0] == 1
    con.close()
    con = db.connect(path)
    assert reports.run(con, "flops_by_op", {}).num_rows > 10
    assert con.execute("SELECT value FROM schema_info WHERE key = 'version'").fetchone()[0] == db.SCHEMA_VERSION
    con.close()


def test_the_schema_is_applied_in_one_transaction(tmp_path, monkeypatch):
    """One commit for the whole schema (not one WAL flush per statement), so a failure
    part way leaves a new file without half a schema."""
    def fail(con):
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'events'").fetchone()[0] == 1
        raise RuntimeError("seeds failed")
    monkeypatch.setattr(db, "apply_seeds", fail)
    monkeypatch.setenv("TRACEDB_CACHE_DIR", "")       # built here, not copied from a template
    path = tmp_path / "half.duckdb"
    with pytest.raises(RuntimeError, match="seeds failed"):
        db.connect(path)
    con = duckdb.connect(str(path))
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT internal").fetchone()[0] == 0
    con.close()


def test_read_only_open_shadows_views_an_older_writer_left_under_this_versions_digest(tmp_path):
    """A tracedb older than the schema version 4 writes its own views, stamps 3 and
    leaves the views digest as it was: a read-only open must not take them for this
    version's (nor a file with a view dropped)."""
    path = tmp_path / "older_writer.duckdb"
    con = db.connect(path)
    ingest_file(con, AMP_TRACE)
    con.close()
    raw = duckdb.connect(str(path))
    raw.execute("CREATE OR REPLACE VIEW flop_pass_spans AS SELECT 1 AS stale")
    raw.execute("UPDATE schema_info SET value = '3' WHERE key = 'version'")
    raw.close()
    ro = db.connect(path, read_only=True)
    assert "event_id" in [r[0] for r in ro.execute("DESCRIBE flop_pass_spans").fetchall()]
    ro.close()
    con = db.connect(path)              # a write open puts this version's back
    con.execute("DROP VIEW trace_kernels")
    con.close()
    ro = db.connect(path, read_only=True)
    assert ro.execute("SELECT count(*) FROM trace_kernels").fetchone()[0] > 0
    ro.close()


def _catalog(path):
    """Everything a schema puts in a file: tables, columns, views, macros with their
    text and comments, every table's rows (the seeds, schema_info), the storage format."""
    con = duckdb.connect(str(path), read_only=True)
    name = con.execute("SELECT current_database()").fetchone()[0]
    out = {q: con.execute(q).fetchall() for q in (
        "SELECT table_name, sql, comment FROM duckdb_tables() WHERE NOT internal ORDER BY 1",
        "SELECT table_name, column_name, data_type, column_default, comment FROM duckdb_columns() "
        "WHERE NOT internal ORDER BY 1, 2",
        "SELECT view_name, sql, comment FROM duckdb_views() WHERE NOT internal ORDER BY 1",
        "SELECT function_name, macro_definition FROM duckdb_functions() WHERE database_name = current_database() "
        "AND function_type LIKE '%macro' ORDER BY 1, 2",
        "SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = current_database()")}
    for (table,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall():
        out[table] = sorted(map(repr, con.execute(f'SELECT * FROM "{table}"').fetchall()))
    con.close()
    return name, out


def test_a_new_database_copied_from_the_template_is_the_one_built_from_the_schema(tmp_path, monkeypatch):
    """A new file is a copy of a template made once per schema, DuckDB and storage
    format (0.4 s of DDL become a copy); it must hold exactly what applying the schema
    to a new file gives, and a change of any of them makes another template."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRACEDB_CACHE_DIR", "")
    db.connect(tmp_path / "built.duckdb").close()
    assert not cache.exists()
    monkeypatch.setenv("TRACEDB_CACHE_DIR", str(cache))
    db.connect(tmp_path / "first.duckdb").close()        # makes the template, then copies it
    templates = sorted(cache.iterdir())
    assert [t.name for t in templates] == [f"empty-{db_template.template_key()}.duckdb"]
    first = (tmp_path / "first.duckdb").read_bytes()
    assert first == templates[0].read_bytes()              # a copy, not a file built again
    db.connect(tmp_path / "copied.duckdb").close()
    assert (tmp_path / "copied.duckdb").read_bytes() == first
    assert sorted(cache.iterdir()) == templates and not list(tmp_path.glob("*.tmp"))
    assert os.stat(tmp_path / "copied.duckdb").st_mode == os.stat(tmp_path / "built.duckdb").st_mode
    _, built = _catalog(tmp_path / "built.duckdb")
    assert len(built["schema_info"]) > 5 and len(built["flop_formulas"]) > 10 and len(built) >= 30
    for name in ("first", "copied"):
        assert _catalog(tmp_path / f"{name}.duckdb") == (name, built)
    con = db.connect(tmp_path / "copied.duckdb")
    r = ingest_file(con, AMP_TRACE)
    gpu = [e for e in raw_trace(AMP_TRACE)["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert con.execute("SELECT count(*) FROM kernels WHERE run = ?", [r.run]).fetchone()[0] == len(gpu) > 800
    con.close()
    monkeypatch.setattr(db_template, "template_key", lambda: "another")     # another schema or DuckDB
    db.connect(tmp_path / "other.duckdb").close()
    assert sorted(t.name for t in cache.iterdir()) == sorted([templates[0].name, "empty-another.duckdb"])


def test_a_new_database_is_built_where_no_copy_can_be_made(tmp_path, monkeypatch):
    """A cache that cannot be written (a file where its folder would be) leaves the
    database built from the schema; an existing file is never replaced; no copy where a
    WAL of the name is left (a deleted file's WAL would be replayed into it: every copy
    has the template's database identifier); nor for a name that is not a plain file."""
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    monkeypatch.setenv("TRACEDB_CACHE_DIR", str(blocker / "schema"))
    con = db.connect(tmp_path / "n.duckdb")
    assert con.execute("SELECT value FROM schema_info WHERE key = 'version'").fetchone()[0] == db.SCHEMA_VERSION
    con.close()
    monkeypatch.setenv("TRACEDB_CACHE_DIR", str(tmp_path / "cache"))
    assert db_template.copy_into(str(tmp_path / "n.duckdb"), _build) is None      # exists: left alone
    assert _catalog(tmp_path / "n.duckdb")[1]["schema_info"]
    (tmp_path / "w.duckdb.wal").write_bytes(b"left by a deleted w.duckdb")
    assert db_template.copy_into(str(tmp_path / "w.duckdb"), _build) is None and not (tmp_path / "w.duckdb").exists()
    assert db_template.copy_into(":memory:x", _build) is None and db_template.copy_into("md:x", _build) is None
    assert not list(tmp_path.glob("*.tmp")) and not os.path.exists(":memory:x")


def test_a_broken_template_is_dropped_and_the_file_built(tmp_path, monkeypatch):
    """A template cut short (a full disk, a crash) would break every new database made
    from it: the copy that does not open goes, with the template, and the file is
    built from the schema; the next new file makes a sound template again."""
    monkeypatch.setenv("TRACEDB_CACHE_DIR", str(tmp_path / "cache"))
    db.connect(tmp_path / "a.duckdb").close()
    (template,) = (tmp_path / "cache").iterdir()
    template.write_bytes(template.read_bytes()[:100_000])
    con = db.connect(tmp_path / "b.duckdb")
    assert con.execute("SELECT value FROM schema_info WHERE key = 'version'").fetchone()[0] == db.SCHEMA_VERSION
    con.close()
    assert not template.exists()
    assert _catalog(tmp_path / "b.duckdb")[1] == _catalog(tmp_path / "a.duckdb")[1]
    db.connect(tmp_path / "c.duckdb").close()
    assert template.exists() and template.read_bytes() == (tmp_path / "c.duckdb").read_bytes()
