-- name: flop_utilization
-- description: Model-FLOPs utilization (METHOD.md section 8) per run,
--   iteration and FLOP source: matrix FLOPs (matmul, convolution, attention:
--   the convention of model-FLOPs utilization) of the forward and backward
--   passes, the other FLOPs (elementwise, normalization, reductions,
--   optimizer), achieved TFLOP/s over the iteration and over its kernel-busy
--   time, and mfu_pct against the dense peak of the device (table peak_flops)
--   for the data type that carries most matrix FLOPs.
-- parameters:
--   run VARCHAR = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL); the steady one when absent
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
-- engines: duckdb
WITH f AS (
    SELECT run, iteration, source,
           sum(flops) FILTER (category = 'matrix' AND pass = 'forward') AS fwd,
           sum(flops) FILTER (category = 'matrix' AND pass = 'backward') AS bwd,
           sum(flops) FILTER (NOT (category = 'matrix' AND pass IN ('forward', 'backward'))) AS other,
           count(flops) AS counted, count(*) AS ops
    FROM op_flops_for($iteration)
    WHERE $run IS NULL OR run = $run
    GROUP BY ALL
), dt AS (      -- the data type with the most matrix FLOPs: analytic, else by the counters
    SELECT run, iteration, arg_max(dtype, fl) AS dtype FROM (
        SELECT run, iteration, dtype, sum(flops) AS fl FROM op_flops_for($iteration)
        WHERE source = 'analytic' AND category = 'matrix' AND dtype IS NOT NULL GROUP BY ALL)
    GROUP BY ALL
), hw_dt AS (
    SELECT o.run, arg_max(d.dtype, d.fl) AS dtype
    FROM (SELECT DISTINCT run FROM op_flops_for($iteration) WHERE source <> 'analytic') o
    JOIN matches m ON m.trace_run = o.run
    JOIN kernel_flop_counters c ON c.run = m.ncu_run AND c.kernel_id = m.ncu_kernel_id,
    LATERAL (VALUES (coalesce(c.tensor_dtype, 'fp16'), c.tensor_flops), ('fp64', c.fp64_flops),
                    ('fp32', c.fp32_flops), ('fp16', c.fp16_flops)) d(dtype, fl)
    GROUP BY o.run
), f2 AS (
    SELECT *, CASE WHEN fwd IS NOT NULL OR bwd IS NOT NULL THEN coalesce(fwd, 0) + coalesce(bwd, 0) END AS tot FROM f
), t AS (
    SELECT s.run, s.iteration,
           CASE WHEN s.iteration IS NULL THEN (SELECT max(ts_ns + dur_ns) - min(ts_ns) FROM kernels k
                                               WHERE k.run = s.run AND k.kind = 'kernel')
                ELSE max(g.total_ns) END AS total_ns,
           CASE WHEN s.iteration IS NULL THEN (SELECT sum(dur_ns) FROM kernel_busy_intervals b WHERE b.run = s.run)
                ELSE max(g.kernel_busy_ns) END AS busy_ns
    FROM flop_iterations($iteration) s
    LEFT JOIN iteration_gpu_time g ON g.run = s.run AND g.iteration = s.iteration
    GROUP BY s.run, s.iteration
)
SELECT f.run, f.iteration, f.source,
       CAST(f.fwd AS BIGINT) AS flops_fwd, CAST(f.bwd AS BIGINT) AS flops_bwd,
       CAST(f.tot AS BIGINT) AS flops_total,
       CAST(f.other AS BIGINT) AS flops_other,
       round(f.bwd / nullif(f.fwd, 0), 3) AS bwd_fwd_ratio,
       round(f.tot / nullif(t.total_ns, 0) / 1e3, 3) AS achieved_tflops,
       round(f.tot / nullif(t.busy_ns, 0) / 1e3, 3) AS achieved_tflops_busy,
       p.peak_tflops,
       round(100 * f.tot / nullif(t.total_ns, 0) / 1e3 / p.peak_tflops, 2) AS mfu_pct,
       coalesce(dt.dtype, hw_dt.dtype) AS dtype,
       CASE WHEN f.counted = 0 THEN 'no FLOPs: the trace has no record_shapes'
            WHEN f.fwd IS NULL AND f.bwd IS NULL THEN 'no matrix FLOPs counted'
            WHEN coalesce(dt.dtype, hw_dt.dtype) IS NULL THEN 'no dtype: the trace records no input types of matrix ops'
            WHEN p.peak_tflops IS NULL THEN 'no peak_flops row for this device and dtype'
            WHEN f.source = 'cupti' THEN 'CUPTI range profiling serializes and replays kernels: the times are those of the profiled run, not of normal execution'
            WHEN coalesce(dt.dtype, hw_dt.dtype) = 'fp32' THEN 'fp32 peak of the CUDA cores; convolutions may run on TF32 tensor cores (cudnn.allow_tf32)'
            WHEN f.counted < f.ops THEN 'some ops lack shapes: their FLOPs are not counted'
        END AS note
FROM f2 f
LEFT JOIN hw_dt ON hw_dt.run = f.run
LEFT JOIN dt ON dt.run = f.run AND dt.iteration IS NOT DISTINCT FROM f.iteration
LEFT JOIN t ON t.run = f.run AND t.iteration IS NOT DISTINCT FROM f.iteration
LEFT JOIN run_peak_flops p ON p.run = f.run AND p.dtype = coalesce(dt.dtype, hw_dt.dtype)
ORDER BY f.run, f.iteration NULLS LAST, f.source;
