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
import os
from contextlib import contextmanager

import pyarrow as pa

from .store import db
from .query import reports
from .errors import TracedbError
from .ingest import IngestError


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
        from .present import charts
        name = name or (charts.chart_for(self.report) if self.report else None)
        if name is None:
            have = ", ".join(f"{c} ({chart.report})" for c, chart in charts.CHARTS.items())
            raise reports.ReportError(f"no chart for {'report ' + self.report if self.report else 'ad-hoc SQL'} "
                                      f"(charts and their reports: {have})")
        return _Chart(charts.from_table(name, self.arrow))

    def __len__(self):
        return self.arrow.num_rows

    @property
    def caveat(self):
        """What to know before acting on these rows (a forced ncu pairing they read), or None."""
        return reports.caveat_of(self.arrow)

    def __repr__(self):
        from .present.output import render
        return render(self.arrow, width=120) + (f"\ncaveat: {self.caveat}" if self.caveat else "")

    def _repr_html_(self, limit=200):
        import html
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.arrow.column_names)
        body = []
        for r in self.arrow.slice(0, limit).to_pylist():
            body.append("<tr>" + "".join(f"<td>{'NULL' if v is None else html.escape(str(v))}</td>"
                                         for v in r.values()) + "</tr>")
        more = f"<p>{self.arrow.num_rows - limit} more rows</p>" if self.arrow.num_rows > limit else ""
        title = f"<p><b>{html.escape(self.report)}</b></p>" if self.report else ""
        title += f"<p>caveat: {html.escape(self.caveat)}</p>" if self.caveat else ""
        return (f"{title}<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                f"<p>({self.arrow.num_rows} rows)</p>{more}")


class _Chart:
    """A chart for notebooks: draws itself, saves by extension."""

    def __init__(self, figure):
        self.figure = figure

    def save(self, path):
        from .present import charts
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
        if not write and not os.path.exists(self.path):
            raise FileNotFoundError(f"{self.path}: no such database (ingest into it first)")
        con = db.connect(self.path, read_only=not write)
        if sandboxed and not write:
            from .store.sandbox import lock
            lock(con)
        try:
            yield con
        finally:
            con.close()

    def __enter__(self):
        self._held = db.connect(self.path, read_only=self.read_only is not False)
        if self.read_only is not False:         # a read-only block: sandboxed, as each call outside one
            from .store.sandbox import lock
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
               start_ns=None, interval_ms=None, job=None, rank=None, iterations_from=None, jobs=None,
               op_totals=False, path_totals=False):
        """Load a file as `tracedb ingest` does (ingest/batch.py: the same pairing of
        ncu reports and logs): one IngestResult; or a directory's files (a job's rank
        traces, a capture folder's trace and logs): a list. The first file that fails
        raises its IngestError, after the others are loaded. op_totals: as
        `--op-totals`, each trace's per-iteration op and FLOP totals stored too.
        path_totals: as `--path-totals`, each trace run's critical path sums per
        iteration stored after its load (a failure there: a warning, the run stays)."""
        from .ingest.batch import ingest_groups_into
        from .ingest.jobs import ingest_groups
        options = {"offset_ns": offset_ns, "tz": tz, "columns": columns, "start_ns": start_ns,
                   "interval_ms": interval_ms, "iterations_from": iterations_from, "op_totals": op_totals}
        groups = ingest_groups([path], job=job, rank=rank)
        sums_of = []
        with self._con(write=True) as con:
            outcomes = ingest_groups_into(con, groups, run=run, pair_with=pair_with, jobs=jobs, options=options)
            if path_totals:
                import warnings
                from .analysis import path_totals as pt
                sums_of = pt.loaded_trace_runs(con, outcomes)
                if self._held is not None:      # (a held connection: walked on it, in this process)
                    pt.store_runs(con, sums_of, warnings.warn)
                    sums_of = []
        if sums_of:          # the file closed: the critical path's workers can open it
            pt.store_in_file(lambda: db.connect(self.path, read_only=True, wait_s=30.0),
                             lambda: db.connect(self.path, wait_s=30.0), sums_of, warnings.warn)
        failed = next((o for o in outcomes if o.failed), None)
        if failed is not None:
            raise IngestError(failed.path, next(t for level, t in failed.lines if level == "error")
                              .removeprefix(f"{failed.path}: "))
        given = {str(f): i for i, f in enumerate(f for files, _ in groups for f in files)}
        results = [o.result for o in sorted(outcomes, key=lambda o: given.get(str(o.path), len(given)))]
        return results if os.path.isdir(path) else results[0]

    def match(self, trace_run, ncu_run, iteration=None, whole_run=False):
        """Pair the kernels of an ncu run with a trace run's; returns the match_runs row."""
        from .ingest.match import match
        with self._con(write=True) as con:
            return match(con, trace_run, ncu_run, iteration=iteration, whole_run=whole_run)

    def remove(self, run):
        """Remove a run from every table (tracedb rm)."""
        from .store import admin
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
        from .present import charts
        if run is not None:
            params["run"] = run
        with self._con() as con:
            return _Chart(charts.build(con, name, params))

    def export(self, path=None, lake=None, run=None, perfetto=False):
        """perfetto=True: one trace run as Chrome trace JSON at `path`; else the runs
        (run: one name or a list) into the Parquet lake folder `lake`."""
        with self._con(sandboxed=False) as con:
            if perfetto:
                from .present import perfetto as pf
                return pf.export(con, run, path)
            from .query import lake as lk
            return lk.export(con, lake or path, [run] if isinstance(run, str) else run)

    def reports(self):
        return list(reports.all_reports())


class DatabaseFileError(TracedbError):
    """The database file named (--db) cannot be opened: absent, not DuckDB's, held."""


# Bytes 8..11 of every DuckDB database file.
DUCKDB_MAGIC = b"DUCK"


def check_db_file(path, must_exist):
    """DatabaseFileError unless path is a DuckDB file (or absent/empty where it may be
    created): DuckDB would open a .csv/.json/.parquet file as an empty in-memory
    database, and an ingest would then print `loaded` and keep nothing."""
    if not path:
        raise DatabaseFileError("give --db FILE (or set TRACEDB_DB)")
    if not os.path.exists(path):
        if must_exist:
            raise DatabaseFileError(f"{path}: no such database (create it with `tracedb ingest ... --db {path}`)")
        return
    if os.path.isdir(path):
        raise DatabaseFileError(f"{path}: is a directory, not a database file")
    if not os.path.isfile(path):          # a FIFO would block the read below for ever
        raise DatabaseFileError(f"{path}: is a pipe, device or socket, not a database file")
    with open(path, "rb") as f:
        head = f.read(12)
    if not head and must_exist:        # DuckDB's own word: "Cannot launch in-memory database in read-only mode"
        raise DatabaseFileError(f"{path}: an empty file, not a DuckDB database")
    if head and head[8:12] != DUCKDB_MAGIC:
        raise DatabaseFileError(f"{path}: not a DuckDB database (--db names the database file; "
                                "give the data file as PATH of tracedb ingest)")


def open_database(path, write=False, wait_s=0.0, say=None, sandboxed=None):
    """A command's connection to the database file it names (read-only unless it
    writes), every failure one DatabaseFileError line. A read-only one (unless
    sandboxed=False: an export writes files) has other files out of reach
    (store/sandbox.py): a stored view of a database from elsewhere cannot read a
    local file into a report."""
    import duckdb
    from .store.lock import DatabaseLocked
    from .store.sandbox import lock
    check_db_file(path, must_exist=not write)
    try:
        con = db.connect(path, read_only=not write, wait_s=wait_s, say=say)
        return lock(con) if (not write if sandboxed is None else sandboxed) else con
    except DatabaseLocked as e:
        raise DatabaseFileError(str(e)) from None
    except duckdb.Error as e:
        raise DatabaseFileError(f"{path}: cannot open database ({str(e).splitlines()[0]})") from None


def connect(path, read_only=None):
    """A tracedb database file. Each call opens it read-only unless it writes (and
    creates it on the first write); use `with connect(path) as t:` to keep one
    connection for a block (read_only=False to write in it)."""
    return TraceDB(path, read_only=read_only)
