-- name: tc_issue_cdf
-- topic: ncu levels
-- description: Cumulative share of GPU kernel time as a function of tensor
--   core issue slot utilization: for each value x of per-kernel TC issue slot
--   utilization, the share of the matched kernels' time spent in kernels with
--   TC issue <= x. The row with tc_issue_pct = 0 gives the share of time in
--   kernels that issue no tensor instruction at all (kernels without a tensor
--   instruction counter count as 0).
-- iteration_all: absent
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all matched ones when absent)
-- columns:
--   run VARCHAR: trace run
--   tc_issue_pct DOUBLE: per-kernel TC issue slot utilization (exact: a small value is not folded into 0), %
--   kernels BIGINT: kernels at this value
--   time_ns BIGINT: their trace time, ns
--   cum_time_share_pct DOUBLE: share of kernel time in kernels with TC issue <= tc_issue_pct, %
-- requires:
--   matches: ncu kernels matched to the run (tracedb ingest REPORT --pair-with RUN, or tracedb match)
-- engines: duckdb, spark
WITH k AS (
    SELECT run, coalesce(tc_issue_pct, 0) AS x, dur_ns
    FROM kernel_levels
    WHERE ($run IS NULL OR run = $run) AND ($iteration IS NULL OR iteration = $iteration)
), g AS (
    SELECT run, x, count(*) AS kernels, sum(dur_ns) AS time_ns FROM k GROUP BY run, x
)
SELECT run, x AS tc_issue_pct, kernels, CAST(time_ns AS BIGINT) AS time_ns,
       round(100.0 * sum(time_ns) OVER (PARTITION BY run ORDER BY x) / sum(time_ns) OVER (PARTITION BY run), 3)
         AS cum_time_share_pct
FROM g
ORDER BY run, x;
