-- includes: base

-- Ad-hoc SQL's starting points. The kernels table also holds the kernels of ncu
-- reports (replayed, serialized, without start times): sums over it count a
-- profiled kernel twice. trace_kernels is the GPU activity the traces recorded,
-- and nothing else; join kernel_layers (run, kernel_id) for the layer type.

-- GPU activity (kernels, memcpy, memset) of trace runs only: the kernels table
-- without the ncu reports' replayed kernels, with the same columns.
--
-- @column run                   trace run
-- @column device                GPU index (args.device; XProf: N of /device:GPU:N)
-- @column context               CUDA context id (args.context or args.context_id)
-- @column stream                CUDA stream (args.stream, else the stream thread's number)
-- @column correlation           correlation id that links the activity to its launch call
-- @column grid_x                grid size, x (blocks)
-- @column grid_y                grid size, y (blocks)
-- @column grid_z                grid size, z (blocks)
-- @column block_x               block size, x (threads)
-- @column block_y               block size, y (threads)
-- @column block_z               block size, z (threads)
-- @column registers_per_thread  registers per thread
-- @column launch_name           name of the launch call (cudaLaunchKernel, cuLaunchKernel ...)
-- @column launch_ts_ns          start of the launch call, ns
-- @column launch_end_ns         end of the launch call, ns
-- @column launch_pid            process of the launch call, as written
-- @column launch_tid            thread of the launch call, as written
-- @column op_name               name of the op of op_event_id
-- @columns_from kernels
CREATE OR REPLACE VIEW trace_kernels AS
SELECT k.*
FROM kernels k
WHERE k.run IN (SELECT run FROM runs WHERE kind = 'trace');

-- The CPU side of PyTorch/Kineto traces as torch.profiler's key_averages sees it:
-- complete events (ph X) of framework ops, user ranges (record_function, NVTX-style
-- annotations, ProfilerStep#N), runtime and driver calls and Python frames, each
-- with its level (op | user | runtime | python). The ops report nests them.
-- XLA's traces (JAX, TensorFlow through XProf) give their host TraceMe events no
-- category: an event of a `/host:` process is taken too, as runtime when
-- its name is a CUDA driver or runtime call (cuGraphLaunch, cuLaunchHostFunc ...),
-- user when it carries a step_num (StepTraceAnnotation), else op (PjitFunction, PjRt
-- Execute, the XLA module, thunks). Its Python tracer frames (`$file:line name`) are left
-- out: they overlap the TraceMe events without nesting in them (a frame that ends after
-- the step annotation starts), which the ops report's nesting cannot place.
--
-- @column run       trace run
-- @column event_id  the event (events.event_id)
-- @column name      event name as written
-- @column pid       process, as written
-- @column tid       thread, as written
-- @column ts_ns     start, ns
-- @column dur_ns    duration, ns
-- @column end_ns    ts_ns + dur_ns, ns
-- @column level     op (framework op) | user (user_annotation) | runtime (runtime or driver
--                   call) | python (python_function)
CREATE OR REPLACE VIEW cpu_events AS
WITH host AS (
    SELECT DISTINCT run, pid FROM threads WHERE starts_with(process_name, '/host:')
)
SELECT run, event_id, name, pid, tid, ts_ns, dur_ns, ts_ns + dur_ns AS end_ns,
       CASE WHEN is_framework_op_category(cat) THEN 'op'
            WHEN lower(cat) = 'user_annotation' THEN 'user'
            WHEN is_launch_category(cat) THEN 'runtime'
            WHEN cat IS NULL AND regexp_matches(name, '^cu(da)?[A-Z]') THEN 'runtime'
            WHEN cat IS NULL AND json_exists(args, '$.step_num') THEN 'user'
            WHEN cat IS NULL THEN 'op'
            ELSE 'python' END AS level
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL
  AND (is_framework_op_category(cat) OR lower(cat) IN ('user_annotation', 'python_function')
       OR is_launch_category(cat)
       OR (cat IS NULL AND NOT starts_with(name, '$') AND (run, pid) IN (SELECT (run, pid) FROM host)));
