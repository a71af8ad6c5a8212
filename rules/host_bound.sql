-- rule: host_bound
-- description: The GPU sits idle while nothing waits to run on it: no GPU
--   activity (kernel, memcpy, memset) runs on any stream and none has been
--   launched and not yet started. The host (Python, the framework, the launch
--   calls) does not keep the GPU fed. Value: that time's share of the iteration.
-- threshold: 30
-- unit: % of the iteration
-- fires: above
-- severity: high
-- next: launch_queue
-- steady: run
-- requires:
--   kernels.launch_end_ns: GPU activity with its launch calls (a trace with CUDA activity)
-- suggestion: Give the GPU more work per launch (a larger batch), fewer launches (torch.compile,
--   CUDA graphs where the step is not one already, fused optimizers), and keep Python out of the
--   step; launch_queue shows when the queue runs dry.
WITH it AS (
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every, stored := $stored)
), s AS (       -- per iteration the idle with nothing queued: stored at ingest, or swept
    SELECT run, iteration, host_starved_ns AS starved_ns
    FROM finding_stored($run, $iteration, every_p := $every, stored := $stored) WHERE host_starved_ns IS NOT NULL
    UNION ALL
    SELECT * FROM host_bound_starved($run, $iteration, every_p := $every, stored := $stored)
)
SELECT it.run, it.iteration, 100.0 * s.starved_ns / it.dur_ns AS value,
       format('GPU idle with nothing queued for {:.2f} ms of the {:.2f} ms iteration ({:.1f}%); GPU utilization {:.1f}%',
              s.starved_ns / 1e6, it.dur_ns / 1e6, 100.0 * s.starved_ns / it.dur_ns, it.gpu_util_pct)
       || CASE WHEN ig.graph_kernels > 0 THEN
              format('; the step already runs {:.1f}% of its kernels as {} CUDA graph launch(es): the idle is host time around them ({:.1f} us in the launch calls, {} kernels launched one by one)',
                     ig.graph_kernel_pct, ig.graph_launches, ig.launch_call_ns / 1e3, ig.eager_kernels)
          ELSE '' END AS evidence
FROM it JOIN s USING (run, iteration) LEFT JOIN finding_graphs($run, $iteration, every_p := $every, stored := $stored) ig
  USING (run, iteration);
