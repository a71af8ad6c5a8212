-- name: transfers
-- topic: single GPU
-- description: Memory copies and sets of an iteration by direction and memory
--   kind (METHOD.md section 9), from the trace's own activity: direction (HtoD,
--   DtoH, DtoD, ...) and source and destination memory (Pageable, Pinned,
--   Device) as the trace names them (`Memcpy HtoD (Pageable -> Device)`), bytes
--   from the activity's args, achieved bandwidth (bytes / summed copy time),
--   share of the iteration, and overlap with compute: the part of the copies'
--   time during which a kernel runs (kernel_busy_intervals). Pageable host
--   copies are synchronous and slow: pin the memory (DataLoader pin_memory=True)
--   to overlap them with compute.
--   A trace run's overlaps are read from copy_kernel_overlap where an ingest
--   with --op-totals stored them; other runs' kernels are swept.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and the whole trace); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace)
--   direction VARCHAR: HtoD | DtoH | DtoD | HtoH | PtoP | Memset | unknown
--   src_memory VARCHAR: source memory kind as the trace names it (Pageable, Pinned, Device ...)
--   dst_memory VARCHAR: destination memory kind
--   copies BIGINT: number of copies (or sets)
--   bytes BIGINT: bytes moved, bytes
--   time_ns BIGINT: summed duration, ns
--   gb_per_s DOUBLE: bytes / time_ns, GB/s
--   max_gb_per_s DOUBLE: fastest single copy, GB/s
--   iteration_share_pct DOUBLE: 100 * time_ns / the window's duration, %
--   overlap_ns BIGINT: copy time during which a kernel runs, ns
--   overlap_pct DOUBLE: 100 * overlap_ns / time_ns, %
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
WITH w AS (
    SELECT * FROM iteration_windows($run, $iteration)
), k AS (       -- the copies of an iteration, with their args
    SELECT k.run, k.iteration, k.kernel_id, k.ts_ns, k.dur_ns,
           coalesce(a.copy_direction, CASE WHEN k.kind = 'memset' THEN 'Memset' ELSE 'unknown' END) AS direction,
           a.src_memory, a.dst_memory, a.copy_bytes
    FROM kernels k
    LEFT JOIN activity_args a ON a.run = k.run AND a.kernel_id = k.kernel_id
    WHERE k.kind IN ('memcpy', 'memset') AND k.ts_ns IS NOT NULL AND k.iteration IS NOT NULL
), c AS (       -- each in its iteration's window and the whole trace's: two equi-joins (one
                -- join on an OR compared every copy with every window)
    SELECT w.run, w.iteration, w.window_ns, k.iteration AS k_iteration, k.kernel_id, k.ts_ns, k.dur_ns,
           k.direction, k.src_memory, k.dst_memory, k.copy_bytes
    FROM w JOIN k ON k.run = w.run AND k.iteration = w.iteration
    UNION ALL
    SELECT w.run, w.iteration, w.window_ns, k.iteration AS k_iteration, k.kernel_id, k.ts_ns, k.dur_ns,
           k.direction, k.src_memory, k.dst_memory, k.copy_bytes
    FROM w JOIN k ON k.run = w.run AND w.iteration IS NULL
), o AS (        -- each copy's overlap with the kernel busy intervals of its iteration: swept ...
    SELECT c.run, c.kernel_id,
           sum(greatest(0, least(c.ts_ns + c.dur_ns, b.end_ns) - greatest(c.ts_ns, b.start_ns))) AS overlap_ns
    FROM (SELECT DISTINCT run, kernel_id, k_iteration, ts_ns, dur_ns FROM c) c
    JOIN gpu_busy_intervals_of(true) b
      ON b.run = c.run AND b.iteration = c.k_iteration AND b.start_ns < c.ts_ns + c.dur_ns AND c.ts_ns < b.end_ns
     -- a constant iteration (N, or the steady one bound as N) reaches the kernels' scan
     AND (TRY_CAST($iteration AS INTEGER) IS NULL OR b.iteration = TRY_CAST($iteration AS INTEGER))
    WHERE b.activity = 'kernels'
    GROUP BY c.run, c.kernel_id
    UNION ALL       -- ... or stored at ingest with --op-totals (the runs of kernel_stored_runs)
    SELECT s.run, s.kernel_id, s.overlap_ns
    FROM copy_kernel_overlap s JOIN (SELECT DISTINCT run, kernel_id FROM c) c ON c.run = s.run AND c.kernel_id = s.kernel_id
), g AS (
    SELECT c.run, c.iteration, c.direction, c.src_memory, c.dst_memory, any_value(c.window_ns) AS window_ns,
           count(*) AS copies, sum(c.copy_bytes) AS bytes, sum(c.dur_ns) AS time_ns,
           max(c.copy_bytes / nullif(c.dur_ns, 0)) AS max_gb_per_s, sum(coalesce(o.overlap_ns, 0)) AS overlap_ns
    FROM c LEFT JOIN o ON o.run = c.run AND o.kernel_id = c.kernel_id
    GROUP BY c.run, c.iteration, c.direction, c.src_memory, c.dst_memory
)
SELECT run, iteration, direction, src_memory, dst_memory, copies, CAST(bytes AS BIGINT) AS bytes,
       CAST(time_ns AS BIGINT) AS time_ns, bytes / nullif(time_ns, 0) AS gb_per_s, max_gb_per_s,
       100.0 * time_ns / window_ns AS iteration_share_pct, CAST(overlap_ns AS BIGINT) AS overlap_ns,
       100.0 * overlap_ns / nullif(time_ns, 0) AS overlap_pct
FROM g
ORDER BY run, iteration NULLS LAST, time_ns DESC;
