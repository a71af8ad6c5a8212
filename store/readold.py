"""Databases made by an older tracedb, read without changing them (issue 55).

A writable open migrates a database (schema/tables/migrate.sql); a read-only one
(query, sql, report, chart, advise, diff) must not write, so this version's views
would meet tables without the columns or tables they read ("Binder Error ...
average_power_w"). `shadow_old_tables` puts temporary stand-ins in front of them on
that connection only: a table the file lacks as an empty temporary table of this
version's DDL, a table that lacks columns as a temporary view of it with those
columns added as NULL (the settings tables' `source` as 'user', what the migration
gives them). The file stays as it was; `tracedb migrate --db FILE` migrates it.
"""
import re

from .catalog import ARGS_ZSTD, sql_text
from .sql import rows, sql_ident, statements

_ADD = re.compile(r"ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+) (\w+)", re.I)
_SETTINGS_SOURCE = ("ncu_metric_labels", "metric_sources", "layer_rules", "calibration_reference")


def shadow_old_tables(con):
    """Temporary stand-ins for the tables and columns this version reads that the
    file lacks; returns what was stood in for (table or table.column names)."""
    have = {}
    for t, c in rows(con, "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = "
                          "current_database() AND schema_name = 'main' AND NOT internal"):
        have.setdefault(t, set()).add(c)
    if not have:                 # an empty file, or not a tracedb database: nothing to stand in for
        return []
    done = []
    for name in ("tables/core.sql", "tables/settings.sql"):
        for stmt in statements(sql_text("schema", name)):
            m = re.search(r"CREATE TABLE IF NOT EXISTS (\w+)", stmt)
            if m and m[1] not in have:
                con.execute(stmt.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1).replace(ARGS_ZSTD, ""))
                done.append(m[1])
    added = {}
    for table, column, type_ in _ADD.findall(sql_text("schema", "tables/migrate.sql")):
        if table in have and column not in have[table]:
            added.setdefault(table, []).append(f"CAST(NULL AS {type_}) AS {column}")
    for table in _SETTINGS_SOURCE:
        if table in have and "source" not in have[table]:
            added.setdefault(table, []).append("'user' AS source")
    file_db = rows(con, "SELECT current_database()")[0][0]
    for table, cols in added.items():          # the file's table by its whole name (temp's main is another)
        con.execute(f"CREATE TEMP VIEW {table} AS SELECT *, {', '.join(cols)} FROM {sql_ident(file_db)}.main.{table}")
        done += [f"{table}.{c.rsplit(' AS ', 1)[1]}" for c in cols]
    return done
