-- rule: memory_headroom
-- description: The step uses a small part of the GPU's memory while the GPU is
--   mostly idle: a larger batch fits and would give each launch more work.
--   Value: memory_summary's device_memory_pct, when GPU utilization
--   is below 70%.
-- threshold: 50
-- unit: % of device memory
-- fires: below
-- severity: medium
-- next: memory_summary
-- requires:
--   report_memory_summary.device_memory_pct: GPU memory events (torch.profiler profile_memory=True)
-- suggestion: Raise the batch size (memory_summary's est_batch_scale_x says by how much it might
--   grow), scaling the learning rate to match.
SELECT m.run, m.iteration, m.device_memory_pct AS value,
       format('peak {:.2f} GiB allocated, {:.1f}% of the device memory, with GPU utilization {:.1f}%; the batch might grow {:.1f}x',
              m.peak_allocated_bytes / 1073741824.0, m.device_memory_pct, g.gpu_util_pct,
              coalesce(m.est_batch_scale_x, 0)) AS evidence
FROM report_memory_summary m JOIN iteration_gpu_time g USING (run, iteration)
WHERE g.gpu_util_pct < 70 AND m.device_memory_pct IS NOT NULL AND ($run IS NULL OR m.run = $run);
