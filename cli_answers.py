"""The commands that answer for people: advise (findings), diff (the regression
gate), report (one self-contained HTML page). cli.py registers them with
add_commands; the work is in advise.py, diff.py and html_report.py."""
import sys

from . import argtypes
from .api import open_database
from .present import output
from .progress import status
from .query import reports


def _open(args):
    return open_database(args.db)


def cmd_advise(args):
    from .analysis import advise
    if args.list_rules:
        for r in advise.all_rules().values():
            print(f"{r.name} (fires {r.fires} {r.threshold:g} {r.unit}; {r.severity}; next: {r.next_report})\n"
                  f"    {r.description}")
        return 0
    con = _open(args)
    thresholds = advise.parse_thresholds(",".join(args.threshold or []))
    if args.job is not None:        # the whole job: straggler first, groups, each rule over the ranks
        from .present import job_view
        if args.run is not None:
            raise reports.ReportError("give --run RUN or --job JOB, not both")
        try:
            with status("checking the rules on every rank"):
                if args.format:
                    found = job_view.findings(con, args.job, args.iteration, thresholds)
                    found = [f for f in found if args.all or f["severity"] != "ok"]
                    output.write(advise.table(found).drop(["ord"]), args.format, args.output)
                    return 0
                text = job_view.advise_text(con, args.job, args.db, args.iteration, thresholds, args.all)
        except job_view.JobError as e:
            raise reports.ReportError(str(e)) from None
        print(text, end="")
        return 0
    if args.run is not None and not con.execute("SELECT 1 FROM runs WHERE run = ?", [args.run]).fetchall():
        from .suggest import run_hint
        raise reports.ReportError(f"no run named {args.run!r} in the database{run_hint(con, args.run)}")
    with status("checking the rules"):
        found = advise.evaluate_many(con, args.run, args.iteration, thresholds)
    if not args.all:
        found = [f for f in found if f["severity"] != "ok"]
    if args.format:
        output.write(advise.table(found).drop(["ord"]), args.format, args.output)
        return 0
    print(advise_text(found, args.db), end="")
    return 0


def advise_text(found, db):
    """Findings as text for a terminal: worst first, skipped rules last, one line each."""
    lines, skipped = [], []
    for f in found:
        if f["severity"] == "skipped":
            skipped.append(f)
            continue
        where = f"{f['run']} iteration {f['iteration']}"
        lines.append(f"[{f['severity']}] {f['rule']} ({where}): {f['evidence']}")
        if f["severity"] != "ok":
            lines.append(f"    try: {f['suggestion']}")
            lines.append(f"    next: tracedb query {f['next_report']} --db {db}"
                         + (f" --run {f['run']}" if f["run"] else ""))
    n = sum(1 for f in found if f["severity"] not in ("ok", "skipped"))
    head = f"{n} finding{'s' if n != 1 else ''}" + (f", {len(skipped)} rules skipped" if skipped else "")
    out = [head] + lines
    if skipped:
        out.append("skipped (data absent):")
        out += [f"  {f['rule']}{' (' + f['run'] + ')' if f['run'] else ''}: {f['evidence']}" for f in skipped]
    return "\n".join(out) + "\n"


def cmd_diff(args):
    from .analysis import diff
    if args.by == "op":
        return _diff_by_op(args)
    try:
        con = _open(args)
        with status(f"comparing {args.new} with {args.base}"):
            rows = diff.compare(con, args.base, args.new, args.threshold, args.batch_size)
    except reports.ReportError as e:         # a gate that cannot decide fails apart from "worse"
        print(f"tracedb: error: {e}", file=sys.stderr)
        return 2
    from .analysis import diff_gate
    try:
        code, line = diff_gate.verdict(rows, args.base, args.new, args.threshold, args.fail_on)
    except reports.ReportError as e:
        print(f"tracedb: error: {e}", file=sys.stderr)
        return 2
    fmt = args.format or ("table" if sys.stdout.isatty() else "csv")
    output.write(diff.table(rows), fmt, args.output)
    print(line, file=sys.stderr)
    return code


def only_trace(con, what="report"):
    """The one trace run of the database (the default run of `tracedb report`); an
    error listing the trace runs when there are several, or none."""
    runs = [r[0] for r in con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY run").fetchall()]
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise reports.ReportError(f"{what}: the database holds no trace run")
    listed = ", ".join(runs[:8]) + (", ..." if len(runs) > 8 else "")
    raise reports.ReportError(f"{what}: the database holds {len(runs)} trace runs: give --run RUN ({listed})")


def _diff_by_op(args):
    """diff --by op: the ops side by side; informational (exit 0), 2 when it cannot compare."""
    from .analysis import op_diff
    try:
        con = _open(args)
        with status(f"comparing the ops of {args.new} with {args.base}"):
            found = op_diff.compare(con, args.base, args.new, args.threshold)
    except reports.ReportError as e:
        print(f"tracedb: error: {e}", file=sys.stderr)
        return 2
    fmt = args.format or ("table" if sys.stdout.isatty() else "csv")
    output.write(op_diff.table(found), fmt, args.output, full_names=getattr(args, "full_names", False))
    print(op_diff.summary(found, args.base, args.new, args.threshold), file=sys.stderr)
    return 0


def cmd_report(args):
    from .present import html_report
    con = _open(args)
    if args.run is not None and args.job is not None:
        raise reports.ReportError("report: give --run RUN (one run's page) or --job JOB (every rank of a job), not both")
    if args.job is not None:
        from .present import job_view
        with status(f"writing {args.output}"):
            try:
                page, sections = job_view.report_html(con, args.job)
            except job_view.JobError as e:
                raise reports.ReportError(str(e)) from None
            try:
                with open(args.output, "w", encoding="utf-8") as f:
                    f.write(page)
            except OSError as e:
                raise reports.ReportError(f"{args.output}: cannot write ({e.strerror})") from None
        print(f"wrote {args.output} (job {args.job}: {', '.join(sections)})")
        return 0
    if args.run is None:
        args.run = only_trace(con)
    with status(f"writing {args.output}"):
        sections = html_report.write(con, args.run, args.output, batch_size=args.batch_size)
    print(f"wrote {args.output} ({', '.join(sections)})")
    return 0


def add_commands(sub, out_opts):
    sp = sub.add_parser("advise", help="findings: what is wrong with a run, with the numbers that show it")
    sp.add_argument("--db", help="the database file (default: $TRACEDB_DB)")
    sp.add_argument("--run", help="trace run (all when absent)")
    sp.add_argument("--job", help="every rank of a job side by side: its straggler and cost first, its process "
                                  "groups, then each rule over the ranks")
    sp.add_argument("--iteration", help="iteration number, or all (the steady one when absent)")
    sp.add_argument("--threshold", action="append", metavar="RULE=VALUE", help="replace a rule's threshold")
    sp.add_argument("--all", action="store_true", help="also list the rules that passed")
    sp.add_argument("--list-rules", action="store_true", help="list the rules and their thresholds")
    out_opts(sp)
    sp.set_defaults(func=cmd_advise)

    sp = sub.add_parser("diff", help="compare two runs metric by metric; exit 1 when the step time is worse "
                                     "(a CI gate; --fail-on for other metrics)")
    sp.add_argument("base", help="the run to compare against (the baseline)")
    sp.add_argument("new", help="the run to judge")
    sp.add_argument("--db", help="the database file (default: $TRACEDB_DB)")
    sp.add_argument("--threshold", type=argtypes.non_negative, default=5.0, metavar="PCT",
                    help="smallest change that counts, %% (default 5; changes within twice the noise never count)")
    sp.add_argument("--batch-size", type=argtypes.count, help="samples per iteration: energy per sample")
    sp.add_argument("--by", choices=["metric", "op"], default="metric",
                    help="metric: the regression gate (default); op: each framework op's GPU and self CPU time "
                         "side by side, the largest change first (exit 0)")
    sp.add_argument("--fail-on", action="append", default=[], metavar="METRIC",
                    help="fail also when this metric is worse (gpu_util, mfu, energy_per_iteration, ..., "
                         "kernels: any kernel, all); the step time always decides")
    out_opts(sp)
    sp.set_defaults(func=cmd_diff)

    sp = sub.add_parser("report", help="one self-contained HTML page on a run: findings, levels, kernels, energy")
    sp.add_argument("--db", help="the database file (default: $TRACEDB_DB)")
    sp.add_argument("--run", help="the trace run the page is about (default: the database's only trace run)")
    sp.add_argument("--job", help="instead of --run: a page on every rank of a job (straggler and cost first, "
                                  "process groups, ranks side by side)")
    sp.add_argument("--batch-size", type=argtypes.count, help="samples per iteration")
    sp.add_argument("-o", "--output", required=True, help="report.html")
    sp.set_defaults(func=cmd_report)
