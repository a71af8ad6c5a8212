"""reports.run binds the steady default of a report's iteration parameter as the
iteration's number (reports.resolve_steady: a plan-time constant lets DuckDB skip
the other iterations). The rows must be those the SQL gives for the default
itself, for every report that declares `steady:` and every trace run of a
database with all kinds of data: matched ncu counters, power, host and memory
samples, a distributed job, TensorFlow, JAX."""
import json

import pytest

from conftest import AMP_NCU_BASE, DATA, TF
from tracedb.store import db, sql
from tracedb.query import reports
from tracedb.cli import main
from tracedb.ingest import ingest_file

AMP = "h100_resnet50_bs64_amp"
CAP = DATA / "capture_h100" / "resnet18_bs32"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = tmp_path_factory.mktemp("steady") / "s.duckdb"
    assert main(["ingest", str(DATA / "dist" / "ddp"), "--db", str(path)]) == 0
    c = db.connect(path)
    ingest_file(c, DATA / "torch" / f"{AMP}.json.gz")
    ingest_file(c, AMP_NCU_BASE, pair_with=AMP)
    ingest_file(c, DATA / "power" / f"{AMP}.csv", pair_with=AMP)
    files = json.loads((CAP / "capture.json").read_text())["files"]
    run = ingest_file(c, CAP / files["trace"]).run
    for kind in ("power", "host"):
        ingest_file(c, CAP / files[kind], pair_with=run)
    for p in TF[:1] + sorted((DATA / "jax").glob("*.json.gz"))[:1]:
        ingest_file(c, p)
    yield c
    c.close()


STEADY = sorted(n for n, r in reports.all_reports().items() if r.steady)


def test_the_per_iteration_reports_declare_it():
    assert len(STEADY) >= 25
    for name in ("utilization_levels", "top_kernels", "flops_by_op", "kernel_type_breakdown", "collective_skew"):
        assert name in STEADY
    assert "findings" not in STEADY     # its skipped rules name no iteration under the default


@pytest.mark.parametrize("name", STEADY)
def test_resolved_steady_gives_the_same_rows(con, name):
    report = reports.get(name)
    key = "run" if report.param("run") else "job"
    asked = [r for (r,) in con.execute(f"SELECT DISTINCT {key} FROM runs WHERE kind = 'trace' AND {key} IS NOT NULL "
                                       "ORDER BY 1").fetchall()]
    compared = 0
    for run in asked:
        params = {key: run, **EXTRA.get(name, {})}
        resolved = reports.resolve_steady(con, report, reports.bound_params(report, params))
        try:
            want = reports.run(con, name, params, resolve=False)
        except reports.ReportError as e:       # data the run lacks: the same message either way
            with pytest.raises(reports.ReportError) as resolved_error:
                reports.run(con, name, params)
            assert str(resolved_error.value) == str(e)
            continue
        got = reports.run(con, name, params)
        assert got.column_names == want.column_names
        assert got.to_pylist() == want.to_pylist(), (name, run, resolved["iteration"])
        if resolved["iteration"] != report.param("iteration").default:
            steady = sql.scalar(con, "SELECT iteration FROM iteration_steadiness WHERE run = ? AND steady", [run])
            if key == "run" and report.steady == "run":
                assert str(resolved["iteration"]) == str(steady)
            compared += got.num_rows > 0
    assert compared or name in NO_ROWS_HERE, f"{name}: no run gave rows with a resolved iteration"


# Reports whose data this database lacks for every run (nothing to compare).
NO_ROWS_HERE = set()
# The database has no calibration of the H100: the published A100 one stands in.
EXTRA = {"energy_breakdown": {"calibration_gpu": "NVIDIA A100 (published)"}}
