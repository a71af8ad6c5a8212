"""The derivation's kernels insert (schema/load/derive_trace.sql: written in launch
order), timed in the ways it could be written, on a database that holds a trace run.

usage: python benchmarks/bench_kernels_insert.py DB [--threads N] [--rounds N]
(DB: `bench_ingest.py BIG.json --keep DB`.) Each variant runs in a transaction of its
own that is rolled back: the derivation's statements before the insert are run again
(the kernels of the run deleted first), then the variant is timed (wall and process CPU
seconds), and the kernels it wrote are checked against the landed statement's, row for
row, and their order in the table (a scan without ORDER BY: the order reports add in)
checked to be launch order.
Variants:
  landed     INSERT ... SELECT (the joins) ORDER BY seq
  wide-first the joins into a temp table unordered, then INSERT ... ORDER BY seq from it
  arrow      the sorted rows fetched as Arrow, cut in row groups, inserted keeping the order
  arrow-any  the same, inserted without keeping the order (row groups in any order:
             shown for the cost of the ordered insert only; its order differs)
"""
import os
import resource
import sys
import time


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv):
    from tracedb.store import db
    from tracedb.store.db import sql_text
    from tracedb.store.sql import bind, statements
    from tracedb.ingest.trace import _aligned, ROW_GROUP_ROWS

    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    if not argv or not os.path.isfile(argv[0]):      # (DuckDB would make it)
        sys.exit(f"no such database: {argv[0] if argv else '(none given)'}; usage: "
                 "python benchmarks/bench_kernels_insert.py DB [--threads N] [--rounds N]")
    path = argv[0]
    threads = int(argv[argv.index("--threads") + 1]) if "--threads" in argv else None
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 1
    con = db.connect(path)
    if threads:
        con.execute(f"SET threads = {threads}")
    con.execute("SET memory_limit = '1GiB'")       # as while a trace loads (store/tuning.MEMORY_CAP)
    run = con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY run LIMIT 1").fetchall()[0][0]
    script = statements(sql_text("schema", "load/derive_trace.sql"))
    at = next(i for i, s in enumerate(script) if s.lstrip().startswith("INSERT INTO kernels"))
    before, insert = script[:at], script[at]
    select = insert.split("INSERT INTO kernels", 1)[1].replace("$run", "getvariable('tracedb_run')")
    unordered = select[:select.rindex("ORDER BY")]

    def prepare():
        con.execute("BEGIN")
        con.execute("SET VARIABLE tracedb_run = ?", [run])
        con.execute("SET VARIABLE tracedb_iteration_marker = NULL")
        con.execute("CREATE OR REPLACE TEMP VIEW _run_events AS SELECT * FROM events WHERE run = getvariable('tracedb_run')")
        con.execute("DELETE FROM kernels WHERE run = ?", [run])
        for s in before:
            if not s.lstrip().startswith("INSERT INTO threads"):
                con.execute(s, bind(s, {"run": run}))

    def landed():
        con.execute(insert, {"run": run})

    def wide_first():
        con.execute(f"CREATE OR REPLACE TEMP TABLE _k AS {unordered}")
        con.execute("INSERT INTO kernels SELECT * FROM _k ORDER BY seq")

    def arrow(keep_order):
        def go():
            t = con.sql(select).to_arrow_table(ROW_GROUP_ROWS)
            t = _aligned(t, ROW_GROUP_ROWS)
            if not keep_order:
                con.execute("SET preserve_insertion_order = false")
            con.from_arrow(t).query("_t", "INSERT INTO kernels SELECT * FROM _t")
            con.execute("RESET preserve_insertion_order")
        return go

    variants = {"landed": landed, "wide-first": wide_first, "arrow": arrow(True), "arrow-any": arrow(False)}
    want = None
    print(f"{path}: run {run}, threads {con.execute('SELECT current_setting(?)', ['threads']).fetchall()[0][0]}")
    print(f"{'variant':12} {'wall s':>8} {'cpu s':>8}  same rows, same order")
    for _ in range(rounds):
        for name, fn in variants.items():
            prepare()
            t, c = time.perf_counter(), _cpu()
            fn()
            wall, cpu = time.perf_counter() - t, _cpu() - c
            seqs = [r[0] for r in con.execute("SELECT seq FROM kernels WHERE run = ?", [run]).fetchall()]
            in_order = all(a < b for a, b in zip(seqs, seqs[1:]))
            rows = len(seqs)
            same = con.execute("SELECT hash(list(k ORDER BY k.kernel_id)) FROM kernels k WHERE run = ?",
                               [run]).fetchall()[0][0]
            con.execute("ROLLBACK")
            want = same if want is None else want
            print(f"{name:12} {wall:8.3f} {cpu:8.3f}  {rows} rows: {'yes' if same == want else 'NO'}, "
                  f"{'yes' if in_order else 'no'}")
    con.close()


if __name__ == "__main__":
    main(sys.argv[1:])
