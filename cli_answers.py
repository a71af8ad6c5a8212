"""The commands that answer for people: advise (findings), diff (the regression
gate), report (one self-contained HTML page). cli.py registers them with
add_commands; the work is in advise.py, diff.py and html_report.py."""
import contextlib
import sys

from tracedb import argtypes, output, reports


def _status(text):
    """A spinner on a terminal (these commands run every rule and several reports); quiet otherwise."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from rich.console import Console
    return Console(stderr=True).status(text)


def _open(args):
    from tracedb.cli import _open
    return _open(args.db)


def cmd_advise(args):
    from tracedb import advise
    if args.list_rules:
        for r in advise.all_rules().values():
            print(f"{r.name} (fires {r.fires} {r.threshold:g} {r.unit}; {r.severity}; next: {r.next_report})\n"
                  f"    {r.description}")
        return 0
    con = _open(args)
    thresholds = advise.parse_thresholds(",".join(args.threshold or []))
    if args.job is not None:        # the whole job: straggler first, groups, each rule over the ranks
        from tracedb import job_view
        if args.run is not None:
            raise reports.ReportError("give --run RUN or --job JOB, not both")
        try:
            with _status("checking the rules on every rank"):
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
        raise reports.ReportError(f"no run named {args.run!r} in the database")
    with _status("checking the rules"):
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
    from tracedb import diff
    try:
        con = _open(args)
        with _status(f"comparing {args.new} with {args.base}"):
            rows = diff.compare(con, args.base, args.new, args.threshold, args.batch_size)
    except reports.ReportError as e:         # a gate that cannot decide fails apart from "worse"
        print(f"tracedb: error: {e}", file=sys.stderr)
        return 2
    fmt = args.format or ("table" if sys.stdout.isatty() else "csv")
    output.write(diff.table(rows), fmt, args.output)
    print(diff.summary(rows, args.base, args.new, args.threshold), file=sys.stderr)
    return 1 if any(r["verdict"] == "worse" for r in rows) else 0


def cmd_report(args):
    from tracedb import html_report
    con = _open(args)
    if (args.run is None) == (args.job is None):
        raise reports.ReportError("report: give --run RUN (one run's page) or --job JOB (every rank of a job)")
    if args.job is not None:
        from tracedb import job_view
        with _status(f"writing {args.output}"):
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
    with _status(f"writing {args.output}"):
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

    sp = sub.add_parser("diff", help="compare two runs metric by metric; exit 1 when one is worse (a CI gate)")
    sp.add_argument("base", help="the run to compare against (the baseline)")
    sp.add_argument("new", help="the run to judge")
    sp.add_argument("--db", help="the database file (default: $TRACEDB_DB)")
    sp.add_argument("--threshold", type=argtypes.non_negative, default=5.0, metavar="PCT",
                    help="smallest change that counts, %% (default 5; changes within twice the noise never count)")
    sp.add_argument("--batch-size", type=argtypes.count, help="samples per iteration: energy per sample")
    out_opts(sp)
    sp.set_defaults(func=cmd_diff)

    sp = sub.add_parser("report", help="one self-contained HTML page on a run: findings, levels, kernels, energy")
    sp.add_argument("--db", help="the database file (default: $TRACEDB_DB)")
    sp.add_argument("--run", help="the trace run the page is about")
    sp.add_argument("--job", help="instead of --run: a page on every rank of a job (straggler and cost first, "
                                  "process groups, ranks side by side)")
    sp.add_argument("--batch-size", type=argtypes.count, help="samples per iteration")
    sp.add_argument("-o", "--output", required=True, help="report.html")
    sp.set_defaults(func=cmd_report)
