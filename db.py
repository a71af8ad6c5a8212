"""Opening a tracedb database: connection settings and the schema, in one place.

schema/ is split by role, and a writable open applies it in this order:
  tables/   DDL of every table (core.sql, settings.sql), then migrate.sql
  seeds/    shipped rows of the settings tables, one file per table
  views/    shared views and macros (reports, the CLI and notebooks read them)
load/ (per-reader load SQL) and match/ (kernel matching) run during ingest.
"""
import functools
import hashlib
import os
import re
import sys
from contextlib import contextmanager
from importlib import resources

import duckdb

# The schema's version in schema_info: a write open replaces the views and macros
# when it differs (4: the first to skip them when current, so a writer older than
# that, which keeps stamping 3 with its own views, makes this version replace them).
SCHEMA_VERSION = "4"
TABLE_FILES = ("tables/core.sql", "tables/settings.sql", "tables/migrate.sql")
VIEW_FILES = ("views/base.sql", "views/ncu.sql", "views/utilization.sql", "views/energy.sql",
              "views/queues.sql", "views/trace_kernels.sql", "views/flops.sql", "views/distributed.sql",
              "views/jobs.sql",
              "views/system.sql", "views/findings.sql")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def sql_text(package, name):
    """Text of a .sql file shipped in a package folder (schema/, queries/); name may
    hold one sub-folder ("views/base.sql")."""
    return resources.files(f"tracedb.{package}").joinpath(*name.split("/")).read_text()


def package_sql(package):
    """(name without .sql, text) of every .sql file of a package folder (queries/,
    rules/), sorted by name: the saved reports and the finding rules."""
    for f in sorted(resources.files(f"tracedb.{package}").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".sql"):
            yield f.name[:-4], f.read_text()


def sql_files(package, folder):
    """Names ("seeds/x.sql") of the .sql files in a sub-folder of a package, sorted."""
    d = resources.files(f"tracedb.{package}").joinpath(folder)
    return sorted(f"{folder}/{f.name}" for f in d.iterdir() if f.name.endswith(".sql"))


def sql_literal(value):
    """A SQL literal of a Python value, for the few places that cannot bind a
    parameter (views, COPY targets, table functions' file lists)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else "NULL"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(sql_literal(v) for v in value) + "]"
    return "'" + str(value).replace("'", "''") + "'"


def sql_ident(name):
    """A quoted SQL identifier (column names taken from a file's header)."""
    return '"' + str(name).replace('"', '""') + '"'


def statements(text):
    """Split a SQL script of ours into statements (each ends with ';' at end of line)."""
    parts = re.split(r";[ \t]*(?:--[^\n]*)?$", text, flags=re.M)
    out = []
    for p in parts:
        body = "\n".join(l for l in p.splitlines() if not l.strip().startswith("--")).strip()
        if body:
            out.append(p.strip())
    return out


def params_of(sql):
    """The $names a SQL text uses (comments left out)."""
    return set(_PARAM.findall(re.sub(r"--[^\n]*", "", sql)))


def bind(sql, params):
    """The subset of params that a statement names as $name (DuckDB rejects extras)."""
    return {k: params.get(k) for k in params_of(sql)}


def run_script(con, text, params=None):
    for stmt in statements(text):
        con.execute(stmt, bind(stmt, params or {}))


def run_script_over(con, text, name, table):
    """Run a script (no $parameters) whose statements read the Arrow table `table`
    under `name`, through a relation's query: nothing is registered. DuckDB keeps a
    table registered (or a temp table dropped) inside a transaction until its end,
    so a load staging batch after batch under one name held every batch."""
    rel = con.from_arrow(table)
    for stmt in statements(text):
        rel.query(name, stmt)


def _migrate_settings(con):
    """Settings tables of a database made before they carried `source`: the
    published-energy citation column was named source then."""
    cols = {r[0] for r in rows(con, "SELECT column_name FROM duckdb_columns() "
                                    "WHERE table_name = 'calibration_reference' AND NOT internal")}
    if "citation" not in cols:
        con.execute("ALTER TABLE calibration_reference RENAME COLUMN source TO citation")
    for table in ("ncu_metric_labels", "metric_sources", "layer_rules", "calibration_reference"):
        con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS source VARCHAR DEFAULT 'user'")


def apply_seeds(con):
    """Ship the settings rows of schema/seeds/ into their tables, but only when
    they changed since the database last got them, so a user's edits survive
    reopening. Rows of a user (source <> 'tracedb') are never touched, and a
    user's row with the key of a shipped one wins over it."""
    for name in sql_files("schema", "seeds"):
        table = name.rsplit("/", 1)[1][:-4]
        text = sql_text("schema", name)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        key = f"seed:{table}"
        if scalar(con, "SELECT value FROM schema_info WHERE key = ?", [key]) == digest:
            continue
        seed = statements(text)[0]
        cols = [d[0] for d in con.execute(f"SELECT * FROM ({seed}) LIMIT 0").description]
        same = " AND ".join(f"s.{c} IS NOT DISTINCT FROM t.{c}" for c in cols)
        con.execute(f"DELETE FROM {table} WHERE source = 'tracedb'")
        # A row equal to a shipped one is that row (databases made before rows had a source).
        con.execute(f"DELETE FROM {table} t WHERE EXISTS (SELECT 1 FROM ({seed}) s WHERE {same})")
        con.execute(f"INSERT OR IGNORE INTO {table} BY NAME SELECT *, 'tracedb' AS source FROM ({seed})")
        con.execute("INSERT OR REPLACE INTO schema_info VALUES (?, ?)", [key, digest])


def _views_current(con, macros=True):
    """The file's views and macros are this version's: its schema version and digest
    of them are this version's, and no view (with macros: nor macro) was dropped
    since. Listing the macros takes 50 ms (duckdb_functions() lists every built-in):
    a write open checks them, a read-only one (every report) the views alone."""
    if not _stamped_current(con):
        return False
    kinds = "VIEW|MACRO" if macros else "VIEW"
    names = set()
    for name in VIEW_FILES:
        names.update(re.findall(rf"CREATE OR REPLACE (?:{kinds}) (\w+)", sql_text("schema", name)))
    found = "SELECT view_name FROM duckdb_views() WHERE database_name = current_database()"
    if macros:
        found += (" UNION SELECT function_name FROM duckdb_functions() "
                  "WHERE database_name = current_database() AND function_type LIKE '%macro'")
    return names <= {r[0] for r in rows(con, found)}


def _stamped_current(con):
    """The file says it holds this version's schema and views (schema_info): true of
    a copy of the template (db_template.py), which applying the schema again leaves
    as it is (0.08 s of a new file's 0.12 s open)."""
    stored = dict(rows(con, "SELECT key, value FROM schema_info WHERE key IN ('version', 'views')"))
    return stored == {"version": SCHEMA_VERSION, "views": _views_digest()}


def _views_digest():
    return hashlib.sha256("".join(sql_text("schema", n) for n in VIEW_FILES).encode()).hexdigest()[:16]


@contextmanager
def setting(con, name, value):
    """DuckDB's setting `name` at value for the block, then back to its default
    (RESET); None leaves it as it is. Outside a transaction (no SET in an aborted one)."""
    if value is not None:
        con.execute(f"SET {name} = {sql_literal(value)}")
    try:
        yield
    finally:
        if value is not None:
            con.execute(f"RESET {name}")


# DuckDB's errors by the words its messages start with: pyarrow raises an error met
# while a DuckDB Arrow reader reads as an OSError (read_batches raises it again as DuckDB's).
_DUCKDB_ERRORS = {"Invalid Input Error": duckdb.InvalidInputException,
                  "Conversion Error": duckdb.ConversionException,
                  "Out of Range Error": duckdb.OutOfRangeException,
                  "Out of Memory Error": duckdb.OutOfMemoryException,
                  "INTERRUPT Error": duckdb.InterruptException}


def read_batches(reader):
    """The batches of a DuckDB Arrow reader, its errors raised as DuckDB's own
    (never an OSError, which callers writing files take for theirs)."""
    try:
        yield from reader
    except OSError as e:
        msg = str(e)
        kind = next((k for w, k in _DUCKDB_ERRORS.items() if msg.startswith(w)), duckdb.Error)
        raise kind(msg) from None


# DuckDB's memory limit while a trace loads or is exported, whatever its size: the
# events are staged in batches (ingest/trace.py) and exported in windows
# (perfetto.py), and the sorts and joins beyond it spill to DuckDB's temp directory
# (docs/benchmarks.md: peak RSS per trace size).
MEMORY_CAP = 1 << 30

_UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


@functools.cache
def default_setting(name):
    """DuckDB's own value of a setting (a new in-memory database's): a different
    value on a connection is one its user set."""
    return duckdb.connect().execute(f"SELECT current_setting('{name}')").fetchone()[0]


def unless_set(con, name, value):
    """value, or None (for setting(): leave it) where the connection's setting `name`
    is not DuckDB's own: a value its user set is theirs."""
    return value if scalar(con, f"SELECT current_setting('{name}')") == default_setting(name) else None


@contextmanager
def memory_cap(con):
    """DuckDB's memory limit lowered to MEMORY_CAP for the block (a trace's load, an
    export), whatever the trace's size: what does not fit spills to disk instead of
    growing with the trace. A limit the user set is left alone; the default comes
    back exactly (RESET). Wraps the transaction (no SET in an aborted one)."""
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]?i?B)", default_setting("memory_limit") or "")
    lower = m is not None and float(m[1]) * _UNITS[m[2]] > MEMORY_CAP
    with setting(con, "memory_limit", unless_set(con, "memory_limit", f"{MEMORY_CAP}B") if lower else None):
        yield


# The one column declared with a compression (schema/tables/core.sql; why:
# docs/benchmarks.md), and the schema_info key saying a database's events table has it.
ARGS_ZSTD = " USING COMPRESSION zstd"
ARGS_ZSTD_KEY = "events.args compression"


def _args_zstd_fits(con):
    """True when events does not exist yet and both this DuckDB and the file's storage
    format know zstd for strings (DuckDB 1.2 on): DuckDB rejects the declaration on an
    older format even where CREATE TABLE IF NOT EXISTS would do nothing."""
    if scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                   "AND schema_name = 'main' AND table_name = 'events'"):
        return False
    storage = scalar(con, "SELECT tags['storage_version'] FROM duckdb_databases() "
                          "WHERE database_name = current_database()") or ""
    return all(_version(v) >= (1, 2) for v in (duckdb.__version__, storage))


def _version(text):
    m = re.match(r"v?(\d+)\.(\d+)", text or "")
    return (int(m[1]), int(m[2])) if m else (0, 0)


def apply_schema(con):
    """Tables, migrations, seed rows and views (idempotent), in one transaction: one
    commit (one WAL flush) instead of one per statement (about 150), and a failure
    leaves the file as it was. The views are replaced only when this version's differ
    from the file's (schema_info 'views'): binding them is most of an open's time."""
    con.begin()
    try:
        _apply_schema(con)
        con.commit()
    except BaseException:
        con.rollback()
        raise


def _apply_schema(con):
    args_zstd = _args_zstd_fits(con)
    for name in TABLE_FILES:
        if name.endswith("migrate.sql"):
            _migrate_settings(con)
        text = sql_text("schema", name)
        run_script(con, text if args_zstd else text.replace(ARGS_ZSTD, ""))
    if args_zstd:
        con.execute("INSERT OR REPLACE INTO schema_info VALUES (?, 'zstd')", [ARGS_ZSTD_KEY])
    apply_seeds(con)
    _apply_table_comments(con)
    if not _views_current(con):
        for name in VIEW_FILES:
            run_script(con, sql_text("schema", name))
        from tracedb.docgen import view_comment_sql
        con.execute(view_comment_sql())          # the views were just replaced, comments and all
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('version', ?)", [SCHEMA_VERSION])
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('views', ?)", [_views_digest()])


def shadow_stale_views(con):
    """On a read-only connection to a database whose views another tracedb version
    wrote, or that lacks one (_views_current, the write open's check too), this
    version's views and macros as temporary ones, which DuckDB finds before the
    stored ones: the reports then read the views they were written for (a stale
    view gives old numbers, or a missing column), and the file is not touched."""
    try:
        if _views_current(con, macros=False):
            return
    except duckdb.CatalogException:          # not a tracedb database: nothing to shadow
        return
    from tracedb.readold import shadow_old_tables
    shadow_old_tables(con)                   # an older file's missing tables and columns (readold.py)
    for name in VIEW_FILES:
        text = sql_text("schema", name)
        run_script(con, text.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW")
                            .replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO"))


def _apply_table_comments(con):
    """The DDL's column comments on the tables, when they changed."""
    from tracedb.docgen import comment_sql
    text = comment_sql()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if scalar(con, "SELECT value FROM schema_info WHERE key = 'comments'") != digest:
        con.execute(text)
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('comments', ?)", [digest])


# The storage format a new database is written in: DuckDB 2.0 writes a format by
# default that DuckDB 1.x (the CLI and drivers most people have) cannot open. The
# README states the versions this gives; tests/test_compat.py opens a file with 1.5.
STORAGE_COMPATIBILITY = "v1.4.0"


def remove(path):
    """Remove a database file and the WAL beside it, where they are."""
    for f in (path, path + ".wal"):
        if os.path.exists(f):
            os.remove(f)


def connect(path, read_only=False, wait_s=0.0, say=None, _template=True):
    """Open (and create if needed) a tracedb DuckDB file with the schema applied; a
    new file is written in STORAGE_COMPATIBILITY's format, as a copy of a template
    (db_template.py). While another process holds the file, wait up to wait_s seconds
    (say(line) is told once), then raise dblock.DatabaseLocked naming that process."""
    from tracedb.dblock import is_lock_error, open_waiting
    path = str(path)
    config, copied = {}, None
    if not read_only and path != ":memory:" and not os.path.exists(path):
        if _template:
            from tracedb import db_template
            copied = db_template.copy_into(path)
        if copied is None:
            config["storage_compatibility_version"] = STORAGE_COMPATIBILITY
    try:
        con = open_waiting(lambda: duckdb.connect(path, read_only=read_only, config=config), path, wait_s, say)
    except duckdb.Error as e:
        if copied is None or is_lock_error(e):
            raise
        db_template.discard(path, copied)        # a template that does not open: build this file
        return connect(path, read_only, wait_s, say, _template=False)
    if not sys.stderr.isatty():       # DuckDB's own bar would land in redirected output
        con.execute("SET enable_progress_bar = false")
    asof_by_sort(con)
    try:
        if read_only:
            shadow_stale_views(con)
        elif copied is None or not _stamped_current(con):    # a copy of this version's template has it
            apply_schema(con)
    except BaseException:
        con.close()
        raise
    return con


def asof_by_sort(con):
    """Plan every ASOF join as DuckDB's sorting join (this connection only: the setting
    is local). DuckDB loops over the right side instead where it estimates the left
    side under asof_loop_join_threshold (64) rows, and after the views' filters its
    estimate can be that low for a million ops: bwd_fwd_ratio with iteration=all on the
    10 GB database made 1.6 G rows in the loop (109 s; 50 s sorted)."""
    con.execute("SET asof_loop_join_threshold = 0")


# DuckDB's buffer blocks pooled in a short-lived process of ours (the CLI, an ingest
# worker) instead of handed back to the OS and faulted in again at the next block:
# the 1 GB trace's ingest makes 0.5 s less system time and 4% less wall with it
# (docs/benchmarks.md). DuckDB holds the pool until the database closes, so a
# notebook's or an application's connection, open for long, does not get it.
BLOCK_POOL = "1GiB"


def pool_blocks(con):
    """Keep DuckDB's freed buffer blocks (up to BLOCK_POOL) for reuse: for processes
    that end with their work. A DuckDB without the setting (before 1.3) goes on without."""
    try:
        con.execute(f"SET block_allocator_memory = '{BLOCK_POOL}'")
    except duckdb.Error:
        pass


def rows(con, sql, params=None):
    """All rows of a query (fully fetched, so the connection is free again)."""
    return con.execute(sql, params or []).fetchall()


def scalar(con, sql, params=None):
    """The first value of the first row, or None."""
    r = rows(con, sql, params)
    return r[0][0] if r else None
