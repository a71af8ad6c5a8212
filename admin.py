"""Changing a database from the command line: remove a run, edit the settings tables.

`rm` undoes an ingest (every row of the run) or a pairing (the matches and alignment
that link an ncu report or power log to a trace). Settings are the tables of
schema/tables/settings.sql; a row written here is marked source = 'user', so a
new tracedb's shipped rows never overwrite it (db.apply_seeds).
"""
import re

import duckdb

from tracedb.db import rows, scalar, sql_ident, sql_text


class AdminError(Exception):
    """A user's request that cannot be done (unknown run, table, column or key)."""


def run_columns(con):
    """table -> its columns that name a run (run, trace_run, ncu_run, power_run ...),
    for every table of the database but runs: read from the catalog, so a table
    added by a new reader is covered without a change here."""
    out = {}
    for table, col in rows(con, """SELECT c.table_name, c.column_name FROM duckdb_columns() c
            JOIN duckdb_tables() t ON t.table_name = c.table_name AND t.schema_name = c.schema_name
                                   AND t.database_name = c.database_name AND NOT t.temporary
            WHERE c.database_name = current_database() AND c.schema_name = 'main' AND c.table_name <> 'runs'
              AND (c.column_name = 'run' OR c.column_name LIKE '%\\_run' ESCAPE '\\')
            ORDER BY 1, c.column_index"""):
        out.setdefault(table, []).append(col)
    return out


def remove_run(con, run):
    """Delete every row of `run` in one transaction; runs paired with it lose the
    pairing (their rows stay). Returns {table: rows deleted}."""
    if not scalar(con, "SELECT count(*) FROM runs WHERE run = ?", [run]):
        raise AdminError(f"no run named {run!r} in the database")
    deleted = {}
    con.begin()
    try:
        for table, cols in run_columns(con).items():
            deleted[table] = _delete(con, table, " OR ".join(f"{c} = $run" for c in cols), run)
        con.execute("UPDATE runs SET paired_run = NULL WHERE paired_run = $run", {"run": run})
        deleted["runs"] = _delete(con, "runs", "run = $run", run)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return {t: n for t, n in deleted.items() if n}


def remove_pairing(con, run, trace=None):
    """Undo the pairing of an ncu or power run with its trace (the run stays): exactly
    the pairing named. A run paired with several traces (tracedb match of one report
    with two traces) needs `trace`, the one to unpair: removing them all took the
    right pairing with the wrong one (issue 50)."""
    kind = scalar(con, "SELECT kind FROM runs WHERE run = ?", [run])
    if kind is None:
        raise AdminError(f"no run named {run!r} in the database")
    if kind not in ("ncu", "power"):
        raise AdminError(f"run {run!r} is a {kind} run: only ncu and power runs are paired")
    col = "ncu_run" if kind == "ncu" else "power_run"
    tables = ("matches", "match_runs") if kind == "ncu" else ("power_alignment",)
    paired = [r[0] for r in con.execute(f"SELECT DISTINCT trace_run FROM {tables[-1]} WHERE {col} = ? "
                                        "ORDER BY 1", [run]).fetchall()]
    if trace is not None and trace not in paired:
        raise AdminError(f"run {run!r} is not paired with {trace!r} (paired with: {', '.join(paired) or 'none'})")
    if trace is None and len(paired) > 1:
        raise AdminError(f"run {run!r} is paired with {len(paired)} traces ({', '.join(paired)}): "
                         f"name the one to unpair with --trace")
    con.begin()
    try:
        where = f"{col} = $run" + (" AND trace_run = $trace" if trace is not None else "")
        deleted = {}
        for t in tables:
            p = {"run": run, **({"trace": trace} if trace is not None else {})}
            deleted[t] = scalar(con, f"SELECT count(*) FROM {t} WHERE {where}", p)
            con.execute(f"DELETE FROM {t} WHERE {where}", p)
        left = scalar(con, f"SELECT max(trace_run) FROM {tables[-1]} WHERE {col} = $run", {"run": run})
        con.execute("UPDATE runs SET paired_run = $left WHERE run = $run", {"run": run, "left": left})
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return {t: n for t, n in deleted.items() if n}


def _delete(con, table, where, run):
    n = scalar(con, f"SELECT count(*) FROM {table} WHERE {where}", {"run": run})
    if n:
        con.execute(f"DELETE FROM {table} WHERE {where}", {"run": run})
    return n


# ---- settings ------------------------------------------------------------------

def settings_tables():
    """Names of the settings tables, in the order of schema/tables/settings.sql."""
    return re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", sql_text("schema", "tables/settings.sql"))


def _table(con, table):
    if table not in settings_tables():
        raise AdminError(f"no settings table {table!r} (settings tables: {', '.join(settings_tables())})")
    return table


def columns(con, table):
    """[(column, type, comment)] of a settings table."""
    return rows(con, "SELECT column_name, data_type, comment FROM duckdb_columns() "
                     "WHERE table_name = ? AND schema_name = 'main' ORDER BY column_index", [table])


def key_columns(con, table):
    """The primary key's columns (empty when the table has none)."""
    k = scalar(con, "SELECT constraint_column_names FROM duckdb_constraints() "
                    "WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'", [table])
    return list(k or [])


def _values(con, table, pairs, what):
    cols = {c for c, _, _ in columns(con, table)}
    out = {}
    for p in pairs:
        if "=" not in p:
            raise AdminError(f"{what} {p!r}: expected COLUMN=VALUE")
        k, v = p.split("=", 1)
        k = k.strip()
        if k not in cols:
            raise AdminError(f"{table} has no column {k!r} (columns: {', '.join(sorted(cols))})")
        if k == "source":
            raise AdminError(f"{table}.source is set by tracedb ('user' for rows written here)")
        out[k] = None if v.upper() == "NULL" else v
    if not out:
        raise AdminError(f"{what}: give COLUMN=VALUE pairs")
    return out


def list_rows(con, table):
    """The rows of a settings table (an Arrow table), shipped and user rows alike."""
    _table(con, table)
    order = ", ".join(sql_ident(c) for c in key_columns(con, _table(con, table))) or "ALL"
    return con.sql(f"SELECT * FROM {table} ORDER BY {order}").to_arrow_table()


def set_row(con, table, pairs, replace=True):
    """Insert a user row; replace=True replaces the row with the same key (a shipped
    row included), else a clash is an error. Returns the row's key as text."""
    _table(con, table)
    values = _values(con, table, pairs, "set" if replace else "add")
    key = key_columns(con, table)
    missing = [k for k in key if k not in values]
    if missing:
        raise AdminError(f"{table}: give the key column(s) {', '.join(missing)}")
    for col, v in values.items():       # a pattern DuckDB cannot compile would break every report that reads it
        if (col == "pattern" or col.endswith("_pattern")) and v is not None:
            try:
                con.execute("SELECT regexp_matches('', $1)", [v])
            except duckdb.Error as e:
                raise AdminError(f"{table}.{col} {v!r} is not an RE2 regular expression "
                                 f"({str(e).splitlines()[0].removeprefix('Invalid Input Error: ')})") from None
    values["source"] = "user"
    names = ", ".join(sql_ident(c) for c in values)
    binds = ", ".join(f"${i + 1}" for i in range(len(values)))
    verb = "INSERT OR REPLACE" if replace else "INSERT"
    try:
        con.execute(f"{verb} INTO {table} ({names}) VALUES ({binds})", list(values.values()))
    except duckdb.ConstraintException:
        raise AdminError(f"{table}: a row with {_key_text(values, key)} exists (use `set` to replace it)") from None
    except duckdb.Error as e:
        raise AdminError(f"{table}: {str(e).splitlines()[0]}") from None
    return _key_text(values, key)


def remove_rows(con, table, pairs):
    """Delete the rows whose columns equal the given values; returns how many."""
    _table(con, table)
    values = _values(con, table, pairs, "remove")
    where = " AND ".join(f"{sql_ident(c)}::VARCHAR IS NOT DISTINCT FROM ${i + 1}" for i, c in enumerate(values))
    n = scalar(con, f"SELECT count(*) FROM {table} WHERE {where}", list(values.values()))
    if not n:
        raise AdminError(f"{table}: no row with {_key_text(values, list(values))}")
    con.execute(f"DELETE FROM {table} WHERE {where}", list(values.values()))
    return n


def _key_text(values, key):
    return ", ".join(f"{k}={values[k]!r}" for k in key if k in values)
