-- name: system_metrics
-- topic: system
-- description: The sampled system metrics of an iteration, summarized (METHOD.md
--   section 9): nvidia-smi-style GPU utilization (NVML: share of its sample
--   period with any kernel running) beside the trace's kernel-busy utilization
--   (the union of kernel intervals), memory-controller utilization, memory used,
--   SM clock (min and mean), power, temperature, the throttle reasons seen, and
--   host CPU utilization and process memory (tracedb capture's host sampler).
--   Samples are taken inside the window, on the trace's timeline through the
--   power log's alignment. NVML utilization is an average over its own period
--   (1/6 s to 1 s): a window shorter than that reads neighbouring time too.
--   Low GPU utilization with high CPU utilization points at data loading.
--   A trace run's kernel busy time is read from kernel_iteration_totals where an
--   ingest with --op-totals stored it; other runs' kernels are swept.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and the whole trace); the steady one when absent
--   gpu INTEGER = NULL: GPU index in the sampler log (default: the trace run's own GPU, view run_gpu, if logged, else the lowest)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace)
--   window_ns BIGINT: window duration, ns
--   kernel_busy_pct DOUBLE: the trace's GPU utilization: time with a kernel running / window, %
--   power_run VARCHAR: sampler or nvidia-smi log used (NULL: none paired)
--   gpu INTEGER: GPU index in the log
--   gpu_samples BIGINT: power samples inside the window
--   nvml_gpu_util_pct DOUBLE: mean NVML/nvidia-smi GPU utilization, %
--   mem_util_pct DOUBLE: mean memory-controller utilization, %
--   mem_used_max_bytes BIGINT: largest device memory used (all processes), bytes
--   sm_clock_min_mhz DOUBLE: lowest SM clock, MHz
--   sm_clock_mean_mhz DOUBLE: mean SM clock, MHz
--   power_mean_w DOUBLE: mean power (instant power where logged), W
--   temp_max_c DOUBLE: highest GPU temperature, °C
--   throttle_reasons VARCHAR: clocks event reasons seen in any sample (gpu_idle and none left out; NULL when not logged)
--   pcie_rx_mean_bytes_per_s DOUBLE: mean PCIe receive throughput (host to device), bytes/s
--   host_samples BIGINT: host samples inside the window
--   cpu_util_pct DOUBLE: mean CPU utilization of the whole machine, %
--   cpu_busiest_core_pct DOUBLE: mean utilization of the busiest core, %
--   rss_max_bytes BIGINT: largest resident memory of the profiled process, bytes
--   note VARCHAR: alignment and warnings
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
WITH w AS (
    SELECT * FROM iteration_windows($run, $iteration)
), busy AS (        -- the kernel busy intervals inside each window: swept (runs not stored) ...
    SELECT w.run, w.iteration, sum(least(b.end_ns, w.end_ns) - greatest(b.start_ns, w.start_ns)) AS busy_ns
    FROM w JOIN gpu_busy_intervals_of(true) b
      ON b.run = w.run AND (b.iteration = w.iteration OR w.iteration IS NULL)
     AND b.start_ns < w.end_ns AND w.start_ns < b.end_ns
     -- a constant iteration (N, or the steady one bound as N) reaches the kernels' scan
     AND (TRY_CAST($iteration AS INTEGER) IS NULL OR b.iteration = TRY_CAST($iteration AS INTEGER))
    WHERE b.activity = 'kernels'
    GROUP BY ALL
    UNION ALL       -- ... or stored at ingest with --op-totals (kernel_iteration_totals)
    SELECT w.run, w.iteration, t.window_busy_ns
    FROM w JOIN kernel_iteration_totals t ON t.run = w.run AND t.iteration IS NOT DISTINCT FROM w.iteration
    WHERE t.window_busy_ns IS NOT NULL
), pp AS (
    SELECT * FROM trace_power_pairs QUALIFY row_number() OVER (PARTITION BY run ORDER BY power_run) = 1
), pg AS (
    SELECT pp.run, pp.power_run, pp.offset_ns, pp.method,
           coalesce($gpu, min(p.gpu) FILTER (p.gpu IN (SELECT gpu FROM run_gpu g WHERE g.run = pp.run)),
                    min(p.gpu)) AS gpu
    FROM pp JOIN power p ON p.run = pp.power_run
    GROUP BY ALL
), s AS (
    SELECT w.run, w.iteration, count(*) AS n,
           avg(g.gpu_util_pct) AS gpu_util, avg(g.mem_util_pct) AS mem_util, max(g.mem_used_bytes) AS mem_used,
           min(p.sm_clock_mhz) AS clk_min, avg(p.sm_clock_mhz) AS clk_mean,
           avg(coalesce(p.instant_power_w, p.power_w)) AS power, max(p.temp_c) AS temp,
           bit_or(g.throttle_reasons & ~1) AS reasons, count(g.throttle_reasons) AS n_reasons,
           avg(g.pcie_rx_bytes_per_s) AS pcie_rx
    FROM w JOIN pg ON pg.run = w.run
    JOIN power p ON p.run = pg.power_run AND p.gpu = pg.gpu
                AND p.ts_ns + pg.offset_ns BETWEEN w.start_ns AND w.end_ns
    LEFT JOIN gpu_samples g ON g.run = p.run AND g.gpu = p.gpu AND g.ts_ns = p.ts_ns
    GROUP BY ALL
), hc AS (
    SELECT w.run, w.iteration, h.cpu, count(*) AS n, avg(h.cpu_util_pct) AS util, max(h.rss_bytes) AS rss
    FROM w JOIN trace_host_pairs hp ON hp.run = w.run
    JOIN host_samples h ON h.run = hp.host_run AND h.ts_ns + hp.offset_ns BETWEEN w.start_ns AND w.end_ns
    GROUP BY ALL
), h AS (
    SELECT run, iteration, max(n) FILTER (cpu IS NULL) AS n, max(util) FILTER (cpu IS NULL) AS cpu_util,
           max(util) FILTER (cpu IS NOT NULL) AS busiest, max(rss) AS rss
    FROM hc GROUP BY ALL
)
SELECT w.run, w.iteration, CAST(w.window_ns AS BIGINT) AS window_ns,
       100.0 * coalesce(busy.busy_ns, 0) / w.window_ns AS kernel_busy_pct,
       pg.power_run, pg.gpu, coalesce(s.n, 0) AS gpu_samples, s.gpu_util AS nvml_gpu_util_pct,
       s.mem_util AS mem_util_pct, CAST(s.mem_used AS BIGINT) AS mem_used_max_bytes,
       s.clk_min AS sm_clock_min_mhz, s.clk_mean AS sm_clock_mean_mhz, s.power AS power_mean_w,
       s.temp AS temp_max_c,
       CASE WHEN s.n_reasons > 0 THEN throttle_reason_names(s.reasons) END AS throttle_reasons,
       s.pcie_rx AS pcie_rx_mean_bytes_per_s,
       coalesce(h.n, 0) AS host_samples, h.cpu_util AS cpu_util_pct, h.busiest AS cpu_busiest_core_pct,
       CAST(h.rss AS BIGINT) AS rss_max_bytes,
       concat_ws('; ',
         CASE WHEN pg.power_run IS NULL THEN 'no sampler log paired with this run (tracedb capture, or ingest '
                                             || 'tracedb power-log output with --pair-with)'
              ELSE 'aligned: ' || pg.method END,
         CASE WHEN pg.power_run IS NOT NULL AND coalesce(s.n, 0) = 0 THEN 'no GPU sample inside the window' END,
         CASE WHEN s.n > 0 AND w.window_ns < 166666667 THEN 'window shorter than NVML''s utilization period (1/6 s '
              || 'or more): nvml_gpu_util_pct averages neighbouring time too' END,
         CASE WHEN h.cpu_util > 80 AND 100.0 * coalesce(busy.busy_ns, 0) / w.window_ns < 70
              THEN 'CPU busy while the GPU idles: look at data loading and preprocessing' END) AS note
FROM w
LEFT JOIN busy ON busy.run = w.run AND busy.iteration IS NOT DISTINCT FROM w.iteration
LEFT JOIN pg ON pg.run = w.run
LEFT JOIN s ON s.run = w.run AND s.iteration IS NOT DISTINCT FROM w.iteration
LEFT JOIN h ON h.run = w.run AND h.iteration IS NOT DISTINCT FROM w.iteration
ORDER BY w.run, w.iteration NULLS LAST;
