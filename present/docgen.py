"""The reference parts of docs/reports.md and docs/schema.md, generated from the
report headers (queries/*.sql) and the comments of the DDL and views (schema/),
so the docs cannot drift from the code. The prose around them is hand-written;
the generated parts sit between `<!-- generated: KEY -->` and `<!-- end generated -->`.

What each table, view and column means is read from schema/ by the store's catalog
(store/catalog.py), which also puts it into every database as comments.

    python -m tracedb.present.docgen          rewrite the generated parts in docs/
    python -m tracedb.present.docgen --check  exit 1 when docs/ is out of date (the tests do this)
"""
import re
import sys
from pathlib import Path

from ..query import reports
from ..store.catalog import column_docs, relations

DOCS = Path(__file__).parent.parent / "docs"
BLOCK = re.compile(r"(<!-- generated: (?P<key>[\w:./-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


def _cell(text):
    return text.replace("|", "\\|")


def table_md(rel):
    rows = [f"| {c.name} | {c.type} | {_cell(c.doc)} |" for c in rel.columns]
    return f"{rel.doc}\n\n| column | type | meaning |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def view_columns():
    """View name -> [(column, type)], from a database with the schema applied."""
    from ..store import db
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
    from ..analysis import advise
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
        print(f"out of date (python -m tracedb.present.docgen): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
