"""The one error type a user sees for bad input: it names the file and what is wrong."""
from ..errors import TracedbError


class IngestError(TracedbError):
    def __init__(self, path, message):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.reason = message


def database_error(error):
    """What a DuckDB error while loading says: its first line, and what to do where
    the cause is the machine's (a full disk, a file size limit)."""
    msg = str(error).splitlines()[0]
    hint = ("; free space where the database is" if "No space left" in msg else
            "; a file size limit (ulimit -f) stopped a write of the database" if "File too large" in msg else "")
    return f"database error while loading ({msg}){hint}"
