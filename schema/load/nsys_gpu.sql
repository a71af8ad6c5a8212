-- The GPU rows of an Nsight Systems run (_gpu), in place of derive_trace.sql's own
-- statement for them (ingest/nsys.py runs derive_trace.sql with this one instead of
-- its CREATE ... _gpu): the same table, row for row, but the kernels' launch fields
-- are taken from the export's own columns (_nsys_gpu_fields, kept as each kernel
-- was loaded: nsys_rows.sql's section kernel_fields) and not parsed back out of the
-- args JSON that nsys_rows.sql built from those columns (the args of 2.2 M kernels
-- decompressed and searched for 26 paths: 0.85 s of the 1 GB export's derivation on
-- 16 cores). The values are those the JSON gives: the kernel section writes context,
-- grid, block, registers, shared memory (their sum, and each apart) and no occupancy,
-- copy or collective field, and an integer of the JSON cast back is that integer.
-- Other GPU rows (copies, sets, and any kernel the table lacks) are read as
-- derive_trace.sql reads them.
-- The names are held as an ENUM of the run's GPU activity names (_nsys_gpu_name; an
-- export has a few dozen, each a kernel's whole signature, 186 characters on average
-- in the 1 GB export): as text, _gpu held 832 MB for its 2.2 M rows under the load's
-- 1 GiB cap (406 MB so), and the kernels' insert sorted the names with the rows; it
-- writes them as text (the cast comes after its ORDER BY), collectives.sql compares
-- and trace_system.sql searches them as text (DuckDB casts an ENUM to VARCHAR there).
-- reads: _run_events, _xprof_streams, _nsys_gpu_fields
-- creates: _gpu (derive_trace.sql's), the type _nsys_gpu_name (ingest/nsys.py drops it after trace_system.sql)
-- (The names of both branches of g below, each found as its branch finds its rows: one
-- scan with an OR of them joined every event, 1.45 CPU s for the 1 GB export's 13 M, against 0.03.)
CREATE OR REPLACE TEMP TYPE _nsys_gpu_name AS ENUM (
    SELECT name FROM _run_events WHERE ph = 'X' AND name IS NOT NULL AND gpu_activity_kind(cat) IS NOT NULL
    UNION
    SELECT e.name FROM _run_events e JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND e.name IS NOT NULL);

CREATE OR REPLACE TEMP TABLE _gpu AS
WITH g AS (
    SELECT e.event_id, e.cat, e.name, e.ts_ns, e.dur_ns, e.correlation, e.stream, e.device, e.tid,
           x.tid AS x_tid, x.device AS x_device
    FROM _run_events e LEFT JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND gpu_activity_kind(e.cat) IS NOT NULL
    UNION ALL
    SELECT e.event_id, e.cat, e.name, e.ts_ns, e.dur_ns, e.correlation, e.stream, e.device, e.tid, x.tid, x.device
    FROM _run_events e JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND gpu_activity_kind(e.cat) IS NULL
), gj AS (       -- (the rows without fields, with their args: derive_trace.sql's g)
    SELECT e.*, x.tid AS x_tid, x.device AS x_device
    FROM _run_events e LEFT JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND gpu_activity_kind(e.cat) IS NOT NULL
      AND e.event_id NOT IN (SELECT event_id FROM _nsys_gpu_fields)
    UNION ALL
    SELECT e.*, x.tid, x.device
    FROM _run_events e JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND gpu_activity_kind(e.cat) IS NULL
      AND e.event_id NOT IN (SELECT event_id FROM _nsys_gpu_fields)
)
SELECT g.event_id, g.cat,
       coalesce(gpu_activity_kind(g.cat),
                CASE WHEN g.name ILIKE '%memcpy%' THEN 'memcpy'
                     WHEN g.name ILIKE '%memset%' THEN 'memset' ELSE 'kernel' END) AS kind,
       CAST(g.name AS _nsys_gpu_name) AS name, g.ts_ns, g.dur_ns,
       coalesce(g.device, g.x_device) AS device,
       coalesce(g.stream, CASE WHEN g.x_tid IS NOT NULL THEN TRY_CAST(g.tid AS BIGINT) END) AS stream,
       g.correlation,
       f.context,
       TRY_CAST(f.grid_x AS INTEGER) AS grid_x, TRY_CAST(f.grid_y AS INTEGER) AS grid_y,
       TRY_CAST(f.grid_z AS INTEGER) AS grid_z, TRY_CAST(f.block_x AS INTEGER) AS block_x,
       TRY_CAST(f.block_y AS INTEGER) AS block_y, TRY_CAST(f.block_z AS INTEGER) AS block_z,
       TRY_CAST(f.regs AS INTEGER) AS registers_per_thread,
       coalesce(f.ssm, 0) + coalesce(f.dsm, 0) AS shared_mem_bytes,
       f.ssm AS static_shared_mem_bytes, f.dsm AS dynamic_shared_mem_bytes,
       CAST(NULL AS VARCHAR[]) AS oa, CAST(NULL AS VARCHAR[]) AS ca
FROM g JOIN _nsys_gpu_fields f ON f.event_id = g.event_id
UNION ALL
-- derive_trace.sql's _gpu over the other rows (kept the same as it: tests/test_nsys_fast_exact.py)
SELECT event_id, cat, kind, CAST(name AS _nsys_gpu_name) AS name, ts_ns, dur_ns, device, stream, correlation,
       TRY_CAST(coalesce(a[1], a[10]) AS BIGINT) AS context,
       TRY_CAST(coalesce(a[2], regexp_extract(a[11], 'grid:(\d+),', 1)) AS INTEGER) AS grid_x,
       TRY_CAST(coalesce(a[3], regexp_extract(a[11], 'grid:\d+,(\d+),', 1)) AS INTEGER) AS grid_y,
       TRY_CAST(coalesce(a[4], regexp_extract(a[11], 'grid:\d+,\d+,(\d+)', 1)) AS INTEGER) AS grid_z,
       TRY_CAST(coalesce(a[5], regexp_extract(a[11], 'block:(\d+),', 1)) AS INTEGER) AS block_x,
       TRY_CAST(coalesce(a[6], regexp_extract(a[11], 'block:\d+,(\d+),', 1)) AS INTEGER) AS block_y,
       TRY_CAST(coalesce(a[7], regexp_extract(a[11], 'block:\d+,\d+,(\d+)', 1)) AS INTEGER) AS block_z,
       TRY_CAST(coalesce(a[8], regexp_extract(a[11], 'regs:(\d+)', 1)) AS INTEGER) AS registers_per_thread,
       coalesce(TRY_CAST(a[9] AS BIGINT),
                TRY_CAST(regexp_extract(a[11], 'static_shared:(\d+)', 1) AS BIGINT)
                + TRY_CAST(regexp_extract(a[11], 'dynamic_shared:(\d+)', 1) AS BIGINT)) AS shared_mem_bytes,
       TRY_CAST(coalesce(a[25], regexp_extract(a[11], 'static_shared:(\d+)', 1)) AS BIGINT) AS static_shared_mem_bytes,
       TRY_CAST(coalesce(a[26], regexp_extract(a[11], 'dynamic_shared:(\d+)', 1)) AS BIGINT) AS dynamic_shared_mem_bytes,
       CASE WHEN coalesce(a[12], a[13], a[14], a[15], a[16]) IS NOT NULL THEN a[12:16] END AS oa,
       CASE WHEN coalesce(a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24]) IS NOT NULL THEN a[17:24] END AS ca
FROM (
    SELECT g.event_id, g.cat, g.name, g.ts_ns, g.dur_ns, g.correlation,
           coalesce(g.stream, CASE WHEN g.x_tid IS NOT NULL THEN TRY_CAST(g.tid AS BIGINT) END) AS stream,
           coalesce(g.device, g.x_device) AS device,
           coalesce(gpu_activity_kind(g.cat),
                    CASE WHEN g.name ILIKE '%memcpy%' THEN 'memcpy'
                         WHEN g.name ILIKE '%memset%' THEN 'memset' ELSE 'kernel' END) AS kind,
           json_extract_string(g.args, ['$.context', '$.grid[0]', '$.grid[1]', '$.grid[2]',
                                        '$.block[0]', '$.block[1]', '$.block[2]',
                                        '$."registers per thread"', '$."shared memory"',
                                        '$.context_id', '$.kernel_details',
                                        '$."blocks per SM"', '$."warps per SM"', '$."est. achieved occupancy %"',
                                        '$.bytes', '$."memory bandwidth (GB/s)"',
                                        '$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                        '$."Process Group Ranks"', '$."Group size"', '$.dtype',
                                        '$."In msg nelems"', '$."Out msg nelems"',
                                        '$."static shared memory"', '$."dynamic shared memory"']) AS a
    FROM gj g
);
