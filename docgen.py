"""The reference parts of docs/reports.md and docs/schema.md, generated from the
report headers (queries/*.sql) and the comments of the DDL and views (schema/),
so the docs cannot drift from the code. The prose around them is hand-written;
the generated parts sit between `<!-- generated: KEY -->` and `<!-- end generated -->`.

    python -m tracedb.docgen          rewrite the generated parts in docs/
    python -m tracedb.docgen --check  exit 1 when docs/ is out of date (the tests do this)
"""
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tracedb import reports
from tracedb.db import TABLE_FILES, VIEW_FILES, sql_text

DOCS = Path(__file__).parent / "docs"
BLOCK = re.compile(r"(<!-- generated: (?P<key>[\w:./-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


@dataclass
class Column:
    name: str
    type: str
    doc: str


@dataclass
class Relation:
    name: str
    kind: str                 # table | view | macro
    doc: str                  # the comment lines above its CREATE
    file: str
    columns: list = field(default_factory=list)


def _comment_block(lines):
    """The comment lines just above a statement, joined."""
    out = []
    for line in reversed(lines):
        if not line.startswith("--"):
            break
        out.insert(0, line[2:].strip())
    return " ".join(out).strip()


def _table_columns(body):
    """Columns of a CREATE TABLE body: `name TYPE ..., -- doc` (a comment line above a
    column documents it too; several columns may share a line and its comment)."""
    cols, pending = [], []
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(("PRIMARY KEY", "UNIQUE", ")")):
            continue
        if s.startswith("--"):
            pending.append(s[2:].strip())
            continue
        code, _, doc = s.partition("--")
        doc = " ".join(pending + [doc.strip()]).strip()
        pending = []
        for part in re.split(r",\s*(?=[a-z_]+\s+[A-Z])", code.strip().rstrip(",")):
            m = re.match(r"([a-z_][a-z0-9_]*)\s+([A-Z]+)", part.strip())
            if m:
                cols.append(Column(m.group(1), m.group(2), doc))
    return cols


def relations():
    """Every table, view and macro of the schema, with its documentation."""
    out = []
    for name in TABLE_FILES + VIEW_FILES:
        text = sql_text("schema", name)
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"CREATE (?:OR REPLACE )?(TABLE|VIEW|MACRO)(?: IF NOT EXISTS)? (\w+)", line)
            if not m:
                continue
            kind, rel = m.group(1).lower(), m.group(2)
            r = Relation(rel, kind, _comment_block(lines[:i]), f"schema/{name}")
            if kind == "table":
                end = next(j for j in range(i, len(lines)) if lines[j].startswith(");"))
                r.columns = _table_columns("\n".join(lines[i + 1:end + 1]))
            elif kind == "macro":
                r.name = re.match(r"CREATE (?:OR REPLACE )?MACRO (\w+\([^)]*\))", line).group(1)
            out.append(r)
    return out


def comment_sql():
    """COMMENT ON statements that put the DDL's documentation into the database, so
    the DuckDB CLI, notebooks and BI tools show it (duckdb_tables(), duckdb_columns())."""
    lit = lambda s: "'" + s.replace("'", "''") + "'"
    out = []
    for r in relations():
        if r.kind == "table":
            out.append(f"COMMENT ON TABLE {r.name} IS {lit(r.doc)};")
            out += [f"COMMENT ON COLUMN {r.name}.{c.name} IS {lit(c.doc)};" for c in r.columns if c.doc]
    return "\n".join(out)


def _cell(text):
    return text.replace("|", "\\|")


def table_md(rel):
    rows = [f"| {c.name} | {c.type} | {_cell(c.doc)} |" for c in rel.columns]
    return f"{rel.doc}\n\n| column | type | meaning |\n|---|---|---|\n" + "\n".join(rows) + "\n"


# Names that mean one thing wherever a view has them, though tables and reports
# word them for their own context.
COMMON = {
    "run": "the run (runs.run)", "trace_run": "the trace run", "ncu_run": "the ncu run",
    "power_run": "the power-log run", "iteration": "iteration (step number)",
    "kernel_id": "kernel (kernels.kernel_id: the trace's event_id, or the ncu report's ID)",
    "ts_ns": "start, ns", "dur_ns": "duration, ns", "start_ns": "start, ns", "end_ns": "end, ns",
    "name": "name as written by the profiler", "gpu": "GPU index (power logs) or name (calibration)",
    "gpu_util_pct": "100 * kernel_busy_ns / total_ns: share of the iteration with a kernel running, %",
    "job": "job (the rank traces of one distributed run)", "rank": "rank (distributedInfo.rank)",
}


def glossary():
    """Column name -> meaning for the columns of views: COMMON, else the meaning
    the DDL's comments and the report headers give the name when they all give
    the same one (an ambiguous name is left blank rather than documented wrong)."""
    seen = {}
    for r in relations():
        for c in r.columns:
            if c.doc:
                seen.setdefault(c.name, set()).add(c.doc)
    for rep in reports.all_reports().values():
        for name, _, doc in rep.columns:
            seen.setdefault(name, set()).add(doc)
    out = {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}
    out.update(COMMON)
    return out


def view_columns():
    """View name -> [(column, type)], from a database with the schema applied."""
    from tracedb import db
    con = db.connect(":memory:")
    cols = {}
    for view, col, typ in con.execute("""SELECT c.table_name, c.column_name, c.data_type FROM duckdb_columns() c
            JOIN duckdb_views() v ON v.view_name = c.table_name AND NOT v.internal AND NOT v.temporary
            ORDER BY c.table_name, c.column_index""").fetchall():
        cols.setdefault(view, []).append((col, typ))
    con.close()
    return cols


def readers_words():
    """View -> {column: meaning} from the headers of the reports whose SQL reads the view."""
    from tracedb import engines
    out = {}
    for rep in reports.all_reports().values():
        try:
            read = engines.relations_read(rep)
        except Exception:           # a report sqlglot cannot parse: no words from it
            continue
        for rel in read:
            for name, _, doc in rep.columns:
                out.setdefault(rel, {}).setdefault(name, doc)
    return out


def views_md():
    """Each view (with its columns: type and meaning) and macro of schema/views/."""
    out, common, cols, by_view = [], glossary(), view_columns(), readers_words()
    for r in relations():
        if r.kind == "table":
            continue
        out.append(f"- {r.kind} `{r.name}` ({r.file}): {r.doc}")
        if r.kind == "view" and cols.get(r.name):
            out.append("")
            out.append("  | column | type | meaning |")
            out.append("  |---|---|---|")
            words = {**by_view.get(r.name, {}), **COMMON}
            out += [f"  | {c} | {t} | {_cell(words.get(c) or common.get(c, ''))} |" for c, t in cols[r.name]]
            out.append("")
    return "\n".join(out) + "\n"


def report_md(r):
    out = [f"### {r.name}", "", r.description, ""]
    if r.params:
        out += ["| parameter | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| {p.name} | {p.type} | {'' if p.default is None else p.default} | {_cell(p.doc)} |"
                for p in r.params]
        out.append("")
    out += ["| column | type | meaning |", "|---|---|---|"]
    out += [f"| {n} | {t} | {_cell(d)} |" for n, t, d in r.columns]
    out += ["", "Needs: " + "; ".join(f"`{rel}` ({m})" for rel, m in r.requires) + ".",
            f"Engines: {', '.join(r.engines)}. Source: queries/{r.name}.sql.", ""]
    return "\n".join(out)


def rules_md():
    """The finding rules (rules/*.sql) as a table, from their headers."""
    from tracedb import advise
    lines = ["| rule | fires when the value is | severity | what it measures | needs | next |", "|---|---|---|---|---|---|"]
    for r in advise.all_rules().values():
        needs = "; ".join(_cell(m) for _, _, m in r.requires)
        lines.append(f"| {r.name} | {r.fires} {r.threshold:g} {_cell(r.unit)} | {r.severity} | "
                     f"{_cell(r.description)} | {needs} | {r.next_report} |")
    return "\n".join(lines) + "\n"


def generated():
    """KEY -> generated text, for every block the docs may hold."""
    out = {"reports": "\n".join(report_md(r) for r in reports.all_reports().values()),
           "views": views_md(), "rules": rules_md()}
    for r in relations():
        if r.kind == "table":
            out[f"table:{r.name}"] = table_md(r)
    return out


def render(text, blocks, path="doc"):
    def sub(m):
        if m.group("key") not in blocks:
            raise KeyError(f"{path}: no generated block named {m.group('key')!r}")
        return m.group(1) + blocks[m.group("key")] + m.group(4)
    return BLOCK.sub(sub, text)


def main(argv=None):
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    blocks, stale = generated(), []
    for name in ("reports.md", "schema.md"):
        path = DOCS / name
        old = path.read_text()
        new = render(old, blocks, path)
        if new != old:
            stale.append(str(path))
            if not check:
                path.write_text(new)
    if check and stale:
        print(f"out of date (python -m tracedb.docgen): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
