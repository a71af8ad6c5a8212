-- name: overview
-- topic: single GPU
-- description: One row per run: its source, framework, device, how many events,
--   kernels and iterations it holds, and the time span its events cover.
-- parameters:
--   run RUN = NULL: run to report on (all runs when absent)
-- columns:
--   run VARCHAR: run name
--   kind VARCHAR: trace | ncu | power | calibration
--   path VARCHAR: source file as given at ingest
--   framework VARCHAR: pytorch | tensorflow | jax | ncu | ...
--   device_name VARCHAR: GPU (or XProf device) the run was taken on
--   events BIGINT: number of events
--   kernels BIGINT: GPU activities (kernels, memcpy, memset)
--   iterations BIGINT: number of iterations (step markers)
--   start_ns BIGINT: first event start, ns
--   end_ns BIGINT: last event end, ns
--   span_ns BIGINT: end_ns - start_ns, ns
-- requires:
--   runs: ingested runs (tracedb ingest FILE --db DB)
-- engines: duckdb, spark
WITH ev AS (
    SELECT run, count(*) AS events, min(ts_ns) AS start_ns, max(ts_ns + coalesce(dur_ns, 0)) AS end_ns
    FROM events WHERE ph <> 'M' GROUP BY run
), k AS (
    SELECT run, count(*) AS kernels FROM kernels GROUP BY run
), it AS (
    SELECT run, count(*) AS iterations FROM iterations GROUP BY run
)
SELECT r.run, r.kind, r.path, r.framework, r.device_name,
       coalesce(r.n_events, ev.events, 0) AS events,
       coalesce(k.kernels, 0) AS kernels,
       coalesce(it.iterations, 0) AS iterations,
       ev.start_ns, ev.end_ns, ev.end_ns - ev.start_ns AS span_ns
FROM runs r
LEFT JOIN ev USING (run)
LEFT JOIN k USING (run)
LEFT JOIN it USING (run)
WHERE $run IS NULL OR r.run = $run
ORDER BY r.run;
