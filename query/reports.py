"""Saved reports: one .sql file each in queries/, with a header that documents it.

Header format (comment lines at the top of the file):

    -- name: gpu_utilization
    -- description: one paragraph, may continue on following lines
    -- parameters:
    --   batch_size INTEGER = NULL: samples per iteration, for samples_per_s
    -- columns:
    --   total_ns BIGINT: iteration duration, ns
    -- requires:
    --   iterations: iterations (step markers: ProfilerStep#N, step_num)
    -- engines: duckdb, spark
    -- topic: single GPU

The header is the single source of truth: parameters are bound as DuckDB
named parameters ($name), never pasted into the SQL, and a report must declare
exactly the $names its SQL uses (a report that reads no $run takes no --run);
`requires` names the relations that must hold rows (for the run asked for)
and the message a user sees when one does not; `engines` the engines it runs
on (duckdb by default); `steady: run` (or `job`) says that the default of its
`iteration` parameter stands for the run's (the job's) steady iteration, which
`run` then looks up and binds as a number (`resolve_steady`); `op_windows:
iteration` (or `steady`) that it reads the FLOP views only in the iterations its
`iteration` parameter picks (each run's steady one), `segment_windows:` the
same of activity_segments and `gpu_time_windows:` of iteration_gpu_time, which
`run` then narrows them to (windows.py).
docs/reports.md is generated from the headers.
"""
import contextlib
import math
import re
from dataclasses import dataclass, field
from typing import Callable

import duckdb
import pyarrow as pa

from ..errors import TracedbError
from ..suggest import did_you_mean
from ..store import header
from ..store.catalog import parsed_sql, run_column, sql_stamp
from ..store.sql import bind, params_of, read_batches, rows, scalar
from . import windows

_TYPES = {"INTEGER": int, "BIGINT": int, "DOUBLE": float, "VARCHAR": str, "BOOLEAN": None, "RUN": str, "RUNS": str}


@dataclass(frozen=True)
class Preparer:
    """An analysis whose result a report reads (`prepared_by: NAME` in its header):
    prepared(con, values) is a context in which the relations its SQL reads exist;
    params are the report parameters it reads (they count as used)."""
    params: frozenset
    prepared: Callable


# Filled by the analyses above this layer (analysis/), which register themselves
# when tracedb is imported: the report engine never imports upward.
PREPARERS = {}


def register_preparer(name, params, prepared):
    PREPARERS[name] = Preparer(frozenset(params), prepared)


# Reports prepared by an analysis that has a form of its own on Spark (the critical
# path: per rank in Spark tasks, the walk on the driver): prepared_by name ->
# run(name, params, lake_dir, master) -> pyarrow Table, which engines.run_spark calls.
SPARK_FORMS = {}


def register_spark_form(prepared_by, run):
    SPARK_FORMS[prepared_by] = run


def preparer(name):
    return PREPARERS.get(name)


class ReportError(TracedbError):
    """A report cannot run: unknown name, bad parameter, or data it needs is absent."""


@dataclass
class Param:
    name: str
    type: str
    default: object
    doc: str
    choices: tuple = ()      # from a doc that starts "one of a | b | c:"
    floor: str = None        # "> 0" or ">= 0" after the type: a count, a size, a power, a share


@dataclass
class Report:
    name: str
    description: str
    sql: str
    params: list = field(default_factory=list)
    columns: list = field(default_factory=list)   # (name, type, doc)
    requires: list = field(default_factory=list)  # (relation, what it means for the user)
    engines: list = field(default_factory=lambda: ["duckdb"])
    prepared_by: str = None   # the analysis (PREPARERS) whose prepared(con, values) makes the relations the SQL reads
    steady: str = None        # run | job: the iteration parameter's default is that one's steady iteration
    op_windows: str = None    # iteration | steady: the iterations it reads the FLOP views in (windows.py)
    segment_windows: str = None   # iteration | steady: the iterations it reads activity_segments in
    gpu_time_windows: str = None  # iteration | steady: the iterations it reads iteration_gpu_time in
    topic: str = None         # the group `tracedb reports` lists it under
    iteration_all: str = None     # absent | sql: what iteration=all means (None: the report refuses it)
    whole_run: bool = False       # iteration=all also gives a run without iterations its whole-run row
    problems: list = field(default_factory=list)  # header and SQL disagree (a bug in the report)

    @property
    def body(self):
        """The SQL without the header."""
        return "\n".join(l for l in self.sql.splitlines() if not l.lstrip().startswith("--"))

    def param(self, name):
        return next((p for p in self.params if p.name == name), None)


def _parse_default(text, type_, floor=None):
    text = text.strip()
    if text.upper() == "NULL":
        return None
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    return _convert(text, type_, "default", floor)


# The range of each integer type: a value beyond it is the user's error, not DuckDB's
# conversion error when the SQL binds it.
_INT_BITS = {"INTEGER": 32, "BIGINT": 64}


def _fits(v, t):
    """Whether the int v fits the SQL integer type t."""
    return -(1 << (_INT_BITS[t] - 1)) <= v < 1 << (_INT_BITS[t] - 1)


def _convert(value, type_, name, floor=None):
    if value is None:
        return None
    t = type_.upper()
    try:
        if t == "BOOLEAN":
            v = str(value).lower()
            if v not in ("true", "false", "1", "0"):
                raise ValueError
            return v in ("true", "1")
        v = _TYPES.get(t, str)(value)
        if t in _INT_BITS and not _fits(v, t):
            raise ValueError
        if t == "DOUBLE" and not math.isfinite(v):       # NaN or infinity: no count, power or share
            raise ValueError
    except (TypeError, ValueError):
        raise ReportError(f"parameter {name} must be {t}{' ' + floor if floor else ''}, got {value!r}") from None
    if floor and not (v > 0 if floor == "> 0" else v >= 0):
        raise ReportError(f"parameter {name} must be {floor}, got {value!r}")
    return v


# Header keys that take one value, as the Report field of the same name: the analysis
# that prepares the report's relations, its steady default, and the windows
# (windows.KINDS) it narrows the swept views to.
_ONE_VALUE = ("prepared_by", "steady", *windows.KINDS)
_REPORT_KEYS = {"name", "description", "parameters", "columns", "requires", "engines", "topic",
                "iteration_all", *_ONE_VALUE}


def parse(text, fallback_name):
    """Read a report's header (store/header.py) and SQL; disagreements go to Report.problems."""
    h = header.parse(text)
    specs = h.params()
    problems = h.problems + [f"header key {k!r} is not a report's" for k in h.values if k not in _REPORT_KEYS]
    problems += [f"column {c}: {t} is a parameter's type; a column has its SQL type" for c, t, _ in h.columns()
                 if t.upper() in ("RUN", "RUNS")]
    params = []
    for spec in specs:
        floor = spec.floor
        try:
            default = _parse_default(spec.default or "NULL", spec.type, floor)
        except ReportError as e:          # a default its own floor or type refuses
            problems.append(f"{spec.name}: {e}")
            default = None
        params.append(Param(spec.name, spec.type, default, spec.doc, spec.choices, floor))
    requires = [(rel, meaning) for rel, _, meaning in h.requires()]
    report = Report(h.get("name") or fallback_name, h.get("description", ""), text, params, h.columns(), requires,
                    h.listed("engines") or ["duckdb"], **{key: h.get(key) for key in _ONE_VALUE},
                    topic=h.get("topic"), problems=problems)
    all_ = h.listed("iteration_all")
    report.iteration_all = all_[0] if all_ else None
    report.whole_run = "whole run" in all_[1:]
    if report.iteration_all not in (None, "absent", "sql") or set(all_[1:]) - {"whole run"}:
        report.problems.append(f"iteration_all: {h.get('iteration_all')} must be absent or sql (then `, whole run`)")
    elif report.iteration_all and report.param("iteration") is None:
        report.problems.append("iteration_all needs an iteration parameter")
    if report.steady is not None and (report.steady not in STEADY_OF or report.param("iteration") is None):
        report.problems.append(f"steady: {report.steady} needs an iteration parameter and one of "
                               f"{', '.join(STEADY_OF)}")
    for key in windows.KINDS:
        mode = getattr(report, key)
        if mode is not None and (mode not in ("iteration", "steady")
                                 or (mode == "iteration" and report.param("iteration") is None)):
            report.problems.append(f"{key}: {mode} must be steady, or iteration with an iteration parameter")
    used, declared = params_of(report.body), {p.name for p in params}
    if report.prepared_by:      # the parameters its preparing analysis reads count as used
        prep = preparer(report.prepared_by)
        if prep is None:
            report.problems.append(f"prepared_by: no analysis named {report.prepared_by}")
        else:
            used |= set(prep.params)
    report.problems += [f"uses ${n}, which its header does not declare" for n in sorted(used - declared)]
    report.problems += [f"declares {n}, which its SQL does not use" for n in sorted(declared - used)]
    return report


_PARSED = {}


def all_reports():
    """Every saved report, by name: parsed once per set of analyses registered (their
    parameters are part of a report's checks) and state of the queries folder's files
    (names, modification times, sizes: a report added or edited in a long-lived process
    is seen), 36 ms a time for 50 files, which every report run paid, and findings once
    per report its rules read."""
    key = (tuple(sorted((n, p.params) for n, p in PREPARERS.items())), sql_stamp("queries"))
    if key not in _PARSED:
        _PARSED.clear()
        _PARSED[key] = parsed_sql("queries", parse)
    return dict(_PARSED[key])


def get(name):
    reports = all_reports()
    if name not in reports:
        from ..suggest import did_you_mean
        raise ReportError(f"no report named {name!r}{did_you_mean(name, reports)} (see `tracedb reports`)")
    report = reports[name]
    if report.problems:
        raise ReportError(f"report {name} is broken: {'; '.join(report.problems)}")
    return report


def _iteration(report, p, value):
    """An iteration value as the report takes it: a step number or `all` (any case); a
    header with choices (steady | all | N) checks its own. A VARCHAR parameter would
    otherwise pass 3.5 or ALL to the SQL (a conversion error, or 3.5 read as 4). What
    `all` means the header declares (`iteration_all:`): `sql`, passed on; `absent`, no
    value (the report lists every iteration by default); undeclared, refused (a report
    that reads one iteration at a time, energy_breakdown)."""
    v = str(value).strip()
    if p.choices:
        return v.lower()
    if v.lower() == "all":
        if report.iteration_all == "sql":
            return "all"
        if report.iteration_all == "absent":
            return None
        raise ReportError(f"report {report.name} reads one iteration at a time: --param iteration=N, "
                          "or none for the steady one (docs/reports.md says why it has no iteration=all)")
    if _is_step(v):
        return v
    raise ReportError(f"report {report.name}: parameter iteration must be an iteration number or all, got {value!r}")


def bound_params(report, given):
    """Parameter values for a run of the report: defaults, then given (converted)."""
    known = {p.name: p for p in report.params}
    unknown = set(given) - set(known)
    if unknown == {"run"}:
        raise ReportError(f"report {report.name} takes no run: it reports across runs "
                          f"(its parameters: {', '.join(known) or 'none'})")
    if unknown:
        from ..suggest import did_you_mean
        hint = did_you_mean(sorted(unknown)[0], known) if len(unknown) == 1 else ""
        raise ReportError(f"report {report.name} has no parameter {', '.join(sorted(unknown))}{hint} "
                          f"(it takes: {', '.join(known)})")
    values = {p.name: p.default for p in report.params}
    for k, v in given.items():
        if v is None:              # given as None (the Python API): the default, as when not given
            continue
        try:
            if k == "iteration":
                v = _iteration(report, known[k], v)
            values[k] = _convert(v, known[k].type, k, known[k].floor)
            if known[k].choices and values[k] not in known[k].choices \
                    and not ("N" in known[k].choices and _is_step(values[k])):   # N: any iteration number
                raise ReportError(f"parameter {k} must be one of {', '.join(known[k].choices)}, got {v!r}")
        except ReportError as e:
            raise ReportError(str(e) if str(e).startswith("report ") else f"report {report.name}: {e}") from None
    return values


def _is_step(value):
    """An iteration number: an integer an INTEGER holds (iterations.iteration)."""
    return bool(re.fullmatch(r"\s*-?\d+\s*", str(value))) and _fits(int(value), "INTEGER")


def _known_runs(con):
    return [r[0] for r in rows(con, "SELECT run FROM runs ORDER BY run")]


def check_run_names(con, report, values):
    """ReportError for a run named in a parameter (of type RUN or RUNS) that the
    database lacks (a typo in runs= would otherwise just drop that run from the result)."""
    names = []
    for p in report.params:
        v = values.get(p.name)
        if v is None:
            continue
        if p.type == "RUNS":
            names += [(p.name, n.strip()) for n in str(v).split(",") if n.strip()]
        elif p.type == "RUN":
            names.append((p.name, str(v)))
    known = set(_known_runs(con)) if names else set()
    for param, name in names:
        if name not in known and param == "run":
            raise ReportError(f"no run named {name!r} in the database{did_you_mean(name, known)}")
        if name not in known:
            listed = ", ".join(sorted(known)[:8]) + (", ..." if len(known) > 8 else "")
            raise ReportError(f"report {report.name}: {param}: no run named {name!r}{did_you_mean(name, known)} "
                              f"(runs: {listed or 'none'})")


def check_requirements(con, report, values):
    """Each relation the header requires holds rows (for the run asked for), or
    the header's message for it."""
    run = values.get("run")
    for relation, meaning in report.requires:
        col = run_column(con, relation) if run is not None else None
        where = f" WHERE {col} = $run" if col else ""
        if not scalar(con, f"SELECT count(*) FROM (SELECT 1 FROM {relation}{where} LIMIT 1)",
                      {"run": run} if col else None):
            at = f" for run {run}" if col else ""
            raise ReportError(f"report {report.name} needs {meaning}, and the database has none{at}")


# The steady iteration of the run (or job) asked for; its parameters are those
# of the report (a job-level report names a job, a run, or both).
STEADY_OF = {
    "run": "SELECT iteration FROM iteration_steadiness WHERE run = $run AND steady",
    "job": "SELECT DISTINCT iteration FROM job_run_iterations WHERE steady AND ($job IS NULL OR job = $job) "
           "AND ($run IS NULL OR run = $run)",
}


def resolve_steady(con, report, values):
    """values with the iteration parameter's default (the steady iteration) as that
    iteration's number, where one run (or job) is asked for and it has one.

    The result is the same; the speed is not: DuckDB pushes a constant iteration
    into the per-iteration views (windows partitioned by iteration) down to the
    kernels' scan and skips the other iterations, where the steady flag, a join,
    makes it compute every iteration first (utilization_levels on a 25 M-event
    trace: 5.0 s -> 0.45 s)."""
    p = report.param("iteration")
    if report.steady is None or values.get("iteration") != p.default:
        return values
    sql = STEADY_OF[report.steady]
    asked = bind(sql, values)              # run (and job): what the lookup needs
    if all(v is None for v in asked.values()):
        return values
    rows = con.execute(sql, asked).fetchall()
    if len(rows) != 1 or rows[0][0] is None:
        return values
    return {**values, "iteration": _convert(rows[0][0], p.type, p.name)}


def run(con, name, params=None, resolve=True):
    """Run a saved report; returns a pyarrow Table. resolve=False leaves the steady
    default to the SQL and the swept views unnarrowed (the same rows, slower on big
    traces: tests compare the two)."""
    try:
        with _running(con, name, params, resolve) as relation:
            return _noted(relation().to_arrow_table(), relation.caveat)
    except (duckdb.InvalidInputException, duckdb.ConversionException) as e:   # error('...'), or a bad parameter value
        raise _report_error(name, e) from None


def _noted(table, caveat):
    """The table (or a batch reader's schema) with the report's caveat in its schema
    metadata (pairing_caveat.CAVEAT_KEY), where it has one."""
    if not caveat:
        return table
    from .pairing_caveat import CAVEAT_KEY
    return table.with_metadata({**(table.metadata or {}), CAVEAT_KEY: caveat.encode()}) \
        if isinstance(table, pa.Schema) else \
        table.replace_schema_metadata({**(table.schema.metadata or {}), CAVEAT_KEY: caveat.encode()})


def caveat_of(table_or_reader):
    """The caveat a report's result carries (a forced ncu pairing it reads), or None."""
    from .pairing_caveat import CAVEAT_KEY
    meta = table_or_reader.schema.metadata or {}
    return meta[CAVEAT_KEY].decode() if CAVEAT_KEY in meta else None


class Memo:
    """Each report run once per (name, parameters) on a connection: a page whose
    sections, charts and rules read the same report run it once (the HTML report
    ran five reports twice). Its error is kept as well, and raised again."""

    def __init__(self, con):
        self.con, self.done = con, {}

    def run(self, name, params=None):
        key = (name, tuple(sorted((k, str(v)) for k, v in (params or {}).items() if v is not None)))
        if key not in self.done:
            try:
                self.done[key] = run(self.con, name, params)
            except ReportError as e:
                self.done[key] = e
        got = self.done[key]
        if isinstance(got, ReportError):
            raise got
        return got


@contextlib.contextmanager
def batches(con, name, params=None, rows_per_batch=65536):
    """run() as a pyarrow RecordBatchReader, inside the block: what writes the rows
    as they come (`tracedb query` to csv, json or parquet) holds a batch of them,
    not the table (launch_delay on a 10 GB trace: 2.5 M rows, 0.8 GB as a table).
    An error of the report's SQL met while reading raises ReportError, as in run()."""
    try:
        with _running(con, name, params, True) as relation:
            reader = relation().to_arrow_reader(rows_per_batch)
            try:
                yield pa.RecordBatchReader.from_batches(_noted(reader.schema, relation.caveat), read_batches(reader))
            finally:
                reader.close()       # before what _running undoes: DuckDB refuses a query while it is open
    except (duckdb.InvalidInputException, duckdb.ConversionException) as e:
        raise _report_error(name, e) from None


def _report_error(name, e):
    """error('...') in a report's SQL, or a bad parameter value: ReportError."""
    msg = str(e).splitlines()[0].removeprefix("Invalid Input Error: ")
    return ReportError(f"report {name}: {msg}")


@contextlib.contextmanager
def _running(con, name, params, resolve):
    """A function giving the report's relation, with the report's checks made and
    what it reads prepared for the block."""
    report = get(name)
    values = bound_params(report, params or {})
    check_run_names(con, report, values)
    check_requirements(con, report, values)
    if resolve:
        values = resolve_steady(con, report, values)
    prepared = (preparer(report.prepared_by).prepared(con, values)
                if report.prepared_by else contextlib.nullcontext())
    narrowed = windows.narrowed(con, report, values) if resolve else contextlib.nullcontext()
    with prepared, narrowed:
        def relation():
            return con.sql(report.sql, params=bind(report.sql, values))
        from .pairing_caveat import caveat
        relation.caveat = caveat(con, report, values)       # reads a pairing kept by --force
        yield relation
