-- Derive threads, kernels and iterations of one trace run from its events.
-- Parameter: $run VARCHAR. (Each event's iteration is the view event_iterations.)
-- Reads the run's events through the temp view _run_events (trace_events.sql);
-- writes threads, kernels and iterations; creates and drops its own temp tables.
-- reads: _run_events; variables tracedb_seq_from, tracedb_seq_to (the kernels' insert: a range of launch order, all when unset)
-- creates: _xprof_streams, _gpu_rows, _launch, _thread_key, _op, _depth, _launch_op, _launch_with_op, _seq, _marker, _gpu (and
--          the table macro _gpu_fields; _gpu_rows is a view; all dropped at its end but _gpu:
--          collectives.sql and trace_system.sql read it, the latter drops it)

-- Process and thread names (the last metadata event wins, as in the viewer).
INSERT INTO threads
WITH p AS (
    SELECT pid, arg_max(args->>'name', event_id) AS process_name
    FROM _run_events WHERE ph = 'M' AND name = 'process_name' GROUP BY pid
), t AS (
    SELECT pid, tid, arg_max(args->>'name', event_id) AS thread_name
    FROM _run_events WHERE ph = 'M' AND name = 'thread_name' GROUP BY pid, tid
)
SELECT $run, coalesce(t.pid, p.pid), t.tid, p.process_name, t.thread_name
FROM t FULL OUTER JOIN p ON t.pid = p.pid;

-- GPU activity of the run: Kineto categories, or (XProf: TensorFlow, JAX)
-- complete events on the stream threads of a /device:GPU:N process.
CREATE OR REPLACE TEMP TABLE _xprof_streams AS
SELECT pid, tid, TRY_CAST(regexp_extract(process_name, '^/device:GPU:(\d+)', 1) AS BIGINT) AS device
FROM threads
WHERE run = $run AND process_name LIKE '/device:GPU:%' AND thread_name LIKE 'Stream #%';

-- The run's GPU rows with their args (two branches, so that the category filter
-- reaches the scan and only the GPU rows' args are read; one branch with an OR over
-- the join read them all): the rows _gpu_fields reads, here all of them (nsys_gpu.sql
-- reads those its export gives no launch fields for, and takes the rest from the export).
CREATE OR REPLACE TEMP VIEW _gpu_rows AS
SELECT g.event_id, g.cat,
       coalesce(gpu_activity_kind(g.cat),
                CASE WHEN g.name ILIKE '%memcpy%' THEN 'memcpy'
                     WHEN g.name ILIKE '%memset%' THEN 'memset' ELSE 'kernel' END) AS kind,
       g.name, g.ts_ns, g.dur_ns,
       coalesce(g.device, g.x_device) AS device,
       coalesce(g.stream, CASE WHEN g.x_tid IS NOT NULL THEN TRY_CAST(g.tid AS BIGINT) END) AS stream,
       g.correlation, g.args
FROM (
    SELECT e.*, x.tid AS x_tid, x.device AS x_device
    FROM _run_events e LEFT JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND gpu_activity_kind(e.cat) IS NOT NULL
    UNION ALL
    SELECT e.*, x.tid, x.device
    FROM _run_events e JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND gpu_activity_kind(e.cat) IS NULL
) g;

-- The fields of the GPU rows of the view named by rows (_gpu_rows' columns), parsed
-- from their args, in the one place that reads them: the kernels table's typed launch
-- fields and two lists, NULL where all their fields are: oa, what trace_system.sql
-- keeps in activity_args (occupancy and copy fields), and ca, collectives.sql's
-- record_param_comms fields. Kept narrow: as a list of all 24 fields, the 2.5 M
-- GPU rows of a 10 GB trace took 1.3 GB and spilled (the kernels' insert 7.0 s).
CREATE OR REPLACE TEMP MACRO _gpu_fields(rows) AS TABLE
SELECT event_id, cat, kind, name, ts_ns, dur_ns, device, stream, correlation,
       -- Kineto's launch fields, else XProf's kernel_details text (a[11])
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
       -- (static and dynamic apart: an Nsight Systems export's kernels (nsys_rows.sql), else XProf's text)
       TRY_CAST(coalesce(a[25], regexp_extract(a[11], 'static_shared:(\d+)', 1)) AS BIGINT) AS static_shared_mem_bytes,
       TRY_CAST(coalesce(a[26], regexp_extract(a[11], 'dynamic_shared:(\d+)', 1)) AS BIGINT) AS dynamic_shared_mem_bytes,
       -- (any field of the slice, tested element by element: list_any_value over the slice
       -- built each row's list first, 10-15% of this statement's CPU)
       CASE WHEN coalesce(a[12], a[13], a[14], a[15], a[16]) IS NOT NULL THEN a[12:16] END AS oa,
       CASE WHEN coalesce(a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24]) IS NOT NULL THEN a[17:24] END AS ca
FROM (
    SELECT * EXCLUDE (args),
           json_extract_string(args, ['$.context', '$.grid[0]', '$.grid[1]', '$.grid[2]',
                                      '$.block[0]', '$.block[1]', '$.block[2]',
                                      '$."registers per thread"', '$."shared memory"',
                                      '$.context_id', '$.kernel_details',
                                      '$."blocks per SM"', '$."warps per SM"', '$."est. achieved occupancy %"',
                                      '$.bytes', '$."memory bandwidth (GB/s)"',
                                      '$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                      '$."Process Group Ranks"', '$."Group size"', '$.dtype',
                                      '$."In msg nelems"', '$."Out msg nelems"',
                                      '$."static shared memory"', '$."dynamic shared memory"']) AS a
    FROM query_table(rows)
);

-- GPU activity of the run with its fields (ingest/nsys.py runs nsys_gpu.sql in place of
-- this one statement).
CREATE OR REPLACE TEMP TABLE _gpu AS
SELECT * FROM _gpu_fields('_gpu_rows');

-- The launch call of each correlation id that has GPU activity (first call wins).
CREATE OR REPLACE TEMP TABLE _launch AS
SELECT correlation, event_id, name, ts_ns, ts_ns + coalesce(dur_ns, 0) AS end_ns, pid, tid
FROM _run_events
WHERE ph = 'X'
  AND (is_launch_category(cat) OR (cat IS NULL AND regexp_matches(name, '^cu(da)?(Launch|GraphLaunch|Memcpy|Memset)')))
  AND correlation IN (SELECT correlation FROM _gpu WHERE correlation IS NOT NULL)
QUALIFY row_number() OVER (PARTITION BY correlation ORDER BY ts_ns, event_id) = 1;

-- Threads that have ops or launches, as small integers (partitioning and joining on
-- them instead of the pid/tid strings saves 0.15 s on 2.2 M boundaries): those of the
-- launches and of the ops below (the same filter), before the ops are read.
CREATE OR REPLACE TEMP TABLE _thread_key AS
SELECT pid, tid, CAST(row_number() OVER () AS INTEGER) AS th
FROM (SELECT DISTINCT pid, tid FROM _run_events
      WHERE ph = 'X' AND is_framework_op_category(cat) AND dur_ns > 0
      UNION SELECT DISTINCT pid, tid FROM _launch);

-- Framework ops that can enclose something, each with its thread's number (joined
-- once here, not twice in _depth, and the pid/tid strings not copied: 8 M ops in a
-- 1 GB Nsight Systems export).
CREATE OR REPLACE TEMP TABLE _op AS
SELECT e.event_id, k.th, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns, e.name
FROM _run_events e
JOIN _thread_key k ON k.pid IS NOT DISTINCT FROM e.pid AND k.tid IS NOT DISTINCT FROM e.tid
WHERE e.ph = 'X' AND is_framework_op_category(e.cat) AND e.dur_ns > 0;

-- Nesting depth on each thread: ops open at each op start and at each launch.
-- At equal times ends come first (ord 0), then op starts (1: outer before inner),
-- then launches (2). The sorted rows are kept narrow (a small thread number, ord
-- standing for the step and the kind): the sort spills past the memory cap on a
-- 10 GB trace, and the wide rows (a delta and a flag besides) took 11 s there against 8.
CREATE OR REPLACE TEMP TABLE _depth AS
WITH b AS (
    SELECT th, ts_ns AS t, CAST(1 AS TINYINT) AS ord, -end_ns AS tie, event_id FROM _op
    UNION ALL
    SELECT th, end_ns, CAST(0 AS TINYINT), 0, event_id FROM _op
    UNION ALL
    SELECT k.th, l.ts_ns, CAST(2 AS TINYINT), 0, l.event_id
    FROM _launch l JOIN _thread_key k ON k.pid IS NOT DISTINCT FROM l.pid AND k.tid IS NOT DISTINCT FROM l.tid
)
SELECT th, t, event_id, ord = 1 AS is_op, open_after - CAST(ord = 1 AS INTEGER) AS depth
FROM (
    SELECT th, t, event_id, ord,
           sum(CASE ord WHEN 1 THEN 1 WHEN 0 THEN -1 ELSE 0 END)
               OVER (PARTITION BY th ORDER BY t, ord, tie, event_id ROWS UNBOUNDED PRECEDING) AS open_after
    FROM b)
WHERE ord <> 0;

-- Innermost enclosing op of a launch at depth d: the latest op start on the
-- thread at or before it whose own depth is d - 1; with that op's name and end
-- (joined here, where the launches are the small side: the kernels' insert joining
-- every op spilled its hash table, 6 s of 13 on a 10 GB trace).
CREATE OR REPLACE TEMP TABLE _launch_op AS
SELECT lo.launch_event_id, lo.op_event_id, op.name AS op_name, op.end_ns AS op_end_ns
FROM (
    SELECT p.event_id AS launch_event_id, o.event_id AS op_event_id
    FROM (SELECT *, depth - 1 AS parent_depth FROM _depth WHERE NOT is_op AND depth > 0) p
    ASOF JOIN (SELECT * FROM _depth WHERE is_op) o
        ON p.th = o.th AND p.parent_depth = o.depth AND p.t >= o.t
) lo
JOIN _op op ON op.event_id = lo.op_event_id;

-- The ops and their nesting are not read after this: let their memory go before the
-- sorts and joins below (a 10 GB trace's 8.8 M ops and 11 M boundaries, under the
-- load's 1 GiB cap).
DROP TABLE _depth;
DROP TABLE _thread_key;
DROP TABLE _op;

-- Iterations: PyTorch ProfilerStep#N on the CPU side, TensorFlow events with a step_num
-- (XProf events have no category: only those have their args searched). When the
-- ingest names a marker (--iterations-from NAME: DuckDB variable
-- tracedb_iteration_marker), the CPU-side events of that exact name are the
-- iterations instead (a record_function annotation or an op of traces without
-- ProfilerStep markers), numbered 0, 1, ... in time order; GPU-side copies of an
-- annotation (gpu_user_annotation) are left out, as for ProfilerStep.
-- The candidates come from exclusive branches (the named marker; ProfilerStep#N, with
-- or without a number in the name; XProf's step_num) so that each branch's filter
-- reaches the scan and args are read only where the step can come from them (a named
-- marker's step is its number in time order): one OR over all of them decompressed
-- every op's args (2.1 G instructions in a 1 GB trace's ingest), and args read for
-- each ProfilerStep marker still cost 0.6 G there, one zstd block per marker (3.5 s
-- for the 2,800 markers of a 10 GB trace).
CREATE OR REPLACE TEMP TABLE _marker AS
WITH c AS (
    SELECT event_id, name, ts_ns, dur_ns, CAST(NULL AS JSON) AS args FROM _run_events    -- (numbered: no step_num)
    WHERE ph = 'X' AND dur_ns IS NOT NULL AND ts_ns IS NOT NULL
      AND getvariable('tracedb_iteration_marker') IS NOT NULL AND name = getvariable('tracedb_iteration_marker')
      AND lower(coalesce(cat, '')) NOT IN ('gpu_user_annotation', 'kernel', 'gpu_memcpy', 'gpu_memset')
    UNION ALL
    SELECT event_id, name, ts_ns, dur_ns, CAST(NULL AS JSON) FROM _run_events
    WHERE ph = 'X' AND dur_ns IS NOT NULL AND ts_ns IS NOT NULL AND getvariable('tracedb_iteration_marker') IS NULL
      AND name LIKE 'ProfilerStep#%' AND lower(coalesce(cat, '')) <> 'gpu_user_annotation'
      AND TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) IS NOT NULL
    UNION ALL
    SELECT event_id, name, ts_ns, dur_ns, args FROM _run_events
    WHERE ph = 'X' AND dur_ns IS NOT NULL AND ts_ns IS NOT NULL AND getvariable('tracedb_iteration_marker') IS NULL
      AND name LIKE 'ProfilerStep#%' AND lower(coalesce(cat, '')) <> 'gpu_user_annotation'
      AND TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) IS NULL
    UNION ALL
    SELECT event_id, name, ts_ns, dur_ns, args FROM _run_events
    WHERE ph = 'X' AND dur_ns IS NOT NULL AND ts_ns IS NOT NULL AND getvariable('tracedb_iteration_marker') IS NULL
      AND cat IS NULL AND NOT coalesce(name LIKE 'ProfilerStep#%', false)
      AND contains(CAST(args AS VARCHAR), '"step_num"') AND args->>'step_num' IS NOT NULL
), m AS (
    SELECT event_id, name, ts_ns AS start_ns, ts_ns + dur_ns AS marker_end_ns,
           coalesce(TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER),
                    TRY_CAST(args->>'step_num' AS INTEGER)) AS marked_step,
           CAST(row_number() OVER (ORDER BY ts_ns, event_id) - 1 AS INTEGER) AS numbered
    FROM c
), s AS (
    SELECT event_id, name, start_ns, marker_end_ns,
           CASE WHEN getvariable('tracedb_iteration_marker') IS NOT NULL THEN numbered ELSE marked_step END AS step
    FROM m
)
SELECT * FROM s
QUALIFY step IS NOT NULL
    AND row_number() OVER (PARTITION BY step ORDER BY start_ns, event_id) = 1;

-- Launch order, numbered on the narrow key alone (a window over the wide rows cost
-- 0.5 s on 270 k kernels); the kernels are then written in that order (unordered,
-- the parallel insert left part-filled row groups that the next checkpoint rewrote;
-- and the rows' order decides the order in which reports add floating-point values).
-- And each kernel's iteration: the latest-starting marker that holds its launch (its
-- own start when it has no launch). The marker an ASOF join finds, the latest begun at
-- or before the launch, holds it unless markers nest or overlap; a launch past that
-- marker's end but within the reach of those before it (the latest end so far) is
-- looked up among them below. (An UPDATE of the inserted kernels by a range join with
-- the markers took 0.13-0.16 s more on 270 k kernels, and picked any one of several.)
CREATE OR REPLACE TEMP TABLE _seq AS
SELECT k.event_id, k.t, row_number() OVER (ORDER BY k.t, k.event_id) - 1 AS seq,
       CASE WHEN k.t <= m.marker_end_ns THEN m.step END AS iteration,
       k.t > m.marker_end_ns AND k.t <= m.reach_ns AS held_before
FROM (SELECT g.event_id, coalesce(l.ts_ns, g.ts_ns) AS t
      FROM _gpu g LEFT JOIN _launch l ON l.correlation = g.correlation) k
ASOF LEFT JOIN (SELECT *, max(marker_end_ns) OVER (ORDER BY start_ns) AS reach_ns FROM _marker) m
    ON k.t >= m.start_ns;

UPDATE _seq SET iteration = h.step
FROM (SELECT s.event_id, arg_max(m.step, (m.start_ns, m.step)) AS step
      FROM _seq s JOIN _marker m ON s.t BETWEEN m.start_ns AND m.marker_end_ns
      WHERE s.held_before
      GROUP BY s.event_id) h
WHERE _seq.event_id = h.event_id;

-- (Each launch with its op first, apart: three hash tables of every launch held at once
-- beside the sort needed over 850 MiB at 16 threads for the 2.2 M kernels of a 1 GB Nsight
-- Systems export, past the load's 1 GiB cap on a 16-core host; two need under 700.)
CREATE OR REPLACE TEMP TABLE _launch_with_op AS
SELECT l.correlation, l.event_id, l.name, l.ts_ns, l.end_ns, l.pid, l.tid,
       CASE WHEN lo.op_end_ns >= l.ts_ns THEN lo.op_event_id END AS op_event_id,
       CASE WHEN lo.op_end_ns >= l.ts_ns THEN lo.op_name END AS op_name
FROM _launch l LEFT JOIN _launch_op lo ON lo.launch_event_id = l.event_id;
DROP TABLE _launch_op;
DROP TABLE _launch;

INSERT INTO kernels
SELECT
    $run, g.event_id, g.kind, g.name, g.ts_ns, g.dur_ns, g.device, g.context, g.stream, g.correlation,
    g.grid_x, g.grid_y, g.grid_z, g.block_x, g.block_y, g.block_z, g.registers_per_thread,
    g.shared_mem_bytes, g.static_shared_mem_bytes, g.dynamic_shared_mem_bytes,
    l.event_id, l.name, l.ts_ns, l.end_ns, l.pid, l.tid, l.op_event_id, l.op_name, s.iteration, s.seq
FROM _gpu g
JOIN _seq s ON s.event_id = g.event_id
LEFT JOIN _launch_with_op l ON l.correlation = g.correlation
-- (ingest/trace.py inserts a large trace's kernels in ranges of launch order, each its
-- own sort: these variables, unset here for all of them at once)
WHERE s.seq >= coalesce(getvariable('tracedb_seq_from'), 0)
  AND s.seq < coalesce(getvariable('tracedb_seq_to'), 9223372036854775807)
ORDER BY s.seq;

INSERT INTO iterations
SELECT $run, m.step, m.name, m.event_id, m.start_ns, m.marker_end_ns,
       greatest(m.marker_end_ns, coalesce(max(k.ts_ns + k.dur_ns), m.marker_end_ns)) AS end_ns,
       greatest(m.marker_end_ns, coalesce(max(k.ts_ns + k.dur_ns), m.marker_end_ns)) - m.start_ns
FROM _marker m
LEFT JOIN kernels k ON k.run = $run AND k.iteration = m.step
GROUP BY m.step, m.name, m.event_id, m.start_ns, m.marker_end_ns;

DROP TABLE _seq;
DROP TABLE _xprof_streams;
DROP TABLE _launch_with_op;
DROP TABLE _marker;
DROP VIEW _gpu_rows;
DROP MACRO TABLE _gpu_fields;
