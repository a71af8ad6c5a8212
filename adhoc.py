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

from tracedb import db

WRITE_HELP = ("allow the SQL to change this database's tables (INSERT, UPDATE, DELETE, CREATE, DROP); "
              "files outside the database stay out of reach either way")


class SqlError(Exception):
    pass


def sandboxed(path, write=False):
    """A connection to the database at path with external access off and the
    configuration locked (read-only unless write)."""
    con = db.connect(path, read_only=not write)
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run(con, query, write=False):
    """The result of the last statement of query, as a pyarrow RecordBatchReader (its
    rows written as they come: a query may return every event of a 10 GB trace), or
    None for a statement without one; SqlError with DuckDB's whole message on one
    line (its hints kept), also when met while reading."""
    if not query.strip() or not db.statements(query):
        raise SqlError("empty query: give SQL, e.g. tracedb sql 'SELECT run, kind FROM runs' --db DB")
    try:
        rel = con.sql(query)
        if rel is None:                   # a statement without a result (CREATE, INSERT ...)
            return None
        reader = rel.to_arrow_reader(65536)
    except duckdb.Error as e:
        raise SqlError(_explain(e, write)) from None

    def mapped():
        try:
            yield from db.read_batches(reader)
        except duckdb.Error as e:
            raise SqlError(_explain(e, write)) from None
    return pa.RecordBatchReader.from_batches(reader.schema, mapped())


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
