"""Nsight Systems SQLite exports (tests/data/nsys, real exports of two nsys versions)
as trace runs: every number checked against an independent reading of the same
SQLite file with plain sqlite3 SQL (not through the reader)."""
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tracedb.store import db
from tracedb.query import reports
from tracedb.ingest import IngestError, ingest_file

NSYS = Path(__file__).parent / "data" / "nsys"
FILES = {"h100_2gpu_1s": "2026.2.1.210", "mfu_2gpu_before": "2026.2.1.210",
         "mock": "2026.1.1.204", "healthy_1pct": "2026.1.1.204"}
WITH_NVTX = ["h100_2gpu_1s", "mfu_2gpu_before"]


def gz(name):
    return NSYS / f"{name}.sqlite.gz"


@pytest.fixture(scope="session")
def plain(tmp_path_factory):
    """The fixtures decompressed: what the independent reads open."""
    d = tmp_path_factory.mktemp("nsys_plain")
    out = {}
    for name in [*FILES, "rg_report1", "wb2_report1"]:
        out[name] = d / f"{name}.sqlite"
        out[name].write_bytes(gzip.decompress(gz(name).read_bytes()))
    return out


@pytest.fixture(scope="session")
def nsys_db(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("nsys_db") / "n.duckdb")
    for name in [*FILES, "rg_report1", "wb2_report1"]:
        r = ingest_file(con, str(gz(name)))
        assert r.run == name and r.status == "loaded"
    yield con
    con.close()


@pytest.fixture(scope="session")
def steps_db(tmp_path_factory):
    """mfu_2gpu_before with the FlashAttnFunc ranges as iterations (--iterations-from)."""
    con = db.connect(tmp_path_factory.mktemp("nsys_steps") / "s.duckdb")
    ingest_file(con, str(gz("mfu_2gpu_before")), run="mfu", options={"iterations_from": "FlashAttnFunc"})
    yield con
    con.close()


def q(path, sql, params=()):
    c = sqlite3.connect(path)
    try:
        return c.execute(sql, params).fetchall()
    finally:
        c.close()


def base_ns(path):
    return q(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0] \
        if q(path, "SELECT 1 FROM sqlite_master WHERE name = 'TARGET_INFO_SESSION_START_TIME'") else 0


@pytest.mark.parametrize("name", FILES)
def test_kernel_count_and_time_per_name(nsys_db, plain, name):
    raw = dict(((n, (c, t)) for n, c, t in q(plain[name], """
        SELECT s.value, count(*), sum(k."end" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value""")))
    got = {n: (c, t) for n, c, t in nsys_db.execute(
        "SELECT name, count(*), sum(dur_ns) FROM kernels WHERE run = ? AND kind = 'kernel' GROUP BY name",
        [name]).fetchall()}
    assert got == raw and sum(c for c, _ in raw.values()) > 0


@pytest.mark.parametrize("name", FILES)
def test_kernel_times_launch_shape_exact(nsys_db, plain, name):
    """Every kernel's start (on the epoch timeline), duration, device, stream and grid."""
    b = base_ns(plain[name])
    raw = Counter(q(plain[name], f"""SELECT start + {b}, "end" - start, deviceId, streamId, gridX, gridY, gridZ,
                                        blockX, blockY, blockZ FROM CUPTI_ACTIVITY_KIND_KERNEL"""))
    got = Counter(nsys_db.execute("""SELECT ts_ns, dur_ns, device, stream, grid_x, grid_y, grid_z,
                                            block_x, block_y, block_z FROM kernels
                                     WHERE run = ? AND kind = 'kernel'""", [name]).fetchall())
    assert got == raw


def test_registers_and_shared_memory(nsys_db, plain):
    raw = Counter(q(plain["h100_2gpu_1s"], """SELECT registersPerThread, staticSharedMemory, dynamicSharedMemory,
        staticSharedMemory + dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL"""))
    got = Counter(nsys_db.execute("""SELECT registers_per_thread, static_shared_mem_bytes, dynamic_shared_mem_bytes,
        shared_mem_bytes FROM kernels WHERE run = 'h100_2gpu_1s' AND kind = 'kernel'""").fetchall())
    assert got == raw


@pytest.mark.parametrize("name", ["h100_2gpu_1s", "mfu_2gpu_before", "mock"])
def test_copies_and_sets_by_direction(nsys_db, plain, name):
    """memcpy by direction (copyKind), memory kinds and bytes; memset bytes."""
    dirs = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP", 9: "HtoH"}
    kinds = {0: "Pageable", 1: "Pinned", 2: "Device"}
    raw = Counter()
    for ck, sk, dk, n, b, t in q(plain[name], """SELECT copyKind, srcKind, dstKind, count(*), sum(bytes),
            sum("end" - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3"""):
        raw[(dirs[ck], kinds[sk], kinds[dk])] += n
    got = Counter({(d, s, t): n for d, s, t, n in nsys_db.execute("""
        SELECT a.copy_direction, a.src_memory, a.dst_memory, count(*) FROM kernels k
        JOIN activity_args a ON a.run = k.run AND a.kernel_id = k.kernel_id
        WHERE k.run = ? AND k.kind = 'memcpy' GROUP BY 1, 2, 3""", [name]).fetchall()})
    assert got == raw and sum(raw.values()) > 0
    for kind, table in (("memcpy", "MEMCPY"), ("memset", "MEMSET")):
        if not q(plain[name], "SELECT 1 FROM sqlite_master WHERE name = ?", [f"CUPTI_ACTIVITY_KIND_{table}"]):
            continue
        (n, b, t), = q(plain[name], f'SELECT count(*), sum(bytes), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_{table}')
        assert nsys_db.execute("""SELECT count(*), sum(a.copy_bytes), sum(k.dur_ns) FROM kernels k
            JOIN activity_args a ON a.run = k.run AND a.kernel_id = k.kernel_id
            WHERE k.run = ? AND k.kind = ?""", [name, kind]).fetchone() == (n, b, t)


@pytest.mark.parametrize("name", WITH_NVTX)
def test_nvtx_ranges(nsys_db, plain, name):
    """Every NVTX push/pop range, with its text, start and duration; emit_nvtx
    ranges named by their op (the text before ', seq = ' or ', op_id = ')."""
    b = base_ns(plain[name])
    raw = Counter(q(plain[name], f"""SELECT coalesce(n.text, s.value), n.start + {b}, n."end" - n.start
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60)"""))
    got = Counter(nsys_db.execute("""SELECT args->>'nvtx text', ts_ns, dur_ns FROM events
        WHERE run = ? AND cat IN ('cpu_op', 'user_annotation')""", [name]).fetchall())
    assert got == raw and len(raw) > 1000
    # names: emit_nvtx's op name, other ranges (ncclSend ...) as written
    ops = Counter(t.split(", seq = ")[0].split(", op_id = ")[0] for t, _, _ in raw.elements()
                  if ", op_id = " in t)
    got_ops = Counter(dict(nsys_db.execute("SELECT name, count(*) FROM events WHERE run = ? AND cat = 'cpu_op' "
                                           "GROUP BY 1", [name]).fetchall()))
    assert got_ops == ops


def test_nccl_nvtx_domain_kept_as_user_ranges(nsys_db, plain):
    raw = Counter(t for t, in q(plain["mfu_2gpu_before"], """SELECT coalesce(n.text, s.value) FROM NVTX_EVENTS n
        LEFT JOIN StringIds s ON s.id = n.textId WHERE n.domainId = 1"""))
    got = Counter(t for t, in nsys_db.execute("""SELECT name FROM events WHERE run = 'mfu_2gpu_before'
        AND cat = 'user_annotation' AND args->>'domain id' = '1'""").fetchall())
    assert got == raw and raw["ncclSend"] == 132


@pytest.mark.parametrize("name", ["h100_2gpu_1s", "mfu_2gpu_before", "healthy_1pct"])
def test_launches_linked_per_process(nsys_db, plain, name):
    """Each GPU activity's launch: the runtime call of the same process with its
    correlation id (nsys numbers correlation ids per process)."""
    b = base_ns(plain[name])
    has_gpid = "globalPid" in [r[1] for r in q(plain[name], "PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    same = "AND (r.globalTid >> 24) = (k.globalPid >> 24)" if has_gpid else ""
    raw = Counter(q(plain[name], f"""SELECT k.start + {b}, r.start + {b}, r."end" + {b}
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        ON r.correlationId = k.correlationId {same}"""))
    got = Counter(nsys_db.execute("""SELECT ts_ns, launch_ts_ns, launch_end_ns FROM kernels
        WHERE run = ? AND kind = 'kernel' AND launch_event_id IS NOT NULL""", [name]).fetchall())
    assert got == raw and len(raw) > 0


def test_two_processes_do_not_share_correlation_ids(nsys_db, plain):
    """mfu_2gpu_before: two processes (ranks) whose correlation ids overlap."""
    (overlap,), = q(plain["mfu_2gpu_before"], """SELECT count(*) FROM (SELECT DISTINCT correlationId FROM
        CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid >> 24 = (SELECT min(globalTid >> 24) FROM CUPTI_ACTIVITY_KIND_RUNTIME))
        a JOIN (SELECT DISTINCT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid >> 24 =
        (SELECT max(globalTid >> 24) FROM CUPTI_ACTIVITY_KIND_RUNTIME)) b USING (correlationId)""")
    dup = nsys_db.execute("""SELECT count(*) FROM (SELECT correlation FROM events WHERE run = 'mfu_2gpu_before'
        AND cat = 'cuda_runtime' GROUP BY correlation HAVING count(DISTINCT pid) > 1)""").fetchone()[0]
    assert overlap > 0 and dup == 0
    # launches stay on their process: a kernel's launch is on the process of its device
    pairs = set(nsys_db.execute("""SELECT DISTINCT device, launch_pid FROM kernels WHERE run = 'mfu_2gpu_before'
        AND launch_pid IS NOT NULL""").fetchall())
    raw = set(q(plain["mfu_2gpu_before"], "SELECT DISTINCT deviceId, CAST((globalPid >> 24) & 16777215 AS TEXT) "
                                       "FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    assert pairs == raw and len(raw) == 2


@pytest.mark.parametrize("name, launches", [("h100_2gpu_1s", 2788), ("rg_report1", 2)])
def test_runtime_calls_named_without_version_suffix(nsys_db, plain, name, launches):
    """Every runtime and driver call, by name (cudaLaunchKernel_v7000 -> cudaLaunchKernel),
    as cuda_driver (cu*) or cuda_runtime; rg_report1 (nsys 2025.3.2, export schema
    3.20.3) has API calls and no GPU activity table."""
    b = base_ns(plain[name])
    raw = Counter()
    for n, start, dur in q(plain[name], f"""SELECT s.value, r.start + {b}, r."end" - r.start
            FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"""):
        base = n.rsplit("_v", 1)[0] if n.rsplit("_v", 1)[-1].isdigit() else n
        raw[(base, "cuda_runtime" if base.startswith("cuda") else "cuda_driver", start, dur)] += 1
    got = Counter(nsys_db.execute("""SELECT name, cat, ts_ns, dur_ns FROM events WHERE run = ?
        AND cat IN ('cuda_runtime', 'cuda_driver')""", [name]).fetchall())
    assert got == raw and sum(n for (c, *_), n in raw.items() if c == "cudaLaunchKernel") == launches


def test_an_export_of_api_calls_alone(nsys_db):
    meta = json.loads(nsys_db.execute("SELECT metadata FROM runs WHERE run = 'rg_report1'").fetchone()[0])
    assert (meta["nsys_version"], meta["nsys_export_schema"]) == ("2025.3.2.474", "3.20.3")
    assert nsys_db.execute("SELECT count(*) FROM kernels WHERE run = 'rg_report1'").fetchone()[0] == 0
    assert nsys_db.execute("SELECT device_name FROM runs WHERE run = 'rg_report1'").fetchone()[0] == \
        "NVIDIA GeForce RTX 4060 Laptop GPU"


@pytest.mark.parametrize("name", FILES)
def test_nsys_version_stated(nsys_db, name):
    meta = json.loads(nsys_db.execute("SELECT metadata FROM runs WHERE run = ?", [name]).fetchone()[0])
    assert meta["nsys_version"] == FILES[name] and meta["source_format"] == "nsys-sqlite"


def test_iterations_from_nvtx_range(steps_db, plain):
    p = plain["mfu_2gpu_before"]
    b = base_ns(p)
    raw = sorted(q(p, f"""SELECT n.start + {b}, n."end" + {b} FROM NVTX_EVENTS n LEFT JOIN StringIds s
        ON s.id = n.textId WHERE coalesce(n.text, s.value) LIKE 'FlashAttnFunc, %' AND n."end" IS NOT NULL"""))
    got = steps_db.execute("SELECT iteration, start_ns, marker_end_ns FROM iterations WHERE run = 'mfu' "
                           "ORDER BY iteration").fetchall()
    assert [(s, e) for _, s, e in got] == raw and [i for i, _, _ in got] == list(range(len(raw)))
    # each kernel in an iteration was launched inside that range
    bad = steps_db.execute("""SELECT count(*) FROM kernels k JOIN iterations i ON i.run = k.run AND i.iteration = k.iteration
        WHERE k.run = 'mfu' AND NOT (k.launch_ts_ns BETWEEN i.start_ns AND i.marker_end_ns)""").fetchone()[0]
    n = steps_db.execute("SELECT count(*) FROM kernels WHERE run = 'mfu' AND iteration IS NOT NULL").fetchone()[0]
    assert bad == 0 and n > 100


def test_iterations_from_an_absent_name_is_one_line(tmp_path):
    con = db.connect(tmp_path / "x.duckdb")
    with pytest.raises(IngestError) as e:
        ingest_file(con, str(gz("mock")), options={"iterations_from": "no_such_range"})
    assert "no_such_range" in str(e.value) and "\n" not in str(e.value)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM duckdb_variables()").fetchone()[0] == 0
    con.close()


def test_top_kernels_report_whole_trace(nsys_db, plain):
    raw = {n: t for n, t in q(plain["h100_2gpu_1s"], """SELECT s.value, sum(k."end" - k.start)
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY 1""")}
    t = reports.run(nsys_db, "top_kernels", {"run": "h100_2gpu_1s", "iteration": "all", "limit": 1000}).to_pylist()
    whole = {r["name"]: r["total_ns"] for r in t if r["iteration"] is None}
    assert whole == raw


def _independent_iterations(p):
    """Each launched GPU activity of mfu_2gpu_before: (table, iteration, duration,
    delay from its launch call's end, bytes, copyKind), the iteration by the rule of
    the kernels table: the latest-starting FlashAttnFunc range that holds its launch
    call's start (None when none does)."""
    marks = sorted(q(p, """SELECT n.start, n."end" FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE coalesce(n.text, s.value) LIKE 'FlashAttnFunc, %' AND n."end" IS NOT NULL"""))
    out = []
    for table, extra in (("KERNEL", "NULL, NULL"), ("MEMCPY", "k.bytes, k.copyKind"), ("MEMSET", "k.bytes, -1")):
        for ks, ke, rs, re_, b, ck in q(p, f"""SELECT k.start, k."end", r.start, r."end", {extra}
                FROM CUPTI_ACTIVITY_KIND_{table} k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)"""):
            held = [i for i, (s, e) in enumerate(marks) if s <= rs <= e]
            it = max(held, key=lambda i: marks[i][0]) if held else None
            out.append((table, it, ke - ks, ks - re_, b, ck))
    return out


def test_transfers_report_whole_trace(steps_db, plain):
    """transfers' whole-trace rows (copies launched in an iteration) by direction."""
    dirs = {1: "HtoD", 2: "DtoH", 8: "DtoD", -1: "Memset"}
    raw = Counter()
    for table, it, _, _, b, ck in _independent_iterations(plain["mfu_2gpu_before"]):
        if table != "KERNEL" and it is not None:
            raw[dirs[ck]] += b
    t = reports.run(steps_db, "transfers", {"run": "mfu", "iteration": "all"}).to_pylist()
    got = Counter()
    for r in t:
        if r["iteration"] is None:
            got[r["direction"]] += r["bytes"]
    assert got == raw and len(raw) >= 2


def test_iteration_reports_on_an_nsys_run(steps_db, plain):
    """gpu_utilization's kernel counts and summed kernel time per iteration, and
    launch_delay's per-activity delays (start - launch call end), against the
    activities of each FlashAttnFunc range found in the SQLite file."""
    ind = _independent_iterations(plain["mfu_2gpu_before"])
    sums, counts = Counter(), Counter()
    for table, it, dur, _, _, _ in ind:
        if table == "KERNEL" and it is not None:
            sums[it] += dur
            counts[it] += 1
    util = reports.run(steps_db, "gpu_utilization", {"run": "mfu"}).to_pylist()
    assert {r["iteration"]: r["kernel_sum_ns"] for r in util if r["kernels"]} == dict(sums)
    assert {r["iteration"]: r["kernels"] for r in util if r["kernels"]} == dict(counts)
    assert all(0 <= r["gpu_util_pct"] <= 100 and r["kernel_busy_ns"] <= r["kernel_sum_ns"] for r in util)
    delay = reports.run(steps_db, "launch_delay", {"run": "mfu"}).to_pylist()
    assert Counter(r["delay_ns"] for r in delay) == Counter(d for _, _, _, d, _, _ in ind)
    idle = reports.run(steps_db, "idle_breakdown", {"run": "mfu", "iteration": "all"}).to_pylist()
    assert idle and all(r["idle_ns"] >= 0 for r in idle)


def test_perfetto_export_and_html_report(nsys_db, plain, tmp_path):
    from tracedb.present import html_report
    from tracedb.present import perfetto
    out = tmp_path / "p.json"
    perfetto.export(nsys_db, "mock", str(out))
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    (raw_k,), = q(plain["mock"], "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert sum(1 for e in events if e.get("cat") == "kernel") == raw_k
    ids = html_report.write(nsys_db, "h100_2gpu_1s", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    assert ids and "h100_2gpu_1s" in page


def test_renamed_nvtx_table_is_found(tmp_path, plain):
    """Schema drift: NVTX_EVENTS_V3 (a later export's name) is read like NVTX_EVENTS."""
    p = tmp_path / "renamed.sqlite"
    shutil.copy(plain["mfu_2gpu_before"], p)
    c = sqlite3.connect(p)
    c.execute("ALTER TABLE NVTX_EVENTS RENAME TO NVTX_EVENTS_V3")
    c.commit()
    c.close()
    con = db.connect(tmp_path / "d.duckdb")
    ingest_file(con, str(p))
    (raw,), = q(p, "SELECT count(*) FROM NVTX_EVENTS_V3 WHERE eventType = 59")
    got = con.execute("SELECT count(*) FROM events WHERE cat IN ('cpu_op', 'user_annotation')").fetchone()[0]
    assert got == raw > 0
    con.close()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "PATH": os.path.dirname(sys.executable)})


def test_missing_column_refused_in_one_line(tmp_path, plain):
    p = tmp_path / "nocorr.sqlite"
    shutil.copy(plain["mock"], p)
    c = sqlite3.connect(p)
    for (index,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall():
        c.execute(f'DROP INDEX "{index}"')      # (nsys-ai added indexes to its fixtures)
    c.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN correlationId")
    c.commit()
    c.close()
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", p)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    line, = r.stderr.strip().splitlines()
    assert str(p) in line and "CUPTI_ACTIVITY_KIND_KERNEL has no correlationId" in line and "nsys 2026.1.1.204" in line


def test_other_sqlite_refused_in_one_line(tmp_path):
    p = tmp_path / "other.sqlite"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE t (a)")
    c.commit()
    c.close()
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", p)
    assert r.returncode != 0
    line, = r.stderr.strip().splitlines()
    assert str(p) in line and "not an Nsight Systems export" in line


def test_nsys_rep_without_nsys_names_the_command(tmp_path):
    p = tmp_path / "prof.nsys-rep"
    p.write_bytes(b"\x00" * 64)
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", p)    # PATH holds only the venv: no nsys
    assert r.returncode != 0
    line, = r.stderr.strip().splitlines()
    assert "nsys export --type sqlite -o prof.sqlite" in line and str(p) in line


def test_reduced_export_without_optional_columns(nsys_db, plain):
    """healthy_1pct: an export cut down to 13 kernel columns (no globalPid, contextId,
    registers): loads, with what is missing left NULL."""
    got = nsys_db.execute("""SELECT count(*), count(registers_per_thread), count(context), count(launch_event_id)
        FROM kernels WHERE run = 'healthy_1pct'""").fetchone()
    (n,), = q(plain["healthy_1pct"], "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert got == (n, 0, 0, n)


def test_an_nsys_ingest_leaves_no_temp_relation_or_variable(nsys_db):
    left = nsys_db.execute("SELECT table_name FROM duckdb_tables() WHERE temporary UNION ALL "
                           "SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal").fetchall()
    assert left == [] and nsys_db.execute("SELECT count(*) FROM duckdb_variables()").fetchone()[0] == 0


def test_cli_line_and_ingest_log_name_the_nsys_version(tmp_path):
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", gz("mock"))
    assert r.returncode == 0 and "an Nsight Systems export of nsys 2026.1.1.204, export schema 3.24.14" in r.stdout
    con = db.connect(tmp_path / "d.duckdb")
    (msg,), = con.execute("SELECT message FROM ingest_log WHERE level = 'info'").fetchall()
    assert "written by nsys 2026.1.1.204, export schema 3.24.14" in msg
    con.close()


@pytest.fixture(scope="session")
def ranks_db(tmp_path_factory):
    """mfu_2gpu_before (torchrun, 2 processes) loaded as the two ranks of job mfu."""
    con = db.connect(tmp_path_factory.mktemp("nsys_ranks") / "r.duckdb")
    for rank in (0, 1):
        r = ingest_file(con, str(gz("mfu_2gpu_before")), run=f"mfu.rank{rank}",
                        options={"rank": rank, "job": "mfu"})
        assert r.status == "loaded"
    yield con
    con.close()


def test_each_process_of_a_report_is_a_rank(ranks_db, plain):
    """--rank N loads the process of the Nth lowest device alone: its kernels, copies
    and sets, with rank, world size and job."""
    p = plain["mfu_2gpu_before"]
    procs = q(p, "SELECT (globalPid >> 24) & 16777215, min(deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                 "GROUP BY 1 ORDER BY 2, 1")
    assert len(procs) == 2
    for rank, (pid, _) in enumerate(procs):
        run = f"mfu.rank{rank}"
        assert ranks_db.execute("SELECT rank, world_size, job FROM runs WHERE run = ?", [run]).fetchone() == (rank, 2, "mfu")
        for kind, table in (("kernel", "KERNEL"), ("memcpy", "MEMCPY"), ("memset", "MEMSET")):
            raw = q(p, f'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_{table} '
                       "WHERE (globalPid >> 24) & 16777215 = ?", [pid])[0]
            got = ranks_db.execute("SELECT count(*), sum(dur_ns) FROM kernels WHERE run = ? AND kind = ?",
                                   [run, kind]).fetchone()
            assert got == raw, (run, kind)
        (nvtx,), = q(p, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND (globalTid >> 24) & 16777215 = ?",
                     [pid])
        assert ranks_db.execute("SELECT count(*) FROM events WHERE run = ? AND cat IN ('cpu_op', 'user_annotation')",
                                [run]).fetchone()[0] == nvtx


def test_collectives_across_the_ranks_of_a_report(ranks_db, plain):
    """The NCCL kernels of each process are its rank's collectives, called in the
    same order on both ranks: collective_skew pairs each call across the 2 ranks."""
    p = plain["mfu_2gpu_before"]
    per_proc = q(p, """SELECT min(k.deviceId), count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s
        ON s.id = k.demangledName WHERE s.value LIKE 'ncclDevKernel%' OR s.value LIKE 'ncclKernel%'
        GROUP BY k.globalPid ORDER BY 1""")
    got = ranks_db.execute("SELECT count(*) FROM collectives GROUP BY run ORDER BY run").fetchall()
    assert [n for _, n in per_proc] == [n for n, in got] and per_proc[0][1] > 10
    skew = reports.run(ranks_db, "collective_skew", {"job": "mfu", "iteration": "all"}).to_pylist()
    calls = [r for r in skew if r["seq"] is not None]
    assert len(calls) == per_proc[0][1] and all(r["ranks"] == 2 for r in calls)


def test_a_report_of_several_processes_without_rank_warns(nsys_db):
    (msg,), = nsys_db.execute("SELECT message FROM ingest_log WHERE run = 'mfu_2gpu_before' "
                              "AND message LIKE '%processes ran GPU activity%'").fetchall()
    assert "pids 144, 145" in msg and "--rank N" in msg
    assert not nsys_db.execute("SELECT count(*) FROM ingest_log WHERE run = 'mock' "
                               "AND message LIKE '%processes ran GPU activity%'").fetchone()[0]


def test_rank_beyond_the_processes_is_one_line(tmp_path):
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", gz("mfu_2gpu_before"), "--rank", "2")
    assert r.returncode != 0
    line, = r.stderr.strip().splitlines()
    assert "--rank 2: the report has 2 processes with GPU activity" in line


def test_flops_from_emit_nvtx_shapes(tmp_path, plain):
    """emit_nvtx with record_shapes=True writes each op's input sizes into its range
    ("aten::addmm, seq = 5, op_id = 9, sizes = [[3072], [4096, 1536], [1536, 3072]]",
    PyTorch's getNvtxStr): they become the op's Input Dims, and FLOPs come from the
    same formulas as a record_shapes trace's. The fixture's run had record_shapes off,
    so a copy of it gets the sizes appended to its 336 aten::addmm ranges here."""
    p = tmp_path / "shapes.sqlite"
    shutil.copy(plain["mfu_2gpu_before"], p)
    c = sqlite3.connect(p)
    n = c.execute("UPDATE NVTX_EVENTS SET text = text || ', sizes = [[3072], [4096, 1536], [1536, 3072]]' "
                  "WHERE text LIKE 'aten::addmm, %'").rowcount
    c.commit()
    c.close()
    con = db.connect(tmp_path / "d.duckdb")
    ingest_file(con, str(p))
    rows = [r for r in reports.run(con, "flops_by_op", {"iteration": "all"}).to_pylist()
            if r["op_name"] == "aten::addmm" and r["source"] == "analytic"]
    assert n == 336 and [(r["calls"], r["flops"]) for r in rows] == [(n, n * 2 * 4096 * 1536 * 3072)]
    con.close()


def test_no_sizes_no_input_dims(nsys_db):
    """The fixtures' emit_nvtx ranges carry no sizes (record_shapes off): no op gets Input Dims."""
    n, dims = nsys_db.execute("SELECT count(*), count(args->>'Input Dims') FROM events WHERE run = 'mfu_2gpu_before' "
                              "AND cat = 'cpu_op'").fetchone()
    assert n > 10000 and dims == 0


def test_nsys_rep_is_exported_with_the_nsys_on_path(tmp_path, plain):
    """An .nsys-rep goes through `nsys export --type sqlite` of the nsys on PATH (here
    a stand-in that checks its arguments and writes the real export of mock)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stub = bindir / "nsys"
    stub.write_text("#!/bin/sh\n"
                    '[ "$1 $2 $3" = "export --type sqlite" ] || { echo "bad args: $*" >&2; exit 2; }\n'
                    'while [ $# -gt 1 ]; do [ "$1" = "-o" ] && out="$2"; shift; done\n'
                    f'cp "{plain["mock"]}" "$out"\n')
    stub.chmod(0o755)
    rep = tmp_path / "prof.nsys-rep"
    rep.write_bytes(b"not read by tracedb itself")
    r = subprocess.run([sys.executable, "-m", "tracedb.cli", "ingest", "--db", str(tmp_path / "d.duckdb"), str(rep)],
                       capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{bindir}:{os.path.dirname(sys.executable)}:/bin:/usr/bin"})
    assert r.returncode == 0, r.stderr
    assert "as run prof (trace:" in r.stdout and "nsys 2026.1.1.204" in r.stdout
    con = db.connect(tmp_path / "d.duckdb")
    (raw,), = q(plain["mock"], "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert con.execute("SELECT count(*) FROM kernels WHERE run = 'prof' AND kind = 'kernel'").fetchone()[0] == raw
    assert con.execute("SELECT metadata->>'source_format' FROM runs").fetchone()[0] == "nsys-rep"
    con.close()


def test_reports_of_one_rank_each_make_a_job(tmp_path, plain):
    """nsys started once per rank (torchrun ... nsys profile ...): each report's
    launch environment (META_DATA_CAPTURE, PROCESS_0) says RANK and WORLD_SIZE, and a
    directory of them is one job. The fixtures were launched without them, so copies
    of mock get the two variables here."""
    job = tmp_path / "ddp"
    job.mkdir()
    for rank in (0, 1):
        p = job / f"rank{rank}.sqlite"
        shutil.copy(plain["mock"], p)
        c = sqlite3.connect(p)
        c.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)",
                      [(f'RANK="{rank}"',), ('WORLD_SIZE="2"',)])
        c.commit()
        c.close()
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", job)
    assert r.returncode == 0, r.stderr
    con = db.connect(tmp_path / "d.duckdb")
    assert con.execute("SELECT run, rank, world_size, job FROM runs ORDER BY rank").fetchall() == [
        ("ddp.rank0", 0, 2, "ddp"), ("ddp.rank1", 1, 2, "ddp")]
    con.close()
    # the fixture itself (no RANK in its environment) has no rank
    assert nsys_rank_of(plain["mock"]) is None


def nsys_rank_of(path):
    from tracedb.ingest.nsys import Export, _launch_rank
    ex = Export(str(path), str(path))
    try:
        return _launch_rank(ex)
    finally:
        ex.close()


@pytest.mark.parametrize("name", ["h100_2gpu_1s", "mock"])
def test_gpu_streams_named_as_in_a_trace(nsys_db, plain, name):
    raw = set()
    for t in ("KERNEL", "MEMCPY", "MEMSET"):
        if q(plain[name], "SELECT 1 FROM sqlite_master WHERE name = ?", [f"CUPTI_ACTIVITY_KIND_{t}"]):
            raw |= set(q(plain[name], f"SELECT DISTINCT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_{t}"))
    gpus = dict(q(plain[name], "SELECT id, name FROM TARGET_INFO_GPU")) if name == "mock" else {}
    got = set(nsys_db.execute("SELECT pid, tid, process_name, thread_name FROM threads WHERE run = ? "
                              "AND thread_name LIKE 'stream %'", [name]).fetchall())
    assert got == {(str(d), str(s), f"GPU {d}" + (f": {gpus[d]}" if d in gpus else ""), f"stream {s}")
                   for d, s in raw} and raw


@pytest.mark.parametrize("page_after_root", [50, 200])
def test_a_damaged_page_is_one_line(tmp_path, plain, page_after_root):
    """A copy of h100_2gpu_1s with one page of its NVTX table overwritten: refused in
    one line, whether SQLite meets it before the load or during it; nothing loaded."""
    p = tmp_path / "damaged.sqlite"
    shutil.copy(plain["h100_2gpu_1s"], p)
    (root,), = q(p, "SELECT rootpage FROM sqlite_master WHERE name = 'NVTX_EVENTS'")
    (size,), = q(p, "PRAGMA page_size")
    with open(p, "r+b") as f:
        f.seek((root + page_after_root - 1) * size)
        f.write(b"\xff" * size)
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", p)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    line, = r.stderr.strip().splitlines()
    assert str(p) in line and "SQLite cannot read it (database disk image is malformed)" in line
    con = db.connect(tmp_path / "d.duckdb")
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    con.close()


def test_tables_of_unknown_names_found_by_their_columns(tmp_path, plain):
    """Schema drift: a kernel table under a name no nsys has used (GPU_KERNELS_NEXT)
    is found by what it holds (start, end, correlationId, gridX, blockX)."""
    p = tmp_path / "renamed.sqlite"
    shutil.copy(plain["h100_2gpu_1s"], p)
    c = sqlite3.connect(p)
    c.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO GPU_KERNELS_NEXT")
    c.commit()
    c.close()
    con = db.connect(tmp_path / "d.duckdb")
    ingest_file(con, str(p))
    raw = q(p, 'SELECT count(*), sum("end" - start) FROM GPU_KERNELS_NEXT')[0]
    assert con.execute("SELECT count(*), sum(dur_ns) FROM kernels WHERE kind = 'kernel'").fetchone() == raw
    meta = json.loads(con.execute("SELECT metadata FROM runs").fetchone()[0])
    assert meta["nsys_tables_read"]["kernel"] == "GPU_KERNELS_NEXT"
    con.close()


def test_profiler_step_ranges_are_iterations(tmp_path, plain):
    """PyTorch's ProfilerStep#N record_function ranges, as emit_nvtx names them
    ("ProfilerStep#7, op_id = 12"), are the iterations without --iterations-from.
    The fixtures' runs had no profiler schedule, so a copy of mfu_2gpu_before has
    its FlashAttnFunc ranges renamed ProfilerStep#100, #101, ... in time order."""
    p = tmp_path / "steps.sqlite"
    shutil.copy(plain["mfu_2gpu_before"], p)
    c = sqlite3.connect(p)
    ids = [r[0] for r in c.execute("SELECT rowid FROM NVTX_EVENTS WHERE text LIKE 'FlashAttnFunc, %' "
                                   "AND \"end\" IS NOT NULL ORDER BY start")]
    for i, rowid in enumerate(ids):
        c.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?", (f"ProfilerStep#{100 + i}, op_id = {i}", rowid))
    c.commit()
    b = base_ns(p)
    raw = q(p, f"""SELECT CAST(substr(text, 14, instr(text, ',') - 14) AS INTEGER), start + {b}, "end" + {b}
        FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%' ORDER BY start""")
    c.close()
    con = db.connect(tmp_path / "d.duckdb")
    ingest_file(con, str(p))
    got = con.execute("SELECT iteration, start_ns, marker_end_ns FROM iterations ORDER BY start_ns").fetchall()
    assert got == raw and len(raw) == len(ids) > 30 and raw[0][0] == 100
    con.close()


def test_an_export_with_no_cuda_activity_is_one_line(tmp_path):
    """jacc_report1 (a real export of a Julia run that recorded no CUDA activity):
    refused in one line that says it is an nsys export and what to profile."""
    r = _cli("ingest", "--db", tmp_path / "d.duckdb", NSYS / "jacc_report1.sqlite.gz")
    assert r.returncode != 0
    line, = r.stderr.strip().splitlines()
    assert ("an Nsight Systems export (nsys 2026.1.1.204, export schema 3.24.14) with no CUDA activity" in line
            and "--trace=cuda,nvtx" in line)


def test_a_memset_and_its_launch_in_an_older_schema(nsys_db, plain):
    """wb2_report1 (nsys 2025.5.1, export schema 3.23.3): its one memset, with bytes,
    memory kind and the cudaMemsetAsync call that launched it, as in the file."""
    b = base_ns(plain["wb2_report1"])
    (start, end, nbytes, rs, re_), = q(plain["wb2_report1"], """SELECT m.start, m."end", m.bytes, r.start, r."end"
        FROM CUPTI_ACTIVITY_KIND_MEMSET m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId""")
    got = nsys_db.execute("""SELECT k.kind, k.name, k.ts_ns, k.dur_ns, a.copy_bytes, a.dst_memory, k.launch_name,
        k.launch_ts_ns, k.launch_end_ns FROM kernels k JOIN activity_args a USING (run, kernel_id)
        WHERE k.run = 'wb2_report1'""").fetchall()
    assert got == [("memset", "Memset (Device)", start + b, end - start, nbytes, "Device", "cudaMemsetAsync",
                    rs + b, re_ + b)]
    assert json.loads(nsys_db.execute("SELECT metadata FROM runs WHERE run = 'wb2_report1'").fetchone()[0]
                      )["nsys_version"] == "2025.5.1.121"


def test_kernels_get_the_innermost_emit_nvtx_op_around_their_launch(nsys_db, plain):
    """Each launched kernel's op: the innermost emit_nvtx range (the latest-starting
    one) on the launching thread that holds the launch call's start."""
    import bisect
    from collections import defaultdict
    p = plain["h100_2gpu_1s"]
    ranges = defaultdict(list)
    for tid, start, end, text in q(p, """SELECT n.globalTid, n.start, n."end", coalesce(n.text, s.value)
            FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
            WHERE n.eventType = 59 AND coalesce(n.text, s.value) LIKE '%, op_id = %'"""):
        ranges[tid].append((start, end, text.split(", seq = ")[0].split(", op_id = ")[0]))
    for v in ranges.values():
        v.sort()
    raw = Counter()
    for tid, launch, kstart in q(p, """SELECT r.globalTid, r.start, k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
            AND (r.globalTid >> 24) = (k.globalPid >> 24)"""):
        v = ranges.get(tid, [])
        i = bisect.bisect_right(v, (launch, float("inf"), ""))
        held = [x for x in v[:i] if x[1] >= launch]
        raw[(kstart, max(held)[2] if held else None)] += 1
    b = base_ns(p)
    got = Counter((ts - b, op) for ts, op in nsys_db.execute(
        "SELECT ts_ns, op_name FROM kernels WHERE run = 'h100_2gpu_1s' AND kind = 'kernel' "
        "AND launch_event_id IS NOT NULL").fetchall())
    assert got == raw and sum(1 for (_, op) in raw if op) > 1000


def test_kernels_inserted_in_ranges_of_launch_order(nsys_db, tmp_path, monkeypatch):
    """An export's derivation is the trace's (ingest/trace.derive): more kernels than
    KERNEL_INSERT_ROWS (here 500) are inserted a range of launch order at a time, and give
    the same kernels as in one statement, the table in launch order."""
    from tracedb.ingest import trace
    monkeypatch.setattr(trace, "KERNEL_INSERT_ROWS", 500)
    ranges, real = [], trace.run_script

    def counted(con_, text, *a, **k):
        if text.lstrip().startswith("INSERT INTO kernels") and "tracedb_seq_from" in text:
            ranges.append(con_.execute("SELECT getvariable('tracedb_seq_from')").fetchone()[0])
        return real(con_, text, *a, **k)
    monkeypatch.setattr(trace, "run_script", counted)
    con = db.connect(tmp_path / "r.duckdb")
    try:
        ingest_file(con, str(gz("mfu_2gpu_before")))
        n = con.execute("SELECT count(*) FROM kernels WHERE run = 'mfu_2gpu_before'").fetchone()[0]
        assert n > 1500 and ranges == list(range(0, n, 500))
        seqs = [r for (r,) in con.execute("SELECT seq FROM kernels WHERE run = 'mfu_2gpu_before'").fetchall()]
        assert seqs == list(range(n))
        q = """SELECT count(*), sum(hash(kernel_id, kind, name, ts_ns, dur_ns, grid_x, launch_event_id, op_event_id,
               iteration, seq)) FROM kernels WHERE run = 'mfu_2gpu_before'"""
        assert con.execute(q).fetchone() == nsys_db.execute(q).fetchone()
    finally:
        con.close()


def test_worker_readers_from_a_script_read_on_stdin(nsys_db, tmp_path):
    """`python - < script` (a main module no spawned worker can load again): the export
    is read by the reading thread instead of worker processes, and loads the same
    events and kernels (before, every worker died starting and the ingest failed)."""
    script = f"""
import sys
from tracedb.ingest import nsys, ingest_file
from tracedb.store import db
nsys.PROCESS_READERS, nsys.PROCESS_MIN_ROWS, nsys.BATCH_ROWS = 2, 0, 4096
calls = []
real = nsys._in_processes
nsys._in_processes = lambda ranges: calls.append(real(ranges)) or calls[-1]
con = db.connect({str(tmp_path / "stdin.duckdb")!r})
r = ingest_file(con, {str(gz("mfu_2gpu_before"))!r})
print(r.status, calls)
"""
    out = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[0] == "loaded" and "[False]" in out.stdout
    con = db.connect(tmp_path / "stdin.duckdb", read_only=True)
    try:
        for q in ("SELECT count(*), sum(hash(event_id, name, ts_ns, dur_ns, correlation)) FROM events "
                  "WHERE run = 'mfu_2gpu_before'",
                  "SELECT count(*), sum(hash(kernel_id, name, ts_ns, launch_event_id, op_event_id, seq)) FROM kernels "
                  "WHERE run = 'mfu_2gpu_before'"):
            assert con.execute(q).fetchone() == nsys_db.execute(q).fetchone()
    finally:
        con.close()


@pytest.mark.parametrize("readers", [2, 0])
def test_reading_in_parts_loads_the_same_run(nsys_db, tmp_path, monkeypatch, readers):
    """The export read in rowid ranges of 4096 rows, by 2 worker processes (what a
    large export gets on a machine with cores to spare: each range staged as a file,
    each table loaded in parts of 10,000 rows or more, as a large table is loaded
    while the rest is read) or by the reading thread (each range's batch loaded
    alone), gives the same events (their ids too) and kernels as the whole tables
    read at once, and the same rows in every table of the run."""
    from tracedb.ingest import nsys
    monkeypatch.setattr(nsys, "PROCESS_READERS", readers)       # (TRACEDB_NSYS_READERS)
    monkeypatch.setattr(nsys, "PROCESS_MIN_ROWS", 0)
    monkeypatch.setattr(nsys, "BATCH_ROWS", 4096)
    monkeypatch.setattr(nsys, "LOAD_ROWS", 10000)
    calls, loads = [], []
    real, real_insert = nsys._in_processes, nsys._insert_files
    monkeypatch.setattr(nsys, "_in_processes", lambda ranges: calls.append(len(ranges)) or real(ranges))
    monkeypatch.setattr(nsys, "_insert_files", lambda con, sel, files, n, fields=None: loads.append(len(files))
                        or real_insert(con, sel, files, n, fields))
    con = db.connect(tmp_path / "p.duckdb")
    ingest_file(con, str(gz("mfu_2gpu_before")))
    digest = """SELECT count(*), sum(hash(event_id, ph, cat, name, pid, tid, ts_ns, dur_ns, correlation, stream, device,
                CAST(args AS VARCHAR))) FROM events WHERE run = 'mfu_2gpu_before'"""
    kernels = """SELECT count(*), sum(hash(kernel_id, kind, name, ts_ns, dur_ns, launch_event_id, op_event_id, seq))
                 FROM kernels WHERE run = 'mfu_2gpu_before'"""
    assert bool(calls) == (readers > 0) and all(n > 10 for n in calls)
    assert len([n for n in loads if n]) > 5
    assert max(loads) == (3 if readers else 1)       # (parts of 3 files of 4096 rows; a batch alone)
    assert con.execute(digest).fetchone() == nsys_db.execute(digest).fetchone()
    assert con.execute(kernels).fetchone() == nsys_db.execute(kernels).fetchone()
    # every table of the run, row for row (the derivation's too: threads, iterations, collectives ...)
    tables = [t for (t,) in con.execute(
        "SELECT table_name FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = 'main' "
        "AND column_name = 'run' AND table_name IN (SELECT table_name FROM duckdb_tables()) "
        "AND table_name NOT IN ('runs', 'ingest_log') ORDER BY table_name").fetchall()]
    assert {"events", "kernels", "threads", "collectives", "activity_args"} <= set(tables)
    for t in tables:
        rows = f"SELECT * EXCLUDE (run) FROM {t} WHERE run = 'mfu_2gpu_before' ORDER BY ALL"
        assert con.execute(rows).fetchall() == nsys_db.execute(rows).fetchall(), t
    con.close()


@pytest.mark.parametrize("name", ["mock", "rg_report1", "wb2_report1"])
def test_times_are_epoch_ns_within_the_session(nsys_db, plain, name):
    """nsys's times count from the session start (mock: its monotonic clock read
    515,396 s then, its first call is at 1.3 s): the run's events lie between the
    session's start (utcEpochNs) and its end (RUN_DURATION_MS later), epoch ns, as a
    Kineto trace's (so power logs align)."""
    (start,), = q(plain[name], "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    (ms,), = q(plain[name], "SELECT value FROM META_DATA_CAPTURE WHERE name = 'RUN_DURATION_MS'")
    lo, hi = nsys_db.execute("SELECT min(ts_ns), max(ts_ns + coalesce(dur_ns, 0)) FROM events WHERE run = ?",
                             [name]).fetchone()
    assert start < lo < hi <= start + int(ms) * 1_000_000
    assert nsys_db.execute("SELECT base_time_ns FROM runs WHERE run = ?", [name]).fetchone()[0] == start


def test_nvtx_start_end_ranges_marks_payloads_and_domain_names(tmp_path, plain):
    """The NVTX forms the fixtures lack, on a copy of mfu_2gpu_before: its ncclSend
    ranges made start/end ranges (eventType 60) ended on another thread, its
    ncclGroupStart ranges made marks (34), a payload on each ncclRecv, and the
    DomainCreate row (75) naming domain 1 "NCCL" that a whole capture has."""
    named = lambda n: f"(text = '{n}' OR textId IN (SELECT id FROM StringIds WHERE value = '{n}'))"
    p = tmp_path / "forms.sqlite"
    shutil.copy(plain["mfu_2gpu_before"], p)
    c = sqlite3.connect(p)
    c.execute("UPDATE NVTX_EVENTS SET eventType = 60, endGlobalTid = globalTid + 1 WHERE " + named("ncclSend"))
    c.execute("UPDATE NVTX_EVENTS SET eventType = 34, \"end\" = NULL WHERE " + named("ncclGroupStart"))
    c.execute("UPDATE NVTX_EVENTS SET int64Value = 4096 WHERE " + named("ncclRecv"))
    c.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, domainId, globalTid) "
              "SELECT 0, 75, 'NCCL', 1, min(globalTid) FROM NVTX_EVENTS")
    c.commit()
    c.close()
    con = db.connect(tmp_path / "d.duckdb")
    ingest_file(con, str(p))
    rows = lambda sql: con.execute(sql).fetchall()
    b = base_ns(p)
    sends = Counter(q(p, f"""SELECT start + {b}, "end" - start, (globalTid & 16777215) + 1 FROM NVTX_EVENTS
                            WHERE {named("ncclSend")}"""))
    assert Counter(rows("""SELECT ts_ns, dur_ns, CAST(args->>'end thread' AS BIGINT) FROM events
        WHERE name = 'ncclSend' AND ph = 'X' AND args->>'kind' = 'start/end'""")) == sends and len(sends) > 100
    (marks,), = q(p, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34")
    assert rows("SELECT count(*), count(dur_ns) FROM events WHERE name = 'ncclGroupStart' AND ph = 'i'") == [(marks, 0)]
    assert rows("SELECT DISTINCT args->>'payload', args->>'domain' FROM events WHERE name = 'ncclRecv'") == [
        ("4096", "NCCL")]
    assert rows("SELECT count(*) FROM events WHERE name = 'NCCL'") == [(0,)]      # (the DomainCreate row is no range)
    con.close()


@pytest.mark.parametrize("name, fmt", [("r.ncu-rep", "ncu-rep"), ("t.xplane.pb", "xplane")])
def test_the_nsys_sniff_leaves_binary_reports_to_their_readers(tmp_path, name, fmt):
    """The nsys reader, first in READERS, reads a file's first bytes itself: a binary
    report whose bytes look like UTF-16 (zeros at 1 and 3) still reaches the reader
    that knows it by name."""
    from tracedb.ingest.registry import detect
    p = tmp_path / name
    p.write_bytes(b"\x08\x00\x12\x00" + bytes(range(1, 200)))
    assert detect(str(p))[1] == fmt


@pytest.mark.parametrize("cap_mib", [8, 16])
def test_out_of_memory_is_said_not_hidden(tmp_path, monkeypatch, cap_mib):
    """An export that runs out of DuckDB's memory cap while it loads is refused with
    DuckDB's out-of-memory error, and nothing is left. The error aborts the transaction,
    and the next statement's "Current transaction is aborted" was what the user read (7
    of 9 ingests of 1 GB exports on the 16-core host said only that); on 2 cores a cap
    of 8 or 16 MiB gives it with this 2-GPU export."""
    from tracedb.store import tuning
    monkeypatch.setattr(tuning, "MEMORY_CAP", cap_mib << 20)
    con = db.connect(tmp_path / "m.duckdb")
    with pytest.raises(IngestError, match=r"h100_2gpu_1s\.sqlite\.gz: database error while loading "
                                          r"\(Out of Memory Error: .*\); nothing was loaded") as e:
        ingest_file(con, NSYS / "h100_2gpu_1s.sqlite.gz")
    assert "transaction is aborted" not in str(e.value)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 0


def test_a_plain_export_hashed_beside_its_load(tmp_path, plain):
    """An uncompressed export is hashed by a thread while it loads (no run of its size
    is there): the run's content hash is the file's sha256, computed here; a renamed
    copy of it, then, is hashed before its load (a run of its size is there) and
    skipped as the same content, and so is the same file given another run name."""
    import hashlib
    from tracedb.ingest import nsys
    threads = []
    real = nsys.started
    monkey = pytest.MonkeyPatch()
    monkey.setattr(nsys, "started", lambda fn, *a: threads.append(fn.__name__) or real(fn, *a))
    try:
        con = db.connect(tmp_path / "h.duckdb")
        first = ingest_file(con, str(plain["mock"]))
        assert first.status == "loaded" and "hash_file" in threads
        copy = tmp_path / "again.sqlite"
        shutil.copy(plain["mock"], copy)
        threads.clear()
        second = ingest_file(con, str(copy))
        third = ingest_file(con, str(plain["mock"]), run="other")
    finally:
        monkey.undo()
    assert "hash_file" not in threads
    assert (second.status, second.run, third.status) == ("skipped", "mock", "skipped")
    want = hashlib.sha256(plain["mock"].read_bytes()).hexdigest()
    assert con.execute("SELECT content_hash, content_bytes FROM runs").fetchall() == [
        (want, plain["mock"].stat().st_size)]
    con.close()


def test_the_run_is_in_the_database_file_when_the_ingest_returns(tmp_path):
    """The load checkpoints under its memory cap: nothing of the run waits in DuckDB's
    log for the connection's close (whose checkpoint runs under DuckDB's own limit),
    and a second connection reads the run from the file alone."""
    p = tmp_path / "w.duckdb"
    con = db.connect(p)
    r = ingest_file(con, str(gz("mfu_2gpu_before")))
    wal = Path(str(p) + ".wal")
    assert not wal.exists() or wal.stat().st_size < 64 << 10
    n = con.execute("SELECT count(*) FROM events WHERE run = ?", [r.run]).fetchone()[0]
    shutil.copy(p, tmp_path / "copy.duckdb")          # (the file alone, without its log)
    con.close()
    other = db.connect(tmp_path / "copy.duckdb", read_only=True)
    assert other.execute("SELECT count(*) FROM events WHERE run = ?", [r.run]).fetchone()[0] == n > 20000
    other.close()
