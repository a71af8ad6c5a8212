-- name: critical_path
-- topic: critical path
-- description: What bounds the step: the longest path through the step's
--   dependency graph (views step_graph_nodes, step_graph_edges,
--   step_graph_rank_edges), walked back from the step's last end, at each point
--   taking the dependency that finished last. One row per segment, earliest
--   first: what ran (a CPU op on its thread, a launch, a kernel on its stream,
--   nothing), its category and where. The segments tile the step: their
--   dur_ns add up to step_ns. Per run: a collective that waited for a later
--   rank shows the wait as 'waiting for another rank'; per job (job=NAME):
--   the path crosses to the rank that arrived last. Where the trace lacks what
--   an edge needs (no correlation to the launch), the segment is 'unknown
--   dependency' and missing_edge names the edge. Method: docs/method.md
--   ("Critical path and what-if").
-- iteration_all: sql
-- engines: duckdb, spark
-- parameters:
--   run RUN = NULL: trace run (all when absent and no job is given)
--   job VARCHAR = NULL: a job: one path across its ranks (run is then not read)
--   iteration VARCHAR = NULL: iteration number, steady, or all (one path per iteration); the steady one when absent
-- columns:
--   run VARCHAR: the run (rank) of the segment
--   job VARCHAR: the job asked for (NULL: one run's path)
--   iteration INTEGER: iteration
--   seq INTEGER: position of the segment on the path, from 0 (earliest)
--   rank INTEGER: rank of the run (NULL for a trace without one)
--   what VARCHAR: the event the time is attributed to: a CPU op, user range or runtime call (its own time, outside the children on the path), a kernel or copy; '(nothing ran)' for idle time
--   category VARCHAR: cpu op | launch overhead (runtime launch calls, launch to kernel start) | kernel | memcpy | communication | waiting for another rank | sync (a synchronizing call's own time, its return after the GPU) | idle | unknown dependency
--   layer_type VARCHAR: GPU activity: its layer type (kernel_layers)
--   node_id BIGINT: the event (step_graph_nodes.node_id); NULL for idle time
--   node_kind VARCHAR: cpu op | user | runtime | kernel | memcpy | memset
--   place VARCHAR: 'thread PID/TID' or 'stream N'
--   edge VARCHAR: the dependency that bound the segment's end: duration (a kernel's own time), thread, launch, stream, sync, event_wait, fork, join, collective, none
--   start_ns BIGINT: start of the segment, ns
--   dur_ns BIGINT: duration of the segment, ns
--   missing_edge VARCHAR: for 'unknown dependency': the edge kind the trace lacks (launch: no correlation to a launch call; sync: a synchronizing call that waited on nothing the trace shows)
--   step_ns BIGINT: the iteration's duration (the job's: first start to last end over its ranks), ns
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- prepared_by: critical_path
SELECT run, job, iteration, seq, rank, what, category, layer_type, node_id, node_kind, place, edge,
       start_ns, dur_ns, missing_edge, step_ns
FROM _critical_path
WHERE $run IS NULL OR job IS NOT NULL OR run = $run
ORDER BY job NULLS FIRST, run, iteration, seq;
