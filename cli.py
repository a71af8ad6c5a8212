"""The `tracedb` command: ingest, reports, query, sql, demo."""
import argparse
import os
import sys
import warnings
from importlib import resources

import duckdb

from tracedb import adhoc, db, output, reports
from tracedb.ingest import IngestError, ingest_file


class UsageError(Exception):
    pass


# Bytes 8..11 of every DuckDB database file.
DUCKDB_MAGIC = b"DUCK"


def _check_db_file(path, must_exist):
    """UsageError unless path is a DuckDB file (or absent/empty where it may be created):
    DuckDB would open a .csv/.json/.parquet file as an empty in-memory database,
    and an ingest would then print `loaded` and keep nothing."""
    if not os.path.exists(path):
        if must_exist:
            raise UsageError(f"{path}: no such database (create it with `tracedb ingest ... --db {path}`)")
        return
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a database file")
    with open(path, "rb") as f:
        head = f.read(12)
    if head and head[8:12] != DUCKDB_MAGIC:
        raise UsageError(f"{path}: not a DuckDB database (--db names the database file; "
                         "give the data file as PATH of tracedb ingest)")


_WAIT_S = 0.0       # --wait: how long to wait for a database another process holds


def _open(path, write=False):
    from tracedb.dblock import DatabaseLocked, say_on_stderr
    _check_db_file(path, must_exist=not write)
    try:
        return db.connect(path, read_only=not write, wait_s=_WAIT_S, say=say_on_stderr)
    except DatabaseLocked as e:
        raise UsageError(str(e)) from None
    except duckdb.Error as e:
        raise UsageError(f"{path}: cannot open database ({str(e).splitlines()[0]})") from None


def _params(pairs):
    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise UsageError(f"--param {p!r}: expected K=V")
        k, v = p.split("=", 1)
        out[k.strip()] = v
    return out


def _format(args):
    return args.format or ("table" if sys.stdout.isatty() else "csv")


def cmd_ingest(args):
    if args.run and len(args.paths) > 1:
        raise UsageError("--run names the run of a single file; give one PATH")
    options = {"columns": args.columns, "tz": args.tz, "offset_ns": args.offset_ns,
               "start_ns": args.start_ns, "interval_ms": args.interval_ms,
               "iterations_from": args.iterations_from}
    if args.lake:
        if args.db or args.pair_with or args.run:
            raise UsageError("--lake writes each file as its own partition: no --db, --pair-with or --run with it")
        from tracedb import lake
        try:
            failed = lake.ingest(args.paths, args.lake, jobs=args.jobs, options=options, report=_lake_line)
        except lake.LakeError as e:
            raise UsageError(str(e)) from None
        return 1 if failed else 0
    if not args.db:
        raise UsageError("give --db FILE (or --lake DIR)")
    if args.run is not None:
        from tracedb.ingest import check_run_name
        if why := check_run_name(args.run):
            raise UsageError(why)
    con = _open(args.db, write=True)
    try:
        return _ingest_paths(con, args, options)
    finally:
        con.close()         # checkpointed, also when interrupted


def _ingest_paths(con, args, options):
    failed = 0
    for path in args.paths:
        try:
            r = ingest_file(con, path, run=args.run, pair_with=args.pair_with, options=options)
        except IngestError as e:
            print(f"tracedb: error: {e}", file=sys.stderr)
            failed += 1
            continue
        if r.status == "skipped":
            print(f"skipped {path}: {r.message}")
        else:
            print(f"loaded {path} as run {r.run} ({_summary(con, r.run, r.kind)})")
        if r.match:
            print(_match_line(r.match))
        elif r.pairing:
            print(r.pairing)
    return 1 if failed else 0


def _lake_line(line, level):
    """A line of `ingest --lake`: errors and warnings on stderr, as everywhere else."""
    if level == "info":
        print(line, flush=True)
    else:
        print(f"tracedb: {level}: {line}", file=sys.stderr, flush=True)


def _summary(con, run, kind):
    counts = db.rows(con, """SELECT (SELECT count(*) FROM events WHERE run = $r),
                                     (SELECT count(*) FROM kernels WHERE run = $r),
                                     (SELECT count(*) FROM iterations WHERE run = $r),
                                     (SELECT count(DISTINCT metric) FROM counters WHERE run = $r)""",
                     {"r": run})[0]
    if kind == "ncu":
        return f"ncu: {counts[1]} kernels, {counts[3]} metrics"
    if kind == "power":
        n, g, s = db.rows(con, "SELECT count(*), count(DISTINCT gpu), (max(ts_ns) - min(ts_ns)) / 1e9 "
                               "FROM power WHERE run = ?", [run])[0]
        return f"power: {n} samples, {g} GPU(s), {s:.2f} s"
    line = f"{kind}: {counts[0]} events, {counts[1]} kernels, {counts[2]} iterations"
    if kind == "trace" and counts[1] == 0:
        line += "; no GPU kernel events (a CPU-only trace, or a CUPTI range-profiler trace: GPU time is not in it)"
    if kind == "trace" and counts[2] == 0:
        line += ("; no iteration markers (ProfilerStep#N, step_num): name the annotation or op that "
                 "marks an iteration with --iterations-from NAME")
    return line


def _match_line(m):
    it = "the whole run" if m["iteration"] is None else f"iteration {m['iteration']}"
    pct = 100.0 * m["matched"] / m["ncu_kernels"] if m["ncu_kernels"] else 0.0
    return (f"matched {m['matched']} of {m['ncu_kernels']} ncu kernels ({pct:.1f}%) with the "
            f"{m['trace_kernels']} kernels of {m['trace_run']} {it} in {m['seconds']:.2f} s "
            f"(details: tracedb query match_quality --run {m['trace_run']})")


def cmd_match(args):
    from tracedb.match import MatchError, match
    con = _open(args.db, write=True)
    try:
        m = match(con, args.trace_run, args.ncu_run, iteration=args.iteration, whole_run=args.whole_run)
    except MatchError as e:
        raise UsageError(f"match: {e}") from None
    print(_match_line(m))
    return 0


def cmd_chart(args):
    from tracedb import charts
    params = _params(args.param)
    if args.run is not None:
        params["run"] = args.run
    con = _open(args.db)
    chart = charts.build(con, args.name, params)
    charts.save(chart, args.output)
    print(f"wrote {args.output} (chart {args.name} from report {charts.CHARTS[args.name][0]})")
    return 0


def cmd_power_log(args):
    from tracedb.power_log import PowerLogError, record
    command = args.command_[1:] if args.command_[:1] == ["--"] else args.command_
    gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else None
    try:
        rc = record(args.output, command, interval_ms=args.interval_ms, gpus=gpus, idle_s=args.idle_s)
    except PowerLogError as e:
        raise UsageError(f"power-log: {e}") from None
    except FileNotFoundError as e:
        raise UsageError(f"power-log: cannot run {command[0]!r} ({e.strerror})") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return rc


def cmd_calibrate(args):
    from tracedb.cuda_bench.build import BuildError
    from tracedb.cuda_bench.run import main as bench
    try:
        return bench(args.rest)
    except BuildError as e:
        raise UsageError(f"calibrate: {e}") from None


def cmd_export(args):
    from tracedb import lake
    con = _open(args.db)
    try:
        runs = lake.export(con, args.lake, args.run or None)
    except lake.LakeError as e:
        raise UsageError(f"export: {e}") from None
    print(f"exported {len(runs)} runs to {args.lake}")
    return 0


def cmd_reports(args):
    for r in reports.all_reports().values():
        params = ", ".join(f"{p.name}={p.default if p.default is not None else ''}" for p in r.params
                           if p.name != "run")
        print(f"{r.name}\n    {r.description}" + (f"\n    parameters: {params}" if params else ""))
    return 0


def cmd_query(args):
    params = _params(args.param)
    if args.run is not None:
        params["run"] = args.run
    if args.print_sql:
        from tracedb import engines
        print(engines.transpile(args.name, args.dialect or "duckdb", params))
        return 0
    if args.engine == "spark":
        if not args.lake:
            raise UsageError("--engine spark reads a lake: give --lake DIR (tracedb export --db FILE --lake DIR)")
        from tracedb import engines
        try:
            table = engines.run_spark(args.name, params, args.lake, args.spark_master)
        except FileNotFoundError as e:
            raise UsageError(str(e)) from None
        output.write(table, _format(args), args.output)
        return 0
    if not args.db:
        raise UsageError("give --db FILE (or --engine spark --lake DIR)")
    con = _open(args.db)
    table = reports.run(con, args.name, params)
    output.write(table, _format(args), args.output)
    return 0


def cmd_sql(args):
    from tracedb import adhoc
    if not args.query.strip():
        raise UsageError("sql: empty query: give SQL, e.g. tracedb sql 'SELECT run, kind FROM runs' --db DB")
    _check_db_file(args.db, must_exist=True)
    try:
        con = adhoc.sandboxed(args.db, write=args.write)
    except duckdb.Error as e:
        raise UsageError(f"{args.db}: cannot open database ({str(e).splitlines()[0]})") from None
    try:
        table = adhoc.run(con, args.query, write=args.write)
    except adhoc.SqlError as e:
        raise UsageError(f"sql: {e}") from None
    if table is None:
        print("done", file=sys.stderr)
        return 0
    output.write(table, _format(args), args.output)
    return 0


def cmd_demo(args):
    """The main job on the sample profile that ships with the package: the trace and
    its ncu report, matched, and the utilization levels of the steady iteration."""
    sample = resources.files("tracedb.sample")
    con = _open(args.db, write=True)
    r = ingest_file(con, str(sample.joinpath("h100_resnet50_bs64_amp.json.gz")))
    print(f"{'loaded' if r.status == 'loaded' else 'already loaded'}: sample trace as run {r.run} "
          f"(database {args.db})")
    n = ingest_file(con, str(sample.joinpath("h100_resnet50_bs64_amp_raw.csv.gz")), pair_with=r.run)
    print(f"{'loaded' if n.status == 'loaded' else 'already loaded'}: its Nsight Compute report as run {n.run}")
    print(_match_line(n.match) + "\n")
    table = reports.run(con, "utilization_levels", {"run": r.run, "batch_size": "64"})
    if args.format:
        output.write(table, args.format)
    else:
        row = table.to_pylist()[0]
        width = max(map(len, row))
        for k, v in row.items():
            print(f"{k:<{width}}  {v}")
        print("\nmore: tracedb reports; tracedb query utilization_by_layer --db " + args.db)
    return 0


def parser():
    p = argparse.ArgumentParser(prog="tracedb", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def out_opts(sp):
        sp.add_argument("--format", choices=output.FORMATS, help="default: table on a terminal, else csv")
        sp.add_argument("-o", "--output", help="write to this file instead of stdout")

    sp = sub.add_parser("ingest", help="load traces, ncu reports, power logs, calibrations")
    sp.add_argument("paths", nargs="+", metavar="PATH")
    sp.add_argument("--db")
    sp.add_argument("--lake", help="write into this Parquet lake instead of a database (one partition per file)")
    sp.add_argument("--jobs", type=int, default=1, help="with --lake: files parsed in parallel processes")
    sp.add_argument("--run", help="name of the run (single file; default: from the file name)")
    sp.add_argument("--pair-with", help="trace run this ncu report or power log belongs to")
    sp.add_argument("--offset-ns", type=int, help="power log: trace time - power time, ns (traces without absolute time)")
    sp.add_argument("--tz", help="power log: time zone of nvidia-smi's local timestamps (default: this machine's)")
    sp.add_argument("--columns", help="power log: the --query-gpu list of a header-less nvidia-smi log")
    sp.add_argument("--start-ns", type=int, help="dcgmi dmon log: epoch ns of its first row")
    sp.add_argument("--interval-ms", type=float, help="dcgmi dmon log: its sampling interval (-d)")
    sp.add_argument("--iterations-from", metavar="NAME",
                    help="trace: the annotation or op (exact name) whose CPU-side events are the iterations, "
                         "for traces without ProfilerStep markers")
    sp.set_defaults(func=cmd_ingest)

    sp = sub.add_parser("match", help="pair the kernels of an ncu run with those of a trace run")
    sp.add_argument("trace_run")
    sp.add_argument("ncu_run")
    sp.add_argument("--db", required=True)
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--iteration", type=int, help="trace iteration to match (default: the steady one)")
    g.add_argument("--whole-run", action="store_true", help="match every kernel of the trace run")
    sp.set_defaults(func=cmd_match)

    sp = sub.add_parser("power-log", help="sample NVML power to a CSV while a command runs")
    sp.add_argument("-o", "--output", required=True)
    sp.add_argument("--interval-ms", type=float, default=10)
    sp.add_argument("--idle-s", type=float, default=0.5, help="idle sampling before and after (default 0.5)")
    sp.add_argument("--gpus", help="comma-separated GPU indices (default: all)")
    sp.add_argument("command_", nargs=argparse.REMAINDER, metavar="-- COMMAND...",
                    help="command to run (none: sample until Ctrl-C)")
    sp.set_defaults(func=cmd_power_log)

    sp = sub.add_parser("calibrate", help="run cuda_bench on this GPU (python -m tracedb.cuda_bench OUT ...)",
                        add_help=False)
    sp.add_argument("rest", nargs=argparse.REMAINDER)
    sp.set_defaults(func=cmd_calibrate)

    sp = sub.add_parser("export", help="write the database's runs into a Parquet lake")
    sp.add_argument("--db", required=True)
    sp.add_argument("--lake", required=True)
    sp.add_argument("--run", action="append", help="only this run (repeatable)")
    sp.set_defaults(func=cmd_export)

    sp = sub.add_parser("reports", help="list the saved reports")
    sp.set_defaults(func=cmd_reports)

    sp = sub.add_parser("query", help="run a saved report")
    sp.add_argument("name")
    sp.add_argument("--db")
    sp.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    sp.add_argument("--lake", help="--engine spark: the lake to read")
    sp.add_argument("--spark-master", help="--engine spark: master URL (default local[*])")
    sp.add_argument("--dialect", help="with --print-sql: sqlglot dialect (spark, trino, bigquery, postgres ...)")
    sp.add_argument("--print-sql", action="store_true", help="print the report's SQL (in --dialect) instead of running it")
    sp.add_argument("--run")
    sp.add_argument("--param", action="append", metavar="K=V")
    out_opts(sp)
    sp.set_defaults(func=cmd_query)

    sp = sub.add_parser("chart", help="draw a chart of a saved report (html, png, svg)")
    sp.add_argument("name", help="levels | kernel_issue | tc_cdf | layers | queue | queue_split")
    sp.add_argument("--db", required=True)
    sp.add_argument("--run")
    sp.add_argument("--param", action="append", metavar="K=V")
    sp.add_argument("-o", "--output", required=True, help="out.html, out.png or out.svg")
    sp.set_defaults(func=cmd_chart)

    sp = sub.add_parser("sql", help="run ad-hoc SQL (read-only; other files out of reach)")
    sp.add_argument("query")
    sp.add_argument("--db", required=True)
    sp.add_argument("--write", action="store_true", help=adhoc.WRITE_HELP)
    out_opts(sp)
    sp.set_defaults(func=cmd_sql)

    sp = sub.add_parser("demo", help="ingest the bundled sample profile and print its utilization levels")
    sp.add_argument("--db", default="tracedb-demo.duckdb")
    sp.add_argument("--format", choices=output.FORMATS)
    sp.set_defaults(func=cmd_demo)

    for name in ("ingest", "match", "export", "query", "chart", "sql", "demo"):   # the commands that open a database
        sub.choices[name].add_argument(
            "--wait", type=float, default=0, metavar="SECONDS",
            help="while another process holds the database, wait up to this long (default: fail at once)")
    return p


def _warn(message, category, filename, lineno, file=None, line=None):
    print(f"tracedb: warning: {message}", file=sys.stderr)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that transactions roll back and
    temporary files are removed as on Ctrl-C."""


_SIGNALLED = []


def _on_sigterm(signum, frame):
    _SIGNALLED.append(signum)
    raise Terminated()


def _interrupted(signum=None):
    """The line and exit status of a run stopped by Ctrl-C or SIGTERM."""
    if signum == 15 or (_SIGNALLED and _SIGNALLED[-1] == 15):
        print("tracedb: terminated", file=sys.stderr)
        return 143
    print("tracedb: interrupted", file=sys.stderr)
    return 130


def main(argv=None):
    global _WAIT_S
    args = parser().parse_args(argv)
    _WAIT_S = getattr(args, "wait", None) or 0.0
    warnings.showwarning = _warn
    import signal
    import threading
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.func(args)
    except (UsageError, IngestError, reports.ReportError, ValueError) as e:
        print(f"tracedb: error: {e}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, duckdb.InterruptException):
        return _interrupted()
    except Terminated:
        return _interrupted(15)
    except RuntimeError as e:       # DuckDB's Python client: a signal during a query
        if "interrupted" not in str(e).lower():
            raise
        return _interrupted()
    except duckdb.Error as e:
        print(f"tracedb: error: database: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except MemoryError:
        print("tracedb: error: out of memory", file=sys.stderr)
        return 1
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"tracedb: error: {where}{(e.strerror or str(e)).lower()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
