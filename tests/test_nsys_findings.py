"""Findings and GPU-side reports on an Nsight Systems run, against the same numbers
computed here from the SQLite file with plain sqlite3 (ranges, launches and GPU
activities joined by process and correlation id): host_bound (the GPU idle with
nothing queued) over every FlashAttnFunc iteration of a real 2-GPU H100 export, where
it fires above its threshold and stays quiet below; launch_queue's and
idle_breakdown's whole-run figures per stream."""
import gzip
import sqlite3
from pathlib import Path

import pytest

from tracedb.ingest import ingest_file
from tracedb.query import reports
from tracedb.store import db

EXPORT = Path(__file__).parent / "data" / "nsys" / "mfu_2gpu_before.sqlite.gz"


def starved_pct(path):
    """iteration -> % of it with no GPU activity running and none launched and not yet
    started. Iteration N: the Nth FlashAttnFunc range by start; an activity belongs to
    the latest-starting range holding its launch call's start; an iteration ends at
    the later of its range's end and its activities' last end; an activity is waited
    for from its launch call's end (or its start, when earlier) to its end."""
    c = sqlite3.connect(path)
    try:
        marks = sorted(c.execute("""SELECT n.start, n."end" FROM NVTX_EVENTS n LEFT JOIN StringIds s
            ON s.id = n.textId WHERE coalesce(n.text, s.value) LIKE 'FlashAttnFunc, %' AND n."end" IS NOT NULL"""))
        acts = {}
        for table in ("KERNEL", "MEMCPY", "MEMSET"):
            for ks, ke, rs, re_ in c.execute(f"""SELECT k.start, k."end", r.start, r."end"
                    FROM CUPTI_ACTIVITY_KIND_{table} k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                    ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)"""):
                held = [i for i, (s, e) in enumerate(marks) if s <= rs <= e]
                if held:
                    acts.setdefault(max(held, key=lambda i: marks[i][0]), []).append((ks, ke, re_))
    finally:
        c.close()
    out = {}
    for i, got in acts.items():
        start, end = marks[i][0], max([marks[i][1]] + [ke for _, ke, _ in got])
        covered, cur = 0, None
        for a, b in sorted((max(min(re_, ks), start), min(ke, end)) for ks, ke, re_ in got):
            if cur is None or a > cur[1]:
                covered += cur[1] - cur[0] if cur else 0
                cur = [a, b]
            else:
                cur[1] = max(cur[1], b)
        covered += cur[1] - cur[0]
        out[i] = 100.0 * (end - start - covered) / (end - start)
    return out


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    d = tmp_path_factory.mktemp("nsys_findings")
    plain = d / "mfu.sqlite"
    plain.write_bytes(gzip.decompress(EXPORT.read_bytes()))
    con = db.connect(d / "f.duckdb")
    ingest_file(con, str(EXPORT), run="mfu", options={"iterations_from": "FlashAttnFunc"})
    rows = reports.run(con, "findings", {"run": "mfu", "iteration": "all", "show": "all"}).to_pylist()
    con.close()
    return plain, rows


def test_host_bound_on_every_iteration_of_an_nsys_run(findings):
    plain, rows = findings
    want = starved_pct(plain)
    got = {r["iteration"]: r for r in rows if r["rule"] == "host_bound" and r["value"] is not None}
    assert got.keys() == want.keys() and len(want) > 50
    assert {i: r["value"] for i, r in got.items()} == pytest.approx(want, abs=1e-3)
    # present and absent: it fires exactly where the share passes its threshold (30%)
    fired = {i for i, r in got.items() if r["severity"] not in ("ok", "skipped")}
    assert fired == {i for i, v in want.items() if v > 30} and 0 < len(fired) < len(want)


def test_rules_needing_data_an_nsys_run_lacks_are_skipped_not_guessed(findings):
    """No ncu report, power log or second rank here: those rules say what they need."""
    _, rows = findings
    skipped = {r["rule"] for r in rows if r["severity"] == "skipped"}
    assert {"low_issue_efficiency", "no_tensor_cores", "energy_sources_disagree", "straggler_rank"} <= skipped
    assert all(r["evidence"] for r in rows if r["severity"] == "skipped")


def max_queued(path, rank0):
    """stream -> most kernels launched (launch call ended) and not yet started at once,
    from the SQLite file (rank0: only the process of the lowest device)."""
    c = sqlite3.connect(path)
    try:
        where = ""
        if rank0:
            pid = c.execute("SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 "
                            "ORDER BY min(deviceId), 1 LIMIT 1").fetchone()[0]
            where = f"WHERE k.globalPid >> 24 = {int(pid)} AND (r.globalTid >> 24) = (k.globalPid >> 24)"
        steps = {}
        for stream, start, launched in c.execute(f"""SELECT k.streamId, k.start, r."end"
                FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                ON r.correlationId = k.correlationId {where}"""):
            if launched < start:
                steps.setdefault(stream, []).extend([(launched, 1), (start, -1)])
    finally:
        c.close()
    out = {}
    for stream, s in steps.items():
        n = most = 0
        for _, d in sorted(s):
            n += d
            most = max(most, n)
        out[stream] = most
    return out


@pytest.fixture(scope="module")
def rank0(tmp_path_factory):
    """mfu_2gpu_before's rank 0 (--rank 0), and the plain SQLite file."""
    d = tmp_path_factory.mktemp("nsys_rank0")
    plain = d / "mfu.sqlite"
    plain.write_bytes(gzip.decompress(EXPORT.read_bytes()))
    con = db.connect(d / "r.duckdb")
    ingest_file(con, str(EXPORT), run="q", options={"rank": 0})
    yield plain, con
    con.close()


def test_launch_queue_of_an_nsys_run(rank0, tmp_path):
    """launch_queue's whole-run maximum per stream (rank 0: 28 kernels waiting on
    stream 7; healthy_1pct, an export without globalPid: 1)."""
    plain, con = rank0
    got = {r["stream"]: r["max_queued"] for r in
           reports.run(con, "launch_queue", {"run": "q", "iteration": "all"}).to_pylist()}
    assert got == max_queued(plain, True) == {7: 28}
    path = EXPORT.parent / "healthy_1pct.sqlite.gz"
    small = tmp_path / "healthy.sqlite"
    small.write_bytes(gzip.decompress(path.read_bytes()))
    other = db.connect(tmp_path / "h.duckdb")
    ingest_file(other, str(path), run="h")
    got = {r["stream"]: r["max_queued"] for r in
           reports.run(other, "launch_queue", {"run": "h", "iteration": "all"}).to_pylist()}
    other.close()
    assert got == max_queued(small, False) and got


def test_idle_breakdown_of_an_nsys_run(rank0):
    """idle_breakdown's whole-run gaps per stream and cause: between consecutive
    kernels of a stream, waiting_on_host where the next kernel's launch call started
    after the previous kernel ended, else short_gap up to 10 us, else other."""
    plain, con = rank0
    c = sqlite3.connect(plain)
    try:
        pid = c.execute("SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 "
                        "ORDER BY min(deviceId), 1 LIMIT 1").fetchone()[0]
        streams = {}
        for stream, s, e, launch in c.execute("""SELECT k.streamId, k.start, k."end", r.start
                FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
                WHERE k.globalPid >> 24 = ?""", [pid]):
            streams.setdefault(stream, []).append((s, e, launch))
    finally:
        c.close()
    want = {}
    for stream, ks in streams.items():
        ks.sort()
        for (_, end, _), (start, _, launch) in zip(ks, ks[1:]):
            if start > end:
                cause = ("waiting_on_host" if launch is not None and launch > end
                         else "short_gap" if start - end <= 10000 else "other")
                n, t = want.get((stream, cause), (0, 0))
                want[(stream, cause)] = (n + 1, t + start - end)
    got = {(r["stream"], r["cause"]): (r["gaps"], r["idle_ns"]) for r in
           reports.run(con, "idle_breakdown", {"run": "q", "iteration": "all"}).to_pylist() if r["iteration"] is None}
    assert got == want and len(want) == 3
