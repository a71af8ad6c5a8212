"""tracedb: a trace database and query engine for GPU machine-learning profiling.

Data path: file -> ingest/ reader -> Arrow batches or DuckDB scans -> schema/
tables -> queries/ reports -> table, file or chart.
"""
__version__ = "0.1.0"

from . import analysis  # noqa: F401 (the analyses register with the report engine)
from .api import connect
from .capture.session import capture

__all__ = ["capture", "connect"]
