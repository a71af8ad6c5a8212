-- Ad-hoc SQL's starting points. The kernels table also holds the kernels of ncu
-- reports (replayed, serialized, without start times): sums over it count a
-- profiled kernel twice. trace_kernels is the GPU activity the traces recorded,
-- and nothing else; join kernel_layers (run, kernel_id) for the layer type.

-- GPU activity (kernels, memcpy, memset) of trace runs only: the kernels table
-- without the ncu reports' replayed kernels.
CREATE OR REPLACE VIEW trace_kernels AS
SELECT k.*
FROM kernels k
WHERE k.run IN (SELECT run FROM runs WHERE kind = 'trace');

-- The CPU side of PyTorch/Kineto traces as torch.profiler's key_averages sees it:
-- complete events (ph X) of framework ops, user ranges (record_function, NVTX-style
-- annotations, ProfilerStep#N), runtime and driver calls and Python frames, each
-- with its level (op | user | runtime | python). The ops report nests them.
CREATE OR REPLACE VIEW cpu_events AS
SELECT run, event_id, name, pid, tid, ts_ns, dur_ns, ts_ns + dur_ns AS end_ns,
       CASE WHEN is_framework_op_category(cat) THEN 'op'
            WHEN lower(cat) = 'user_annotation' THEN 'user'
            WHEN is_launch_category(cat) THEN 'runtime'
            ELSE 'python' END AS level
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL
  AND (is_framework_op_category(cat) OR lower(cat) IN ('user_annotation', 'python_function')
       OR is_launch_category(cat));
