"""A saved report's SQL for other engines: its parameters bound as literals, the
statement rewritten by sqlglot from DuckDB's dialect (`tracedb query --print-sql
--dialect`), and the relations it reads (what a lake registers for it)."""
import re

import sqlglot

from ..store.sql import sql_literal
from . import reports

_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def bound_sql(name, params):
    """The report's SQL with its parameters as literals (for engines without $params)."""
    report = reports.get(name)
    values = reports.bound_params(report, params or {})
    body = "\n".join(l for l in report.sql.splitlines() if not l.lstrip().startswith("--"))
    return _PARAM.sub(lambda m: sql_literal(values.get(m.group(1))), body), report


def transpile(name, dialect, params=None, pretty=True):
    """The report in another SQL dialect (spark, trino, bigquery, postgres ...)."""
    sql, _ = bound_sql(name, params)
    try:
        return sqlglot.transpile(sql, read="duckdb", write=dialect, pretty=pretty)[0]
    except sqlglot.errors.SqlglotError as e:
        raise reports.ReportError(f"report {name} cannot be written in {dialect}: {str(e).splitlines()[0]}") from None
    except ValueError as e:
        raise reports.ReportError(f"unknown SQL dialect {dialect!r} ({e})") from None


def relations_read(report):
    """Names of the tables and views a report's SQL reads (its CTEs left out)."""
    return relations_of(bound_sql(report.name, {})[0])


def relations_of(sql):
    """Names of the tables and views a DuckDB SELECT reads (its CTEs left out)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    ctes = {c.alias_or_name for c in tree.find_all(sqlglot.exp.CTE)}
    return {t.name for t in tree.find_all(sqlglot.exp.Table) if t.name and t.name not in ctes}
