"""TensorFlow/JAX `.xplane.pb` profiles: converted to trace_viewer JSON through xprof."""
import os

from .errors import IngestError
from .names import run_name_for
from .trace import TraceReader


def to_trace_json(path, out_dir):
    """Write the trace_viewer JSON of an .xplane.pb into out_dir; return its path."""
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        raise IngestError(path, ".xplane.pb needs xprof to convert it: pip install 'tracedb[tf]' "
                                "(or export the trace_viewer JSON and ingest that)") from None
    try:
        data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "trace_viewer", {})
    except Exception as e:  # xprof raises many types for a bad protobuf
        raise IngestError(path, f"xprof could not convert it ({e})") from None
    out = os.path.join(out_dir, os.path.basename(str(path)).replace(".xplane.pb", ".json"))
    with open(out, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return out


class XplaneReader(TraceReader):
    """TensorFlow/JAX .xplane.pb: converted to trace_viewer JSON, then read as a trace."""

    def sniff(self, path, text):
        return "xplane" if path.endswith(".xplane.pb") else None

    def run_name(self, path):
        return run_name_for(path[:-len(".xplane.pb")])

    def prepare(self, con, path, fmt, work, options):
        return super().prepare(con, to_trace_json(path, work), fmt, work, options)
