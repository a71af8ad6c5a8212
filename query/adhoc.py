"""`tracedb sql`: ad-hoc SQL on a tracedb database that cannot reach other files.

The database is opened read-only unless the user opts in with --write, and
DuckDB's external access is turned off with the configuration locked before
the user's SQL runs: no COPY ... TO, read_text/read_csv of other files,
ATTACH of another database (or of this one through a link), INSTALL/LOAD, and
no SET that would turn any of that back on. --write allows changing this
database's own tables (INSERT, UPDATE, DELETE, CREATE, DROP); nothing else.
"""
import duckdb
import pyarrow as pa

from ..store import db
from ..store.sql import finite, read_batches, statements
from ..errors import TracedbError

WRITE_HELP = ("allow the SQL to change this database's tables (INSERT, UPDATE, DELETE, CREATE, DROP); "
              "files outside the database stay out of reach either way")


class SqlError(TracedbError):
    pass


def sandboxed(path, write=False):
    """A connection to the database at path with external access off and the
    configuration locked (read-only unless write)."""
    from ..store.sandbox import lock
    return lock(db.connect(path, read_only=not write))


def run(con, query, write=False, fmt="csv"):
    """The result of the last statement of query, as a pyarrow RecordBatchReader (its
    rows written as they come: a query may return every event of a 10 GB trace), or
    None for a statement without one; SqlError with DuckDB's whole message on one
    line (its hints kept), also when met while reading. Its columns are what output
    format fmt can write (`writable`)."""
    if not query.strip() or not statements(query):
        raise SqlError("empty query: give SQL, e.g. tracedb sql 'SELECT run, kind FROM runs' --db DB")
    try:
        rel = con.sql(query)
        if rel is None:                   # a statement without a result (CREATE, INSERT ...)
            return None
        reader = writable(rel, fmt).to_arrow_reader(65536)
    except duckdb.Error as e:
        raise SqlError(_explain(e, write)) from None

    def mapped():
        try:
            yield from read_batches(reader)
        except duckdb.Error as e:
            raise SqlError(_explain(e, write)) from None
    return pa.RecordBatchReader.from_batches(reader.schema, mapped())


# DuckDB types that Arrow, or its CSV and Parquet writers, cannot hold (an interval
# of months, days and ns; a UNION; a UHUGEINT, which DuckDB 2.0 exports wrapped
# round): written as DuckDB prints them
_AS_TEXT = {"interval", "union", "time with time zone", "bignum", "uhugeint", "bit", "variant", "geometry"}
_NESTED = {"list", "array", "struct", "tuple", "map"}


def writable(rel, fmt):
    """rel with every column in a type that output format fmt writes right: the
    types above as DuckDB's text; for CSV and the terminal table, dates and times
    as text too (an 'infinity' timestamp has no Python value) and BLOBs, lists,
    structs and maps as DuckDB's text and JSON (pyarrow's CSV writer refuses them);
    a name repeated (in any case) made unique as DuckDB does (a, a_1), so that no
    value is lost where the columns become an object's keys."""
    cols, seen, used = [], {}, {n.lower() for n in rel.columns}
    changed = False
    for i, (name, t) in enumerate(zip(rel.columns, rel.types), start=1):
        if name.lower() in seen:
            k = seen[name.lower()]
            while f"{name}_{k}".lower() in used:
                k += 1
            seen[name.lower()] = k + 1
            name = f"{name}_{k}"
            used.add(name.lower())
            changed = True
        else:
            seen[name.lower()] = 1
        expr = _writable_expr(f"#{i}", t, fmt)
        changed |= expr != f"#{i}"
        cols.append(f'{expr} AS "{name.replace(chr(34), chr(34) * 2)}"')
    return rel.project(", ".join(cols)) if changed else rel


def _writable_expr(col, t, fmt):
    text = f"CAST({col} AS VARCHAR)"
    if t.id in _AS_TEXT:
        return text
    # JSON text for a file is JSON (NaN and infinities null, as in --format json);
    # the terminal's table shows them as they are
    as_json = f"CAST(to_json({col if fmt == 'table' else finite(col, t)}) AS VARCHAR)"
    if fmt in ("csv", "table"):
        if t.id in _NESTED:
            return as_json
        if t.id == "blob" or t.id.startswith(("date", "time")):
            return text
    elif t.id in _NESTED and _holds_text_type(t):
        return as_json
    return col


def _holds_text_type(t):
    """Whether a nested type holds, at any depth, a type of _AS_TEXT (by the types
    themselves: a field named ORBIT is no BIT)."""
    if t.id in _AS_TEXT:
        return True
    return t.id in _NESTED and any(_holds_text_type(child) for _, child in t.children
                                   if not isinstance(child, int))     # an ARRAY's ('size', n)


def _explain(e, write):
    """DuckDB's message on one line, its hints kept ('Did you mean ...', the LINE it
    points at; the caret line is dropped), and what tracedb sql allows where that
    is the cause."""
    lines = [l.strip() for l in str(e).splitlines() if l.strip() and set(l.strip()) != {"^"}]
    msg = " ".join(lines)
    if "read-only mode" in msg and not write:
        msg += " (tracedb sql opens the database read-only: add --write to change its tables)"
    elif "disabled by configuration" in msg or "configuration has been locked" in msg:
        msg += (" (tracedb sql reads only this database: reading or writing other files, ATTACH, "
                "INSTALL/LOAD and settings are off; use DuckDB itself for those)")
    return msg
