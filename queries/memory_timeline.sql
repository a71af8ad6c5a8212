-- name: memory_timeline
-- topic: system
-- description: GPU memory over time per device (METHOD.md section 9): allocated
--   (live tensors) and reserved (the caching allocator's pool) after every
--   allocation and free of the trace's `[memory]` events (torch.profiler with
--   profile_memory=True). rel_ns counts from the start of the window asked for.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all with memory events when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every event of the trace); the steady one when absent
--   device INTEGER = NULL: CUDA device index (all when absent)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration whose window holds the event (NULL: outside every iteration)
--   device INTEGER: CUDA device index
--   ts_ns BIGINT: time of the allocation or free on the trace's timeline, ns
--   rel_ns BIGINT: ts_ns - start of the window asked for (the first iteration's start with iteration=all), ns
--   bytes BIGINT: allocated (> 0) or freed (< 0) by the event, bytes
--   allocated_bytes BIGINT: allocated after the event, bytes
--   reserved_bytes BIGINT: reserved after the event, bytes
-- requires:
--   memory_events: GPU memory events (trace the run with torch.profiler profile_memory=True, or tracedb.capture)
WITH w AS (
    SELECT * FROM iteration_windows($run, $iteration)
    WHERE iteration IS NULL OR lower(trim(coalesce($iteration, ''))) <> 'all'
), m AS (
    SELECT m.*, w.start_ns AS w_start
    FROM memory_events m JOIN w ON w.run = m.run
    WHERE m.device_type = 'cuda' AND ($device IS NULL OR m.device = $device)
      AND (w.iteration IS NULL OR m.ts_ns BETWEEN w.start_ns AND w.end_ns)
)
SELECT m.run, CASE WHEN m.ts_ns <= i.end_ns THEN i.iteration END AS iteration, m.device, m.ts_ns,
       m.ts_ns - m.w_start AS rel_ns, m.bytes, m.allocated_bytes, m.reserved_bytes
FROM m ASOF LEFT JOIN iterations i ON i.run = m.run AND m.ts_ns >= i.start_ns
ORDER BY m.run, m.device, m.ts_ns, m.event_id;
