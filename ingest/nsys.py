"""Nsight Systems profiles: the SQLite export (`nsys export --type sqlite`) loaded as a trace run.

The export's tables are read with Python's sqlite3 (DuckDB's sqlite extension is
downloaded at run time, so it cannot be relied on), a range of rowids at a time,
each as one CSV text that SQLite writes and Arrow parses (nsys_csv.py), by the
reading thread or, for a large export on many cores, by worker processes that stage
each range as a Parquet file DuckDB then loads in parts on all its threads; and
turned by schema/load/nsys_rows.sql into the rows a Kineto trace gives the events
table; from there the trace's own SQL (trace_events.sql, derive_trace.sql,
collectives.sql, trace_system.sql) derives kernels, launches, ops and iterations,
so every report of a trace run works on an nsys run.

Tables and columns are found by what they hold, not by one nsys version's names
(SCHEMA below: NVTX_EVENTS or a later NVTX_EVENTS_Vn, a kernel name in demangledName
or shortName ...); a table that lacks a column the load needs is refused in one
line. An `.nsys-rep` is exported with the user's `nsys` when it is on PATH.
"""
import hashlib
import json
import os
import queue
import re
import shutil
import sqlite3
import subprocess
import threading
import warnings
from contextlib import contextmanager

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..store.catalog import sql_text
from ..store.sql import rows, run_script, run_script_over, scalar, statements
from ..store.tuning import memory_cap
from .errors import IngestError
from . import nsys_csv, nsys_metrics
from .reader import Prepared, Reader
from .trace import TraceReader, derive, store_op_totals
from ..progress import phase, status
from .source import compression, hash_file, head, plain_copy
from .trace_json import KeptThread, started

# DuckDB's row group. What one statement inserts is whole row groups (but a table's
# last part): a part-filled one in each batch of 512 Ki rows (or in each staged file of
# 128 Ki) left the table's row groups part-filled, and the checkpoint after the load
# rewrote them (300 MB export: 0.57 against 0.21 CPU s with whole ones, 1.00 against
# 0.23 from staged files; the file 6-11% larger).
_ROW_GROUP = 122880
# Rows per batch read from SQLite and staged: memory stays bounded whatever the export's size.
BATCH_ROWS = 4 * _ROW_GROUP
SQLITE_MAGIC = "SQLite format 3"

# Each kind of source table: how its name looks, and for each column the load
# reads (its name in nsys_rows.sql) the names it has had in exports; a column
# marked required (!) must be there, the others are NULL where missing.
SCHEMA = {
    "kernel": (r"CUPTI_ACTIVITY_KIND_(CONCURRENT_)?KERNEL(_V\d+)?", {
        "start_ns": "!start", "end_ns": "!end", "device": "deviceId", "context": "contextId",
        "stream": "streamId", "corr": "!correlationId", "gpid": "globalPid",
        "name_id": "demangledName|name", "short_id": "shortName|mangledName", "regs": "registersPerThread",
        "gx": "gridX", "gy": "gridY", "gz": "gridZ", "bx": "blockX", "by": "blockY", "bz": "blockZ",
        "ssm": "staticSharedMemory", "dsm": "dynamicSharedMemory", "launch_type": "launchType",
        "graph_id": "graphId", "graph_node_id": "graphNodeId"}),
    "runtime": (r"CUPTI_ACTIVITY_KIND_(RUNTIME|DRIVER)(_V\d+)?", {
        "start_ns": "!start", "end_ns": "!end", "gtid": "globalTid", "corr": "!correlationId",
        "name_id": "!nameId|name", "ret": "returnValue", "event_class": "eventClass"}),
    "memcpy": (r"CUPTI_ACTIVITY_KIND_MEMCPY(_V\d+)?", {
        "start_ns": "!start", "end_ns": "!end", "device": "deviceId", "context": "contextId",
        "stream": "streamId", "corr": "!correlationId", "gpid": "globalPid", "bytes": "bytes",
        "copy_kind": "copyKind", "src_kind": "srcKind", "dst_kind": "dstKind",
        "src_device": "srcDeviceId", "dst_device": "dstDeviceId", "graph_node_id": "graphNodeId"}),
    "memset": (r"CUPTI_ACTIVITY_KIND_MEMSET(_V\d+)?", {
        "start_ns": "!start", "end_ns": "!end", "device": "deviceId", "context": "contextId",
        "stream": "streamId", "corr": "!correlationId", "gpid": "globalPid", "bytes": "bytes",
        "mem_kind": "memKind|memoryKind", "value": "value", "graph_node_id": "graphNodeId"}),
    "nvtx": (r"NVTX_EVENTS(_V\d+)?", {
        "start_ns": "!start", "end_ns": "end", "event_type": "!eventType", "text": "text",
        "text_id": "textId", "gtid": "globalTid", "end_gtid": "endGlobalTid", "domain_id": "domainId",
        "category": "category", "color": "color",
        "payload": "+int64Value|uint64Value|doubleValue|uint32Value|int32Value|floatValue|jsonText",
        "json_text_id": "jsonTextId"}),
}
# Columns read as text; all others are integers. A spec starting with + is the
# first non-NULL of the columns named that the table has, as text (NVTX payloads:
# one column of seven, most of them NULL, read as one).
_TEXT = {"text", "payload"}
# What a table of each kind holds, for an export whose names none of SCHEMA's
# patterns know: its columns include one of these sets (lower case), and not the
# columns that mark another kind.
SIGNATURE = {
    "kernel": ({"start", "end", "correlationid", "gridx", "blockx"}, set()),
    "runtime": ({"start", "end", "correlationid", "nameid", "globaltid"}, {"deviceid", "eventtype"}),
    "memcpy": ({"start", "end", "correlationid", "copykind", "bytes"}, {"gridx"}),
    "memset": ({"start", "end", "correlationid", "bytes", "value"}, {"gridx", "copykind"}),
    "nvtx": ({"start", "eventtype", "globaltid", "textid"}, {"correlationid"}),
}
_DOUBLE = set()


def _version_key(name):
    m = re.search(r"_V(\d+)$", name)
    return int(m.group(1)) if m else 0


def qid(name):
    """A table or column name of the export as an SQL identifier: double-quoted, its
    double quotes doubled (a name is the file's, and may hold any character)."""
    return '"' + str(name).replace('"', '""') + '"'


class Export:
    """An open export: its tables and columns, and what they say about the file."""
    qid = staticmethod(qid)

    def __init__(self, path, db_path):
        self.path = path
        self.db_path = db_path
        try:
            self.con = sqlite3.connect(f"file:{db_path}?mode=ro&immutable=1", uri=True)
            self.tables = {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        except sqlite3.DatabaseError as e:
            raise IngestError(path, f"not a readable SQLite database ({e})") from None
        self.columns = {}
        self.pid = None           # the one process to read (--rank of a report of several), else None

    def cols(self, table):
        if table not in self.columns:
            self.columns[table] = [r[1] for r in self.con.execute(f"PRAGMA table_info({qid(table)})")]
        return self.columns[table]

    def tables_like(self, pattern):
        """The tables whose whole name matches pattern, latest version (_Vn) first."""
        return sorted((t for t in self.tables if re.fullmatch(pattern, t)), key=_version_key, reverse=True)

    def source(self, kind, event_types=(34, 59, 60)):
        """(table, SELECT of its columns under nsys_rows.sql's names) of a kind, or None
        when the export has no such table; IngestError when it lacks a needed column.
        NVTX: the rows of event_types only (ranges and marks)."""
        table = self.table_of(kind)
        if table is None:
            return None
        wanted = SCHEMA[kind][1]
        have = {c.lower(): c for c in self.cols(table)}
        parts, where = [], ""
        for alias, spec in wanted.items():
            required = spec.startswith("!")
            names = spec.lstrip("!").split("|")
            if spec.startswith("+"):
                found = [have[n.lower()] for n in spec[1:].split("|") if n.lower() in have]
                parts.append(f"coalesce({', '.join('CAST(' + qid(c) + ' AS TEXT)' for c in found)}, NULL) "
                             f"AS {alias}" if found else f"NULL AS {alias}")
                continue
            found = next((have[n.lower()] for n in names if n.lower() in have), None)
            if found is None and required:
                raise IngestError(self.path, f"table {table} has no {' or '.join(names)} column: "
                                             f"an Nsight Systems export tracedb cannot read ({self.version_text()})")
            parts.append(f"{qid(found)} AS {alias}" if found else f"NULL AS {alias}")
            if alias == "event_type":        # (NVTX: the event types asked for)
                where = f' WHERE {qid(found)} IN ({", ".join(str(int(t)) for t in event_types)})'
        if self.pid is not None:
            who = next((have[c.lower()] for c in ("globalPid", "globalTid") if c.lower() in have), None)
            if who:
                where += (" AND" if where else " WHERE") + f" ({qid(who)} >> 24) & 16777215 = {int(self.pid)}"
        return table, f'SELECT {", ".join(parts)} FROM {qid(table)}{where}'

    def cuda_processes(self):
        """The processes that ran GPU activity, as (pid, lowest device), in rank order:
        by their lowest device (rank N of a job mostly runs on GPU N), then pid."""
        found = {}
        for kind in ("kernel", "memcpy", "memset"):
            table = self.table_of(kind)
            if table and {"globalpid", "deviceid"} <= {c.lower() for c in self.cols(table)}:
                for gpid, dev in self.con.execute(f"SELECT globalPid, min(deviceId) FROM {qid(table)} "
                                                  "GROUP BY globalPid"):
                    if gpid is not None:
                        pid = (gpid >> 24) & 0xFFFFFF
                        devs = [d for d in (found.get(pid), dev) if d is not None]
                        found[pid] = min(devs) if devs else None
        return sorted(found.items(), key=lambda x: (x[1] if x[1] is not None else 1 << 62, x[0]))

    def table_of(self, kind):
        """The table a kind is read from: by its name (the latest version), else by its columns; or None."""
        tables = self.tables_like(SCHEMA[kind][0]) or self.tables_holding(kind)
        return tables[0] if tables else None

    def tables_holding(self, kind):
        """The tables, known by no pattern of SCHEMA, whose columns are those of a kind's table."""
        if not hasattr(self, "_unnamed"):
            known = {t for p, _ in SCHEMA.values() for t in self.tables_like(p)}
            self._unnamed = sorted(t for t in self.tables if t not in known and not t.startswith(("ENUM_", "sqlite_")))
        need, never = SIGNATURE[kind]
        return [t for t in self._unnamed
                if need <= (cols := {c.lower() for c in self.cols(t)}) and not never & cols]

    def meta(self):
        """META_DATA_EXPORT (or EXPORT_META_DATA) as a dict (a repeated name: the first value)."""
        out = {}
        for t in self.tables_like(r"(META_DATA_EXPORT|EXPORT_META_DATA)"):
            if {"name", "value"} <= {c.lower() for c in self.cols(t)}:
                for k, v in self.con.execute(f"SELECT name, value FROM {qid(t)}"):
                    out.setdefault(k, v)
        return out

    def version_text(self):
        m = self.meta()
        v = m.get("EXPORT_PRODUCT_VERSION")
        s = m.get("EXPORT_SCHEMA_VERSION")
        return (f"nsys {v}" if v else "nsys version not recorded") + (f", export schema {s}" if s else "")

    def rows(self, table, cols):
        """All rows of a small table as dicts of the named columns that exist."""
        have = {c.lower(): c for c in self.cols(table)}
        sel = [qid(have[c.lower()]) if c.lower() in have else "NULL" for c in cols]
        return [dict(zip(cols, r)) for r in self.con.execute(f'SELECT {", ".join(sel)} FROM {qid(table)}')]

    def rowid_spans(self, table, batch_rows):
        """(lo, hi) rowid ranges of the table, batch_rows rowids each, in rowid order
        (_rowid_ranges). Rowids so far apart that their span would make more than
        SPAN_RANGES ranges, and more than twice as many rowids as rows, are split by
        rows counted (the count is a scan of the table: a span of fewer ranges is not
        counted). None for a table without rowids (a view, or one whose rowids are
        NULL) that holds rows: it is read row by row."""
        q = qid(table)
        try:
            # (two statements: SQLite finds a lone min or max of rowid at the b-tree's end,
            # and scans the whole table for both in one: 0.9 s for the 1 GB export)
            lo = self.con.execute(f"SELECT min(rowid) FROM {q}").fetchone()[0]
            hi = self.con.execute(f"SELECT max(rowid) FROM {q}").fetchone()[0]
        except sqlite3.OperationalError:          # (a view: no rowid)
            return None
        if lo is None:
            return None if self.con.execute(f"SELECT 1 FROM {q} LIMIT 1").fetchone() else []
        if hi - lo + 1 <= SPAN_RANGES * batch_rows or \
                hi - lo + 1 <= 2 * self.con.execute(f"SELECT count(*) FROM {q}").fetchone()[0]:
            return [(a, min(a + batch_rows - 1, hi)) for a in range(lo, hi + 1, batch_rows)]
        starts = [r[0] for r in self.con.execute(
            f"SELECT rowid FROM (SELECT rowid, row_number() OVER (ORDER BY rowid) - 1 AS i FROM {q}) "
            f"WHERE i % {batch_rows} = 0 ORDER BY rowid")]
        return [(a, b - 1) for a, b in zip(starts, starts[1:] + [hi + 1])]

    def first_table(self, *names):
        return next((n for n in names if n in self.tables), None)

    def close(self):
        self.con.close()


def _is_export(ex):
    """An Nsight Systems export: its string table, and its export metadata or a table of its own kinds."""
    return ex.first_table("StringIds", "StringTable") is not None and (
        bool(ex.tables_like(r"(META_DATA_EXPORT|EXPORT_META_DATA|TARGET_INFO_\w+)"))
        or any(ex.table_of(k) for k in SCHEMA))


def export_rep(path, work):
    """The SQLite export of an .nsys-rep, written into work with the user's nsys."""
    nsys = shutil.which("nsys")
    out = os.path.join(work, "report.sqlite")
    if nsys is None:
        raise IngestError(path, "an .nsys-rep is read from its SQLite export, and nsys is not on PATH here: "
                                f"run `nsys export --type sqlite -o {_sqlite_name(path)} {path}` "
                                "and ingest the .sqlite")
    done = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", out, str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not os.path.exists(out):
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines()
                or [f"exit status {done.returncode}"])[-1]
        raise IngestError(path, f"nsys export failed ({last})")
    return out


def _sqlite_name(path):
    base = os.path.basename(str(path))
    return re.sub(r"\.(nsys-rep|qdrep)$", "", base) + ".sqlite"


class NsysState:
    def __init__(self, path, db_path, iteration_marker):
        self.path = path
        self.db_path = db_path
        self.iteration_marker = iteration_marker
        self.pid = None              # the process of the rank asked for (--rank N)
        self.rank = None
        self.processes = []          # (pid, lowest device) of the processes with GPU activity, in rank order
        self.work = None             # the ingest's work directory (the load stages rows there)
        self.op_totals = False       # --op-totals


class NsysReader(Reader):
    """Nsight Systems: the SQLite export (plain or gzip), or an .nsys-rep exported with nsys."""
    kind = "trace"

    def summary(self, con, run):
        """A trace's line, and which nsys (and export schema) wrote the file."""
        line = TraceReader.summary(self, con, run)
        v = rows(con, "SELECT metadata->>'nsys_version', metadata->>'nsys_export_schema' FROM runs WHERE run = ?",
                 [run])
        if v:
            line += f"; an Nsight Systems export of nsys {v[0][0] or '(version not recorded)'}" + (
                f", export schema {v[0][1]}" if v[0][1] else "")
        return line

    def notes(self, con, path, run):
        """A trace's notes, and the sampled GPU metrics loaded from the export."""
        out = TraceReader.notes(self, con, path, run)
        n, metrics, devices = rows(con, "SELECT count(*), count(DISTINCT metric), string_agg(DISTINCT device, ', ' "
                                        "ORDER BY device) FROM gpu_metric_samples WHERE run = ?", [run])[0]
        if n:
            out.append(f"note: {path}: {n} sampled GPU metric values loaded ({metrics} metric{'s' * (metrics != 1)}, "
                       f"GPU {devices}): "
                       "report gpu_metric_levels")
        return out

    def sniff(self, path, text):
        if path.endswith((".nsys-rep", ".qdrep")):
            return "nsys-rep"
        # (its own first bytes, not text(): text() refuses some binary files as UTF-16,
        # and the readers after this one know theirs by name: .xplane.pb, .ncu-rep)
        if head(path, 16).startswith(SQLITE_MAGIC.encode()):
            return "nsys-sqlite"
        return None

    def run_name(self, path):
        from .names import run_name_for
        return run_name_for(re.sub(r"\.(nsys-rep|qdrep|sqlite(\.gz|\.xz)?|db(\.gz|\.xz)?)$", "", path))

    def prepare(self, con, path, fmt, work, options):
        if fmt == "nsys-rep":
            digest, size = hash_file(path)
            db_path = export_rep(path, work)
        elif compression(path):
            db_path, digest, size, _ = plain_copy(path, work)
        else:
            db_path = path
            digest, size = None, os.path.getsize(path)
        ex = Export(path, db_path)
        try:
            try:
                if not _is_export(ex):
                    raise IngestError(path, "an SQLite database, but not an Nsight Systems export (no StringIds "
                                            "table beside export metadata or CUDA and NVTX tables)")
                if not any(ex.table_of(k) for k in SCHEMA):
                    raise IngestError(path, f"an Nsight Systems export ({ex.version_text()}) with no CUDA activity, "
                                            "runtime calls or NVTX ranges in it: profile with --trace=cuda,nvtx")
                for kind in SCHEMA:          # every needed column is there (refused here, before the load)
                    ex.source(kind)
                version = ex.version_text()
                rank = options.get("rank")
                # (a scan of the kernel table: beside the load, unless --rank needs it now;
                # begun once the export is known good, as the hash below)
                procs = ex.cuda_processes() if rank is not None else started(_cuda_processes, path, db_path)
            except sqlite3.DatabaseError as e:
                raise IngestError(path, f"SQLite cannot read it ({e})") from None
        finally:
            ex.close()
        hashing = None
        if digest is None:
            # hashed beside the load, unless a run of its size (a duplicate has one) is there
            if scalar(con, "SELECT count(*) FROM runs WHERE content_bytes = ?", [size]):
                digest, size = hash_file(path)
            else:
                hashing = started(hash_file, path)
        state = NsysState(path, db_path, options.get("iterations_from"))
        state.work = work                # (the load stages the export's rows there)
        state.op_totals = bool(options.get("op_totals"))
        state.processes = procs
        notes = [f"written by {version}"]
        if rank is not None and len(procs) > 1:
            # a report of several processes (the ranks of a job): --rank N loads the Nth
            # alone, as a run of its own; its content is the file and the rank
            if rank >= len(procs):
                raise IngestError(path, f"--rank {rank}: the report has {len(procs)} processes with GPU activity "
                                        f"(ranks 0 to {len(procs) - 1}: pids {', '.join(str(p) for p, _ in procs)})")
            state.rank, state.pid = rank, procs[rank][0]
            digest = hashlib.sha256(f"{(digest or hashing.result()[0])} rank {rank} of {len(procs)}".encode()).hexdigest()
            notes.append(f"rank {rank} of {len(procs)}: process {state.pid}")
            hashing = None
        if hashing is None:
            return Prepared(fmt, size, lambda: digest, state=state, notes=notes)
        return Prepared(fmt, size, lambda: hashing.result()[0], digest_ready=False, state=state, notes=notes)

    @contextmanager
    def loading(self, con, prep):
        with memory_cap(con):
            yield
            # The run is written into the database file here, under the cap, and not at
            # the connection's close (or a later commit), where DuckDB's own limit (most
            # of the machine's memory) holds: the close after the 1 GB export's load took
            # the process from 1.47 to 2.5-2.9 GB on 16 cores. (DuckDB refuses it while
            # another transaction has updates or deletes pending, as in a folder's
            # ingest: "Cannot CHECKPOINT: there are other write transactions active";
            # the close, or a later checkpoint, writes the run then.)
            with phase("checkpoint"):
                try:
                    con.execute("CHECKPOINT")
                except duckdb.TransactionException:
                    pass

    def load(self, con, prep, run):
        st = prep.state
        ex = Export(st.path, st.db_path)
        ex.pid = st.pid
        try:
            try:
                fields = _load(con, ex, run, st.iteration_marker, st.work)
            except sqlite3.DatabaseError as e:    # a page that does not read (a damaged or cut file)
                raise IngestError(st.path, f"SQLite cannot read it ({e}); nothing was loaded") from None
            if st.op_totals:
                store_op_totals(con, run)
            if isinstance(st.processes, KeptThread):
                st.processes = st.processes.result()
            if st.pid is not None:
                fields.update(rank=st.rank, world_size=len(st.processes))
            elif len(st.processes) <= 1 and (env := _launch_rank(ex)):
                fields.update(rank=env[0], world_size=env[1])     # one rank's report (nsys under torchrun)
            elif len(st.processes) > 1:
                warnings.warn(f"{st.path}: {len(st.processes)} processes ran GPU activity (pids "
                              f"{', '.join(str(p) for p, _ in st.processes)}): all are in this one run; to load "
                              f"them as the ranks of a job, ingest the file once per rank with --rank N "
                              f"(0 to {len(st.processes) - 1}) --job NAME --run NAME.rankN")
            return fields
        finally:
            ex.close()


def _cuda_processes(path, db_path):
    """Export.cuda_processes of the export, read on a connection of its own."""
    ex = Export(path, db_path)
    try:
        return ex.cuda_processes()
    except sqlite3.DatabaseError as e:
        raise IngestError(path, f"SQLite cannot read it ({e})") from None
    finally:
        ex.close()


def _arrow(rows, names):
    """A batch of SQLite rows as an Arrow table of the named columns."""
    cols = list(zip(*rows)) if rows else [()] * len(names)
    arrays = [pa.array(range(len(rows)), pa.int64())]       # pos: the row's position in the batch
    for n, c in zip(names, cols):
        t = pa.string() if n in _TEXT else pa.float64() if n in _DOUBLE else pa.int64()
        try:
            arrays.append(pa.array(c, type=t))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            # a value of another type than the column's (SQLite types values, not columns)
            arrays.append(pa.array([_coerce(v, t) for v in c], type=t))
    return pa.table(arrays, names=["pos"] + names)


def _coerce(v, t):
    if v is None:
        return None
    try:
        if t == pa.string():
            return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        if t == pa.float64():
            return float(v)
        if isinstance(v, float) and not v.is_integer():
            return None            # (an id or a time is whole: a fraction is no value of the column)
        n = int(v)
        return n if -(1 << 63) <= n < (1 << 63) else None
    except (TypeError, ValueError):
        return None


def _sections():
    text = sql_text("schema", "load/nsys_rows.sql")
    parts = re.split(r"^-- @section (\w+)\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}


def _insert_files(con, select, files, offset, fields=None):
    """Insert a part of one kind's staged rows ([(Parquet file, rows)] in rowid order,
    or [(Arrow batch, rows)] of the reading thread) as events numbered from offset in
    that order, in one statement that DuckDB runs on all its threads: nsys_rows.sql's
    section turns the rows into those of _trace_rows and trace_events.sql inserts
    them. Each file's pos counts its own rows: the rows of the files before it are
    added (by file_index). fields: the SELECT (nsys_rows.sql's kernel_fields) of the
    kernels' launch fields, kept in _nsys_gpu_fields by event id (nsys_gpu.sql reads
    them). The rows inserted."""
    if not files:
        return 0
    if isinstance(files[0][0], pa.Table):          # (one batch, its pos from 0)
        raw, total = con.from_arrow(files[0][0]), files[0][1]
        con.execute("SET VARIABLE tracedb_event_offset = ?", [offset])
        rows = raw.query("_nsys_raw", f"SELECT *, false AS needs_exact, CAST(NULL AS VARCHAR) AS problem "
                                      f"FROM ({select})")
        for stmt in statements(sql_text("schema", "load/trace_events.sql")):
            rows.query("_trace_staged", stmt)
        _keep_fields(raw, fields, offset)
        return total
    before, total = [], 0
    for _, rows_in in files:
        before.append(total)
        total += rows_in
    paths = ", ".join("'" + f.replace("'", "''") + "'" for f, _ in files)
    raw = con.sql(f"SELECT * REPLACE (pos + CAST({before} AS BIGINT[])[CAST(file_index AS BIGINT) + 1] AS pos) "
                  f"FROM read_parquet([{paths}])")
    con.execute("SET VARIABLE tracedb_event_offset = ?", [offset])
    rows = raw.query("_nsys_raw", f"SELECT *, false AS needs_exact, CAST(NULL AS VARCHAR) AS problem FROM ({select})")
    # (insertion order kept: DuckDB's threads writing row groups as they finish them, unordered as
    # a trace's insert is, cost 6-10% more CPU here: 2.81 against 2.56-2.66 s for 0.98 M NVTX rows)
    for stmt in statements(sql_text("schema", "load/trace_events.sql")):
        rows.query("_trace_staged", stmt)
    _keep_fields(raw, fields, offset)
    return total


def _keep_fields(raw, fields, offset):
    """The kernels' launch fields of a part (raw: its rows, as _insert_files read them),
    by event id, into _nsys_gpu_fields (nothing when fields is None)."""
    if fields is not None:
        raw.query("_nsys_raw", f"INSERT INTO _nsys_gpu_fields SELECT pos + {int(offset)} AS event_id, "
                               f"* EXCLUDE (pos) FROM ({fields})")


def _derive(con, run):
    """derive_trace.sql with nsys_gpu.sql's _gpu in place of its own (the kernels'
    launch fields from the export's columns, not parsed back from their args)."""
    derive(con, run, gpu=sql_text("schema", "load/nsys_gpu.sql"))


def _insert(con, staged, offset):
    con.execute("SET VARIABLE tracedb_event_offset = ?", [offset])
    run_script_over(con, sql_text("schema", "load/trace_events.sql"), "_trace_staged", staged)


def _lookups(con, ex):
    """Temp tables nsys_rows.sql joins: strings, processes, memory kinds (NVTX domains
    and categories: _nvtx_lookups)."""
    strings = ex.first_table("StringIds", "StringTable")
    if strings:
        cur = ex.con.execute(f"SELECT id, value FROM {qid(strings)}")
        con.execute("CREATE OR REPLACE TEMP TABLE _nsys_strings (id BIGINT, value VARCHAR)")
        while batch := cur.fetchmany(BATCH_ROWS):
            tbl = _arrow(batch, ["id", "text"]).rename_columns(["pos", "id", "value"])
            con.from_arrow(tbl).query("_b", "INSERT INTO _nsys_strings SELECT id, value FROM _b")
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE _nsys_strings (id BIGINT, value VARCHAR)")
    # CUDA processes, in pid order: the first one's correlation ids stay as nsys wrote them
    pids = set() if ex.pid is None else {ex.pid}
    if not pids and "TARGET_INFO_CUDA_STREAM" in ex.tables and "processId" in ex.cols("TARGET_INFO_CUDA_STREAM"):
        pids = {r[0] for r in ex.con.execute("SELECT DISTINCT processId FROM TARGET_INFO_CUDA_STREAM") if r[0] is not None}
    if not pids:
        for kind in ("kernel", "memcpy", "memset"):
            src = ex.source(kind)
            if src and "globalPid" in ex.cols(src[0]):
                pids |= {(r[0] >> 24) & 0xFFFFFF for r in
                         ex.con.execute(f"SELECT DISTINCT globalPid FROM {qid(src[0])}") if r[0] is not None}
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_procs (pid BIGINT, pidx BIGINT)")
    if pids:
        con.executemany("INSERT INTO _nsys_procs VALUES (?, ?)", [(p, i) for i, p in enumerate(sorted(pids))])
    kinds = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
             6: "Managed Static", 7: "Unknown"}
    if "ENUM_CUDA_MEM_KIND" in ex.tables:
        kinds.update({r["id"]: r["label"] for r in ex.rows("ENUM_CUDA_MEM_KIND", ["id", "label"])
                      if r["label"] is not None})
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_mem_kinds (id BIGINT, value VARCHAR)")
    con.executemany("INSERT INTO _nsys_mem_kinds VALUES (?, ?)", sorted(kinds.items()))


def _nvtx_names(path, db_path, pid):
    """NVTX domain names (DomainCreate, 75) and category names (33), by domain:
    ({domain id: name}, {(domain id, category id): name}), read on a connection of
    its own (a scan of the NVTX table, which has no index on the event type: 1.3 s
    of the 1 GB export, beside the load of the tables before NVTX's)."""
    ex = Export(path, db_path)
    ex.pid = pid
    try:
        domains, categories = {}, {}
        nvtx = ex.table_of("nvtx")
        if nvtx:
            strings = ex.first_table("StringIds", "StringTable")
            src = ex.source("nvtx", event_types=(33, 75))[1]
            text = (f"coalesce(text, (SELECT value FROM {qid(strings)} WHERE id = text_id))" if strings else "text")
            for etype, dom, cat, name in ex.con.execute(f"SELECT event_type, domain_id, category, {text} FROM ({src})"):
                # (domain and category ids are a process's: the first name of an id is kept)
                if etype == 75:
                    domains.setdefault(dom, name)
                else:
                    categories.setdefault((dom, cat), name)
        return domains, categories
    finally:
        ex.close()


def _nvtx_lookups(con, names):
    """The temp tables of _nvtx_names' names (names: its KeptThread) that nsys_rows.sql joins."""
    domains, categories = names.result()
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_nvtx_domains (id BIGINT, name VARCHAR)")
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_nvtx_categories (domain_id BIGINT, id BIGINT, name VARCHAR)")
    if domains:
        con.executemany("INSERT INTO _nsys_nvtx_domains VALUES (?, ?)", list(domains.items()))
    if categories:
        con.executemany("INSERT INTO _nsys_nvtx_categories VALUES (?, ?, ?)",
                        [(d, c, n) for (d, c), n in categories.items()])


def _metadata_events(ex):
    """Process and thread names (ph M events, as a trace names them): the profiled
    processes and threads, and the GPUs TARGET_INFO_GPU names (nsys_finish.sql
    names the streams, and the GPUs it does not)."""
    out = []
    if "PROCESSES" in ex.tables:
        for r in ex.rows("PROCESSES", ["pid", "name"]):
            if r["pid"] is not None and ex.pid in (None, r["pid"]):
                out.append(("M", None, "process_name", str(r["pid"]), None, json.dumps({"name": r["name"]})))
    strings = ex.first_table("StringIds", "StringTable")
    if "ThreadNames" in ex.tables and strings:
        for gtid, name in ex.con.execute(f'SELECT t.globalTid, s.value FROM ThreadNames t '
                                         f"JOIN {qid(strings)} s ON s.id = t.nameId"):
            if gtid is not None and ex.pid in (None, (gtid >> 24) & 0xFFFFFF):
                out.append(("M", None, "thread_name", str((gtid >> 24) & 0xFFFFFF), str(gtid & 0xFFFFFF),
                            json.dumps({"name": name})))
    for dev, name in _gpus(ex).items():
        label = f"GPU {dev}" + (f": {name}" if name else "")
        out.append(("M", None, "process_name", str(dev), None, json.dumps({"name": label})))
    return out


def _launch_rank(ex):
    """(RANK, WORLD_SIZE) of the environment nsys launched the profiled command with
    (META_DATA_CAPTURE's PROCESS_0 environment: a rank's report when torchrun or a
    launcher started nsys once per rank), or None."""
    if "META_DATA_CAPTURE" not in ex.tables:
        return None
    env = {}
    for name, value in ex.con.execute("SELECT name, value FROM META_DATA_CAPTURE "
                                      "WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'"):
        m = re.fullmatch(r'(RANK|WORLD_SIZE)="?(\d+)"?', str(value))
        if m:
            env[m.group(1)] = int(m.group(2))
    rank, world = env.get("RANK"), env.get("WORLD_SIZE")
    if rank is None or world is None or not 0 <= rank < world < 1 << 31:
        return None
    return rank, world


def _gpus(ex):
    """device id -> GPU name, from TARGET_INFO_GPU (its cuDevice, else its id)."""
    out = {}
    if "TARGET_INFO_GPU" in ex.tables:
        for r in ex.rows("TARGET_INFO_GPU", ["id", "cuDevice", "name"]):
            dev = r["cuDevice"] if r["cuDevice"] is not None else r["id"]
            if dev is not None:
                out.setdefault(dev, r["name"])
    return out


def _device_properties(ex):
    if "TARGET_INFO_GPU" not in ex.tables:
        return []
    keep = ["id", "cuDevice", "name", "busLocation", "totalMemory", "memoryBandwidth", "clockRate", "smCount",
            "chipName", "computeMajor", "computeMinor", "maxShmemPerBlock", "maxRegistersPerBlock", "l2CacheSize",
            "uuid"]
    props = []
    for r in ex.rows("TARGET_INFO_GPU", keep):
        props.append({"id": r["cuDevice"] if r["cuDevice"] is not None else r["id"], "name": r["name"],
                      "totalGlobalMem": r["totalMemory"], "numSms": r["smCount"],
                      "computeMajor": r["computeMajor"], "computeMinor": r["computeMinor"],
                      "sharedMemPerBlock": r["maxShmemPerBlock"], "regsPerBlock": r["maxRegistersPerBlock"],
                      "l2CacheSize": r["l2CacheSize"], "memoryBandwidth": r["memoryBandwidth"],
                      "clockRate": r["clockRate"], "chipName": r["chipName"], "busLocation": r["busLocation"],
                      "uuid": r["uuid"]})
    return props


def _note_metric_devices(con, ex, run, table, loaded, devices, ran):
    """Say where the sampled GPUs and the run's kernel GPUs (ran) do not meet: the GPU of a
    sample (its typeId's low byte) is assumed, not verified on a real export, to be
    the kernels' deviceId (schema/load/nsys_gpu_metrics.sql)."""
    if devices is not None and not loaded:
        n = nsys_metrics.file_rows(ex, table)
        if n:
            warnings.warn(f"{ex.path}: none of the file's {n} sampled GPU metric values ({table}) is of this "
                          f"rank's GPUs ({', '.join(str(d) for d in sorted(devices)) or 'none'}, the devices its "
                          "kernels ran on); the samples' GPU (typeId & 0xFF) may number the GPUs otherwise "
                          "(CUDA_VISIBLE_DEVICES per rank): no samples loaded")
        return
    # TARGET_INFO_CUDA_DEVICE (gpuId, cudaId, pid): nsys's GPU id and the CUDA device
    # a process numbers it as (the kernels' deviceId). Not used to map the samples'
    # GPU (whether typeId's low byte is the one or the other is unverified): where
    # they differ for the run's processes, the ingest says so. (In every committed
    # export that has the table they are equal.)
    if "TARGET_INFO_CUDA_DEVICE" in ex.tables:
        differ = sorted({(r["gpuId"], r["cudaId"]) for r in ex.rows("TARGET_INFO_CUDA_DEVICE", ["gpuId", "cudaId", "pid"])
                         if None not in (r["gpuId"], r["cudaId"]) and r["gpuId"] != r["cudaId"]
                         and ex.pid in (None, r["pid"])})
        if differ:
            warnings.warn(f"{ex.path}: TARGET_INFO_CUDA_DEVICE numbers GPU "
                          f"{', '.join(f'{g} as CUDA device {c}' for g, c in differ)}: the sampled GPU metrics' GPU "
                          "(typeId & 0xFF) is taken as the kernels' CUDA device, which is not verified; "
                          "their GPUs may be misnamed")
    sampled = {r[0] for r in rows(con, "SELECT DISTINCT device FROM gpu_metric_samples WHERE run = ?", [run])}
    if sampled and ran and not sampled & ran:
        warnings.warn(f"{ex.path}: the sampled GPU metrics are of GPU {', '.join(str(d) for d in sorted(sampled))} "
                      f"and the kernels ran on GPU {', '.join(str(d) for d in sorted(ran))}: the samples' GPU "
                      "(typeId & 0xFF) may number the GPUs otherwise than the kernels' deviceId "
                      "(CUDA_VISIBLE_DEVICES); gpu_metric_levels has no rows for them")


def _base_ns(ex):
    """Epoch ns of the session start (TARGET_INFO_SESSION_START_TIME.utcEpochNs), else 0."""
    t = ex.first_table("TARGET_INFO_SESSION_START_TIME")
    if t and "utcEpochNs" in ex.cols(t):
        v = ex.con.execute(f"SELECT utcEpochNs FROM {qid(t)}").fetchone()
        if v and isinstance(v[0], int) and 0 <= v[0] < 1 << 62:
            return v[0]
    return 0


KINDS_READ = ("runtime", "nvtx", "kernel", "memcpy", "memset")
# With worker readers, each range is staged as a Parquet file in the ingest's work
# directory (_staged) and DuckDB loads a part of a kind's files in one statement on
# all its threads: the parent's insert, one batch after another, was what held the
# load (worker readers 4 -> 8 made it no faster). Ranges a worker process may have
# under way or done and not taken (their files wait on disk, not in memory):
PROCESS_AHEAD = 4
# Rows of a kind's staged files loaded in one statement: a row group (_ROW_GROUP) per
# thread of many, few enough that loading begins while the rest of a large table
# is read.
LOAD_ROWS = 16 * _ROW_GROUP
# Batches the reading thread reads ahead of the one being loaded (its C code and
# Arrow's run without the GIL for most of the time, beside DuckDB's work on the
# batch before); memory holds at most this many batches more.
READ_AHEAD = 2
# Each range of BATCH_ROWS rowids is read as one CSV text that SQLite writes in C
# and Arrow parses (ingest/nsys_csv.py), not a Python tuple per row: False reads
# every range row by row (what a range whose values do not parse falls back to).
BULK = os.environ.get("TRACEDB_NSYS_BULK", "1") != "0"


def _default_readers():
    """Worker processes for a large export: none on a machine of few cores (the
    thread's read already overlaps DuckDB's load of the batch before, and DuckDB wants
    the cores), else half the cores this process may run on, at most 8 (each holds
    one range of up to 120 Ki rows (a row group) at a time)."""
    from .workers import usable_cores
    cores = usable_cores()
    return 0 if cores < 8 else min(8, cores // 2)


# Worker processes that read the tables' rowid ranges side by side, for a large export
# (0: the one reading thread); TRACEDB_NSYS_READERS=N sets their number.
PROCESS_READERS = max(0, min(32, int(os.environ.get("TRACEDB_NSYS_READERS", "") or _default_readers())))
PROCESS_MIN_ROWS = 4 << 20       # below, starting the processes costs more than they save


def _range_batch(ex, kind, lo, hi, bulk=None):
    """The Arrow batch of a kind's rows with rowid in [lo, hi] (all rows when lo is
    None: a table without rowids), or None where no row is. In bulk (one CSV text
    from SQLite, parsed by Arrow), or row by row where that does not parse."""
    select = ex.source(kind)[1]
    if lo is not None:
        select += (" AND" if " WHERE " in select else " WHERE") + f" rowid BETWEEN {int(lo)} AND {int(hi)}"
    names = list(SCHEMA[kind][1])
    if BULK if bulk is None else bulk:
        try:
            data, n = ex.con.execute(nsys_csv.csv_select(select, names, _TEXT)).fetchone()
            return None if not n else nsys_csv.parse(data, names, _TEXT, n)
        except (pa.ArrowInvalid, sqlite3.DatabaseError, UnicodeError):
            pass        # (a value not of its column's type, text that is no UTF-8: row by row below)
    rows = ex.con.execute(select).fetchall()
    return _arrow(rows, names) if rows else None


def _stage_range(path, db_path, pid, scratch, item, ex=None):
    """One range of item (i, kind, lo, hi, has_rows) read and written as a Parquet
    file in scratch: (kind, the file or None where no row is, its rows). A range that
    only marks its kind's beginning (has_rows False) is (kind, None, 0); a table
    without rowids (a view: lo None) is streamed into one file, BATCH_ROWS rows at a
    time. Run in a worker process (ex None: it opens the export), or by the reading
    thread (its own Export), which hands a rowid range over as its Arrow batch, no
    file (it shares the parent's memory; a file costs its writing and reading, 20%
    more CPU in all on 2 cores)."""
    i, kind, lo, hi, has_rows = item
    if not has_rows:
        return kind, None, 0
    own = ex is None
    if own:
        ex = Export(path, db_path)
        ex.pid = pid
    try:
        out = os.path.join(scratch, f"{i:06d}-{kind}.parquet")
        if lo is None:               # (no rowids: streamed)
            names = list(SCHEMA[kind][1])
            cur = ex.con.execute(ex.source(kind)[1])
            n, writer = 0, None
            try:
                while batch := cur.fetchmany(BATCH_ROWS):
                    tbl = _arrow(batch, names)
                    tbl = tbl.set_column(0, "pos", pa.array(range(n, n + tbl.num_rows), pa.int64()))
                    writer = writer or pq.ParquetWriter(out, tbl.schema, compression="none")
                    writer.write_table(tbl, row_group_size=_ROW_GROUP)
                    n += tbl.num_rows
            finally:
                if writer is not None:
                    writer.close()
            return kind, (out if n else None), n
        got = _range_batch(ex, kind, lo, hi)
        if got is None:
            return kind, None, 0
        if not own:
            return kind, got, got.num_rows
        pq.write_table(got, out, compression="none", row_group_size=_ROW_GROUP)
        return kind, out, got.num_rows
    except sqlite3.DatabaseError as e:
        raise sqlite3.DatabaseError(str(e)) from None        # (one that pickles back to the parent)
    finally:
        if own:
            ex.close()


def _rowid_ranges(ex, batch_rows=None):
    """(kind, lo, hi, True) of batch_rows rowids each, over every kind's table, in read
    order (Export.rowid_spans), each kind's led by (kind, None, None, False), the mark
    that it begins; a table without rowids (a view) is (kind, None, None, True): the
    reading thread streams it row by row.
    batch_rows: rows per range (BATCH_ROWS unless given)."""
    batch_rows = batch_rows or BATCH_ROWS
    out = []
    for kind in KINDS_READ:
        table = ex.table_of(kind)
        if table is None:
            continue
        out.append((kind, None, None, False))
        spans = ex.rowid_spans(table, batch_rows)
        if spans is None:
            out.append((kind, None, None, True))
        else:
            out += [(kind, a, b, True) for a, b in spans]
    return out


# Ranges a table's rowid span may make before its rows are counted (an empty range
# costs one lookup in the rowid index; a count, a scan of the table).
SPAN_RANGES = 1024


# (A staged file's rows are one row group of DuckDB's, _ROW_GROUP: DuckDB reads a
# kind's files a row group per thread, so a part of a few ranges still spreads over many cores.)


def _staged(ex, scratch):
    """Each range of the export staged as a file in scratch, (kind, the file or None,
    its rows) in read order (_in_parts groups them): read by worker processes (a large
    export, PROCESS_READERS > 0), else by the reading thread, ahead of the caller,
    which loads one part while the next is read. The reading begins at this call (a
    _Background takes the results), so what the caller does before it asks for the
    first (the lookups) overlaps it; use it in a with block (it stops the reading)."""
    ranges = _rowid_ranges(ex, _process_batch_rows()) if PROCESS_READERS > 0 else None
    if ranges is not None and _in_processes(ranges):
        import functools
        from .workers import each_in_workers
        items = [(i, *r) for i, r in enumerate(ranges)]
        return _Background(lambda: each_in_workers(
            functools.partial(_stage_range, ex.path, ex.db_path, ex.pid, scratch), items,
            PROCESS_READERS, ahead=PROCESS_AHEAD), PROCESS_READERS * PROCESS_AHEAD)
    else:
        items = [(i, *r) for i, r in enumerate(_rowid_ranges(ex))]

        def in_thread():
            mine = Export(ex.path, ex.db_path)        # (a connection of the reading thread's own)
            mine.pid = ex.pid
            try:
                for item in items:
                    yield _stage_range(ex.path, ex.db_path, ex.pid, scratch, item, mine)
            finally:
                mine.close()
    return _Background(in_thread, READ_AHEAD)


def _in_parts(done):
    """The staged ranges (kind, file, Arrow batch or None, rows) grouped as _staged
    gives them: files in parts of LOAD_ROWS rows, a batch alone."""
    kind, files = None, []
    for k, f, n in done:
        if k != kind:
            if kind is not None:
                yield kind, files
            kind, files = k, []
        if isinstance(f, pa.Table):             # (a batch from the reading thread: loaded alone, in order)
            if files:
                yield kind, files
                files = []
            yield kind, [(f, n)]
        elif f is not None:
            files.append((f, n))
            if sum(r for _, r in files) >= LOAD_ROWS:       # (a part of a large table: loaded while the rest is read)
                yield kind, files
                files = []
    if kind is not None:
        yield kind, files


class _Background:
    """The items of the iterator make() gives, taken by a thread of its own that starts
    at once and runs at most `ahead` items ahead of the caller; an error there is
    raised here. close() stops the thread (and closes the iterator); a with block
    closes it."""
    _DONE = object()

    def __init__(self, make, ahead):
        self.q = queue.Queue(max(1, ahead))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(make,), name="nsys-reader", daemon=True)
        self.thread.start()

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, make):
        it = None
        try:
            it = make()
            for item in it:
                if not self._put(item):
                    return
            self._put(self._DONE)
        except BaseException as e:        # to the loading thread
            self._put(e)
        finally:
            if it is not None and hasattr(it, "close"):
                it.close()

    def __iter__(self):
        return self

    def __next__(self):
        if self.stop.is_set():
            raise StopIteration
        item = self.q.get()
        if item is self._DONE:
            self.stop.set()
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self):
        self.stop.set()
        self.thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _in_processes(ranges):
    """Whether worker processes read the export of these ranges: at least
    PROCESS_MIN_ROWS rowids in its tables, and rowids in all of them (a view is
    streamed by the thread), and workers that can start (not from a script read from
    stdin: workers.spawnable)."""
    from .workers import spawnable
    return (sum(hi - lo + 1 for _, lo, hi, r in ranges if r and lo is not None) >= PROCESS_MIN_ROWS
            and all(lo is not None for _, lo, _, r in ranges if r) and spawnable())


def _process_batch_rows():
    """Rows per range a worker process reads: one row group, a quarter of BATCH_ROWS
    (at most), so that many workers together hold little memory (each holds one
    range's CSV text and its Arrow table at a time)."""
    return min(BATCH_ROWS, _ROW_GROUP)


def _read_batches(ex):
    """(kind, Arrow batch) of each source table in turn, as staged (a batch of the
    reading thread, or a row group of each staged file at a time: pos, then the
    columns); (kind, None) before the batches of each kind whose table is there (empty
    or not). For tests and tools: the load reads the staged files with DuckDB."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tracedb-nsys-") as scratch, _staged(ex, scratch) as staged:
        for kind, files in _in_parts(staged):
            yield kind, None
            for f, _ in files:
                if isinstance(f, pa.Table):
                    yield kind, f
                    continue
                pf = pq.ParquetFile(f)
                for g in range(pf.num_row_groups):
                    yield kind, pf.read_row_group(g)
                pf = None
                os.remove(f)


VARIABLES = ("tracedb_run", "tracedb_base_ns", "tracedb_event_offset", "tracedb_iteration_marker")


def _load(con, ex, run, iteration_marker, work):
    try:
        return _load_run(con, ex, run, iteration_marker, work)
    finally:        # (variables are no part of the transaction: reset after a failed load too)
        for v in VARIABLES:
            con.execute(f"RESET VARIABLE {v}")


def _load_run(con, ex, run, iteration_marker, work):
    path = ex.path
    base_ns = _base_ns(ex)
    con.execute("SET VARIABLE tracedb_run = ?", [run])
    con.execute("SET VARIABLE tracedb_base_ns = ?", [base_ns])
    con.execute("SET VARIABLE tracedb_iteration_marker = ?", [iteration_marker])
    sections = _sections()
    counts = {}
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_gpu_fields (event_id BIGINT NOT NULL, context BIGINT, grid_x BIGINT, "
                "grid_y BIGINT, grid_z BIGINT, block_x BIGINT, block_y BIGINT, block_z BIGINT, regs BIGINT, "
                "ssm BIGINT, dsm BIGINT)")
    scratch = os.path.join(work, "nsys-staged")
    os.makedirs(scratch, exist_ok=True)
    nvtx_names = started(_nvtx_names, ex.path, ex.db_path, ex.pid)
    with status(f"reading {path}"), phase("nsys: read and load"), _staged(ex, scratch) as staged:
        with phase("nsys: lookups"):       # (while the first ranges are read)
            _lookups(con, ex)
        n = 0
        meta = _metadata_events(ex)
        if meta:
            tbl = pa.table({
                "ph": [m[0] for m in meta], "cat": pa.nulls(len(meta), pa.string()), "name": [m[2] for m in meta],
                "pid": [m[3] for m in meta], "tid": pa.array([m[4] for m in meta], pa.string()),
                "ts_ns": pa.nulls(len(meta), pa.int64()), "dur_ns": pa.nulls(len(meta), pa.int64()),
                "correlation": pa.nulls(len(meta), pa.int64()), "external_id": pa.nulls(len(meta), pa.int64()),
                "stream": pa.nulls(len(meta), pa.int64()), "device": pa.nulls(len(meta), pa.int64()),
                "flow_id": pa.nulls(len(meta), pa.string()), "args": [m[5] for m in meta]})
            names = con.from_arrow(tbl).query("_m", "SELECT * REPLACE (CAST(args AS JSON) AS args) FROM _m").to_arrow_table()
            names = names.append_column("needs_exact", pa.array([False] * len(meta)))
            names = names.append_column("problem", pa.nulls(len(meta), pa.string()))
            names = names.append_column("pos", pa.array(range(len(meta)), pa.int64()))
            _insert(con, names, n)
            n += len(meta)
        named = False
        for kind, files in _in_parts(staged):
            if kind == "nvtx" and not named:
                with phase("nsys: NVTX domain names"):      # (read beside the tables before)
                    _nvtx_lookups(con, nvtx_names)
                named = True
            with phase(f"nsys: load {kind}"):
                k = _insert_files(con, sections[kind], files, n,
                                  sections["kernel_fields"] if kind == "kernel" else None)
            for f, _ in files:
                if isinstance(f, str):
                    os.remove(f)
            n += k
            counts[kind] = counts.get(kind, 0) + k
        if not named:
            _nvtx_lookups(con, nvtx_names)
    if not any(counts.get(k) for k in ("kernel", "memcpy", "memset", "runtime", "nvtx")):
        raise IngestError(path, f"the export holds no CUDA activity, runtime calls or NVTX ranges ({ex.version_text()}): "
                                "profile with --trace=cuda,nvtx")
    with status("linking kernels, launches, ops and iterations"):
        con.execute("CREATE OR REPLACE TEMP VIEW _run_events AS "
                    "SELECT * FROM events WHERE run = getvariable('tracedb_run')")
        _derive(con, run)
        run_script(con, sql_text("schema", "load/collectives.sql"), {"run": run, "world_size": None})
        run_script(con, sql_text("schema", "load/trace_system.sql"))
        run_script(con, sql_text("schema", "load/nsys_finish.sql"), {"run": run})
    with status("loading sampled GPU metrics"), phase("nsys: GPU metrics"):
        ran = {r[0] for r in rows(con, "SELECT DISTINCT device FROM kernels WHERE run = ? AND device IS NOT NULL",
                                  [run])}
        # (a run of one process of several: the samples of its kernels' GPUs)
        devices = None if ex.pid is None else ran
        metric_table, metric_rows = nsys_metrics.load(con, ex, devices)
        if metric_table:
            _note_metric_devices(con, ex, run, metric_table, metric_rows, devices, ran)
    with status("linking kernels, launches, ops and iterations"):
        con.execute("DROP VIEW _run_events")
        con.execute("DROP TYPE IF EXISTS _nsys_gpu_name")       # (nsys_gpu.sql's; _gpu is dropped)
        for t in ("_nsys_strings", "_nsys_procs", "_nsys_mem_kinds", "_nsys_nvtx_domains", "_nsys_nvtx_categories",
                  "_nsys_gpu_fields"):
            con.execute(f"DROP TABLE IF EXISTS {t}")
    if iteration_marker is not None and not scalar(con, "SELECT count(*) FROM iterations WHERE run = ?", [run]):
        raise IngestError(path, f"--iterations-from {iteration_marker!r}: no NVTX range or op of that name "
                                "with an end in the profile")
    unlinked = scalar(con, "SELECT count(*) FROM kernels WHERE run = ? AND launch_event_id IS NULL", [run])
    if unlinked:
        warnings.warn(f"{path}: {unlinked} GPU activities have no runtime or driver call with their correlation id "
                      "(launched before the capture began, or the calls were not traced); they have no launch")
    meta = ex.meta()
    gpus = _gpus(ex)
    procs = scalar(con, "SELECT count(DISTINCT launch_pid) FROM kernels WHERE run = ?", [run]) or 0
    framework = "pytorch" if scalar(con, "SELECT count(*) FROM events WHERE run = ? AND cat = 'cpu_op' LIMIT 1",
                                    [run]) else "cuda"
    props = _device_properties(ex)
    return {
        "framework": framework,
        "device_name": next(iter(gpus.values()), None) if gpus else None,
        "device_properties": json.dumps(props) if props else None,
        "base_time_ns": base_ns,
        "n_events": n,
        "metadata": json.dumps({
            "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
            "nsys_export_schema": meta.get("EXPORT_SCHEMA_VERSION"),
            "nsys_export": meta,
            "nsys_tables_read": {k: ex.source(k)[0] for k in SCHEMA if ex.source(k)},
            "nsys_rows_read": counts,
            "nsys_gpu_metric_samples": {metric_table: metric_rows} if metric_table else None,
            "processes_launching_kernels": procs,
        }, default=str),
    }
