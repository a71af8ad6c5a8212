-- rule: no_tensor_cores
-- description: GEMM and convolution time (layer types convolution and
--   matmul/linear, by layer_rules) spent in kernels whose tensor pipes are
--   active in less than 0.5% of the cycles: fp32 math with TF32 off, layouts the
--   tensor-core kernels do not take, shapes not multiple of 8. The NCHW<->NHWC
--   conversion kernels typed with the convolutions are left out: they are copies
--   that no tensor core would run, and layout_conversions values them. Value: that time as a share of the iteration (the GPU time
--   that tensor cores would shorten; a step starved by its host or loader loses
--   little to it, however slow its GEMMs). Graded by it: high from 10%, medium from
--   3%, low below.
-- threshold: 2
-- unit: % of the iteration (GPU time without tensor cores)
-- fires: above
-- severity: high
-- next: kernel_utilization
-- requires:
--   report_kernel_utilization.tc_active_pct: ncu counters matched to the run (tracedb ingest REPORT --pair-with RUN)
-- suggestion: Use mixed precision (torch.autocast with bf16/fp16) or TF32
--   (torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True), channels_last for
--   convolutions, and dimensions that are multiples of 8.
WITH k AS (
    SELECT run, iteration, name, dur_ns, tc_active_pct < 0.5 AS no_tc
    FROM report_kernel_utilization
    WHERE layer_type IN ('convolution', 'matmul/linear') AND tc_active_pct IS NOT NULL
      AND NOT is_layout_conversion(name)
      AND ($run IS NULL OR run = $run) AND ($iteration IS NULL OR iteration = $iteration)
), by_name AS (
    SELECT run, iteration, name, sum(dur_ns) AS ns FROM k WHERE no_tc GROUP BY ALL
), top AS (
    SELECT run, iteration, top_names_text(list({'name': name, 'ns': ns})) AS names FROM by_name GROUP BY ALL
), g AS (
    SELECT run, iteration, sum(dur_ns) AS all_ns, coalesce(sum(dur_ns) FILTER (no_tc), 0) AS no_tc_ns,
           count(*) FILTER (no_tc) AS n_no_tc, count(*) AS n
    FROM k GROUP BY ALL
)
SELECT g.run, g.iteration, 100.0 * no_tc_ns / i.dur_ns AS value,
       format('{:.2f} of {:.2f} ms of GEMM/convolution kernel time ({:.1f}%, {} of {} kernels) ran with tensor pipes active < 0.5% of cycles: {:.2f}% of the {:.2f} ms iteration{}',
              no_tc_ns / 1e6, all_ns / 1e6, 100.0 * no_tc_ns / all_ns, n_no_tc, n, 100.0 * no_tc_ns / i.dur_ns,
              i.dur_ns / 1e6, coalesce('; most: ' || top.names, '')) AS evidence,
       CASE WHEN 100.0 * no_tc_ns / i.dur_ns >= 10 THEN 'high'
            WHEN 100.0 * no_tc_ns / i.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM g JOIN iterations i USING (run, iteration) LEFT JOIN top USING (run, iteration)
WHERE i.dur_ns > 0;
