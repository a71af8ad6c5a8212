"""Python API: the same reports and SQL as the command line, for notebooks.

    import tracedb
    t = tracedb.connect("profile.duckdb")
    t.ingest("trace.json.gz")                       # opens the file for writing, then closes it
    r = t.query("gpu_utilization", run="r1", batch_size=64)
    r                                               # shows itself as a table
    r.to_polars(); r.to_pandas(); r.chart()

A TraceDB holds no connection between calls: each call opens the file (read-only
unless it writes) and closes it, so a notebook never locks the CLI out of the same
file. Inside `with tracedb.connect(path) as t:` one connection (writable when
read_only=False is given) is kept for the block.
"""
from contextlib import contextmanager

import pyarrow as pa

from tracedb import db, reports
from tracedb.ingest import ingest_file


class Result:
    """A report's or query's rows: Arrow underneath, polars or pandas on request;
    shows itself in a notebook (_repr_html_) and at the prompt (__repr__)."""

    def __init__(self, table: pa.Table, report=None):
        self.arrow = table
        self.report = report      # the saved report it came from, if any

    def to_arrow(self):
        return self.arrow

    def to_polars(self):
        import polars as pl
        return pl.from_arrow(self.arrow)

    def to_pandas(self):
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("to_pandas needs pandas: pip install 'tracedb[pandas]'") from None
        return self.arrow.to_pandas()

    def chart(self, name=None):
        """The chart of the report these rows came from (charts.CHARTS), as a Figure
        that a notebook draws; .save(path) writes html/png/svg."""
        from tracedb import charts
        name = name or (charts.chart_for(self.report) if self.report else None)
        if name is None:
            have = ", ".join(f"{c} ({r})" for c, (r, _) in charts.CHARTS.items())
            raise reports.ReportError(f"no chart for {'report ' + self.report if self.report else 'ad-hoc SQL'} "
                                      f"(charts and their reports: {have})")
        return _Chart(charts.from_table(name, self.arrow))

    def __len__(self):
        return self.arrow.num_rows

    def __repr__(self):
        from tracedb.output import render
        return render(self.arrow, width=120)

    def _repr_html_(self, limit=200):
        import html
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.arrow.column_names)
        body = []
        for r in self.arrow.slice(0, limit).to_pylist():
            body.append("<tr>" + "".join(f"<td>{'NULL' if v is None else html.escape(str(v))}</td>"
                                         for v in r.values()) + "</tr>")
        more = f"<p>{self.arrow.num_rows - limit} more rows</p>" if self.arrow.num_rows > limit else ""
        title = f"<p><b>{html.escape(self.report)}</b></p>" if self.report else ""
        return (f"{title}<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                f"<p>({self.arrow.num_rows} rows)</p>{more}")


class _Chart:
    """A chart for notebooks: draws itself, saves by extension."""

    def __init__(self, figure):
        self.figure = figure

    def save(self, path):
        from tracedb import charts
        charts.save(self.figure, path)

    def to_dict(self):
        return self.figure.to_dict()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.figure._repr_mimebundle_(include, exclude)


class TraceDB:
    def __init__(self, path, read_only=None):
        self.path = str(path)
        self.read_only = read_only     # None: per call; True / False: for a `with` block
        self._held = None

    @contextmanager
    def _con(self, write=False, sandboxed=True):
        """A connection for one call; a read-only one runs with other files out of reach
        (sandbox.lock, as `tracedb sql` and the CLI's reports) unless sandboxed=False
        (an export writes files)."""
        if self._held is not None:
            if not sandboxed and self.read_only is not False:
                raise PermissionError(f"{self.path}: a read-only `with` block reads this database only: "
                                      "export outside the block")
            if write and self.read_only is not False:
                raise PermissionError(f"{self.path}: opened read-only (tracedb.connect(..., read_only=False) to write)")
            yield self._held
            return
        import os
        if not write and not os.path.exists(self.path):
            raise FileNotFoundError(f"{self.path}: no such database (ingest into it first)")
        con = db.connect(self.path, read_only=not write)
        if sandboxed and not write:
            from tracedb.sandbox import lock
            lock(con)
        try:
            yield con
        finally:
            con.close()

    def __enter__(self):
        self._held = db.connect(self.path, read_only=self.read_only is not False)
        if self.read_only is not False:         # a read-only block: sandboxed, as each call outside one
            from tracedb.sandbox import lock
            lock(self._held)
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._held is not None:
            self._held.close()
            self._held = None

    # -- writing --
    def ingest(self, path, run=None, pair_with=None, offset_ns=None, tz=None, columns=None,
               start_ns=None, interval_ms=None, job=None, rank=None):
        """Load a file (see `tracedb ingest`): one IngestResult; or a directory's rank
        traces as one job: a list. The power-log options are those of the CLI."""
        import os
        from tracedb.jobs import ingest_groups
        options = {"offset_ns": offset_ns, "tz": tz, "columns": columns, "start_ns": start_ns,
                   "interval_ms": interval_ms}
        groups = ingest_groups([path], job=job, rank=rank)
        with self._con(write=True) as con:
            results = [ingest_file(con, f, run=run, pair_with=pair_with, options={**options, **o})
                       for files, o in groups for f in files]
        return results if os.path.isdir(path) else results[0]

    def match(self, trace_run, ncu_run, iteration=None, whole_run=False):
        """Pair the kernels of an ncu run with a trace run's; returns the match_runs row."""
        from tracedb.match import match
        with self._con(write=True) as con:
            return match(con, trace_run, ncu_run, iteration=iteration, whole_run=whole_run)

    def remove(self, run):
        """Remove a run from every table (tracedb rm)."""
        from tracedb import admin
        with self._con(write=True) as con:
            return admin.remove_run(con, run)

    # -- reading --
    def query(self, name, run=None, **params):
        if run is not None:
            params["run"] = run
        with self._con() as con:
            return Result(reports.run(con, name, params), report=name)

    def sql(self, text, params=None):
        """Rows of SQL on the database, with other files out of reach (external access
        off, configuration locked: tracedb sql's sandbox); read-only."""
        if self._held is not None and self.read_only is False:
            raise PermissionError(f"{self.path}: sql() runs sandboxed and read-only: call it outside a "
                                  "writable `with` block")
        with self._con() as con:
            return Result(con.sql(text, params=params).to_arrow_table())

    def chart(self, name, run=None, **params):
        """The chart `name` (tracedb chart) over its report's rows."""
        from tracedb import charts
        if run is not None:
            params["run"] = run
        with self._con() as con:
            return _Chart(charts.build(con, name, params))

    def export(self, path=None, lake=None, run=None, perfetto=False):
        """perfetto=True: one trace run as Chrome trace JSON at `path`; else the runs
        (run: one name or a list) into the Parquet lake folder `lake`."""
        with self._con(sandboxed=False) as con:
            if perfetto:
                from tracedb import perfetto as pf
                return pf.export(con, run, path)
            from tracedb import lake as lk
            return lk.export(con, lake or path, [run] if isinstance(run, str) else run)

    def reports(self):
        return list(reports.all_reports())


def connect(path, read_only=None):
    """A tracedb database file. Each call opens it read-only unless it writes (and
    creates it on the first write); use `with connect(path) as t:` to keep one
    connection for a block (read_only=False to write in it)."""
    return TraceDB(path, read_only=read_only)
