"""tracedb: a trace database and query engine for GPU machine-learning profiling.

Data path: file -> ingest/ reader -> Arrow batches or DuckDB scans -> schema/
tables -> queries/ reports -> table, file or chart.
"""
from tracedb.api import connect

__all__ = ["connect"]
__version__ = "0.1.0"
