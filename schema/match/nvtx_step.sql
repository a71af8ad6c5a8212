-- Kernel matching, before step 1: the training step an ncu report profiled, read
-- from the NVTX ranges of a report profiled with --nvtx, raw CSV or .ncu-rep
-- (ingest/ncu_rep_dump.py writes the CSV's columns; match.nvtx_step). ncu
-- gives each kind of range a column ("thread Domain:Push/Pop_Range:...",
-- "Id:Domain:Start/Stop_Range:...") holding every range around the kernel; the load
-- keeps them in counters as text. A range named tracedb_step_N (tracedb capture
-- --ncu) or ProfilerStep#N (PyTorch under emit_nvtx) names step N.
-- Parameters: $ncu_run.
-- Output: one row, step (BIGINT), when every kernel of the run is inside ranges that
-- name one step, the same for all; no row otherwise (no --nvtx, no step ranges,
-- several steps profiled).
-- reads: kernels, counters
-- creates: nothing (a query: match.py reads its row)
WITH named AS (
    SELECT kernel_id,
           list_distinct(flatten(list(regexp_extract_all(text_value, '(?:tracedb_step_|ProfilerStep#)([0-9]+)', 1))))
               AS steps
    FROM counters
    WHERE run = $ncu_run AND metric LIKE '%\_Range:%' ESCAPE '\' AND text_value IS NOT NULL
    GROUP BY kernel_id
)
SELECT CAST(any_value(n.steps[1]) AS BIGINT) AS step
FROM kernels k LEFT JOIN named n USING (kernel_id)
WHERE k.run = $ncu_run
HAVING count(*) > 0 AND bool_and(coalesce(len(n.steps), 0) = 1) AND count(DISTINCT n.steps[1]) = 1;
