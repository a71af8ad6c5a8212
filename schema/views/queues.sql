-- includes: base

-- Runtime queues (method.md section 5): TensorFlow eager execution phases and
-- queue, and CUDA launch queues. Documented in docs/schema.md ("queues").

-- Eager execution mode of each TensorFlow run: async when the kernels run on
-- an eager_async_executor thread, sync when they run on the Python thread.
--
-- @column run   trace run with EagerKernelExecute events (TensorFlow eager)
-- @column mode  async | sync
CREATE OR REPLACE VIEW eager_mode AS
SELECT e.run, CASE WHEN bool_or(t.thread_name LIKE 'eager_async_executor%') THEN 'async' ELSE 'sync' END AS mode
FROM events e JOIN threads t ON t.run = e.run AND t.pid = e.pid AND t.tid = e.tid
WHERE e.ph = 'X' AND e.name = 'EagerKernelExecute'
GROUP BY e.run;

-- One row per eager op node: enqueue (Python thread: from the enclosing
-- TFE_Py_FastPathExecute_C / TFE_Py_ExecuteCancelable, else EagerExecute, to
-- the end of EagerExecute), dequeue (EagerKernelExecute), the CPU kernel call
-- inside it (KernelAndDeviceFunc::Run) and the GPU kernels it launched.
-- Async: the k-th enqueued node is the k-th dequeued (FIFO); the node enters
-- the queue inside EagerExecute, so when the executor starts it before
-- EagerExecute returns (12% of the nodes of the ResNet-50 fixture) its wait
-- is 0. Sync: the EagerKernelExecute runs inside its EagerExecute, on the
-- same thread, and there is no queue.
--
-- @column run               trace run (TensorFlow eager)
-- @column mode              the run's eager mode: async | sync (eager_mode)
-- @column node              position of the node's EagerExecute in the run by start, from 1
-- @column enqueue_event_id  the EagerExecute event (events.event_id)
-- @column dequeue_event_id  the EagerKernelExecute event paired with it (events.event_id)
-- @column op                the eager op (EagerExecute's args.eager_op)
-- @column enqueue_start_ns  start of the enqueue: of the enclosing TFE_Py_FastPathExecute_C /
--                           TFE_Py_ExecuteCancelable, else of the EagerExecute, ns
-- @column enqueue_end_ns    end of the EagerExecute, ns
-- @column dequeue_start_ns  start of the EagerKernelExecute, ns
-- @column dequeue_end_ns    end of the EagerKernelExecute, ns
-- @column enqueue_ns        enqueue time, ns: enqueue_end_ns - enqueue_start_ns (sync: less the
--                           EagerKernelExecute inside it)
-- @column queue_wait_ns     async: time from the end of the enqueue to the start of the dequeue,
--                           0 when the dequeue starts first, ns; NULL for sync
-- @column dequeue_ns        EagerKernelExecute time less cpu_exec_ns, ns
-- @column cpu_exec_ns       summed duration of the KernelAndDeviceFunc::Run calls inside the
--                           EagerKernelExecute, on its thread, ns
-- @column gpu_exec_ns       summed duration of the GPU kernels launched from inside the
--                           EagerKernelExecute, on its thread, ns
-- @column copy_ns           summed duration of the memcpy and memset launched from inside the
--                           EagerKernelExecute, on its thread, ns
CREATE OR REPLACE VIEW eager_nodes AS
WITH enq0 AS (
    SELECT e.run, e.event_id, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
           e.args->>'eager_op' AS op, m.mode
    FROM events e JOIN eager_mode m USING (run)
    WHERE e.ph = 'X' AND e.name = 'EagerExecute'
), fast AS (
    SELECT run, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns FROM events
    WHERE ph = 'X' AND name IN ('TFE_Py_FastPathExecute_C', 'TFE_Py_ExecuteCancelable')
      AND run IN (SELECT run FROM eager_mode)
), enq AS (
    SELECT enq0.*, CASE WHEN f.end_ns >= enq0.end_ns THEN f.ts_ns ELSE enq0.ts_ns END AS enq_start,
           row_number() OVER (PARTITION BY enq0.run ORDER BY enq0.ts_ns, enq0.event_id) AS n
    FROM enq0 ASOF LEFT JOIN fast f
      ON f.run = enq0.run AND f.pid = enq0.pid AND f.tid = enq0.tid AND enq0.ts_ns >= f.ts_ns
), deq AS (
    SELECT e.run, e.event_id, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
           row_number() OVER (PARTITION BY e.run ORDER BY e.ts_ns, e.event_id) AS n
    FROM events e WHERE e.ph = 'X' AND e.name = 'EagerKernelExecute' AND e.run IN (SELECT run FROM eager_mode)
), cpu AS (     -- CPU kernel calls, each given to the dequeue that holds it
    SELECT d.run, d.event_id AS deq_id, sum(r.dur_ns) AS cpu_ns
    FROM (SELECT run, pid, tid, ts_ns, dur_ns FROM events
          WHERE ph = 'X' AND name = 'KernelAndDeviceFunc::Run' AND run IN (SELECT run FROM eager_mode)) r
    ASOF JOIN deq d ON d.run = r.run AND d.pid = r.pid AND d.tid = r.tid AND r.ts_ns >= d.ts_ns
    WHERE r.ts_ns + r.dur_ns <= d.end_ns
    GROUP BY d.run, d.event_id
), gpu AS (     -- GPU activity launched from inside a dequeue
    SELECT d.run, d.event_id AS deq_id, sum(k.dur_ns) FILTER (k.kind = 'kernel') AS gpu_ns,
           sum(k.dur_ns) FILTER (k.kind <> 'kernel') AS copy_ns
    FROM (SELECT run, launch_pid AS pid, launch_tid AS tid, launch_ts_ns, kind, dur_ns FROM kernels
          WHERE launch_ts_ns IS NOT NULL AND run IN (SELECT run FROM eager_mode)) k
    ASOF JOIN deq d ON d.run = k.run AND d.pid = k.pid AND d.tid = k.tid AND k.launch_ts_ns >= d.ts_ns
    WHERE k.launch_ts_ns <= d.end_ns
    GROUP BY d.run, d.event_id
), paired AS (
    SELECT enq.*, d.event_id AS deq_id, d.ts_ns AS deq_start, d.end_ns AS deq_end
    FROM enq JOIN deq d ON d.run = enq.run AND d.n = enq.n
    WHERE enq.mode = 'async'
    UNION ALL
    SELECT enq.*, d.event_id, d.ts_ns, d.end_ns
    FROM enq ASOF JOIN deq d ON d.run = enq.run AND d.pid = enq.pid AND d.tid = enq.tid AND d.ts_ns >= enq.ts_ns
    WHERE enq.mode = 'sync' AND d.end_ns <= enq.end_ns
)
SELECT p.run, p.mode, p.n AS node, p.event_id AS enqueue_event_id, p.deq_id AS dequeue_event_id, p.op,
       p.enq_start AS enqueue_start_ns, p.end_ns AS enqueue_end_ns, p.deq_start AS dequeue_start_ns,
       p.deq_end AS dequeue_end_ns,
       CASE WHEN p.mode = 'sync' THEN (p.end_ns - p.enq_start) - (p.deq_end - p.deq_start)
            ELSE p.end_ns - p.enq_start END AS enqueue_ns,
       CASE WHEN p.mode = 'async' THEN greatest(p.deq_start - p.end_ns, 0) END AS queue_wait_ns,
       (p.deq_end - p.deq_start) - coalesce(c.cpu_ns, 0) AS dequeue_ns,
       coalesce(c.cpu_ns, 0) AS cpu_exec_ns, coalesce(g.gpu_ns, 0) AS gpu_exec_ns,
       coalesce(g.copy_ns, 0) AS copy_ns
FROM paired p LEFT JOIN cpu c ON c.run = p.run AND c.deq_id = p.deq_id
LEFT JOIN gpu g ON g.run = p.run AND g.deq_id = p.deq_id;

-- Whether an interval [start_ns, end_ns] of run overlaps the segment window a
-- report asked for: always, unless reports.run has set the DuckDB variable
-- tracedb_segment_windows ({start_ns, end_ns, runs: MAP of run -> {start_ns,
-- end_ns}}) for a report that reads activity_segments only in some iterations
-- (windows.py says why their segments come out the same); a run without a
-- window is then left out. The outer bounds span every run's window: a
-- constant the scans skip row groups with.
CREATE OR REPLACE MACRO in_segment_window(run, start_ns, end_ns) AS
    getvariable('tracedb_segment_windows') IS NULL
    OR (start_ns <= getvariable('tracedb_segment_windows').end_ns
        AND end_ns >= getvariable('tracedb_segment_windows').start_ns
        AND start_ns <= getvariable('tracedb_segment_windows').runs[run].end_ns
        AND end_ns >= getvariable('tracedb_segment_windows').runs[run].start_ns);

-- activity_segments_of(walked_only): the view activity_segments (below); when walked_only,
-- of the runs not in kernel_stored_runs (the others left out before the sweep's sorts).
CREATE OR REPLACE MACRO activity_segments_of(walked_only) AS TABLE
WITH it AS (SELECT run, iteration, start_ns, end_ns FROM iterations),
iv AS (
    SELECT * FROM (
        SELECT run, 'queue' AS k, enqueue_end_ns AS s, dequeue_start_ns AS e FROM eager_nodes
        WHERE mode = 'async' AND dequeue_start_ns > enqueue_end_ns
        UNION ALL SELECT run, 'deq', dequeue_start_ns, dequeue_end_ns FROM eager_nodes)
    WHERE s IS NULL OR e IS NULL OR in_segment_window(run, s, e)     -- (an open end runs on: kept)
    UNION ALL SELECT run, CASE WHEN kind = 'kernel' THEN 'gpu' ELSE 'copy' END, ts_ns, ts_ns + dur_ns
              FROM kernels WHERE ts_ns IS NOT NULL AND dur_ns > 0 AND in_segment_window(run, ts_ns, ts_ns + dur_ns)
    UNION ALL SELECT run, 'cpu', ts_ns, ts_ns + dur_ns FROM events
              WHERE ph = 'X' AND dur_ns > 0 AND name IN ('KernelAndDeviceFunc::Run', 'ThreadpoolListener::Region')
                AND in_segment_window(run, ts_ns, ts_ns + dur_ns)
), b AS (
    SELECT run, s AS t, k, 1 AS d FROM iv UNION ALL SELECT run, e, k, -1 FROM iv
    UNION ALL SELECT run, start_ns, 'edge', 0 FROM it UNION ALL SELECT run, end_ns, 'edge', 0 FROM it
), pts AS (
    SELECT run, t, sum(d) FILTER (k = 'queue') AS dq, sum(d) FILTER (k = 'deq') AS dd,
           sum(d) FILTER (k = 'gpu') AS dg, sum(d) FILTER (k = 'copy') AS dm, sum(d) FILTER (k = 'cpu') AS dc
    FROM b WHERE NOT (walked_only AND run IN (SELECT run FROM kernel_stored_runs))
    GROUP BY run, t
), st AS (
    SELECT run, t AS start_ns, lead(t) OVER w AS end_ns,
           sum(coalesce(dq, 0)) OVER w2 AS queued, sum(coalesce(dd, 0)) OVER w2 AS dequeuing,
           sum(coalesce(dg, 0)) OVER w2 AS gpu, sum(coalesce(dm, 0)) OVER w2 AS copy,
           sum(coalesce(dc, 0)) OVER w2 AS cpu
    FROM pts
    WINDOW w AS (PARTITION BY run ORDER BY t), w2 AS (PARTITION BY run ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT st.run, it.iteration, st.start_ns, st.end_ns, st.end_ns - st.start_ns AS dur_ns,
       st.queued, st.dequeuing > 0 AS dequeuing, st.gpu > 0 AS gpu_kernel, st.copy > 0 AS memory_transfer,
       st.cpu > 0 AS cpu_kernel,
       CASE WHEN st.gpu > 0 THEN 'gpu_kernel' WHEN st.cpu > 0 THEN 'cpu_kernel'
            WHEN st.dequeuing > 0 THEN 'dequeuing' WHEN st.copy > 0 THEN 'memory_transfer'
            ELSE 'waiting' END AS category
FROM st ASOF JOIN it ON it.run = st.run AND st.start_ns >= it.start_ns
WHERE st.end_ns IS NOT NULL AND st.end_ns <= it.end_ns AND st.end_ns > st.start_ns;

-- Elementary time segments of each iteration with what is going on in them:
-- how many nodes wait in the eager queue, and whether a GPU kernel, a CPU
-- kernel (KernelAndDeviceFunc::Run, Eigen thread-pool regions), a dequeue or
-- a memory transfer runs. Boundaries of every interval cut the timeline; a
-- running sum per kind gives the state of each segment.
--
-- @column run              trace run
-- @column iteration        iteration whose window (iterations.start_ns to end_ns) holds the segment
-- @column start_ns         start of the segment, ns
-- @column end_ns           end of the segment, ns
-- @column dur_ns           end_ns - start_ns, ns
-- @column queued           number of eager nodes waiting in the queue (async: from the end of
--                          their enqueue to the start of their dequeue)
-- @column dequeuing        an EagerKernelExecute runs
-- @column gpu_kernel       a GPU kernel runs (any stream)
-- @column memory_transfer  a memcpy or memset runs
-- @column cpu_kernel       a CPU kernel runs (KernelAndDeviceFunc::Run or
--                          ThreadpoolListener::Region)
-- @column category         the first that holds of gpu_kernel, cpu_kernel, dequeuing,
--                          memory_transfer; else waiting
CREATE OR REPLACE VIEW activity_segments AS SELECT * FROM activity_segments_of(false);

-- Time of each iteration by whether CPU kernels (KernelAndDeviceFunc::Run, Eigen
-- thread-pool regions) and GPU kernels run (activity_segments summed; time_breakdown
-- reads it): the rows an ingest with --op-totals stored (kernel_iteration_totals) for
-- the runs of kernel_stored_runs, the sweep of the others. An iteration without a
-- segment has no row.
--
-- @column run            trace run
-- @column iteration      iteration (activity_segments.iteration)
-- @column cpu_kernel_ns  a CPU kernel and no GPU kernel running, ns (NULL: no such segment)
-- @column gpu_kernel_ns  a GPU kernel and no CPU kernel running, ns (NULL: none)
-- @column overlap_ns     both running, ns (NULL: none)
-- @column overhead_ns    neither running, ns (NULL: none)
CREATE OR REPLACE VIEW iteration_kernel_overlap AS
SELECT run, iteration,
       sum(dur_ns) FILTER (cpu_kernel AND NOT gpu_kernel) AS cpu_kernel_ns,
       sum(dur_ns) FILTER (gpu_kernel AND NOT cpu_kernel) AS gpu_kernel_ns,
       sum(dur_ns) FILTER (cpu_kernel AND gpu_kernel) AS overlap_ns,
       sum(dur_ns) FILTER (NOT cpu_kernel AND NOT gpu_kernel) AS overhead_ns
FROM activity_segments_of(true)
GROUP BY run, iteration
UNION ALL
SELECT run, iteration, cpu_kernel_ns, gpu_kernel_ns, overlap_ns, overhead_ns FROM kernel_iteration_totals
WHERE iteration IS NOT NULL
  AND (cpu_kernel_ns IS NOT NULL OR gpu_kernel_ns IS NOT NULL OR overlap_ns IS NOT NULL OR overhead_ns IS NOT NULL);
