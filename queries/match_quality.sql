-- name: match_quality
-- topic: ncu levels
-- description: How well the kernels of an ncu report were paired with the
--   kernels of a trace iteration (`tracedb match`): matched and unmatched
--   counts on each side, the score distribution, pairs whose names or launch
--   configurations disagree or that sit away from their expected position,
--   and the share of the iteration's kernel time covered by matched kernels.
-- parameters:
--   run RUN = NULL: trace run (all matched pairs of runs when absent)
--   ncu_run RUN = NULL: ncu run (every ncu run matched to `run` when absent)
-- columns:
--   run VARCHAR: trace run
--   ncu_run VARCHAR: ncu run
--   iteration INTEGER: trace iteration matched (NULL: the whole run)
--   trace_kernels BIGINT: kernels of the trace iteration
--   ncu_kernels BIGINT: kernels in the ncu report
--   matched BIGINT: pairs
--   unmatched_trace BIGINT: trace kernels without a partner
--   unmatched_ncu BIGINT: ncu kernels without a partner
--   ncu_matched_pct DOUBLE: matched / ncu_kernels, %
--   time_covered_pct DOUBLE: matched trace kernels' time / all the iteration's kernel time, %
--   score_min DOUBLE: lowest pair score (0..1)
--   score_p01 DOUBLE: 1st percentile of the pair scores
--   score_p50 DOUBLE: median pair score
--   names_disagree BIGINT: pairs whose normalized names differ
--   launch_disagree BIGINT: pairs whose grid or block differ
--   order_shifted BIGINT: pairs away from their expected stream position
--   seconds DOUBLE: time the matching took, s
-- requires:
--   matches: ncu kernels matched to the run (tracedb ingest REPORT --pair-with RUN, or tracedb match)
-- engines: duckdb, spark
WITH p AS (
    SELECT run, ncu_run, count(*) AS matched, min(score) AS score_min,
           percentile_cont(0.01) WITHIN GROUP (ORDER BY score) AS score_p01, median(score) AS score_p50,
           count(*) FILTER (name_score < 1) AS names_disagree,
           count(*) FILTER (NOT same_launch) AS launch_disagree,
           count(*) FILTER (order_distance <> 0) AS order_shifted,
           sum(dur_ns) AS matched_ns
    FROM matched_kernels GROUP BY run, ncu_run
), u AS (
    SELECT trace_run, ncu_run, count(*) FILTER (side = 'trace') AS unmatched_trace,
           count(*) FILTER (side = 'ncu') AS unmatched_ncu
    FROM unmatched_kernels GROUP BY trace_run, ncu_run
), t AS (
    SELECT r.trace_run, r.ncu_run, sum(k.dur_ns) AS kernel_ns
    FROM match_runs r JOIN kernels k ON k.run = r.trace_run AND k.kind = 'kernel'
                                     AND (r.iteration IS NULL OR k.iteration = r.iteration)
    GROUP BY r.trace_run, r.ncu_run
)
SELECT r.trace_run AS run, r.ncu_run, r.iteration, r.trace_kernels, r.ncu_kernels,
       coalesce(p.matched, 0) AS matched,
       coalesce(u.unmatched_trace, 0) AS unmatched_trace, coalesce(u.unmatched_ncu, 0) AS unmatched_ncu,
       round(100.0 * coalesce(p.matched, 0) / nullif(r.ncu_kernels, 0), 2) AS ncu_matched_pct,
       round(100.0 * p.matched_ns / nullif(t.kernel_ns, 0), 2) AS time_covered_pct,
       round(p.score_min, 4) AS score_min, round(p.score_p01, 4) AS score_p01,
       round(p.score_p50, 4) AS score_p50,
       coalesce(p.names_disagree, 0) AS names_disagree, coalesce(p.launch_disagree, 0) AS launch_disagree,
       coalesce(p.order_shifted, 0) AS order_shifted, round(r.seconds, 3) AS seconds
FROM match_runs r
LEFT JOIN p ON p.run = r.trace_run AND p.ncu_run = r.ncu_run
LEFT JOIN u ON u.trace_run = r.trace_run AND u.ncu_run = r.ncu_run
LEFT JOIN t ON t.trace_run = r.trace_run AND t.ncu_run = r.ncu_run
WHERE ($run IS NULL OR r.trace_run = $run) AND ($ncu_run IS NULL OR r.ncu_run = $ncu_run)
ORDER BY run, ncu_run;
