"""The `tracedb` command: ingest, reports, query, sql, demo."""
import argparse
import os
import sys
import warnings
from importlib import resources

import duckdb

from tracedb import db, output, reports
from tracedb.ingest import IngestError, ingest_file


class UsageError(Exception):
    pass


def _open(path, write=False):
    if not write and not os.path.exists(path):
        raise UsageError(f"{path}: no such database (create it with `tracedb ingest ... --db {path}`)")
    try:
        return db.connect(path, read_only=not write)
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
               "start_ns": args.start_ns, "interval_ms": args.interval_ms}
    if args.lake:
        if args.db or args.pair_with or args.run:
            raise UsageError("--lake writes each file as its own partition: no --db, --pair-with or --run with it")
        from tracedb import lake
        failed = lake.ingest(args.paths, args.lake, jobs=args.jobs, options=options,
                             report=lambda line: print(line, flush=True))
        return 1 if failed else 0
    if not args.db:
        raise UsageError("give --db FILE (or --lake DIR)")
    con = _open(args.db, write=True)
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
    con.close()
    return 1 if failed else 0


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
    if kind == "host":
        n, s = db.rows(con, "SELECT count(DISTINCT ts_ns), (max(ts_ns) - min(ts_ns)) / 1e9 FROM host_samples "
                            "WHERE run = ?", [run])[0]
        return f"host: {n} samples, {s:.2f} s"
    return f"{kind}: {counts[0]} events, {counts[1]} kernels, {counts[2]} iterations"


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


def cmd_capture(args):
    """Run a script that calls tracedb.capture, into -o DIR; with --ncu, again under ncu."""
    import subprocess
    from tracedb import ncu_capture
    from tracedb.capture import ENV_DIR, MANIFEST, CaptureError, manifest
    from tracedb.match import MatchError
    command = args.command_[1:] if args.command_[:1] == ["--"] else args.command_
    if not command:
        raise UsageError("capture: give the command after --, e.g. tracedb capture -o prof/ -- python train.py")
    try:
        if args.ncu:
            ncu_capture.find_ncu(args.ncu_path)
        if os.path.exists(os.path.join(args.output, MANIFEST)):     # a stale one would hide a script
            os.remove(os.path.join(args.output, MANIFEST))           # that never called tracedb.capture
        rc = subprocess.call(command, env=dict(os.environ, **{ENV_DIR: args.output}))
        if rc != 0:
            raise UsageError(f"capture: {command[0]} exited with status {rc}")
        manifest(args.output)
        if args.ncu:
            ncu_run, m = ncu_capture.run(args.output, command, args.ncu_path,
                                         say=lambda s: print(s, file=sys.stderr, flush=True))
            print(f"loaded the ncu report as run {ncu_run}; " + _match_line(m))
    except (CaptureError, MatchError) as e:
        raise UsageError(f"capture: {e}") from None
    except FileNotFoundError as e:
        raise UsageError(f"capture: cannot run {command[0]!r} ({e.strerror})") from None
    return 0


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
    runs = lake.export(con, args.lake, args.run or None)
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
    con = _open(args.db)
    try:
        table = con.sql(args.query).to_arrow_table()
    except duckdb.Error as e:
        raise UsageError(f"sql: {str(e).splitlines()[0]}") from None
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

    sp = sub.add_parser("capture", help="profile a script that calls tracedb.capture (trace, NVML, host; --ncu)")
    sp.add_argument("-o", "--output", required=True, help="capture folder (TRACEDB_CAPTURE_DIR for the script)")
    sp.add_argument("--ncu", action="store_true", help="then run it under Nsight Compute over one steady step")
    sp.add_argument("--ncu-path", help="the ncu command (default: ncu on PATH)")
    sp.add_argument("command_", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    sp.set_defaults(func=cmd_capture)

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
    sp.add_argument("name", help="levels | kernel_issue | tc_cdf | layers | queue | queue_split | memory_batch | memory | system")
    sp.add_argument("--db", required=True)
    sp.add_argument("--run")
    sp.add_argument("--param", action="append", metavar="K=V")
    sp.add_argument("-o", "--output", required=True, help="out.html, out.png or out.svg")
    sp.set_defaults(func=cmd_chart)

    sp = sub.add_parser("sql", help="run ad-hoc SQL")
    sp.add_argument("query")
    sp.add_argument("--db", required=True)
    out_opts(sp)
    sp.set_defaults(func=cmd_sql)

    sp = sub.add_parser("demo", help="ingest the bundled sample profile and print its utilization levels")
    sp.add_argument("--db", default="tracedb-demo.duckdb")
    sp.add_argument("--format", choices=output.FORMATS)
    sp.set_defaults(func=cmd_demo)
    return p


def _warn(message, category, filename, lineno, file=None, line=None):
    print(f"tracedb: warning: {message}", file=sys.stderr)


def main(argv=None):
    args = parser().parse_args(argv)
    warnings.showwarning = _warn
    try:
        return args.func(args)
    except (UsageError, IngestError, reports.ReportError, ValueError) as e:
        print(f"tracedb: error: {e}", file=sys.stderr)
        return 1
    except duckdb.Error as e:
        print(f"tracedb: error: database: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("tracedb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
