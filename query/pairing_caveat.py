"""The caveat of a report (or a finding rule) that reads ncu counters through a pairing
kept by --force.

A pairing whose matched kernels disagree in name beyond 20% is refused unless forced
(ingest/match.py); kept by force, its counters may be another workload's. Whatever
reads them says so, by one rule instead of a flag per report: the relations a SQL
text reads (FROM / JOIN), followed through the database's views and table macros
and the saved reports a rule reads (report_NAME), reach the pairings (`matches`).
Reached only through trace_ncu_pairs (the sound pairing where there is one), the
caveat names the forced pairings the reports use; reached otherwise (kernel_metrics
reads every pairing), every forced pairing of the runs asked for.

reports.run puts the caveat in the result's schema metadata (CAVEAT_KEY); the CLI
prints it, the HTML report shows it under the section, the findings prefix it to
the evidence (analysis/pairing_flags.py)."""
import re

import duckdb

from ..store.sql import rows

CAVEAT_KEY = b"tracedb.caveat"
PAIRINGS = "matches"            # the table of matched kernels: every counter view reads it
GATE = "trace_ncu_pairs"        # the one pairing per trace run the utilization reports use
# FROM / JOIN, then (as DuckDB writes a view back) opening parentheses and a quote
_READ = re.compile(r'\b(?:FROM|JOIN)[\s(]+"?([A-Za-z_][A-Za-z0-9_]*)"?(?!\s*\()', re.IGNORECASE)
_NOT_RELATIONS = {"select", "with", "values", "lateral", "unnest"}
_MACRO = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def relations(sql):
    """Names a SQL text reads after FROM or JOIN (table functions left out), lower case."""
    body = "\n".join(l.split("--", 1)[0] for l in sql.splitlines())
    return {m.lower() for m in _READ.findall(body)} - _NOT_RELATIONS


class _Graph:
    """What each view, table macro and saved report of a database reads."""

    def __init__(self, con):
        macros = {name.lower(): body or "" for name, body in rows(
            con, "SELECT function_name, any_value(macro_definition) FROM duckdb_functions() "
                 "WHERE function_type = 'table_macro' AND NOT internal GROUP BY 1")}
        self.macros = set(macros)
        self.reads = {name: self._reads_of_text(body) for name, body in macros.items()}
        for name, sql in rows(con, "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal"):
            self.reads[name.lower()] = self._reads_of_text(sql or "")
        self.memo = {}
        self.report_bodies = {}     # saved report name -> SQL, for the report_NAME a rule reads

    def _reads_of_text(self, sql):
        out = relations(sql)
        out |= {m.lower() for m in _MACRO.findall(sql) if m.lower() in self.macros}
        return out

    def kind(self, name, reads=None, seen=frozenset()):
        """None: reads no counters; 'gated': only through trace_ncu_pairs; 'all': some
        other way (every pairing)."""
        if reads is None:
            if name in self.memo:
                return self.memo[name]
            if name.startswith("report_"):           # a rule reads a saved report's rows
                body = self.report_bodies.get(name[len("report_"):])
                reads = self._reads_of_text(body) if body else set()
            else:
                reads = self.reads.get(name, set())
        if PAIRINGS in reads and GATE not in reads:
            got = "all"
        else:
            kinds = {self.kind(r, seen=seen | {name}) for r in reads - seen - {name, PAIRINGS, GATE}}
            if "all" in kinds and GATE not in reads:
                got = "all"
            elif kinds & {"all", "gated"} or PAIRINGS in reads:
                got = "gated"
            else:
                got = None
        if name:
            self.memo[name] = got
        return got


_GRAPH = []     # built once: the views are tracedb's own, the same in every database it opens


def kind_of_sql(con, sql, report_bodies=None):
    """How a SQL text reads ncu counters: None, 'gated' or 'all' (see _Graph.kind);
    report_bodies: the saved reports' SQL by name, for a rule's report_NAME relations."""
    if not _GRAPH:
        _GRAPH.append(_Graph(con))
    g = _GRAPH[0]
    if report_bodies and not g.report_bodies:
        g.report_bodies = dict(report_bodies)
    if sql not in g.memo:
        g.memo[sql] = g.kind("", g._reads_of_text(sql))
    return g.memo[sql]


def forced(con, kind, run=None, ncu_run=None):
    """(trace_run, ncu_run, name_mismatch_pct, in_use) of the forced pairings a reader of
    that kind reads, for run (every run when None)."""
    if kind is None:
        return []
    try:
        return rows(con, "SELECT trace_run, ncu_run, name_mismatch_pct, in_use FROM ncu_pairings "
                         "WHERE forced AND ($run IS NULL OR trace_run = $run) "
                         "AND ($ncu IS NULL OR ncu_run = $ncu) AND ($all OR in_use) ORDER BY trace_run, ncu_run",
                    {"run": run, "ncu": ncu_run, "all": kind == "all"})
    except duckdb.Error:    # a database of an older schema (no ncu_pairings): nothing to say
        return []


def text(pairings):
    """One sentence about the forced pairings, or None."""
    if not pairings:
        return None
    said = "; ".join(f"ncu run {n} is paired with {t} by --force ({p:.1f}% of its matched kernels have "
                     f"another name{'' if used else '; not the pairing the utilization reports use'})"
                     for t, n, p, used in pairings)
    return f"FORCED pairing: {said}: these counters may be another workload's"


def caveat(con, report, values):
    """The caveat of a saved report run with values, or None."""
    run, ncu = values.get("run"), values.get("ncu_run")
    if not forced(con, "all", run, ncu):         # the common case: no forced pairing to speak of
        return None
    try:
        kind = kind_of_sql(con, report.body)
    except duckdb.Error:        # a connection that cannot list its views: no caveat, the report runs
        return None
    return text(forced(con, kind, run, ncu))
