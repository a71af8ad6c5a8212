"""Which kind of source a file is, from its first bytes (never from its name alone)."""
import re

from tracedb.ingest.errors import IngestError
from tracedb.ingest.source import head

KINDS = ("trace", "ncu", "power", "calibration")


def detect(path):
    """'trace' | 'ncu' | 'power' | 'calibration' | 'xplane', or IngestError."""
    if str(path).endswith(".xplane.pb"):
        return "xplane"
    if str(path).endswith(".ncu-rep"):
        return "ncu-rep"
    data = head(path)
    if not data.strip():
        raise IngestError(path, "file is empty")
    text = data.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if text[:1] in "{[":
        if '"traceEvents"' in text or re.match(r'\[\s*(\{|\])', text):
            if '"cuda_bench"' in text[:4096]:
                return "calibration"
            return "trace"
        if '"cuda_bench"' in text[:4096]:
            return "calibration"
        raise IngestError(path, "unknown JSON: neither a trace (no traceEvents) nor cuda_bench output")
    if "==PROF==" in text or re.search(r'^"ID","Process ID"', text, re.M) or \
            re.search(r'"Kernel Name".*"Metric Name"', text):
        return "ncu"
    first = text.splitlines()[0].lower() if text else ""
    if "power" in first and ("timestamp" in first or "index" in first or "#entity" in first):
        return "power"
    if re.match(r"^\s*\d{4}/\d\d/\d\d \d\d:\d\d:\d\d", first):
        return "power"          # nvidia-smi --format=csv,noheader
    if first.startswith("#entity") or "dcgm" in first:
        return "power"
    if "level" in first and "energy_j" in first:
        return "calibration"
    raise IngestError(path, "unknown format: not a trace, ncu report, power log or calibration output")
