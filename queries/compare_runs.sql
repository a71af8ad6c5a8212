-- name: compare_runs
-- topic: single GPU
-- description: The steady iteration of several runs side by side (e.g. fp32
--   vs amp, eager vs compiled, batch sizes): time, GPU utilization, the
--   utilization levels scaled to the iteration, and ratios to a baseline run.
--   samples_per_s needs each run's batch size: give them as batch_sizes in the
--   order of runs, or one batch_size for all; a run given none uses the batch
--   size it recorded (view run_batch_size).
-- gpu_time_windows: steady
-- parameters:
--   runs RUNS = NULL: comma-separated trace runs (every trace run with iterations when absent)
--   baseline RUN = NULL: run the ratios refer to (the first of runs when absent)
--   batch_size INTEGER > 0 = NULL: samples per iteration, the same for every run
--   batch_sizes VARCHAR = NULL: comma-separated samples per iteration, one per run in runs
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: its steady iteration
--   total_ns BIGINT: iteration duration, ns
--   samples_per_s DOUBLE: batch size / total time, samples/s
--   gpu_util_pct DOUBLE: GPU utilization, %
--   smsp_active_pct_iter DOUBLE: SMSP active, % of the iteration
--   issue_slot_pct_iter DOUBLE: issue slot utilization, % of the iteration
--   tc_active_pct_iter DOUBLE: TC active, % of the iteration
--   tc_issue_pct_iter DOUBLE: TC issue slot utilization, % of the iteration
--   is_baseline BOOLEAN: this row is the baseline
--   time_ratio DOUBLE: total_ns / baseline's
--   throughput_ratio DOUBLE: samples_per_s / baseline's
--   gpu_util_ratio DOUBLE: gpu_util_pct / baseline's
--   issue_slot_ratio DOUBLE: issue_slot_pct_iter / baseline's
--   tc_issue_ratio DOUBLE: tc_issue_pct_iter / baseline's
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
WITH sizes_checked AS (
    -- batch_sizes that cannot be read were ignored without a word (samples_per_s empty)
    SELECT CASE
        WHEN $batch_sizes IS NULL THEN true
        WHEN $runs IS NULL THEN error('batch_sizes needs runs: one batch size per run, in its order')
        WHEN len(string_split($batch_sizes, ',')) <> len(string_split($runs, ','))
            THEN error(format('batch_sizes gives {} sizes for {} runs', len(string_split($batch_sizes, ',')),
                              len(string_split($runs, ','))))
        WHEN NOT list_bool_and(list_transform(string_split($batch_sizes, ','),
                                              lambda s: coalesce(TRY_CAST(trim(s) AS INTEGER) > 0, false)))
            THEN error(format('batch_sizes {} holds a size that is not a whole number above 0', $batch_sizes))
        ELSE true END AS ok
), wanted AS (
    SELECT trim(r) AS run, i AS pos, TRY_CAST(trim(string_split(coalesce($batch_sizes, ''), ',')[i]) AS INTEGER) AS bs
    FROM (SELECT unnest(string_split($runs, ',')) AS r, generate_subscripts(string_split($runs, ','), 1) AS i)
    WHERE (SELECT ok FROM sizes_checked)
    UNION ALL
    SELECT run, row_number() OVER (ORDER BY run), NULL FROM (SELECT DISTINCT run FROM iterations)
    WHERE $runs IS NULL
), u AS (
    SELECT w.pos, u.*, coalesce(w.bs, $batch_size, rb.batch_size) AS bs
    FROM wanted w JOIN iteration_utilization u USING (run) LEFT JOIN run_batch_size rb USING (run)
    WHERE u.steady
), b AS (
    SELECT * FROM u WHERE run = coalesce($baseline, (SELECT run FROM u ORDER BY pos LIMIT 1))
)
SELECT u.run, u.iteration, u.total_ns,
       u.bs / (u.total_ns / 1e9) AS samples_per_s,
       round(u.gpu_util_pct, 2) AS gpu_util_pct,
       round(u.smsp_active_pct_iter, 2) AS smsp_active_pct_iter,
       round(u.issue_slot_pct_iter, 2) AS issue_slot_pct_iter,
       round(u.tc_active_pct_iter, 3) AS tc_active_pct_iter,
       round(u.tc_issue_pct_iter, 3) AS tc_issue_pct_iter,
       u.run = b.run AS is_baseline,
       round(u.total_ns / b.total_ns, 4) AS time_ratio,
       round((u.bs / u.total_ns) / (b.bs / b.total_ns), 4) AS throughput_ratio,
       round(u.gpu_util_pct / nullif(b.gpu_util_pct, 0), 4) AS gpu_util_ratio,
       round(u.issue_slot_pct_iter / nullif(b.issue_slot_pct_iter, 0), 4) AS issue_slot_ratio,
       round(u.tc_issue_pct_iter / nullif(b.tc_issue_pct_iter, 0), 4) AS tc_issue_ratio
FROM u CROSS JOIN b
ORDER BY u.pos;
