"""Ingest: detect a file's kind, load it as one run in one transaction.

A failure at any point rolls the transaction back (the database is as it
was); a file whose content is already loaded is skipped.
"""
import json
import os
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass

import duckdb

from tracedb.db import rows, scalar
from tracedb.ingest.errors import IngestError
from tracedb.ingest.registry import Reload, detect
from tracedb.match import MatchError

__all__ = ["IngestError", "IngestResult", "ingest_file", "run_name_for"]


@dataclass
class IngestResult:
    path: str
    run: str
    kind: str
    status: str          # loaded | skipped
    message: str = ""
    pairing: object = None   # what --pair-with did: the match_runs row (ncu) or a sentence (power)

    @property
    def match(self):
        """The match_runs row when an ncu report was paired, else None."""
        return self.pairing if isinstance(self.pairing, dict) else None


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

    pair_with: trace run an ncu report or power log belongs to (paired in the
    same transaction; ignored for the files that do not pair, such as the trace
    itself). options (power logs): columns (nvidia-smi --query-gpu list of a
    header-less log), tz (zone of nvidia-smi's local times), offset_ns (trace
    time - power time), start_ns and interval_ms (dcgmi dmon); traces: job (the
    job it is a rank of), rank (when it has no distributedInfo), require_rank; any
    file: run_prefix (put before the default run name: `ddp.` for a job directory's files).
    """
    path = str(path)
    if not os.path.exists(path):
        raise IngestError(path, "no such file")
    if os.path.isdir(path):
        raise IngestError(path, "is a directory")
    reader, fmt = detect(path)
    with tempfile.TemporaryDirectory(prefix="tracedb-") as work:
        return _ingest(con, reader, fmt, path, run, pair_with if reader.pairs else None, work, options or {})


def _check_pair_target(con, path, kind, pair_with):
    pair_kind = scalar(con, "SELECT kind FROM runs WHERE run = ?", [pair_with])
    if pair_kind is None:
        raise IngestError(path, f"--pair-with {pair_with!r}: no such run in the database")
    if pair_kind != "trace":
        raise IngestError(path, f"--pair-with {pair_with!r}: a {kind} file pairs with a trace run, "
                                f"and that run is a {pair_kind} run")


def _with_format(metadata, fmt):
    """runs.metadata with the source format added (source_format)."""
    meta = json.loads(metadata) if metadata else {}
    if not isinstance(meta, dict):
        meta = {"value": meta}
    meta["source_format"] = fmt
    return json.dumps(meta, default=str)


def _pair(con, reader, path, run, pair_with, options):
    try:
        return reader.pair(con, run, pair_with, options)
    except MatchError as e:
        raise IngestError(path, f"--pair-with {pair_with!r}: {e}") from None


def _ingest(con, reader, fmt, path, run, pair_with, work, options):
    name = run or options.get("run_prefix", "") + reader.run_name(path)
    if pair_with is not None:
        _check_pair_target(con, path, reader.kind, pair_with)
    prep = reader.prepare(con, path, fmt, work, options)
    if prep.digest_ready and (old := _existing(con, prep.digest())) is not None:
        result = IngestResult(path, old, reader.kind, "skipped", f"already ingested as run {old}")
        if pair_with is not None:       # pair the run already there, in its own transaction
            with transaction(con, path):
                result.pairing = _pair(con, reader, path, old, pair_with, options)
        return result
    result = IngestResult(path, None, reader.kind, "loaded")
    # zstd for everything written by this ingest: measured on a 1 GB trace, it writes
    # 1.3 s faster than DuckDB's per-column choice and makes a smaller file.
    con.execute("SET force_compression = 'zstd'")
    try:
        with reader.loading(con, prep):       # restored after the rollback
            with transaction(con, path):
                if run is not None and scalar(con, "SELECT 1 FROM runs WHERE run = ?", [run]):
                    raise IngestError(path, f"run {run!r} already exists with other content")
                result.run = _unique_run(con, name)
                try:
                    fields = reader.load(con, prep, result.run)
                except Reload:                # the fast path cannot read it: load it the slow way
                    con.rollback()
                    con.begin()
                    reader.reload(prep, work)
                    fields = reader.load(con, prep, result.run)
                fields["metadata"] = _with_format(fields.get("metadata"), prep.format)
                if reader.kind == "trace":
                    from tracedb.jobs import assign
                    assign(con, path, fields, job=options.get("job"), rank=options.get("rank"),
                           require_rank=options.get("require_rank", False))
                _register(con, result.run, reader.kind, path, prep.digest(), content_bytes=prep.content_bytes,
                          paired_run=pair_with, **fields)
                if pair_with is not None:
                    result.pairing = _pair(con, reader, path, result.run, pair_with, options)
    finally:
        con.execute("RESET force_compression")
    return result


@contextmanager
def transaction(con, path):
    """One transaction: committed when the block ends, rolled back on any error
    (a database error becomes an IngestError that names the file)."""
    con.begin()
    try:
        yield
        con.commit()
    except duckdb.Error as e:
        con.rollback()
        raise IngestError(path, f"database error while loading ({str(e).splitlines()[0]})") from None
    except BaseException:
        con.rollback()
        raise
