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
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every, stored := $stored)
), g AS (       -- per iteration the synchronizing calls and the GPU idle they caused: stored at ingest,
                -- or swept
    SELECT run, iteration, sync_calls AS n, sync_ns AS ns, sync_lost_ns AS lost_ns, sync_names AS calls
    FROM finding_stored($run, $iteration, every_p := $every, stored := $stored) WHERE sync_calls IS NOT NULL
    UNION ALL
    SELECT * FROM sync_sums($run, $iteration, every_p := $every, stored := $stored)
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
