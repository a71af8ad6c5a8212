"""Opening a tracedb database: connection settings and the schema, in one place."""
import re
from importlib import resources

import duckdb

SCHEMA_VERSION = "2"
SCHEMA_FILES = ("tables.sql", "migrate.sql", "views.sql", "ncu.sql", "utilization.sql", "energy.sql", "queues.sql")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def sql_text(package, name):
    """Text of a .sql file shipped in a package folder (schema/, queries/)."""
    return resources.files(f"tracedb.{package}").joinpath(name).read_text()


def statements(text):
    """Split a SQL script of ours into statements (each ends with ';' at end of line)."""
    parts = re.split(r";[ \t]*(?:--[^\n]*)?$", text, flags=re.M)
    out = []
    for p in parts:
        body = "\n".join(l for l in p.splitlines() if not l.strip().startswith("--")).strip()
        if body:
            out.append(p.strip())
    return out


def bind(sql, params):
    """The subset of params that a statement names as $name (DuckDB rejects extras)."""
    code = re.sub(r"--[^\n]*", "", sql)
    return {k: params.get(k) for k in set(_PARAM.findall(code))}


def run_script(con, text, params=None):
    for stmt in statements(text):
        con.execute(stmt, bind(stmt, params or {}))


def connect(path, read_only=False):
    """Open (and create if needed) a tracedb DuckDB file with the schema applied."""
    con = duckdb.connect(str(path), read_only=read_only)
    if not read_only:
        for name in SCHEMA_FILES:
            run_script(con, sql_text("schema", name))
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('version', ?)", [SCHEMA_VERSION])
    return con


def rows(con, sql, params=None):
    """All rows of a query (fully fetched, so the connection is free again)."""
    return con.execute(sql, params or []).fetchall()


def scalar(con, sql, params=None):
    """The first value of the first row, or None."""
    r = rows(con, sql, params)
    return r[0][0] if r else None
