"""Load one Chrome-trace JSON file (PyTorch/Kineto, TensorFlow/JAX XProf) as a run."""
import hashlib
import itertools
import json
import os
import queue
import re
import threading
import warnings
from contextlib import contextmanager, nullcontext

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..store.db import sql_text
from ..store.sql import rows, run_script, run_script_over, scalar, split_at, sql_literal
from ..store.tuning import cap_changed, memory_cap, trim_heap
from . import trace_json
from .errors import IngestError, database_error
from .reader import Prepared, Reader, Reload
from ..progress import phase, status

# Above 2^43 µs a double's spacing exceeds 1 ns: DuckDB's JSON reader (which
# parses numbers as doubles) would lose the nanoseconds of such timestamps.
EXACT_DOUBLE_US = 2 ** 43
# A trace is staged in batches of this much JSON (BATCH_ROWS: the same for the exact
# path): memory stays bounded whatever the trace's size. Two batches are held at once
# (one inserted while the next is parsed: _parsed_ahead), as one of 512 MB was before.
# DuckDB's JSON reader parses a piece on one thread, so a batch holds a piece per
# thread: 2 of 128 MB on 2 threads, 8 of 24 MB on 8, no more than 12 (PIECES_AT_ONCE). Each thread's piece sits in one
# buffer under the load's memory cap (LOAD_MEMORY_CAP) beside the batch's
# parsed rows: 16 threads on 32 MB pieces ran out of it (1.0 GiB used). Small pieces no
# longer leave part-filled row groups: the insert is cut into whole ones (_aligned).
# Above 4 threads a batch is 3/4 of that (_batch_bytes): 192 MB, not 256, on 16 cores
# held the peak RSS at 1.36-1.40 GB instead of 1.61-1.72 GB, as fast (4.21 s against
# 4.17-5.07 s in one run); 128 MB: 1.23 GB but 5.18 s, its insert (2.8 row groups a
# batch) on too few threads. DuckDB's cap cannot be lowered instead: the parse and the
# row groups being written ran out of 768 MiB (docs/benchmarks.md). Up to 4 threads
# the peak is 1.0-1.2 GB at 256 MB, and fewer batches insert faster there.
BATCH_BYTES = 256 << 20
BATCH_ROWS = 1 << 20
# The first batch of an uncompressed trace: nothing overlaps its parse (the insert of
# one batch runs beside the parse of the next), so it is cut smaller, in as many pieces.
FIRST_BATCH_BYTES = 64 << 20
# A gzip trace inflated while it loads holds in memory at most the pieces of the
# batch being parsed and this many of the next (trace_json._MemoryPieces: 512 MB;
# one more made no difference at 1 GB: docs/benchmarks.md).
PIECES_AHEAD = 0
# Rows per Arrow chunk asked of DuckDB for a staged batch: at least a piece's, so it
# gives one chunk per piece (_aligned then cuts the batch into row groups).
STAGE_CHUNK_ROWS = 8 * 122880
# DuckDB's row group. A staged batch is inserted in chunks of exactly this many rows
# (_aligned), and without keeping the insertion order: each DuckDB thread then writes
# whole row groups, each a run of consecutive events, in parallel. Kept in order, the
# insert ran on one or two threads whatever the cores (16 cores: 3.9 s of a 7.1 s
# ingest of the 1 GB trace, against 1.2 s so); in chunks of a piece's events (one per
# thread), each thread's row groups mixed pieces and ended part-filled, and the
# checkpoint rewrote them (0.9 s at close).
ROW_GROUP_ROWS = 122880


MIN_PIECE_BYTES = 8 << 20
# DuckDB's JSON reader takes a 32 MB buffer and more, 42-48 MB in all, from the memory
# cap for each file it reads at once (one thread a file), however small the file: 16
# pieces parsed at once counted 766 MB of it, and beside an insert 878 MB (16 threads on
# 2 cores, the 10 GB trace: 61 MB short of LOAD_MEMORY_CAP, none of it to spill); 32 (one
# a thread on 32 cores) ran out of a 1 GiB cap before a row was inserted. So no more than
# this many at once, whatever the cores (~580 MB): the other threads insert the batch before.
PIECES_AT_ONCE = 12
# DuckDB's memory limit while a trace's events load and are derived (store/tuning.memory_cap):
# below MEMORY_CAP's 1 GiB. The parse counts ~42 MB a piece (above), and the rest is
# the table's blocks written so far, which DuckDB keeps up to its cap and can drop (they
# are on disk), and the derivation's sorts, which spill. The 10 GB trace on 16 cores:
# peak RSS 1.49-1.60 GB at 896 MiB against 1.60-1.63 GB at 1 GiB in the same commands,
# 1.43 GB with the batches let go before their insert (docs/benchmarks.md, fifth round);
# 768 MiB ran out of memory (the parse and the row groups being written needed 769 MiB).
# A folder's files keep MEMORY_CAP, set around them all (ingest/parallel.py).
LOAD_MEMORY_CAP = 896 << 20
# --op-totals' scripts run under this instead (store_op_totals): their sweeps of a 10 GB
# trace on 16 threads ran out of LOAD_MEMORY_CAP (the ingest failed whole).
TOTALS_MEMORY_CAP = 2 << 30
# The derivation of a trace of at least DERIVE_CAP_EVENTS events runs under this instead
# (_derive_cap): its sorts and temp tables fill whatever cap they get and spill the rest,
# so the cap is what sets the peak RSS of a large trace: the 10 GB trace on 16 cores
# peaked at 1,452-1,458 MB (at the inserts; the derivation 1,256) against 1,586-1,661 MB
# at `_depth` under LOAD_MEMORY_CAP, at a cost: its derivation spilled more, 2.4 s slower
# (3-6% of the ingest; docs/benchmarks.md, sixth round). A smaller trace (the 1 GB one:
# 2.7 M events) stays under LOAD_MEMORY_CAP without spilling: it keeps it.
# The 2.9 GB trace on 16 DuckDB threads (2-core machine): the derivation's peak 1,037-1,039
# MB at 768 MiB against 1,152-1,180 MB, its CPU the same (16.1 against 13.4-16.0 s); at
# 640 MiB 905 MB, but _depth and the kernels' insert took 20-30% more CPU (spilled).
DERIVE_MEMORY_CAP = 768 << 20
DERIVE_CAP_EVENTS = 4 << 20


def _batch_bytes(threads):
    """JSON parsed in one batch: BATCH_BYTES, 3/4 of it above 4 threads (peak RSS)."""
    return BATCH_BYTES if threads <= 4 else BATCH_BYTES * 3 // 4


def _pieces_per_batch(threads=1):
    """Pieces parsed at once: one per DuckDB thread (one thread per piece), at least
    what BATCH_BYTES holds, at most PIECES_AT_ONCE."""
    return min(max(1, _batch_bytes(threads) // trace_json.PIECE_BYTES, threads), PIECES_AT_ONCE)


def _piece_bytes(threads):
    """A batch cut in _pieces_per_batch pieces, none over PIECE_BYTES."""
    return min(trace_json.PIECE_BYTES, max(MIN_PIECE_BYTES, _batch_bytes(threads) // _pieces_per_batch(threads)))


class CutInsideEvent(Exception):
    """DuckDB rejected a piece of a trace cut in several: load the joined pieces."""


class NotAllNumbers(Exception):
    """A ts or dur is not a number (a string, an array): load with them read as text."""


# How each way of reading gives ts and dur in ns, and when a batch must be read
# again another way (needs_exact): DuckDB's reader parses a number to a double
# (an integer literal to an exact integer), so a fraction's ns are certain below
# 2^43 µs only (EXACT_DOUBLE_US).
_NUMBERS = {
    # doubles (the fast path): exact below 2^43 µs with at most 3 decimals
    # (us_double_to_ns), and for a whole double below 2^44 µs (where a 3-decimal
    # fraction never rounds to a whole double); beyond, the text path decides
    "double": ("us_double_to_ns", " OR ".join(
        f"isfinite({c}) AND abs({c}) >= {EXACT_DOUBLE_US} AND ({c} <> floor({c}) OR abs({c}) >= {2 * EXACT_DOUBLE_US})"
        for c in ("ts", "dur"))),
    # text (a file whose ts or dur are not all numbers, or that the doubles could
    # not hold): an integer literal keeps its digits; a fraction is the double
    # DuckDB's reader formatted back, so from 2^43 µs on it goes the exact path
    "text": ("us_text_to_ns", " OR ".join(
        f"abs({c}_ns) >= {EXACT_DOUBLE_US * 1000} AND regexp_matches({c}, '[.eE]')" for c in ("ts", "dur"))),
    # the numbers' own text (the exact path): always exact
    "exact": ("us_text_to_ns", "false"),
}


def _source_view(con, raw, numbers, table=None):
    """The temp view _trace_source: the raw relation `raw` plus ts_ns, dur_ns and
    needs_exact, the way `numbers` (a key of _NUMBERS) says; then _trace_rows over it.
    With table (an Arrow table), `raw` is its name while the views are made."""
    conv, exact = _NUMBERS[numbers]
    script = (f"CREATE OR REPLACE TEMP VIEW _trace_source AS SELECT *, coalesce({exact}, false) AS needs_exact "
              f"FROM (SELECT *, {conv}(ts) AS ts_ns, {conv}(dur) AS dur_ns FROM {raw});\n"
              + sql_text("schema", "load/trace_rows.sql"))
    if table is None:
        run_script(con, script)
    else:
        run_script_over(con, script, raw, table)


def _read_pieces(con, files, numbers):
    """The temp views _trace_json, _trace_source and _trace_rows over the pieces of
    the event array (ts and dur as DOUBLE when numbers is 'double')."""
    types = dict(trace_json.RAW_COLUMNS, **({"ts": "DOUBLE", "dur": "DOUBLE"} if numbers == "double" else {}))
    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in types.items()) + "}"
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _trace_json AS SELECT * FROM read_json("
        f"{sql_literal(list(files))}, format='array', columns={cols}, "
        "maximum_object_size=16777216)")
    _source_view(con, "_trace_json", numbers)


def _batches(pieces, per_batch):
    """The pieces (an iterable: they may still be being copied) in groups of
    per_batch, in order, each yielded once whole: each group is staged, numbered
    and inserted before the next, so memory stays bounded."""
    pieces = iter(pieces)
    while group := list(itertools.islice(pieces, per_batch)):
        yield group


def _stage_fast(con, tf, pieces):
    """DuckDB's JSON reader over some pieces of the event array -> the batch's rows
    (_staged), one thread per piece (a numbering window over the scan would hold it to one
    thread: 6.5 s for 2.7 M events on two cores, against ~4 s so). ts and dur are
    read as doubles unless tf.numbers says 'text' (as text, DuckDB formats each
    double back into a string: 0.5 s more per GB, and as much again to convert it)."""
    numbers = tf.numbers
    con.execute("SET SESSION preserve_insertion_order = true")    # the event order is the file order
    _read_pieces(con, pieces, numbers)
    try:
        rows = con.sql("SELECT * FROM _trace_rows").to_arrow_table(STAGE_CHUNK_ROWS)
    except duckdb.Error as e:    # the caller rolls back, the views with the rest
        tf.abandon_pipes()           # a feeder's own error (the file got shorter) first
        msg = str(e).splitlines()[0]
        if isinstance(e, duckdb.InvalidInputException) and (dup := re.search(r'has duplicate key "(.*)"$', msg)):
            obj = re.search(r"Object (.*) has duplicate key", msg)
            raise IngestError(tf.path, f"an event has the key {dup[1]!r} twice (duplicate JSON keys; "
                                       f"{obj[1][:120] if obj else 'the event'}): readers disagree on which value "
                                       "counts, so tracedb reads neither: remove one") from None
        if isinstance(e, duckdb.InvalidInputException) and "JSON transform error" in msg and numbers == "double":
            raise NotAllNumbers() from None
        if isinstance(e, duckdb.InvalidInputException) and "JSON" in msg:
            # DuckDB names a piece file and its offset: find the place in the user's file
            for _ in trace_json.exact_batches(tf):
                pass
            if len(tf.pieces) > 1:       # the exact reader finds it sound: a cut fell inside an event
                raise CutInsideEvent() from None
            raise IngestError(tf.path, "malformed trace JSON") from None
        raise IngestError(tf.path, database_error(e)) from None
    _drop_source(con)
    return _staged(_args_as_json(rows))


def _args_as_json(rows):
    """The batch with args typed as Arrow's JSON (its storage unchanged, no copy).
    As a plain string, the insert into events cast it to DuckDB's JSON, which parses
    every args text again to check it: 0.16 s of CPU per 512 MB batch, for text that
    DuckDB's JSON reader has just written from what it parsed."""
    i = rows.schema.get_field_index("args")
    args = rows.column(i)
    json_type = pa.json_(args.type)
    return rows.set_column(i, pa.field("args", json_type), pa.chunked_array(
        [pa.ExtensionArray.from_storage(json_type, chunk) for chunk in args.chunks], type=json_type))


def _staged(rows):
    """A batch of _trace_rows, in file order, as an Arrow table with each row's
    position in the batch (pos: trace_events.sql numbers the events by it). Not a
    temp table: DuckDB keeps a temp table made and dropped inside a transaction
    until its end, so every batch stayed to the end of the load, spilled (5.7 GB of
    a 10 GB trace's, which cost 4 s); a batch in Arrow is let go once inserted."""
    pos = pc.subtract(pc.cumulative_sum(pa.repeat(1, rows.num_rows)), 1)
    return rows.append_column("pos", pos.cast(pa.int64()))


def _drop_source(con):
    con.execute("DROP VIEW _trace_rows")
    con.execute("DROP VIEW _trace_source")
    con.execute("DROP VIEW IF EXISTS _trace_json")


def _exact_stages(con, tf, batch_rows):
    """The exact path: Arrow batches of the event array (numbers kept as text,
    ingest/trace_json.exact_batches) made into rows of _trace_rows, yielded as a
    staged batch (_staged) ready for its insert (_Ready) every batch_rows rows and at
    the end."""
    parts, staged, done = [], 0, False
    for batch in trace_json.exact_batches(tf):
        text = pa.Table.from_batches([batch])
        _source_view(con, "_trace_text", "exact", text)
        parts.append(con.from_arrow(text).query("_trace_text", "SELECT * FROM _trace_rows")
                     .to_arrow_table(STAGE_CHUNK_ROWS))
        staged += batch.num_rows
        _drop_source(con)
        if staged >= batch_rows:
            yield _ready(con, [_staged(_joined(_drained(parts)))])     # (the parts not held through the insert)
            staged, done = 0, True
    if staged:
        yield _ready(con, [_staged(_joined(_drained(parts)))])
    elif not done:             # no event at all: an empty batch
        empty = os.path.join(os.path.dirname(tf.pieces[0]), "empty.json")
        with open(empty, "w") as f:
            f.write("[]")
        yield _ready(con, [_stage_fast(con, tf, [empty])])


def _drained(parts):
    """The list's items, the list emptied."""
    out = list(parts)
    parts.clear()
    return out


def _joined(parts):
    """The exact path's Arrow tables (one chunk per 65,536 events) as one, in chunks of
    STAGE_CHUNK_ROWS, whole row groups, so the insert leaves no part-filled ones."""
    return pa.Table.from_batches(pa.concat_tables(parts).combine_chunks().to_batches(STAGE_CHUNK_ROWS))


class NeedsExact(Exception):
    """A staged timestamp may have lost its nanoseconds in a double."""


def _parsed_ahead(con, tf):
    """_fast_stages one batch ahead: parsed on a thread, through a cursor of con (the same
    database, memory cap and DuckDB threads), while the caller inserts the batch before.
    The insert of a 256 MB batch keeps about 6 threads busy (a thread per row group):
    the parse of the next one takes the rest. At most two batches are held: the one
    being inserted and the one being parsed (the next is parsed once this one is taken)."""
    cur = con.cursor()
    handed = queue.Queue(maxsize=1)
    taken, stop = threading.Event(), threading.Event()

    def give(kind, box=None):    # False when the caller stopped taking
        item = (kind, box.pop() if box else None)     # (box: a batch no name here holds once handed)
        while not stop.is_set():
            try:
                handed.put(item, timeout=0.05)
                break
            except queue.Full:
                continue
        item = None
        while not stop.is_set():
            if taken.wait(0.05):
                taken.clear()
                return True
        return False

    def work():
        try:
            for box in _fast_stages(cur, tf):
                if not give("batch", box):
                    return
            give("end")
        except BaseException as e:       # raised again in the caller's thread
            give("error", [e])

    worker = threading.Thread(target=work, daemon=True, name="tracedb-parse")
    worker.start()
    try:
        while True:
            got = [handed.get()]
            taken.set()
            kind = got[0][0]
            if kind == "end":
                return
            if kind == "error":
                raise got[0][1]
            # handed on, not held: a name in this frame kept each batch through the
            # caller's insert (the caller lets it go once it has its row-group copy)
            yield got.pop()[1]
    finally:
        stop.set()
        if worker.is_alive():
            cur.interrupt()      # a parse under way is not waited for (a failed insert, Ctrl-C)
        worker.join()
        cur.close()


def _fast_stages(con, tf):
    """Each batch staged and made ready for its insert (_Ready: in whole row groups, its
    mended values counted), in a list of one that its taker empties (the batch then held
    by no name here while it is inserted). On the parse's thread (_parsed_ahead), not the
    inserting one: the 10 GB trace's inserts on 16 cores took 1.2-1.4 s less, and the
    waits for the parse as much more (the parse and the insert are balanced there), and
    the batch is copied chunk by chunk (_realigned) rather than beside itself whole
    (docs/benchmarks.md, sixth round)."""
    for k, group in enumerate(_batches(tf.iter_pieces(), tf.per_batch)):
        # (the first batch, which nothing overlaps, apart)
        with phase("  parse thread: first batch" if k == 0 else "  parse thread: later batches"):
            box = [_stage_fast(con, tf, group)]
            tf.settle()
            if pc.any(box[0]["needs_exact"]).as_py():    # a timestamp may have lost its ns in a double
                box = None         # not held by the exception's traceback through the retry
                raise NeedsExact()
            box = [_ready(con, box)]
        yield box


class _Ready:
    """A staged batch made ready for its insert: `aligned`, its rows in chunks of whole
    row groups (_realigned); `rows`, how many; `mended`, its mended values as
    _count_mended counts them."""
    __slots__ = ("aligned", "rows", "mended")

    def __init__(self, aligned, rows, mended):
        self.aligned, self.rows, self.mended = aligned, rows, mended


def _ready(con, box):
    """The staged batch (_staged) in box (a list of one, emptied) as a _Ready; the batch
    as parsed is let go as it is copied into row groups (_realigned): held beside the
    copy and the next batch's parse, it was a third batch."""
    mended = {}
    _count_mended(con, box[0], mended)
    rows = box[0].num_rows
    return _Ready(_realigned(box, ROW_GROUP_ROWS), rows, mended)


_MENDED = {
    "ts or dur not a number": "have a ts or dur that is not a number (NaN/Infinity are not JSON); stored as NULL",
    "negative dur": "have a negative duration; it was dropped (dur NULL)",
    "no ts": "have no ts (only metadata events, ph M, may lack one); stored with ts NULL, outside every "
             "iteration and report",
    "id beyond 64 bits": "have a correlation or external id beyond 64 bits; each got a negative stand-in "
                         "(id_stand_in), so kernels keep their launches",
    "id not an integer": "have a correlation or external id that is not an integer (a fraction, text, or a "
                         "float beyond 64 bits); stored as NULL, so they link to nothing",
    "args not an object": "have args that are not a JSON object (a list, a string or a number); kept as "
                          "written, with no correlation, external id, stream or device",
    "gpu activity not ph X": "are GPU activity (a kernel, memcpy or memset category) but not a complete "
                             "event (ph X, or no ph); kept in events, left out of kernels",
}


def _count_mended(con, staged, mended):
    """Add the staged batch's values that trace_rows.sql mended to mended:
    problem -> [count, name of the first event]."""
    mended_rows = staged.select(["problem", "name", "pos"]).filter(pc.is_valid(staged["problem"]))
    if not mended_rows.num_rows:
        return
    for problem, n, first in con.from_arrow(mended_rows).query("_mended", (
            "SELECT p, count(*), arg_min(coalesce(name, '?'), pos) FROM (SELECT unnest(string_split(problem, ';')) "
            "AS p, name, pos FROM _mended) GROUP BY 1 ORDER BY 1")).fetchall():
        seen = mended.setdefault(problem, [0, first])
        seen[0] += n


def _warn_mended(path, mended):
    """One warning per kind of mended value, with a count and the first event."""
    for problem, (n, first) in sorted(mended.items()):
        warnings.warn(f"{path}: {n} events {_MENDED[problem]} (first: {first!r})")


def _insert_events(con, tf, stages, mended):
    """Number each staged batch (Arrow, from stages) after the ones before it and
    insert it into events (schema/load/trace_events.sql). Returns (events, batches)."""
    stages = iter(stages)
    with getattr(tf, "staging", None) or nullcontext():
        try:
            return _insert_batches(con, tf, stages, mended)
        finally:
            close = getattr(stages, "close", None)
            if close is not None:
                close()           # a batch being parsed ahead is waited for and let go


def _insert_batches(con, tf, stages, mended):
    n = batches = 0
    while True:
        with status(f"parsing {tf.path}" + (f" (batch {batches + 1})" if batches else "")):
            with phase("parse (JSON -> Arrow; waited for)"):
                staged = next(stages, None)
            if staged is None:
                return n, batches
            with phase("insert (Arrow -> events)"):
                con.execute("SET VARIABLE tracedb_event_offset = ?", [n])
                # The batch in whole row groups, a copy of nearly all of it (a row group
                # spans pieces), made where it was staged (_Ready: on the parse's thread
                # for the fast path).
                for problem, (count, first) in staged.mended.items():
                    mended.setdefault(problem, [0, first])[0] += count
                rows_in, aligned = staged.rows, staged.aligned
                staged = None
                # (this connection only; event_id, from pos, keeps the order)
                con.execute("SET SESSION preserve_insertion_order = false")
                try:
                    run_script_over(con, sql_text("schema", "load/trace_events.sql"), "_trace_staged", aligned)
                finally:
                    con.execute("RESET SESSION preserve_insertion_order")
                aligned = None
                trim_heap()        # the batches' glibc pages back to the OS (store/tuning.trim_heap)
        n += rows_in
        batches += 1


def _aligned(table, rows):
    """table in chunks of exactly `rows` rows but the last (_realigned)."""
    return _realigned([table], rows)


def _realigned(box, rows):
    """The table in box (a list of one, emptied: no name here holds it) in chunks of
    exactly `rows` rows but the last: slices of its chunks, those that straddle a
    boundary copied together, each as soon as it is whole, and each of the table's own
    chunks let go once copied (unless a slice of it is a chunk of its own), so the batch
    is held about once, not as parsed and as copied at once (a batch of 12 pieces, one
    Arrow chunk each, is nearly all copied: a row group spans ~3 pieces)."""
    table = box.pop()
    schema, batches = table.schema, table.to_batches()
    table = None
    batches.reverse()            # taken from the end: each let go once taken
    out, cur, have = [], [], 0
    while batches:
        b = batches.pop()
        at = 0
        while at < b.num_rows:
            take = min(rows - have, b.num_rows - at)
            cur.append(b.slice(at, take))
            have, at = have + take, at + take
            if have == rows:
                out.append(cur[0] if len(cur) == 1 else pa.concat_batches(cur))
                cur, have = [], 0
        b = None
    if cur:
        out.append(cur[0] if len(cur) == 1 else pa.concat_batches(cur))
    return pa.Table.from_batches(out, schema=schema)


def _again(con, tf, run, mended, stages):
    """Load the run's events again (those loaded so far deleted) from stages();
    None when that way too needs the exact path."""
    con.execute("DELETE FROM events WHERE run = ?", [run])
    mended.clear()
    try:
        return _insert_events(con, tf, stages(), mended)
    except NeedsExact:
        return None


def load(con, tf, run):
    """Insert the split trace's events and derived tables under `run`.

    tf.iteration_marker: name of the CPU-side event (annotation or op) that marks
    iterations, for traces without ProfilerStep markers (--iterations-from).
    The caller owns the transaction and registers the run row first.
    """
    iteration_marker = tf.iteration_marker
    path = tf.path
    base_ns = tf.members.get("baseTimeNanoseconds") or 0
    if not isinstance(base_ns, int) or isinstance(base_ns, bool):
        raise IngestError(path, f"baseTimeNanoseconds is not an integer: {base_ns!r}")
    if not 0 <= base_ns < 1 << 62:      # epoch ns; beyond, the events' ns would not fit a BIGINT
        raise IngestError(path, f"baseTimeNanoseconds {base_ns} is not a time in ns since 1970 (0 to 2^62)")
    con.execute("SET VARIABLE tracedb_run = ?", [run])
    con.execute("SET VARIABLE tracedb_base_ns = ?", [base_ns])
    con.execute("SET VARIABLE tracedb_iteration_marker = ?", [iteration_marker])
    mended = {}
    try:
        n = _insert_events(con, tf, _exact_stages(con, tf, BATCH_ROWS) if tf.truncated
                           else _parsed_ahead(con, tf), mended)
    except NeedsExact:          # timestamps the doubles cannot hold: as text, then exactly
        n = None
        if tf.numbers == "double":
            tf.numbers = "text"
            if tf.memory is not None:         # read once: read again from files
                raise trace_json.PiecesGone() from None
            n = _again(con, tf, run, mended, lambda: _parsed_ahead(con, tf))
        if n is None:
            n = _again(con, tf, run, mended, lambda: _exact_stages(con, tf, BATCH_ROWS))
    trim_heap()                # the last batch's pages too, before the derivation fills DuckDB's cap
    _warn_mended(path, mended)
    if tf.truncated:
        warnings.warn(f"{path}: event array is cut off; repaired after its last complete event ({n[0]} events)")
    with status("linking kernels, launches, ops and iterations"), phase("derive (kernels, launches, ops, iterations)"):
        con.execute("CREATE OR REPLACE TEMP VIEW _run_events AS "
                    "SELECT * FROM events WHERE run = getvariable('tracedb_run')")
        with _derive_cap(con, n[0]):
            _ac2g_links(con, path, run)
            derive(con, run)
            _load_cupti_ranges(con, path, run)
            dist = tf.members.get("distributedInfo")
            world = dist.get("world_size") if isinstance(dist, dict) else None
            run_script(con, sql_text("schema", "load/collectives.sql"),
                       {"run": run, "world_size": world if isinstance(world, int) else None})
            run_script(con, sql_text("schema", "load/trace_system.sql"))
        if getattr(tf, "op_totals", False):
            store_op_totals(con, run)
        con.execute("DROP VIEW _run_events")
        for v in ("tracedb_run", "tracedb_base_ns", "tracedb_event_offset",
                  "tracedb_iteration_marker"):
            con.execute(f"RESET VARIABLE {v}")
    if iteration_marker is not None and not scalar(con, "SELECT count(*) FROM iterations WHERE run = ?", [run]):
        raise IngestError(path, f"--iterations-from {iteration_marker!r}: no CPU-side event of that name "
                                "with a duration in the trace")
    return {"base_time_ns": base_ns}


def _derive_cap(con, events):
    """DuckDB's limit lowered from LOAD_MEMORY_CAP to DERIVE_MEMORY_CAP for the
    derivation of a trace of DERIVE_CAP_EVENTS events or more (store/tuning.cap_changed:
    left as it is where the limit is not the load's own, a folder's or the user's), then
    back for what follows (--op-totals raises it from LOAD_MEMORY_CAP)."""
    if events < DERIVE_CAP_EVENTS or DERIVE_MEMORY_CAP >= LOAD_MEMORY_CAP:
        return nullcontext()
    return cap_changed(con, LOAD_MEMORY_CAP, DERIVE_MEMORY_CAP)


# A trace of more kernels than this inserts them in ranges of launch order of this many
# (whole row groups each), each range its own sort. In one statement (two hash joins
# and the sort of every kernel) the 10 GB trace's 2.5 M kernels ran out of
# DERIVE_MEMORY_CAP in about 1 of 18 CLI ingests on the 16-core host, and under
# LOAD_MEMORY_CAP they took the ingest's peak RSS to 1,548-1,600 MB (DuckDB 939 MB, the
# sort 673 MB of it; docs/benchmarks.md).
KERNEL_INSERT_ROWS = 8 * ROW_GROUP_ROWS


def derive(con, run, gpu=None):
    """derive_trace.sql over the run's events (_run_events); gpu: a script making _gpu
    in place of its own statement (nsys.py: nsys_gpu.sql). Its kernels' insert runs in
    ranges of launch order where the run has more than KERNEL_INSERT_ROWS kernels (each
    range in order after the one before: the table keeps launch order)."""
    script = sql_text("schema", "load/derive_trace.sql")
    before, insert, after = split_at(script, r"^INSERT INTO kernels\b", "of derive_trace.sql inserting into kernels")
    params = {"run": run}
    if gpu is not None:
        first, _, middle = split_at(before, r"^CREATE OR REPLACE TEMP TABLE _gpu AS",
                                    "of derive_trace.sql creating _gpu for another script to stand for")
        run_script(con, first, params)
        run_script(con, gpu, params)
        run_script(con, middle, params)
    else:
        run_script(con, before, params)
    kernels = scalar(con, "SELECT count(*) FROM _seq")
    if kernels <= KERNEL_INSERT_ROWS:
        run_script(con, insert, params)
    else:
        try:
            for lo in range(0, kernels, KERNEL_INSERT_ROWS):
                con.execute("SET VARIABLE tracedb_seq_from = ?", [lo])
                con.execute("SET VARIABLE tracedb_seq_to = ?", [lo + KERNEL_INSERT_ROWS])
                run_script(con, insert, params)
        finally:
            con.execute("RESET VARIABLE tracedb_seq_from")
            con.execute("RESET VARIABLE tracedb_seq_to")
    run_script(con, after, params)


def store_op_totals(con, run):
    """--op-totals: the run's per-iteration op, FLOP, GPU time and finding totals stored
    (after its derivation, in its transaction), which ops, the FLOP reports, the kernel
    sweeps' reports and findings read for iteration=all instead of sweeping every event
    or kernel (docs/benchmarks.md)."""
    with cap_changed(con, LOAD_MEMORY_CAP, TOTALS_MEMORY_CAP):
        _store_op_totals(con, run)


def _store_op_totals(con, run):
    with phase("op totals (iteration_aggregates.sql, flop_aggregates.sql)"):
        run_script(con, sql_text("schema", "load/iteration_aggregates.sql"), {"run": run})
        run_script(con, sql_text("schema", "load/flop_aggregates.sql"), {"run": run})
    with phase("kernel totals (kernel_aggregates.sql, launch_queue, top_kernels, idle_breakdown)"):
        run_script(con, sql_text("schema", "load/kernel_aggregates.sql"), {"run": run})
        _store_reports(con, run)
    with phase("finding totals (finding_aggregates.sql)"):
        run_script(con, sql_text("schema", "load/finding_aggregates.sql"), {"run": run})


# reports whose iteration=all rows an ingest with --op-totals stores: (report, table, the
# columns stored, the parameters besides the run, what else a row carries: (column, SQL));
# a run's marker row leaves the columns NULL
_STORED_REPORTS = (
    ("launch_queue", "launch_queue_totals", "stream, mean_queued, p95_queued, max_queued, empty_pct, empty_gpu_idle_pct",
     {"iteration": "all", "series": False}, None),
    ("top_kernels", "top_kernel_totals", "name, launches, total_ns, mean_ns, time_share_pct, op_name, layer_type",
     {"iteration": "all", "limit": 2147483647}, ("rules", "layer_rules_digest()")),
    # by cause with the header's default short_gap_ns (tests/test_kernel_aggregates.py holds them equal)
    ("idle_breakdown", "idle_totals", "stream, cause, gaps, idle_ns, share_pct",
     {"iteration": "all", "by": "cause", "short_gap_ns": 10000}, ("short_gap_ns", "10000")),
)


def _store_reports(con, run):
    """The iteration=all rows of the reports of _STORED_REPORTS over this run, from the
    report's own SQL (queries/: the run's rows deleted first, so it sweeps the run), into
    their tables; a run without a row keeps one with those columns NULL."""
    for name, table, columns, params, extra in _STORED_REPORTS:
        con.execute(f"DELETE FROM {table} WHERE run = ?", [run])
        report = sql_text("queries", f"{name}.sql").strip().rstrip(";")
        more = f", {extra[1]}" if extra else ""
        con.execute(f"INSERT INTO {table} SELECT run, iteration, {columns}{more} FROM ({report})",
                    {"run": run} | params)
        con.execute(f"INSERT INTO {table} (run{', ' + extra[0] if extra else ''}) SELECT ?{more} WHERE NOT EXISTS "
                    f"(SELECT 1 FROM {table} WHERE run = ?)", [run, run])


def _ac2g_links(con, path, run):
    """GPU activity without args.correlation is linked to its launch through the ac2g
    flow events where the trace has them (schema/load/ac2g_links.sql); where it has
    neither, a warning says that the kernels have no launch (no op, no layer)."""
    unwritten = ("SELECT count(*) FILTER (WHERE json_extract_string(args, '$.correlation') IS NULL AND "
                 "json_extract_string(args, '$.correlation_id') IS NULL) "      # unusable ids: warned already
                 "FROM _run_events WHERE ph = 'X' AND correlation IS NULL AND gpu_activity_kind(cat) IS NOT NULL")
    unlinked = scalar(con, unwritten)
    if not unlinked:
        return
    run_script(con, sql_text("schema", "load/ac2g_links.sql"), {"run": run})
    left = scalar(con, unwritten)
    if left:
        warnings.warn(f"{path}: {left} of {unlinked} GPU events without args.correlation have no ac2g flow "
                      "to their launch either: they are kept without a launch, op or layer")


def _load_cupti_ranges(con, path, run):
    """CUPTI range-profiler counters (cuda_profiler_range events) as kernels and
    counters of the run (schema/load/cupti_ranges.sql); warns when the ranges
    cannot be paired with the launches."""
    run_script(con, sql_text("schema", "load/cupti_ranges.sql"), {"run": run})
    unpaired = scalar(con, "SELECT count(*) FROM kernels WHERE run = ? AND kernel_id IN "
                      "(SELECT event_id FROM _run_events WHERE cat = 'cuda_profiler_range') "
                      "AND launch_event_id IS NULL", [run])
    if unpaired:
        warnings.warn(f"{path}: {unpaired} CUPTI range-profiler kernels could not be paired with their "
                      "launches (counts differ); their counters are kept without an op")


def _whole(v, low, high):
    """v as an int when it is a whole number in [low, high), also written as a float
    (1.0) or as digits ("1"); None for anything else (a bool, 2.5, "abc")."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    elif isinstance(v, str) and re.fullmatch(r"\s*[0-9]+\s*", v):
        v = int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) and low <= v < high else None


def _distributed(path, dist):
    """(rank, world_size) of a trace's distributedInfo; what is not a rank of its
    world (text, a fraction, a negative, a rank past world_size - 1) is warned of and
    left out, so the run loads as a single trace (--rank N gives it one)."""
    if not dist:
        return None, None
    if not isinstance(dist, dict):
        warnings.warn(f"{path}: distributedInfo is not an object ({type(dist).__name__}); ignored")
        return None, None
    rank, world = dist.get("rank"), dist.get("world_size")
    good_rank, good_world = _whole(rank, 0, 1 << 31), _whole(world, 1, 1 << 31)
    bad = [f"{k} {json.dumps(v, default=str)} is not an integer from {lo} to 2^31 - 1" for k, v, good, lo in
           (("rank", rank, good_rank, 0), ("world_size", world, good_world, 1)) if v is not None and good is None]
    if good_rank is not None and good_world is not None and good_rank >= good_world:
        bad.append(f"rank {good_rank} is not below world_size {good_world}: both")
        good_rank = good_world = None
    if bad:
        warnings.warn(f"{path}: distributedInfo: {'; '.join(bad)}; left out (--rank N sets the rank)")
    return good_rank, good_world


def run_metadata(con, run, members, path):
    """Framework, device and distributed fields of the runs row, from members and events."""
    devs = members.get("deviceProperties") or []
    if not (isinstance(devs, list) and all(isinstance(d, dict) for d in devs)):
        warnings.warn(f"{path}: deviceProperties is not a list of objects; kept in the run's metadata only")
        devs = []
    dist = members.get("distributedInfo") or {}
    rank, world = _distributed(path, dist)
    framework = scalar(con, """
        WITH c AS (SELECT DISTINCT lower(cat) AS cat FROM events WHERE run = $run),
             n AS (SELECT DISTINCT name FROM events WHERE run = $run AND cat IS NULL)
        SELECT CASE
            WHEN EXISTS (SELECT 1 FROM c WHERE cat IN ('cpu_op', 'operator', 'cuda_runtime', 'runtime',
                                                      'python_function', 'user_annotation')) THEN 'pytorch'
            WHEN EXISTS (SELECT 1 FROM n WHERE name LIKE 'PjitFunction%' OR name LIKE 'jit_%') THEN 'jax'
            WHEN EXISTS (SELECT 1 FROM n WHERE name IN ('EagerExecute', 'EagerKernelExecute',
                                                        'TFE_Py_FastPathExecute_C')) THEN 'tensorflow'
            ELSE 'unknown' END""", {"run": run})
    device = devs[0].get("name") if devs else None
    if device is None:
        device = scalar(con, "SELECT min(process_name) FROM threads WHERE run = ? AND process_name LIKE '/device:%'",
                        [run])
    return {
        "framework": framework,
        "device_name": device,
        "device_properties": json.dumps(devs) if devs else None,
        "rank": rank,
        "world_size": world,
        "distributed_info": json.dumps(dist) if dist else None,
        "metadata": json.dumps(members, default=str),
    }


def _wait_hash(tf):
    with phase("hash (wait for the sha256 thread)"):
        tf.wait_hash()


def _first_is_event(t):
    """The first element of a bare JSON array is a trace event (has "ph"), or is too
    long to tell from the first 64 KiB (then the load decides)."""
    try:
        first, _ = json.JSONDecoder().raw_decode(t, t.index("{"))
    except (ValueError, RecursionError):
        return True
    return isinstance(first, dict) and "ph" in first


class TraceReader(Reader):
    """Chrome-trace JSON (PyTorch/Kineto, TensorFlow/JAX trace_viewer), plain or gzip."""
    kind = "trace"

    def sniff(self, path, text):
        t = text()
        if t[:1] == "{" and '"traceEvents"' in t:
            return "chrome-json"
        if re.match(r"\[\s*\]", t) or (re.match(r"\[\s*\{", t) and _first_is_event(t)):
            return "chrome-json"
        return None

    def summary(self, con, run):
        e, k, i = rows(con, """SELECT (SELECT count(*) FROM events WHERE run = $r),
                                      (SELECT count(*) FROM kernels WHERE run = $r),
                                      (SELECT count(*) FROM iterations WHERE run = $r)""", {"r": run})[0]
        line = f"{self.kind}: {e} events, {k} kernels, {i} iterations"
        if k == 0:
            line += "; no GPU kernel events (a CPU-only trace, or a CUPTI range-profiler trace: GPU time is not in it)"
        if i == 0:
            line += ("; no iteration markers (ProfilerStep#N, step_num): name the annotation or op that "
                     "marks an iteration with --iterations-from NAME")
        return line

    def notes(self, con, path, run):
        """What a trace lacks that the reports need (a JSON that is not a profiler trace)."""
        k, i = rows(con, "SELECT (SELECT count(*) FROM kernels WHERE run = $r), "
                         "(SELECT count(*) FROM iterations WHERE run = $r)", {"r": run})[0]
        out = []
        if not k:
            out.append(f"note: {path}: no GPU kernels, memcpy or memset in it: the GPU reports have nothing "
                       f"for run {run}")
        if not i:
            out.append(f"note: {path}: no step markers (ProfilerStep#N, step_num): per-iteration reports have "
                       f"nothing for run {run}")
        return out

    def prepare(self, con, path, fmt, work, options):
        threads = scalar(con, "SELECT current_setting('threads')")
        per_batch = _pieces_per_batch(threads)
        piece_bytes = _piece_bytes(threads)
        # (none for a file loaded beside others, ingest/parallel.py: their work overlaps
        # its parse, and the part-filled row group it leaves was rewritten at a checkpoint)
        small = 0 if options.get("beside_others") else FIRST_BATCH_BYTES
        first = (per_batch, min(piece_bytes, small // per_batch)) if small else (0, 0)
        with phase("pieces (split: prologue, cuts)"):
            tf = trace_json.split(path, work, hashlib.sha256(), piece_bytes=piece_bytes,
                                  memory_pieces=per_batch + PIECES_AHEAD, first=first)
        tf.per_batch = per_batch
        # A duplicate has the same size: only then wait for the hash before loading;
        # otherwise hashing an uncompressed file overlaps the parse. A compressed one
        # inflated while it loads has no size yet: the caller checks its hash after.
        inflating = tf.content_bytes is None
        if not inflating and scalar(con, "SELECT count(*) FROM runs WHERE content_bytes = ?", [tf.content_bytes]):
            tf.wait_hash()
        tf.iteration_marker = options.get("iterations_from")
        tf.op_totals = bool(options.get("op_totals"))   # --op-totals: iteration_aggregates.sql too
        tf.staging = options.get("staging")     # entered to parse and insert the events (ingest/parallel.py)
        prep = Prepared(fmt, tf.content_bytes, None, digest_ready=tf.hashing is None and not inflating, state=tf)
        prep.digest = lambda: (_wait_hash(prep.state), prep.state.hasher.hexdigest())[1]
        return prep

    @contextmanager
    def loading(self, con, prep):
        try:
            with memory_cap(con, LOAD_MEMORY_CAP):
                yield
        finally:
            prep.state.stop()      # no piece is copied after the load (its work directory goes)

    def load(self, con, prep, run):
        tf = prep.state
        try:
            info = load(con, tf, run) or {}
        except CutInsideEvent:      # a cut between pieces fell inside an event: rare
            tf.rejoin = True
            raise Reload() from None
        except NotAllNumbers:       # a ts or dur that is a string or such: rare
            tf.numbers = "text"
            raise Reload() from None
        except trace_json.PiecesGone:     # read again another way: from piece files
            raise Reload() from None
        prep.content_bytes = tf.content_bytes
        with phase("run metadata"):
            fields = run_metadata(con, run, tf.members, tf.path)
        fields.update(info)
        fields["n_events"] = scalar(con, "SELECT count(*) FROM events WHERE run = ?", [run])
        return fields

    def reload(self, prep, work):
        if prep.state.memory is not None:       # its pieces were let go: inflate it again, into files
            old = prep.state
            old.stop()
            prep.state = trace_json.split(old.path, work, hashlib.sha256(), piece_bytes=old.piece_bytes)
            for kept in ("numbers", "rejoin", "iteration_marker", "per_batch", "staging", "op_totals"):
                setattr(prep.state, kept, getattr(old, kept))
        if prep.state.rejoin:
            prep.state.rejoin = False
            trace_json.join_pieces(prep.state, work)
