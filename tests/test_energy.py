"""Power logs, alignment, energy reports and the calibration fit, against
independent computations from the raw files."""
import csv
import gzip
import json
import random
import re
from datetime import datetime, timezone

import pytest

from conftest import AMP_NCU_BASE, DATA, TORCH, read_ncu_csv, run_name
from tracedb.store import db
from tracedb.query import reports
from tracedb.cli import main
from tracedb.store.sql import rows, scalar
from tracedb.ingest import IngestError, ingest_file

POWER = DATA / "power"
H200_TRACE = DATA / "torch_h200" / "h200_resnet18_bs32_amp.json.gz"
AMP = "h100_resnet50_bs64_amp"
A100 = "NVIDIA A100 (published)"


@pytest.fixture(scope="module")
def energy_db(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("energy") / "e.duckdb")
    for p in TORCH:
        ingest_file(con, p)
        ingest_file(con, POWER / (run_name(p) + ".csv"), pair_with=run_name(p))
    ingest_file(con, AMP_NCU_BASE, pair_with=AMP)
    ingest_file(con, H200_TRACE)
    ingest_file(con, POWER / "h200_nvidia_smi_units.csv.gz", pair_with="h200_resnet18_bs32_amp", options={"tz": "UTC"})
    yield con
    con.close()


def sampler_rows(path):
    with open(path) as f:
        return [{k: int(v) for k, v in r.items()} for r in csv.DictReader(f)]


def integrate(samples, a, b):
    """Trapezoid integral (J) of linearly interpolated power over [a, b]; samples (t_ns, p_w) sorted."""
    def p_at(t):
        for (t0, p0), (t1, p1) in zip(samples, samples[1:]):
            if t0 <= t <= t1:
                return p0 + (p1 - p0) * (t - t0) / (t1 - t0)
    pts = [(a, p_at(a))] + [(t, p) for t, p in samples if a < t < b] + [(b, p_at(b))]
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(pts, pts[1:])) / 1e9


def interp(samples, t):
    for (t0, v0), (t1, v1) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def counter_updates(cnt):
    """The energy counter's update points (issue 50): each sample whose value differs from the
    previous sample's, placed midway between the two."""
    return [(t0 + (t1 - t0) // 2, v1) for (t0, v0), (t1, v1) in zip(cnt, cnt[1:]) if v1 != v0]


def quantile(xs, q):
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)


@pytest.mark.parametrize("path", TORCH, ids=run_name)
def test_fixture_logs_align_and_cover_the_profiled_step(energy_db, path):
    run = run_name(path)
    method, note = rows(energy_db, "SELECT method, note FROM power_alignment WHERE trace_run = ?", [run])[0]
    assert method == "absolute" and "not inside" not in note
    p0, p1 = rows(energy_db, "SELECT min(ts_ns), max(ts_ns) FROM power WHERE run = ?", [run + "_power"])[0]
    s, e = rows(energy_db, "SELECT start_ns, end_ns FROM iterations WHERE run = ?", [run])[0]
    assert p0 < s < e < p1
    raw = sampler_rows(POWER / (run + ".csv"))
    assert (p0, p1) == (raw[0]["timestamp_ns"], raw[-1]["timestamp_ns"])


@pytest.mark.parametrize("path", TORCH, ids=run_name)
def test_energy_summary_matches_independent_integration(energy_db, path):
    run = run_name(path)
    raw = sampler_rows(POWER / (run + ".csv"))
    inst = [(r["timestamp_ns"], r["instant_power_mw"] / 1e3) for r in raw]
    cnt = [(r["timestamp_ns"], r["energy_mj"] / 1e3) for r in raw]
    s, e = rows(energy_db, "SELECT start_ns, end_ns FROM iterations WHERE run = ?", [run])[0]
    r = reports.run(energy_db, "energy_summary", {"run": run}).to_pylist()[0]
    assert r["window_ns"] == e - s and r["power_run"] == run + "_power"
    assert r["energy_integrated_j"] == pytest.approx(integrate(inst, s, e), rel=1e-9)
    up = counter_updates(cnt)
    assert r["energy_counter_j"] == pytest.approx(interp(up, e) - interp(up, s), rel=1e-9)
    idle = quantile([p for _, p in inst], 0.05)
    assert r["idle_power_w"] == pytest.approx(idle)
    assert r["static_j"] == pytest.approx(idle * (e - s) / 1e9)
    assert r["dynamic_j"] == pytest.approx(r["energy_integrated_j"] - r["static_j"])
    assert r["mean_power_w"] == pytest.approx(r["energy_integrated_j"] / ((e - s) / 1e9))
    assert r["samples"] == sum(s <= t <= e for t, _ in inst)
    assert "shorter than the energy counter's update period (100 ms)" in r["note"]   # a ~50-70 ms step


def test_energy_summary_of_a_given_window_and_idle_power(energy_db):
    s, e = rows(energy_db, "SELECT min(ts_ns), max(ts_ns) FROM power WHERE run = ?", [AMP + "_power"])[0]
    a, b = s + 1_000_000_000, s + 3_000_000_000
    r = reports.run(energy_db, "energy_summary", {"run": AMP, "start_ns": str(a), "end_ns": str(b),
                                                   "idle_power_w": "100"}).to_pylist()[0]
    raw = sampler_rows(POWER / f"{AMP}.csv")
    assert r["iteration"] is None and r["window_ns"] == 2_000_000_000
    assert r["energy_integrated_j"] == pytest.approx(integrate([(x["timestamp_ns"], x["instant_power_mw"] / 1e3) for x in raw], a, b))
    assert r["static_j"] == pytest.approx(200.0)
    assert "shorter" not in r["note"] and "idle power: given" in r["note"]
    # over 2 s the counter and the integral agree within a few percent
    assert abs(r["difference_j"]) < 0.05 * r["energy_integrated_j"]
    # one end alone was ignored (end_ns) or gave no energy (start_ns), without a word
    for window, words in [({"end_ns": str(b)}, "start_ns and end_ns go together"),
                          ({"start_ns": str(a)}, "start_ns and end_ns go together"),
                          ({"start_ns": str(b), "end_ns": str(a)}, f"end_ns {a} is not after start_ns {b}")]:
        with pytest.raises(reports.ReportError, match=f"^report energy_summary: {words}"):
            reports.run(energy_db, "energy_summary", {"run": AMP, **window})


def test_nvidia_smi_logs_parse_like_an_independent_reader(energy_db, tmp_path):
    con = energy_db
    with gzip.open(POWER / "h200_nvidia_smi_units.csv.gz", "rt") as f:
        lines = f.read().splitlines()[1:]
    want = []
    for l in lines:
        ts, idx, name, p, pi, sm, mem, temp = [x.strip() for x in l.split(",")]
        t = datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
        num = lambda x: float(re.match(r"[0-9.]+", x).group()) if x[0].isdigit() else None
        want.append((int(t.timestamp() * 1e9) // 1000 * 1000, int(idx), num(p), num(pi), num(sm), num(mem), float(temp)))
    got = rows(con, "SELECT ts_ns, gpu, power_w, instant_power_w, sm_clock_mhz, mem_clock_mhz, temp_c FROM power "
                    "WHERE run = 'h200_nvidia_smi_units' ORDER BY ts_ns")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert abs(g[0] - w[0]) <= 1000 and g[1:] == pytest.approx(w[1:])
    # the header-less, unit-less log of the same run needs its --query-gpu list
    with pytest.raises(IngestError, match="--columns"):
        ingest_file(con, POWER / "h200_nvidia_smi_nounits.csv.gz", options={"tz": "UTC"})
    r = ingest_file(con, POWER / "h200_nvidia_smi_nounits.csv.gz", options={
        "tz": "UTC", "columns": "timestamp,index,name,power.draw,power.draw.instant,clocks.sm,clocks.mem,temperature.gpu"})
    a = rows(con, "SELECT avg(power_w), avg(temp_c), min(ts_ns) FROM power WHERE run = ?", [r.run])[0]
    b = rows(con, "SELECT avg(power_w), avg(temp_c), min(ts_ns) FROM power WHERE run = 'h200_nvidia_smi_units'")[0]
    assert a[:2] == pytest.approx(b[:2], rel=0.01) and abs(a[2] - b[2]) < 50_000_000


def test_nvidia_smi_local_time_zone(fresh_db):
    utc = ingest_file(fresh_db, POWER / "h200_nvidia_smi_units.csv.gz", run="utc", options={"tz": "UTC"})
    ny = ingest_file(fresh_db, POWER / "h200_nvidia_smi_units.csv.gz", run="ny", options={"tz": "America/New_York"})
    assert utc.status == "loaded" and ny.status == "skipped"          # same content: the first one stands
    fresh_db.execute("DELETE FROM power; DELETE FROM runs")
    ingest_file(fresh_db, POWER / "h200_nvidia_smi_units.csv.gz", run="ny", options={"tz": "America/New_York"})
    t_ny = scalar(fresh_db, "SELECT min(ts_ns) FROM power")
    meta = json.loads(scalar(fresh_db, "SELECT metadata FROM runs WHERE run = 'ny'"))
    assert meta["timezone"] == "America/New_York" and meta["utc_offset_ns"] == -5 * 3600 * 10**9
    assert t_ny == 1795307187027000000 + 5 * 3600 * 10**9


@pytest.mark.parametrize("content,words", [
    ("timestamp_ns,power_mw,energy_mj\n", "no samples"),
    ("timestamp_ns,power_mw,energy_mj\n1,abc,3\n", "not a number"),
    ("timestamp_ns,power_mw,energy_mj\nNaN,100,3\n", "not a number"),
    ("timestamp, index, power.draw [W]\n2026/13/45 25:00:00.000, 0, 100 W\n", "not a number"),
    ("#Entity   POWER\nID        W\nGPU 0     61.5\n", "dcgmi dmon output carries no timestamps: give --start-ns"),
    ("time,watts\n1,2\n", "unknown format"),
])
def test_malformed_power_logs_are_refused_and_lose_nothing(fresh_db, tmp_path, content, words):
    ingest_file(fresh_db, POWER / "h100_resnet50_bs64_amp.csv")
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(IngestError, match=words) as e:
        ingest_file(fresh_db, p)
    assert str(p) in str(e.value)
    assert scalar(fresh_db, "SELECT count(*) FROM power") == 364 and scalar(fresh_db, "SELECT count(*) FROM runs") == 1


def test_nan_power_samples_are_null_with_a_warning(fresh_db, tmp_path):
    """A real sampler log with every third sample's power and instant power written
    as nan, and one energy as inf (DuckDB reads both as numbers): the non-finite
    values load as NULL with a warning, the samples left with no power keep their
    other columns, and the integrated energy is an independent trapezoid integral of
    the samples that have a power (in its window, a NULL power summed the two
    trapezoids beside each to nothing: a third of the energy gone; stored as NaN
    before, every sum NaN)."""
    raw = sampler_rows(POWER / "h100_resnet50_bs64_amp.csv")
    lines = (POWER / "h100_resnet50_bs64_amp.csv").read_text().splitlines()
    for i in range(1, len(lines), 3):
        f = lines[i].split(",")
        f[1] = f[3] = "nan"                     # power_mw, instant_power_mw
        lines[i] = ",".join(f)
    f = lines[2].split(","); f[2] = "inf"; lines[2] = ",".join(f)        # energy_mj
    p = tmp_path / "nan_power.csv"
    p.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning) as w:
        r = ingest_file(fresh_db, p)
    said = [str(x.message) for x in w]
    assert any(re.fullmatch(r".*nan_power.csv: 123 samples have a power or energy of NaN or infinity, read as no "
                            r"value \(NULL\).*", m) for m in said), said
    assert any(re.fullmatch(r".*nan_power.csv: 122 of 364 samples have no power \(NaN, empty or \[N/A\]\): the "
                            r"energy is integrated across them.*", m) for m in said), said
    n, power, energy, nan = rows(fresh_db, """
        SELECT count(*), count(power_w), count(energy_j),
               count(*) FILTER (isnan(power_w) OR isnan(energy_j) OR isnan(instant_power_w)
                                OR isinf(power_w) OR isinf(energy_j) OR isinf(instant_power_w)) FROM power""")[0]
    assert (n, power, energy, nan) == (364, 364 - 122, 364 - 1, 0)
    kept = [(x["timestamp_ns"], x["instant_power_mw"] / 1e3) for i, x in enumerate(raw) if i % 3 != 0]
    got = scalar(fresh_db, "SELECT max(cum_j) FROM power_integral WHERE run = ?", [r.run])
    assert got == pytest.approx(integrate(kept, kept[0][0], kept[-1][0]), rel=1e-9)


def test_nvidia_smi_samples_without_power_are_integrated_across(fresh_db, tmp_path):
    """nvidia-smi prints [N/A] where it cannot read a value. A real log with every
    fourth sample's three powers [N/A]: those samples keep their clocks and
    temperature, the energy of a window is an independent trapezoid integral of the
    samples that have a power (kept in the integral, a NULL power summed the two
    trapezoids beside each to nothing), and a log with no power at all is refused."""
    with gzip.open(POWER / "h100_nvidia_smi_3power.csv.gz", "rt") as f:
        lines = f.read().splitlines()
    samples = []
    for i in range(1, len(lines)):
        f = [x.strip() for x in lines[i].split(",")]
        t = datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
        if i % 4 == 0:
            f[3] = f[4] = f[5] = "[N/A]"
        else:
            samples.append((int(t.timestamp() * 1e6) * 1000, float(f[4].split()[0])))    # instant power
        lines[i] = ", ".join(f)
    p = tmp_path / "smi_na.csv"
    p.write_text("\n".join(lines) + "\n")
    n = len(lines) - 1
    with pytest.warns(UserWarning, match=rf"smi_na.csv: {n // 4} of {n} samples have no power"):
        r = ingest_file(fresh_db, p, options={"tz": "UTC"})
    assert rows(fresh_db, "SELECT count(*), count(power_w), count(sm_clock_mhz), count(temp_c) FROM power "
                          "WHERE run = ?", [r.run])[0] == (n, n - n // 4, n, n)
    got = scalar(fresh_db, "SELECT max(cum_j) FROM power_integral WHERE run = ?", [r.run])
    assert got == pytest.approx(integrate(samples, samples[0][0], samples[-1][0]), rel=1e-9)
    none = tmp_path / "smi_none.csv"
    none.write_text("\n".join(lines[:1] + [l for i, l in enumerate(lines) if i % 4 == 0 and i]) + "\n")
    with pytest.raises(IngestError, match="smi_none.csv.*holds no samples with a power"):
        ingest_file(fresh_db, none, options={"tz": "UTC"})


def test_cut_off_nvidia_smi_log_keeps_whole_lines(fresh_db, tmp_path):
    with gzip.open(POWER / "h200_nvidia_smi_units.csv.gz", "rt") as f:
        text = f.read()
    p = tmp_path / "cut.csv"
    p.write_text(text[: text.index("\n", 2000) + 30])
    r = ingest_file(fresh_db, p, options={"tz": "UTC"})
    whole = text[: text.index("\n", 2000)].count("\n")
    assert scalar(fresh_db, "SELECT count(*) FROM power") == whole
    assert json.loads(scalar(fresh_db, "SELECT metadata FROM runs WHERE run = ?", [r.run]))["truncated_last_line"]


def test_kernel_energy_adds_up_and_matches_integration(energy_db):
    k = reports.run(energy_db, "kernel_energy", {"run": AMP}).to_pylist()
    layers = reports.run(energy_db, "kernel_energy", {"run": AMP, "group_by": "layer"}).to_pylist()
    assert sum(r["energy_j"] for r in k) == pytest.approx(sum(r["energy_j"] for r in layers))
    assert {r["layer_type"] for r in layers} >= {"convolution", "normalization"}
    raw = sampler_rows(POWER / f"{AMP}.csv")
    inst = [(r["timestamp_ns"], r["instant_power_mw"] / 1e3) for r in raw]
    spans = dict((kid, (s, d)) for kid, s, d in rows(energy_db, "SELECT kernel_id, ts_ns, dur_ns FROM kernels WHERE run = ?", [AMP]))
    for r in k[:20]:
        s, d = spans[r["kernel_id"]]
        assert r["energy_j"] == pytest.approx(integrate(inst, s, s + d), rel=1e-6)
    with pytest.raises(reports.ReportError, match="one of kernel, layer"):
        reports.run(energy_db, "kernel_energy", {"run": AMP, "group_by": "op"})


def synthetic_points(eps_pj, shapes, noise=0.01, seed=1):
    """Points on energy = eps x accesses + offset with relative noise; eps per shape."""
    rnd = random.Random(seed)
    out = []
    for (tpb, blocks), f in shapes.items():
        for acc in (1e8, 2e8, 4e8, 8e8):
            for _ in range(3):
                e = eps_pj * f * 1e-12 * acc + 0.05
                out.append({"gpu": "Test GPU", "level": "l2", "threads_per_block": tpb, "blocks": blocks,
                            "accesses": acc, "energy_j": e * (1 + rnd.uniform(-noise, noise)), "valid": True})
    return out


def test_calibration_fit_reproduces_known_slopes(fresh_db, tmp_path):
    shapes = {(32, 1): 3.0, (256, 132): 1.2, (1024, 132): 1.0}
    pts = synthetic_points(400.0, shapes)
    pts.append({"gpu": "Test GPU", "level": "l2", "threads_per_block": 1024, "blocks": 132, "accesses": 1e9,
                "energy_j": 99.0, "valid": False})      # a point that failed its safety check
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({"cuda_bench": {"gpu": "Test GPU"}, "points": pts}))
    ingest_file(fresh_db, p)
    fits = {(r["threads_per_block"], r["blocks"]): r for r in
            reports.run(fresh_db, "calibration_fit", {"gpu": "Test GPU"}).to_pylist()}
    for shape, f in shapes.items():
        assert fits[shape]["eps_pj"] == pytest.approx(400 * f, rel=0.02)
        assert fits[shape]["r2"] > 0.99 and fits[shape]["n_points"] == 12
    assert [s for s, r in fits.items() if r["lower_bound"]] == [(1024, 132)]
    # the same points as CSV give the same fits
    q = tmp_path / "cal.csv"
    with open(q, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(pts[0]))
        w.writeheader()
        w.writerows(pts)
    fresh_db.execute("DELETE FROM calibration; DELETE FROM runs")
    ingest_file(fresh_db, q)
    again = {(r["threads_per_block"], r["blocks"]): r["eps_pj"] for r in
             reports.run(fresh_db, "calibration_fit", {"gpu": "Test GPU"}).to_pylist()}
    assert again == {s: r["eps_pj"] for s, r in fits.items()}


def test_bad_calibration_files(fresh_db, tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("gpu,level,threads_per_block,blocks,accesses,energy_j\nX,l3,32,1,100,1\n")
    with pytest.raises(IngestError, match="level other than"):
        ingest_file(fresh_db, p)
    p.write_text("gpu,level,threads_per_block,accesses,energy_j\nX,l2,32,100,1\n")
    with pytest.raises(IngestError, match="lack the columns blocks"):
        ingest_file(fresh_db, p)
    p.write_text("gpu,level,threads_per_block,blocks,accesses,energy_j\nX,l2,32,1,100,lots\n")
    with pytest.raises(IngestError, match="non-numeric"):
        ingest_file(fresh_db, p)


def test_energy_breakdown_with_the_reference_calibration(energy_db):
    with pytest.raises(reports.ReportError, match="no calibration for GPU NVIDIA H100 80GB HBM3"):
        reports.run(energy_db, "energy_breakdown", {"run": AMP})
    t = {r["component"]: r for r in reports.run(energy_db, "energy_breakdown",
                                                 {"run": AMP, "calibration_gpu": A100}).to_pylist()}
    assert list(t) == ["static", "shared", "l1", "l2", "dram", "dynamic_rest", "total"]
    s = reports.run(energy_db, "energy_summary", {"run": AMP}).to_pylist()[0]
    assert t["total"]["energy_j"] == pytest.approx(s["energy_integrated_j"])
    assert t["static"]["energy_j"] == pytest.approx(s["static_j"])
    assert sum(t[c]["energy_j"] for c in ("static", "shared", "l1", "l2", "dram", "dynamic_rest")) == pytest.approx(t["total"]["energy_j"])
    header, _, data = read_ncu_csv(AMP_NCU_BASE)
    ix = {n: i for i, n in enumerate(header)}
    ids = {n for (n,) in rows(energy_db, "SELECT ncu_kernel_id FROM matches WHERE trace_run = ?", [AMP])}
    tot = lambda *ms: sum(float(r[ix[m]].replace(",", "")) for r in data if int(r[ix["ID"]]) in ids for m in ms)
    assert t["dram"]["accesses"] == tot("dram__sectors_read.sum", "dram__sectors_write.sum")
    assert t["l2"]["accesses"] == tot("lts__t_sectors_op_read_lookup_hit.sum")
    assert t["shared"]["accesses"] == tot("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                                          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")
    assert t["dram"]["energy_j"] == pytest.approx(t["dram"]["accesses"] * 2090e-12)
    assert "L2 write hits" in t["dram"]["note"] and "published reference" in t["dram"]["note"]
    assert t["dram"]["energy_j"] > t["l2"]["energy_j"] > t["l1"]["energy_j"]


def test_power_log_without_nvml_says_so(tmp_path, capsys):
    try:
        import pynvml
        pynvml.nvmlInit()
        pytest.skip("NVML works here: tests/test_power_log_device.py covers it")
    except Exception:
        pass
    assert main(["power-log", "-o", str(tmp_path / "p.csv"), "--", "true"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NVML" in err[0]


def test_dcgmi_dmon_log_with_given_start_and_interval(fresh_db, tmp_path):
    """A small synthetic dmon log (two GPUs, an N/A): timestamps from --start-ns and --interval-ms."""
    p = tmp_path / "dmon.txt"
    p.write_text("#Entity   POWER     TOTEC       SMCLK  MMCLK  TMPTR\n"
                 "ID        W         mJ          MHZ    MHZ    C\n"
                 "GPU 0     100.5     1000        1980   2619   40\n"
                 "GPU 1     80.0      2000        345    2619   35\n"
                 "GPU 0     300.0     1100        1980   2619   41\n"
                 "GPU 1     N/A       2050        345    2619   35\n")
    r = ingest_file(fresh_db, p, options={"start_ns": 10**18, "interval_ms": 100})
    got = rows(fresh_db, "SELECT gpu, ts_ns, power_w, energy_j, sm_clock_mhz, temp_c FROM power WHERE run = ? ORDER BY gpu, ts_ns", [r.run])
    assert got == [(0, 10**18, 100.5, 1.0, 1980.0, 40.0), (0, 10**18 + 10**8, 300.0, 1.1, 1980.0, 41.0),
                   (1, 10**18, 80.0, 2.0, 345.0, 35.0), (1, 10**18 + 10**8, None, 2.05, 345.0, 35.0)]
    assert json.loads(scalar(fresh_db, "SELECT metadata FROM runs WHERE run = ?", [r.run]))["format"] == "dcgm"


def test_power_log_output_from_the_gpu_machine(fresh_db):
    """cuda_bench/results/nvidia_h200/app/power.csv.gz was written by `tracedb power-log` on the H200."""
    p = DATA.parent.parent / "cuda_bench" / "results" / "nvidia_h200" / "app" / "power.csv.gz"
    r = ingest_file(fresh_db, p)
    phases = dict(rows(fresh_db, "SELECT phase, count(*) FROM power WHERE run = ? GROUP BY 1", [r.run]))
    assert set(phases) == {"idle_before", "run", "idle_after"} and phases["run"] > 1000
    idle, src = rows(fresh_db, "SELECT idle_power_w, idle_source FROM power_sensors WHERE run = ?", [r.run])[0]
    with gzip.open(p, "rt") as f:
        raw = list(csv.DictReader(f))
    idle_p = sorted(float(x["instant_power_mw"]) / 1e3 for x in raw if x["phase"] != "run")
    n = len(idle_p)
    med = idle_p[n // 2] if n % 2 else (idle_p[n // 2 - 1] + idle_p[n // 2]) / 2
    assert src == "median of the idle phases" and idle == pytest.approx(med)
    # samples every ~10 ms as asked (--interval-ms 10)
    ts = [int(x["timestamp_ns"]) for x in raw]
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
    assert 8e6 < gaps[len(gaps) // 2] < 13e6


def test_alignment_of_a_trace_without_absolute_time(fresh_db):
    """TensorFlow traces carry no epoch time: --offset-ns, else the log's first sample
    is put at the trace's first event, and the alignment says so."""
    from conftest import TF
    trace = next(p for p in TF if "sync_lenet" in p.name and "async" not in p.name)
    t = ingest_file(fresh_db, trace)
    t0 = scalar(fresh_db, "SELECT min(ts_ns) FROM events WHERE run = ? AND ph <> 'M'", [t.run])
    p0 = sampler_rows(POWER / "h100_resnet50_bs64_amp.csv")[0]["timestamp_ns"]
    r = ingest_file(fresh_db, POWER / "h100_resnet50_bs64_amp.csv", pair_with=t.run)
    method, off, note = rows(fresh_db, "SELECT method, offset_ns, note FROM power_alignment WHERE power_run = ?", [r.run])[0]
    assert method == "window-start" and off == t0 - p0 and "no absolute time" in note
    s = reports.run(fresh_db, "energy_summary", {"run": t.run}).to_pylist()[0]
    assert "aligned: window-start" in s["note"] and s["energy_integrated_j"] > 0
    fresh_db.execute("DELETE FROM power_alignment")
    from tracedb.ingest import power
    msg = power.align(fresh_db, r.run, t.run, offset_ns=t0 - p0 + 500_000_000)
    assert "offset" in msg
    s2 = reports.run(fresh_db, "energy_summary", {"run": t.run}).to_pylist()[0]
    assert "aligned: offset" in s2["note"] and s2["energy_integrated_j"] != s["energy_integrated_j"]
