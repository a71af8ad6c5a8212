-- name: memory_summary
-- topic: system
-- description: GPU memory of an iteration (METHOD.md section 9) per run and
--   device, from the trace's `[memory]` events (torch.profiler with
--   profile_memory=True): memory allocated at the iteration's start (weights,
--   gradients, optimizer state: what does not grow with the batch), the peaks of
--   allocated and reserved (the caching allocator's pool) inside the iteration,
--   the reserved peak as a share of the device's memory, NVML's memory used
--   (all processes, CUDA context included) where a sampler log is paired, and a
--   note on what it means for the batch size. est_batch_scale_x assumes the
--   memory above the start grows in proportion to the batch and keeps 10% of the
--   device free; it is a first guess to try, not a promise.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all with memory events when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and the whole trace); the steady one when absent
--   batch_size INTEGER > 0 = NULL: samples per iteration (default: the capture's batch_size in the trace's metadata)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace)
--   device INTEGER: CUDA device index
--   iteration_ns BIGINT: window duration, ns
--   start_allocated_bytes BIGINT: allocated at the window's start, bytes
--   peak_allocated_bytes BIGINT: largest allocated inside the window, bytes
--   peak_reserved_bytes BIGINT: largest reserved by the caching allocator inside the window, bytes
--   device_total_bytes BIGINT: the device's memory (Kineto deviceProperties totalGlobalMem), bytes
--   device_memory_pct DOUBLE: 100 * peak_reserved_bytes / device_total_bytes, %
--   nvml_peak_used_bytes BIGINT: largest NVML memory used inside the window (paired sampler log), bytes
--   memory_events BIGINT: allocations and frees inside the window
--   batch_size INTEGER: samples per iteration (parameter or trace metadata)
--   samples_per_s DOUBLE: batch_size x iterations in the window / its duration, samples/s
--   est_batch_scale_x DOUBLE: (0.9 x device - start) / (peak allocated - start): how many times the batch might grow (a straight line from one batch size; NULL when the iteration allocates less than 1% of its peak or 1 MiB beyond its start: nothing to extrapolate from)
--   note VARCHAR: what the numbers mean for the batch size
-- requires:
--   memory_events: GPU memory events (trace the run with torch.profiler profile_memory=True, or tracedb.capture)
WITH w AS (
    SELECT * FROM iteration_windows($run, $iteration)
), m AS (
    SELECT * FROM memory_events WHERE device_type = 'cuda'
), inside AS (
    SELECT w.run, w.iteration, m.device, max(m.allocated_bytes) AS peak_alloc, max(m.reserved_bytes) AS peak_res,
           count(*) AS n
    FROM w JOIN m ON m.run = w.run AND m.ts_ns BETWEEN w.start_ns AND w.end_ns
    GROUP BY ALL
), start AS (
    SELECT w.run, w.iteration, i.device,
           (SELECT arg_max(m.allocated_bytes, m.ts_ns) FROM m
             WHERE m.run = w.run AND m.device = i.device AND m.ts_ns <= w.start_ns) AS before,
           (SELECT arg_min(m.allocated_bytes - m.bytes, m.ts_ns) FROM m
             WHERE m.run = w.run AND m.device = i.device AND m.ts_ns >= w.start_ns) AS first_inside
    FROM w JOIN inside i ON i.run = w.run AND i.iteration IS NOT DISTINCT FROM w.iteration
), nv AS (
    SELECT w.run, w.iteration, max(g.mem_used_bytes) AS used
    FROM w JOIN trace_power_pairs p ON p.run = w.run
    JOIN gpu_samples g ON g.run = p.power_run AND g.ts_ns + p.offset_ns BETWEEN w.start_ns AND w.end_ns
    GROUP BY ALL
), r AS (
    SELECT w.run, w.iteration, i.device, w.window_ns,
           CAST(coalesce(s.before, s.first_inside) AS BIGINT) AS start_b,
           CAST(i.peak_alloc AS BIGINT) AS peak_alloc, CAST(i.peak_res AS BIGINT) AS peak_res,
           d.total_bytes, nv.used, i.n, w.iterations,
           coalesce($batch_size, b.batch_size) AS batch_size
    FROM w
    JOIN inside i ON i.run = w.run AND i.iteration IS NOT DISTINCT FROM w.iteration
    JOIN start s ON s.run = w.run AND s.iteration IS NOT DISTINCT FROM w.iteration AND s.device = i.device
    LEFT JOIN run_batch_size b ON b.run = w.run
    LEFT JOIN trace_device_memory d ON d.run = w.run AND d.device = i.device
    LEFT JOIN nv ON nv.run = w.run AND nv.iteration IS NOT DISTINCT FROM w.iteration
), e AS (
    SELECT *, 100.0 * peak_res / total_bytes AS pct,
           -- growth too small to extrapolate from (0.3 MiB of 1.13 GiB once said "430104.5x larger")
           CASE WHEN peak_alloc - start_b >= greatest(0.01 * peak_alloc, 1048576)
                THEN (0.9 * total_bytes - start_b) / (peak_alloc - start_b) END AS scale
    FROM r
)
SELECT run, iteration, device, CAST(window_ns AS BIGINT) AS iteration_ns, start_b AS start_allocated_bytes,
       peak_alloc AS peak_allocated_bytes, peak_res AS peak_reserved_bytes, total_bytes AS device_total_bytes,
       pct AS device_memory_pct, CAST(used AS BIGINT) AS nvml_peak_used_bytes, n AS memory_events,
       batch_size, batch_size * iterations / (window_ns / 1e9) AS samples_per_s, scale AS est_batch_scale_x,
       CASE WHEN total_bytes IS NULL THEN 'the trace does not say how much memory the device has'
            WHEN pct >= 90 THEN 'the allocator holds ' || round(pct, 1) || '% of the device: the batch cannot grow '
                 || '(a larger one needs activation checkpointing, a smaller model state or more devices)'
            WHEN scale IS NULL THEN 'peak reserved is ' || round(pct, 1) || '% of the device; the iteration allocates '
                 || round(greatest(peak_alloc - start_b, 0) / 1048576.0, 1) || ' MiB beyond what it holds at its start: '
                 || 'too little to tell how memory grows with the batch'
            WHEN scale > 8 THEN 'peak reserved is ' || round(pct, 1) || '% of the device: memory would hold a batch over 8x '
                 || 'larger (a straight line from this one batch size says ' || round(scale) || 'x; measure at 2x first)'
            WHEN scale >= 1.5 THEN 'peak reserved is ' || round(pct, 1) || '% of the device: '
                 || 'memory allows a batch about ' || round(scale, 1) || 'x larger'
                 || coalesce(' (~' || CAST(floor(batch_size * scale) AS BIGINT) || ' samples)', '')
                 || ' if activations grow with it; a larger batch often raises GPU utilization'
            ELSE 'peak reserved is ' || round(pct, 1) || '% of the device: little room to grow the batch' END AS note
FROM e
ORDER BY run, iteration NULLS LAST, device;
