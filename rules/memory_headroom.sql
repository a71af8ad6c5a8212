-- rule: memory_headroom
-- description: The step uses a small part of the GPU's memory while the GPU is
--   mostly idle: a larger batch fits and would give each launch more work.
--   Value: memory_summary's device_memory_pct, when GPU utilization
--   is below 70%. How much the batch might grow is a straight line from the one
--   batch size the trace shows: stated only where the iteration's own allocations
--   are large enough to measure (1% of its peak, 1 MiB), and above 8x only as
--   "over 8x" (a straight line once said "the batch might grow 26362909.6x").
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
       format('peak {:.2f} GiB allocated, {:.1f}% of the device memory, with GPU utilization {:.1f}%; ',
              m.peak_allocated_bytes / 1073741824.0, m.device_memory_pct, g.gpu_util_pct)
       || CASE WHEN m.est_batch_scale_x IS NULL
                 OR m.peak_allocated_bytes - m.start_allocated_bytes < greatest(0.01 * m.peak_allocated_bytes, 1048576)
               THEN format('the iteration allocates {:.1f} MiB beyond the {:.2f} GiB it holds at its start: too little to tell how memory grows with the batch (a CUDA graph''s pool or cached allocations do not show as events)',
                           greatest(m.peak_allocated_bytes - m.start_allocated_bytes, 0) / 1048576.0,
                           m.start_allocated_bytes / 1073741824.0)
               WHEN m.est_batch_scale_x > 8
               THEN format('memory would hold a batch over 8x larger (a straight line from this one batch size says {:.0f}x; the trace shows one batch size only: measure at 2x before going further)',
                           m.est_batch_scale_x)
               ELSE format('the batch might grow {:.1f}x', m.est_batch_scale_x) END AS evidence
FROM report_memory_summary m JOIN iteration_gpu_time g USING (run, iteration)
WHERE g.gpu_util_pct < 70 AND m.device_memory_pct IS NOT NULL AND ($run IS NULL OR m.run = $run);
