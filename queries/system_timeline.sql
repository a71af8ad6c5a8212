-- name: system_timeline
-- topic: system
-- description: The sampled series on the trace's timeline (METHOD.md section 9),
--   one row per sample and quantity: power, SM clock, NVML GPU and
--   memory-controller utilization, memory used, temperature (the paired sampler
--   or nvidia-smi log) and CPU utilization (the host sampler), with the
--   iteration each sample falls in. rel_ns counts from the start of the window
--   asked for. The chart `system` draws it.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (the whole trace); the steady one when absent
--   gpu INTEGER = NULL: GPU index in the sampler log (default: the trace run's own GPU, view run_gpu, if logged, else the lowest)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration whose window holds the sample (NULL: outside every iteration)
--   ts_ns BIGINT: sample time on the trace's timeline, ns
--   rel_ns BIGINT: ts_ns - start of the window asked for, ns
--   quantity VARCHAR: power_w | sm_clock_mhz | gpu_util_pct | mem_util_pct | mem_used_gib | temp_c | cpu_util_pct
--   value DOUBLE: the sample's value, in the unit its quantity names
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
WITH w AS (
    SELECT * FROM iteration_windows($run, $iteration)
    WHERE iteration IS NULL OR lower(trim(coalesce($iteration, ''))) <> 'all'
), pp AS (
    SELECT * FROM trace_power_pairs QUALIFY row_number() OVER (PARTITION BY run ORDER BY power_run) = 1
), pg AS (
    SELECT pp.run, pp.power_run, pp.offset_ns,
           coalesce($gpu, min(p.gpu) FILTER (p.gpu IN (SELECT gpu FROM run_gpu g WHERE g.run = pp.run)),
                    min(p.gpu)) AS gpu
    FROM pp JOIN power p ON p.run = pp.power_run
    GROUP BY ALL
), gs AS (
    SELECT w.run, w.start_ns AS w_start, p.ts_ns + pg.offset_ns AS ts_ns,
           coalesce(p.instant_power_w, p.power_w) AS power_w, p.sm_clock_mhz, g.gpu_util_pct, g.mem_util_pct,
           g.mem_used_bytes / 1073741824.0 AS mem_used_gib, p.temp_c
    FROM w JOIN pg ON pg.run = w.run
    JOIN power p ON p.run = pg.power_run AND p.gpu = pg.gpu
                AND p.ts_ns + pg.offset_ns BETWEEN w.start_ns AND w.end_ns
    LEFT JOIN gpu_samples g ON g.run = p.run AND g.gpu = p.gpu AND g.ts_ns = p.ts_ns
), s AS (
    UNPIVOT gs ON power_w, sm_clock_mhz, gpu_util_pct, mem_util_pct, mem_used_gib, temp_c
    INTO NAME quantity VALUE value
    UNION ALL
    SELECT w.run, w.start_ns, h.ts_ns + hp.offset_ns, 'cpu_util_pct', h.cpu_util_pct
    FROM w JOIN trace_host_pairs hp ON hp.run = w.run
    JOIN host_samples h ON h.run = hp.host_run AND h.cpu IS NULL
                       AND h.ts_ns + hp.offset_ns BETWEEN w.start_ns AND w.end_ns
    WHERE h.cpu_util_pct IS NOT NULL
)
SELECT s.run, CASE WHEN s.ts_ns <= i.end_ns THEN i.iteration END AS iteration, CAST(s.ts_ns AS BIGINT) AS ts_ns,
       CAST(s.ts_ns - s.w_start AS BIGINT) AS rel_ns, s.quantity, CAST(s.value AS DOUBLE) AS value
FROM s ASOF LEFT JOIN iterations i ON i.run = s.run AND s.ts_ns >= i.start_ns
ORDER BY s.run, s.quantity, s.ts_ns;
