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
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every)
), k AS (       -- with the stream's idle before it when its launch call started after the stream's
                -- previous kernel ended (idle_breakdown's waiting_on_host): the GPU waited for the launch
    SELECT k.run, k.iteration, k.ts_ns, k.dur_ns, k.launch_end_ns - k.launch_ts_ns AS launch_ns,
           is_graph_launch(k.launch_name) AS node,
           CASE WHEN k.launch_ts_ns > prev_end AND k.ts_ns > prev_end THEN k.ts_ns - prev_end ELSE 0 END AS waited_ns
    FROM (SELECT k.*, max(k.ts_ns + k.dur_ns) OVER (PARTITION BY k.run, k.iteration, k.stream ORDER BY k.ts_ns, k.kernel_id
                                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
          FROM kernels k JOIN it USING (run, iteration)
          WHERE k.kind = 'kernel' AND k.ts_ns IS NOT NULL) k
    WHERE k.launch_end_ns IS NOT NULL AND k.dur_ns IS NOT NULL
), w AS (         -- the waits of the tiny kernels' streams, merged over streams (gaps and islands)
    SELECT run, iteration, s, e,
           sum(CASE WHEN s > prev_e THEN 1 ELSE 0 END) OVER (PARTITION BY run, iteration ORDER BY s, e
                                                             ROWS UNBOUNDED PRECEDING) AS island
    FROM (SELECT run, iteration, ts_ns - waited_ns AS s, ts_ns AS e,
                 max(ts_ns) OVER (PARTITION BY run, iteration ORDER BY ts_ns - waited_ns, ts_ns
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
          FROM k WHERE NOT node AND dur_ns < launch_ns AND waited_ns > 0)
), wu AS (
    SELECT run, iteration, min(s) AS s, max(e) AS e FROM w GROUP BY run, iteration, island
), lost AS (        -- of the merged waits, the time no GPU activity (kernel, memcpy, memset) ran
    SELECT wu.run, wu.iteration,
           any_value(wu.e - wu.s) - coalesce(sum(least(wu.e, b.end_ns) - greatest(wu.s, b.start_ns))
                                                     FILTER (b.start_ns IS NOT NULL), 0) AS lost_ns
    FROM (SELECT *, row_number() OVER () AS id FROM wu) wu
    LEFT JOIN (SELECT run, iteration, start_ns, end_ns FROM gpu_busy_intervals WHERE activity = 'all') b
      ON b.run = wu.run AND b.iteration = wu.iteration AND b.start_ns < wu.e AND b.end_ns > wu.s
    GROUP BY wu.run, wu.iteration, wu.id
), l AS (
    SELECT run, iteration, sum(lost_ns) AS lost_ns FROM lost GROUP BY ALL
), g AS (
    SELECT run, iteration, count(*) AS n, count(*) FILTER (NOT node AND dur_ns < launch_ns) AS tiny,
           sum(dur_ns) FILTER (NOT node AND dur_ns < launch_ns) AS tiny_ns, sum(dur_ns) AS all_ns,
           median(launch_ns) FILTER (NOT node) AS launch_p50,
           median(dur_ns) FILTER (NOT node AND dur_ns < launch_ns) AS tiny_p50,
           coalesce(sum(waited_ns) FILTER (NOT node AND dur_ns < launch_ns), 0) AS waited_ns
    FROM k GROUP BY ALL
)
SELECT g.run, g.iteration, 100.0 * coalesce(l.lost_ns, 0) / it.dur_ns AS value,
       CASE WHEN coalesce(ig.graph_kernels, 0) = 0 THEN
       format('{} of {} kernels ({:.1f}%) ran shorter than their launch call (median launch call {:.1f} us, median of those kernels {:.1f} us); they are {:.1f}% of kernel time; the GPU sat idle {:.3f} ms waiting for their launches, {:.2f}% of the {:.2f} ms iteration (their streams waited {:.3f} ms in all)',
              tiny, n, 100.0 * tiny / n, launch_p50 / 1e3, coalesce(tiny_p50, 0) / 1e3,
              100.0 * coalesce(tiny_ns, 0) / all_ns, coalesce(l.lost_ns, 0) / 1e6,
              100.0 * coalesce(l.lost_ns, 0) / it.dur_ns, it.dur_ns / 1e6, waited_ns / 1e6)
       ELSE
       format('the step already runs {} of its {} kernels ({:.1f}%) as nodes of {} CUDA graph launch(es); left: {} kernels launched one by one ({} of them shorter than their launch call, {:.1f}% of kernel time, the GPU idle {:.3f} ms waiting for them), {:.1f} us in the graph launch calls, {:.1f} us of GPU time between replays',
              ig.graph_kernels, ig.kernels, ig.graph_kernel_pct, ig.graph_launches, ig.eager_kernels, tiny,
              100.0 * coalesce(tiny_ns, 0) / all_ns, coalesce(l.lost_ns, 0) / 1e6, ig.launch_call_ns / 1e3,
              ig.between_replays_ns / 1e3)
       END AS evidence,
       CASE WHEN 100.0 * coalesce(l.lost_ns, 0) / it.dur_ns >= 20 THEN 'high'
            WHEN 100.0 * coalesce(l.lost_ns, 0) / it.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM g JOIN it USING (run, iteration) LEFT JOIN l USING (run, iteration)
LEFT JOIN iteration_graphs ig USING (run, iteration);
