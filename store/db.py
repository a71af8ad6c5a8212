"""Opening a tracedb database: the connection and its schema, in one place (SQL of
ours and running it: sql.py; DuckDB settings: tuning.py).

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

import duckdb

from . import catalog, template
from .catalog import ARGS_ZSTD, ARGS_ZSTD_KEY, SCHEMA_VERSION, STORAGE_COMPATIBILITY, TABLE_FILES, sql_files, sql_text
from .lock import is_lock_error, open_waiting
from .readold import shadow_old_tables
from .sql import rows, run_script, scalar, statements
from .tuning import asof_by_sort, fit_threads

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
    for name in catalog.view_files():
        names.update(catalog.defined_names(sql_text("schema", name), kinds))
    found = "SELECT view_name FROM duckdb_views() WHERE database_name = current_database()"
    if macros:
        found += (" UNION SELECT function_name FROM duckdb_functions() "
                  "WHERE database_name = current_database() AND function_type LIKE '%macro'")
    return names <= {r[0] for r in rows(con, found)}


def _stamped_current(con):
    """The file says it holds this version's schema and views (schema_info): true of
    a copy of the template (store/template.py), which applying the schema again leaves
    as it is (0.08 s of a new file's 0.12 s open)."""
    stored = dict(rows(con, "SELECT key, value FROM schema_info WHERE key IN ('version', 'views')"))
    return stored == {"version": SCHEMA_VERSION, "views": _views_digest()}


def _views_digest():
    return hashlib.sha256("".join(sql_text("schema", n) for n in catalog.view_files()).encode()).hexdigest()[:16]


@functools.cache
def totals_digest():
    """What makes the stored totals (catalog.TOTALS_TABLES): the views, the load
    scripts and the reports; an edit of any may change a total, so any counts."""
    texts = [sql_text("schema", n) for n in list(catalog.view_files()) + sql_files("schema", "load")]
    texts += [t for _, t in catalog.package_sql("queries")]
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]


def _totals_current(con):
    return scalar(con, "SELECT value FROM schema_info WHERE key = 'totals'") == totals_digest()


def _stored_totals(con):
    """The tables of catalog.TOTALS_TABLES the database file holds."""
    present = {r[0] for r in rows(con, "SELECT table_name FROM duckdb_tables() WHERE database_name = "
                                       "current_database() AND schema_name = 'main'")}
    return [t for t in catalog.TOTALS_TABLES if t in present]


def _drop_stale_totals(con):
    """A write open: totals another tracedb stored are deleted (the reports sweep
    those runs again; an ingest with --op-totals stores them anew)."""
    if _totals_current(con):
        return
    for t in _stored_totals(con):
        con.execute(f"DELETE FROM {t}")
    con.execute("INSERT OR REPLACE INTO schema_info VALUES ('totals', ?)", [totals_digest()])


def _hide_stale_totals(con):
    """A read-only open: totals another tracedb stored are hidden behind empty
    temporary tables of the same columns (found first), so the reports sweep."""
    if _totals_current(con):
        return
    file = scalar(con, "SELECT current_database()")
    for t in _stored_totals(con):
        con.execute(f'CREATE OR REPLACE TEMP TABLE {t} AS SELECT * FROM "{file}".main.{t} LIMIT 0')



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
    _drop_stale_totals(con)
    if not _views_current(con):
        for name in catalog.view_files():
            run_script(con, sql_text("schema", name))
        con.execute(catalog.view_comment_sql())          # the views were just replaced, comments and all
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('version', ?)", [SCHEMA_VERSION])
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('views', ?)", [_views_digest()])


def shadow_stale_views(con):
    """On a read-only connection to a database whose views another tracedb version
    wrote, or that lacks one (_views_current, the write open's check too), this
    version's views and macros as temporary ones, which DuckDB finds before the
    stored ones: the reports then read the views they were written for (a stale
    view gives old numbers, or a missing column), and the file is not touched."""
    try:
        _hide_stale_totals(con)
        if _views_current(con, macros=False):
            return
    except duckdb.CatalogException:          # not a tracedb database: nothing to shadow
        return
    shadow_old_tables(con)                   # an older file's missing tables and columns (readold.py)
    for name in catalog.view_files():
        text = sql_text("schema", name)
        run_script(con, text.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW")
                            .replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO"))


def _apply_table_comments(con):
    """The DDL's column comments on the tables, when they changed."""
    text = catalog.comment_sql()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if scalar(con, "SELECT value FROM schema_info WHERE key = 'comments'") != digest:
        con.execute(text)
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('comments', ?)", [digest])




def connect(path, read_only=False, wait_s=0.0, say=None, _template=True):
    """Open (and create if needed) a tracedb DuckDB file with the schema applied; a
    new file is written in STORAGE_COMPATIBILITY's format, as a copy of a template
    (store/template.py). While another process holds the file, wait up to wait_s seconds
    (say(line) is told once), then raise dblock.DatabaseLocked naming that process."""
    path = str(path)
    config, copied = {}, None
    if not read_only and path != ":memory:" and not os.path.exists(path):
        if _template:
            copied = template.copy_into(path, lambda made: connect(made, _template=False).close())
        if copied is None:
            config["storage_compatibility_version"] = STORAGE_COMPATIBILITY
    try:
        con = open_waiting(lambda: duckdb.connect(path, read_only=read_only, config=config), path, wait_s, say)
    except duckdb.Error as e:
        if copied is None or is_lock_error(e):
            raise
        template.discard(path, copied)        # a template that does not open: build this file
        return connect(path, read_only, wait_s, say, _template=False)
    if not scalar(con, "SELECT current_setting('lock_configuration')"):
        # (a connection of this process locked the file's configuration, store/sandbox.py:
        # it set these before it did, and no connection of the file's instance can now)
        if not sys.stderr.isatty():       # DuckDB's own bar would land in redirected output
            con.execute("SET enable_progress_bar = false")
        asof_by_sort(con)
        fit_threads(con)
    try:
        if read_only:
            shadow_stale_views(con)
        elif copied is None or not (_stamped_current(con) and _totals_current(con)):   # a copy of this version's template has it
            apply_schema(con)
    except BaseException:
        con.close()
        raise
    return con


