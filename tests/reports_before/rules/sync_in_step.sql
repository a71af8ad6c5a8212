-- rule: sync_in_step
-- description: Calls that block the host until the GPU catches up
--   (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
--   blocking cudaMemcpy, and their driver-API forms) inside the step marker:
--   `.item()`, `.cpu()`, printing a loss, GradScaler's inf check. Each empties the
--   launch queue. Value: the GPU time they cost, as a share of the iteration: for
--   each call, the GPU idle from the later of the call's start and the end of the
--   last GPU activity that started before the call returned, to the next GPU
--   activity's start, at most the time the host was blocked (without the call, the
--   host would have run that much earlier and the queued work would have hidden
--   the gap). The CPU time blocked is no cost of its own when the GPU stays busy.
--   Graded: high from 10%, medium from 3%, low below.
-- threshold: 1
-- unit: % of the iteration (GPU idle caused)
-- fires: above
-- severity: medium
-- next: launch_queue
-- steady: run
-- requires:
--   events: trace events with the CUDA runtime calls
-- suggestion: Move .item()/.cpu()/print of GPU values out of the step (log every N steps), keep
--   metrics on the GPU, and copy to the host with non_blocking=True into pinned memory.
WITH it AS (
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every)
), s AS (
    SELECT it.run, it.iteration, e.name, e.ts_ns AS s0, e.ts_ns + e.dur_ns AS e1, e.dur_ns
    FROM events e JOIN it ON e.run = it.run AND e.ts_ns >= it.start_ns AND e.ts_ns < it.marker_end_ns
    WHERE e.ph = 'X' AND e.name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize',
                                     'cudaMemcpy', 'cuCtxSynchronize', 'cuStreamSynchronize',
                                     'cuEventSynchronize', 'cuMemcpy', 'cuMemcpyDtoH_v2', 'cuMemcpyHtoD_v2')
), a AS (           -- the run's GPU activity near the iterations (what ends before the first one
                    -- starts cannot reach a call inside it; the next activity within a minute),
                    -- with the latest end so far
    SELECT k.run, k.ts_ns, max(k.ts_ns + k.dur_ns) OVER (PARTITION BY k.run ORDER BY k.ts_ns, k.kernel_id
                                                          ROWS UNBOUNDED PRECEDING) AS last_end
    FROM kernels k
    WHERE k.ts_ns IS NOT NULL AND k.dur_ns IS NOT NULL AND k.run IN (SELECT run FROM it)
      AND k.ts_ns + k.dur_ns > (SELECT min(start_ns) FROM it)
      AND k.ts_ns < (SELECT max(end_ns) FROM it) + 60000000000
), c AS (           -- each call: the GPU idle it caused
    SELECT s.*, before.last_end, after.ts_ns AS next_start,
           CASE WHEN after.ts_ns IS NOT NULL       -- no activity after it: no cost seen
                THEN greatest(0, least(after.ts_ns - greatest(coalesce(before.last_end, s.s0), s.s0), s.dur_ns))
                END AS lost_ns
    FROM s
    ASOF LEFT JOIN a AS before ON before.run = s.run AND s.e1 > before.ts_ns
    ASOF LEFT JOIN a AS after ON after.run = s.run AND s.e1 <= after.ts_ns
), g AS (
    SELECT run, iteration, sum(n) AS n, sum(dur_ns) AS ns, sum(lost_ns) AS lost_ns,
           string_agg(name || ' x' || n, ', ' ORDER BY n DESC, name) AS calls
    FROM (SELECT run, iteration, name, count(*) AS n, sum(dur_ns) AS dur_ns, sum(coalesce(lost_ns, 0)) AS lost_ns
          FROM c GROUP BY ALL)
    GROUP BY ALL
)
SELECT it.run, it.iteration, 100.0 * coalesce(g.lost_ns, 0) / it.dur_ns AS value,
       CASE WHEN g.n IS NULL THEN 'no synchronizing call inside the step marker'
            ELSE format('{} synchronizing calls inside the step ({}): the GPU sat idle {:.3f} ms because of them, {:.2f}% of the {:.2f} ms iteration (the host was blocked {:.3f} ms, GPU utilization {:.1f}%)',
                        g.n, g.calls, g.lost_ns / 1e6, 100.0 * g.lost_ns / it.dur_ns, it.dur_ns / 1e6,
                        g.ns / 1e6, it.gpu_util_pct)
                 -- a rank of a job with a straggler: its blocking is (mostly) the wait for it
                 || coalesce(format('; this rank spent {:.2f} ms of the step waiting for rank {}, the job''s straggler (straggler_ranks): fix that rank first',
                                    w.wait_ns / 1e6, w.waited_for), '') END AS evidence,
       CASE WHEN 100.0 * coalesce(g.lost_ns, 0) / it.dur_ns >= 10 THEN 'high'
            WHEN 100.0 * coalesce(g.lost_ns, 0) / it.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM it LEFT JOIN g USING (run, iteration) LEFT JOIN (SELECT run, iteration, waited_for, wait_ns FROM straggler_waits) w USING (run, iteration);
