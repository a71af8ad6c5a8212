"""Which points the calibration runs: sizes per level, launch shapes, access
counts and repeats, sized so the whole sweep fits a GPU-time budget.
Pure functions: tested on CPU."""
import math
import random
from dataclasses import dataclass

STRIDE_ELEMS = 4               # one 32-byte sector per load (chase.cu STRIDE)
LEVELS = ("shared", "l1", "l2", "dram")
# Array sizes tried by the identification sweep (bytes), per level.
CANDIDATES = {
    "l1": [32 << 10, 64 << 10, 128 << 10, 192 << 10, 256 << 10, 512 << 10],
    "l2": [4 << 20, 16 << 20, 32 << 20, 48 << 20, 64 << 20, 128 << 20],
    "dram": [4 << 30],
    "shared": [48 << 10],
}
MEAS_MULTS = (1, 2, 4)
BASE_MEAS_STEPS = 2048


@dataclass(frozen=True)
class Point:
    level: str
    array_bytes: int
    tpb: int
    blocks: int
    warm_steps: int
    meas_steps: int
    launches: int
    div: int = 0
    repeat: int = 0
    spacing: int = STRIDE_ELEMS    # elements between the starts of consecutive threads
    advance: int = 0               # elements each launch moves on (DRAM: never the same data twice)

    def line(self):
        return (f"{self.level} {self.array_bytes} {self.tpb} {self.blocks} {self.warm_steps} "
                f"{self.meas_steps} {self.launches} {self.div} {self.repeat} {self.spacing} {self.advance}")

    @property
    def accesses(self):
        """32-byte sectors loaded by the measurement loops of all launches."""
        return self.launches * self.blocks * self.tpb * self.meas_steps


def shapes(n_sm):
    """Launch shapes: threads per block from 1 to 1024, one block or one per SM."""
    return [(tpb, b) for b in (1, n_sm) for tpb in (1, 32, 256, 1024)]


def ring_steps(array_bytes):
    return (array_bytes // 8 - (array_bytes // 8) % STRIDE_ELEMS) // STRIDE_ELEMS


def warm_steps(level, array_bytes):
    """In-kernel warm-up: L1 is not kept across launches, so each thread walks the
    ring once; shared memory is filled by the copy; L2 holds the ring from the
    untimed launch before each run; DRAM must not be warmed."""
    return ring_steps(array_bytes) if level == "l1" else 0


def choose_size(level, hit_rates):
    """The array size for a level from the identification sweep's hit rates:
    L1 the largest size hitting >= 99% and at most half the smallest size that
    misses (margin for many threads per block); L2 the largest hitting >= 95%
    (Hopper's L2 is two partitions: hit rates fall well before its nominal
    size); DRAM the candidate; shared memory 48 KiB."""
    if level in ("shared", "dram"):
        return max(CANDIDATES[level])
    need = 99.0 if level == "l1" else 95.0
    ok = sorted(s for s, h in hit_rates.items() if h is not None and h >= need)
    if not ok:
        raise ValueError(f"no size stays in {level} (hit rates: {hit_rates})")
    bad = [s for s, h in hit_rates.items() if h is None or h < need]
    if level == "l1" and bad:
        within = [s for s in ok if s <= min(bad) // 2]
        if within:
            return max(within)
    return max(ok)


def layout(level, array_bytes, tpb, blocks):
    """(spacing, base measurement steps, advance per launch) of a level and shape.
    L1 and shared: neighbouring starts (the data is in the level anyway). L2 and
    DRAM: threads spread over the ring so lanes never share sectors. DRAM: each
    thread walks its own stretch, moving on every launch, so no sector is read
    twice before the whole ring (far beyond L2) has been read."""
    sectors = ring_steps(array_bytes)
    threads = tpb * blocks
    if level in ("l1", "shared"):
        return STRIDE_ELEMS, BASE_MEAS_STEPS, 0
    own = max(1, sectors // threads)                       # sectors per thread
    if level == "l2":
        return own * STRIDE_ELEMS, BASE_MEAS_STEPS, 0
    base = max(8, min(BASE_MEAS_STEPS, own // (2 * max(MEAS_MULTS))) // 8 * 8)
    return own * STRIDE_ELEMS, base, base * max(MEAS_MULTS) * STRIDE_ELEMS


def launches_for(kernel_ns, target_s):
    return max(1, math.ceil(target_s * 1e9 / max(kernel_ns, 1)))


def sweep(sizes, n_sm, probe_ns, target_s=0.25, repeats=3, seed=0, levels=LEVELS, first_repeat=0):
    """The calibration points: for each level, shape and access count, a
    warm-up-only run (meas_steps 0) and a warm-up + measurement run, repeated,
    in shuffled order (drift does not line up with the regression).
    probe_ns[(level, tpb, blocks)] is one launch's time at the largest access count."""
    pts = []
    for level in levels:
        b = sizes[level]
        for tpb, blocks in shapes(n_sm):
            n = launches_for(probe_ns[(level, tpb, blocks)], target_s)
            spacing, base, advance = layout(level, b, tpb, blocks)
            for m in MEAS_MULTS:
                for r in range(first_repeat, first_repeat + repeats):
                    for meas in (0, base * m):
                        pts.append(Point(level, b, tpb, blocks, warm_steps(level, b), meas, n,
                                         0, r * 10 + m, spacing, advance))
    random.Random(seed).shuffle(pts)
    return pts


def probes(sizes, n_sm, levels=LEVELS):
    """One launch per level and shape at the largest access count (sizes the runs)
    and one warm-up-only launch (for the estimate of the sweep's time)."""
    out = []
    for l in levels:
        for tpb, blocks in shapes(n_sm):
            spacing, base, advance = layout(l, sizes[l], tpb, blocks)
            for meas in (base * max(MEAS_MULTS), 0):
                out.append(Point(l, sizes[l], tpb, blocks, warm_steps(l, sizes[l]), meas, 1,
                                 0, 0, spacing, advance))
    return out


def probe_times(raw):
    """probe_ns (see estimate_seconds) from the probes' raw rows."""
    return {(r["level"], r["threads_per_block"], r["blocks"]) + ((0,) if r["meas_steps"] == 0 else ()): r["kernel_ns"]
            for r in raw}


# Seconds each run spends beside its kernels: waiting for the energy counter's
# update before and after (it updates every ~100 ms), the sync and the output.
# Measured on the H200: 0.12-0.20 s, 0.17 s on average.
RUN_OVERHEAD_S = 0.18


def estimate_seconds(points, probe_ns, overhead_s=RUN_OVERHEAD_S):
    """GPU time the sweep takes: each run's launches (plus its untimed launch) and
    its overhead. probe_ns[(level, tpb, blocks)] is one launch at the shape's
    largest access count, probe_ns[(level, tpb, blocks, 0)] one warm-up-only
    launch (taken as 5% of the former where not probed); a launch in between
    is interpolated by its access count."""
    top = {}
    for p in points:
        k = (p.level, p.tpb, p.blocks)
        top[k] = max(top.get(k, 0), p.meas_steps)
    t = 0.0
    for p in points:
        k = (p.level, p.tpb, p.blocks)
        full = probe_ns[k]
        warm = min(full, probe_ns.get(k + (0,), 0.05 * full))
        per = warm + (full - warm) * p.meas_steps / top[k]
        t += (p.launches + 1) * per / 1e9 + overhead_s
    return t


def sweep_within(budget_s, sizes, n_sm, probe_ns, target_s=0.4, repeats=3, levels=LEVELS, floor_s=0.02):
    """The sweep with the longest runs (at most target_s) that fits budget_s:
    the number of points and repeats is fixed by the design, so only the
    duration of each run gives. Returns (points, target_s, estimated seconds)."""
    while True:
        pts = sweep(sizes, n_sm, probe_ns, target_s, repeats, levels=levels)
        est = estimate_seconds(pts, probe_ns)
        if est <= budget_s or target_s <= floor_s:
            return pts, target_s, est
        target_s = max(floor_s, target_s * 0.8)


def div_sweep(size, n_sm, probe_ns, target_s=0.4, repeats=3, seed=1):
    """The LOAD+DIV cross-check: L1 loads at the largest shape, with and without a
    dependent 64-bit division per load; probe_ns[div] is one launch's time."""
    pts = []
    for div in (0, 1):
        n = launches_for(probe_ns[div], target_s)
        for m in MEAS_MULTS:
            for r in range(repeats):
                for meas in (0, BASE_MEAS_STEPS * m):
                    pts.append(Point("l1", size, 1024, n_sm, warm_steps("l1", size), meas, n, div, r * 10 + m))
    random.Random(seed).shuffle(pts)
    return pts
