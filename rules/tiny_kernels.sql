-- rule: tiny_kernels
-- description: Kernels that run for less time than the host call that
--   launched them: launching, not computing, sets the pace. Nodes of a CUDA graph
--   (cudaGraphLaunch, XLA's cuGraphLaunch) have no launch call of their own and never
--   count: a step that already runs as graphs is told so, with what is left (kernels
--   still launched one by one, the graph launch calls' own time, the GPU time between
--   replays: iteration_graphs). Value: what the GPU lost to them, as a share of the
--   iteration: the time no GPU activity ran on any stream while such a kernel's stream
--   waited for its launch call (the call started after the stream's previous kernel
--   ended: idle_breakdown's waiting_on_host), the union over streams. Graded by it:
--   high from 20%, medium from 3%, low below.
-- threshold: 1
-- unit: % of the iteration (GPU idle caused)
-- fires: above
-- severity: medium
-- next: launch_delay
-- steady: run
-- requires:
--   kernels.launch_end_ns: kernels with their launch calls (a trace with CUDA activity)
-- suggestion: Fuse the small kernels (torch.compile), capture the step (or the kernels still launched
--   one by one) in a CUDA graph, or give each kernel more work (a larger batch).
WITH it AS (
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every, stored := $stored)
), g AS (       -- per iteration the kernels, the short ones and the GPU idle their launches caused:
                -- stored at ingest, or swept
    SELECT run, iteration, tiny_kernels AS n, tiny_short AS tiny, tiny_short_ns AS tiny_ns, tiny_all_ns AS all_ns,
           tiny_launch_p50_ns AS launch_p50, tiny_short_p50_ns AS tiny_p50, tiny_waited_ns AS waited_ns,
           tiny_lost_ns AS lost_ns
    FROM finding_stored($run, $iteration, every_p := $every, stored := $stored) WHERE tiny_kernels IS NOT NULL
    UNION ALL
    SELECT * FROM tiny_kernel_sums($run, $iteration, every_p := $every, stored := $stored)
)
SELECT g.run, g.iteration, 100.0 * coalesce(g.lost_ns, 0) / it.dur_ns AS value,
       CASE WHEN coalesce(ig.graph_kernels, 0) = 0 THEN
       format('{} of {} kernels ({:.1f}%) ran shorter than their launch call (median launch call {:.1f} us, median of those kernels {:.1f} us); they are {:.1f}% of kernel time; the GPU sat idle {:.3f} ms waiting for their launches, {:.2f}% of the {:.2f} ms iteration (their streams waited {:.3f} ms in all)',
              tiny, n, 100.0 * tiny / n, launch_p50 / 1e3, coalesce(tiny_p50, 0) / 1e3,
              100.0 * coalesce(tiny_ns, 0) / all_ns, coalesce(g.lost_ns, 0) / 1e6,
              100.0 * coalesce(g.lost_ns, 0) / it.dur_ns, it.dur_ns / 1e6, waited_ns / 1e6)
       ELSE
       format('the step already runs {} of its {} kernels ({:.1f}%) as nodes of {} CUDA graph launch(es); left: {} kernels launched one by one ({} of them shorter than their launch call, {:.1f}% of kernel time, the GPU idle {:.3f} ms waiting for them), {:.1f} us in the graph launch calls, {:.1f} us of GPU time between replays',
              ig.graph_kernels, ig.kernels, ig.graph_kernel_pct, ig.graph_launches, ig.eager_kernels, tiny,
              100.0 * coalesce(tiny_ns, 0) / all_ns, coalesce(g.lost_ns, 0) / 1e6, ig.launch_call_ns / 1e3,
              ig.between_replays_ns / 1e3)
       END AS evidence,
       CASE WHEN 100.0 * coalesce(g.lost_ns, 0) / it.dur_ns >= 20 THEN 'high'
            WHEN 100.0 * coalesce(g.lost_ns, 0) / it.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM g JOIN it USING (run, iteration)
LEFT JOIN finding_graphs($run, $iteration, every_p := $every, stored := $stored) ig
  USING (run, iteration);
