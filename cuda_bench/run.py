"""`python -m tracedb.cuda_bench OUT_DIR` (or `tracedb calibrate`): build, identify
the array size of each level with ncu hit rates, size and run the NVML-timed
sweep, check each level with ncu, and write raw output, points, checks and
fits (the fits come from the same SQL view `tracedb query calibration_fit` uses).

Clocks are never changed: ncu runs with --clock-control none, and the clocks
seen are recorded per point."""
import argparse
import csv
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import build, plan, results

METRICS = ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",
           "lts__t_sectors_op_read.sum", "lts__t_sectors_op_read_lookup_hit.sum",
           "dram__sectors_read.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ncu_pair(exe, level, size, tpb, blocks, warm, meas, spacing, prime=False):
    """Counters of the measurement loop alone: (warm-up + measurement) - warm-up, from ncu."""
    from ..store import db
    from ..ingest import ingest_file
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    cmd = [ncu, "--clock-control", "none", "--kernel-name", "regex:chase", "--csv", "--page", "raw", "--print-units", "base",
           "--metrics", ",".join(METRICS), str(exe), "pair", level, str(size), str(tpb), str(blocks),
           str(warm), str(meas), str(spacing), str(int(prime))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ncu failed: {out.stderr.strip()[-300:]}")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "pair.csv"
        p.write_text(out.stdout)
        con = db.connect(Path(d) / "c.duckdb")
        ingest_file(con, p, run="pair")
        vals = {}
        for kid, metric, value in con.execute(
                "SELECT kernel_id, metric, value FROM counters WHERE run = 'pair' ORDER BY kernel_id").fetchall():
            vals.setdefault(kid, {})[metric] = value or 0.0
        con.close()
    ids = sorted(vals)[-2:]
    if len(ids) != 2:
        raise RuntimeError(f"ncu profiled {len(vals)} kernels, expected 2 or 3")
    return {m: vals[ids[1]].get(m, 0.0) - vals[ids[0]].get(m, 0.0) for m in METRICS}


def identify(exe, n_sm, tpb=1):
    """Hit rate of the measurement loop per candidate size: one thread per SM, so
    a sector is read again only after the whole ring (L1: the thread's own walk;
    L2: all SMs' walks, spread over the ring) - the capacity test."""
    rows = []
    for level in ("l1", "l2", "dram", "shared"):
        for size in plan.CANDIDATES[level]:
            steps = plan.ring_steps(size)
            meas = min(steps, 1 << 15)
            meas -= meas % 8
            spacing = plan.STRIDE_ELEMS * max(1, steps // n_sm)
            warm = steps if level == "l1" else 0
            d = ncu_pair(exe, level, size, tpb, n_sm, warm, meas, spacing, prime=level == "l2")
            c = results.check(level, d, n_sm, tpb, meas)
            rows.append({"level": level, "array_bytes": size, "threads_per_block": tpb, "blocks": n_sm,
                         "meas_steps": meas, **{k: c[k] for k in ("hit_rate_pct", "counted", "expected", "valid", "note")}})
            log(c["note"])
    return rows


def sweep(exe, pts):
    text = "\n".join(p.line() for p in pts) + "\n"
    out = subprocess.run([str(exe), "sweep"], input=text, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark failed: {out.stderr.strip()[-300:]}")
    return out.stdout


def idle_power(exe, seconds=2.0):
    out = subprocess.run([str(exe), "idle", str(seconds)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().split(",")[1])


def n_sms():
    """Multiprocessors of GPU 0 (through torch when present)."""
    try:
        import torch
        return torch.cuda.get_device_properties(0).multi_processor_count
    except Exception:  # noqa: BLE001
        return 132


def fits(points_csv):
    """The calibration_fits view over the points, in a scratch database."""
    from ..store import db
    from ..ingest import ingest_file
    with tempfile.TemporaryDirectory() as d:
        con = db.connect(Path(d) / "f.duckdb")
        ingest_file(con, points_csv)
        rows = con.execute("SELECT * FROM calibration_fits WHERE NOT reference ORDER BY gpu, level, "
                           "threads_per_block, blocks").fetchall()
        cols = [c[0] for c in con.description]
        con.close()
    return [dict(zip(cols, r)) for r in rows]


def run_checks(exe, sizes, n_sm, levels, every_shape=False):
    """ncu checks at the chosen sizes: the smallest and largest multi-thread shape,
    or (every_shape) every launch shape of the sweep, so that each point rests on
    a check of its own shape."""
    rows = []
    for level in levels:
        size = sizes[level]
        for tpb, blocks in (plan.shapes(n_sm) if every_shape else ((32, 1), (1024, n_sm))):
            spacing, base, _ = plan.layout(level, size, tpb, blocks)
            meas = base * max(plan.MEAS_MULTS)
            warm = plan.warm_steps(level, size)
            # L2: the sweep warms it with an untimed launch of the same kernel; so does prime here
            d = ncu_pair(exe, level, size, tpb, blocks, warm, meas, spacing, prime=level == "l2")
            c = results.check(level, d, blocks, tpb, meas)
            rows.append({"level": level, "array_bytes": size, "threads_per_block": tpb, "blocks": blocks,
                         **{k: c[k] for k in ("hit_rate_pct", "counted", "expected", "valid", "note")},
                         **{m: d[m] for m in METRICS}})
            log(c["note"])
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def finish(out):
    """Points and fits from out/raw_sweep.csv, out/checks.csv and out/run.json (no GPU)."""
    meta = json.loads((out / "run.json").read_text())
    idle = sum(meta["idle_power_w"].values()) / 2
    with open(out / "checks.csv") as f:
        checks = results.checks_from_rows(list(csv.DictReader(f)))
    pts = results.points(results.read_raw((out / "raw_sweep.csv").read_text()), idle, checks)
    results.write_points(out / "points.csv", pts)
    rows = fits(out / "points.csv")
    write_csv(out / "fits.csv", rows)
    for r in rows:
        if r["lower_bound"]:
            log(f"{r['level']}: eps {r['eps_pj']:.1f} pJ/sector, r2 {r['r2']:.4f} at "
                f"{r['threads_per_block']}x{r['blocks']}")
    return rows


def more_repeats(out, n, target_s):
    """Append n repeats of the whole sweep to OUT/raw_sweep.csv, then rebuild points and fits."""
    meta = json.loads((out / "run.json").read_text())
    raw_old = (out / "raw_sweep.csv").read_text()
    done = max(r["repeat"] // 10 for r in results.read_raw(raw_old)) + 1
    exe = build.binary()
    sizes, n_sm = meta["sizes"], meta["sms"]
    t0 = time.time()
    probe_ns = plan.probe_times(results.read_raw(sweep(exe, plan.probes(sizes, n_sm))))
    pts = plan.sweep(sizes, n_sm, probe_ns, target_s, n, seed=done, first_repeat=done)
    log(f"{len(pts)} more runs (repeats {done}..{done + n - 1})")
    new = sweep(exe, pts)
    (out / "raw_sweep.csv").write_text(raw_old.rstrip("\n") + "\n" + "".join(new.splitlines(True)[1:]))
    meta["runs"] += len(pts)
    meta["more_repeats"] = {"repeats": n, "gpu_seconds": round(time.time() - t0, 1),
                            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    (out / "run.json").write_text(json.dumps(meta, indent=1))
    finish(out)
    return 0


def div_check(out, exe, size, n_sm, target_s=0.4, repeats=3):
    """LOAD+DIV minus LOAD: the energy of one dependent 64-bit division (method.md section 7)."""
    idle0 = idle_power(exe)
    probe = {}
    for div in (0, 1):
        p = plan.Point("l1", size, 1024, n_sm, plan.warm_steps("l1", size),
                       plan.BASE_MEAS_STEPS * max(plan.MEAS_MULTS), 1, div)
        probe[div] = results.read_raw(sweep(exe, [p]))[0]["kernel_ns"]
    pts = plan.div_sweep(size, n_sm, probe, target_s, repeats)
    raw_text = sweep(exe, pts)
    (out / "div_check_raw.csv").write_text(raw_text)
    idle = (idle0 + idle_power(exe)) / 2
    dp = results.div_points(results.read_raw(raw_text), idle)
    load, r2l = results.slope([p for p in dp if not p["div"]])
    both, r2d = results.slope([p for p in dp if p["div"]])
    summary = {"idle_power_w": idle, "load_pj_per_access": load * 1e12, "load_r2": r2l,
               "load_div_pj_per_access": both * 1e12, "load_div_r2": r2d,
               "div_nj_per_thread_op": (both - load) * 1e9, "div_nj_per_warp_instruction": (both - load) * 32e9,
               "shape": f"1024x{n_sm}", "array_bytes": size}
    (out / "div_check.json").write_text(json.dumps(summary, indent=1))
    log(json.dumps(summary))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tracedb.cuda_bench", description=__doc__)
    ap.add_argument("out", help="folder for the results")
    ap.add_argument("--target-s", type=float, default=0.4,
                    help="longest duration of one run (default 0.4; shortened to fit --budget-s)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=600,
                    help="GPU seconds the whole calibration may take (default 600)")
    ap.add_argument("--levels", default=",".join(plan.LEVELS))
    ap.add_argument("--checks-only", action="store_true",
                    help="rerun the ncu checks for the sizes in OUT/run.json, then --recompute")
    ap.add_argument("--check-every-shape", action="store_true",
                    help="with --checks-only: check every launch shape of the sweep (32 ncu runs), not two per level")
    ap.add_argument("--div-check", action="store_true",
                    help="rerun the LOAD+DIV cross-check (L1 size from OUT/run.json) into OUT/div_check.*")
    ap.add_argument("--more-repeats", type=int, default=0,
                    help="add this many repeats to OUT's sweep (same sizes, launches sized anew), then recompute")
    ap.add_argument("--recompute", action="store_true",
                    help="rebuild points and fits from OUT's raw sweep and checks (no GPU)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.checks_only:
        meta = json.loads((out / "run.json").read_text())
        write_csv(out / "checks.csv", run_checks(build.binary(), meta["sizes"], meta["sms"], plan.LEVELS,
                                                 every_shape=a.check_every_shape))
    if a.div_check:
        meta = json.loads((out / "run.json").read_text())
        return div_check(out, build.binary(), meta["sizes"]["l1"], meta["sms"], a.target_s)
    if a.more_repeats:
        return more_repeats(out, a.more_repeats, a.target_s)
    if a.checks_only or a.recompute:
        finish(out)
        return 0
    return calibrate(out, a.target_s, a.repeats, a.budget_s, tuple(a.levels.split(",")),
                     "python -m tracedb.cuda_bench " + " ".join(argv or sys.argv[1:]))


# GPU seconds kept for what follows the sweep: idle power, the ncu checks and the
# LOAD+DIV cross-check (~60 s on the H200).
AFTER_SWEEP_S = 90


def calibrate(out, target_s, repeats, budget_s, levels, command):
    """The whole calibration: build, identify sizes, sweep (sized to fit budget_s),
    check with ncu, fit, cross-check with LOAD+DIV."""
    t0 = time.time()
    exe = build.binary()
    log(f"built {exe}")
    n_sm = n_sms()
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid,serial,pci.bus_id,driver_version,clocks.sm,clocks.mem,clocks.max.sm,"
                          "power.limit,temperature.gpu", "--format=csv"], capture_output=True, text=True).stdout
    ident = identify(exe, n_sm)
    write_csv(out / "identification.csv", ident)
    sizes = {}
    for level in plan.LEVELS:
        hr = {r["array_bytes"]: r["hit_rate_pct"] for r in ident if r["level"] == level}
        sizes[level] = plan.choose_size(level, hr)
    log(f"sizes: {sizes}")
    idle_before = idle_power(exe)
    log(f"idle power {idle_before:.1f} W")
    probe_ns = plan.probe_times(results.read_raw(sweep(exe, plan.probes(sizes, n_sm, levels))))
    left = budget_s - (time.time() - t0) - AFTER_SWEEP_S
    pts, target_s, est = plan.sweep_within(left, sizes, n_sm, probe_ns, target_s, repeats, levels)
    log(f"sweep: {len(pts)} runs of at most {target_s:.3f} s, about {est:.0f} s ({left:.0f} s left in the budget)")
    t_sweep = time.time()
    raw_text = sweep(exe, pts)
    t_sweep = time.time() - t_sweep
    (out / "raw_sweep.csv").write_text(raw_text)
    idle_after = idle_power(exe)
    write_csv(out / "checks.csv", run_checks(exe, sizes, n_sm, levels))
    meta = {"command": command, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "nvidia_smi": smi.strip(), "sms": n_sm, "sizes": sizes,
            "idle_power_w": {"before": idle_before, "after": idle_after}, "runs": len(pts),
            "target_s": round(target_s, 4), "sweep_estimate_s": round(est, 1), "sweep_seconds": round(t_sweep, 1),
            "binary": exe.name}
    (out / "run.json").write_text(json.dumps(meta, indent=1))
    finish(out)
    if "l1" in levels:
        div_check(out, exe, sizes["l1"], n_sm, target_s)
    meta["gpu_seconds"] = round(time.time() - t0, 1)
    (out / "run.json").write_text(json.dumps(meta, indent=1))
    log(f"done in {meta['gpu_seconds']:.0f} s of GPU time (budget {budget_s:.0f} s)")
    return 0
