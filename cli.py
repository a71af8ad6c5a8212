"""The `tracedb` command: ingest, reports, query, sql, demo."""
import argparse
import os
import sys
import warnings
from importlib import resources

import duckdb

from . import __version__, argtypes
from .api import check_db_file, open_database
from .errors import TracedbError
from .ingest import ingest_file
from .ingest.batch import match_line
from .present import output
from .present.chart_list import ALIASES, CHARTS
from .query import adhoc, reports
from .store.files import remove
from .store.catalog import SCHEMA_VERSION
from .store.sql import scalar


class UsageError(TracedbError):
    pass


_WAIT_S = 0.0       # --wait: how long to wait for a database another process holds


def _open(path, write=False, sandboxed=None, wait_s=None):
    """A connection to the database; a read-only one (unless sandboxed=False: an
    export writes files) with other files out of reach (store/sandbox.py)."""
    from .store.lock import say_on_stderr
    return open_database(path, write=write, wait_s=_WAIT_S if wait_s is None else wait_s, say=say_on_stderr,
                         sandboxed=sandboxed)


# --path-totals opens the database again after the ingest's connection: how long it waits
# for another process that took it meanwhile (a report's read is short), at least --wait.
_REOPEN_WAIT_S = 30.0


def _params(pairs, run=None):
    """--param K=V pairs as a dict, with --run as the run parameter."""
    out = {} if run is None else {"run": run}
    for p in pairs or []:
        if "=" not in p:
            raise UsageError(f"--param {p!r}: expected K=V")
        k, v = p.split("=", 1)
        if k.strip() in out and out[k.strip()] != v:      # the last one silently won
            raise UsageError(f"--param {k.strip()} given twice ({out[k.strip()]!r} and {v!r}; --run is the run "
                             "parameter): give it once")
        out[k.strip()] = v
    return out


def _write(table, args):
    return output.write(table, args.format, args.output, full_names=getattr(args, "full_names", False))


def cmd_ingest(args):
    options = {"columns": args.columns, "tz": args.tz, "offset_ns": args.offset_ns,
               "start_ns": args.start_ns, "interval_ms": args.interval_ms,
               "iterations_from": args.iterations_from, "force_pair": args.force_pair,
               "op_totals": args.op_totals}
    from .ingest.jobs import ingest_groups
    try:     # a capture folder is its files; another directory one job of its rank traces (jobs.py)
        groups = ingest_groups(args.paths, job=args.job, rank=args.rank)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.run and sum(len(files) for files, _ in groups) > 1:
        raise UsageError("--run names the run of a single file; give one PATH")
    if args.lake:
        if args.db or args.pair_with or args.run:
            raise UsageError("--lake writes each file as its own partition: no --db, --pair-with or --run with it")
        if args.op_totals:
            raise UsageError("--op-totals is refused with --lake: the lake would get the totals but not the stamp of "
                             "the tracedb that stored them, so its reports could read totals another version made; "
                             "ingest into a --db to store them")
        if args.path_totals:
            raise UsageError("--path-totals is refused with --lake: the lake would get the sums but not the stamp of "
                             "the tracedb that stored them, and its critical path reports walk on Spark; ingest into "
                             "a --db to store them")
        from .query import lake
        try:
            failed = sum(lake.ingest(files, args.lake, jobs=args.jobs or 1, options={**options, **trace},
                                     report=_lake_line) for files, trace in groups)
        except lake.LakeError as e:
            raise UsageError(str(e)) from None
        return 1 if failed else 0
    if not args.db:
        raise UsageError("give --db FILE (or --lake DIR)")
    if args.run is not None:
        from .ingest.names import path_name_problem
        if why := path_name_problem(args.run):
            raise UsageError(why)
    new = not os.path.exists(args.db)
    con = _open(args.db, write=True)
    try:
        rc, sums_of = _ingest_paths(con, args, options, groups)
    finally:
        empty = new and _holds_no_run(con)
        con.close()         # checkpointed, also when interrupted
        if empty:           # nothing loaded: the database this command made goes too
            remove(args.db)
    if sums_of:             # --path-totals: the file closed, so that the critical path's workers can open it
        from .analysis import path_totals
        wait = max(_WAIT_S, _REOPEN_WAIT_S)
        path_totals.store_in_file(lambda: _open(args.db, sandboxed=False, wait_s=wait),
                                  lambda: _open(args.db, write=True, wait_s=wait), sums_of,
                                  lambda line: print(f"tracedb: warning: {line}", file=sys.stderr))
    return rc


def _holds_no_run(con):
    try:
        return scalar(con, "SELECT count(*) FROM runs") == 0
    except duckdb.Error:        # a connection an interrupt left unusable: keep the file
        return False


def _ingest_paths(con, args, options, groups):
    from .ingest.batch import ingest_groups_into

    def show(outcome):
        for level, text in outcome.lines:
            if level == "error":
                print(f"tracedb: error: {text}", file=sys.stderr)
            else:
                print(text)
    outcomes = ingest_groups_into(con, groups, run=args.run, pair_with=args.pair_with, jobs=args.jobs,
                                  options=options, on_outcome=show)
    sums_of = []
    if args.path_totals:          # after the commits (and the jobs settled): the walk reads committed rows
        from .analysis import path_totals
        sums_of = path_totals.loaded_trace_runs(con, outcomes, lambda line: print(f"note: {line}"))
    return (1 if any(o.failed for o in outcomes) else 0), sums_of


def _lake_line(line, level):
    """A line of `ingest --lake`: errors and warnings on stderr, as everywhere else."""
    if level == "info":
        print(line, flush=True)
    else:
        print(f"tracedb: {level}: {line}", file=sys.stderr, flush=True)


def cmd_match(args):
    from .ingest.match import MatchError, match
    con = _open(args.db, write=True)
    try:
        m = match(con, args.trace_run, args.ncu_run, iteration=args.iteration, whole_run=args.whole_run,
                  force=args.force)
    except MatchError as e:
        raise UsageError(f"match: {e}") from None
    print(match_line(m))
    return 0


def cmd_chart(args):
    from .present import charts
    params = _params(args.param, args.run)
    con = _open(args.db)
    chart = charts.build(con, args.name, params)
    charts.save(chart, args.output, progress=sys.stderr.isatty())
    name = charts.ALIASES.get(args.name, args.name)
    print(f"wrote {args.output} (chart {name} from report {charts.CHARTS[name][0]})")
    return 0


def cmd_power_log(args):
    from .capture.power_log import PowerLogError, record
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
    from .capture import ncu as ncu_capture
    from .capture.session import ENV_DIR
    from .ingest.capture_folder import MANIFEST, CaptureError, manifest
    from .ingest.match import MatchError
    command = args.command_[1:] if args.command_[:1] == ["--"] else args.command_
    if not command:
        raise UsageError("capture: give the command after --, e.g. tracedb capture -o prof/ -- python train.py")
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UsageError(f"capture: -o {args.output}: is a file, not a capture folder: give a folder's name")
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
            print(f"loaded the ncu report as run {ncu_run}; " + match_line(m))
    except (CaptureError, MatchError) as e:
        raise UsageError(f"capture: {e}") from None
    except FileNotFoundError as e:
        raise UsageError(f"capture: cannot run {command[0]!r} ({e.strerror})") from None
    return 0


def cmd_calibrate(args):
    from .cuda_bench.build import BuildError
    from .cuda_bench.run import main as bench
    try:
        return bench(args.rest[1:] if args.rest[:1] == ["--"] else args.rest)
    except BuildError as e:
        raise UsageError(f"calibrate: {e}") from None
    except FileNotFoundError as e:          # nvidia-smi or nvcc missing: no GPU toolchain here
        raise UsageError(f"calibrate: {e.filename or e} not found: calibration runs on a machine with an "
                         f"NVIDIA GPU, its driver (nvidia-smi) and the CUDA toolkit (nvcc)") from None


def cmd_migrate(args):
    """Bring a database made by an older tracedb up to this version's schema, in place
    (what any write open does; read-only commands read an older file without it)."""
    check_db_file(args.db, must_exist=True)
    try:
        with duckdb.connect(args.db, read_only=True) as old:
            before = scalar(old, "SELECT value FROM schema_info WHERE key = 'version'")
    except duckdb.Error as e:
        raise UsageError(f"{args.db}: cannot open database ({str(e).splitlines()[0]})") from None
    _open(args.db, write=True).close()
    print(f"migrated {args.db}: schema version {before or 'unstamped'} -> {SCHEMA_VERSION}, "
          "tables and views of this tracedb")
    return 0


def cmd_rm(args):
    from .ingest import autopair
    from .store import admin
    if args.trace and not args.pairing:
        raise UsageError("rm: --trace goes with --pairing (it names the trace to unpair from)")
    con = _open(args.db, write=True)
    for run in args.runs:
        try:
            deleted = autopair.unpair(con, run, args.trace) if args.pairing else admin.remove_run(con, run)
        except (admin.AdminError, autopair.PairingError) as e:
            raise UsageError(f"rm: {e}") from None
        what = ", ".join(f"{n} {t}" for t, n in deleted.items()) or "nothing was paired"
        print(f"removed {'the pairing of ' if args.pairing else ''}run {run} ({what})")
    return 0


def cmd_settings(args):
    from .store import admin
    con = _open(args.db, write=args.action in ("set", "add", "remove"))
    try:
        if args.table is None:
            rows = [(t, scalar(con, f"SELECT count(*) FROM {t}"),
                     scalar(con, f"SELECT count(*) FROM {t} WHERE source <> 'tracedb'"))
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
    if args.perfetto and args.job:      # every rank of a job on one timeline (issue 49)
        from .present import job_view
        if args.run or not args.output or not str(args.output).lower().endswith((".json", ".json.gz")):
            raise UsageError("export --perfetto --job JOB writes every rank of the job: give -o FILE.json "
                             "(or FILE.json.gz), and no --run")
        try:
            n, flows = job_view.export_perfetto(_open(args.db), args.job, args.output)
        except job_view.JobError as e:
            raise UsageError(f"export: {e}") from None
        print(f"wrote {args.output} ({n} events of job {args.job}, a process per rank, {flows} collective calls "
              f"linked across ranks; open it in ui.perfetto.dev)")
        return 0
    if args.job:
        raise UsageError("export --job goes with --perfetto (the lake takes --run)")
    if args.perfetto:
        from .present import perfetto
        from .store.sandbox import external_off
        if not args.output or not args.run or len(args.run) != 1:
            given = f" (got {len(args.run)}: {', '.join(args.run)})" if args.run and len(args.run) > 1 else ""
            raise UsageError(f"export --perfetto writes one trace run: give one --run RUN{given} and -o FILE.json")
        if not str(args.output).lower().endswith((".json", ".json.gz")):
            raise UsageError(f"export --perfetto: -o {args.output}: it writes Chrome-trace JSON: name the file "
                             "FILE.json, or FILE.json.gz to compress it")
        con = _open(args.db, sandboxed=False)      # its memory cap is a setting: not locked, but
        external_off(con)                         # written by Python: DuckDB reads the database only
        n = perfetto.export(con, args.run[0], args.output, progress=sys.stderr.isatty())
        print(f"wrote {args.output} ({n} events of run {args.run[0]}; open it in ui.perfetto.dev or chrome://tracing)")
        return 0
    from .progress import Progress
    from .query import lake
    con = _open(args.db, sandboxed=False)
    bar = Progress(f"exporting to {args.lake}")
    try:
        runs = lake.export(con, args.lake, args.run or None,
                           progress=lambda i, n, name: bar.update(i, f"datasets ({name})"))
    except lake.LakeError as e:
        raise UsageError(f"export: {e}") from None
    bar.done(f"{len(runs)} runs")
    print(f"exported {len(runs)} runs to {args.lake}")
    return 0


def cmd_reports(args):
    if args.name:
        from .query.describe import describe
        print(describe(reports.get(args.name)))
        return 0
    from .query.describe import listing
    print(listing(reports.all_reports().values(), output._width()), end="")
    return 0


def cmd_query(args):
    params = _params(args.param, args.run)
    if args.print_sql:
        from .query.transpile import transpile
        print(transpile(args.name, args.dialect or "duckdb", params))
        return 0
    if args.engine == "spark":
        if not args.lake:
            raise UsageError("--engine spark reads a lake: give --lake DIR (tracedb export --db FILE --lake DIR)")
        from .query import engines
        try:
            table = engines.run_spark(args.name, params, args.lake, args.spark_master)
        except FileNotFoundError as e:
            raise UsageError(str(e)) from None
        _write(table, args)
        return 0
    if not args.db:
        raise UsageError("give --db FILE or set TRACEDB_DB (or --engine spark --lake DIR)")
    con = _open(args.db)
    output.check(args.format, args.output)
    with reports.batches(con, args.name, params) as rows:      # written as they come
        written = _write(rows, args)
        caveat = reports.caveat_of(rows)
    if caveat:          # its counters come from a pairing kept by --force
        print(f"tracedb: caveat: {caveat}", file=sys.stderr)
    if written == 0:
        from .query.empty import why_empty
        report = reports.get(args.name)
        print(f"tracedb: note: report {args.name} returned no rows: "
              f"{why_empty(con, report, reports.bound_params(report, params))}", file=sys.stderr)
    return 0


def cmd_sql(args):
    from .query import adhoc
    if not args.query.strip():
        raise UsageError("sql: empty query: give SQL, e.g. tracedb sql 'SELECT run, kind FROM runs' --db DB")
    check_db_file(args.db, must_exist=True)
    try:
        con = adhoc.sandboxed(args.db, write=args.write)
    except duckdb.Error as e:
        raise UsageError(f"{args.db}: cannot open database ({str(e).splitlines()[0]})") from None
    fmt = output.check(args.format, args.output)
    try:
        rows = adhoc.run(con, args.query, write=args.write, fmt=fmt)
        if rows is None:
            print("done", file=sys.stderr)
            return 0
        _write(rows, args)
    except adhoc.SqlError as e:
        raise UsageError(f"sql: {e}") from None
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
    print(match_line(n.match) + "\n")
    table = reports.run(con, "utilization_levels", {"run": r.run, "batch_size": "64"})
    if args.format:
        output.write(table, args.format)
    elif not table.num_rows:
        raise UsageError("demo: the sample's utilization levels came back empty")
    else:
        print(output.render(table), end="")         # one row: `column  value` lines, values in their units
        print("\nmore: tracedb reports; tracedb query utilization_by_layer --db " + args.db)
    return 0


DB_HELP = "the database file (default: $TRACEDB_DB)"


def parser():
    p = argparse.ArgumentParser(prog="tracedb", description=__doc__,
                                epilog="--db defaults to the TRACEDB_DB environment variable. "
                                       "The method behind every metric: docs/method.md, installed with tracedb "
                                       "(tracedb reports NAME prints where).")
    p.add_argument("--version", action="version", version=f"tracedb {__version__} (duckdb {duckdb.__version__})")
    sub = p.add_subparsers(dest="command", required=True)

    def out_opts(sp):
        sp.add_argument("--format", choices=output.FORMATS,
                        help="json: one array; jsonl: a line a row. Default: by -o's extension (.csv .json .jsonl .parquet "
                             ".txt), else table on a terminal, else csv")
        sp.add_argument("-o", "--output", help="write to this file instead of stdout")
        sp.add_argument("--full-names", action="store_true",
                        help="table: print kernel and op names whole (default: namespaces and template arguments elided)")

    sp = sub.add_parser("ingest", help="load traces, ncu reports, power logs, calibrations "
                                       "(a capture folder: its trace and the logs paired with it; another directory: "
                                       "every trace in it, as the ranks of one job)")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="files to load (format detected from the content), "
                    "capture folders, or directories of rank traces")
    sp.add_argument("--db", help=DB_HELP)
    sp.add_argument("--lake", help="write into this Parquet lake instead of a database (one partition per file)")
    sp.add_argument("--jobs", type=argtypes.count, help="trace files loaded at once (default: one a core "
                    "for the traces of a directory, files one by one; with --lake: worker processes, 1)")
    sp.add_argument("--run", help="name of the run (single file; default: from the file name)")
    sp.add_argument("--job", help="traces: the distributed job they are ranks of (default: a directory's name)")
    sp.add_argument("--rank", type=argtypes.index, help="trace without distributedInfo: its rank (single file)")
    sp.add_argument("--pair-with", help="trace run this ncu report or power log belongs to")
    sp.add_argument("--force-pair", action="store_true",
                    help="ncu report: keep a pairing whose matched kernels disagree in name beyond "
                         "20%% (refused otherwise), flagged in match_quality")
    sp.add_argument("--offset-ns", type=int, help="power log: trace time - power time, ns (traces without absolute time)")
    sp.add_argument("--tz", help="power log: time zone of nvidia-smi's local timestamps (default: this machine's)")
    sp.add_argument("--columns", help="power log: the --query-gpu list of a header-less nvidia-smi log")
    sp.add_argument("--start-ns", type=int, help="dcgmi dmon log: epoch ns of its first row")
    sp.add_argument("--interval-ms", type=argtypes.positive, help="dcgmi dmon log: its sampling interval (-d)")
    sp.add_argument("--iterations-from", metavar="NAME",
                    help="trace: the annotation or op (exact name) whose CPU-side events are the iterations, "
                         "for traces without ProfilerStep markers")
    sp.add_argument("--op-totals", action="store_true",
                    help="trace: also store per-iteration totals: the op totals (the ops report's walk, done "
                         "once), the counted ops' FLOPs, the kernels' GPU time and the finding rules' sums, so "
                         "that ops, the FLOP reports, findings and the reports sweeping the kernels read them with "
                         "iteration=all instead of sweeping every event (ops on a 10 GB trace: 0.2 s instead of "
                         "52 s), at about 80%% more ingest CPU, and DuckDB may use up to 2 GiB for them")
    sp.add_argument("--path-totals", action="store_true",
                    help="trace: also walk the critical path of every iteration once, after the load, and store "
                         "its sums per iteration, category and layer type, so that critical_path_summary with "
                         "iteration=all reads them instead of walking (no job, no power log paired: "
                         "0.08 s for a 10 GB trace), for about 40 CPU s more a GB of trace, 2-3x a plain "
                         "ingest's CPU added (in worker processes where there are 4 cores or more); a trace "
                         "loaded before gets them when ingested again with it")
    sp.set_defaults(func=cmd_ingest)

    sp = sub.add_parser("match", help="pair the kernels of an ncu run with those of a trace run")
    sp.add_argument("trace_run", help="the trace run")
    sp.add_argument("ncu_run", help="the ncu run to pair with it")
    sp.add_argument("--db", help=DB_HELP)
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--iteration", type=int, help="trace iteration to match (default: the steady one)")
    g.add_argument("--whole-run", action="store_true", help="match every kernel of the trace run")
    sp.add_argument("--force", action="store_true",
                    help="keep the pairing although its matched kernels disagree in name beyond 20%% (flagged)")
    sp.set_defaults(func=cmd_match)

    sp = sub.add_parser("power-log", help="sample NVML power to a CSV while a command runs")
    sp.add_argument("-o", "--output", required=True, help="the CSV to write")
    sp.add_argument("--interval-ms", type=argtypes.positive, default=10, help="sampling interval, ms (default 10)")
    sp.add_argument("--idle-s", type=argtypes.non_negative, default=0.5, help="idle sampling before and after (default 0.5)")
    sp.add_argument("--gpus", help="comma-separated GPU indices (default: all)")
    sp.add_argument("command_", nargs=argparse.REMAINDER, metavar="-- COMMAND...",
                    help="command to run (none: sample until Ctrl-C)")
    sp.set_defaults(func=cmd_power_log)

    sp = sub.add_parser("capture", help="profile a script that calls tracedb.capture (trace, NVML, host; --ncu)")
    sp.add_argument("-o", "--output", required=True, help="capture folder (TRACEDB_CAPTURE_DIR for the script)")
    sp.add_argument("--ncu", action="store_true", help="then run it under Nsight Compute over one steady step")
    sp.add_argument("--ncu-path", help="the ncu command (default: ncu on PATH)")
    sp.add_argument("command_", nargs=argparse.REMAINDER, metavar="-- COMMAND...",
                    help="the training script to run, after --")
    sp.set_defaults(func=cmd_capture)

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
    sp.add_argument("--job", help="--perfetto: every rank of this job on one timeline (a process per rank, "
                                  "clocks aligned, the kernels of each collective call linked)")
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
    sp.add_argument("name", help=" | ".join(CHARTS) + "".join(f" ({old}: {new}'s old name)" for old, new in ALIASES.items()))
    sp.add_argument("--db", help=DB_HELP)
    sp.add_argument("--run", help="the run to report on (reports that take one; default: the report's)")
    sp.add_argument("--param", action="append", metavar="K=V",
                    help="a report parameter (tracedb reports NAME lists them; iteration=all: every iteration)")
    sp.add_argument("-o", "--output", required=True, help="out.html, out.png or out.svg")
    sp.set_defaults(func=cmd_chart)

    sp = sub.add_parser("sql", help="run ad-hoc SQL (read-only; other files out of reach)")
    sp.add_argument("query", help="the SQL")
    sp.add_argument("--db", help=DB_HELP)
    sp.add_argument("--write", action="store_true", help=adhoc.WRITE_HELP)
    out_opts(sp)
    sp.set_defaults(func=cmd_sql)

    from . import cli_answers  # advise, diff, report
    cli_answers.add_commands(sub, out_opts)

    sp = sub.add_parser("demo", help="ingest the bundled sample profile and print its utilization levels")
    sp.add_argument("--db", default="tracedb-demo.duckdb", help="the database to create (default tracedb-demo.duckdb)")
    sp.add_argument("--format", choices=output.FORMATS, help="print the levels in this format")
    sp.set_defaults(func=cmd_demo)

    sp = sub.add_parser("migrate", help="bring a database made by an older tracedb up to this version's schema "
                                        "(in place; reading commands work on an older file without it)")
    sp.add_argument("--db", help=DB_HELP)
    sp.set_defaults(func=cmd_migrate)

    # -- removing runs, settings (tracedb/admin.py) --
    sp = sub.add_parser("rm", help="remove runs (every row in every table), or only their pairing")
    sp.add_argument("runs", nargs="+", metavar="RUN", help="the runs to remove")
    sp.add_argument("--db", help=DB_HELP)
    sp.add_argument("--pairing", action="store_true",
                    help="keep the ncu/power runs, undo only their pairing with a trace (matches, alignment)")
    sp.add_argument("--trace", metavar="TRACE_RUN",
                    help="with --pairing: undo only the pairing with this trace (needed when the run has several)")
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

    for name in ("ingest", "match", "export", "query", "chart", "sql", "demo", "rm", "settings", "migrate"):   # the commands that open a database
        sub.choices[name].add_argument(
            "--wait", type=argtypes.seconds, default=0, metavar="SECONDS",
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
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["calibrate"]:       # everything after it is cuda_bench's, --help included
        argv = ["calibrate", "--", *argv[1:]] if argv[1:2] != ["--"] else argv
    args = parser().parse_args(argv)
    _WAIT_S = getattr(args, "wait", None) or 0.0
    if getattr(args, "db", "") is None:
        args.db = os.environ.get("TRACEDB_DB") or None
    warnings.showwarning = _warn
    import signal
    import threading
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if getattr(args, "output", None) and args.command not in ("capture", "power-log"):
            from .present.outpaths import refuse_input      # -o never replaces the database
            refuse_input(args.output, getattr(args, "db", None))
        return args.func(args)
    except (TracedbError, ValueError) as e:
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
        why = ("; a stored view of this database reads another file: tracedb reads only the database itself"
               if isinstance(e, duckdb.PermissionException) else "")
        print(f"tracedb: error: database: {str(e).splitlines()[0]}{why}", file=sys.stderr)
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
