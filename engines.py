"""The saved reports on other engines: transpiled with sqlglot from DuckDB SQL.

Reports are written once, in DuckDB SQL. For another dialect the parameters
are bound as literals and sqlglot rewrites the statement; on Spark it runs
over the lake's Parquet datasets registered as views (lake.py materializes
the views the reports read). A report says which engines it runs on in its
header (`-- engines: duckdb, spark`); reports built on DuckDB-only macros
(the energy reports' ASOF-joined integrals) stay DuckDB-only.
"""
import functools
import re

import sqlglot

from tracedb import lake, reports
from tracedb.db import sql_literal

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


def engines_of(report):
    """Engines a report declares (its header's `engines:`), duckdb by default."""
    return report.engines


def relations_read(report):
    """Names of the tables and views a report's SQL reads (its CTEs left out)."""
    return relations_of(bound_sql(report.name, {})[0])


def relations_of(sql):
    """Names of the tables and views a DuckDB SELECT reads (its CTEs left out)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    ctes = {c.alias_or_name for c in tree.find_all(sqlglot.exp.CTE)}
    return {t.name for t in tree.find_all(sqlglot.exp.Table) if t.name and t.name not in ctes}


_SPARK = {}


def spark_session(master=None):
    """A Spark session (local[*] unless a master URL is given), made once per process."""
    key = master or "local[*]"
    if key not in _SPARK:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise reports.ReportError("--engine spark needs pyspark: pip install 'tracedb[spark]'") from None
        _SPARK[key] = (SparkSession.builder.master(key).appName("tracedb")
                       .config("spark.sql.session.timeZone", "UTC")
                       .config("spark.ui.enabled", "false")
                       .config("spark.sql.ansi.enabled", "false")
                       # partition values (run names, ranks) stay strings: a run named "123" is not a number
                       .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
                       .getOrCreate())
        _SPARK[key].sparkContext.setLogLevel("ERROR")
    return _SPARK[key]


def _spark_sql(sql):
    """sqlglot writes DuckDB's exact percentile_cont (and median) as Spark's approximate
    percentile: keep it exact."""
    return re.sub(r"\bPERCENTILE_APPROX\(", "PERCENTILE(", sql)


def run_spark(name, params, lake_dir, master=None):
    """Run a saved report on Spark over a lake; returns a pyarrow Table."""
    report = reports.get(name)
    if "spark" not in engines_of(report):
        raise reports.ReportError(f"report {name} runs on DuckDB only (see docs/reports.md, 'Engines')")
    sql = _spark_sql(transpile(name, "spark", params, pretty=False))
    datasets = lake.datasets(lake_dir)          # not a lake: said before Spark takes seconds to start
    jobs = lake.job_views()
    need = _relations_needed(relations_of(bound_sql(name, params)[0]), jobs)
    spark = spark_session(master)
    have = set()
    # only what the report reads: each dataset's registration lists its files and reads
    # their footers (mergeSchema), about 0.2 s each on 2 cores, seconds for a whole lake
    for ds in sorted(need):
        if ds in datasets:
            spark.read.option("mergeSchema", "true").parquet(datasets[ds]).createOrReplaceTempView(ds)
            have.add(ds)
    for ds in sorted(need - have):             # a table the lake lacks (no run had rows): empty, so that a
        if _empty_table(spark, ds):            # job view over it (job_stragglers over collectives) still stands
            have.add(ds)
    for view, select in jobs:                  # the views that join a job's runs, from their own SQL
        if view in need and relations_of(select) <= have:   # (a lake without collectives has no collective_calls)
            spark.sql(_spark_sql(sqlglot.transpile(select, read="duckdb", write="spark")[0])).createOrReplaceTempView(view)
            have.add(view)
    for ds in need - have:                     # not in this lake: no view of an earlier lake of the session stands in
        spark.catalog.dropTempView(ds)
    return spark.sql(sql).toArrow()


_SPARK_TYPES = {"BIGINT": "bigint", "INTEGER": "int", "DOUBLE": "double", "BOOLEAN": "boolean", "VARCHAR": "string",
                "JSON": "string", "TIMESTAMP": "timestamp", "FLOAT": "float", "SMALLINT": "smallint"}


@functools.cache
def _table_columns():
    """table -> [(column, DuckDB type)] of the schema's tables (tables/core.sql alone)."""
    import duckdb

    from tracedb.db import sql_text
    con = duckdb.connect()
    con.execute(sql_text("schema", "tables/core.sql"))
    out = {}
    for t, c, ty in con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                                "ORDER BY table_name, column_index").fetchall():
        out.setdefault(t, []).append((c, ty))
    con.close()
    return out


def _empty_table(spark, name):
    """Register an empty view of table `name` (its columns from the schema); False when it is no table."""
    cols = _table_columns().get(name)
    if not cols:
        return False
    ddl = ", ".join(f"`{c}` {_SPARK_TYPES.get(t, 'string')}" for c, t in cols)
    spark.createDataFrame([], ddl).createOrReplaceTempView(name)
    return True


def _relations_needed(read, jobs):
    """The relations a report reads, with those of the job views it reads (in turn)."""
    selects = dict(jobs)
    need, todo = set(), list(read)
    while todo:
        r = todo.pop()
        if r not in need:
            need.add(r)
            todo.extend(relations_of(selects[r]) if r in selects else ())
    return need
