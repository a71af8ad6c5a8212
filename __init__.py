"""tracedb: a trace database and query engine for GPU machine-learning profiling.

Data path: file -> ingest/ reader -> Arrow batches or DuckDB scans -> schema/
tables -> queries/ reports -> table, file or chart.
"""
from tracedb.api import connect
from tracedb.capture import capture

__all__ = ["capture", "connect"]
__version__ = "0.1.0"
