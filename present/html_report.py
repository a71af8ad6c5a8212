"""One self-contained HTML page on a run (tracedb report).

Nothing is fetched when the page opens: charts are inline SVG drawn by
vl-convert (chart pages, with the Vega runtime inlined, are charts.save's); the
table sorting is a few lines of inline script. Each section is present only when
its report has data for the run; numbers carry their units (humanize.py: one
unit per column, in its header), kernel names are shortened with the whole name
on hover, and the findings link to the section of the report they name.
"""
import html
from decimal import Decimal

from ..query import reports
from .chart_list import chart_for

# (section id, title, report, params beyond run, columns to show or None = all); a section
# draws the chart that chart_list.CHARTS puts on the page for its report
SECTIONS = [
    ("critical_path_summary", "Critical path", "critical_path_summary", {},
     ["iteration", "category", "layer_type", "segments", "dur_ns", "share_pct", "energy_j"]),
    ("utilization_levels", "Utilization levels", "utilization_levels", {},
     ["iteration", "total_ns", "kernel_busy_ns", "gpu_util_pct", "smsp_active_pct_iter", "issue_slot_pct_iter",
      "tc_active_pct_iter", "tc_issue_pct_iter", "smsp_active_pct", "issue_slot_pct", "tc_active_pct",
      "tc_issue_pct", "matched_time_pct"]),
    ("utilization_by_layer", "Layer breakdown", "utilization_by_layer", {}, None),
    ("top_kernels", "Top kernels and their levels", "top_kernels", {}, None),
    ("launch_queue", "Launch queue", "launch_queue", {}, None),
    ("queue_utilization", "Eager queue", "queue_utilization", {}, None),
    ("energy_summary", "Energy", "energy_summary", {}, None),
    ("kernel_energy", "Energy by layer type", "kernel_energy", {"group_by": "layer"}, None),
    ("memory_summary", "Memory", "memory_summary", {}, None),
    ("comm_overlap", "Communication", "comm_overlap", {}, None),
]
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1b1f24}
header{background:#1f3a5f;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
nav{position:sticky;top:0;background:#eef2f7;padding:8px 24px;border-bottom:1px solid #ccd;z-index:1}
nav a{margin-right:14px;color:#1f3a5f;text-decoration:none}main{padding:8px 24px 40px}
section{margin:22px 0}h2{font-size:17px;border-bottom:2px solid #1f3a5f;padding-bottom:3px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{border:1px solid #d5d9e0;padding:3px 7px}
th{background:#f4f6f9;cursor:pointer;user-select:none;white-space:nowrap}th.sorted-asc::after{content:" \\25B2"}
th.sorted-desc::after{content:" \\25BC"}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.txt{max-width:520px;overflow-wrap:break-word}td.long{min-width:240px}.sev-high{color:#b00020;font-weight:600}
.sev-medium{color:#b35c00;font-weight:600}.sev-low{color:#5b6b00}.sev-skipped{color:#777}.sev-ok{color:#2e7d32}
.kv td:first-child{color:#555}.scroll{overflow-x:auto}.chart svg{max-width:100%;height:auto}.note{color:#555;font-size:12px}
"""
SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
      var asc=!th.classList.contains('sorted-asc');
      t.querySelectorAll('th').forEach(function(h){h.classList.remove('sorted-asc','sorted-desc');});
      th.classList.add(asc?'sorted-asc':'sorted-desc');
      rows.sort(function(a,b){
        var x=a.cells[i].getAttribute('data-v'),y=b.cells[i].getAttribute('data-v');
        var nx=parseFloat(x),ny=parseFloat(y),c;
        if(!isNaN(nx)&&!isNaN(ny)){c=nx-ny;}else{c=String(x).localeCompare(String(y));}
        return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
"""


def table_html(rows, columns=None, links=None, keep=()):
    """A sortable table of report rows (dicts); links: column -> fn(value) -> href or None.
    Numbers by their column's unit (humanize.column: `total (ms)`), kernel and op names
    shortened with the whole name as the cell's title (hover); a column empty in every
    row is left out, and one with the same value in every row of several is said once
    above the table (unless in keep)."""
    from . import humanize
    if not rows:
        return ""
    cols = [c for c in (columns or list(rows[0])) if c in keep or any(r.get(c) not in (None, "") for r in rows)]
    same = [] if len(rows) < 2 else [c for c in cols if c not in keep and c not in ("severity", "rule")
                                     and len({repr(r.get(c)) for r in rows}) == 1]
    cols = [c for c in cols if c not in same]
    heads, texts, titles = [], [], []
    for c in cols:
        values = [r.get(c) for r in rows]
        if humanize.is_name(c):
            short = humanize.short_names(v for v in values if isinstance(v, str))
            heads.append(c)
            texts.append([short.get(v, "" if v is None else str(v)) for v in values])
            titles.append([v if isinstance(v, str) and short.get(v) != v else None for v in values])
        else:
            head, shown = humanize.column(c, values)
            heads.append(head)
            texts.append(shown)
            titles.append([None] * len(values))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    body = []
    for k, r in enumerate(rows):
        tds = []
        for j, c in enumerate(cols):
            v = r.get(c)
            if isinstance(v, Decimal):
                v = float(v)
            text = texts[j][k]
            num = isinstance(v, (int, float)) and not isinstance(v, bool)
            key = repr(float(v)) if num else "" if v is None else str(v)
            inner = html.escape(text)
            if not num:         # a long identifier may break after _ or :: (not anywhere, letter by letter)
                inner = inner.replace("_", "_<wbr>").replace("::", "::<wbr>")
            href = links.get(c)(r.get(c)) if links and c in links else None
            if href:
                inner = f'<a href="{html.escape(href)}">{inner}</a>'
            title = f' title="{html.escape(titles[j][k])}"' if titles[j][k] else ""
            cls = "num" if num else "txt long" if len(text) > 60 else "txt"
            if c == "severity":
                cls += f" sev-{html.escape(text)}"
            tds.append(f'<td class="{cls}" data-v="{html.escape(key)}"{title}>{inner}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    said = "".join(f'<p class="note">{html.escape(c)}: {html.escape(humanize.value(c, rows[0].get(c)))} in every row'
                   f'</p>' for c in same)
    return (f'{said}<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def blurb(text, limit=300):
    """The first sentences of a description, whole, within limit characters (never cut
    mid-word: a first sentence longer than limit ends at its last whole word, with …)."""
    import re
    sentences = re.split(r"(?<=[.])\s+(?=[A-Z`(])", " ".join(text.split()))
    out = ""
    for s in sentences:
        if len(out) + len(s) + 1 > limit:
            break
        out = f"{out} {s}".strip()
    if not out:
        out = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    return out


def chart_svg(name, table):
    """The chart over its report's rows (run once for the page) as inline SVG, or None."""
    import vl_convert as vlc
    from . import charts
    try:
        chart = charts.from_table(name, table)
    except reports.ReportError:
        return None
    return vlc.vegalite_to_svg(chart.to_dict())


def _report_table(memo, name, params):
    if name not in reports.all_reports():
        return None
    try:
        return memo.run(name, params)
    except reports.ReportError:
        return None


def _report_rows(memo, name, params):
    table = _report_table(memo, name, params)
    return None if table is None else table.to_pylist()


def _has_values(rows, columns):
    """Rows hold something beyond run/iteration keys (a report may return a row of NULLs)."""
    skip = {"run", "iteration", "note", "ncu_run", "stream", "total_ns", "kernel_busy_ns", "kernel_sum_ns",
            "gpu_util_pct", "samples_per_s"}
    return any(r.get(c) is not None for r in rows for c in (columns or r) if c not in skip)


def _gpu_read(con, run, rows):
    """A line saying which GPU of which power log the energy rows read, and why."""
    own = con.execute("SELECT gpu, source FROM run_gpu WHERE run = ?", [run]).fetchone()
    read = sorted({(r["power_run"], r["gpu"]) for r in rows if r.get("power_run") is not None})
    if not read:
        return ""
    why = (f"the run's own GPU (from its {'kernels' if own[1] == 'kernels' else 'deviceProperties'})"
           if own and all(g == own[0] for _, g in read) else "the log's lowest GPU: the run's own is not in it")
    said = ", ".join(f"GPU {g} of power log {p}" for p, g in read)
    return f'<p class="note">read {html.escape(said)}: {html.escape(why)}</p>'


def build(con, run, batch_size=None):
    """(html text, [section ids]) of the report page for run."""
    from ..analysis import advise
    from . import humanize
    memo = reports.Memo(con)           # each report run once for the page: sections, charts and rules
    over = _report_rows(memo, "overview", {"run": run})
    if not over:
        from ..suggest import run_hint
        raise reports.ReportError(f"no run named {run!r} in the database{run_hint(con, run)}")
    o = over[0]
    util = [r for r in (_report_rows(memo, "gpu_utilization", {"run": run, **({"batch_size": str(batch_size)}
                                                                              if batch_size else {})}) or [])]
    steady = next((r for r in util if r["steady"]), None)
    parts = []
    found = advise.evaluate(con, run, memo=memo)
    worst = next((f for f in found if f["severity"] in advise.SEVERITIES), None)

    kv = [("run", run), ("kind", o["kind"]), ("framework", o["framework"]), ("device", o["device_name"]),
          ("events", f"{o['events']:,}"), ("GPU activities", f"{o['kernels']:,}"), ("iterations", o["iterations"])]
    if steady:          # what bounds the step: the worst finding, in one line
        kv += [("what bounds the step", f"{worst['rule']} ({worst['severity']}): {worst['evidence']}" if worst
                else "no rule fired (see Findings)")]
        kv += [("steady iteration", steady["iteration"]), ("iteration time", humanize.value("total_ns", steady["total_ns"])),
               ("GPU utilization", humanize.value("gpu_util_pct", steady["gpu_util_pct"])),
               ("kernels in the iteration", f"{steady['kernels']:,}")]
        if steady.get("samples_per_s"):
            kv.append(("throughput", f"{steady['samples_per_s']:,.1f} samples/s"))
    overview = "<table class='kv'>" + "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in kv) + "</table>"
    if len(util) > 1:
        overview += "<h3>Iterations</h3>" + table_html(util, ["iteration", "total_ns", "kernel_busy_ns", "idle_ns",
                                                             "gpu_util_pct", "kernels", "steady"])
    parts.append(("overview", "Overview", overview))

    present = {}
    for sid, title, report, extra, cols in SECTIONS:
        table = _report_table(memo, report, {"run": run, **extra})
        rows = None if table is None else table.to_pylist()
        if not rows or not _has_values(rows, cols):
            continue
        chart = chart_for(report, on_page=True)
        svg = chart_svg(chart, table) if chart else None
        shown = cols or [c for c in rows[0] if c not in ("run", "note")]
        notes = sorted({r["note"] for r in rows if r.get("note")})
        body = (f'<div class="chart" id="chart-{sid}">{svg}</div>' if svg else "") + table_html(rows, shown)
        if report == "energy_summary":          # which GPU of a log of several it read
            body = _gpu_read(con, run, rows) + body
        body += "".join(f'<p class="note">note: {html.escape(n)}</p>' for n in notes)
        if caveat := reports.caveat_of(table):       # counters of a pairing kept by --force
            body = f'<p class="note caveat">caveat: {html.escape(caveat)}</p>' + body
        body += (f'<p class="note">from <code>tracedb query {report} --run {html.escape(run)}</code>: '
                 f'{html.escape(blurb(reports.get(report).description))}</p>')
        present[report] = sid
        parts.append((sid, title, body))

    shown = [f for f in found if f["severity"] not in ("ok", "skipped")]
    skipped = [f for f in found if f["severity"] == "skipped"]
    fired = len(shown)
    links = {"next_report": lambda v: f"#{present[v]}" if v in present else None,
             "rule": lambda v: f"#rule-{v}"}
    fbody = (f"<p>{fired} finding{'s' if fired != 1 else ''} on iteration "
             f"{steady['iteration'] if steady else '-'}; {len(skipped)} rules skipped for lack of data; "
             f"{len(found) - len(shown) - len(skipped)} passed. Sort by clicking a column.</p>"
             + table_html(shown, ["severity", "rule", "value", "threshold", "unit", "evidence", "suggestion",
                                  "next_report"], links))
    if skipped:         # one line each: what the rule needs
        fbody += "<h3>Rules skipped for lack of data</h3><ul class='note'>" + "".join(
            f'<li><a href="#rule-{html.escape(f["rule"])}">{html.escape(f["rule"])}</a>: '
            f'{html.escape(f["evidence"])}</li>' for f in skipped) + "</ul>"
    passed = [f for f in found if f["severity"] == "ok"]
    if passed:
        fbody += "<h3>Rules that passed</h3>" + table_html(passed, ["rule", "value", "threshold", "unit", "evidence"])
    parts.insert(2 if "critical_path_summary" in present else 1, ("findings", "Findings", fbody))
    parts.append(("rules", "Rules", "<table>" + "".join(
        f'<tr id="rule-{r.name}"><td>{r.name}</td><td class="txt">{html.escape(r.description)} '
        f'(fires {r.fires} {r.threshold:g} {html.escape(r.unit)}; {r.severity}; '
        f'next: {html.escape(r.next_report)})</td></tr>' for r in advise.all_rules().values()) + "</table>"))

    nav = "".join(f'<a href="#{sid}">{html.escape(title)}</a>' for sid, title, _ in parts)
    sections = "".join(f'<section id="{sid}"><h2>{html.escape(title)}</h2>{body}</section>'
                       for sid, title, body in parts)
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>tracedb: {html.escape(run)}</title>"
            f"<style>{STYLE}</style></head><body><header><h1>tracedb report: {html.escape(run)}</h1>"
            f"<div>{html.escape(str(o['device_name'] or ''))} · {html.escape(str(o['path']))}</div></header>"
            f"<nav>{nav}</nav><main>{sections}</main><script>{SORT_JS}</script></body></html>")
    return page, [sid for sid, _, _ in parts]


def write(con, run, path, batch_size=None):
    page, ids = build(con, run, batch_size)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return ids


