"""Findings read from a pairing kept by --force are flagged.

A pairing whose matched kernels disagree in name beyond match.MAX_NAME_MISMATCH_PCT is
refused unless forced. A finding whose rule reads ncu counters through a forced
pairing says so at the head of its evidence, by the rule every report follows
(query/pairing_caveat.py: what the rule's SQL reads, followed through the views and
the reports it reads), so nobody acts on another workload's counters unawares."""
from ..query import pairing_caveat, reports


def flag(con, findings, rules):
    """The findings, those whose rule (rules: name -> advise.Rule) reads a forced
    pairing's counters for their run with their evidence prefixed."""
    if not pairing_caveat.forced(con, "all"):    # the common case: no forced pairing at all
        return findings
    bodies = {name: r.body for name, r in reports.all_reports().items()}
    said = {}
    for f in findings:
        rule = rules.get(f["rule"])
        if rule is None or f["severity"] == "skipped":
            continue
        key = (f["rule"], f.get("run"))
        if key not in said:
            try:
                kind = pairing_caveat.kind_of_sql(con, rule.sql, bodies)
            except Exception:       # a connection that cannot list its views: nothing to flag
                kind = None
            said[key] = pairing_caveat.text(pairing_caveat.forced(con, kind, f.get("run")))
        if said[key]:
            f["evidence"] = f"[{said[key]}] {f['evidence']}"
    return findings
