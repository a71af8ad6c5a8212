"""Raw sweep rows -> calibration points (what `tracedb ingest` loads), and the
checks that mark points valid. Pure functions: tested on CPU with the raw
output committed under results/."""
import csv
import io


POINT_COLUMNS = ["gpu", "level", "threads_per_block", "blocks", "accesses", "energy_j", "dur_ns",
                 "sm_clock_mhz", "mem_clock_mhz", "temp_c", "valid", "array_bytes", "hit_rate_pct", "note",
                 "meas_steps", "launches", "repeat", "counted", "check_shape", "sweep_pass"]


def read_raw(text):
    """Rows of the benchmark's sweep CSV, numbers converted."""
    out = []
    for r in csv.DictReader(io.StringIO(text)):
        row = {k: (v if k in ("gpu", "level") else int(float(v))) for k, v in r.items()}
        out.append(row)
    return out


def dynamic_mj(row, idle_w):
    """Counter energy of the run's window minus idle power over the same window, mJ."""
    return row["energy_mj"] - idle_w * row["window_ns"] / 1e6


def points(raw, idle_w, checks):
    """One point per warm-up + measurement run: its dynamic energy minus that of
    the warm-up-only run of the same level, shape, launches and repeat.
    checks[(level, multi_block)] = {"valid": bool, "hit_rate_pct": float, "note": str,
    "counted": float, "expected": int, "shape": "TPBxBLOCKS"}: the check of a
    one-block shape (32x1) covers one-block points, that of the largest shape
    (1024 x SMs) the multi-block points; a check of the point's own shape
    (key (level, threads_per_block, blocks)) wins where there is one. Each point
    carries the check's counter count scaled to it (counted = accesses x
    counted / expected: shared-memory wavefronts for shared, sectors else) and
    the shape it was checked at."""
    warm = {(r["level"], r["threads_per_block"], r["blocks"], r["launches"], r["repeat"]): r
            for r in raw if r["meas_steps"] == 0 and not r["div"]}
    out = []
    for r in raw:
        if r["meas_steps"] == 0 or r["div"]:
            continue
        w = warm.get((r["level"], r["threads_per_block"], r["blocks"], r["launches"], r["repeat"]))
        if w is None:
            continue
        e = (dynamic_mj(r, idle_w) - dynamic_mj(w, idle_w)) / 1e3
        accesses = r["launches"] * r["blocks"] * r["threads_per_block"] * r["meas_steps"]
        chk = checks.get((r["level"], r["threads_per_block"], r["blocks"])) \
            or checks.get((r["level"], r["blocks"] > 1), {"valid": False, "note": "no ncu check"})
        notes = [chk.get("note") or ""]
        valid = bool(chk.get("valid"))
        if e <= 0:
            valid = False
            notes.append("energy difference not positive (below the counter's resolution)")
        out.append({
            "gpu": r["gpu"], "level": r["level"], "threads_per_block": r["threads_per_block"],
            "blocks": r["blocks"], "accesses": accesses,
            "energy_j": e, "dur_ns": r["kernel_ns"] - w["kernel_ns"], "sm_clock_mhz": r["sm_clock_mhz"],
            "mem_clock_mhz": r["mem_clock_mhz"], "temp_c": r["temp_c"], "valid": valid,
            "array_bytes": r["array_bytes"], "hit_rate_pct": chk.get("hit_rate_pct"),
            "note": "; ".join(n for n in notes if n), "meas_steps": r["meas_steps"],
            "launches": r["launches"], "repeat": r["repeat"],
            "counted": accesses * chk["counted"] / chk["expected"] if chk.get("expected") else None,
            "check_shape": chk.get("shape"), "sweep_pass": r["repeat"] // 10})
    return out


def check(level, diff, blocks, tpb, meas_steps, tolerance=0.05, min_hit=95.0):
    """Safety check of one level from the counter difference (warm-up + measurement
    minus warm-up only): the measurement loop hits the level, and the counted
    sectors match blocks x threads x steps (one 32-byte sector per load, i.e.
    array_size x blocks x threads / (stride x granularity) per pass)."""
    expected = blocks * tpb * meas_steps
    if level == "shared":
        glob = diff.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 0)
        wav = diff.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 0)
        ok = wav > 0 and glob <= 0.01 * expected
        return {"valid": ok, "hit_rate_pct": 100.0 if ok else 0.0, "counted": wav, "expected": expected,
                "note": f"shared wavefronts {wav:.0f} for {expected} loads; global sectors {glob:.0f}"}
    lo, hi = 1 - tolerance, 1 + tolerance
    if level == "l1":
        counted = diff.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 0)
        rate = 100.0 * diff.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum", 0) / counted if counted else 0.0
    elif level == "l2":
        # Hopper's L2 is two partitions: a sector homed in the far one is looked up (and
        # missed) in the near one first, so L2 counts 1x-2x the sectors requested and its
        # lookup hit rate falls for a single SM though nothing comes from DRAM. Served by
        # L2 = not from DRAM; counted lookups may also fall ~10% short when neighbouring
        # lanes re-read a sector within L1TEX.
        counted = diff.get("lts__t_sectors_op_read.sum", 0)
        dram = diff.get("dram__sectors_read.sum", 0)
        rate = max(0.0, 100.0 * (1 - dram / expected)) if expected else 0.0
        lo, hi = 0.85, 2 + tolerance
    else:
        counted = diff.get("dram__sectors_read.sum", 0)
        rate = min(100.0, 100.0 * counted / expected) if expected else 0.0
    close = bool(expected) and lo * expected <= counted <= hi * expected
    ok = bool(close and rate >= min_hit)
    note = f"{level}: {counted:.0f} sectors counted for {expected} expected, hit rate {rate:.2f}%"
    if not close:
        note += " (sector count off)"
    if rate < min_hit:
        note += f" (below {min_hit}%)"
    return {"valid": ok, "hit_rate_pct": rate, "counted": counted, "expected": expected, "note": note}


def checks_from_rows(rows):
    """checks.csv rows -> the checks argument of points(), keyed both by shape
    group (level, multi_block) and by the exact shape (level, tpb, blocks)."""
    out = {}
    for r in rows:
        valid = str(r["valid"]).lower() == "true"
        tpb, blocks = int(r["threads_per_block"]), int(r["blocks"])
        chk = {"valid": valid, "hit_rate_pct": float(r["hit_rate_pct"]), "note": "" if valid else r["note"],
               "counted": float(r["counted"]), "expected": int(float(r["expected"])), "shape": f"{tpb}x{blocks}"}
        out[(r["level"], blocks > 1)] = chk
        out[(r["level"], tpb, blocks)] = chk
    return out


def write_points(path, pts):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=POINT_COLUMNS)
        w.writeheader()
        w.writerows(pts)



def div_points(raw, idle_w):
    """Points of the LOAD+DIV cross-check: (div, accesses, energy_j) per measured run,
    each minus its warm-up twin (same div, launches, repeat)."""
    warm = {(r["div"], r["launches"], r["repeat"]): r for r in raw if r["meas_steps"] == 0}
    out = []
    for r in raw:
        w = warm.get((r["div"], r["launches"], r["repeat"]))
        if r["meas_steps"] and w:
            out.append({"div": r["div"], "accesses": r["launches"] * r["blocks"] * r["threads_per_block"] * r["meas_steps"],
                        "energy_j": (dynamic_mj(r, idle_w) - dynamic_mj(w, idle_w)) / 1e3,
                        "dur_ns": r["kernel_ns"] - w["kernel_ns"]})
    return out


def slope(pts):
    """Least-squares slope and r2 of energy_j over accesses."""
    n = len(pts)
    mx = sum(p["accesses"] for p in pts) / n
    my = sum(p["energy_j"] for p in pts) / n
    sxx = sum((p["accesses"] - mx) ** 2 for p in pts)
    sxy = sum((p["accesses"] - mx) * (p["energy_j"] - my) for p in pts)
    syy = sum((p["energy_j"] - my) ** 2 for p in pts)
    return sxy / sxx, (sxy * sxy / (sxx * syy) if syy else 1.0)
