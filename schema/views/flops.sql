-- FLOP counting (METHOD.md section 8): analytic FLOPs of the framework ops of
-- record_shapes traces (formulas of flop_formulas), hardware-counted FLOPs of
-- kernels (ncu reports, and the trace's own CUPTI range-profiler counters),
-- the pass (forward, backward, optimizer) of each op and kernel, and the peak
-- FLOP/s of a device. The reports flops_by_op, flop_utilization, kernel_flops,
-- bwd_fwd_ratio and flops_batch_consistency read these views.
-- Documented in docs/reports.md ("FLOPs").

-- Elements of a tensor of dims d (a 0-dim tensor has one).
CREATE OR REPLACE MACRO flop_numel(d) AS coalesce(list_product(d), 1.0);

-- Output spatial size of a (non-transposed) convolution: input spatial xs,
-- kernel ks, stride s, padding p, dilation d (lists; a one-element list applies
-- to every dimension, as in PyTorch).
CREATE OR REPLACE MACRO flop_conv_out(xs, ks, s, p, d) AS
    list_transform(range(1, len(xs) + 1),
        lambda i: (xs[i] + 2 * p[least(i, len(p))] - d[least(i, len(d))] * (ks[i] - 1) - 1) // s[least(i, len(s))] + 1);

-- FLOPs of one convolution of input x and weight w (FMA = 2): weight is
-- [Cout, Cin/groups, k...] (transposed: [Cin, Cout/groups, k...]), so grouped
-- and depthwise convolutions come out right. out_spatial: the output's spatial
-- size (non-transposed) or the input's (transposed).
CREATE OR REPLACE MACRO flop_conv(x, w, sp) AS
    2.0 * x[1] * w[1] * w[2] * flop_numel(w[3:]) * flop_numel(sp);

-- A Concrete Inputs entry as a list of integers ("[2, 2]"), or a boolean ("True").
CREATE OR REPLACE MACRO flop_int_list(t) AS TRY_CAST(TRY_CAST(t AS JSON) AS BIGINT[]);
CREATE OR REPLACE MACRO flop_bool(t) AS lower(t) = 'true';

-- Data type of an op, from its first floating-point tensor input.
CREATE OR REPLACE MACRO flop_dtype(types) AS
    list_transform(list_filter(types, lambda t: t IN ('c10::Half', 'c10::BFloat16', 'float', 'double',
                                                 'c10::Float8_e4m3fn', 'c10::Float8_e5m2')),
                   lambda t: CASE t WHEN 'c10::Half' THEN 'fp16' WHEN 'c10::BFloat16' THEN 'bf16'
                               WHEN 'float' THEN 'fp32' WHEN 'double' THEN 'fp64' ELSE 'fp8' END)[1];

-- Framework ops with a row in flop_formulas, their shapes and arguments parsed.
CREATE OR REPLACE VIEW flop_op_candidates AS
SELECT e.run, e.event_id, e.name, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
       f.formula, f.category, f.flops_per_element,
       TRY_CAST(e.args->'Input Dims' AS BIGINT[][]) AS dims,
       TRY_CAST(e.args->'Input type' AS VARCHAR[]) AS types,
       TRY_CAST(e.args->'Concrete Inputs' AS VARCHAR[]) AS ci
FROM events e
JOIN flop_formulas f ON f.op = e.name
WHERE e.ph = 'X' AND e.dur_ns IS NOT NULL AND is_framework_op_category(e.cat);

-- Spans that give an op its pass: autograd's backward nodes
-- (autograd::engine::evaluate_function: ...) and the optimizer's
-- annotations (Optimizer.step#..., Optimizer.zero_grad#...).
CREATE OR REPLACE VIEW flop_pass_spans AS
SELECT run, pid, tid, ts_ns AS start_ns, ts_ns + dur_ns AS end_ns,
       CASE WHEN name LIKE 'autograd::engine::evaluate_function:%' THEN 'backward' ELSE 'optimizer' END AS pass
FROM events
WHERE ph = 'X' AND dur_ns IS NOT NULL
  AND (name LIKE 'autograd::engine::evaluate_function:%' OR name LIKE 'Optimizer.step#%'
       OR name LIKE 'Optimizer.zero_grad#%');

-- The counted ops: candidates not nested in another candidate on their thread
-- (aten::convolution counts, its aten::_convolution does not), with their
-- FLOPs, pass, iteration and data type. flops is NULL where the shapes are
-- missing (a trace without record_shapes).
CREATE OR REPLACE VIEW flop_ops AS
WITH outer_ops AS (
    SELECT c.* FROM flop_op_candidates c
    WHERE NOT EXISTS (
        SELECT 1 FROM flop_op_candidates o
        WHERE o.run = c.run AND o.pid IS NOT DISTINCT FROM c.pid AND o.tid IS NOT DISTINCT FROM c.tid
          AND o.ts_ns <= c.ts_ns AND o.end_ns >= c.end_ns AND o.event_id <> c.event_id
          AND (o.ts_ns < c.ts_ns OR o.end_ns > c.end_ns OR o.event_id < c.event_id))
), counted AS (
    SELECT *,
        CASE formula
            WHEN 'mm' THEN 2.0 * dims[1][1] * dims[1][2] * dims[2][2]
            WHEN 'addmm' THEN 2.0 * dims[2][1] * dims[2][2] * dims[3][2]
            WHEN 'bmm' THEN 2.0 * dims[1][1] * dims[1][2] * dims[1][3] * dims[2][3]
            WHEN 'baddbmm' THEN 2.0 * dims[2][1] * dims[2][2] * dims[2][3] * dims[3][3]
            WHEN 'conv' THEN flop_conv(dims[1], dims[2],
                CASE WHEN flop_bool(ci[7]) THEN dims[1][3:]
                     ELSE flop_conv_out(dims[1][3:], dims[2][3:], flop_int_list(ci[4]),
                                        flop_int_list(ci[5]), flop_int_list(ci[6])) END)
            -- grad_input and grad_weight each cost the forward convolution
            -- (inputs: grad_output, input, weight; output_mask is argument 11)
            WHEN 'conv_bwd' THEN flop_conv(dims[2], dims[3],
                    CASE WHEN flop_bool(ci[8]) THEN dims[2][3:] ELSE dims[1][3:] END)
                * (CAST(coalesce(TRY_CAST(TRY_CAST(lower(ci[11]) AS JSON) AS BOOLEAN[])[1], true) AS INTEGER)
                   + CAST(coalesce(TRY_CAST(TRY_CAST(lower(ci[11]) AS JSON) AS BOOLEAN[])[2], true) AS INTEGER))
            -- q [B, H, Sq, Dq], k [B, H, Sk, Dk], v [B, H, Sk, Dv]
            WHEN 'sdpa' THEN 2.0 * dims[1][1] * dims[1][2] * dims[1][3] * dims[2][3] * (dims[1][4] + dims[3][4])
            WHEN 'sdpa_bwd' THEN 2.0 * dims[2][1] * dims[2][2] * dims[2][3] * dims[3][3] * (3 * dims[2][4] + 2 * dims[4][4])
            -- q [B, Sq, H, Dq], k [B, Sk, H, Dk], v [B, Sk, H, Dv]
            WHEN 'sdpa_bshd' THEN 2.0 * dims[1][1] * dims[1][3] * dims[1][2] * dims[2][2] * (dims[1][4] + dims[3][4])
            WHEN 'sdpa_bwd_bshd' THEN 2.0 * dims[2][1] * dims[2][3] * dims[2][2] * dims[3][2] * (3 * dims[2][4] + 2 * dims[4][4])
            WHEN 'eltwise' THEN flops_per_element * list_max(list_transform(dims, lambda d: flop_numel(d)))
            WHEN 'none' THEN 0
        END AS flops_d
    FROM outer_ops
)
SELECT c.run, c.event_id, c.name, c.pid, c.tid, c.ts_ns, c.end_ns, c.formula, c.category,
       CASE WHEN c.name LIKE 'aten::_amp_%' THEN 'optimizer' ELSE coalesce(
           (SELECT max(s.pass) FROM flop_pass_spans s
            WHERE s.run = c.run AND s.pid IS NOT DISTINCT FROM c.pid AND s.tid IS NOT DISTINCT FROM c.tid
              AND s.start_ns <= c.ts_ns AND s.end_ns >= c.end_ns), 'forward') END AS pass,
       (SELECT i.iteration FROM iterations i
        WHERE i.run = c.run AND c.ts_ns BETWEEN i.start_ns AND i.marker_end_ns) AS iteration,
       -- the narrowest type of the op or of a candidate nested in it: under autocast
       -- the outer op has the fp32 inputs, the op it redispatches to the fp16 ones
       coalesce((SELECT arg_min(flop_dtype(n.types), list_position(['fp8', 'fp16', 'bf16', 'fp32', 'fp64'], flop_dtype(n.types)))
                 FROM flop_op_candidates n
                 WHERE n.run = c.run AND n.pid IS NOT DISTINCT FROM c.pid AND n.tid IS NOT DISTINCT FROM c.tid
                   AND n.ts_ns BETWEEN c.ts_ns AND c.end_ns AND n.end_ns <= c.end_ns AND n.event_id <> c.event_id
                   AND n.formula = c.formula AND flop_dtype(n.types) IS NOT NULL),
                flop_dtype(c.types)) AS dtype,
       CAST(round(c.flops_d) AS BIGINT) AS flops
FROM counted c;

-- Hardware FLOP counters of each kernel (ncu runs, and trace runs with CUPTI
-- range-profiler counters), by the quantities flop_* of metric_sources (FMA
-- already counted twice by the row's scale). tensor_flops: the tensor-path
-- math ops; fp64/fp32/fp16_flops: the SASS add, mul and fma thread
-- instructions of the CUDA cores. flop_tensor_fp16_volta (HMMA instructions x
-- 512) counts only on a Volta GPU (compute capability 7.0 or 7.2, from ncu's
-- device attributes or Kineto's deviceProperties): later GPUs run wider MMA
-- instructions under the same counter names and have tensor-path ops counters.
-- tensor_dtype: the source type of the tensor quantity with the most FLOPs.
CREATE OR REPLACE VIEW kernel_flop_counters AS
WITH volta AS (
    SELECT run FROM runs
    WHERE coalesce(TRY_CAST(device_properties->>'compute_capability_major' AS DOUBLE),
                   TRY_CAST(device_properties->0->>'computeMajor' AS DOUBLE)) = 7
      AND coalesce(TRY_CAST(device_properties->>'compute_capability_minor' AS DOUBLE),
                   TRY_CAST(device_properties->0->>'computeMinor' AS DOUBLE)) < 5
)
SELECT run, kernel_id,
    sum(value) FILTER (quantity LIKE 'flop_tensor_%') AS tensor_flops,
    sum(value) FILTER (quantity IN ('flop_dadd', 'flop_dmul', 'flop_dfma')) AS fp64_flops,
    sum(value) FILTER (quantity IN ('flop_fadd', 'flop_fmul', 'flop_ffma')) AS fp32_flops,
    sum(value) FILTER (quantity IN ('flop_hadd', 'flop_hmul', 'flop_hfma')) AS fp16_flops,
    arg_max(regexp_extract(quantity, '^flop_tensor_([a-z0-9]+)', 1), value)
        FILTER (quantity LIKE 'flop_tensor_%' AND value > 0) AS tensor_dtype,
    count(*) FILTER (quantity LIKE 'flop_tensor_%') > 0 AS has_tensor,
    count(*) FILTER (quantity SIMILAR TO 'flop_[dfh](add|mul|fma)') > 0 AS has_sass,
    string_agg(source, ', ' ORDER BY source) AS counters
FROM ncu_metric_choice
WHERE quantity LIKE 'flop_%'
  AND (quantity <> 'flop_tensor_fp16_volta' OR run IN (SELECT run FROM volta))
GROUP BY run, kernel_id;

-- Every trace kernel with the op its work belongs to: the counted op of
-- flop_ops whose span on the launching thread holds the launch, else the
-- innermost op that launched it; with that op's pass.
CREATE OR REPLACE VIEW kernel_flop_ops AS
WITH k AS (
    SELECT k.run, k.kernel_id, k.iteration, k.dur_ns, k.op_event_id, k.op_name,
           k.launch_pid, k.launch_tid, k.launch_ts_ns,
           (SELECT arg_min(o.event_id, o.ts_ns) FROM flop_ops o
            WHERE o.run = k.run AND o.pid IS NOT DISTINCT FROM k.launch_pid
              AND o.tid IS NOT DISTINCT FROM k.launch_tid
              AND k.launch_ts_ns BETWEEN o.ts_ns AND o.end_ns) AS flop_event_id
    FROM kernels k
    JOIN runs r ON r.run = k.run AND r.kind = 'trace'
    WHERE k.kind = 'kernel'
)
SELECT k.run, k.kernel_id, k.iteration, k.dur_ns,
       coalesce(o.event_id, k.op_event_id) AS op_event_id,
       coalesce(o.name, k.op_name, '(no op)') AS op_name,
       coalesce(o.category, 'other') AS category,
       coalesce(o.pass,
           CASE WHEN k.op_name LIKE 'aten::_amp_%' THEN 'optimizer' ELSE coalesce(
               (SELECT max(s.pass) FROM flop_pass_spans s
                WHERE s.run = k.run AND s.pid IS NOT DISTINCT FROM k.launch_pid
                  AND s.tid IS NOT DISTINCT FROM k.launch_tid
                  AND k.launch_ts_ns BETWEEN s.start_ns AND s.end_ns), 'forward') END) AS pass
FROM k LEFT JOIN flop_ops o ON o.run = k.run AND o.event_id = k.flop_event_id;

-- FLOPs per op event and source, one row each: analytic (flop_ops), and the
-- hardware counts of the op's kernels: cupti (the trace's own counters) or ncu
-- (the ncu run matched to the trace last). dtype: analytic, of the op's first
-- floating-point input; hardware, the kind of counter with the most FLOPs. kernels: kernels of the
-- op with counters; flops NULL where a source counts nothing for the op.
CREATE OR REPLACE VIEW op_flops AS
SELECT run, iteration, event_id AS op_event_id, name AS op_name, pass, category, dtype,
       'analytic' AS source, NULL::VARCHAR AS counter_run, CAST(NULL AS BIGINT) AS kernels, flops
FROM flop_ops
UNION ALL
SELECT o.run, o.iteration, o.op_event_id, o.op_name, o.pass, o.category,
       CASE greatest(coalesce(sum(c.tensor_flops), 0), coalesce(sum(c.fp64_flops), 0),
                     coalesce(sum(c.fp32_flops), 0), coalesce(sum(c.fp16_flops), 0))
            WHEN 0 THEN NULL
            WHEN coalesce(sum(c.tensor_flops), 0) THEN coalesce(max(c.tensor_dtype), 'fp16')
            WHEN coalesce(sum(c.fp32_flops), 0) THEN 'fp32'
            WHEN coalesce(sum(c.fp16_flops), 0) THEN 'fp16' ELSE 'fp64' END AS dtype,
       CASE WHEN mk.ncu_run = mk.run THEN 'cupti' ELSE 'ncu' END AS source, mk.ncu_run,
       count(*) AS kernels,
       CAST(round(sum(coalesce(c.tensor_flops, 0) + coalesce(c.fp64_flops, 0) + coalesce(c.fp32_flops, 0)
                      + coalesce(c.fp16_flops, 0))) AS BIGINT) AS flops
FROM kernel_flop_ops o
JOIN matched_kernels mk ON mk.run = o.run AND mk.kernel_id = o.kernel_id
JOIN (SELECT trace_run, ncu_run FROM match_runs WHERE trace_run <> ncu_run
      QUALIFY row_number() OVER (PARTITION BY trace_run ORDER BY matched_at DESC, ncu_run) = 1
      UNION ALL
      SELECT trace_run, ncu_run FROM match_runs WHERE trace_run = ncu_run) p
  ON p.trace_run = mk.run AND p.ncu_run = mk.ncu_run
JOIN kernel_flop_counters c ON c.run = mk.ncu_run AND c.kernel_id = mk.ncu_id
GROUP BY o.run, o.iteration, o.op_event_id, o.op_name, o.pass, o.category, mk.ncu_run, mk.run;

-- The peak FLOP/s rows of each run's device: those of the first peak_flops gpu
-- whose pattern matches the device name (users' rows first, then priority).
CREATE OR REPLACE VIEW run_peak_flops AS
WITH g AS (
    SELECT r.run, r.device_name, p.gpu
    FROM runs r
    JOIN (SELECT gpu, name_pattern, min(priority) AS priority, bool_or(source <> 'tracedb') AS user_row
          FROM peak_flops GROUP BY gpu, name_pattern) p
      ON regexp_matches(coalesce(r.device_name, ''), p.name_pattern)
    QUALIFY row_number() OVER (PARTITION BY r.run ORDER BY p.user_row DESC, p.priority, p.gpu) = 1
)
SELECT g.run, g.device_name, g.gpu, p.dtype, p.peak_tflops, p.citation
FROM g JOIN peak_flops p ON p.gpu = g.gpu;

-- Layer type of each op name of op_flops, per run, by the op rules of layer_rules
-- (bwd_fwd_ratio); 'other' when none matches.
CREATE OR REPLACE VIEW op_layers AS
WITH names AS (SELECT DISTINCT run, op_name FROM op_flops)
SELECT n.run, n.op_name, coalesce(
    (SELECT arg_min(r.layer_type, r.priority) FROM layer_rules r
     WHERE r.field = 'op' AND regexp_matches(n.op_name, r.pattern)), 'other') AS layer_type
FROM names n;

-- op_flops in the windows the FLOP reports give: each iteration of a run
-- (steady marks the steady one) and the whole trace (iteration NULL;
-- no_iterations when the run has no step markers, so the whole trace is its
-- default window). A report picks rows with its $iteration: NULL (steady, else
-- the whole trace), 'all', or N.
CREATE OR REPLACE VIEW op_flops_windows AS
SELECT f.run, s.iteration, s.steady, s.no_iterations, f.op_event_id, f.op_name, f.pass, f.category,
       f.dtype, f.source, f.flops
FROM op_flops f
JOIN (SELECT run, iteration, steady, false AS no_iterations FROM iteration_steadiness
      UNION ALL
      SELECT run, CAST(NULL AS INTEGER), CAST(NULL AS BOOLEAN), run NOT IN (SELECT run FROM iterations)
      FROM runs WHERE kind = 'trace') s
  ON s.run = f.run AND (s.iteration IS NULL OR s.iteration = f.iteration);
