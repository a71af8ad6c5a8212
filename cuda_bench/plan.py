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
    """One launch per level and shape at the largest access count, to size the runs."""
    out = []
    for l in levels:
        for tpb, blocks in shapes(n_sm):
            spacing, base, advance = layout(l, sizes[l], tpb, blocks)
            out.append(Point(l, sizes[l], tpb, blocks, warm_steps(l, sizes[l]), base * max(MEAS_MULTS), 1,
                             0, 0, spacing, advance))
    return out


def estimate_seconds(points, probe_ns, update_s=0.1):
    """GPU time the sweep takes: launches plus waiting for the energy counter twice per run."""
    t = 0.0
    for p in points:
        per = probe_ns[(p.level, p.tpb, p.blocks)] * (p.meas_steps / (p.meas_steps or 1) if p.meas_steps else 0.05)
        t += p.launches * per / 1e9 + update_s
    return t


def div_sweep(size, n_sm, probe_ns, target_s=0.15, repeats=2, seed=1):
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
