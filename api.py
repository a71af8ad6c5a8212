"""Python API: the same reports and SQL as the command line, for notebooks.

    import tracedb
    t = tracedb.connect("profile.duckdb")
    t.ingest("trace.json.gz")
    t.query("gpu_utilization", run="r1", batch_size=64).to_polars()
"""
import pyarrow as pa

from tracedb import db, reports
from tracedb.ingest import ingest_file


class Result:
    """A report's or query's rows: Arrow underneath, polars or pandas on request."""

    def __init__(self, table: pa.Table):
        self.arrow = table

    def to_arrow(self):
        return self.arrow

    def to_polars(self):
        import polars as pl
        return pl.from_arrow(self.arrow)

    def to_pandas(self):
        return self.arrow.to_pandas()

    def __len__(self):
        return self.arrow.num_rows


class TraceDB:
    def __init__(self, path, read_only=False):
        self.path = str(path)
        self.con = db.connect(self.path, read_only=read_only)

    def ingest(self, path, run=None, pair_with=None, job=None, rank=None):
        """Load a file (one IngestResult), or a directory's rank traces as one job (a list)."""
        import os
        from tracedb.jobs import ingest_groups
        groups = ingest_groups([path], job=job, rank=rank)
        results = [ingest_file(self.con, f, run=run, pair_with=pair_with, options=o) for files, o in groups for f in files]
        return results if os.path.isdir(path) else results[0]

    def query(self, name, run=None, **params):
        if run is not None:
            params["run"] = run
        return Result(reports.run(self.con, name, params))

    def sql(self, text, params=None):
        return Result(self.con.sql(text, params=params).to_arrow_table())

    def reports(self):
        return list(reports.all_reports())

    def close(self):
        self.con.close()


def connect(path, read_only=False):
    """Open (or create) a tracedb database file."""
    return TraceDB(path, read_only=read_only)
