"""The reference parts of docs/reports.md and docs/schema.md, generated from the
report headers (queries/*.sql) and the comments of the DDL and views (schema/),
so the docs cannot drift from the code. The prose around them is hand-written;
the generated parts sit between `<!-- generated: KEY -->` and `<!-- end generated -->`.

A table documents a column by the comment on its line of the DDL. A view documents
its columns as Perfetto's SQL library did before typed column lists: the comment
block above the CREATE holds `@column name meaning` lines (a following line without
a tag continues the meaning), and `@columns_from relation` says that the columns the
view passes through unchanged from that relation mean what they mean there.

    python -m tracedb.docgen          rewrite the generated parts in docs/
    python -m tracedb.docgen --check  exit 1 when docs/ is out of date (the tests do this)
"""
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tracedb import reports
from tracedb.db import TABLE_FILES, VIEW_FILES, sql_literal, sql_text

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
    doc: str                  # the comment lines above its CREATE, without the tags
    file: str
    columns: list = field(default_factory=list)       # a table's DDL; a view's @column lines (type '')
    columns_from: list = field(default_factory=list)  # a view's @columns_from relations


_TAG = re.compile(r"@(column|columns_from)\s+(\S+)\s*(.*)")


def _doc_comment(lines):
    """The comment block just above a statement: its prose, its `@column name
    meaning` lines as Columns, and the relations its `@columns_from` lines name."""
    block = []
    for line in reversed(lines):
        if not line.startswith("--"):
            break
        block.insert(0, line[2:].strip())
    prose, cols, sources = [], [], []
    for text in block:
        tag = _TAG.match(text)
        if tag and tag.group(1) == "column":
            cols.append(Column(tag.group(2), "", tag.group(3)))
        elif tag:
            sources.append(tag.group(2))
        elif text and cols:
            cols[-1].doc = f"{cols[-1].doc} {text}"
        elif text:
            prose.append(text)
    return " ".join(prose), cols, sources


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


@cache
def relations():
    """Every table, view and macro of the schema, with its documentation (read once:
    db.connect() asks for it on every open)."""
    out = []
    for name in TABLE_FILES + VIEW_FILES:
        text = sql_text("schema", name)
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"CREATE (?:OR REPLACE )?(TABLE|VIEW|MACRO)(?: IF NOT EXISTS)? (\w+)", line)
            if not m:
                continue
            kind, rel = m.group(1).lower(), m.group(2)
            doc, cols, sources = _doc_comment(lines[:i])
            r = Relation(rel, kind, doc, f"schema/{name}", cols, sources)
            if kind == "table":
                end = next(j for j in range(i, len(lines)) if lines[j].startswith(");"))
                r.columns = _table_columns("\n".join(lines[i + 1:end + 1]))
            elif kind == "macro":
                r.name = re.match(r"CREATE (?:OR REPLACE )?MACRO (\w+\([^)]*\))", line).group(1)
            out.append(r)
    return tuple(out)


def comment_sql():
    """COMMENT ON statements that put the DDL's documentation into the database, so
    the DuckDB CLI, notebooks and BI tools show it (duckdb_tables(), duckdb_columns())."""
    out = []
    for r in relations():
        if r.kind == "table":
            out.append(f"COMMENT ON TABLE {r.name} IS {sql_literal(r.doc)};")
            out += [f"COMMENT ON COLUMN {r.name}.{c.name} IS {sql_literal(c.doc)};" for c in r.columns if c.doc]
    return "\n".join(out)


def view_comment_sql():
    """COMMENT ON VIEW statements: each view's doc, then a line per column it
    documents (duckdb_views().comment). Not COMMENT ON COLUMN: DuckDB takes one
    statement per column, and the ~470 view columns would add about a third to
    db.connect(), on every open, since CREATE OR REPLACE VIEW drops the comments."""
    out = []
    for r in relations():
        if r.kind == "view":
            lines = [r.doc] + [f"{c.name}: {c.doc}" for c in r.columns]
            lines += [f"other columns: as in {src}" for src in r.columns_from]
            out.append(f"COMMENT ON VIEW {r.name} IS {sql_literal(chr(10).join(lines))};")
    return "\n".join(out)


def _cell(text):
    return text.replace("|", "\\|")


def table_md(rel):
    rows = [f"| {c.name} | {c.type} | {_cell(c.doc)} |" for c in rel.columns]
    return f"{rel.doc}\n\n| column | type | meaning |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def column_docs():
    """Relation -> {column: meaning}: a table's DDL comments; a view's @column lines,
    and for the columns it passes through, the meanings its @columns_from relations
    give them (the first that documents a column wins)."""
    rels = {r.name: r for r in relations() if r.kind != "macro"}
    out = {}

    def docs(name):
        if name not in out:
            r = rels[name]
            got = {}
            for src in r.columns_from:
                for col, doc in docs(src).items():
                    got.setdefault(col, doc)
            got.update({c.name: c.doc for c in r.columns if c.doc})
            out[name] = got
        return out[name]

    for name in rels:
        docs(name)
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


def views_md():
    """Each view (with its columns: type and meaning) and macro of schema/views/."""
    out, cols, docs = [], view_columns(), column_docs()
    for r in relations():
        if r.kind == "table":
            continue
        out.append(f"- {r.kind} `{r.name}` ({r.file}): {r.doc}")
        if r.kind == "view" and cols.get(r.name):
            out.append("")
            out.append("  | column | type | meaning |")
            out.append("  |---|---|---|")
            out += [f"  | {c} | {t} | {_cell(docs[r.name].get(c, ''))} |" for c, t in cols[r.name]]
            out.append("")
    return "\n".join(out) + "\n"


def report_md(r):
    out = [f"### {r.name}", "", r.description, ""]
    if r.params:
        out += ["| parameter | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| {p.name} | {p.type}{' ' + p.floor if p.floor else ''} | {'' if p.default is None else p.default} | {_cell(p.doc)} |"
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
