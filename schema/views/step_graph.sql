-- includes: trace_kernels, jobs

-- The step as a dependency graph (method.md, "Critical path and what-if"): the
-- nodes are the CPU events and the GPU activity of a trace, the edges say which
-- point of one (its start or its end) waits for which point of another. Views
-- over the tables, built by SQL when read (columnar, no copy at ingest): the
-- critical_path, critical_path_summary and what_if reports read them for one
-- run (or job) and iteration. Documented in docs/schema.md ("step_graph").

-- Whether a node of run starting at ts lies in the window the critical path reads:
-- always, unless analysis/critpath.py has set the DuckDB variable
-- tracedb_step_window ({lo, hi, runs}: one iteration and the one before it, for one
-- iteration's path, of the runs it reads, all runs where runs is NULL), where the
-- views then read only the events of those runs starting there (the window
-- functions of the edges sweep that much and not the whole run, nor the other
-- runs of the database).
CREATE OR REPLACE MACRO in_step_window(run, ts) AS
    getvariable('tracedb_step_window') IS NULL
    OR (ts >= getvariable('tracedb_step_window').lo AND ts <= getvariable('tracedb_step_window').hi
        AND (getvariable('tracedb_step_window').runs IS NULL
             OR list_contains(getvariable('tracedb_step_window').runs, run)));

-- The CPU nodes of the step graph (step_graph_nodes' CPU events without their
-- iteration), which step_graph_edges reads: the complete CPU events of framework ops,
-- user ranges and runtime/driver calls (cpu_events without Python frames) in the window.
--
-- @columns_from step_graph_nodes
CREATE OR REPLACE VIEW step_graph_cpu AS
SELECT run, event_id AS node_id,
       CASE level WHEN 'runtime' THEN 'runtime' WHEN 'user' THEN 'user' ELSE 'cpu op' END AS kind,
       name, pid, tid, CAST(NULL AS BIGINT) AS device, CAST(NULL AS BIGINT) AS stream,
       ts_ns AS start_ns, end_ns
FROM cpu_events WHERE level <> 'python' AND in_step_window(run, ts_ns);

-- Every node of the step graph: the complete CPU events of framework ops, user
-- ranges and runtime/driver calls (cpu_events without Python frames), and the
-- GPU activity of trace runs.
--
-- @column run        trace run
-- @column node_id    the event (events.event_id; for GPU activity kernels.kernel_id, the same number)
-- @column kind       cpu op | user (a record_function range, ProfilerStep#N) | runtime (a CUDA
--                    runtime or driver call) | kernel | memcpy | memset
-- @column name       event name as written
-- @column pid        CPU events: process, as written; GPU activity: NULL
-- @column tid        CPU events: thread, as written; GPU activity: NULL
-- @column device     GPU activity: its GPU (kernels.device); CPU events: NULL
-- @column stream     GPU activity: its CUDA stream; CPU events: NULL
-- @column start_ns   start, ns
-- @column end_ns     end, ns
-- @column iteration  GPU activity: the iteration of its launch (kernels.iteration), else (no launch
--                    linked) the iteration whose window holds its start; CPU events: the
--                    iteration whose window holds its start; NULL when none does
CREATE OR REPLACE VIEW step_graph_nodes AS
WITH cpu AS (
    SELECT * FROM step_graph_cpu
)
SELECT c.run, c.node_id, c.kind, c.name, c.pid, c.tid, c.device, c.stream, c.start_ns, c.end_ns,
       CASE WHEN c.start_ns <= i.end_ns THEN i.iteration END AS iteration
FROM cpu c ASOF LEFT JOIN iterations i ON i.run = c.run AND c.start_ns >= i.start_ns
UNION ALL
SELECT k.run, k.kernel_id, k.kind, k.name, NULL, NULL, k.device, k.stream, k.ts_ns, k.ts_ns + k.dur_ns,
       coalesce(k.iteration, CASE WHEN k.ts_ns <= i.end_ns THEN i.iteration END)
FROM (SELECT * FROM trace_kernels WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND in_step_window(run, ts_ns)) k
ASOF LEFT JOIN iterations i ON i.run = k.run AND k.ts_ns >= i.start_ns;

-- The dependencies between the nodes of one run: the point dst_id (its start,
-- or its end where dst_end) cannot come before the point src_id (start or end)
-- has come. A GPU activity's end also depends on its own start (its duration),
-- which is not listed. The kinds:
--   thread      consecutive points of one CPU thread (starts and ends of its events in time
--               order, a parent's start before its child's, a child's end before its parent's):
--               a thread does one thing at a time
--   launch      the runtime call (cudaLaunchKernel, cudaMemcpyAsync, cudaGraphLaunch ...) to
--               the GPU activity it launched (kernels.launch_event_id: correlation or flow
--               events; each node of a graph launch)
--   stream      the previous activity's end on the same GPU stream to the next one's start
--   sync        the GPU activity that ended last during a synchronizing call
--               (cuda/cu Device/Stream/Event/Ctx Synchronize, cudaMemcpy, cudaMemcpyAsync)
--               to that call's end: the call returned because it had ended (`.item()` is a
--               cudaMemcpyAsync DtoH and a cudaStreamSynchronize)
--   event_wait  cudaEventRecord then cudaStreamWaitEvent on one thread: the activity the
--               thread launched last before the record to the first one it launched after
--               the wait, when they are on different streams. Inferred: Kineto writes no
--               event handle on these calls
--   gpu_wait    a GPU activity that started more than 50 us after both its launch call's start
--               and its stream predecessor's end, from the activity of another stream of its
--               GPU that ended last before it started (after those two): the cross-stream
--               wait (an event another thread recorded) that the trace does not show. Inferred
--   fork, join  a thread launching GPU work that shows nothing while another such thread of
--               its process runs top-level ranges (the main thread inside loss.backward()
--               while the autograd engine's thread runs the backward): its last point
--               before the first such range to that range's start, the last one's end to
--               its next point. Inferred from times
--
-- @column run      trace run
-- @column src_id   the node waited for (step_graph_nodes.node_id)
-- @column src_end  true: the edge leaves src_id's end; false: its start
-- @column dst_id   the node that waits
-- @column dst_end  true: the edge enters dst_id's end; false: its start
-- @column kind     thread | launch | stream | sync | event_wait | gpu_wait | fork | join
-- @column gap_ns   time from the src point to the dst point as measured, ns
CREATE OR REPLACE VIEW step_graph_edges AS
WITH cpu AS (     -- (step_graph_nodes' CPU nodes: their iteration is not read here)
    SELECT run, node_id, pid, tid, start_ns, end_ns, kind, name FROM step_graph_cpu WHERE pid IS NOT NULL
), pts AS (
    SELECT run, pid, tid, node_id, false AS at_end, start_ns AS ts, 1 AS o, -end_ns AS o2 FROM cpu
    UNION ALL
    SELECT run, pid, tid, node_id, true, end_ns, CASE WHEN end_ns = start_ns THEN 2 ELSE 0 END, -start_ns FROM cpu
), npts AS (       -- the points numbered along each thread (one sort for thread, gpts)
    SELECT *, row_number() OVER w AS k, lag(node_id) OVER w AS l_id, lag(at_end) OVER w AS l_end,
           lag(ts) OVER w AS l_ts
    FROM pts WINDOW w AS (PARTITION BY run, pid, tid ORDER BY ts, o, o2, node_id)
), thread AS (
    SELECT run, l_id AS src_id, l_end AS src_end, node_id AS dst_id, at_end AS dst_end,
           'thread' AS kind, ts - l_ts AS gap_ns
    FROM npts WHERE l_id IS NOT NULL
), gpu AS (
    SELECT run, kernel_id, device, stream, ts_ns, ts_ns + dur_ns AS end_ns, launch_event_id, launch_ts_ns,
           launch_pid, launch_tid
    FROM trace_kernels WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND in_step_window(run, ts_ns)
), launch AS (
    SELECT g.run, g.launch_event_id, false, g.kernel_id, false, 'launch', g.ts_ns - g.launch_ts_ns
    FROM gpu g WHERE g.launch_event_id IS NOT NULL AND g.launch_ts_ns IS NOT NULL
), stream AS (
    SELECT run, lag(kernel_id) OVER w AS src_id, true, kernel_id, false, 'stream', ts_ns - lag(end_ns) OVER w
    FROM gpu WINDOW w AS (PARTITION BY run, device, stream ORDER BY ts_ns, kernel_id)
    QUALIFY lag(kernel_id) OVER w IS NOT NULL
), syncs AS (
    SELECT run, node_id, start_ns, end_ns, name FROM cpu
    WHERE kind = 'runtime'
      AND regexp_matches(name, '^cu(da)?(Device|Stream|Event|Ctx)Synchronize|^cu(da)?Memcpy|^cuMemcpy')
), own AS (        -- a copy call waits for the copy it launched
    SELECT s.run, g.kernel_id AS src_id, s.node_id AS dst_id, s.end_ns - g.end_ns AS gap_ns, g.end_ns
    FROM syncs s JOIN gpu g ON g.run = s.run AND g.launch_event_id = s.node_id
    WHERE g.end_ns > s.start_ns AND g.end_ns <= s.end_ns
), waited AS (     -- any other synchronizing call: the activity that ended last while it ran
    SELECT s.run, g.kernel_id AS src_id, s.node_id AS dst_id, s.end_ns - g.end_ns AS gap_ns, g.end_ns
    FROM syncs s ASOF JOIN (SELECT run, kernel_id, end_ns FROM gpu) g ON g.run = s.run AND s.end_ns >= g.end_ns
    WHERE g.end_ns > s.start_ns AND NOT regexp_matches(s.name, 'Memcpy')
), sync AS (
    SELECT run, src_id, true, dst_id, true, 'sync', gap_ns FROM own
    UNION ALL
    SELECT run, src_id, true, dst_id, true, 'sync', gap_ns FROM waited
), records AS (
    SELECT run, pid, tid, start_ns FROM cpu WHERE kind = 'runtime' AND regexp_matches(name, '^cu(da)?EventRecord')
), waits AS (
    SELECT run, pid, tid, node_id, start_ns, end_ns FROM cpu WHERE kind = 'runtime' AND regexp_matches(name, '^cu(da)?StreamWaitEvent')
), launched AS (
    SELECT run, launch_pid AS pid, launch_tid AS tid, launch_ts_ns, kernel_id, stream, ts_ns, end_ns FROM gpu
    WHERE launch_tid IS NOT NULL
), wr AS (
    SELECT w.*, r.start_ns AS record_ns FROM waits w
    ASOF JOIN records r ON r.run = w.run AND r.pid = w.pid AND r.tid = w.tid AND w.start_ns >= r.start_ns
), wsrc AS (
    SELECT wr.*, l.kernel_id AS src_id, l.stream AS src_stream, l.end_ns AS src_end_ns FROM wr
    ASOF JOIN launched l ON l.run = wr.run AND l.pid = wr.pid AND l.tid = wr.tid AND wr.record_ns >= l.launch_ts_ns
), event_wait AS (
    SELECT s.run, s.src_id, true, d.kernel_id, false, 'event_wait', d.ts_ns - s.src_end_ns
    FROM wsrc s ASOF JOIN launched d ON d.run = s.run AND d.pid = s.pid AND d.tid = s.tid AND d.launch_ts_ns >= s.end_ns
    WHERE d.stream IS DISTINCT FROM s.src_stream AND d.ts_ns >= s.src_end_ns   -- a later start disproves the pairing
), ready AS (      -- when each activity could have started by its launch and its stream
    SELECT run, kernel_id, device, stream, ts_ns,
           greatest(launch_ts_ns, lag(end_ns) OVER (PARTITION BY run, device, stream ORDER BY ts_ns, kernel_id)) AS ready_ns
    FROM gpu
), gpu_wait AS (
    SELECT k.run, o.kernel_id, true, k.kernel_id, false, 'gpu_wait', k.ts_ns - o.end_ns
    FROM ready k JOIN gpu o ON o.run = k.run AND o.device IS NOT DISTINCT FROM k.device AND o.stream <> k.stream
         AND o.end_ns <= k.ts_ns AND o.end_ns > coalesce(k.ready_ns, k.ts_ns - 50000)
    WHERE k.ts_ns - coalesce(k.ready_ns, k.ts_ns) > 50000 AND k.ready_ns IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY k.run, k.kernel_id ORDER BY o.end_ns DESC, o.kernel_id) = 1
), gthreads AS (
    SELECT DISTINCT run, launch_pid AS pid, launch_tid AS tid FROM gpu WHERE launch_tid IS NOT NULL
), tops AS (       -- top-level ranges of the threads that launch GPU work
    SELECT c.* FROM (
        SELECT c.*, max(end_ns) OVER (PARTITION BY run, pid, tid ORDER BY start_ns, end_ns DESC, node_id
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end
        FROM cpu c WHERE (run, pid, tid) IN (SELECT (run, pid, tid) FROM gthreads)
    ) c WHERE before_end IS NULL OR start_ns >= before_end
), gpts AS (       -- the points of those threads, numbered along each
    SELECT p.run, p.pid, p.tid, p.node_id, p.at_end, p.ts, p.o, p.o2, p.k
    FROM npts p WHERE (run, pid, tid) IN (SELECT (run, pid, tid) FROM gthreads)
), other AS (      -- each top-level range with each other such thread of its process
    SELECT t.run, t.pid, t.node_id AS t_id, t.start_ns AS t_start, t.end_ns AS t_end, g.tid AS a_tid
    FROM tops t JOIN gthreads g ON g.run = t.run AND g.pid = t.pid AND g.tid <> t.tid
), before AS (     -- that thread's last point before the range starts
    SELECT o.*, p.node_id AS p_id, p.at_end AS p_end, p.ts AS p_ts, p.k AS p_k
    FROM other o ASOF JOIN gpts p ON p.run = o.run AND p.pid = o.pid AND p.tid = o.a_tid AND o.t_start >= p.ts
), waiting AS (    -- and its first point after the range ends, when none lies between: it waited
    SELECT b.*, q.node_id AS q_id, q.at_end AS q_end, q.ts AS q_ts
    FROM before b ASOF JOIN gpts q ON q.run = b.run AND q.pid = b.pid AND q.tid = b.a_tid AND b.t_end <= q.ts
    WHERE q.k = b.p_k + 1
), fork AS (
    SELECT run, p_id, p_end, t_id, false, 'fork', t_start - p_ts FROM waiting
    QUALIFY row_number() OVER (PARTITION BY run, pid, a_tid, p_k ORDER BY t_start, t_id) = 1
), joins AS (
    SELECT run, t_id, true, q_id, q_end, 'join', q_ts - t_end FROM waiting
    QUALIFY row_number() OVER (PARTITION BY run, pid, a_tid, p_k ORDER BY t_end DESC, t_id) = 1
)
SELECT * FROM thread
UNION ALL SELECT * FROM launch
UNION ALL SELECT * FROM stream
UNION ALL SELECT * FROM sync
UNION ALL SELECT * FROM event_wait
UNION ALL SELECT * FROM gpu_wait
UNION ALL SELECT * FROM fork
UNION ALL SELECT * FROM joins;

-- The dependencies across the ranks of a job: a collective's kernel on each
-- rank cannot end before every rank of its process group has arrived (started
-- its kernel of that call; the call joined by process group and seq as in
-- collective_calls). One edge per rank and call, from the rank that arrived last.
--
-- @column job          the job (job_runs.job)
-- @column src_run      the rank that arrived last (its run)
-- @column src_id       its collective kernel (kernels.kernel_id); the edge leaves its start
-- @column dst_run      a rank of the call (its run)
-- @column dst_id       its collective kernel; the edge enters its end
-- @column process_group  process group of the call (collectives.process_group)
-- @column seq          sequence number of the call in its process group
-- @column gap_ns       the last arrival to this rank's kernel end, ns
CREATE OR REPLACE VIEW step_graph_rank_edges AS
WITH c AS (
    SELECT j.job, c.run, c.kernel_id, c.process_group, c.seq, c.ts_ns, c.ts_ns + c.dur_ns AS end_ns
    FROM collectives c JOIN job_runs j ON j.run = c.run
    WHERE c.seq IS NOT NULL
), last AS (
    SELECT * FROM c
    QUALIFY row_number() OVER (PARTITION BY job, process_group, seq ORDER BY ts_ns DESC, run) = 1
)
SELECT c.job, l.run AS src_run, l.kernel_id AS src_id, c.run AS dst_run, c.kernel_id AS dst_id,
       c.process_group, c.seq, c.end_ns - l.ts_ns AS gap_ns
FROM c JOIN last l ON l.job = c.job AND l.process_group = c.process_group AND l.seq = c.seq;
