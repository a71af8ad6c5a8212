"""Matching ncu kernels with trace kernels: accuracy on the real pair, robustness
to report variants built from it, name normalization, CLI and reports."""
import pytest

from conftest import AMP_NCU_BASE, AMP_TRACE, read_ncu_csv, write_ncu_csv
from tracedb.store import db
from tracedb.query import reports
from tracedb.cli import main
from tracedb.store.sql import rows, scalar
from tracedb.ingest import ingest_file
from tracedb.ingest.match import match

TRACE_RUN = "h100_resnet50_bs64_amp"


def pairs(con, ncu_run):
    return dict(rows(con, "SELECT trace_kernel_id, ncu_kernel_id FROM matches WHERE ncu_run = ?", [ncu_run]))


def test_fixture_pair_meets_the_accuracy_bar(matched_db):
    q = reports.run(matched_db, "match_quality", {"run": TRACE_RUN}).to_pylist()
    assert len(q) == 1
    q = q[0]
    assert q["ncu_kernels"] == 852 and q["iteration"] == 2
    assert q["matched"] / q["ncu_kernels"] >= 0.99
    assert q["time_covered_pct"] >= 99.0
    # one-to-one
    assert scalar(matched_db, "SELECT count(DISTINCT trace_kernel_id) = count(*) AND count(DISTINCT ncu_kernel_id) = count(*) FROM matches")
    # every pair with equal grid and block has the same normalized name
    assert scalar(matched_db, """SELECT count(*) FROM matched_kernels
                                 WHERE same_launch AND normalize_kernel_name(trace_name) <> normalize_kernel_name(ncu_name)""") == 0
    # matched kernels agree on what both tools record
    bad = scalar(matched_db, """SELECT count(*) FROM matches m
        JOIN kernels t ON t.run = m.trace_run AND t.kernel_id = m.trace_kernel_id
        JOIN kernels n ON n.run = m.ncu_run AND n.kernel_id = m.ncu_kernel_id
        WHERE t.registers_per_thread <> n.registers_per_thread OR t.shared_mem_bytes <> n.shared_mem_bytes""")
    assert bad == 0


def test_unmatched_kernels_stay_queryable(matched_db):
    u = rows(matched_db, "SELECT side, count(*) FROM unmatched_kernels GROUP BY side ORDER BY side")
    n_trace = scalar(matched_db, f"SELECT count(*) FROM kernels WHERE run = '{TRACE_RUN}' AND kind = 'kernel' AND iteration = 2")
    assert dict(u).get("trace", 0) == n_trace - 852
    assert dict(u).get("ncu", 0) == 0


def test_kernel_metrics_report_joins_trace_and_counters(matched_db):
    t = reports.run(matched_db, "kernel_metrics", {"run": TRACE_RUN}).to_pylist()
    assert len(t) == scalar(matched_db, "SELECT count(*) FROM matches")
    corr = dict(rows(matched_db, f"SELECT kernel_id, correlation FROM kernels WHERE run = '{TRACE_RUN}'"))
    by_corr = {c: k for k, c in corr.items()}
    header, _, data = read_ncu_csv(AMP_NCU_BASE)
    ix = {n: i for i, n in enumerate(header)}
    ncu_cycles = {int(r[ix["ID"]]): float(r[ix["smsp__cycles_elapsed.sum"]].replace(",", "")) for r in data}
    for r in t:
        assert r["correlation"] in by_corr
        assert r["smsp_cycles_elapsed"] == pytest.approx(ncu_cycles[r["ncu_id"]])
        assert r["op_name"] is not None or r["trace_name"].startswith("void at::native::(anonymous namespace)::multi_tensor")


@pytest.mark.parametrize("trace_name,ncu_name", [
    ("void at::native::vectorized_elementwise_kernel<8, at::native::float16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::float16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)",
     "void at::vectorized_elementwise_kernel<8, at::float16_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, __half const*, __half*)",
     "void engines_precompiled::nchwToNhwcKernel<__half, __half, float, 0, 1, 0>(engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)"),
    ("nvjet_sm90_hsh_320x128_64x3_1x2_h_bz_coopB_NTT", "nvjet_sm90_hsh_320x128_64x3_1x2_h_bz_coopB_NTT"),
])
def test_names_of_both_demanglers_normalize_alike(fresh_db, trace_name, ncu_name):
    a, b = rows(fresh_db, "SELECT normalize_kernel_name(?), normalize_kernel_name(?)", [trace_name, ncu_name])[0]
    assert a == b


def test_different_kernels_keep_different_names(fresh_db):
    a, b = rows(fresh_db, "SELECT normalize_kernel_name(?), normalize_kernel_name(?)",
                ["void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, std::array<char*, 2ul> >(int, at::native::AbsFunctor<float>, std::array<char*, 2ul>)",
                 "void at::vectorized_elementwise_kernel<8, at::AbsFunctor<float>, std::array<char *, 2>>(int, T2, T3)"])[0]
    assert a != b


@pytest.fixture(scope="module")
def variant_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("variants") / "v.duckdb"
    con = db.connect(path)
    ingest_file(con, AMP_TRACE)
    ingest_file(con, AMP_NCU_BASE, pair_with=TRACE_RUN)
    yield con, tmp_path_factory.mktemp("csv")
    con.close()


def _variant(con, tmp, name, header, units, data):
    p = write_ncu_csv(tmp / f"{name}.csv.gz", header, units, data)
    r = ingest_file(con, p, pair_with=TRACE_RUN)
    return pairs(con, r.run)


def test_a_removed_kernel_leaves_the_rest_matched(variant_db):
    con, tmp = variant_db
    base = pairs(con, "h100_resnet50_bs64_amp_raw_baseunits")
    header, units, data = read_ncu_csv(AMP_NCU_BASE)
    gone = 400
    got = _variant(con, tmp, "removed", header, units, data[:gone] + data[gone + 1:])
    lost = [t for t, n in base.items() if n == gone]
    same = sum(got.get(t) == n for t, n in base.items() if n != gone)
    assert same >= len(base) - 1 - 2          # at most a neighbour or two re-paired
    assert gone not in got.values()
    assert len(got) == len(base) - 1 or got.get(lost[0]) is not None


def test_an_inserted_kernel_leaves_the_rest_matched(variant_db):
    con, tmp = variant_db
    base = pairs(con, "h100_resnet50_bs64_amp_raw_baseunits")
    header, units, data = read_ncu_csv(AMP_NCU_BASE)
    # IDs x10 keep the launch order; a copy of a GEMM kernel is inserted at position 300
    renum = []
    for r in data:
        r = list(r)
        r[0] = str(int(r[0]) * 10)
        renum.append(r)
    extra = list(next(r for r in data if r[4].startswith("nvjet")))
    extra[0] = str(299 * 10 + 5)
    got = _variant(con, tmp, "inserted", header, units, renum[:300] + [extra] + renum[300:])
    same = sum(got.get(t) == n * 10 for t, n in base.items())
    assert same >= len(base) - 2
    assert 2995 not in got.values()


def test_changed_grid_and_block_still_match_by_name_and_order(variant_db):
    con, tmp = variant_db
    base = pairs(con, "h100_resnet50_bs64_amp_raw_baseunits")
    header, units, data = read_ncu_csv(AMP_NCU_BASE)
    ix = {n: i for i, n in enumerate(header)}
    changed = set(range(5, len(data), 40))
    data2 = []
    for i, r in enumerate(data):
        r = list(r)
        if i in changed:             # as an autotuner choosing another tile in the other process
            r[ix["Grid Size"]] = "(7, 3, 1)"
            r[ix["Block Size"]] = "(96, 1, 1)"
            r[ix["launch__grid_dim_x"]], r[ix["launch__block_dim_x"]] = "7", "96"
        data2.append(r)
    got = _variant(con, tmp, "regridded", header, units, data2)
    assert len(changed) >= 20
    assert all(got.get(t) == n for t, n in base.items())


def test_matching_again_replaces_the_pairs(matched_db):
    n = scalar(matched_db, "SELECT count(*) FROM matches")
    m = match(matched_db, TRACE_RUN, "h100_resnet50_bs64_amp_raw")
    assert m["matched"] == n == scalar(matched_db, "SELECT count(*) FROM matches")


def test_cli_match_and_errors(tmp_path, capsys):
    dbp = str(tmp_path / "m.duckdb")
    assert main(["ingest", str(AMP_TRACE), "--db", dbp]) == 0
    assert main(["ingest", str(AMP_NCU_BASE), "--db", dbp, "--pair-with", "nope"]) == 1
    assert "--pair-with 'nope': no such run" in capsys.readouterr().err
    assert main(["ingest", str(AMP_NCU_BASE), "--db", dbp]) == 0
    capsys.readouterr()
    assert main(["match", TRACE_RUN, "h100_resnet50_bs64_amp_raw_baseunits", "--db", dbp]) == 0
    out = capsys.readouterr().out
    assert "matched 852 of 852 ncu kernels (100.0%)" in out
    assert main(["match", TRACE_RUN, "h100_resnet50_bs64_amp_raw_baseunits", "--db", dbp, "--iteration", "7"]) == 1
    assert "has no iteration 7" in capsys.readouterr().err
    assert main(["match", "h100_resnet50_bs64_amp_raw_baseunits", TRACE_RUN, "--db", dbp]) == 1
    assert "is not a trace run" in capsys.readouterr().err
