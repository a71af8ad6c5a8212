-- name: eager_phases
-- topic: TF queue
-- description: TensorFlow eager execution, one row per op node (method.md
--   section 5): enqueuing on the Python thread (TFE_Py_FastPathExecute_C /
--   EagerExecute), the wait in the scheduling queue (async mode only),
--   dequeuing on the executor thread (EagerKernelExecute without the kernel),
--   and kernel execution on the CPU (KernelAndDeviceFunc::Run) and the GPU
--   (kernels launched from the dequeue). Nodes pair FIFO in async mode.
-- iteration_all: absent
-- parameters:
--   run RUN = NULL: TensorFlow trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all when absent)
-- columns:
--   run VARCHAR: trace run
--   mode VARCHAR: async | sync
--   iteration INTEGER: iteration whose step holds the enqueue
--   node BIGINT: enqueue order in the run, from 1
--   op VARCHAR: op type (EagerExecute's eager_op)
--   enqueue_ns BIGINT: enqueuing on the Python thread, ns
--   queue_wait_ns BIGINT: enqueue end to dequeue start, ns (NULL in sync mode)
--   dequeue_ns BIGINT: dequeuing without the kernel call, ns
--   cpu_exec_ns BIGINT: CPU kernel execution, ns
--   gpu_exec_ns BIGINT: GPU kernel time launched by the node, ns
-- requires:
--   eager_mode: TensorFlow eager execution events (EagerExecute, EagerKernelExecute)
SELECT n.run, n.mode, i.iteration, n.node, n.op, n.enqueue_ns, n.queue_wait_ns, CAST(n.dequeue_ns AS BIGINT) AS dequeue_ns,
       CAST(n.cpu_exec_ns AS BIGINT) AS cpu_exec_ns, CAST(n.gpu_exec_ns AS BIGINT) AS gpu_exec_ns
FROM eager_nodes n
ASOF LEFT JOIN iterations i ON i.run = n.run AND n.enqueue_start_ns >= i.start_ns
WHERE ($run IS NULL OR n.run = $run)
  AND ($iteration IS NULL OR (i.iteration = $iteration AND n.enqueue_start_ns <= i.end_ns))
ORDER BY n.run, n.node;
