"""Load an Nsight Compute report (CSV export or .ncu-rep) as one run.

reader (ncu_csv / ncu_rep) -> temp tables of text values -> schema/load_ncu.sql
-> counters (every metric, base units) and kernels (one row per profiled launch).
"""
import json

from tracedb.db import rows, run_script, scalar, sql_text
from tracedb.ingest import ncu_csv, ncu_rep
from tracedb.ingest.errors import IngestError


class Prepared:
    """A parsed report waiting in temp tables for its run name."""

    def __init__(self, path, form, digest, size, notes=()):
        self.path, self.form, self.digest, self.content_bytes = path, form, digest, size
        self.notes = list(notes)


def prepare(con, path, kind, work):
    if kind == "ncu-rep":
        form, digest, size = ncu_rep.load(con, path, work)
        return Prepared(path, form, digest, size)
    cc, digest = ncu_csv.load(con, path, work)
    if cc.truncated:
        cc.notes.append("last line cut off and dropped")
    return Prepared(path, cc.form, digest, cc.content_bytes, cc.notes)


def load(con, prep, run):
    """Insert the prepared report under `run` (the caller owns the transaction)."""
    n = scalar(con, "SELECT count(*) FROM _ncu_identity")
    if not n:
        raise IngestError(prep.path, "the report holds no profiled kernels")
    run_script(con, sql_text("schema", "load_ncu.sql"), {"run": run})
    bad = scalar(con, "SELECT count(*) FROM counters WHERE run = ? AND text_value IS NOT NULL "
                      "AND lower(text_value) <> 'n/a' AND unit IS NOT NULL", [run])
    device = dict(rows(con, """SELECT replace(metric, 'device__attribute_', ''),
                                      coalesce(CAST(ncu_number(value_text) * ncu_unit_factor(unit) AS VARCHAR), value_text)
                               FROM _ncu_device_values ORDER BY 1"""))
    meta = rows(con, """SELECT list(DISTINCT process_id ORDER BY process_id),
                               list(DISTINCT process_name ORDER BY process_name),
                               list(DISTINCT host_name ORDER BY host_name),
                               any_value(cc) FROM _ncu_identity""")[0]
    notes = prep.notes + ([f"{bad} values with a unit were not numbers (kept as text_value)"] if bad else [])
    ncu_csv.drop(con)
    return {
        "framework": "ncu",
        "device_name": device.get("display_name"),
        "device_properties": json.dumps(device) if device else None,
        "metadata": json.dumps({"form": prep.form, "process_ids": meta[0], "process_names": meta[1],
                                "hosts": meta[2], "compute_capability": meta[3], "notes": notes}),
        "n_events": n,
    }
