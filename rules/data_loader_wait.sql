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
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every, stored := $stored)
), g AS (       -- per iteration the DataLoader calls and the GPU idle in them: stored at ingest, or swept
    SELECT run, iteration, loader_calls AS calls, loader_ns AS len_ns, loader_idle_ns AS idle_ns
    FROM finding_stored($run, $iteration, every_p := $every, stored := $stored) WHERE loader_calls IS NOT NULL
    UNION ALL
    SELECT * FROM data_loader_sums($run, $iteration, every_p := $every, stored := $stored)
)
SELECT it.run, it.iteration, 100.0 * coalesce(g.idle_ns, 0) / it.dur_ns AS value,
       CASE WHEN g.calls IS NULL THEN 'no DataLoader call in the step'
            ELSE format('the host spent {:.2f} ms in {} DataLoader call(s), the GPU idle for {:.2f} ms of it: {:.1f}% of the {:.2f} ms iteration',
                        g.len_ns / 1e6, g.calls, g.idle_ns / 1e6, 100.0 * g.idle_ns / it.dur_ns, it.dur_ns / 1e6) END AS evidence
FROM it LEFT JOIN g USING (run, iteration);
