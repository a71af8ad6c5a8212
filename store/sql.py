"""SQL of ours, and running it: literals and identifiers for the few places that
cannot bind a parameter, our scripts split into statements, $parameters bound by
name, rows and scalars fetched whole, DuckDB's errors met while reading Arrow."""
import re
from contextlib import nullcontext

import duckdb

from ..progress import phase, profiling

_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


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


def finite(x, t, depth=0):
    """The SQL of column x of DuckDB type t with every NaN and infinity, at any depth,
    made NULL: DuckDB's to_json writes them bare (NaN, Infinity), which is not JSON.
    x itself where t holds no float (a nested value is rebuilt only around its floats)."""
    e = f"e{depth}"
    if t.id in ("float", "double"):
        return f"CASE WHEN isfinite({x}) THEN {x} END"
    if t.id in ("list", "array"):
        inner = finite(e, t.children[0][1], depth + 1)
        return x if inner == e else f"list_transform({x}, lambda {e}: {inner})"
    if t.id == "map":
        inner = finite(f"{e}.value", t.children[1][1], depth + 1)
        return x if inner == f"{e}.value" else \
            f"map_from_entries(list_transform(map_entries({x}), lambda {e}: {{'key': {e}.key, 'value': {inner}}}))"
    if t.id in ("struct", "tuple"):      # a tuple is row(...): its fields have no names
        refs = [f"struct_extract_at({x}, {i})" for i in range(1, len(t.children) + 1)]
        inner = [finite(ref, ft, depth + 1) for ref, (_, ft) in zip(refs, t.children)]
        if inner == refs:
            return x
        packed = f"row({', '.join(inner)})" if t.id == "tuple" else \
            f"struct_pack({', '.join(f'{sql_ident(name)} := {v}' for (name, _), v in zip(t.children, inner))})"
        return f"CASE WHEN {x} IS NOT NULL THEN {packed} END"
    return x


def statements(text):
    """Split a SQL script of ours into statements (each ends with ';' at end of line)."""
    parts = re.split(r";[ \t]*(?:--[^\n]*)?$", text, flags=re.M)
    out = []
    for p in parts:
        body = "\n".join(l for l in p.splitlines() if not l.strip().startswith("--")).strip()
        if body:
            out.append(p.strip())
    return out


def split_at(text, pattern, what):
    """A script of ours split at its one statement matching pattern (a regular
    expression, ^ at a line's start): (the statements before it as one script, the
    statement, those after it as one script). what names the statement in the error
    where not exactly one matches."""
    script = statements(text)
    at = [i for i, st in enumerate(script) if re.search(pattern, st, re.M)]
    if len(at) != 1:
        raise RuntimeError(f"no one statement {what}")
    return ";\n".join(script[:at[0]]), script[at[0]], ";\n".join(script[at[0] + 1:])


def params_of(sql):
    """The $names a SQL text uses (comments left out)."""
    return set(_PARAM.findall(re.sub(r"--[^\n]*", "", sql)))


def bind(sql, params):
    """The subset of params that a statement names as $name (DuckDB rejects extras)."""
    return {k: params.get(k) for k in params_of(sql)}


def run_script(con, text, params=None):
    for stmt in statements(text):
        with phase(_label(stmt)) if profiling() else nullcontext():
            con.execute(stmt, bind(stmt, params or {}))


def _label(stmt):
    """A statement's phase name for TRACEDB_PROFILE: what it creates, inserts or drops."""
    body = " ".join(l for l in stmt.splitlines() if not l.strip().startswith("--"))
    m = re.search(r"\b(CREATE (?:OR REPLACE )?(?:TEMP )?(?:TABLE|VIEW)|INSERT INTO|UPDATE|DELETE FROM|DROP \w+)\s+(\w+)",
                  body, re.I)
    return f"  sql {m[1].split()[0].lower()} {m[2]}" if m else "  sql " + body[:30]


def run_script_over(con, text, name, table):
    """Run a script (no $parameters) whose statements read the Arrow table `table`
    under `name`, through a relation's query: nothing is registered. DuckDB keeps a
    table registered (or a temp table dropped) inside a transaction until its end,
    so a load staging batch after batch under one name held every batch."""
    rel = con.from_arrow(table)
    for stmt in statements(text):
        rel.query(name, stmt)


def rows(con, sql, params=None):
    """All rows of a query (fully fetched, so the connection is free again)."""
    return con.execute(sql, params or []).fetchall()


def scalar(con, sql, params=None):
    """The first value of the first row, or None."""
    r = rows(con, sql, params)
    return r[0][0] if r else None


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
