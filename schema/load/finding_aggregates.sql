-- The finding rules' per-iteration sums of one trace run, stored at ingest (--op-totals,
-- after flop_aggregates.sql) so that findings with iteration=all reads them instead of
-- sweeping the run's kernels and events once per rule (docs/benchmarks.md, "Reports with
-- iteration=all"). Runs after derive_trace.sql, in the ingest's transaction.
-- Parameters: $run VARCHAR.
-- reads: iterations, kernels and events of the run (the sweep macros of schema/views/findings.sql)
-- creates: rows of finding_iteration_totals
--
-- One row per iteration of the run: its GPU time (iteration_gpu_time, as finding_iterations
-- gives it), its CUDA graphs (iteration_graphs, as finding_graphs gives it) and each
-- sweeping rule's sums, by the macros the rules read themselves
-- (host_bound_starved, tiny_kernel_sums, fusion_sums, data_loader_sums, sync_sums,
-- layout_sums) over every iteration of the run; a rule's columns are NULL where its sweep
-- gives the iteration no row. The run's old rows go first, so the macros sweep it.
DELETE FROM finding_iteration_totals WHERE run = $run;
INSERT INTO finding_iteration_totals
SELECT i.run, i.iteration, i.kernel_busy_ns, i.idle_ns, i.gpu_util_pct,
       ig.kernels, ig.graph_kernels, ig.graph_kernel_pct, ig.graph_launches, ig.launch_call_ns,
       ig.between_replays_ns, ig.eager_kernels,
       h.starved_ns,
       t.n, t.tiny, t.tiny_ns, t.all_ns, t.launch_p50, t.tiny_p50, t.waited_ns, t.lost_ns,
       f.launches, f.all_ns, f.a, f.b, f.c, f.n, f.ns, f.span_ns,
       d.calls, d.len_ns, d.idle_ns,
       s.n, s.ns, s.lost_ns, s.calls,
       l.all_ns, l.conv_ns, l.best_rank, l.launches
FROM finding_iterations($run, NULL, every_p := true) i
LEFT JOIN finding_graphs($run, NULL, every_p := true) ig USING (run, iteration)
LEFT JOIN host_bound_starved($run, NULL, every_p := true) h USING (run, iteration)
LEFT JOIN tiny_kernel_sums($run, NULL, every_p := true) t USING (run, iteration)
LEFT JOIN fusion_sums($run, NULL, every_p := true) f USING (run, iteration)
LEFT JOIN data_loader_sums($run, NULL, every_p := true) d USING (run, iteration)
LEFT JOIN sync_sums($run, NULL, every_p := true) s USING (run, iteration)
LEFT JOIN layout_sums($run, NULL, every_p := true) l USING (run, iteration);
