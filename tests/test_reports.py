"""The first saved reports, checked against independent computations from the raw JSON."""
import pytest

import independent as ref
from conftest import TORCH, TRACES, raw_trace, run_name
from tracedb.query import reports
from tracedb.store.sql import params_of
from tracedb.query.reports import ReportError


@pytest.mark.parametrize("path", TRACES, ids=run_name)
def test_gpu_utilization_matches_raw_json(fixture_db, path):
    run = run_name(path)
    doc = raw_trace(path)
    want = ref.utilization(doc)
    got = {r["iteration"]: r for r in reports.run(fixture_db, "gpu_utilization",
                                                 {"run": run, "batch_size": "64"}).to_pylist()}
    assert set(got) == set(want)
    for step, w in want.items():
        g = got[step]
        assert g["total_ns"] == w["total_ns"]
        assert g["kernel_busy_ns"] == w["busy_ns"]
        assert g["kernel_sum_ns"] == w["sum_ns"]
        assert g["kernels"] == w["kernels"]
        assert g["idle_ns"] == w["total_ns"] - w["busy_ns"]
        assert g["gpu_util_pct"] == pytest.approx(100 * w["busy_ns"] / w["total_ns"])
        assert g["samples_per_s"] == pytest.approx(64 / (w["total_ns"] / 1e9))
    assert sum(r["steady"] for r in got.values()) == 1


def test_steady_is_first_within_5pct_of_later_median(fixture_db):
    rows = reports.run(fixture_db, "gpu_utilization", {"run": "cpu_async_lenet_bs64"}).to_pylist()
    d0, d1 = rows[0]["total_ns"], rows[1]["total_ns"]
    assert abs(d0 - d1) > 0.05 * d1          # step 0 is a warm-up: 6% slower
    assert [r["steady"] for r in rows] == [False, True]
    assert rows[0]["samples_per_s"] is None


def test_gpu_busy_is_below_sum_and_total(fixture_db):
    for r in reports.run(fixture_db, "gpu_utilization", {}).to_pylist():
        assert r["kernel_busy_ns"] <= r["kernel_sum_ns"] and r["kernel_busy_ns"] <= r["total_ns"]


@pytest.mark.parametrize("path", TORCH, ids=run_name)
def test_overview(fixture_db, path):
    run = run_name(path)
    doc = raw_trace(path)
    (row,) = reports.run(fixture_db, "overview", {"run": run}).to_pylist()
    timed = [e for e in doc["traceEvents"] if "ts" in e and e.get("ph") != "M"]
    assert row["events"] == len(doc["traceEvents"])
    assert row["kernels"] == len(ref.gpu_events(doc))
    assert row["iterations"] == 1 and row["framework"] == "pytorch"
    assert row["device_name"] == doc["deviceProperties"][0]["name"]
    assert row["start_ns"] == min(ref.ns(doc, e["ts"]) for e in timed)


def test_report_errors_are_clear(fixture_db):
    with pytest.raises(ReportError, match="no report named"):
        reports.run(fixture_db, "nope")
    with pytest.raises(ReportError, match="no parameter"):
        reports.run(fixture_db, "gpu_utilization", {"batch": "3"})
    with pytest.raises(ReportError, match="must be INTEGER"):
        reports.run(fixture_db, "gpu_utilization", {"batch_size": "many"})
    with pytest.raises(ReportError, match="no run named"):
        reports.run(fixture_db, "gpu_utilization", {"run": "ghost"})
    # an iteration is a step number or all, whatever the parameter's SQL type: a VARCHAR
    # parameter once passed 3.5 on (DuckDB read it as 4) and ALL or x to a conversion error
    for name in ("top_kernels", "kernel_utilization", "time_breakdown"):
        for bad in ("3.5", "x", "steady", ""):
            with pytest.raises(ReportError, match=f"report {name}: parameter iteration must be an iteration number or all, got '{bad}'"):
                reports.run(fixture_db, name, {"iteration": bad})
    assert reports.run(fixture_db, "top_kernels", {"iteration": "ALL", "limit": "1"}).to_pylist() == \
        reports.run(fixture_db, "top_kernels", {"iteration": "all", "limit": "1"}).to_pylist()
    with pytest.raises(ReportError, match="report energy_breakdown reads one iteration at a time"):
        reports.run(fixture_db, "energy_breakdown", {"iteration": "All"})


PER_ITERATION = sorted(n for n, r in reports.all_reports().items()
                       if r.param("iteration") is not None and r.param("iteration").type.upper() in ("INTEGER", "VARCHAR"))


@pytest.mark.parametrize("name", PER_ITERATION)
def test_iteration_all_is_every_iteration_or_says_why_not(name):
    """The contract of per-iteration reports: iteration=all gives every iteration and a
    whole-trace row (its header declares `iteration_all: sql`, and the parameter's doc
    says so), is the default of a report that lists every iteration when none is asked
    for (`iteration_all: absent`), or is refused in one line by the one that reads one
    iteration at a time."""
    r = reports.get(name)
    p = r.param("iteration")
    if r.iteration_all == "sql":
        assert p.type.upper() == "VARCHAR" and "all" in p.doc, name
        assert reports.bound_params(r, {"iteration": "ALL"})["iteration"] == "all"
    elif r.iteration_all == "absent":
        assert "when absent)" in p.doc and "(all" in p.doc, name
        assert reports.bound_params(r, {"iteration": "all"})["iteration"] is None
    else:
        assert name == "energy_breakdown", name
        with pytest.raises(ReportError, match=f"report {name} reads one iteration at a time"):
            reports.bound_params(r, {"iteration": "all"})


def test_iteration_all_where_every_iteration_is_the_default(fixture_db):
    run = "cpu_async_lenet_bs64"
    every = reports.run(fixture_db, "eager_phases", {"run": run}).to_pylist()
    assert {r["iteration"] for r in every} == {0, 1}
    assert reports.run(fixture_db, "eager_phases", {"run": run, "iteration": "all"}).to_pylist() == every


def test_every_report_has_documented_header():
    for r in reports.all_reports().values():
        assert r.description and r.columns and r.requires, r.name
        assert not r.problems, (r.name, r.problems)
        # --run exactly where the SQL reads $run; every required relation has a message
        assert (r.param("run") is not None) == ("run" in params_of(r.body)), r.name
        assert all(meaning and meaning != rel for rel, meaning in r.requires), r.name
        assert set(r.engines) <= {"duckdb", "spark"}, r.name


def test_header_is_the_source_of_truth(tmp_path):
    """A $param the header does not declare, a declared one the SQL ignores, and a
    --run to a report that takes none are refused, not bound as NULL."""
    bad = reports.parse("-- name: x\n-- description: d\n-- parameters:\n--   a INTEGER = 1: a\n"
                        "-- columns:\n--   v INTEGER: v\nSELECT $b AS v", "x")
    assert bad.problems == ["uses $b, which its header does not declare", "declares a, which its SQL does not use"]
    with pytest.raises(ReportError, match="takes no run"):
        reports.bound_params(reports.get("calibration_fit"), {"run": "r"})
    with pytest.raises(ReportError, match="no parameter iteratoin"):
        reports.bound_params(reports.get("utilization_levels"), {"iteratoin": "2"})
