-- name: flops_batch_consistency
-- topic: FLOPs
-- description: FLOPs per sample of each op and pass across runs of the same
--   model at different batch sizes (steady iteration of each run). A run's
--   model is its name with the batch token removed and its batch size the
--   number in that token (batch_pattern over the run name, e.g.
--   h100_resnet50_bs32_amp and h100_resnet50_bs64_amp are resnet50 at 32
--   and 64). Ops whose FLOPs per sample differ by more than tolerance_pct are
--   flagged: work that does not scale with the batch (the optimizer, the
--   loss), or a miscount.
-- op_windows: steady
-- parameters:
--   batch_pattern VARCHAR = '_bs(\d+)': RE2 pattern over the run name whose first group is the batch size
--   tolerance_pct DOUBLE >= 0 = 1.0: largest spread of FLOPs per sample that counts as consistent, %
-- columns:
--   model VARCHAR: run name without the batch token
--   op_name VARCHAR: framework op
--   pass VARCHAR: forward | backward | optimizer
--   source VARCHAR: analytic | cupti | ncu
--   runs BIGINT: runs of the model with this op
--   min_batch BIGINT: smallest batch size
--   max_batch BIGINT: largest batch size
--   min_flops_per_sample DOUBLE: smallest FLOPs per sample over the runs
--   max_flops_per_sample DOUBLE: largest FLOPs per sample over the runs
--   spread_pct DOUBLE: (max - min) / max, %
--   flag VARCHAR: consistent | differs | single_batch (one batch size only)
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- engines: duckdb, spark
WITH r AS (
    SELECT run, regexp_replace(run, $batch_pattern, '') AS model,
           TRY_CAST(regexp_extract(run, $batch_pattern, 1) AS BIGINT) AS batch
    FROM runs WHERE kind = 'trace' AND regexp_matches(run, $batch_pattern)
), steady AS (  -- the steady iteration, or the whole trace of a run without step markers
    SELECT f.* FROM op_flops f
    LEFT JOIN iteration_steadiness s ON s.run = f.run AND s.iteration = f.iteration
    WHERE s.steady OR f.run NOT IN (SELECT run FROM iterations)
), per_run AS (
    SELECT r.model, r.batch, o.run, o.op_name, o.pass, o.source, sum(o.flops) / r.batch AS per_sample
    FROM steady o JOIN r ON r.run = o.run
    WHERE r.batch > 0
    GROUP BY r.model, r.batch, o.run, o.op_name, o.pass, o.source
)
SELECT * FROM (
SELECT model, op_name, pass, source, count(*) AS runs,
       min(batch) AS min_batch, max(batch) AS max_batch,
       round(min(per_sample), 1) AS min_flops_per_sample, round(max(per_sample), 1) AS max_flops_per_sample,
       round(100 * (max(per_sample) - min(per_sample)) / nullif(max(per_sample), 0), 3) AS spread_pct,
       CASE WHEN count(DISTINCT batch) < 2 THEN 'single_batch'
            WHEN coalesce(100 * (max(per_sample) - min(per_sample)) / nullif(max(per_sample), 0), 0) > $tolerance_pct
                THEN 'differs'
            ELSE 'consistent' END AS flag
FROM per_run
GROUP BY model, op_name, pass, source)
ORDER BY model, flag = 'consistent', max_flops_per_sample DESC NULLS LAST, op_name, pass, source;
