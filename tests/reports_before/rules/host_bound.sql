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
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every)
), k AS (
    SELECT k.run, k.iteration, greatest(least(k.launch_end_ns, k.ts_ns), it.start_ns) AS q, k.ts_ns AS s,
           least(k.ts_ns + k.dur_ns, it.end_ns) AS e
    FROM kernels k JOIN it USING (run, iteration)
    WHERE k.ts_ns IS NOT NULL AND k.launch_end_ns IS NOT NULL
), ev AS (       -- +1/-1: activity running (busy), activity launched and not started (pending)
    SELECT run, iteration, s AS t, 1 AS busy, 0 AS pend FROM k UNION ALL
    SELECT run, iteration, e, -1, 0 FROM k UNION ALL
    SELECT run, iteration, q, 0, 1 FROM k UNION ALL
    SELECT run, iteration, s, 0, -1 FROM k UNION ALL
    SELECT run, iteration, start_ns, 0, 0 FROM it UNION ALL
    SELECT run, iteration, end_ns, 0, 0 FROM it
), pts AS (
    SELECT run, iteration, t, sum(busy) AS busy, sum(pend) AS pend FROM ev GROUP BY ALL
), st AS (
    SELECT run, iteration, t,
           sum(busy) OVER w AS busy, sum(pend) OVER w AS pend,
           lead(t) OVER (PARTITION BY run, iteration ORDER BY t) AS nt
    FROM pts WINDOW w AS (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING)
), starved AS (
    SELECT it.run, it.iteration,
           coalesce(sum(st.nt - st.t) FILTER (st.busy = 0 AND st.pend = 0 AND st.t >= it.start_ns
                                               AND st.nt <= it.end_ns), 0) AS starved_ns
    FROM it LEFT JOIN st USING (run, iteration)
    GROUP BY it.run, it.iteration
)
SELECT it.run, it.iteration, 100.0 * s.starved_ns / it.dur_ns AS value,
       format('GPU idle with nothing queued for {:.2f} ms of the {:.2f} ms iteration ({:.1f}%); GPU utilization {:.1f}%',
              s.starved_ns / 1e6, it.dur_ns / 1e6, 100.0 * s.starved_ns / it.dur_ns, it.gpu_util_pct)
       || CASE WHEN ig.graph_kernels > 0 THEN
              format('; the step already runs {:.1f}% of its kernels as {} CUDA graph launch(es): the idle is host time around them ({:.1f} us in the launch calls, {} kernels launched one by one)',
                     ig.graph_kernel_pct, ig.graph_launches, ig.launch_call_ns / 1e3, ig.eager_kernels)
          ELSE '' END AS evidence
FROM it JOIN starved s USING (run, iteration) LEFT JOIN iteration_graphs ig USING (run, iteration)
WHERE EXISTS (SELECT 1 FROM k WHERE k.run = it.run AND k.iteration = it.iteration);
