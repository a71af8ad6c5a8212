"""The saved reports on Spark, over a lake: transpiled with sqlglot from DuckDB SQL
(transpile.py).

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

from . import lake, reports
from .transpile import bound_sql, relations_of, transpile

_SPARK = {}


_LOG4J = """status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n
"""


def _quiet_spark(master):
    """Spark without its start-up noise on stderr (log4j's profile and WARN lines, the
    loopback-hostname warning, the progress bars): errors only. Returns the log4j2
    configuration file the driver is started with; for a local session
    SPARK_LOCAL_IP defaults to the loopback address, unless set (a cluster's
    executors must reach the driver: there it is left alone)."""
    import os
    import tempfile
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python tasks (mapInArrow: the critical path) run in this interpreter, where
        # tracedb and its dependencies are, not in the first python3 on PATH
        import sys
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    path = os.path.join(tempfile.gettempdir(), f"tracedb-spark-log4j2-{os.getuid()}.properties")
    try:
        with open(path) as f:
            if f.read() == _LOG4J:
                return path
    except OSError:
        pass
    with open(path + ".tmp", "w") as f:
        f.write(_LOG4J)
    os.replace(path + ".tmp", path)
    return path


def spark_session(master=None):
    """A Spark session (local[*] unless a master URL is given), made once per process."""
    key = master or "local[*]"
    if key not in _SPARK:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise reports.ReportError("--engine spark needs pyspark: pip install 'tracedb[spark]'") from None
        log4j = _quiet_spark(key)
        _SPARK[key] = (SparkSession.builder.master(key).appName("tracedb")
                       .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
                       .config("spark.ui.showConsoleProgress", "false")
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
    if "spark" not in report.engines:
        raise reports.ReportError(f"report {name} runs on DuckDB only (see docs/reports.md, 'Engines')")
    if report.prepared_by in reports.SPARK_FORMS:       # an analysis's own form on Spark
        return reports.SPARK_FORMS[report.prepared_by](name, params, lake_dir, master)
    sql = _spark_sql(transpile(name, "spark", params, pretty=False))
    datasets = lake.datasets(lake_dir)          # not a lake: said before Spark takes seconds to start
    jobs = lake.job_views()
    need = _relations_needed(relations_of(bound_sql(name, params)[0]), jobs)
    # a table the lake lacks (no run had rows: CPU-only traces have no kernels) is registered
    # empty below; anything else missing would be Spark's AnalysisException, after seconds
    missing = sorted(ds for ds in need if ds not in datasets and ds not in dict(jobs) and ds not in _table_columns())
    if missing:
        raise reports.ReportError(f"report {name}: the lake {lake_dir} has no {', '.join(missing)} (no run in it "
                                  "has such rows), so the report has nothing to read on Spark")
    spark = spark_session(master)
    register(spark, datasets, need, jobs)
    return spark.sql(sql).toArrow()


def register(spark, datasets, need, jobs=None):
    """The relations in need as the session's temporary views: the lake's datasets
    (datasets: lake.datasets), an empty view of a table the lake lacks, and the job
    views (jobs: lake.job_views(), with their own view definitions), from their SQL."""
    jobs = lake.job_views() if jobs is None else jobs
    need = _relations_needed(need, jobs)
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
            spark.sql(spark_sql(select)).createOrReplaceTempView(view)
            have.add(view)
    for ds in need - have:                     # not in this lake: no view of an earlier lake of the session stands in
        spark.catalog.dropTempView(ds)
    return have


def spark_sql(select):
    """A DuckDB SELECT as Spark SQL (sqlglot)."""
    return _spark_sql(sqlglot.transpile(select, read="duckdb", write="spark")[0])


_SPARK_TYPES = {"BIGINT": "bigint", "INTEGER": "int", "DOUBLE": "double", "BOOLEAN": "boolean", "VARCHAR": "string",
                "JSON": "string", "TIMESTAMP": "timestamp", "FLOAT": "float", "SMALLINT": "smallint"}


@functools.cache
def _table_columns():
    """table -> [(column, DuckDB type)] of the schema's tables (tables/core.sql alone)."""
    import duckdb

    from ..store.catalog import sql_text
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
