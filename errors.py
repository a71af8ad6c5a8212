"""The one base of every error a user sees: the command line prints its message as
one line (`tracedb: error: ...`) and exits 1; anything else is a bug of ours.

Each layer raises its own subclass (IngestError names the file, ReportError the
report), so callers can catch one layer's errors, or all of them here."""


class TracedbError(Exception):
    """A request tracedb cannot carry out, said in one line for the user."""
