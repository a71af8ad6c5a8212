"""The readers of input formats, and the one loop that picks a file's reader.

Every reader has the same shape (ingest/reader.py) and carries every fact about its
kind. READERS is tried in order, first match wins, in the manner of sqlglot's rule
tuples and Perfetto's builtin importers: to support a new format, write a Reader in
its own module and add it here.
"""
import re

from .calibration import CalibrationReader
from .errors import IngestError
from .host import HostReader
from .ncu import NcuCsvReader, NcuRepReader
from .nsys import NsysReader
from .power import PowerReader
from .source import head
from .trace import TraceReader
from .xplane import XplaneReader

KINDS = ("trace", "ncu", "power", "host", "calibration")     # runs.kind

# Tried in order, first match wins (a .ncu-rep by its suffix before any text is
# read, an Nsight Systems SQLite export by its header; JSON traces before CSVs): to read a new format, write a Reader and add it here.
READERS = (NsysReader(), XplaneReader(), NcuRepReader(), CalibrationReader(), TraceReader(), NcuCsvReader(), HostReader(),
           PowerReader())


def readers():
    return READERS


def reader_of_kind(kind):
    """The (first) reader of runs of that kind."""
    return next(r for r in READERS if r.kind == kind)


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
