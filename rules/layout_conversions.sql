-- rule: layout_conversions
-- description: The GPU spends its time converting tensors between the NCHW and
--   NHWC memory layouts (cuDNN's nchwToNhwc / nhwcToNchw kernels) around the
--   convolutions: the model's tensors are NCHW while the tensor-core
--   convolution kernels want NHWC (channels last). Value: the GPU time those
--   conversion kernels take, as a share of the iteration (what channels_last gives
--   back). Graded by it: high from 10%, medium from 3%, low below.
-- threshold: 2
-- unit: % of the iteration (GPU time of the conversions)
-- fires: above
-- severity: medium
-- next: top_kernels
-- steady: run
-- requires:
--   kernels: GPU kernels
-- suggestion: Use the channels_last memory format: model = model.to(memory_format=torch.channels_last) and
--   inputs x.to(memory_format=torch.channels_last) (with AMP the convolution kernels then read and write
--   NHWC directly, and the conversion kernels go away).
WITH it AS (
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every, stored := $stored)
), g AS (       -- per iteration the kernel time and the conversions': stored at ingest, or swept
    SELECT run, iteration, layout_all_ns AS all_ns, layout_conv_ns AS conv_ns, layout_best_rank AS best_rank,
           layout_launches AS launches
    FROM finding_stored($run, $iteration, every_p := $every, stored := $stored) WHERE layout_all_ns IS NOT NULL
    UNION ALL
    SELECT * FROM layout_sums($run, $iteration, every_p := $every, stored := $stored)
)
SELECT g.run, g.iteration, 100.0 * coalesce(conv_ns, 0) / it.dur_ns AS value,
       CASE WHEN conv_ns IS NULL THEN 'no NCHW<->NHWC conversion kernel in the iteration'
            ELSE format('{} NCHW<->NHWC conversion kernels ran for {:.3f} ms, {:.2f}% of the {:.2f} ms iteration ({:.1f}% of kernel time); the largest of them ranks {} among the iteration''s kernels by time',
                        launches, conv_ns / 1e6, 100.0 * conv_ns / it.dur_ns, it.dur_ns / 1e6,
                        100.0 * conv_ns / all_ns, best_rank) END AS evidence,
       CASE WHEN 100.0 * coalesce(conv_ns, 0) / it.dur_ns >= 10 THEN 'high'
            WHEN 100.0 * coalesce(conv_ns, 0) / it.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM g JOIN it USING (run, iteration) WHERE all_ns > 0;
