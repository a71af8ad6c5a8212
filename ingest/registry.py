"""The readers of input formats, and the one loop that picks a file's reader.

Every reader has the same shape (class Reader): `sniff` recognizes a file
from its name and first bytes and names its format; `prepare` parses it into
temp tables and returns a Prepared (format, size, content digest); `load`
writes the run inside the caller's transaction; `pair` (readers of ncu reports
and power logs) links the run to a trace run in the same transaction.

READERS is tried in order, first match wins, in the manner of sqlglot's rule
tuples: to support a new format, write a Reader and add it here.
"""
import re
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

from tracedb.ingest.errors import IngestError
from tracedb.ingest.source import head

KINDS = ("trace", "ncu", "power", "host", "calibration")     # runs.kind


@dataclass
class Prepared:
    """A parsed file waiting (in temp tables, or as pieces on disk) for its run name."""
    format: str                      # source format, kept as runs.metadata.source_format
    content_bytes: int               # size of the decompressed content
    digest: Callable[[], str]        # sha256 hex of the content (may wait for a hashing thread)
    digest_ready: bool = True        # False: the hash is still computing (no run of this size exists)
    state: object = None             # what the reader's load needs
    notes: list = field(default_factory=list)


class Reader:
    kind = None            # runs.kind of what it loads
    pairs = False          # it can pair its run with a trace run (--pair-with)

    def sniff(self, path, text):
        """The format name when this reader reads the file, else None. text() gives
        the first 64 KiB of the decompressed content as text (read on first call)."""
        raise NotImplementedError

    def run_name(self, path):
        from tracedb.ingest import run_name_for
        return run_name_for(path)

    def prepare(self, con, path, fmt, work, options):
        raise NotImplementedError

    def loading(self, con, prep):
        """A context around the load's transaction (settings to restore after a rollback)."""
        return nullcontext()

    def load(self, con, prep, run):
        """Write the run (the caller owns the transaction and registers it); returns
        the runs row's fields. May raise Reload: the caller rolls back, calls
        reload(prep) and loads again."""
        raise NotImplementedError

    def reload(self, prep, work):
        raise NotImplementedError

    def pair(self, con, run, trace_run, options):
        """Pair the run with trace_run (same transaction); returns what to tell the user."""
        raise NotImplementedError


class Reload(Exception):
    """The fast path of a load cannot read this file: roll back and load again."""


def _readers():
    from tracedb.ingest.calibration import CalibrationReader
    from tracedb.ingest.host import HostReader
    from tracedb.ingest.ncu import NcuCsvReader, NcuRepReader
    from tracedb.ingest.power import PowerReader
    from tracedb.ingest.trace import TraceReader
    from tracedb.ingest.xplane import XplaneReader
    return (XplaneReader(), NcuRepReader(), CalibrationReader(), TraceReader(), NcuCsvReader(), HostReader(),
            PowerReader())


READERS = None


def readers():
    global READERS
    if READERS is None:
        READERS = _readers()
    return READERS


def detect(path):
    """(reader, format) of the file, or IngestError. From its first bytes (and a
    few unmistakable suffixes), never from its name alone."""
    cache = {}

    def text():
        if "t" not in cache:
            data = head(path)
            if not data.strip():
                raise IngestError(path, "file is empty")
            refuse_not_utf8(path, data)
            cache["t"] = data.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
        return cache["t"]

    for reader in readers():
        fmt = reader.sniff(str(path), text)
        if fmt:
            return reader, fmt
    known = known_other(text())
    if known:
        raise IngestError(path, known)
    if text()[:1] in "{[":
        if (depth := _nesting(text())) > 1000:        # traceEvents may lie beyond what was sniffed
            raise IngestError(path, f"JSON nested {depth} levels deep in its first "
                                    f"{len(text()) >> 10} KB, before any traceEvents: not a trace tracedb reads "
                                    "(a trace's members nest a few levels)")
        raise IngestError(path, "unknown JSON: neither a trace (no traceEvents) nor cuda_bench output")
    raise IngestError(path, "unknown format: not a trace, ncu report, power log or calibration output")


def _nesting(t):
    """The deepest nesting of arrays and objects in JSON text t (strings skipped)."""
    import re
    depth = top = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', t):
        c = m[0]
        if c in "[{":
            depth += 1
            top = max(top, depth)
        elif c in "]}":
            depth -= 1
    return top


def refuse_not_utf8(path, data):
    """IngestError for content that is not UTF-8 text in a way we can name."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(data) >= 4 and data[1:4:2] == b"\x00\x00") \
            or (len(data) >= 4 and data[0:3:2] == b"\x00\x00"):
        raise IngestError(path, "UTF-16 text: tracedb reads UTF-8 "
                                "(convert it: iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8)")
    if data[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"):
        raise IngestError(path, "a Python pickle (a torch.cuda.memory snapshot?), not a profile tracedb "
                                "reads: export a Chrome trace (export_chrome_trace)")


# Profiler outputs that look like traces but are not: what they are, and what to export instead.
_EXPORT = "export a Kineto trace with prof.export_chrome_trace(...) or on_trace_ready=tensorboard_trace_handler"


def known_other(t):
    """A message naming the format of a JSON/HTML file that is not a trace, or None."""
    if t[:1] == "{" and '"nodes"' in t and ('"schema"' in t or '"finish_ts"' in t or '"start_ts"' in t):
        return f"a PyTorch execution trace (ExecutionTraceObserver), not a timed trace: {_EXPORT}"
    if re.match(r"\[\s*\[", t):
        return ("a JSON array of arrays (a PyTorch memory timeline from export_memory_timeline?), "
                f"not a trace: {_EXPORT}")
    if t[:1] == "[":
        return "a JSON array whose elements are not trace events (no \"ph\" field): not a Chrome trace"
    if t[:5].lower() in ("<!doc", "<html"):
        return f"an HTML page (a memory timeline from export_memory_timeline?), not a trace: {_EXPORT}"
    return None


def first_line(text):
    t = text()
    return t.splitlines()[0] if t else ""


def looks_like_json(text, *needles):
    t = text()
    return t[:1] in "{[" and (not needles or any(n in t for n in needles) or bool(re.match(r"\[\s*(\{|\])", t)))
