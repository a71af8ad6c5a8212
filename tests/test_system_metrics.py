"""System metrics (METHOD.md section 9): memory events, occupancy and copy args of
the trace's own activity, NVML/nvidia-smi system columns, host samples, and the
reports over them, against independent computations from the raw files."""
import csv
import gzip
import json
import subprocess
import sys
from decimal import Decimal

import pytest

from conftest import AMP_NCU, AMP_TRACE, raw_trace, read_ncu_csv
from tracedb.store import db
from tracedb.query import reports
from tracedb.store.sql import rows, scalar
from tracedb.ingest import IngestError, ingest_file

BASE = 1_700_000_000_000_000_000
GIB = 1 << 30


def q(con, name, **params):
    return reports.run(con, name, params).to_pylist()


# -- a small synthetic trace: two steps, one kernel and one pageable copy each,
#    three allocator events per step; numbers chosen so every figure is checkable
def synthetic_trace():
    ev = []
    for n, t0 in ((1, 0.0), (2, 1000.0)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                   "ts": t0, "dur": 900.0, "args": {}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": t0 + 10, "dur": 5.0, "args": {"correlation": n * 10 + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k_conv", "pid": 0, "tid": 7, "ts": t0 + 20, "dur": 400.0,
                   "args": {"correlation": n * 10 + 1, "stream": 7, "device": 0, "blocks per SM": 2.0 * n,
                            "warps per SM": 8.0, "est. achieved occupancy %": 25 * n,
                            "grid": [264, 1, 1], "block": [128, 1, 1]}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1,
                   "ts": t0 + 12, "dur": 5.0, "args": {"correlation": n * 10 + 2}})
        ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 8,
                   "ts": t0 + 300, "dur": 200.0, "args": {"correlation": n * 10 + 2, "stream": 8, "device": 0,
                                                          "bytes": 4_000_000, "memory bandwidth (GB/s)": 20.0}})
        alloc = 1000 * n
        for i, (dt, b) in enumerate(((30, 5_000_000), (100, 3_000_000 * n), (500, -3_000_000))):
            alloc += b
            ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": t0 + dt, "args": {"Total Reserved": 20_000_000 + n, "Total Allocated": alloc,
                                               "Bytes": b, "Addr": 100 + i, "Device Type": 1, "Device Id": 0}})
    ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 50.0,
               "args": {"Total Reserved": 0, "Total Allocated": 64, "Bytes": 64, "Addr": 9, "Device Type": 0,
                        "Device Id": -1}})
    return {"schemaVersion": 1, "baseTimeNanoseconds": BASE, "batch_size": "16",
            "deviceProperties": [{"id": 0, "name": "Synthetic GPU", "totalGlobalMem": 100_000_000,
                                  "maxThreadsPerMultiprocessor": 2048, "warpSize": 32, "numSms": 132}],
            "traceEvents": ev}


@pytest.fixture(scope="module")
def syn(tmp_path_factory):
    d = tmp_path_factory.mktemp("syn")
    path = d / "syn.json"
    path.write_text(json.dumps(synthetic_trace()))
    con = db.connect(d / "s.duckdb")
    ingest_file(con, path)
    yield con
    con.close()


def test_memory_events_are_the_traces_memory_events(syn):
    raw = [e for e in synthetic_trace()["traceEvents"] if e["name"] == "[memory]"]
    got = rows(syn, "SELECT ts_ns - ?, device_type, device, bytes, addr, allocated_bytes, reserved_bytes "
                    "FROM memory_events ORDER BY event_id", [BASE])
    want = [(int(e["ts"] * 1000), {1: "cuda", 0: "cpu"}[e["args"]["Device Type"]], e["args"]["Device Id"],
             e["args"]["Bytes"], e["args"]["Addr"], e["args"]["Total Allocated"], e["args"]["Total Reserved"])
            for e in raw]
    assert sorted(got) == sorted(want)


def test_memory_summary_iteration_convention_and_peaks(syn):
    steady = q(syn, "memory_summary")
    assert [r["iteration"] for r in steady] == [1]        # both last 900 us: the first is steady
    every = q(syn, "memory_summary", iteration="all")
    assert [r["iteration"] for r in every] == [1, 2, None]
    assert q(syn, "memory_summary", iteration="2") == [every[1]]
    raw = [e for e in synthetic_trace()["traceEvents"] if e["name"] == "[memory]" and e["args"]["Device Type"] == 1]
    for r, (a, b) in zip(every, ((0, 900), (1000, 1900), (0, 1900))):
        inside = [e["args"] for e in raw if a <= e["ts"] <= b]
        before = [e["args"] for e in raw if e["ts"] <= a]
        start = before[-1]["Total Allocated"] if before else inside[0]["Total Allocated"] - inside[0]["Bytes"]
        peak = max(x["Total Allocated"] for x in inside)
        reserved = max(x["Total Reserved"] for x in inside)
        assert (r["start_allocated_bytes"], r["peak_allocated_bytes"], r["peak_reserved_bytes"]) == \
               (start, peak, reserved)
        assert r["device_total_bytes"] == 100_000_000
        assert r["device_memory_pct"] == pytest.approx(100 * reserved / 100_000_000)
        assert r["est_batch_scale_x"] == pytest.approx((0.9e8 - start) / (peak - start))
        assert r["batch_size"] == 16 and r["memory_events"] == len(inside)
    assert every[2]["samples_per_s"] == pytest.approx(16 * 2 / 1.9e-3)
    assert "over 8x" in every[0]["note"]              # a straight line says 28x: stated as over 8x (issue 50)
    with pytest.raises(reports.ReportError, match="iteration must be an iteration number or all"):
        q(syn, "memory_summary", iteration="steady")


def test_memory_timeline_follows_the_allocator(syn):
    t = q(syn, "memory_timeline", iteration="all")
    assert len(t) == 6 and all(r["device"] == 0 for r in t)          # the CPU event is left out
    assert [r["allocated_bytes"] for r in t] == [5_001_000, 8_001_000, 5_001_000, 5_002_000, 11_002_000, 8_002_000]
    assert [r["iteration"] for r in t] == [1, 1, 1, 2, 2, 2]
    assert t[0]["rel_ns"] == 30_000
    assert [r["rel_ns"] for r in q(syn, "memory_timeline", iteration="2")] == [30_000, 100_000, 500_000]


def test_transfers_direction_bytes_bandwidth_and_overlap(syn):
    t = q(syn, "transfers", iteration="all")
    assert [(r["iteration"], r["direction"], r["src_memory"], r["dst_memory"], r["copies"], r["bytes"])
            for r in t] == [(1, "HtoD", "Pageable", "Device", 1, 4_000_000),
                            (2, "HtoD", "Pageable", "Device", 1, 4_000_000),
                            (None, "HtoD", "Pageable", "Device", 2, 8_000_000)]
    # the copy runs 300-500 us, the kernel 20-420 us: 120 of its 200 us overlap compute
    assert t[0]["gb_per_s"] == pytest.approx(4e6 / 200e3) and t[0]["overlap_ns"] == 120_000
    assert t[0]["overlap_pct"] == pytest.approx(60) and t[0]["iteration_share_pct"] == pytest.approx(200 / 900 * 100)
    assert t[2]["overlap_ns"] == 240_000 and t[2]["iteration_share_pct"] == pytest.approx(400 / 1900 * 100)


def test_occupancy_is_kernel_time_weighted(syn):
    t = q(syn, "occupancy", iteration="all")
    assert [(r["iteration"], r["blocks_per_sm"], r["est_occupancy_pct"]) for r in t] == \
           [(1, 2.0, 25.0), (2, 4.0, 50.0), (None, 3.0, 37.5)]
    assert t[2]["matched_kernels"] == 0 and t[2]["ncu_achieved_occupancy_pct"] is None


# -- the real H100 trace and its ncu report

@pytest.fixture(scope="module")
def amp(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("amp") / "a.duckdb")
    ingest_file(con, AMP_TRACE)
    ingest_file(con, AMP_NCU, pair_with="h100_resnet50_bs64_amp")
    yield con
    con.close()


def test_activity_args_are_the_traces_args(amp):
    raw = {i: e for i, e in enumerate(raw_trace(AMP_TRACE)["traceEvents"])
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    got = {r[0]: r[1:] for r in rows(amp, "SELECT kernel_id, blocks_per_sm, warps_per_sm, est_occupancy_pct, "
                                          "copy_direction, src_memory, dst_memory, copy_bytes FROM activity_args")}
    assert set(got) == set(raw)
    names = {"Memcpy DtoD (Device -> Device)": ("DtoD", "Device", "Device"),
             "Memcpy DtoH (Device -> Pinned)": ("DtoH", "Device", "Pinned"), "Memset (Device)": ("Memset", None, "Device")}
    for i, e in raw.items():
        a = e["args"]
        num = lambda k: None if k not in a else float(a[k])     # noqa: E731
        want = (num("blocks per SM"), num("warps per SM"), num("est. achieved occupancy %"),
                *(names[e["name"]] if e["cat"] != "kernel" else (None, None, None)), a.get("bytes"))
        assert got[i] == pytest.approx(want), e["name"]


def test_occupancy_per_layer_against_raw_args_and_ncu_launch_limits(amp):
    raw = raw_trace(AMP_TRACE)["traceEvents"]
    layer = dict(rows(amp, "SELECT kernel_id, layer_type FROM kernel_layers k JOIN kernels USING (run, kernel_id) "
                           "WHERE kind = 'kernel' AND iteration = 2"))
    w, t = {}, {}
    for i, lt in layer.items():
        a = raw[i]["args"]
        d = Decimal(raw[i]["dur"]) * 1000
        w[lt] = w.get(lt, 0) + float(a["est. achieved occupancy %"]) * float(d)
        t[lt] = t.get(lt, 0) + float(d)
    got = {r["layer_type"]: r for r in q(amp, "occupancy")}
    assert set(got) == set(w)
    for lt, r in got.items():
        assert r["est_occupancy_pct"] == pytest.approx(w[lt] / t[lt])
    # theoretical occupancy of each ncu kernel from the CSV's launch limits (64 warps per SM on the H100)
    header, _, data = read_ncu_csv(AMP_NCU)
    col = {h: i for i, h in enumerate(header)}
    lim = ("blocks", "registers", "shared_mem", "warps", "barriers")
    theo = {int(r[col["ID"]]): 100 * min(float(r[col[f"launch__occupancy_limit_{x}"]]) for x in lim)
            * -(-int(r[col["launch__block_size"]]) // 32) / 64 for r in data}
    got_theo = dict(rows(amp, "SELECT kernel_id, theoretical_occupancy_pct FROM ncu_kernel_occupancy"))
    assert got_theo == pytest.approx(theo)
    matched = sum(r["matched_kernels"] for r in got.values())
    assert matched == 852 and all(r["ncu_theoretical_occupancy_pct"] is not None for r in got.values())


def test_memory_reports_say_what_is_missing(amp):
    with pytest.raises(reports.ReportError, match="profile_memory=True"):
        q(amp, "memory_summary")


# -- sampler and nvidia-smi system columns, host samples

def test_sampler_system_columns_go_to_gpu_samples(fresh_db, tmp_path):
    p = tmp_path / "s_power.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp_ns", "gpu", "power_mw", "energy_mj", "instant_power_mw", "sm_clock_mhz",
                    "mem_clock_mhz", "temp_c", "phase", "gpu_util_pct", "mem_util_pct", "mem_used_bytes",
                    "mem_total_bytes", "throttle_reasons", "pcie_tx_kb_per_s", "pcie_rx_kb_per_s"])
        w.writerow([BASE, 0, 100000, 5000, 99000, 1980, 2619, 40, "run", 97, 33, 5 * GIB, 80 * GIB, 4, 10, 20])
        w.writerow([BASE + 10**7, 0, 100000, 5100, 99000, 1755, 2619, 41, "run", 98, 34, 6 * GIB, 80 * GIB, 0, "", ""])
    r = ingest_file(fresh_db, p)
    got = rows(fresh_db, "SELECT gpu_util_pct, mem_util_pct, mem_used_bytes, mem_total_bytes, throttle_reasons, "
                         "pcie_tx_bytes_per_s, pcie_rx_bytes_per_s, throttle_reason_names(throttle_reasons) "
                         "FROM gpu_samples WHERE run = ? ORDER BY ts_ns", [r.run])
    assert got == [(97.0, 33.0, 5 * GIB, 80 * GIB, 4, 10240.0, 20480.0, "sw_power_cap"),
                   (98.0, 34.0, 6 * GIB, 80 * GIB, 0, None, None, "none")]


def test_power_fixtures_without_system_columns_write_no_gpu_samples(fresh_db):
    from conftest import DATA
    ingest_file(fresh_db, DATA / "power" / "h100_resnet50_bs64_amp.csv")
    assert scalar(fresh_db, "SELECT count(*) FROM gpu_samples") == 0


def test_nvidia_smi_utilization_and_memory_columns(fresh_db, tmp_path):
    p = tmp_path / "smi.csv"
    p.write_text("timestamp, index, power.draw [W], utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
                 "memory.total [MiB], clocks_event_reasons.active\n"
                 "2026/11/22 00:26:27.027, 0, 150.09 W, 45 %, 12 %, 1024 MiB, 81559 MiB, 0x0000000000000001\n"
                 "2026/11/22 00:26:27.049, 0, 250.00 W, 100 %, 60 %, 2048 MiB, 81559 MiB, 0x0000000000000004\n")
    r = ingest_file(fresh_db, p, options={"tz": "UTC"})
    got = rows(fresh_db, "SELECT gpu_util_pct, mem_util_pct, mem_used_bytes, mem_total_bytes, throttle_reasons "
                         "FROM gpu_samples WHERE run = ? ORDER BY ts_ns", [r.run])
    assert got == [(45.0, 12.0, 1024 << 20, 81559 << 20, 1), (100.0, 60.0, 2048 << 20, 81559 << 20, 4)]


def host_csv(path, rows_):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp_ns", "cpu", "cpu_util_pct", "rss_bytes"])
        w.writerows(rows_)


def test_system_metrics_and_timeline_on_the_synthetic_run(syn, tmp_path):
    p = tmp_path / "syn_power.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp_ns", "gpu", "power_mw", "sm_clock_mhz", "temp_c", "gpu_util_pct", "mem_util_pct",
                    "mem_used_bytes", "throttle_reasons"])
        for i in range(0, 200):            # every 10 us over both steps
            w.writerow([BASE + i * 10_000, 0, 300_000 + 1000 * (i % 2), 1980 - 15 * (i % 3), 50 + i % 5,
                        40 + i % 10, 20, 2 * GIB + i, 4 if i == 150 else 0])
    host = tmp_path / "syn_host.csv"
    host_csv(host, [r for i in range(40) for r in ([BASE + i * 50_000, "", 50.0, 10**6 + i],
                                                    [BASE + i * 50_000, 0, 90.0, ""],
                                                    [BASE + i * 50_000, 1, 10.0 + i, ""])])
    ingest_file(syn, p, pair_with="syn")
    ingest_file(syn, host, pair_with="syn")
    t = q(syn, "system_metrics", iteration="all")
    assert [r["iteration"] for r in t] == [1, 2, None]
    for r, (a, b) in zip(t, ((0, 900_000), (1_000_000, 1_900_000), (0, 1_900_000))):
        s = [i for i in range(200) if a <= i * 10_000 <= b]
        h = [i for i in range(40) if a <= i * 50_000 <= b]
        assert r["gpu_samples"] == len(s) and r["host_samples"] == len(h)
        assert r["nvml_gpu_util_pct"] == pytest.approx(sum(40 + i % 10 for i in s) / len(s))
        assert r["sm_clock_min_mhz"] == 1950 and r["power_mean_w"] == pytest.approx(
            sum(300 + (i % 2) for i in s) / len(s))
        assert r["mem_used_max_bytes"] == 2 * GIB + max(s) and r["temp_max_c"] == max(50 + i % 5 for i in s)
        assert r["cpu_util_pct"] == 50 and r["cpu_busiest_core_pct"] == pytest.approx(
            max(90, sum(10 + i for i in h) / len(h)))
        assert r["rss_max_bytes"] == 10**6 + max(h)
    assert [r["throttle_reasons"] for r in t] == ["none", "sw_power_cap", "sw_power_cap"]
    # the trace's kernel-busy share: the 400 us kernel of each 900 us step
    assert t[0]["kernel_busy_pct"] == pytest.approx(400 / 900 * 100)
    assert t[0]["kernel_busy_pct"] == pytest.approx(q(syn, "gpu_utilization")[0]["gpu_util_pct"])
    assert "aligned: absolute" in t[0]["note"] and "shorter than NVML" in t[0]["note"]
    tl = q(syn, "system_timeline", iteration="2")
    assert {r["quantity"] for r in tl} == {"power_w", "sm_clock_mhz", "gpu_util_pct", "mem_util_pct",
                                           "mem_used_gib", "temp_c", "cpu_util_pct"}
    assert all(r["iteration"] == 2 and 0 <= r["rel_ns"] <= 900_000 for r in tl)
    assert sum(r["quantity"] == "power_w" for r in tl) == 91


def test_bad_host_log_is_refused_in_one_line(fresh_db, tmp_path):
    p = tmp_path / "h_host.csv"
    host_csv(p, [[BASE, "", 10, 5], ["soon", "", 10, 5]])
    with pytest.raises(IngestError, match=r"h_host.csv: 1 of 2 host samples have a timestamp"):
        ingest_file(fresh_db, p)
    assert scalar(fresh_db, "SELECT count(*) FROM runs") == 0


# -- capture without its tools: clear one-line errors

def tracedb(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_capture_errors_are_one_line(tmp_path):
    r = tracedb("capture", "-o", str(tmp_path / "c"), "--ncu", "--ncu-path", "no-such-ncu", "--", "true")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "needs Nsight Compute's `no-such-ncu` command" in r.stderr
    r = tracedb("capture", "-o", str(tmp_path / "c"), "--", "true")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "did not run a tracedb.capture(...) block" in r.stderr
    r = tracedb("capture", "-o", str(tmp_path / "c"), "--", sys.executable, "-c", "import sys; sys.exit(3)")
    assert r.returncode == 1 and "exited with status 3" in r.stderr
    r = tracedb("capture", "-o", str(tmp_path / "c"))
    assert r.returncode == 1 and "give the command after --" in r.stderr


def test_capture_without_torch_says_so(tmp_path):
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed here: tests/test_capture_device.py covers the capture")
    except ImportError:
        pass
    import tracedb
    from tracedb.capture.session import CaptureError
    with pytest.raises(CaptureError, match="needs PyTorch"):
        with tracedb.capture(tmp_path / "c"):
            pass
    script = tmp_path / "train.py"
    script.write_text("import tracedb\nwith tracedb.capture('x') as cap:\n    cap.step()\n")
    r = tracedb_cli_capture(tmp_path, script)
    assert r.returncode == 1 and "needs PyTorch" in r.stderr


def tracedb_cli_capture(tmp_path, script):
    return tracedb("capture", "-o", str(tmp_path / "out"), "--", sys.executable, str(script))


def test_sampler_without_nvml_says_so(tmp_path):
    from tracedb.capture.power_log import PowerLogError, Sampler
    try:
        import pynvml
        pynvml.nvmlInit()
        pytest.skip("NVML works here: tests/test_capture_device.py covers the sampler")
    except Exception:
        pass
    with pytest.raises(PowerLogError, match="NVML"):
        Sampler(tmp_path / "p.csv")


def test_host_sampler_faster_than_the_kernels_clock_writes_no_empty_utilization(tmp_path):
    """Sampled every 1 ms, faster than /proc/stat's jiffies move (or late and catching
    up on a busy machine), two reads can see no time pass: such a sample is skipped,
    not written with an empty whole-machine utilization (408 of 500 were, before; a
    single core's row can still be empty where that core's clock did not move)."""
    import time
    from tracedb.capture.host_log import HostSampler
    s = HostSampler(tmp_path / "fast_host.csv", interval_ms=1).start()
    time.sleep(0.3)
    s.stop()
    with open(tmp_path / "fast_host.csv") as f:
        rows = list(csv.DictReader(f))
    whole = [x for x in rows if x["cpu"] == ""]
    assert whole and all(0 <= float(x["cpu_util_pct"]) <= 100 for x in whole)
    assert len({x["timestamp_ns"] for x in rows}) == len(whole)      # every sample has its whole-machine row


def test_host_sampler_writes_what_the_reader_reads(fresh_db, tmp_path):
    import time
    from tracedb.capture.host_log import HostSampler
    s = HostSampler(tmp_path / "h_host.csv", interval_ms=20).start()
    time.sleep(0.15)
    s.stop()
    with open(tmp_path / "h_host.csv") as f:
        raw = list(csv.DictReader(f))
    r = ingest_file(fresh_db, tmp_path / "h_host.csv")
    assert r.kind == "host" and scalar(fresh_db, "SELECT count(*) FROM host_samples") == len(raw) > 0
    whole = [x for x in raw if x["cpu"] == ""]
    assert all(0 <= float(x["cpu_util_pct"]) <= 100 and int(x["rss_bytes"]) > 0 for x in whole)
    assert scalar(fresh_db, "SELECT max(rss_bytes) FROM host_samples") == max(int(x["rss_bytes"]) for x in whole)
