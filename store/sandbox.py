"""Connections that run SQL from elsewhere (a user's, a saved report's over the
views of a database made by someone else) with no reach outside the database.

`lock` turns DuckDB's external access off and locks the configuration, as
`tracedb sql` always did, and first moves DuckDB's temp directory (which stays
readable and writable with external access off) from `<db>.tmp/` beside the
database, where a link planted by someone else could point anywhere, to a new
private folder of this process (mode 0700, removed at exit). A stored view of the
database that reads a file (read_text, read_csv ...) then fails with DuckDB's
Permission Error instead of putting that file's content in a report.
"""
import atexit
import shutil
import tempfile

from .sql import sql_literal

_SPILL = []


def spill_dir():
    """This process's private folder for DuckDB's temp files (made once)."""
    if not _SPILL:
        d = tempfile.mkdtemp(prefix="tracedb-spill-")        # 0700, a fresh name
        atexit.register(shutil.rmtree, d, True)
        _SPILL.append(d)
    return _SPILL[0]


def external_off(con):
    """con with DuckDB's external access off (where it is on: another connection of the
    process may have locked the configuration with it off)."""
    if con.execute("SELECT current_setting('enable_external_access')").fetchall()[0][0]:
        con.execute("SET enable_external_access = false")
    return con


def lock(con):
    """con with external access off, its temp directory private, the configuration locked
    (already so where another connection of this process to the same file locked it:
    DuckDB shares one instance, and its settings, between them)."""
    locked, external = con.execute("SELECT current_setting('lock_configuration'), "
                                   "current_setting('enable_external_access')").fetchall()[0]
    if not locked:
        if external:                # (off already: its temp directory was moved before it was turned off)
            con.execute(f"SET temp_directory = {sql_literal(spill_dir())}")
            con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con
