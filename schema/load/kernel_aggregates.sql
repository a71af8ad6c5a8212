-- The GPU time of one trace run, per iteration and for the whole trace, stored at ingest
-- (--op-totals, after flop_aggregates.sql) so that the reports that read it with
-- iteration=all do not sweep the run's kernels again: iteration_gpu_time (gpu_utilization,
-- utilization_levels, rank_summary and every report choosing iterations through it),
-- run_kernel_busy (flop_utilization), system_metrics, transfers, time_breakdown
-- (iteration_kernel_overlap) and gpu_class_time (temporal_breakdown,
-- kernel_type_breakdown). launch_queue's rows are stored beside them (ingest/trace.py
-- runs the report itself over the run: store_op_totals).
-- Parameters: $run VARCHAR.
-- reads: kernels, iterations, events, eager_nodes, collectives of the run (the views over them)
-- creates: _ka_busy (dropped once read); rows of kernel_iteration_totals, copy_kernel_overlap and
-- gpu_class_totals
--
-- Each value is the view's own, over this run alone (a constant run reaches the views'
-- scans through their sorts), with the run's stored rows deleted first so that the views
-- sweep it. Every run keeps a whole-trace row (iteration NULL): it marks the run as
-- stored (kernel_stored_runs), also with no kernels.
DELETE FROM kernel_iteration_totals WHERE run = $run;
DELETE FROM gpu_class_totals WHERE run = $run;
DELETE FROM copy_kernel_overlap WHERE run = $run;

-- the kernels' busy intervals of each iteration, once: their lengths (the whole trace's
-- kernel busy time) and their parts inside the iteration's window and the whole window
CREATE TEMP TABLE _ka_busy AS
SELECT b.iteration, b.start_ns, b.end_ns, b.dur_ns,
       CASE WHEN b.start_ns < w.end_ns AND w.start_ns < b.end_ns
            THEN least(b.end_ns, w.end_ns) - greatest(b.start_ns, w.start_ns) END AS in_window_ns,
       CASE WHEN b.start_ns < a.end_ns AND a.start_ns < b.end_ns
            THEN least(b.end_ns, a.end_ns) - greatest(b.start_ns, a.start_ns) END AS in_trace_ns
FROM kernel_busy_intervals b
LEFT JOIN iteration_windows($run, 'all') w ON w.run = b.run AND w.iteration = b.iteration
LEFT JOIN iteration_windows($run, 'all') a ON a.run = b.run AND a.iteration IS NULL
WHERE b.run = $run;

INSERT INTO kernel_iteration_totals
SELECT $run, g.iteration, g.kernel_busy_ns, g.kernel_sum_ns, g.gpu_event_sum_ns, g.gpu_event_busy_ns, g.kernels,
       (SELECT sum(in_window_ns) FROM _ka_busy b WHERE b.iteration = g.iteration),
       o.cpu_kernel_ns, o.gpu_kernel_ns, o.overlap_ns, o.overhead_ns
FROM iteration_gpu_time g
LEFT JOIN iteration_kernel_overlap o ON o.run = g.run AND o.iteration = g.iteration
WHERE g.run = $run;
INSERT INTO kernel_iteration_totals
SELECT $run, NULL, (SELECT sum(dur_ns) FROM _ka_busy), NULL, NULL, NULL, NULL,
       (SELECT sum(in_trace_ns) FROM _ka_busy), NULL, NULL, NULL, NULL;
-- transfers' overlap of each copy with the busy intervals of its iteration
INSERT INTO copy_kernel_overlap
SELECT $run, c.kernel_id, sum(greatest(0, least(c.ts_ns + c.dur_ns, b.end_ns) - greatest(c.ts_ns, b.start_ns)))
FROM kernels c JOIN _ka_busy b ON b.iteration = c.iteration AND b.start_ns < c.ts_ns + c.dur_ns AND c.ts_ns < b.end_ns
WHERE c.run = $run AND c.kind IN ('memcpy', 'memset') AND c.ts_ns IS NOT NULL
GROUP BY c.kernel_id;
DROP TABLE _ka_busy;

INSERT INTO gpu_class_totals
SELECT run, iteration, window_ns, busy_ns, compute_only_ns, communication_only_ns, memory_only_ns,
       compute_communication_ns, compute_memory_ns, communication_memory_ns, all_three_ns, compute_ns,
       communication_ns, kernel_class_rules_digest()
FROM gpu_class_time WHERE run = $run;
INSERT INTO gpu_class_totals (run, rules)
SELECT $run, kernel_class_rules_digest() WHERE NOT EXISTS (SELECT 1 FROM gpu_class_totals WHERE run = $run);
