-- name: what_if
-- topic: critical path
-- description: What a change would buy: the step graph replayed with changed
--   durations, each point at the latest of its dependencies' new times plus the
--   edge's cost (the measured gap where the edge bound the point, at most its
--   kind's typical binding gap where it did not), in topological order. The
--   predicted step time, the saving, and (path=true) the new critical path's
--   summary by category. Changes, combinable: scale kernels (scale=F with
--   kernel_layer, kernel_like and/or op_like selecting them), remove CPU ranges
--   by name (remove_cpu_like: the data loader wait, an annotation), remove
--   synchronizations (remove_syncs), zero launch overhead as a CUDA graph would
--   (kernels back to back at a graph's node-to-node gap), remove a rank's
--   lateness at the collectives, overlap a process group's communication fully.
--   Nothing selected changes nothing: the prediction is the measured step.
--   Method and validation against measured runs: docs/method.md.
-- iteration_all: sql
-- engines: duckdb, spark
-- parameters:
--   run RUN = NULL: trace run (all when absent and no job is given)
--   job VARCHAR = NULL: a job: replayed across its ranks (run is then not read)
--   iteration VARCHAR = NULL: iteration number, steady, or all; the steady one when absent
--   scale DOUBLE = NULL: factor on the duration of the kernels selected by kernel_layer, kernel_like, op_like (all three: every condition given must hold)
--   kernel_layer VARCHAR = NULL: select kernels of this layer type (kernel_layers)
--   kernel_like VARCHAR = NULL: select kernels whose name is LIKE this pattern (SQL LIKE: % any text, _ one character)
--   op_like VARCHAR = NULL: select kernels launched under an op (its innermost, kernels.op_name) whose name is LIKE this pattern
--   remove_cpu_like VARCHAR = NULL: CPU ranges (ops, annotations, runtime calls) whose name is LIKE this pattern take no time, nor do the events inside them
--   remove_syncs BOOLEAN = false: synchronizing calls (stream, device, event synchronize; a copy to the host the call waits for: .item()) neither wait nor take time
--   zero_launch_overhead BOOLEAN = false: as a CUDA graph: launch calls and the ops that launch take no CPU time, kernels wait for no launch and follow each other at a graph's node-to-node gap
--   remove_rank_lateness VARCHAR = NULL: a rank, or all: collectives that waited for that rank to arrive do not wait
--   overlap_comm VARCHAR = NULL: a process group, or all: its communication is fully hidden (takes no time on its stream)
--   path BOOLEAN = false: also the new critical path's time by category (one row per category, after the step's row)
-- columns:
--   run VARCHAR: trace run (NULL for a job)
--   job VARCHAR: the job asked for (NULL: one run)
--   iteration INTEGER: iteration
--   category VARCHAR: NULL on the step's row; path=true: a category of the new critical path
--   step_ns BIGINT: measured step time, ns (a category row: NULL)
--   predicted_step_ns BIGINT: predicted step time, ns (a category row: that category's time on the new path)
--   saving_ns BIGINT: step_ns - predicted_step_ns, ns
--   saving_pct DOUBLE: saving_ns / step_ns, %
--   changed_kernels BIGINT: kernels the selection scaled
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- prepared_by: what_if
SELECT run, job, iteration, CAST(NULL AS VARCHAR) AS category, step_ns, predicted_step_ns, saving_ns, saving_pct,
       changed_nodes AS changed_kernels
FROM _what_if
WHERE $run IS NULL OR job IS NOT NULL OR run = $run
UNION ALL
SELECT CASE WHEN job IS NULL THEN run END, job, iteration, category, NULL, CAST(sum(dur_ns) AS BIGINT), NULL, NULL, NULL
FROM _critical_path WHERE $path AND ($run IS NULL OR job IS NOT NULL OR run = $run)
GROUP BY ALL
ORDER BY job NULLS FIRST, run, iteration, category NULLS FIRST;
