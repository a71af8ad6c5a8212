"""The ingest's phases alone: how fast the parse and the insert go with nothing beside them.

usage: python benchmarks/bench_ingest_bounds.py BIG.json [--cores 2,8,12,16] [--sql STATEMENT] [--one-insert]

For each core count (the process pinned to that many cores, DuckDB on as many threads),
the trace is cut into pieces as the ingest cuts it (ingest/trace_json.split, the
ingest's piece size and pieces per batch for those threads), then:
  parse   every batch through DuckDB's JSON reader and _trace_rows into Arrow, made
          ready for its insert as the ingest makes it (ingest/trace._stage_fast, _ready),
          all batches kept: the parse with no insert beside it;
  insert  those batches into the events table of a fresh database
          (schema/load/trace_events.sql, unordered, in whole row groups, as the ingest
          inserts them), in one transaction, then committed: the insert with no parse
          beside it.
What a whole ingest adds after these (the derivation, the checkpoint) is in its own
profile: `bench_ingest.py BIG.json --profile`. The sum parse + derivation + checkpoint
is the least an ingest that derives after its last insert (one DuckDB transaction:
a second connection does not see its rows) can take, even with every insert hidden
beside the parse (docs/benchmarks.md, "Seventh round").
--sql STATEMENT: run on the connection before the insert (a DuckDB setting to measure).
--one-insert: every batch inserted in one statement (the row groups of the whole trace,
not of one batch, for DuckDB's threads to share: what batches as big as the trace would
give, whatever their memory).
"""
import hashlib
import os
import resource
import shutil
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(path, cores, sql=None, together=False):
    from tracedb.ingest import trace, trace_json
    from tracedb.store import db
    from tracedb.store.db import sql_text
    from tracedb.store.sql import run_script_over

    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    work = tempfile.mkdtemp(prefix="bounds-")
    try:
        con = db.connect(os.path.join(work, "b.duckdb"))
        con.execute(f"SET threads = {cores}")
        con.execute(f"SET memory_limit = '{trace.LOAD_MEMORY_CAP}B'")
        per_batch = trace._pieces_per_batch(cores)
        tf = trace_json.split(path, work, hashlib.sha256(), piece_bytes=trace._piece_bytes(cores))
        pieces = tf.pieces                    # (the copy waited for: not timed)
        tf.wait_hash()
        size = sum(os.path.getsize(p) for p in pieces)
        t, c = time.perf_counter(), _cpu()
        ready = [trace._ready(con, [trace._stage_fast(con, tf, pieces[i:i + per_batch])])
                 for i in range(0, len(pieces), per_batch)]
        parse_s, parse_cpu = time.perf_counter() - t, _cpu() - c
        rows = sum(r.rows for r in ready)
        script = sql_text("schema", "load/trace_events.sql")
        con.execute("SET VARIABLE tracedb_run = 'bounds'")
        con.execute("SET VARIABLE tracedb_base_ns = 0")
        if sql:
            con.execute(sql)
        t, c = time.perf_counter(), _cpu()
        con.execute("BEGIN")
        n = 0
        con.execute("SET SESSION preserve_insertion_order = false")
        if together:
            batches = [b for r in ready for b in r.aligned.to_batches()]
            schema = ready[0].aligned.schema
            ready.clear()
            con.execute("SET VARIABLE tracedb_event_offset = 0")
            whole = pa.Table.from_batches(batches, schema=schema)
            batches = None
            # (pos restarts in each batch: numbered again over the whole)
            whole = whole.set_column(whole.schema.get_field_index("pos"), "pos",
                                     pc.subtract(pc.cumulative_sum(pa.repeat(1, whole.num_rows)), 1).cast(pa.int64()))
            t, c = time.perf_counter(), _cpu()       # (the table's making not counted)
            run_script_over(con, script, "_trace_staged", whole)
            n = whole.num_rows
            whole = None
        while ready:
            r = ready.pop(0)
            con.execute("SET VARIABLE tracedb_event_offset = ?", [n])
            run_script_over(con, script, "_trace_staged", r.aligned)
            n += r.rows
            r = None
        con.execute("COMMIT")
        insert_s, insert_cpu = time.perf_counter() - t, _cpu() - c
        con.close()
        print(f"{cores:5d} {len(pieces):6d} {per_batch:5d} {parse_s:8.2f} {parse_cpu:8.1f} {size / parse_s / 1e6:8.0f} "
              f"{insert_s:8.2f} {insert_cpu:8.1f} {size / insert_s / 1e6:8.0f} {rows:10d}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv):
    if not argv or argv[0] in ("-h", "--help") or not os.path.isfile(argv[0]):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    cores = [int(c) for c in argv[argv.index("--cores") + 1].split(",")] if "--cores" in argv else [2, 8, 12, 16]
    print(f"{argv[0]}: {os.path.getsize(argv[0]) / 1e6:.0f} MB; each phase alone (wall s, CPU s of the process, MB/s)")
    print(f"{'cores':>5} {'pieces':>6} {'batch':>5} {'parse s':>8} {'cpu s':>8} {'MB/s':>8} "
          f"{'insert s':>8} {'cpu s':>8} {'MB/s':>8} {'events':>10}")
    for c in cores:
        if c > len(os.sched_getaffinity(0)):
            continue
        pid = os.fork()           # each count in a process of its own (affinity, DuckDB's threads, RSS)
        if pid == 0:
            try:
                one(argv[0], c, argv[argv.index("--sql") + 1] if "--sql" in argv else None, "--one-insert" in argv)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
