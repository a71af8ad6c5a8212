"""Ingest: detect a file's kind, load it as one run in one transaction.

A failure at any point rolls the transaction back (the database is as it
was); a file whose content is already loaded is skipped.
"""
import errno
import json
import os
import threading
import warnings
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import duckdb

from ..store.catalog import ARGS_ZSTD_KEY
from ..store.sql import rows, scalar
from ..progress import phase
from ..store.tuning import setting
from .errors import IngestError, database_error
from .names import check_run_name, run_name_for  # noqa: F401 (tracedb.ingest's names)
from .reader import Reload
from .registry import detect
from .source import check_readable
from .workdir import workdir
from .match import MatchError
from .caught import caught as _caught

__all__ = ["IngestError", "IngestResult", "ingest_file", "run_name_for", "check_run_name"]


@dataclass
class IngestResult:
    path: str
    run: str
    kind: str
    status: str          # loaded | skipped
    message: str = ""
    pairing: object = None   # what --pair-with did: the match_runs row (ncu) or a sentence (power)
    warnings: list = field(default_factory=list)   # the warnings it gave (also in ingest_log)

    @property
    def match(self):
        """The match_runs row when an ncu report was paired, else None."""
        return self.pairing if isinstance(self.pairing, dict) else None


# Ingests at once on threads of one process (ingest/parallel.py), each on a cursor of
# its own, a transaction each: what one ingest decides against the database alone is
# decided against the runs committed so far (read through a fresh cursor: a
# transaction sees the database as it was when it began) and against the others under
# way. _CLAIMED: the run names given to ingests not yet committed, per database file
# (_claims; in-memory databases share one set: at worst a name gets a ~2 it did not need).
# _DECIDING: held from the checks against the committed runs (same content, a rank of
# its job taken) to the commit, so that no run commits between them; a skip's log
# lines too (a run's log entries are numbered).
_CLAIMED = {}
_NAMING = threading.Lock()
_DECIDING = threading.RLock()


def _unique_run(con, name, also=()):
    """name, or name~2, name~3 ...: the first that no run of the database holds, nor
    one of also (names given to runs not yet committed)."""
    taken = set(also) | {r[0] for r in rows(con, "SELECT run FROM runs WHERE run = ? OR run LIKE ?",
                                            [name, name + "~%"])}
    if name not in taken:
        return name
    i = 2
    while f"{name}~{i}" in taken:
        i += 1
    return f"{name}~{i}"


def _existing(con, digest):
    return scalar(con, "SELECT run FROM runs WHERE content_hash = ?", [digest])


@contextmanager
def _committed(con):
    """A cursor of con's database outside con's transaction: the runs committed by now."""
    cur = con.cursor()
    try:
        yield cur
    finally:
        cur.close()


@contextmanager
def _claims(con):
    """claim(name): _unique_run against the runs committed by now and the names
    claimed by the ingests under way, claimed until the block ends (after the commit)."""
    mine = []
    file = _database_file(con)

    def claim(name):
        with _NAMING, _committed(con) as now:
            claimed = _CLAIMED.setdefault(file, set())
            got = _unique_run(now, name, claimed)
            claimed.add(got)
        mine.append(got)
        return got
    try:
        yield claim
    finally:
        with _NAMING:
            left = _CLAIMED.get(file, set()) - set(mine)
            if left:
                _CLAIMED[file] = left
            else:
                _CLAIMED.pop(file, None)


def _database_file(con):
    """The real path of the file behind con (None in memory): the key of its claims."""
    path = scalar(con, "SELECT path FROM duckdb_databases() WHERE database_name = current_database()")
    return os.path.realpath(path) if path else None


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
    from .names import path_name_problem
    if run is not None and (why := path_name_problem(run)):
        raise IngestError(path, why)
    check_readable(path)
    caught = []
    try:
        with _caught(path) as caught:       # (catch_warnings is not safe across threads)
            with _system_errors(path):
                reader, fmt = detect(path)
                with workdir() as work:
                    result = _ingest(con, reader, fmt, path, run, pair_with if reader.pairs else None, work,
                                     options or {}, caught)
    finally:
        for w in caught:               # to the caller (the CLI prints them), after the capture
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result


@contextmanager
def _system_errors(path):
    """OS and memory failures while reading or writing temporary files -> one IngestError
    that says what ran out (a full or size-limited $TMPDIR, memory) and what was kept."""
    try:
        yield
    except OSError as e:
        where = f" ({e.filename})" if e.filename and str(e.filename) != path else ""
        hint = {errno.ENOSPC: "; temporary files go to $TMPDIR: free space there or point TMPDIR elsewhere",
                errno.EFBIG: "; a file size limit (ulimit -f) stopped a temporary file",
                errno.EDQUOT: "; disk quota exceeded"}.get(e.errno, "")
        raise IngestError(path, f"{(e.strerror or str(e)).lower()}{where}{hint}; nothing was loaded") from None
    except MemoryError:
        raise IngestError(path, "out of memory; nothing was loaded") from None
    except RecursionError:
        raise IngestError(path, "a JSON value is nested too deep; nothing was loaded") from None


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


def _log(con, run, path, lines):
    """Append (level, message) lines to the run's ingest log (caller's transaction)."""
    first = scalar(con, "SELECT coalesce(max(entry), 0) FROM ingest_log WHERE run = ?", [run])
    for i, (level, message) in enumerate(lines, 1):
        con.execute("INSERT INTO ingest_log (run, entry, path, level, message) VALUES (?, ?, ?, ?, ?)",
                    [run, first + i, path, level, message])


def _warning_lines(path, caught):
    out = []
    for w in caught:
        text = str(w.message)
        out.append(("warning", text[len(path) + 2:] if text.startswith(path + ": ") else text))
    return out


def _ingest(con, reader, fmt, path, run, pair_with, work, options, caught):
    name = run or options.get("run_prefix", "") + reader.run_name(path)
    from .names import path_name_problem  # a run name is a path in a lake: refused before loading
    if run is None and (why := path_name_problem(name, "run name")):
        raise IngestError(path, why + " (default: from the file name; give --run NAME, or for a job's directory "
                                      "--job NAME)")
    if pair_with is not None:
        _check_pair_target(con, path, reader.kind, pair_with)
    prep = reader.prepare(con, path, fmt, work, options)
    if prep.digest_ready and (old := _existing(con, prep.digest())) is not None:
        return _skipped(con, reader, path, old, pair_with, options, caught)
    try:
        return _load(con, reader, path, name, run, pair_with, work, options, caught, prep)
    except _SameContent as same:        # known once loaded (a gzip hashed as it was read); rolled back
        return _skipped(con, reader, path, same.run, pair_with, options, caught)


class _SameContent(Exception):
    def __init__(self, run):
        super().__init__(run)
        self.run = run


def _check_same_content(con, prep):
    """_SameContent when the content is a run's already: one hashed only as it was read
    (a gzip inflated while it loads), or one committed by another ingest (con: a
    cursor outside the transaction) since the check before the load."""
    if (old := _existing(con, prep.digest())) is not None:
        raise _SameContent(old)


def _skipped(con, reader, path, old, pair_with, options, caught):
    """The file's content is run old's: pair that run if asked, log, load nothing."""
    result = IngestResult(path, old, reader.kind, "skipped", f"already ingested as run {old}")
    with _DECIDING, transaction(con, path):    # pair the run already there, in its own transaction
        if pair_with is not None:
            result.pairing = _pair(con, reader, path, old, pair_with, options)
        _log(con, old, path, [("info", f"skipped: same content as run {old}")] + _warning_lines(path, caught)
             + ([("info", _pairing_line(pair_with, result.pairing))] if pair_with is not None else []))
    result.warnings = [m for _, m in _warning_lines(path, caught)]
    return result


@contextmanager
def _args_in_zstd(con):
    """A database whose events table is not declared with zstd for args (made before
    that, or in a storage format without it: db.apply_schema) gets zstd for
    everything this ingest writes, as it did then: DuckDB's own choice for args
    (dictionary + FSST) writes slower and 4x larger. A setting of the user's stays."""
    force = (scalar(con, "SELECT value FROM schema_info WHERE key = ?", [ARGS_ZSTD_KEY]) != "zstd"
             and scalar(con, "SELECT current_setting('force_compression')") == "auto")
    with setting(con, "force_compression", "zstd" if force else None):
        yield


def _load(con, reader, path, name, run, pair_with, work, options, caught, prep):
    result = IngestResult(path, None, reader.kind, "loaded")
    with _args_in_zstd(con), reader.loading(con, prep), _claims(con) as claim, ExitStack() as deciding:
        with transaction(con, path):
            if run is not None and scalar(con, "SELECT 1 FROM runs WHERE run = ?", [run]):
                with _committed(con) as now:
                    _check_same_content(now, prep)
                raise IngestError(path, f"run {run!r} already exists with other content")
            result.run = claim(name)
            for attempt in range(4):      # a trace: double -> text numbers, pieces -> joined,
                try:                      # pieces held in memory -> piece files
                    fields = reader.load(con, prep, result.run)
                    break
                except Reload:            # the fast path cannot read it: load it the slow way
                    if attempt == 3:
                        raise
                    con.rollback()
                    con.begin()
                    reader.reload(prep, work)
            prep.digest()                          # (the hash waited for before its turn)
            deciding.enter_context(_DECIDING)      # to the commit (the transaction ends first)
            now = deciding.enter_context(_committed(con))
            _check_same_content(now, prep)
            fields["metadata"] = _with_format(fields.get("metadata"), prep.format)
            if reader.kind == "trace":
                from .jobs import assign
                assign(now, path, fields, job=options.get("job"), rank=options.get("rank"),
                       require_rank=options.get("require_rank", False))
            _register(con, result.run, reader.kind, path, prep.digest(), content_bytes=prep.content_bytes,
                      paired_run=pair_with, **fields)
            if pair_with is not None:
                result.pairing = _pair(con, reader, path, result.run, pair_with, options)
            done = [("info", f"loaded as a {reader.kind} run: {fields.get('n_events') or 0} {reader.noun} "
                             f"({prep.format}, {prep.content_bytes} bytes of content"
                             + "".join(f"; {n}" for n in prep.notes) + ")")]
            if pair_with is not None:
                done.append(("info", _pairing_line(pair_with, result.pairing)))
            result.warnings = [m for _, m in _warning_lines(path, caught)]
            _log(con, result.run, path, done + _warning_lines(path, caught))
    return result


def _pairing_line(pair_with, pairing):
    if isinstance(pairing, dict):
        return (f"paired with {pair_with}: {pairing['matched']} of {pairing['ncu_kernels']} ncu kernels "
                f"matched")
    return str(pairing)


def _rollback(con):
    """Roll back, when a transaction is still open (a failed commit, as on a full disk,
    has already ended it)."""
    try:
        con.rollback()
    except duckdb.Error:
        pass


@contextmanager
def transaction(con, path):
    """One transaction: committed when the block ends, rolled back on any error
    (a database error becomes an IngestError that names the file)."""
    con.begin()
    try:
        yield
        with phase("commit"):
            con.commit()
    except duckdb.Error as e:
        _rollback(con)
        raise IngestError(path, f"{database_error(e)}; nothing was loaded") from None
    except BaseException:
        _rollback(con)
        raise
