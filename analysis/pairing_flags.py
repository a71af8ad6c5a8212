"""Findings read from a pairing kept by --force are flagged.

A pairing whose matched kernels disagree in name beyond match.MAX_NAME_MISMATCH_PCT is
refused unless forced; the utilization reports use a forced one only when no sound
pairing is left (trace_ncu_pairs). A finding whose rule reads ncu counters then says so
in its evidence, so nobody acts on another workload's counters unawares."""
from ..store.sql import rows
from ..ingest.match import MAX_NAME_MISMATCH_PCT

NCU_RULES = {"no_tensor_cores", "low_issue_efficiency", "unmatched_kernels"}


def flag(con, findings):
    """The findings, those of NCU_RULES on a run whose counters come from a forced pairing
    with their evidence prefixed."""
    try:
        forced = {r: (n, p) for r, n, p in rows(con, "SELECT run, ncu_run, name_mismatch_pct FROM trace_ncu_pairs "
                                                     "WHERE name_mismatch_pct > ?", [MAX_NAME_MISMATCH_PCT])}
    except Exception:       # a database without the view (older schema): nothing to flag
        return findings
    for f in findings:
        if f["rule"] in NCU_RULES and f.get("run") in forced and f["severity"] not in ("skipped",):
            ncu, pct = forced[f["run"]]
            f["evidence"] = (f"[FORCED pairing with {ncu}: {pct:.1f}% of its matched kernels have another "
                             f"name; these counters may be another workload's] {f['evidence']}")
    return findings
