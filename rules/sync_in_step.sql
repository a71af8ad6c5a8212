-- rule: sync_in_step
-- description: Calls that block the host until the GPU catches up
--   (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
--   blocking cudaMemcpy, and their driver-API forms) inside the step marker:
--   `.item()`, `.cpu()`, printing a loss, GradScaler's inf check. Each empties the
--   launch queue. Value: such calls in the step (nsys's cuda_api_sync rule lists the same calls).
-- threshold: 0
-- unit: calls
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
    SELECT it.run, it.iteration, e.name, e.dur_ns
    FROM events e JOIN it ON e.run = it.run AND e.ts_ns >= it.start_ns AND e.ts_ns < it.marker_end_ns
    WHERE e.ph = 'X' AND e.name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize',
                                     'cudaMemcpy', 'cuCtxSynchronize', 'cuStreamSynchronize',
                                     'cuEventSynchronize', 'cuMemcpy', 'cuMemcpyDtoH_v2', 'cuMemcpyHtoD_v2')
), g AS (
    SELECT run, iteration, sum(c) AS n, sum(dur_ns) AS ns,
           string_agg(name || ' x' || c, ', ' ORDER BY c DESC, name) AS calls
    FROM (SELECT run, iteration, name, count(*) AS c, sum(dur_ns) AS dur_ns FROM s GROUP BY ALL)
    GROUP BY ALL
)
SELECT it.run, it.iteration, CAST(coalesce(g.n, 0) AS DOUBLE) AS value,
       CASE WHEN g.n IS NULL THEN 'no synchronizing call inside the step marker'
            ELSE format('{} synchronizing calls inside the step ({}), {:.3f} ms blocked, {:.2f}% of the {:.2f} ms iteration',
                        g.n, g.calls, g.ns / 1e6, 100.0 * g.ns / it.dur_ns, it.dur_ns / 1e6)
                 -- a rank of a job with a straggler: its blocking is (mostly) the wait for it (issue 49)
                 || coalesce(format('; this rank spent {:.2f} ms of the step waiting for rank {}, the job''s straggler (straggler_ranks): fix that rank first',
                                    w.wait_ns / 1e6, w.waited_for), '') END AS evidence
FROM it LEFT JOIN g USING (run, iteration) LEFT JOIN (SELECT run, iteration, waited_for, wait_ns FROM straggler_waits) w USING (run, iteration);
