"""The one error type a user sees for bad input: it names the file and what is wrong."""
import duckdb

from ..errors import TracedbError


class IngestError(TracedbError):
    def __init__(self, path, message):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.reason = message


def database_error(error):
    """What a DuckDB error while loading says: its first line, and what to do where
    the cause is the machine's (a full disk, a file size limit)."""
    msg = str(_first_error(error)).splitlines()[0]
    hint = ("; free space where the database is" if "No space left" in msg else
            "; a file size limit (ulimit -f) stopped a write of the database" if "File too large" in msg else "")
    return f"database error while loading ({msg}){hint}"


def _first_error(error):
    """The error that aborted the transaction, where error is DuckDB's "Current
    transaction is aborted" of a statement after it (a cleanup, or the next statement
    of the load): the first error in the chain the exception was raised in (an out of
    memory, a constraint) that is not that one; else error itself."""
    seen, e = set(), error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, duckdb.Error) and "transaction is aborted" not in str(e):
            return e
        e = e.__cause__ or e.__context__
    return error
