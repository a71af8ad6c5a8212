""".ncu-rep reports through NVIDIA's `ncu_report` module -> the same temp tables as CSV.

The module ships with Nsight Compute (extras/python), not on PyPI. It gives
values in base units already, with the unit of each metric.
"""
import glob
import hashlib
import os
import shutil
import sys

import pyarrow as pa

from tracedb.ingest.errors import IngestError

SEARCH = ("/opt/nvidia/nsight-compute/*/extras/python",
          "/usr/local/cuda*/nsight-compute*/extras/python")


def import_ncu_report():
    """The ncu_report module, from sys.path, next to `ncu` on PATH, or the usual install places."""
    try:
        import ncu_report
        return ncu_report
    except ImportError:
        pass
    places = []
    ncu = shutil.which("ncu")
    if ncu:
        real = os.path.realpath(ncu)
        places += [os.path.join(os.path.dirname(real), "extras", "python")]
        places += glob.glob(os.path.join(os.path.dirname(os.path.dirname(real)), "nsight-compute*",
                                         "extras", "python"))
    for pattern in SEARCH:
        places += sorted(glob.glob(pattern), reverse=True)
    for p in places:
        if os.path.exists(os.path.join(p, "ncu_report.py")):
            sys.path.insert(0, p)
            try:
                import ncu_report
                return ncu_report
            except ImportError:
                sys.path.remove(p)
    return None


def _value_text(m, nr):
    if not m.has_value():
        return None
    kind = m.kind()
    if kind == nr.IMetric.ValueKind_STRING:
        return m.as_string()
    if kind in (nr.IMetric.ValueKind_UINT32, nr.IMetric.ValueKind_UINT64):
        return str(m.as_uint64())
    return repr(m.as_double())


def load(con, path, work):
    """Read a .ncu-rep into _ncu_identity and _ncu_values. Returns (form, hexdigest, bytes)."""
    nr = import_ncu_report()
    if nr is None:
        raise IngestError(path, ".ncu-rep files are read through NVIDIA's ncu_report module (it ships "
                                "with Nsight Compute in extras/python), which is not importable here: "
                                "export CSV with `ncu --import FILE --csv --page raw > FILE.csv` "
                                "and ingest that")
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
            size += len(chunk)
    try:
        ctx = nr.load_report(path)
    except Exception as e:  # noqa: BLE001  (the module raises plain exceptions)
        raise IngestError(path, f"ncu_report cannot read it ({e})") from None
    ident = {k: [] for k in ("kernel_id", "name", "context", "stream", "block_size", "grid_size",
                             "device")}
    vals = {"kernel_id": [], "metric": [], "unit": [], "value_text": []}
    kid = 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            act = rng.action_by_idx(a)
            metrics = {}
            for name in act.metric_names():
                if name.startswith("regex:"):
                    continue
                m = act.metric_by_name(name)
                text = _value_text(m, nr)
                metrics[name] = text
                vals["kernel_id"].append(kid)
                vals["metric"].append(name)
                vals["unit"].append(m.unit() or None)
                vals["value_text"].append(text)
            dims = lambda p: "({}, {}, {})".format(*(metrics.get(f"launch__{p}_dim_{c}") or "1" for c in "xyz"))
            ident["kernel_id"].append(kid)
            ident["name"].append(act.name(nr.IAction.NameBase_DEMANGLED))
            ident["context"].append(metrics.get("launch__context_id"))
            ident["stream"].append(metrics.get("launch__stream_id"))
            ident["device"].append(metrics.get("launch__device_id"))
            ident["block_size"].append(dims("block"))
            ident["grid_size"].append(dims("grid"))
            kid += 1
    if kid == 0:
        raise IngestError(path, "the report holds no profiled kernels")
    identity = pa.table({k: pa.array(v, pa.int64() if k == "kernel_id" else pa.string())
                         for k, v in ident.items()})
    values = pa.table({k: pa.array(v, pa.int64() if k == "kernel_id" else pa.string())
                       for k, v in vals.items()})
    con.register("_ncu_identity_arrow", identity)
    con.register("_ncu_values_arrow", values)
    con.execute("""CREATE OR REPLACE TEMP TABLE _ncu_identity AS
        SELECT kernel_id, NULL::VARCHAR AS process_id, NULL::VARCHAR AS process_name,
               NULL::VARCHAR AS host_name, name, context, stream, block_size, grid_size, device,
               NULL::VARCHAR AS cc FROM _ncu_identity_arrow""")
    con.execute("CREATE OR REPLACE TEMP TABLE _ncu_values AS SELECT * FROM _ncu_values_arrow")
    con.execute("""CREATE OR REPLACE TEMP TABLE _ncu_device_values AS
        SELECT metric, unit, value_text FROM _ncu_values
        WHERE metric LIKE 'device__attribute_%' AND kernel_id = 0""")
    con.unregister("_ncu_identity_arrow")
    con.unregister("_ncu_values_arrow")
    return "ncu-rep", h.hexdigest(), size
