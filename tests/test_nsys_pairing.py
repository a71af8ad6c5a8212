"""An ncu report pairs with an Nsight Systems run as with a trace: its kernels are
matched to the export's kernels in their order, the ncu-level reports read its
counters for them, and a report of another workload is refused. The report here
is a real ncu raw CSV (tests/data/ncu, an H100 ResNet-50 step) whose first 60 rows
were given the names, launch shapes, contexts and streams of the first 60 kernels of
rank 0 of a real H100 export (tests/data/nsys/h100_2gpu_1s), read from the SQLite
file with plain sqlite3: the counters stay the CSV's own."""
import csv
import gzip
import io
import sqlite3
from pathlib import Path

import pytest

from tracedb.ingest import IngestError, ingest_file
from tracedb.query import reports
from tracedb.store import db

DATA = Path(__file__).parent / "data"
EXPORT = DATA / "nsys" / "h100_2gpu_1s.sqlite.gz"
NCU = DATA / "ncu" / "h100_resnet50_bs64_amp_raw_baseunits.csv.gz"
N = 60


def rank0_kernels(path):
    """The first N kernels of rank 0 (the process of the lowest device) by start:
    (start in epoch ns, name, grid, block, context, stream, device)."""
    c = sqlite3.connect(path)
    try:
        base = c.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        pid = c.execute("SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 "
                        "ORDER BY min(deviceId), 1 LIMIT 1").fetchone()[0]
        return [(s + base, *rest) for s, *rest in c.execute(
            """SELECT k.start, n.value, gridX, gridY, gridZ, blockX, blockY, blockZ, contextId, streamId, deviceId
               FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds n ON n.id = k.demangledName
               WHERE k.globalPid >> 24 = ? ORDER BY k.start, k.rowid LIMIT ?""", [pid, N])]
    finally:
        c.close()


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    d = tmp_path_factory.mktemp("nsys_ncu")
    plain = d / "h.sqlite"
    plain.write_bytes(gzip.decompress(EXPORT.read_bytes()))
    kernels = rank0_kernels(plain)
    rows = list(csv.reader(io.StringIO(gzip.decompress(NCU.read_bytes()).decode())))
    header, units, data = rows[0], rows[1], rows[2:2 + N]
    col = {c: header.index(c) for c in ("ID", "Kernel Name", "Grid Size", "Block Size", "Context", "Stream",
                                         "Device")}
    for i, (row, (_, name, gx, gy, gz, bx, by, bz, ctx, stream, dev)) in enumerate(zip(data, kernels)):
        row[col["ID"]], row[col["Kernel Name"]] = str(i), name
        row[col["Grid Size"]], row[col["Block Size"]] = f"({gx}, {gy}, {gz})", f"({bx}, {by}, {bz})"
        row[col["Context"]], row[col["Stream"]], row[col["Device"]] = str(ctx), str(stream), str(dev)
    report = d / "h_ncu.csv"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header, units, *data])
    report.write_text(buf.getvalue())
    con = db.connect(d / "p.duckdb")
    ingest_file(con, str(EXPORT), run="h", options={"rank": 0})
    result = ingest_file(con, str(report), run="h_ncu", pair_with="h")
    yield con, result, kernels, header, data
    con.close()


def test_each_ncu_kernel_is_paired_with_its_kernel_of_the_export(paired):
    con, result, kernels, _, _ = paired
    assert result.pairing["matched"] == N and result.pairing["name_mismatches"] == 0
    got = {r["ncu_id"]: (r["ts_ns"], r["name"]) for r in
           reports.run(con, "kernel_utilization", {"run": "h"}).to_pylist()}
    assert got == {i: (k[0], k[1]) for i, k in enumerate(kernels)}


def test_ncu_levels_of_the_nsys_run_are_the_reports_counters(paired):
    """smsp_active_pct of each paired kernel: 100 x smsp__cycles_active.sum /
    smsp__cycles_elapsed.sum of its CSV row."""
    con, _, _, header, data = paired
    a, e = header.index("smsp__cycles_active.sum"), header.index("smsp__cycles_elapsed.sum")
    want = {i: round(100 * float(r[a].replace(",", "")) / float(r[e].replace(",", "")), 3) for i, r in enumerate(data)}
    got = {r["ncu_id"]: r["smsp_active_pct"] for r in reports.run(con, "kernel_utilization", {"run": "h"}).to_pylist()}
    assert got == pytest.approx(want, abs=1e-3) and len(set(want.values())) > 10


def test_a_report_of_another_workload_is_not_paired_with_the_nsys_run(paired, tmp_path):
    """ResNet-50's report as ncu wrote it: its kernels are not the export's."""
    con = db.connect(tmp_path / "f.duckdb")
    ingest_file(con, str(EXPORT), run="h", options={"rank": 0})
    with pytest.raises(IngestError, match="more than 20%"):
        ingest_file(con, str(NCU), run="resnet_ncu", pair_with="h")
    assert con.execute("SELECT count(*) FROM match_runs").fetchone()[0] == 0
    con.close()
