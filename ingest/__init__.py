"""Ingest: detect a file's kind, load it as one run in one transaction.

A failure at any point rolls the transaction back (the database is as it
was); a file whose content is already loaded is skipped.
"""
import hashlib
import os
import re
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass

import duckdb

from tracedb.db import rows, scalar
from tracedb.ingest.detect import detect
from tracedb.ingest.errors import IngestError
from tracedb.ingest import trace, trace_json
from tracedb.ingest.trace import CutInsideEvent

__all__ = ["IngestError", "IngestResult", "ingest_file", "run_name_for"]


@dataclass
class IngestResult:
    path: str
    run: str
    kind: str
    status: str          # loaded | skipped
    message: str = ""
    match: dict = None   # summary of the matching done for --pair-with


def run_name_for(path):
    """Default run name: the file name without its trace/compression suffixes."""
    name = os.path.basename(str(path))
    name = re.sub(r"(\.gz)$", "", name)
    name = re.sub(r"(\.pt\.trace)?\.(json|csv|txt|log)$", "", name)
    return name or "run"


def _unique_run(con, name):
    taken = {r[0] for r in rows(con, "SELECT run FROM runs WHERE run = ? OR run LIKE ?",
                                [name, name + "~%"])}
    if name not in taken:
        return name
    i = 2
    while f"{name}~{i}" in taken:
        i += 1
    return f"{name}~{i}"


def _existing(con, digest):
    return scalar(con, "SELECT run FROM runs WHERE content_hash = ?", [digest])


def _register(con, run, kind, path, digest, **fields):
    cols = ["run", "kind", "path", "content_hash"] + list(fields)
    con.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [run, kind, str(path), digest] + list(fields.values()))


def ingest_file(con, path, run=None, pair_with=None, options=None):
    """Load one file into the database behind `con`. Returns an IngestResult.

    options (power logs): columns (nvidia-smi --query-gpu list of a header-less
    log), tz (zone of nvidia-smi's local times), offset_ns (trace time - power time).
    """
    path = str(path)
    if not os.path.exists(path):
        raise IngestError(path, "no such file")
    if os.path.isdir(path):
        raise IngestError(path, "is a directory")
    kind = detect(path)
    if kind == "xplane":
        from tracedb.ingest import xplane
        return xplane.ingest(con, path, run, lambda p, r: ingest_file(con, p, r))
    with tempfile.TemporaryDirectory(prefix="tracedb-") as work:
        result = _ingest_kind(con, path, kind, run, pair_with, work, options or {})
    if pair_with is not None and result.kind in ("ncu", "ncu-rep"):
        from tracedb.match import match
        result.match = match(con, pair_with, result.run)
    if pair_with is not None and result.kind == "power":
        from tracedb.ingest import power
        result.message = power.align(con, result.run, pair_with, (options or {}).get("offset_ns"))
    return result


def _ingest_kind(con, path, kind, run, pair_with, work, options):
    name = run or run_name_for(path)
    if run is None and kind == "power" and not re.search(r"power|smi|nvml", name, re.I):
        name += "_power"
    if pair_with is not None:
        pair_kind = scalar(con, "SELECT kind FROM runs WHERE run = ?", [pair_with])
        if pair_kind is None:
            raise IngestError(path, f"--pair-with {pair_with!r}: no such run in the database")
        if kind in ("ncu", "ncu-rep", "power") and pair_kind != "trace":
            raise IngestError(path, f"--pair-with {pair_with!r}: a {kind} file pairs with a trace run, "
                                    f"and that run is a {pair_kind} run")
    hash_pending = False
    if kind == "trace":
        hasher = hashlib.sha256()
        tf = trace_json.split(path, work, hasher)
        size = tf.content_bytes
        # A duplicate has the same size: only then wait for the hash before loading;
        # otherwise hashing an uncompressed file overlaps the parse.
        if scalar(con, "SELECT count(*) FROM runs WHERE content_bytes = ?", [size]):
            tf.wait_hash()
        hash_pending = tf.hashing is not None
        digest = lambda: (tf.wait_hash(), hasher.hexdigest())[1]

        def load_all(r):
            info = trace.load(con, tf, r) or {}
            fields = trace.run_metadata(con, r, tf.members)
            fields.update(info)
            fields["n_events"] = scalar(con, "SELECT count(*) FROM events WHERE run = ?", [r])
            return fields
    elif kind in ("ncu", "ncu-rep"):
        from tracedb.ingest import ncu
        prep = ncu.prepare(con, path, kind, work)
        size, digest = prep.content_bytes, lambda: prep.digest
        load_all = lambda r: ncu.load(con, prep, r)
    elif kind == "calibration":
        from tracedb.ingest import calibration
        digest_hex, size, meta = calibration.prepare(con, path, work)
        digest = lambda: digest_hex
        load_all = lambda r: calibration.load(con, r, meta)
    elif kind == "power":
        from tracedb.ingest import power
        digest_hex, size, meta = power.prepare(con, path, options, work)
        digest = lambda: digest_hex
        load_all = lambda r: power.load(con, path, r, meta)
    else:
        raise IngestError(path, f"{kind} files are not supported by this version")
    if not hash_pending and (old := _existing(con, digest())) is not None:
        return IngestResult(path, old, kind, "skipped", f"already ingested as run {old}")
    # zstd for everything written by this ingest: measured on a 1 GB trace, it writes
    # 1.3 s faster than DuckDB's per-column choice and makes a smaller file.
    con.execute("SET force_compression = 'zstd'")
    with trace.memory_cap(con, size) if kind == "trace" else nullcontext():   # restored after the rollback
        con.begin()
        try:
            if run is not None and scalar(con, "SELECT 1 FROM runs WHERE run = ?", [run]):
                raise IngestError(path, f"run {run!r} already exists with other content")
            name = _unique_run(con, name)
            try:
                fields = load_all(name)
            except CutInsideEvent:          # a cut between pieces fell inside an event: rare, load it whole
                con.rollback()
                con.begin()
                trace_json.join_pieces(tf, work)
                fields = load_all(name)
            _register(con, name, kind, path, digest(), content_bytes=size, paired_run=pair_with, **fields)
            con.commit()
        except IngestError:
            con.rollback()
            raise
        except duckdb.Error as e:
            con.rollback()
            raise IngestError(path, f"database error while loading ({str(e).splitlines()[0]})") from None
        except BaseException:
            con.rollback()
            raise
        finally:
            con.execute("RESET force_compression")
    return IngestResult(path, name, kind, "loaded")
