"""The schema catalog: which files define the tables and views, in what order they
apply, and what each relation and column means (the comments of the DDL and of the
views), read once from schema/. The store applies it; docgen writes docs from it.

A view file declares the files it builds on in its first line, in the manner of
Perfetto's `INCLUDE PERFETTO MODULE`: `-- includes: base, ncu`. The order in which
the files apply is derived from those lines, so no ordered list is kept by hand
(tests/test_layers.py holds each declaration against the names the file uses).

A table documents a column by the comment on its line of the DDL. A view documents
its columns as Perfetto's SQL library did before typed column lists: the comment
block above the CREATE holds `@column name meaning` lines (a following line without
a tag continues the meaning), and `@columns_from relation` says that the columns the
view passes through unchanged from that relation mean what they mean there.
"""
import os
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from . import header

# The schema's version in schema_info: a write open replaces the views and macros
# when it differs (4: the first to skip them when current, so a writer older than
# that, which keeps stamping 3 with its own views, makes this version replace them;
# 5: op_iteration_totals, which a read-only open of a file stamped 4 stands in for;
# 6: finding_iteration_totals, kernel_iteration_totals, copy_kernel_overlap, gpu_class_totals,
# launch_queue_totals, top_kernel_totals and idle_totals, the same; 7: gpu_metric_samples, the same;
# 8: path_iteration_totals, the same).
SCHEMA_VERSION = "8"
# The storage format a new database is written in: DuckDB 2.0 writes a format by
# default that DuckDB 1.x (the CLI and drivers most people have) cannot open. The
# README states the versions this gives; tests/test_compat.py opens a file with 1.5.
STORAGE_COMPATIBILITY = "v1.4.0"
# The one column declared with a compression (schema/tables/core.sql; why:
# docs/benchmarks.md), and the schema_info key saying a database's events table has it.
ARGS_ZSTD = " USING COMPRESSION zstd"
ARGS_ZSTD_KEY = "events.args compression"
TABLE_FILES = ("tables/core.sql", "tables/settings.sql", "tables/migrate.sql")


def sql_text(package, name):
    """Text of a .sql file shipped in a package folder (schema/, queries/); name may
    hold one sub-folder ("views/base.sql")."""
    return resources.files(f"tracedb.{package}").joinpath(*name.split("/")).read_text()


def package_sql(package):
    """(name without .sql, text) of every .sql file of a package folder (queries/,
    rules/), sorted by name: the saved reports and the finding rules."""
    for f in sorted(resources.files(f"tracedb.{package}").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".sql"):
            yield f.name[:-4], f.read_text()


def sql_stamp(package):
    """(file name, modification time ns, size) of every .sql file of a package folder,
    sorted: what a cache of their parsed texts is keyed on, so that a file added, removed
    or edited while a process lives (a notebook) is parsed again. (A folder that is no
    directory, a zipped package, gives the names alone: its files do not change.)"""
    d = resources.files(f"tracedb.{package}")
    if not isinstance(d, os.PathLike):
        return tuple(sorted((f.name, None, None) for f in d.iterdir() if f.name.endswith(".sql")))
    with os.scandir(d) as it:       # (about 0.2 ms for 50 files)
        return tuple(sorted((e.name, st.st_mtime_ns, st.st_size)
                            for e in it if e.name.endswith(".sql") for st in [e.stat()]))


def parsed_sql(package, parse):
    """name -> parse(text, file name) of every .sql file of a package folder (the saved
    reports, the finding rules), by the name the parsed object gives itself (.name)."""
    out = {}
    for name, text in package_sql(package):
        obj = parse(text, name)
        out[obj.name] = obj
    return out


def sql_files(package, folder):
    """Names ("seeds/x.sql") of the .sql files in a sub-folder of a package, sorted."""
    d = resources.files(f"tracedb.{package}").joinpath(folder)
    return sorted(f"{folder}/{f.name}" for f in d.iterdir() if f.name.endswith(".sql"))


def includes(name):
    """The view files ("views/base.sql") that the view file `name` declares it builds on."""
    h = header.parse(sql_text("schema", name))
    if "includes" not in h.values or set(h.values) != {"includes"} or h.problems:
        raise ValueError(f"schema/{name}: its header must be one line `-- includes: FILE, ...` (or none)")
    return [f"views/{n}.sql" for n in h.listed("includes")]


# The tables of totals an ingest with --op-totals stores (ingest/trace.py store_op_totals),
# and with --path-totals (analysis/path_totals.py: path_iteration_totals),
# which the reports read instead of sweeping: made by the views, load scripts and reports
# of the tracedb that stored them (db.totals_digest, schema_info 'totals'). Another
# version's are deleted by a write open and hidden by a read-only one: the reports sweep.
TOTALS_TABLES = ("op_iteration_totals", "op_flop_totals", "kernel_iteration_totals", "copy_kernel_overlap",
                 "gpu_class_totals", "launch_queue_totals", "top_kernel_totals", "idle_totals",
                 "finding_iteration_totals", "path_iteration_totals")


@cache
def view_files():
    """Every file of schema/views/, each after the files it includes (then by name)."""
    names = sql_files("schema", "views")
    done, order = set(), []

    def visit(name, path):
        if name in done:
            return
        if name in path:
            raise ValueError(f"schema/{name}: includes itself through {' -> '.join(path)}")
        if name not in names:
            raise ValueError(f"schema/{path[-1]}: includes {name}, which is not a view file")
        for dep in includes(name):
            visit(dep, path + (name,))
        done.add(name)
        order.append(name)

    for n in names:
        visit(n, ())
    return tuple(order)


def defined_names(text, kinds="VIEW|MACRO"):
    """The views (and macros) a SQL text creates."""
    return re.findall(rf"CREATE OR REPLACE (?:{kinds}) (\w+)", text)


# ---- what each relation and column means --------------------------------------

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
    for name in TABLE_FILES + view_files():
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


def _literal(text):
    return "'" + text.replace("'", "''") + "'"


def comment_sql():
    """COMMENT ON statements that put the DDL's documentation into the database, so
    the DuckDB CLI, notebooks and BI tools show it (duckdb_tables(), duckdb_columns())."""
    out = []
    for r in relations():
        if r.kind == "table":
            out.append(f"COMMENT ON TABLE {r.name} IS {_literal(r.doc)};")
            out += [f"COMMENT ON COLUMN {r.name}.{c.name} IS {_literal(c.doc)};" for c in r.columns if c.doc]
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
            out.append(f"COMMENT ON VIEW {r.name} IS {_literal(chr(10).join(lines))};")
    return "\n".join(out)


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


# ---- which columns name a run --------------------------------------------------

def names_a_run(column):
    """Whether a column names a run: run, trace_run, ncu_run, power_run, paired_run ..."""
    return column == "run" or column.endswith("_run")


def table_run_columns(con):
    """table -> its columns that name a run, for every table of the database but runs:
    read from the catalog, so a table added by a new reader is covered without a change."""
    out = {}
    for table, col in con.execute("""SELECT c.table_name, c.column_name FROM duckdb_columns() c
            JOIN duckdb_tables() t ON t.table_name = c.table_name AND t.schema_name = c.schema_name
                                   AND t.database_name = c.database_name AND NOT t.temporary
            WHERE c.database_name = current_database() AND c.schema_name = 'main' AND c.table_name <> 'runs'
            ORDER BY 1, c.column_index""").fetchall():
        if names_a_run(col):
            out.setdefault(table, []).append(col)
    return out


def run_column_of(columns):
    """The column by which a relation's rows belong to a run: run, else trace_run (a
    kernel's trace run), else None (a relation across runs)."""
    return "run" if "run" in columns else "trace_run" if "trace_run" in columns else None


def run_column(con, relation):
    """run_column_of a relation of the database (a table, a view, a registered table)."""
    return run_column_of({d[0] for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description})
