-- rule: data_loader_wait
-- description: The GPU waits while the host fetches the next batch: time inside
--   the PyTorch DataLoader's `enumerate(DataLoader)#...__next__` events of the
--   step during which no kernel runs. Value: that time's share of the iteration.
-- threshold: 10
-- unit: % of the iteration
-- fires: above
-- severity: high
-- next: time_breakdown
-- steady: run
-- requires:
--   events: trace events (PyTorch traces name the DataLoader's __next__ calls)
-- suggestion: Load in worker processes (DataLoader(num_workers=N, persistent_workers=True,
--   prefetch_factor=...)), pin memory, and move per-sample work (decoding, augmentation) off the
--   training process or onto the GPU.
WITH it AS (
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every)
), dl AS (
    SELECT it.run, it.iteration, e.event_id, greatest(e.ts_ns, it.start_ns) AS s,
           least(e.ts_ns + e.dur_ns, it.end_ns) AS e
    FROM events e JOIN it ON e.run = it.run AND e.ts_ns < it.end_ns AND e.ts_ns + e.dur_ns > it.start_ns
    WHERE e.ph = 'X' AND e.name LIKE 'enumerate(DataLoader)%'
), idle AS (        -- each DataLoader call minus the kernel busy intervals inside it
    SELECT dl.run, dl.iteration, dl.event_id, any_value(dl.e - dl.s) AS len,
           coalesce(sum(least(dl.e, b.end_ns) - greatest(dl.s, b.start_ns)) FILTER (b.start_ns IS NOT NULL), 0) AS busy
    FROM dl LEFT JOIN (SELECT * FROM kernel_busy_intervals          -- one iteration: only its intervals
                       WHERE $iteration IS NULL OR iteration = $iteration) b
      ON b.run = dl.run AND b.iteration = dl.iteration AND b.start_ns < dl.e AND b.end_ns > dl.s
    GROUP BY dl.run, dl.iteration, dl.event_id
), g AS (
    SELECT run, iteration, count(*) AS calls, sum(len) AS len_ns, sum(len - busy) AS idle_ns FROM idle GROUP BY ALL
)
SELECT it.run, it.iteration, 100.0 * coalesce(g.idle_ns, 0) / it.dur_ns AS value,
       CASE WHEN g.calls IS NULL THEN 'no DataLoader call in the step'
            ELSE format('the host spent {:.2f} ms in {} DataLoader call(s), the GPU idle for {:.2f} ms of it: {:.1f}% of the {:.2f} ms iteration',
                        g.len_ns / 1e6, g.calls, g.idle_ns / 1e6, 100.0 * g.idle_ns / it.dur_ns, it.dur_ns / 1e6) END AS evidence
FROM it LEFT JOIN g USING (run, iteration);
