-- name: graph_launches
-- topic: single GPU
-- description: CUDA graph launches (cudaGraphLaunch from PyTorch's CUDA graphs,
--   cuGraphLaunch from XLA's command buffers) with their nodes: per launch, the
--   launch call's own host time, the nodes it ran (kernels, copies, sets), its
--   launch delay (first node start - launch call end; negative when the GPU
--   starts the graph before the call returns), the nodes' span and summed time,
--   and the GPU gap since the previous graph's last node (between replays).
-- iteration_all: absent
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all when absent)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration of the launch
--   launch_name VARCHAR: the launch call
--   launch_ts_ns BIGINT: start of the launch call, ns
--   launch_call_ns BIGINT: the launch call's host time, ns
--   nodes BIGINT: GPU activities the launch ran
--   kernel_nodes BIGINT: of those, kernels
--   launch_delay_ns BIGINT: first node start - launch call end, ns
--   span_ns BIGINT: last node end - first node start, ns
--   node_sum_ns BIGINT: summed node duration, ns
--   gap_before_ns BIGINT: first node start - the previous graph launch's last node end in the run, ns (NULL for the first)
-- requires:
--   kernels: GPU kernels
-- engines: duckdb
SELECT run, iteration, launch_name, launch_ts_ns, launch_call_ns, nodes, kernel_nodes, launch_delay_ns,
       span_ns, node_sum_ns,
       first_node_ns - lag(last_node_end_ns) OVER (PARTITION BY run ORDER BY first_node_ns) AS gap_before_ns
FROM graph_launches
WHERE ($run IS NULL OR run = $run)
QUALIFY $iteration IS NULL OR iteration = $iteration
ORDER BY run, launch_ts_ns;
