"""TensorFlow/JAX `.xplane.pb` profiles: converted to trace_viewer JSON through xprof."""
import os
import tempfile

from tracedb.ingest.errors import IngestError


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


def ingest(con, path, run, ingest_json):
    """Convert, then ingest the JSON as the run named after the .xplane.pb file."""
    from tracedb.ingest import run_name_for
    with tempfile.TemporaryDirectory(prefix="tracedb-xplane-") as d:
        return ingest_json(to_trace_json(path, d), run or run_name_for(str(path).replace(".xplane.pb", "")))
