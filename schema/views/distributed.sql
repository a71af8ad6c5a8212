-- includes: base

-- Distributed training: kernel classes, collectives' bandwidth, and the GPU
-- time of each rank split by which classes of kernel run at once. Per run
-- (the lake materializes them per run); what joins ranks of a job is in
-- views/jobs.sql. Documented in docs/schema.md ("distributed").

-- Bytes of one element of a PyTorch dtype as record_param_comms writes it
-- (Float, BFloat16 ...); NULL when unknown.
CREATE OR REPLACE MACRO dtype_bytes(dtype) AS
    CASE dtype
        WHEN 'Double' THEN 8 WHEN 'Long' THEN 8 WHEN 'ComplexFloat' THEN 8 WHEN 'ComplexDouble' THEN 16
        WHEN 'Float' THEN 4 WHEN 'Int' THEN 4 WHEN 'UInt32' THEN 4
        WHEN 'BFloat16' THEN 2 WHEN 'Half' THEN 2 WHEN 'Short' THEN 2 WHEN 'UInt16' THEN 2
        WHEN 'Byte' THEN 1 WHEN 'Char' THEN 1 WHEN 'Bool' THEN 1
        WHEN 'Float8_e4m3fn' THEN 1 WHEN 'Float8_e5m2' THEN 1 WHEN 'Float8_e4m3fnuz' THEN 1 WHEN 'Float8_e5m2fnuz' THEN 1
    END;

-- The collective of a PyTorch collective name (allreduce, _allgather_base,
-- reduce_scatter_tensor_coalesced ...) or of an NCCL kernel name: allreduce |
-- allgather | reducescatter | alltoall | broadcast | reduce | sendrecv | barrier.
CREATE OR REPLACE MACRO collective_type(name) AS
    CASE WHEN regexp_matches(name, '(?i)all[-_]?reduce') THEN 'allreduce'
         WHEN regexp_matches(name, '(?i)all[-_]?gather') THEN 'allgather'
         WHEN regexp_matches(name, '(?i)reduce[-_]?scatter') THEN 'reducescatter'
         WHEN regexp_matches(name, '(?i)all[-_]?to[-_]?all') THEN 'alltoall'
         WHEN regexp_matches(name, '(?i)broadcast') THEN 'broadcast'
         WHEN regexp_matches(name, '(?i)barrier') THEN 'barrier'
         WHEN regexp_matches(name, '(?i)send|recv') THEN 'sendrecv'
         WHEN regexp_matches(name, '(?i)reduce') THEN 'reduce'
    END;

-- busbw / algbw of a collective on n ranks (nccl-tests doc/PERFORMANCE.md).
CREATE OR REPLACE MACRO busbw_factor(ctype, n) AS
    CASE ctype WHEN 'allreduce' THEN 2.0 * (n - 1) / n
               WHEN 'allgather' THEN (n - 1.0) / n WHEN 'reducescatter' THEN (n - 1.0) / n
               WHEN 'alltoall' THEN (n - 1.0) / n
               WHEN 'broadcast' THEN 1.0 WHEN 'reduce' THEN 1.0 WHEN 'sendrecv' THEN 1.0 END;

-- The class of every trace kernel, memcpy and memset: communication when a
-- collectives row holds it, else the first kernel_class_rules row that
-- matches (by priority), else compute. Rules are tried on distinct
-- (kind, name) pairs only.
--
-- @column run           trace run
-- @column kernel_id     the GPU activity (kernels.kernel_id)
-- @column kind          kernel | memcpy | memset
-- @column name          name as the trace printed it
-- @column iteration     iteration it was launched in (kernels.iteration)
-- @column ts_ns         start, ns
-- @column dur_ns        duration, ns
-- @column stream        CUDA stream
-- @column kernel_class  compute | communication | memory: communication when a collectives row
--                       holds it, else the first matching kernel_class_rules row's, else compute
CREATE OR REPLACE VIEW kernel_classes AS
WITH combos AS (
    SELECT DISTINCT kind, name FROM kernels WHERE ts_ns IS NOT NULL
), typed AS (
    SELECT c.kind, c.name, r.kernel_class
    FROM combos c JOIN kernel_class_rules r
      ON regexp_matches(CASE r.field WHEN 'kind' THEN c.kind ELSE c.name END, r.pattern)
    QUALIFY row_number() OVER (PARTITION BY c.kind, c.name ORDER BY r.priority) = 1
)
SELECT k.run, k.kernel_id, k.kind, k.name, k.iteration, k.ts_ns, k.dur_ns, k.stream,
       CASE WHEN c.kernel_id IS NOT NULL THEN 'communication' ELSE coalesce(t.kernel_class, 'compute') END AS kernel_class
FROM kernels k
LEFT JOIN typed t ON t.kind = k.kind AND t.name = k.name
LEFT JOIN collectives c ON c.run = k.run AND c.kernel_id = k.kernel_id
WHERE k.ts_ns IS NOT NULL;

-- A digest of kernel_class_rules as it is: the stored class times (gpu_class_totals)
-- were cut under the rules whose digest they carry.
CREATE OR REPLACE MACRO kernel_class_rules_digest() AS (
    SELECT rows_digest((priority, field, pattern, kernel_class)) FROM kernel_class_rules);

-- The runs whose class times an ingest with --op-totals stored (gpu_class_totals) under
-- today's kernel_class_rules: gpu_class_time reads those rows instead of sweeping the run.
--
-- @column run  trace run with rows in gpu_class_totals cut under kernel_class_rules as it is
CREATE OR REPLACE VIEW gpu_class_stored_runs AS
SELECT DISTINCT run FROM gpu_class_totals WHERE rules = kernel_class_rules_digest();

-- gpu_class_segments_of(walked_only): the view gpu_class_segments (below); when walked_only,
-- of the runs not in gpu_class_stored_runs alone (the others left out before the sweep's
-- sorts).
CREATE OR REPLACE MACRO gpu_class_segments_of(walked_only) AS TABLE
WITH k AS (
    SELECT run, iteration, ts_ns AS s, ts_ns + dur_ns AS e, kernel_class AS c
    FROM kernel_classes WHERE dur_ns > 0
      AND NOT (walked_only AND run IN (SELECT run FROM gpu_class_stored_runs))
), scoped AS (
    SELECT run, iteration, s, e, c FROM k WHERE iteration IS NOT NULL
    UNION ALL
    SELECT run, CAST(NULL AS INTEGER), s, e, c FROM k
), points AS (
    SELECT run, iteration, s AS t, c, 1 AS d FROM scoped
    UNION ALL
    SELECT run, iteration, e AS t, c, -1 AS d FROM scoped
), deltas AS (
    SELECT run, iteration, t,
           sum(CASE WHEN c = 'compute' THEN d ELSE 0 END) AS d_comp,
           sum(CASE WHEN c = 'communication' THEN d ELSE 0 END) AS d_comm,
           sum(CASE WHEN c = 'memory' THEN d ELSE 0 END) AS d_mem
    FROM points GROUP BY run, iteration, t
), running AS (
    SELECT run, iteration, t AS start_ns,
           lead(t) OVER (PARTITION BY run, iteration ORDER BY t) AS end_ns,
           sum(d_comp) OVER (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING) AS n_comp,
           sum(d_comm) OVER (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING) AS n_comm,
           sum(d_mem) OVER (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING) AS n_mem
    FROM deltas
)
SELECT run, iteration, start_ns, end_ns, end_ns - start_ns AS dur_ns,
       n_comp > 0 AS compute, n_comm > 0 AS communication, n_mem > 0 AS memory
FROM running
WHERE end_ns > start_ns AND (n_comp > 0 OR n_comm > 0 OR n_mem > 0);

-- GPU time of each trace run cut where the set of running kernel classes
-- changes: one row per segment with which of compute, communication and
-- memory activity run during it (on any stream of the run's GPU). Rows with
-- an iteration cover the activity launched in that iteration; rows with
-- iteration NULL the whole trace (all activity, whatever its iteration).
-- Idle segments are left out. A sweep over start (+1) and end (-1) points.
--
-- @column run            trace run
-- @column iteration      iteration the segment's activity was launched in; NULL: a segment of
--                        the whole trace
-- @column start_ns       start of the segment, ns
-- @column end_ns         end of the segment, ns
-- @column dur_ns         end_ns - start_ns, ns
-- @column compute        activity of class compute runs during the segment (kernel_classes)
-- @column communication  activity of class communication runs during the segment
-- @column memory         activity of class memory (memcpy, memset, copies by name) runs during
--                        the segment
CREATE OR REPLACE VIEW gpu_class_segments AS SELECT * FROM gpu_class_segments_of(false);

-- Per trace run and iteration (iteration NULL: the whole trace) the time in
-- each exclusive state of kernel classes (HTA's kernel-type breakdown), the
-- busy time, and the window: the iteration (iterations.start_ns to end_ns) or,
-- for the whole trace, first GPU activity start to last end (HTA's temporal
-- breakdown window). The runs of gpu_class_stored_runs are read from
-- gpu_class_totals (stored at ingest with --op-totals), the others swept.
--
-- @column run                       trace run
-- @column iteration                 the iteration; NULL: the whole trace
-- @column window_ns                 the iteration's duration (iterations.dur_ns); the whole
--                                   trace: last GPU activity end - first start, ns
-- @column busy_ns                   time with any class running, ns
-- @column compute_only_ns           time with compute running alone, ns
-- @column communication_only_ns     time with communication running alone, ns
-- @column memory_only_ns            time with memory activity running alone, ns
-- @column compute_communication_ns  time with compute and communication running, no memory, ns
-- @column compute_memory_ns         time with compute and memory running, no communication, ns
-- @column communication_memory_ns   time with communication and memory running, no compute, ns
-- @column all_three_ns              time with all three running, ns
-- @column compute_ns                time with compute running, alone or not, ns
-- @column communication_ns          time with communication running, alone or not, ns
CREATE OR REPLACE VIEW gpu_class_time AS
WITH s AS (
    SELECT run, iteration,
           sum(dur_ns) AS busy_ns,
           sum(CASE WHEN compute AND NOT communication AND NOT memory THEN dur_ns ELSE 0 END) AS compute_only_ns,
           sum(CASE WHEN communication AND NOT compute AND NOT memory THEN dur_ns ELSE 0 END) AS communication_only_ns,
           sum(CASE WHEN memory AND NOT compute AND NOT communication THEN dur_ns ELSE 0 END) AS memory_only_ns,
           sum(CASE WHEN compute AND communication AND NOT memory THEN dur_ns ELSE 0 END) AS compute_communication_ns,
           sum(CASE WHEN compute AND memory AND NOT communication THEN dur_ns ELSE 0 END) AS compute_memory_ns,
           sum(CASE WHEN communication AND memory AND NOT compute THEN dur_ns ELSE 0 END) AS communication_memory_ns,
           sum(CASE WHEN compute AND communication AND memory THEN dur_ns ELSE 0 END) AS all_three_ns,
           sum(CASE WHEN compute THEN dur_ns ELSE 0 END) AS compute_ns,
           sum(CASE WHEN communication THEN dur_ns ELSE 0 END) AS communication_ns,
           min(start_ns) AS first_start_ns, max(end_ns) AS last_end_ns
    FROM gpu_class_segments_of(true) GROUP BY run, iteration
)
SELECT s.run, s.iteration,
       CAST(CASE WHEN s.iteration IS NULL THEN s.last_end_ns - s.first_start_ns ELSE i.dur_ns END AS BIGINT) AS window_ns,
       CAST(s.busy_ns AS BIGINT) AS busy_ns,
       CAST(s.compute_only_ns AS BIGINT) AS compute_only_ns,
       CAST(s.communication_only_ns AS BIGINT) AS communication_only_ns,
       CAST(s.memory_only_ns AS BIGINT) AS memory_only_ns,
       CAST(s.compute_communication_ns AS BIGINT) AS compute_communication_ns,
       CAST(s.compute_memory_ns AS BIGINT) AS compute_memory_ns,
       CAST(s.communication_memory_ns AS BIGINT) AS communication_memory_ns,
       CAST(s.all_three_ns AS BIGINT) AS all_three_ns,
       CAST(s.compute_ns AS BIGINT) AS compute_ns,
       CAST(s.communication_ns AS BIGINT) AS communication_ns
FROM s LEFT JOIN iterations i ON i.run = s.run AND i.iteration = s.iteration
UNION ALL           -- the runs stored at ingest (gpu_class_stored_runs): their rows
SELECT run, iteration, window_ns, busy_ns, compute_only_ns, communication_only_ns, memory_only_ns,
       compute_communication_ns, compute_memory_ns, communication_memory_ns, all_three_ns, compute_ns,
       communication_ns
FROM gpu_class_totals
WHERE busy_ns IS NOT NULL AND run IN (SELECT run FROM gpu_class_stored_runs);
