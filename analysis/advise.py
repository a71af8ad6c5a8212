"""Findings: what is wrong with a run, with the numbers that show it.

Rules are data: one SQL file each in rules/, with a header that documents it

    -- rule: host_bound
    -- description: what it detects and what its value is
    -- threshold: 30                  default threshold (--threshold host_bound=20 replaces it)
    -- unit: % of the iteration       unit of the value and the threshold
    -- fires: above                   above: value > threshold fires; below: value < threshold
    -- severity: high                 high | medium | low
    -- next: launch_queue             the report to read next
    -- steady: run                    (optional) $iteration is read only as finding_iterations'
                                      it_p: evaluate binds the steady one's number
    -- requires:
    --   kernels.launch_end_ns: what it is, for the user
    -- suggestion: what to try

and a query returning (run, iteration, value DOUBLE, evidence VARCHAR[, severity
VARCHAR: high | medium | low, which replaces the header's where the value fires]) that reads
$run and $iteration (NULL: the steady iteration, or every iteration when $every is
true: a rule passes it on as finding_iterations($run, $iteration, every_p := $every,
stored := $stored), and a report_NAME then holds every iteration's rows). $stored is
true when every iteration of a run is asked for and an ingest with --op-totals stored
the run's per-iteration sums (finding_stored_runs): the rules that sweep kernels or
events read them instead (finding_stored, schema/views/findings.sql). A requirement is a relation,
optionally with a column, that must hold (non-NULL) rows for the run; a relation
`report_NAME` is the output of saved report NAME for the run and iteration, so rules
build on the reports' definitions instead of repeating them. A rule whose data is
absent (relation, column, report, or rows) is skipped and listed as skipped with
what it needs; it is never evaluated on a guess.
"""
import contextlib
import math
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from ..query import reports
from ..store import header
from ..store.catalog import parsed_sql, run_column
from ..store.sql import bind, rows, scalar
from ..query.reports import ReportError

SEVERITIES = ("high", "medium", "low")
ORDER = {"high": 0, "medium": 1, "low": 2, "skipped": 3, "ok": 4}
# Parameters of the findings report that this module reads (not its SQL).
PARAMS = {"thresholds", "iteration"}
COLUMNS = ["run", "iteration", "rule", "severity", "value", "threshold", "unit", "evidence", "suggestion",
           "next_report", "ord"]


@dataclass
class Rule:
    name: str
    description: str
    threshold: float
    unit: str
    fires: str                  # above | below
    severity: str
    next_report: str
    suggestion: str
    sql: str
    requires: list = field(default_factory=list)   # (relation, column or None, what it is)
    steady: str = None          # run: its $iteration NULL stands for the run's steady iteration

    def fired(self, value, threshold):
        return value > threshold if self.fires == "above" else value < threshold


_RULE_KEYS = {"rule", "description", "threshold", "unit", "fires", "severity", "next", "requires", "suggestion",
              "steady"}


def parse(text, fallback):
    """A rule of its header (store/header.py, the grammar of every .sql file) and SQL."""
    h = header.parse(text)
    problems = h.problems + [f"header key {k!r} is not a rule's" for k in h.values if k not in _RULE_KEYS]
    missing = {"description", "threshold", "unit", "fires", "severity", "next", "suggestion"} - set(h.values)
    if missing:
        problems.append(f"header lacks {', '.join(sorted(missing))}")
    elif h.get("fires") not in ("above", "below") or h.get("severity") not in SEVERITIES:
        problems.append(f"fires must be above|below and severity one of {SEVERITIES}")
    if h.get("steady") not in (None, "run"):
        problems.append("steady must be run")
    if problems:
        raise ValueError(f"rule {fallback}: {'; '.join(problems)}")
    return Rule(h.get("rule") or fallback, h.get("description"), float(h.get("threshold")), h.get("unit"),
                h.get("fires"), h.get("severity"), h.get("next"), h.get("suggestion"), text, h.requires(),
                h.get("steady"))


def all_rules():
    """Every rule in rules/, by name."""
    return parsed_sql("rules", parse)


def parse_thresholds(text):
    """'host_bound=20,tiny_kernels=50' -> {rule: float}, names checked."""
    known, out = all_rules(), {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, value = part.partition("=")
        if not sep or name.strip() not in known:
            raise ReportError(f"thresholds: {part!r} is not RULE=NUMBER with a rule of: {', '.join(known)}")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):          # nan and inf parse as floats, but compare with nothing
            raise ReportError(f"thresholds: {part!r}: {value!r} is not a number")
        out[name.strip()] = number
    return out


def _report_params(report, run, iteration):
    """The report's parameters for a rule's run and iteration ("all": every
    iteration, where the report's iteration parameter takes all; one whose
    iteration is a number gives every iteration when it is left out)."""
    out = {}
    if report.param("run") is not None and run is not None:
        out["run"] = run
    p = report.param("iteration")
    if p is not None and iteration is not None and (iteration != "all" or report.iteration_all == "sql"):
        out["iteration"] = str(iteration)
    return out


def _rows_for(con, relation, column, run):
    """The WHERE clause (and its parameters) of relation's rows with column non-NULL
    for run (the run column being run or trace_run; every row where it has none)."""
    runcol = run_column(con, relation)
    where = [f"{column} IS NOT NULL"] if column else []
    if run is not None and runcol:
        where.append(f"{runcol} = $run")
    return (" WHERE " + " AND ".join(where) if where else ""), ({"run": run} if run is not None and runcol else {})


def _has_rows(con, relation, column, run):
    where, params = _rows_for(con, relation, column, run)
    return scalar(con, f"SELECT count(*) FROM (SELECT 1 FROM {relation}{where} LIMIT 1)", params) > 0


def _iterations_with_rows(con, relation, column, run):
    """The iterations of relation's rows for run (a row of iteration NULL stands for
    every iteration: None is in the set)."""
    where, params = _rows_for(con, relation, column, run)
    return {r[0] for r in rows(con, f"SELECT DISTINCT iteration FROM {relation}{where}", params)}


class _Inputs:
    """The relations rules read: catalog lookups, and report outputs registered on the
    connection as report_NAME (each report run once per evaluation). With iteration
    "all", each report is run once for every iteration, less its whole-trace rows (a
    finding is about a step)."""

    def __init__(self, con, run, iteration, memo=None):
        self.con, self.run, self.iteration = con, run, iteration
        self.memo = memo or reports.Memo(con)
        self.registered, self.failed = [], {}
        self.catalog, self.known = {}, None
        for t, c in rows(con, "SELECT table_name, column_name FROM duckdb_columns() WHERE NOT internal"):
            self.catalog.setdefault(t, set()).add(c)

    def _register(self, name, report):
        """Run the report into report_NAME; its error, or None."""
        try:
            table = self.memo.run(name, _report_params(report, self.run, self.iteration))
        except ReportError as e:
            self.failed[name] = str(e)
            return str(e)
        if self.iteration == "all" and report.param("iteration") is not None and "iteration" in table.column_names:
            import pyarrow.compute as pc          # 0.2 s to import: only where a rule reads every iteration
            table = table.filter(pc.is_valid(table["iteration"]))
        relation = f"report_{name}"
        self.con.register(relation, table)
        self.registered.append(relation)
        self.catalog[relation] = set(table.column_names)
        return None

    def missing(self, relation, column, meaning):
        """Why the requirement is not met for the run (None when it is)."""
        if relation.startswith("report_"):
            name = relation[len("report_"):]
            if self.known is None:           # parsed once per evaluation (50 files: 10 ms a time)
                self.known = reports.all_reports()
            known = self.known
            if name not in known:
                return f"needs {meaning}: report {name} is not in this tracedb"
            if name in self.failed:
                return f"needs {meaning}: {self.failed[name]}"
            if relation not in self.registered and (error := self._register(name, known[name])):
                return f"needs {meaning}: {error}"
        elif relation not in self.catalog:
            return f"needs {meaning}: no relation {relation} in this database"
        if column and column not in self.catalog[relation]:
            return f"needs {meaning}: {relation} has no column {column}"
        if not _has_rows(self.con, relation, column, self.run):
            return self.no_rows(relation, column, meaning)
        return None

    def no_rows(self, relation, column, meaning):
        what = f"{relation}.{column}" if column else relation
        return f"needs {meaning}: {what} holds no rows" + (f" for run {self.run}" if self.run else "")

    def held_at(self, relation, column):
        """With iteration "all", the iterations at which a report the requirement
        names holds rows for the run (None: every iteration)."""
        if not relation.startswith("report_") or "iteration" not in self.catalog[relation]:
            return None
        found = _iterations_with_rows(self.con, relation, column, self.run)
        return None if None in found else found

    def close(self):
        for r in self.registered:
            self.con.unregister(r)


def _base(rule, threshold):
    return {"rule": rule.name, "threshold": threshold, "unit": rule.unit, "suggestion": rule.suggestion,
            "next_report": rule.next_report}


def _found(rule, threshold, run, iteration, got):
    """Finding dicts of a rule's rows (run, iteration, value, evidence); ok when none."""
    base = _base(rule, threshold)
    if not got:     # its data is there and nothing met the rule's condition: it passed
        return [dict(base, run=run, iteration=iteration, severity="ok", value=None,
                     evidence="no row of the data it reads meets the rule's condition")]
    out = []
    for r_run, r_it, value, evidence, *graded in got:
        if value is None:
            sev = "skipped"
            evidence = f"value not computable: {evidence}"
        else:       # a fifth column `severity` grades the finding by its cost (high | medium | low)
            sev = ((graded[0] if graded and graded[0] in SEVERITIES else rule.severity)
                   if rule.fired(value, threshold) else "ok")
        out.append(dict(base, run=r_run, iteration=r_it, severity=sev,
                        value=None if value is None else round(float(value), 3), evidence=evidence))
    return out


def _skipped(rule, threshold, run, iteration, why):
    return dict(_base(rule, threshold), run=run, iteration=iteration, severity="skipped", value=None, evidence=why)


def _rows_of(con, rule, values):
    try:
        return con.execute(rule.sql, bind(rule.sql, values)).fetchall()
    except duckdb.Error as e:
        raise ReportError(f"rule {rule.name}: {str(e).splitlines()[0]}") from None


def _worst_first(out):
    def excess(f):          # how far beyond its threshold, for the order within a severity
        if f["value"] is None:
            return 0.0
        d = f["value"] - f["threshold"]
        return -abs(d) / (abs(f["threshold"]) or 1.0)
    # within a severity, the larger saving a what-if predicts first (critpath.predicted_savings)
    out.sort(key=lambda f: (ORDER[f["severity"]], -f.get("saving_ns", 0), excess(f), f["run"] or "", f["rule"]))
    for i, f in enumerate(out):
        f["ord"] = i
        f.pop("saving_ns", None)
    return out


def evaluate(con, run=None, iteration=None, thresholds=None, only=None, resolve=True, memo=None):
    """Every rule (or those named in only) on run (all trace runs when None) and
    iteration (the steady one when None): a list of finding dicts, worst first,
    with rules that passed (severity ok) and rules skipped (severity skipped).

    A rule whose header says `steady: run` gets the steady iteration's number for
    its $iteration when one run is asked for (unless resolve=False): the same
    rows, but DuckDB pushes the constant into the per-iteration views instead of
    computing every iteration to find the steady one (reports.resolve_steady).
    memo: a reports.Memo whose reports the rules read (a page already ran them)."""
    thresholds = thresholds or {}
    steady = (scalar(con, reports.STEADY_OF["run"], {"run": run})
              if resolve and iteration is None and run is not None else None)
    out = []
    inputs = _Inputs(con, run, iteration, memo)
    try:
        for rule in all_rules().values():
            if only and rule.name not in only:
                continue
            t = thresholds.get(rule.name, rule.threshold)
            why = next(filter(None, (inputs.missing(*r) for r in rule.requires)), None)
            if why:
                out.append(_skipped(rule, t, run, iteration, why))
                continue
            bound = steady if rule.steady == "run" and steady is not None else iteration
            out += _found(rule, t, run, iteration,
                          _rows_of(con, rule, {"run": run, "iteration": bound, "every": False, "stored": False}))
    finally:
        inputs.close()
    from . import critpath, pairing_flags
    return _worst_first(critpath.predicted_savings(con, pairing_flags.flag(con, out, all_rules())))


def evaluate_every(con, run, iterations, thresholds=None, only=None):
    """evaluate() of each of run's iterations (their numbers), every rule run once
    for all of them: its reports with iteration=all, and $every true, which makes
    finding_iterations give every iteration. The findings evaluate() gives iteration
    by iteration, worst first (2,800 iterations of a 10 GB trace: about 1 s each
    that way). A requirement on a report holds at the iterations its rows name."""
    thresholds = thresholds or {}
    out = []
    inputs = _Inputs(con, run, "all")
    asked = set(iterations)
    # a run whose per-iteration sums an ingest stored (--op-totals): the rules read them
    stored = run is not None and scalar(con, "SELECT count(*) FROM finding_stored_runs WHERE run = $run",
                                        {"run": run}) > 0
    try:
        for rule in all_rules().values():
            if only and rule.name not in only:
                continue
            t = thresholds.get(rule.name, rule.threshold)
            why = {}            # iteration -> why the rule is skipped there (its first requirement not met)
            for relation, column, meaning in rule.requires:
                if not (open_ := [it for it in iterations if it not in why]):   # (few requirements)
                    break
                if (whole := inputs.missing(relation, column, meaning)) is not None:
                    why.update(dict.fromkeys(open_, whole))
                elif (held := inputs.held_at(relation, column)) is not None:
                    why.update(dict.fromkeys([it for it in open_ if it not in held],
                                             inputs.no_rows(relation, column, meaning)))
            got = {}
            if asked - why.keys():
                for g in _rows_of(con, rule, {"run": run, "iteration": None, "every": True, "stored": stored}):
                    got.setdefault(g[1] if g[1] in asked else "other", []).append(g)
            for it in iterations:
                out += ([_skipped(rule, t, run, it, why[it])] if it in why
                        else _found(rule, t, run, it, got.get(it, [])))
            if "other" in got:        # rows of no iteration asked for: as they are
                out += _found(rule, t, run, None, got["other"])
    finally:
        inputs.close()
    from . import pairing_flags
    return _worst_first(pairing_flags.flag(con, out, all_rules()))


def table(findings):
    """Findings as an Arrow table with the findings report's columns."""
    types = {"iteration": pa.int32(), "value": pa.float64(), "threshold": pa.float64(), "ord": pa.int64()}
    return pa.table({c: pa.array([f[c] for f in findings], types.get(c, pa.string())) for c in COLUMNS})


def _is_all(iteration):
    return str(iteration).strip().lower() == "all"


def iterations_of(con, run, iteration):
    """The iterations an `iteration` value names: [None] (steady), [N], or every
    (run, iteration) of the trace runs for "all"."""
    if iteration is None or str(iteration).strip() == "":
        return [(run, None)]
    text = str(iteration).strip().lower()
    if _is_all(iteration):
        return [(r, i) for r, i in rows(con, "SELECT run, iteration FROM iterations WHERE $run IS NULL OR run = $run "
                                             "ORDER BY run, iteration", {"run": run})]
    if not reports._is_step(text):
        raise ReportError(f"parameter iteration must be an iteration number or all, got {iteration!r}")
    return [(run, int(text))]


def evaluate_many(con, run=None, iteration=None, thresholds=None):
    """evaluate() over the iterations `iteration` names (see iterations_of); for
    all, each run's iterations at once (evaluate_every)."""
    out = []
    named = iterations_of(con, run, iteration)
    if _is_all(iteration):
        by_run = {}
        for r, it in named:
            by_run.setdefault(r, []).append(it)
        for r, its in by_run.items():
            out += evaluate_every(con, r, its, thresholds)
    else:
        for r, it in named:
            out += evaluate(con, r, it, thresholds)
    if len(out) > 1:
        out.sort(key=lambda f: (ORDER[f["severity"]], f["run"] or "", f["iteration"] or 0, f["rule"]))
    for i, f in enumerate(out):
        f["ord"] = i
    return out


@contextlib.contextmanager
def prepared(con, values):
    """The findings report's input: _findings, registered for the report's SQL."""
    found = evaluate_many(con, values.get("run"), values.get("iteration"), parse_thresholds(values.get("thresholds")))
    con.register("_findings", table(found))
    try:
        yield
    finally:
        con.unregister("_findings")


reports.register_preparer("advise", PARAMS, prepared)
