"""The one header grammar of tracedb's .sql files: saved reports (queries/), finding
rules (rules/) and the schema's view files (schema/views/) all start with comment
lines read here, and only here.

    -- name: gpu_utilization              a key line: `-- KEY: value`, one space after --
    -- description: one paragraph,        a key's value may go on over the lines after it,
    --   continued here                   each indented (two or more spaces)
    -- parameters:                        a list section: one entry per indented line
    --   batch_size INTEGER > 0 = NULL: samples per iteration
    --   run RUN = NULL: trace run (all when absent)
    -- columns:
    --   total_ns BIGINT: iteration duration, ns
    -- requires:
    --   kernels.launch_end_ns: what it is, for the user

The header ends at the first line that is not a comment. Each kind of file reads
the keys it knows (query/reports.py, analysis/advise.py, store/catalog.py); a key
line of a key no kind knows is a header error, so a typo cannot pass as prose.
It lives in the store because the store applies the view files in the order their
`includes:` lines give.

A parameter is `name TYPE [> 0 | >= 0] [= default]: doc`, TYPE one of TYPES: the SQL
types, and RUN (a run's name) and RUNS (comma-separated run names), which the report
engine checks against the database: what names a run is declared, never guessed.
"""
import re
from dataclasses import dataclass, field

KEYS = {
    # every .sql file
    "name": "its name (a report); rules say rule:",
    "description": "what it answers (continues on indented lines)",
    "requires": "relations (relation.column) that must hold rows, with what they mean for the user",
    # reports
    "parameters": "its parameters, one per line",
    "columns": "its output columns with type and unit, one per line",
    "engines": "duckdb, spark",
    "topic": "the group `tracedb reports` lists it under",
    "prepared_by": "the analysis that makes the relation its SQL reads (analysis/registry.py)",
    "steady": "run | job: the iteration parameter's default stands for the steady iteration",
    "iteration_all": "what iteration=all means: absent (every iteration is the default) | sql (the SQL "
                     "takes 'all'), optionally `, whole run` (also a run without iterations)",
    "op_windows": "iteration | steady: the iterations it reads the FLOP views in",
    "segment_windows": "iteration | steady: the iterations it reads activity_segments in",
    "gpu_time_windows": "iteration | steady: the iterations it reads iteration_gpu_time in",
    # rules
    "rule": "a rule's name",
    "threshold": "a rule's default threshold",
    "unit": "the unit of a rule's value and threshold",
    "fires": "above | below",
    "severity": "high | medium | low",
    "next": "the report to read next",
    "suggestion": "what to try (continues on indented lines)",
    # view files
    "includes": "the view files it builds on",
}
LISTS = ("parameters", "columns", "requires")        # sections of one entry per line
TYPES = ("INTEGER", "BIGINT", "DOUBLE", "VARCHAR", "BOOLEAN", "RUN", "RUNS")

_KEY = re.compile(r"-- (\w+):\s*(.*)$")
_PARAM = re.compile(r"(\w+)\s+(\w+)(?:\s*(>=?)\s*0)?(?:\s*=\s*([^:]+))?:\s*(.*)$")
_COLUMN = re.compile(r"(\w+)\s+(\w+):\s*(.*)$")
_REQUIRE = re.compile(r"(\w+)(?:\.(\w+))?:\s*(.*)$")


@dataclass
class ParamSpec:
    name: str
    type: str
    floor: str          # "> 0", ">= 0" or None
    default: str        # the default's text, None when absent
    doc: str
    choices: tuple      # from a doc that starts "one of a | b | c:"


@dataclass
class Header:
    values: dict = field(default_factory=dict)      # key -> its text (continuation lines joined)
    entries: dict = field(default_factory=dict)     # list section -> its lines
    problems: list = field(default_factory=list)    # lines the grammar cannot read

    def get(self, key, default=None):
        return self.values.get(key, default)

    def params(self):
        out = []
        for line in self.entries.get("parameters", []):
            p = _PARAM.match(line)
            if not p:
                self.problems.append(f"parameter line not `name TYPE [> 0] [= default]: doc`: {line!r}")
                continue
            if p.group(2).upper() not in TYPES:
                self.problems.append(f"parameter {p.group(1)}: type {p.group(2)} is not one of {', '.join(TYPES)}")
            ch = re.match(r"one of ([\w|\s]+):", p.group(5))
            out.append(ParamSpec(p.group(1), p.group(2).upper(), p.group(3) and f"{p.group(3)} 0",
                                 p.group(4), p.group(5), tuple(c.strip() for c in ch.group(1).split("|")) if ch else ()))
        return out

    def columns(self):
        """(name, type, doc) of each output column."""
        return [c.groups() for c in map(_COLUMN.match, self.entries.get("columns", [])) if c]

    def requires(self):
        """(relation, column or None, meaning): the section's lines, and a one-line
        `requires: a, b` (each relation meaning itself)."""
        out = [r.groups() for r in map(_REQUIRE.match, self.entries.get("requires", [])) if r]
        inline = self.values.get("requires", "")
        out += [(r.strip(), None, r.strip()) for r in inline.split(",") if r.strip()]
        return out

    def listed(self, key):
        """A key's comma-separated values."""
        return [v.strip() for v in self.values.get(key, "").split(",") if v.strip()]


def parse(text):
    """The header of a .sql file (its leading comment lines)."""
    h, key = Header(), None
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        m = _KEY.match(line)
        if m and not line.startswith("--  "):
            key, value = m.group(1), m.group(2).strip()
            if key not in KEYS:
                h.problems.append(f"unknown header key {key!r} (known: {', '.join(KEYS)})")
                key = None
                continue
            if key in LISTS:
                h.entries.setdefault(key, [])
            h.values[key] = value
            continue
        body = line[2:].strip()
        if not body or key is None:
            continue
        if key in LISTS:
            h.entries[key].append(body)
        else:
            h.values[key] = f"{h.values[key]} {body}".strip()
    return h
