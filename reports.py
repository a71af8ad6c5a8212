"""Saved reports: one .sql file each in queries/, with a header that documents it.

Header format (comment lines at the top of the file):

    -- name: gpu_utilization
    -- description: one paragraph, may continue on following lines
    -- parameters:
    --   batch_size INTEGER = NULL: samples per iteration, for samples_per_s
    -- columns:
    --   total_ns BIGINT: iteration duration, ns
    -- requires: iterations, kernels

Parameters are bound as DuckDB named parameters ($name), never pasted into
the SQL. Every report accepts $run (NULL = all runs).
"""
import re
from dataclasses import dataclass, field
from importlib import resources

import duckdb

from tracedb.db import bind, scalar

_TYPES = {"INTEGER": int, "BIGINT": int, "DOUBLE": float, "VARCHAR": str, "BOOLEAN": None}


class ReportError(Exception):
    """A report cannot run: unknown name, bad parameter, or data it needs is absent."""


@dataclass
class Param:
    name: str
    type: str
    default: object
    doc: str
    choices: tuple = ()      # from a doc that starts "one of a | b | c:"


@dataclass
class Report:
    name: str
    description: str
    sql: str
    params: list = field(default_factory=list)
    columns: list = field(default_factory=list)   # (name, type, doc)
    requires: list = field(default_factory=list)


def _parse_default(text, type_):
    text = text.strip()
    if text.upper() == "NULL":
        return None
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    return _convert(text, type_, "default")


def _convert(value, type_, name):
    if value is None:
        return None
    t = type_.upper()
    try:
        if t == "BOOLEAN":
            v = str(value).lower()
            if v not in ("true", "false", "1", "0"):
                raise ValueError
            return v in ("true", "1")
        return _TYPES.get(t, str)(value)
    except (TypeError, ValueError):
        raise ReportError(f"parameter {name} must be {t}, got {value!r}") from None


def parse(text, fallback_name):
    """Read a report's header and SQL."""
    header, section = {"name": fallback_name, "description": []}, None
    params, columns, requires = [], [], []
    lines = text.splitlines()
    for line in lines:
        if not line.startswith("--"):
            break
        body = line[2:].strip()
        m = re.match(r"(name|description|parameters|columns|requires|engines):\s*(.*)$", body)
        if m:
            section, value = m.group(1), m.group(2)
            if section == "name":
                header["name"] = value
            elif section == "description":
                header["description"].append(value)
            elif section == "requires":
                requires += [r.strip() for r in value.split(",") if r.strip()]
            continue
        if section == "description" and body:
            header["description"].append(body)
        elif section == "parameters" and body:
            p = re.match(r"(\w+)\s+(\w+)(?:\s*=\s*([^:]+))?:\s*(.*)$", body)
            if p:
                ch = re.match(r"one of ([\w|\s]+):", p.group(4))
                choices = tuple(c.strip() for c in ch.group(1).split("|")) if ch else ()
                params.append(Param(p.group(1), p.group(2), _parse_default(p.group(3) or "NULL", p.group(2)),
                                    p.group(4), choices))
        elif section == "columns" and body:
            c = re.match(r"(\w+)\s+(\w+):\s*(.*)$", body)
            if c:
                columns.append((c.group(1), c.group(2), c.group(3)))
    if not any(p.name == "run" for p in params):
        params.insert(0, Param("run", "VARCHAR", None, "run to report on (all runs when absent)"))
    return Report(header["name"], " ".join(header["description"]), text, params, columns, requires)


def all_reports():
    """Every saved report, by name."""
    out = {}
    for f in sorted(resources.files("tracedb.queries").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".sql"):
            r = parse(f.read_text(), f.name[:-4])
            out[r.name] = r
    return out


def get(name):
    reports = all_reports()
    if name not in reports:
        raise ReportError(f"no report named {name!r} (see `tracedb reports`)")
    return reports[name]


def bound_params(report, given):
    """Parameter values for a run of the report: defaults, then given (converted)."""
    known = {p.name: p for p in report.params}
    unknown = set(given) - set(known)
    if unknown:
        raise ReportError(f"report {report.name} has no parameter {', '.join(sorted(unknown))} "
                          f"(it takes: {', '.join(known)})")
    values = {p.name: p.default for p in report.params}
    for k, v in given.items():
        values[k] = _convert(v, known[k].type, k)
        if known[k].choices and values[k] not in known[k].choices:
            raise ReportError(f"parameter {k} must be one of {', '.join(known[k].choices)}, got {v!r}")
    return values


# What a required table means, for the error a user sees.
NEEDS = {
    "matches": "ncu kernels matched to the run (tracedb ingest REPORT --pair-with RUN, or tracedb match)",
    "trace_power_pairs": "a power log aligned with the run (tracedb ingest LOG --pair-with RUN)",
    "eager_mode": "TensorFlow eager execution events (EagerExecute, EagerKernelExecute)",
    "kernels": "GPU kernels",
    "iterations": "iterations (step markers)",
}


def check_requirements(con, report, values):
    for table in report.requires:
        n = scalar(con, f"SELECT count(*) FROM {table} WHERE $run IS NULL OR "
                        f"{'trace_run' if table in ('matches', 'match_runs') else 'run'} = $run", {"run": values.get("run")})
        if not n:
            where = f" for run {values['run']}" if values.get("run") else ""
            raise ReportError(f"report {report.name} needs {NEEDS.get(table, table)}, "
                              f"and the database has none{where}")


def run(con, name, params=None):
    """Run a saved report; returns a pyarrow Table."""
    report = get(name)
    values = bound_params(report, params or {})
    if values.get("run") is not None and not scalar(con, "SELECT count(*) FROM runs WHERE run = ?",
                                                    [values["run"]]):
        raise ReportError(f"no run named {values['run']!r} in the database")
    check_requirements(con, report, values)
    try:
        return con.sql(report.sql, params=bind(report.sql, values)).to_arrow_table()
    except duckdb.InvalidInputException as e:     # error('...') raised by the report itself
        msg = str(e).splitlines()[0].removeprefix("Invalid Input Error: ")
        raise ReportError(f"report {report.name}: {msg}") from None
