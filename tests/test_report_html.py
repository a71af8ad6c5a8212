"""tracedb report and tracedb chart -o x.html: self-contained pages, checked in a
real headless browser (Debian's chromium) with every network name unresolvable:
no console error, every chart drawn, the tables sort, the links land."""
import re
import shutil
import subprocess

import pytest

from conftest import AMP_NCU_BASE, DATA
from tracedb import cli
from tracedb.store import db
from tracedb.present import html_report
from tracedb.ingest import ingest_file

AMP = "h100_resnet50_bs64_amp"
CPU = "cpu_async_lenet_bs64"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def rdb(tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "r.duckdb"
    con = db.connect(path)
    ingest_file(con, DATA / "torch" / f"{AMP}.json.gz")
    ingest_file(con, AMP_NCU_BASE, pair_with=AMP)
    ingest_file(con, DATA / "power" / f"{AMP}.csv", pair_with=AMP)
    ingest_file(con, DATA / "tf" / f"{CPU}.json.gz")
    con.close()
    return path


def browse(page, tmp_path, extra_js=""):
    """(DOM after the page's scripts ran, console lines) from headless chromium, offline."""
    f = tmp_path / "page.html"
    f.write_text(page.replace("</body>", f"<script>{extra_js}</script></body>") if extra_js else page)
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                        "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000",
                        "--dump-dom", f.as_uri()], capture_output=True, text=True, timeout=120)
    console = [l for l in r.stderr.splitlines() if ":CONSOLE" in l]
    return r.stdout, console


def no_external_resources(page):
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)=["']?(https?:)?//""", page)
    assert "cdn.jsdelivr" not in page and "unpkg.com" not in page


def test_report_sections_follow_the_data(rdb):
    con = db.connect(rdb, read_only=True)
    page, ids = html_report.build(con, AMP)
    assert ids[:2] == ["overview", "findings"]                 # findings first
    assert {"utilization_levels", "utilization_by_layer", "top_kernels", "launch_queue",
            "energy_summary"} <= set(ids)
    assert "memory_summary" not in ids and "comm_overlap" not in ids     # no such data (reports) here
    assert "queue_utilization" not in ids                      # a PyTorch trace has no eager queue
    _, cpu_ids = html_report.build(con, CPU)
    assert "queue_utilization" in cpu_ids                      # TensorFlow eager queue
    assert not {"utilization_levels", "energy_summary", "top_kernels"} & set(cpu_ids)
    # numbers with units: ns columns shown in ms, % columns with %
    assert "total_ns (ms)" in page and "gpu_util_pct (%)" in page and "energy_integrated_j (J)" in page
    # links between sections: every in-page href has its target
    targets = set(re.findall(r'id="([^"]+)"', page))
    hrefs = set(re.findall(r'href="#([^"]+)"', page))
    assert hrefs and hrefs <= targets
    assert 'href="#launch_queue"' in page                      # host_bound's next report
    no_external_resources(page)
    con.close()


@needs_browser
def test_report_in_a_real_browser(rdb, tmp_path):
    con = db.connect(rdb, read_only=True)
    page, _ = html_report.build(con, AMP)
    con.close()
    # click the findings table's value column twice: ascending, then descending
    js = """var t=document.querySelector('#findings table.sortable');var th=t.querySelectorAll('th')[2];
    th.click();var a=Array.from(t.tBodies[0].rows).map(function(r){return r.cells[2].getAttribute('data-v');});
    th.click();var d=Array.from(t.tBodies[0].rows).map(function(r){return r.cells[2].getAttribute('data-v');});
    document.body.setAttribute('data-asc',a.join('|'));document.body.setAttribute('data-desc',d.join('|'));"""
    dom, console = browse(page, tmp_path, js)
    assert console == []
    charts = re.findall(r'<div class="chart" id="chart-([a-z_]+)">(.*?)</div>', dom, re.S)
    assert {c for c, _ in charts} == {"utilization_levels", "utilization_by_layer"}
    for name, svg in charts:
        assert "<svg" in svg and len(re.findall(r'class="mark-rect role-mark', svg)) >= 1, name
    asc = [float(v) for v in re.search(r'data-asc="([^"]*)"', dom).group(1).split("|") if v]
    desc = [float(v) for v in re.search(r'data-desc="([^"]*)"', dom).group(1).split("|") if v]
    assert len(asc) >= 3 and asc == sorted(asc) and desc == sorted(desc, reverse=True)


@needs_browser
def test_chart_page_renders_offline(rdb, tmp_path):
    out = tmp_path / "levels.html"
    assert cli.main(["chart", "levels", "--db", str(rdb), "--run", AMP, "-o", str(out)]) == 0
    page = out.read_text()
    no_external_resources(page)
    dom, console = browse(page, tmp_path)
    assert console == []
    assert re.search(r'<svg[^>]*class="marks"', dom) or "<canvas" in dom
    assert 'class="mark-rect role-mark' in dom or "<canvas" in dom


def test_report_command(rdb, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main(["report", "--db", str(rdb), "--run", AMP, "-o", str(out)]) == 0
    assert "findings" in capsys.readouterr().out and out.read_text().startswith("<!DOCTYPE html>")
    assert cli.main(["report", "--db", str(rdb), "--run", "ghost", "-o", str(out)]) == 1
    assert "no run named 'ghost'" in capsys.readouterr().err
