-- Shipped rows of layer_rules (priority, field, pattern, layer_type); see schema/tables/settings.sql.
SELECT * FROM (VALUES
    (5, 'kernel', '(?i)^(nccl|rccl|hccl)|nccl(Dev)?Kernel|^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)', 'communication'),
    (10, 'kind', '^(memcpy|memset)$', 'memory copy/set'),
    (20, 'op', '(?i)optimizer|_foreach_|_fused_(sgd|adam)|_amp_foreach_non_finite|_amp_update_scale', 'optimizer'),
    (30, 'op', '(?i)attention|scaled_dot_product|flash', 'attention'),
    (40, 'op', '(?i)conv', 'convolution'),
    (50, 'op', '(?i)aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|_scaled_mm)$', 'matmul/linear'),
    (60, 'op', '(?i)(batch|layer|group|instance|rms)_norm', 'normalization'),
    (70, 'op', '(?i)pool', 'pooling'),
    (80, 'op', '(?i)embedding', 'embedding'),
    (90, 'op', '(?i)nll_loss|cross_entropy|mse_loss|l1_loss|log_softmax|_softmax_backward_data|loss', 'loss'),
    (100, 'op', '(?i)relu|gelu|silu|sigmoid|tanh|threshold|clamp|dropout|softmax|aten::(add|sub|mul|div|copy|fill|zero|sum|mean|where|exp|pow|sqrt|rsqrt|neg|abs|reciprocal|gather|cat|index|masked_fill|_to_copy|to)', 'elementwise/activation'),
    (195, 'kernel', '(?i)^(wrapped_|loop_)?convert|convert_fusion', 'elementwise/activation'),
    (197, 'kernel', '(?i)^(loop|input)_[a-z_]*fusion', 'elementwise/activation'),
    (200, 'kernel', '(?i)multi_tensor_apply|amp_update_scale|sgd|adam', 'optimizer'),
    (210, 'kernel', '(?i)conv|dgrad|wgrad|fprop|nchwtonhwc|nhwctonchw', 'convolution'),
    (220, 'kernel', '(?i)gemm|nvjet|cutlass|cublas', 'matmul/linear'),
    (230, 'kernel', '(?i)bn_fw|bn_bw|batch_norm|layer_norm', 'normalization'),
    (240, 'kernel', '(?i)pool', 'pooling'),
    (250, 'kernel', '(?i)elementwise|reduce_kernel', 'elementwise/activation')
) AS t(priority, field, pattern, layer_type);
