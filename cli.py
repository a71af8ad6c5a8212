"""The `tracedb` command: ingest, reports, query, sql, demo."""
import argparse
import os
import sys
import warnings
from importlib import resources

import duckdb

import tracedb
from tracedb import db, output, reports
from tracedb.ingest import IngestError, ingest_file


class UsageError(Exception):
    pass


def _open(path, write=False):
    if not path:
        raise UsageError("give --db FILE (or set TRACEDB_DB)")
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


def _write(table, args):
    output.write(table, args.format, args.output, full_names=getattr(args, "full_names", False))


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
    from tracedb import autopair
    con = _open(args.db, write=True)
    failed = 0
    kinds = {p: autopair.pairs(p) for p in args.paths}
    command_traces = []        # trace runs of this command: the ncu reports and power logs pair with them
    for path in sorted(args.paths, key=lambda p: kinds[p] is not None):     # traces first
        pair_with, why = args.pair_with, None
        if kinds[path] and pair_with is None:
            pair_with, why = autopair.before(con, command_traces)
        try:
            r = ingest_file(con, path, run=args.run, pair_with=pair_with, options=options)
            if r.kind == "trace":
                command_traces.append(r.run)
        except IngestError as e:
            print(f"tracedb: error: {e}", file=sys.stderr)
            failed += 1
            continue
        if r.status == "skipped":
            print(f"skipped {path}: {r.message}")
        else:
            print(f"loaded {path} as run {r.run} ({_summary(con, r.run, r.kind)})")
            if r.kind == "trace":
                _trace_notes(con, path, r.run)
        if kinds[path] and pair_with is None and r.status == "loaded":
            try:
                r.pairing, line = autopair.after(con, path, r.run, r.kind, command_traces, options)
            except IngestError as e:
                print(f"tracedb: error: {e}", file=sys.stderr)
                failed += 1
                continue
            print(line)
            pair_with = r.pairing and db.scalar(con, "SELECT paired_run FROM runs WHERE run = ?", [r.run])
        elif why and r.pairing:
            print(f"paired {r.run} with trace {pair_with} ({why})")
        if r.match:
            print(_match_line(r.match))
        elif r.pairing:
            print(r.pairing)
        if r.pairing and pair_with:
            note = autopair.others(con, r.run, r.kind, pair_with)
            if note:
                print(note)
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
    return f"{kind}: {counts[0]} events, {counts[1]} kernels, {counts[2]} iterations"


def _trace_notes(con, path, run):
    """What a trace lacks that the reports need (a JSON that is not a profiler trace)."""
    k, i = db.rows(con, "SELECT (SELECT count(*) FROM kernels WHERE run = $r), "
                        "(SELECT count(*) FROM iterations WHERE run = $r)", {"r": run})[0]
    if not k:
        print(f"note: {path}: no GPU kernels, memcpy or memset in it: the GPU reports have nothing for run {run}")
    if not i:
        print(f"note: {path}: no step markers (ProfilerStep#N, step_num): per-iteration reports have "
              f"nothing for run {run}")


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
    charts.save(chart, args.output, progress=sys.stderr.isatty())
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
        return bench(args.rest[1:] if args.rest[:1] == ["--"] else args.rest)
    except BuildError as e:
        raise UsageError(f"calibrate: {e}") from None
    except FileNotFoundError as e:          # nvidia-smi or nvcc missing: no GPU toolchain here
        raise UsageError(f"calibrate: {e.filename or e} not found: calibration runs on a machine with an "
                         f"NVIDIA GPU, its driver (nvidia-smi) and the CUDA toolkit (nvcc)") from None


def cmd_rm(args):
    from tracedb import admin
    con = _open(args.db, write=True)
    for run in args.runs:
        try:
            deleted = admin.remove_pairing(con, run) if args.pairing else admin.remove_run(con, run)
        except admin.AdminError as e:
            raise UsageError(f"rm: {e}") from None
        what = ", ".join(f"{n} {t}" for t, n in deleted.items()) or "nothing was paired"
        print(f"removed {'the pairing of ' if args.pairing else ''}run {run} ({what})")
    return 0


def cmd_settings(args):
    from tracedb import admin
    con = _open(args.db, write=args.action in ("set", "add", "remove"))
    try:
        if args.table is None:
            rows = [(t, db.scalar(con, f"SELECT count(*) FROM {t}"),
                     db.scalar(con, f"SELECT count(*) FROM {t} WHERE source <> 'tracedb'"))
                    for t in admin.settings_tables()]
            import pyarrow as pa
            _write(pa.table({"table": [r[0] for r in rows], "rows": [r[1] for r in rows],
                             "user_rows": [r[2] for r in rows]}), args)
        elif args.action in (None, "list"):
            if args.values:
                raise UsageError("settings TABLE list takes no COLUMN=VALUE")
            _write(admin.list_rows(con, args.table), args)
        elif args.action == "remove":
            n = admin.remove_rows(con, args.table, args.values)
            print(f"removed {n} row{'s' if n != 1 else ''} from {args.table}")
        else:
            key = admin.set_row(con, args.table, args.values, replace=args.action == "set")
            print(f"{args.table}: {'set' if args.action == 'set' else 'added'} the user row {key}")
    except admin.AdminError as e:
        raise UsageError(f"settings: {e}") from None
    return 0


def cmd_export(args):
    if args.perfetto:
        from tracedb import perfetto
        if not args.output or not args.run or len(args.run) != 1:
            raise UsageError("export --perfetto writes one trace run: give --run RUN and -o FILE.json")
        con = _open(args.db)
        n = perfetto.export(con, args.run[0], args.output, progress=sys.stderr.isatty())
        print(f"wrote {args.output} ({n} events of run {args.run[0]}; open it in ui.perfetto.dev or chrome://tracing)")
        return 0
    from tracedb import lake
    from tracedb.progress import Progress
    con = _open(args.db)
    bar = Progress(f"exporting to {args.lake}")
    runs = lake.export(con, args.lake, args.run or None, progress=lambda i, n, name: bar.update(i, f"datasets ({name})"))
    bar.done(f"{len(runs)} runs")
    print(f"exported {len(runs)} runs to {args.lake}")
    return 0


def cmd_reports(args):
    if args.name:
        from tracedb.describe import describe
        print(describe(reports.get(args.name)))
        return 0
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
        _write(table, args)
        return 0
    if not args.db:
        raise UsageError("give --db FILE or set TRACEDB_DB (or --engine spark --lake DIR)")
    con = _open(args.db)
    table = reports.run(con, args.name, params)
    if table.num_rows == 0:
        from tracedb.empty import why_empty
        report = reports.get(args.name)
        print(f"tracedb: note: report {args.name} returned no rows: "
              f"{why_empty(con, report, reports.bound_params(report, params))}", file=sys.stderr)
    _write(table, args)
    return 0


def cmd_sql(args):
    con = _open(args.db)
    try:
        table = con.sql(args.query).to_arrow_table()
    except duckdb.Error as e:
        raise UsageError(f"sql: {str(e).splitlines()[0]}") from None
    _write(table, args)
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
    elif not table.num_rows:
        raise UsageError("demo: the sample's utilization levels came back empty")
    else:
        row = table.to_pylist()[0]
        width = max(map(len, row))
        for k, v in row.items():
            print(f"{k:<{width}}  {v}")
        print("\nmore: tracedb reports; tracedb query utilization_by_layer --db " + args.db)
    return 0


DB_HELP = "the database file (default: $TRACEDB_DB)"


def parser():
    p = argparse.ArgumentParser(prog="tracedb", description=__doc__,
                                epilog="--db defaults to the TRACEDB_DB environment variable. "
                                       "The method behind every metric: docs/method.md, installed with tracedb "
                                       "(tracedb reports NAME prints where).")
    p.add_argument("--version", action="version", version=f"tracedb {tracedb.__version__} (duckdb {duckdb.__version__})")
    sub = p.add_subparsers(dest="command", required=True)

    def out_opts(sp):
        sp.add_argument("--format", choices=output.FORMATS,
                        help="default: by -o's extension (.csv .json .parquet .txt), else table on a terminal, else csv")
        sp.add_argument("-o", "--output", help="write to this file instead of stdout")
        sp.add_argument("--full-names", action="store_true",
                        help="table: print kernel names whole (default: template arguments elided)")

    sp = sub.add_parser("ingest", help="load traces, ncu reports, power logs, calibrations")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="files to load (format detected from the content)")
    sp.add_argument("--db", help=DB_HELP)
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
    sp.add_argument("trace_run", help="the trace run")
    sp.add_argument("ncu_run", help="the ncu run to pair with it")
    sp.add_argument("--db", help=DB_HELP)
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--iteration", type=int, help="trace iteration to match (default: the steady one)")
    g.add_argument("--whole-run", action="store_true", help="match every kernel of the trace run")
    sp.set_defaults(func=cmd_match)

    sp = sub.add_parser("power-log", help="sample NVML power to a CSV while a command runs")
    sp.add_argument("-o", "--output", required=True, help="the CSV to write")
    sp.add_argument("--interval-ms", type=float, default=10, help="sampling interval, ms (default 10)")
    sp.add_argument("--idle-s", type=float, default=0.5, help="idle sampling before and after (default 0.5)")
    sp.add_argument("--gpus", help="comma-separated GPU indices (default: all)")
    sp.add_argument("command_", nargs=argparse.REMAINDER, metavar="-- COMMAND...",
                    help="command to run (none: sample until Ctrl-C)")
    sp.set_defaults(func=cmd_power_log)

    sp = sub.add_parser("calibrate", help="run cuda_bench on this GPU (python -m tracedb.cuda_bench OUT ...)",
                        add_help=False)
    sp.add_argument("rest", nargs=argparse.REMAINDER, help="cuda_bench's arguments (tracedb calibrate --help)")
    sp.set_defaults(func=cmd_calibrate)

    sp = sub.add_parser("export", help="write the runs into a Parquet lake, or one run as a Perfetto timeline")
    sp.add_argument("--db", help=DB_HELP)
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument("--lake", help="the lake folder to write")
    g.add_argument("--perfetto", action="store_true",
                   help="write one trace run (--run) as Chrome trace JSON (-o; .json or .json.gz) for the "
                        "Perfetto UI and chrome://tracing, with layer types, ncu counters, power and iterations")
    sp.add_argument("-o", "--output", help="--perfetto: the file to write")
    sp.add_argument("--run", action="append", help="only this run (repeatable; --perfetto: the one trace run)")
    sp.set_defaults(func=cmd_export)

    sp = sub.add_parser("reports", help="list the saved reports, or print one report's whole header")
    sp.add_argument("name", nargs="?", help="a report: its parameters (allowed values, defaults) and columns (units)")
    sp.set_defaults(func=cmd_reports)

    sp = sub.add_parser("query", help="run a saved report")
    sp.add_argument("name", help="the report (tracedb reports)")
    sp.add_argument("--db", help=DB_HELP)
    sp.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb",
                    help="duckdb (the database, default) or spark (a lake: --lake)")
    sp.add_argument("--lake", help="--engine spark: the lake to read")
    sp.add_argument("--spark-master", help="--engine spark: master URL (default local[*])")
    sp.add_argument("--dialect", help="with --print-sql: sqlglot dialect (spark, trino, bigquery, postgres ...)")
    sp.add_argument("--print-sql", action="store_true", help="print the report's SQL (in --dialect) instead of running it")
    sp.add_argument("--run", help="the run to report on (reports that take one; default: the report's)")
    sp.add_argument("--param", action="append", metavar="K=V",
                    help="a report parameter (tracedb reports NAME lists them; iteration=all: every iteration)")
    out_opts(sp)
    sp.set_defaults(func=cmd_query)

    sp = sub.add_parser("chart", help="draw a chart of a saved report (html, png, svg)")
    sp.add_argument("name", help="levels | kernel_issue | tc_cdf | layers | queue | queue_split")
    sp.add_argument("--db", help=DB_HELP)
    sp.add_argument("--run", help="the run to report on (reports that take one; default: the report's)")
    sp.add_argument("--param", action="append", metavar="K=V",
                    help="a report parameter (tracedb reports NAME lists them; iteration=all: every iteration)")
    sp.add_argument("-o", "--output", required=True, help="out.html, out.png or out.svg")
    sp.set_defaults(func=cmd_chart)

    sp = sub.add_parser("sql", help="run ad-hoc SQL")
    sp.add_argument("query", help="the SQL")
    sp.add_argument("--db", help=DB_HELP)
    out_opts(sp)
    sp.set_defaults(func=cmd_sql)

    sp = sub.add_parser("demo", help="ingest the bundled sample profile and print its utilization levels")
    sp.add_argument("--db", default="tracedb-demo.duckdb", help="the database to create (default tracedb-demo.duckdb)")
    sp.add_argument("--format", choices=output.FORMATS, help="print the levels in this format")
    sp.set_defaults(func=cmd_demo)

    # -- removing runs, settings (tracedb/admin.py) --
    sp = sub.add_parser("rm", help="remove runs (every row in every table), or only their pairing")
    sp.add_argument("runs", nargs="+", metavar="RUN", help="the runs to remove")
    sp.add_argument("--db", help=DB_HELP)
    sp.add_argument("--pairing", action="store_true",
                    help="keep the ncu/power runs, undo only their pairing with a trace (matches, alignment)")
    sp.set_defaults(func=cmd_rm)

    sp = sub.add_parser("settings", help="list or change the settings tables (layer_rules, metric_sources, ...)",
                        description="Without TABLE: the settings tables. With TABLE: its rows. "
                                    "set/add/remove write user rows (source = 'user'), which new tracedb "
                                    "versions never overwrite; a removed shipped row returns when tracedb "
                                    "ships new rows for that table.")
    sp.add_argument("table", nargs="?", help="a settings table")
    sp.add_argument("action", nargs="?", choices=["list", "set", "add", "remove"],
                    help="list (default) | set: insert or replace the row with the same key | add: insert "
                         "(a clash is an error) | remove: delete the rows with these values")
    sp.add_argument("values", nargs="*", metavar="COLUMN=VALUE", help="the row's columns (set/add), or the "
                    "columns that pick rows (remove)")
    sp.add_argument("--db", help=DB_HELP)
    out_opts(sp)
    sp.set_defaults(func=cmd_settings)
    return p


def _warn(message, category, filename, lineno, file=None, line=None):
    print(f"tracedb: warning: {message}", file=sys.stderr)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["calibrate"]:       # everything after it is cuda_bench's, --help included
        argv = ["calibrate", "--", *argv[1:]] if argv[1:2] != ["--"] else argv
    args = parser().parse_args(argv)
    if getattr(args, "db", "") is None:
        args.db = os.environ.get("TRACEDB_DB") or None
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
