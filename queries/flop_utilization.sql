-- name: flop_utilization
-- topic: FLOPs
-- description: Model-FLOPs utilization (METHOD.md section 8) per run,
--   iteration and FLOP source: matrix FLOPs (matmul, convolution, attention:
--   the convention of model-FLOPs utilization) of the forward and backward
--   passes, the other FLOPs (elementwise, normalization, reductions,
--   optimizer), achieved TFLOP/s over the iteration and over its kernel-busy
--   time, and mfu_pct against the dense peak of the device (table peak_flops)
--   for the data type that carries most matrix FLOPs. The analytic rows of a
--   run an ingest with --op-totals summed per iteration (op_flop_totals) are
--   read from there while flop_formulas is unchanged; other runs' ops are swept.
-- steady: run
-- op_windows: iteration
-- iteration_all: sql, whole run
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL, also of a run without iterations, whose default it is); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace)
--   source VARCHAR: analytic | cupti | ncu
--   flops_fwd BIGINT: matrix FLOPs of the forward pass
--   flops_bwd BIGINT: matrix FLOPs of the backward pass
--   flops_total BIGINT: flops_fwd + flops_bwd
--   flops_other BIGINT: elementwise, normalization, reduction and optimizer FLOPs (and, for hardware sources, kernels outside matrix ops)
--   bwd_fwd_ratio DOUBLE: flops_bwd / flops_fwd (about 2 expected)
--   achieved_tflops DOUBLE: flops_total over the iteration time, TFLOP/s
--   achieved_tflops_busy DOUBLE: flops_total over the time a kernel runs, TFLOP/s
--   peak_tflops DOUBLE: dense peak of the device for dtype, TFLOP/s
--   mfu_pct DOUBLE: achieved_tflops / peak_tflops, %
--   dtype VARCHAR: data type whose peak is used (fp16, bf16, fp32, fp64, fp8): of the matrix ops' inputs, else the counters' largest kind
--   note VARCHAR: why a value is NULL, or what to keep in mind
-- requires:
--   events: trace events (tracedb ingest TRACE.json)
-- engines: duckdb, spark
WITH o AS (         -- the windows asked for (op_flop_sums_windows: op_flops_windows, stored
                    -- sums where an ingest with --op-totals made them); iteration NULL = the whole trace
    SELECT run, iteration, op_event_id, op_name, pass, category, dtype, source, calls, ops, counted, flops
    FROM op_flop_sums_windows
    WHERE ($run IS NULL OR run = $run)
      AND (($iteration IS NULL AND (steady OR no_iterations)) OR $iteration = 'all'
           OR iteration = CAST(CASE WHEN $iteration <> 'all' THEN $iteration END AS INTEGER))
), f AS (
    SELECT run, iteration, source,
           sum(CASE WHEN category = 'matrix' AND pass = 'forward' THEN flops END) AS fwd,
           sum(CASE WHEN category = 'matrix' AND pass = 'backward' THEN flops END) AS bwd,
           sum(CASE WHEN NOT (category = 'matrix' AND pass IN ('forward', 'backward')) THEN flops END) AS other,
           sum(counted) AS counted, sum(ops) AS ops
    FROM o GROUP BY run, iteration, source
), f2 AS (
    SELECT *, CASE WHEN fwd IS NOT NULL OR bwd IS NOT NULL THEN coalesce(fwd, 0) + coalesce(bwd, 0) END AS tot FROM f
), dt AS (      -- the data type with the most matrix FLOPs: analytic, else the counters'
    SELECT run, iteration, dtype FROM (
        SELECT run, iteration, dtype,
               row_number() OVER (PARTITION BY run, iteration
                                  ORDER BY max(CASE WHEN source = 'analytic' THEN 1 ELSE 0 END) DESC,
                                           sum(flops) DESC, dtype) AS k
        FROM o
        WHERE category = 'matrix' AND dtype IS NOT NULL
        GROUP BY run, iteration, dtype) x
    WHERE k = 1
), span AS (    -- the whole trace: first kernel start to last kernel end, and busy time
    -- (not computed when one iteration is asked: no whole-trace row then)
    SELECT k.run, max(k.ts_ns + k.dur_ns) - min(k.ts_ns) AS total_ns FROM kernels k
    WHERE k.kind = 'kernel' AND TRY_CAST($iteration AS INTEGER) IS NULL GROUP BY k.run
), busy AS (        -- kernel_busy_intervals summed per run (stored at ingest with --op-totals)
    SELECT run, busy_ns FROM run_kernel_busy WHERE TRY_CAST($iteration AS INTEGER) IS NULL
), t AS (
    SELECT s.run, s.iteration,
           CASE WHEN s.iteration IS NULL THEN sp.total_ns ELSE g.total_ns END AS total_ns,
           CASE WHEN s.iteration IS NULL THEN b.busy_ns ELSE g.kernel_busy_ns END AS busy_ns
    FROM (SELECT DISTINCT run, iteration FROM o) s     -- the windows that have ops
    LEFT JOIN (SELECT * FROM iteration_gpu_time     -- one iteration asked: only its time
               WHERE TRY_CAST($iteration AS INTEGER) IS NULL OR iteration = TRY_CAST($iteration AS INTEGER)) g
      ON g.run = s.run AND g.iteration = s.iteration
    LEFT JOIN span sp ON sp.run = s.run
    LEFT JOIN busy b ON b.run = s.run
), r AS (
    SELECT f.*, dt.dtype, t.total_ns, t.busy_ns, p.peak_tflops
    FROM f2 f
    LEFT JOIN dt ON dt.run = f.run AND dt.iteration IS NOT DISTINCT FROM f.iteration
    LEFT JOIN t ON t.run = f.run AND t.iteration IS NOT DISTINCT FROM f.iteration
    LEFT JOIN run_peak_flops p ON p.run = f.run AND p.dtype = dt.dtype
)
SELECT run, iteration, source,
       CAST(fwd AS BIGINT) AS flops_fwd, CAST(bwd AS BIGINT) AS flops_bwd, CAST(tot AS BIGINT) AS flops_total,
       CAST(other AS BIGINT) AS flops_other,
       round(bwd / nullif(fwd, 0), 3) AS bwd_fwd_ratio,
       round(tot / nullif(total_ns, 0) / 1e3, 3) AS achieved_tflops,
       round(tot / nullif(busy_ns, 0) / 1e3, 3) AS achieved_tflops_busy,
       peak_tflops,
       round(100 * tot / nullif(total_ns, 0) / 1e3 / peak_tflops, 2) AS mfu_pct,
       dtype,
       CASE WHEN counted = 0 THEN 'no FLOPs: the trace has no record_shapes'
            WHEN fwd IS NULL AND bwd IS NULL THEN 'no matrix FLOPs counted'
            WHEN dtype IS NULL THEN 'no dtype: the trace records no input types of matrix ops'
            WHEN peak_tflops IS NULL THEN 'no peak_flops row for this device and dtype'
            WHEN source = 'cupti' THEN 'CUPTI range profiling serializes and replays kernels: the times are those of the profiled run, not of normal execution'
            WHEN dtype = 'fp32' THEN 'fp32 peak of the CUDA cores; convolutions may run on TF32 tensor cores (cudnn.allow_tf32)'
            WHEN counted < ops THEN 'some ops lack shapes: their FLOPs are not counted'
        END AS note
FROM r
ORDER BY run, iteration NULLS LAST, source;
