-- Shipped rows of kernel_class_rules (priority, field, pattern, kernel_class, note); see schema/tables/settings.sql.
SELECT * FROM (VALUES
    (10, 'kind', '^(memcpy|memset)$', 'memory', 'Kineto gpu_memcpy / gpu_memset, XProf Memcpy*/Memset*'),
    (20, 'name', '^(hip)?(Memcpy|Memset)|^dma', 'memory', 'copies and sets named as such (HTA''s memory pattern)'),
    (30, 'name', '(?i)^(nccl|rccl|hccl)|nccl(Dev)?Kernel', 'communication', 'NCCL/RCCL/HCCL of every era: ncclAllReduceRingLLKernel_sum_f32, ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclDevKernel_Generic'),
    (40, 'name', '^(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|Reduce|SendRecv|Send|Recv)_', 'communication', 'kernels named only by their NCCL collective (AllReduce_Sum_f32_RING_LL)'),
    (50, 'name', '^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast)(-start|-done)?([.][0-9]+)?$', 'communication', 'XLA collectives (TensorFlow, JAX)'),
    (60, 'name', '^cross_device_reduce', 'communication', 'custom all-reduce kernels (vLLM), as TraceLens counts them')
) AS t(priority, field, pattern, kernel_class, note);
