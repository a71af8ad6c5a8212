"""Chart pages run no script from their data (issue 55): every chart's real report
rows with a payload added to each string value, written as HTML and opened in
headless Chromium; the payload would mark the page's root element if it ran. The
control: the same rows through vl-convert's own page (what `tracedb chart` wrote
before) do run it, so the check can see a script that runs."""
import gzip
import json
import os
import shutil
import subprocess

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import AMP_NCU, DATA
from tracedb.present import charts
from tracedb.store import db
from tracedb.query import reports
from tracedb.cli import main
from tracedb.ingest import ingest_file

MARK = "xss" + "ran"          # the attribute the payload sets (never in the payload's own text)
PAYLOAD = ("</script><script>document.documentElement.setAttribute('xss'+'ran','1')</script>"
           "<img src=x onerror=\"document.documentElement.setAttribute('xss'+'ran','1')\">\u2028<!--")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# without chromium these tests skip on a developer's machine; under CI=true they fail, so
# that a clean machine cannot pass without them (as in test_report_html.py)
CI = os.environ.get("CI", "").lower() in ("true", "1")
pytestmark = pytest.mark.skipif(CHROMIUM is None and not CI, reason="no chromium (apt-get install chromium)")


def dom(page):
    """The DOM of an HTML file after its scripts ran (headless Chromium)."""
    if CHROMIUM is None:
        pytest.fail("chromium is not installed and CI=true: the browser tests fail rather than skip "
                    "(apt-get install -y chromium)")
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000",
                          "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=60)
    return out.stdout


@pytest.fixture(scope="module")
def every_chart_db(tmp_path_factory):
    """Real data for every chart: a capture folder (trace, power, host), a DDP job,
    the amp trace with its ncu report, an async TF trace."""
    path = tmp_path_factory.mktemp("xss") / "c.duckdb"
    assert main(["ingest", str(DATA / "capture_h100" / "resnet18_bs32"), str(DATA / "dist" / "ddp"),
                 str(DATA / "torch" / "h100_resnet50_bs64_amp.json.gz"),
                 str(DATA / "tf" / "cpu_async_lenet_bs64.json.gz"), "--db", str(path)]) == 0
    con = db.connect(path)
    ingest_file(con, AMP_NCU, pair_with="h100_resnet50_bs64_amp")
    yield con, path
    con.close()


def poisoned(table):
    """table with PAYLOAD added to every string value (distinct values stay distinct)."""
    cols = []
    for i, f in enumerate(table.schema):
        c = table.column(i)
        cols.append(pc.binary_join_element_wise(c, pa.scalar(PAYLOAD), "") if pa.types.is_string(f.type) else c)
    return pa.table(cols, names=table.column_names)


@pytest.mark.parametrize("name", list(charts.CHARTS))
def test_chart_html_runs_no_script_from_any_string(every_chart_db, tmp_path, name):
    con, _ = every_chart_db
    table = reports.run(con, charts.CHARTS[name][0], {})
    assert any(pa.types.is_string(t) for t in table.schema.types), name     # there is a string to poison
    fig = charts.from_table(name, poisoned(table))
    assert "</script>" in json.dumps(json.loads(fig.spec_json()), ensure_ascii=False)   # it reached the data
    page = tmp_path / f"{name}.html"
    charts.save(fig, page)
    text = page.read_text()
    script = text[text.rindex("const spec = "):]
    assert "<" not in script.split("\n", 1)[0]          # nothing in the spec line can open or close a tag
    d = dom(page)
    assert 'class="marks"' in d, d[-2000:]               # the chart was drawn
    assert MARK not in d


def test_control_vl_convert_page_runs_the_payload(every_chart_db, tmp_path):
    """What `tracedb chart layers -o page.html` wrote before: the payload runs (the check can fail)."""
    import vl_convert as vlc
    con, _ = every_chart_db
    fig = charts.from_table("layers", poisoned(reports.run(con, "utilization_by_layer", {})))
    page = tmp_path / "raw.html"
    page.write_text(vlc.vegalite_to_html(fig.spec_json(), bundle=True))
    assert MARK in dom(page)


def test_cli_chart_of_a_trace_and_a_layer_rule_holding_a_payload(tmp_path, capsys):
    """End to end: a rank trace's process-group name (skew) and a user's layer type
    (layers) hold the payload; the pages drawn by `tracedb chart` run none of it."""
    job = tmp_path / "ddp"
    job.mkdir()
    for rank in (0, 1):
        with gzip.open(DATA / "dist" / "ddp" / f"rank{rank}.json.gz", "rt") as f:
            doc = json.load(f)
        n = 0
        for e in doc["traceEvents"]:
            if e.get("args", {}).get("Process Group Name") == "0":
                e["args"]["Process Group Name"] = "pg" + PAYLOAD
                n += 1
        assert n == 12
        doc["distributedInfo"]["pg_config"][0]["pg_name"] = "pg" + PAYLOAD
        with gzip.open(job / f"rank{rank}.json.gz", "wt") as f:
            json.dump(doc, f)
    dbf = str(tmp_path / "x.duckdb")
    assert main(["ingest", str(job), "--db", dbf]) == 0
    assert main(["settings", "layer_rules", "add", "priority=-5", "field=op", "pattern=.",
                 "layer_type=conv" + PAYLOAD, "--db", dbf]) == 0
    con = db.connect(dbf, read_only=True)
    assert {r["process_group"] for r in reports.run(con, "collective_arrivals", {}).to_pylist()} == {"pg" + PAYLOAD}
    assert "conv" + PAYLOAD in {r["layer_type"] for r in reports.run(con, "utilization_by_layer", {}).to_pylist()}
    con.close()
    for chart in ("skew", "layers"):
        page = tmp_path / f"{chart}.html"
        assert main(["chart", chart, "--db", dbf, "-o", str(page)]) == 0
        d = dom(page)
        assert 'class="marks"' in d and MARK not in d
