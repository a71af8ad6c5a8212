"""Load an Nsight Compute report (CSV export or .ncu-rep) as one run.

reader (ncu_csv / ncu_rep) -> temp tables of text values -> schema/load_ncu.sql
-> counters (every metric, base units) and kernels (one row per profiled launch).
"""
import json
import re
import warnings

from ..store.db import sql_text
from ..store.sql import rows, run_script, scalar
from . import ncu_csv, ncu_rep
from .errors import IngestError
from .reader import Prepared, Reader


class Report:
    """A parsed report waiting in temp tables for its run name."""

    def __init__(self, path, form, notes=()):
        self.path, self.form, self.notes = path, form, list(notes)


class NcuCsvReader(Reader):
    """Nsight Compute CSV exports (--page raw or --page details)."""
    kind = "ncu"
    pairs = True
    noun = "kernels"
    pairing_tables = ("matches", "match_runs")
    pairing_column = "ncu_run"

    def sniff(self, path, text):
        t = text()
        if "==PROF==" in t or re.search(r'^"ID","Process ID"', t, re.M) or \
                re.search(r'"Kernel Name".*"Metric Name"', t) or \
                any(ncu_csv.is_header(line.encode()) for line in t.splitlines()[:50]):
            return "ncu-csv"
        return None

    def prepare(self, con, path, fmt, work, options):
        cc, digest = ncu_csv.load(con, path, work)
        if cc.truncated:
            cc.notes.append("last line cut off and dropped")
        return Prepared(fmt, cc.content_bytes, lambda: digest, state=Report(path, cc.form, cc.notes))

    def load(self, con, prep, run):
        return load(con, prep.state, run)

    def summary(self, con, run):
        k, m = rows(con, "SELECT (SELECT count(*) FROM kernels WHERE run = $r), "
                         "(SELECT count(DISTINCT metric) FROM counters WHERE run = $r)", {"r": run})[0]
        return f"ncu: {k} kernels, {m} metrics"

    def pair(self, con, run, trace_run, options):
        from .match import match_in_transaction
        return match_in_transaction(con, trace_run, run, iteration=options.get("iteration"),
                                    force=bool(options.get("force_pair")))

    def candidates(self, con, run, pool):
        """The traces on the report's device."""
        found = rows(con, """SELECT t.run FROM runs t, runs n
                             WHERE n.run = $run AND t.run IN (SELECT unnest($pool))
                               AND t.device_name IS NOT NULL AND t.device_name = n.device_name
                             ORDER BY t.run""", {"run": run, "pool": pool})
        return [r[0] for r in found], "same device"

    def paired_note(self, con, trace):
        got = rows(con, "SELECT ncu_run FROM match_runs WHERE trace_run = ? ORDER BY matched_at, ncu_run", [trace])
        used = rows(con, "SELECT ncu_run FROM trace_ncu_pairs WHERE run = ?", [trace])
        if len(got) > 1:
            return (f"note: trace {trace} has {len(got)} ncu runs paired ({', '.join(r[0] for r in got)}); "
                    f"the utilization reports use {used[0][0] if used else '?'}, the last matched")
        return None


class NcuRepReader(NcuCsvReader):
    """Nsight Compute .ncu-rep reports, through NVIDIA's ncu_report module."""

    def sniff(self, path, text):
        return "ncu-rep" if path.endswith(".ncu-rep") else None

    def prepare(self, con, path, fmt, work, options):
        form, digest, size = ncu_rep.load(con, path, work)
        return Prepared(fmt, size, lambda: digest, state=Report(path, form))


def load(con, prep, run):
    """Insert the prepared report under `run` (the caller owns the transaction)."""
    n = scalar(con, "SELECT count(*) FROM _ncu_identity")
    if not n:
        raise IngestError(prep.path, "the report holds no profiled kernels")
    run_script(con, sql_text("schema", "load/ncu.sql"), {"run": run})
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
    if bad:
        warnings.warn(f"{prep.path}: {bad} values with a unit are not numbers; kept as text (counters.text_value)")
    ncu_csv.drop(con)
    return {
        "framework": "ncu",
        "device_name": device.get("display_name"),
        "device_properties": json.dumps(device) if device else None,
        "metadata": json.dumps({"form": prep.form, "process_ids": meta[0], "process_names": meta[1],
                                "hosts": meta[2], "compute_capability": meta[3], "notes": notes}),
        "n_events": n,
    }
