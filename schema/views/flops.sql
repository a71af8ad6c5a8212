-- includes: base, ncu, utilization

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

-- Whether an event is in the op windows a report asked for: always, unless
-- reports.run has set the DuckDB variable tracedb_op_windows for a report that
-- reads only some iterations of each run (windows.py says what it holds and
-- why the rows of those iterations come out the same); a run without a window
-- is then left out. An event is in when it starts in its run's window. The
-- outer bounds (times, event ids) span every run's window: constants DuckDB's
-- scan of events skips row groups with.
CREATE OR REPLACE MACRO flop_event_in_window(run, event_id, ts_ns) AS
    getvariable('tracedb_op_windows') IS NULL
    OR (event_id BETWEEN getvariable('tracedb_op_windows').first_event_id
                     AND getvariable('tracedb_op_windows').last_event_id
        AND ts_ns BETWEEN getvariable('tracedb_op_windows').lo_ns AND getvariable('tracedb_op_windows').hi_ns
        AND ts_ns BETWEEN getvariable('tracedb_op_windows').runs[run].lo_ns
                      AND getvariable('tracedb_op_windows').runs[run].hi_ns);
-- Whether a kernel is in the op windows (flop_event_in_window): when its launch
-- (else its start) is in its run's window; the outer kernel ids bound the scan.
CREATE OR REPLACE MACRO flop_kernel_in_window(run, kernel_id, launch_ts_ns, ts_ns) AS
    getvariable('tracedb_op_windows') IS NULL
    OR (kernel_id BETWEEN getvariable('tracedb_op_windows').first_kernel_id
                      AND getvariable('tracedb_op_windows').last_kernel_id
        AND coalesce(launch_ts_ns, ts_ns) BETWEEN getvariable('tracedb_op_windows').runs[run].lo_ns
                                              AND getvariable('tracedb_op_windows').runs[run].hi_ns);

-- A digest of flop_formulas as it is: the stored FLOP totals (op_flop_totals) were
-- counted under the formulas whose digest they carry.
CREATE OR REPLACE MACRO flop_formulas_digest() AS (
    SELECT rows_digest((op, formula, category, flops_per_element)) FROM flop_formulas);

-- The runs whose FLOP totals an ingest with --op-totals stored (op_flop_totals) under
-- today's flop_formulas: the FLOP reports read those rows instead of sweeping the run.
--
-- @column run  trace run with rows in op_flop_totals counted under flop_formulas as it is
CREATE OR REPLACE VIEW flop_stored_runs AS
SELECT DISTINCT run FROM op_flop_totals WHERE formulas = flop_formulas_digest();

-- The runs the FLOP views sweep: every run, or (paired_only) the trace runs whose kernels
-- are matched to counters (match_runs). kernel_flop_ops needs flop_ops of those only: a
-- run without counters is then not swept twice by op_flops (analytic and hardware rows);
-- filtered at the events scan, where DuckDB skips an unasked run's row groups.
-- walked_only: not the runs of flop_stored_runs (their analytic rows are stored); one_run:
-- that run alone (the ingest's, before its runs row: schema/load/flop_aggregates.sql).
CREATE OR REPLACE MACRO flop_runs(paired_only, walked_only := false, one_run := NULL) AS TABLE
    SELECT run FROM runs WHERE NOT paired_only AND one_run IS NULL
                         AND NOT (walked_only AND run IN (SELECT run FROM flop_stored_runs))
    UNION ALL
    SELECT DISTINCT trace_run FROM match_runs WHERE paired_only AND one_run IS NULL
    UNION ALL
    SELECT CAST(one_run AS VARCHAR) WHERE one_run IS NOT NULL;

-- flop_op_candidates (below) of the runs of flop_runs(paired_only).
CREATE OR REPLACE MACRO flop_op_candidates_of(paired_only, walked_only := false, one_run := NULL) AS TABLE
SELECT run, event_id, name, pid, tid, ts_ns, end_ns, formula, category, flops_per_element,
       TRY_CAST(a[1] AS BIGINT[][]) AS dims, TRY_CAST(a[2] AS VARCHAR[]) AS types, TRY_CAST(a[3] AS VARCHAR[]) AS ci
FROM (
    -- the args parsed once for the three members (three -> took three parses)
    SELECT e.run, e.event_id, e.name, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
           f.formula, f.category, f.flops_per_element,
           json_extract(e.args, ['$."Input Dims"', '$."Input type"', '$."Concrete Inputs"']) AS a
    FROM events e
    JOIN flop_formulas f ON f.op = e.name
    WHERE e.ph = 'X' AND e.dur_ns IS NOT NULL AND is_framework_op_category(e.cat)
      AND flop_event_in_window(e.run, e.event_id, e.ts_ns)
      AND e.run IN (SELECT run FROM flop_runs(paired_only, walked_only := walked_only, one_run := one_run)));

-- Framework ops with a row in flop_formulas, their shapes and arguments parsed.
--
-- @column run       trace run
-- @column event_id  the op event (events.event_id)
-- @column name      op name (flop_formulas.op)
-- @column pid       process of the op, as written
-- @column tid       thread of the op, as written
-- @column ts_ns     start of the op, ns
-- @column end_ns    end of the op, ns
-- @column dims      the op's `Input Dims`: one list of sizes per input (NULL without record_shapes)
-- @column types     the op's `Input type`: one per input (NULL without record_shapes)
-- @column ci        the op's `Concrete Inputs`: one text per input, the scalar arguments as
--                   written (NULL without record_shapes)
-- @columns_from flop_formulas
CREATE OR REPLACE VIEW flop_op_candidates AS SELECT * FROM flop_op_candidates_of(false);

-- flop_pass_spans (below) of the runs of flop_runs(paired_only).
CREATE OR REPLACE MACRO flop_pass_spans_of(paired_only, walked_only := false, one_run := NULL) AS TABLE
SELECT run, event_id, pid, tid, ts_ns AS start_ns, ts_ns + dur_ns AS end_ns,
       CASE WHEN name LIKE 'autograd::engine::evaluate_function:%' THEN 'backward' ELSE 'optimizer' END AS pass
FROM events
WHERE ph = 'X' AND dur_ns IS NOT NULL AND flop_event_in_window(run, event_id, ts_ns)
  AND run IN (SELECT run FROM flop_runs(paired_only, walked_only := walked_only, one_run := one_run))
  AND (name LIKE 'autograd::engine::evaluate_function:%' OR name LIKE 'Optimizer.step#%'
       OR name LIKE 'Optimizer.zero_grad#%');

-- Spans that give an op its pass: autograd's backward nodes
-- (autograd::engine::evaluate_function: ...) and the optimizer's
-- annotations (Optimizer.step#..., Optimizer.zero_grad#...).
--
-- @column run       trace run
-- @column event_id  the span's event (events.event_id)
-- @column pid       process of the span, as written
-- @column tid       thread of the span, as written
-- @column start_ns  start of the span, ns
-- @column end_ns    end of the span, ns
-- @column pass      backward (autograd::engine::evaluate_function: ...) | optimizer
--                   (Optimizer.step#..., Optimizer.zero_grad#...)
CREATE OR REPLACE VIEW flop_pass_spans AS SELECT * FROM flop_pass_spans_of(false);

-- flop_ops (below) of the runs of flop_runs(paired_only).
CREATE OR REPLACE MACRO flop_ops_of(paired_only, walked_only := false, one_run := NULL) AS TABLE
WITH cand AS (
    -- each candidate's FLOPs and dtype first: the sweeps below then sort numbers, not the
    -- parsed lists (the 1 GB trace: 1.72-1.78 -> 1.31-1.33 CPU s)
    SELECT run, event_id, name, pid, tid, ts_ns, end_ns, formula, category, flop_dtype(types) AS dtype,
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
    FROM flop_op_candidates_of(paired_only, walked_only := walked_only, one_run := one_run)
), ordered AS (
    -- nested: a candidate before it in (start, longer first, id) order ends at or after its end
    SELECT *, coalesce(max(end_ns) OVER w_before >= end_ns, false) AS nested
    FROM cand
    WINDOW w_before AS (PARTITION BY run, pid, tid ORDER BY ts_ns, end_ns DESC, event_id
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), owned AS (
    -- the counted op each candidate belongs to: the last outer one before it
    SELECT *, last_value(CASE WHEN NOT nested THEN event_id END IGNORE NULLS) OVER (
                  PARTITION BY run, pid, tid ORDER BY ts_ns, end_ns DESC, event_id ROWS UNBOUNDED PRECEDING) AS owner
    FROM ordered
), outer_ops AS (
    SELECT * FROM owned WHERE NOT nested
), inner_dtype AS (
    -- the narrowest type of a candidate nested in the op with its formula: under autocast
    -- the outer op has the fp32 inputs, the op it redispatches to the fp16 ones
    SELECT n.run, n.owner,
           arg_min(n.dtype, list_position(['fp8', 'fp16', 'bf16', 'fp32', 'fp64'], n.dtype)) AS dtype
    FROM owned n JOIN outer_ops o ON o.run = n.run AND o.event_id = n.owner
    WHERE n.nested AND n.formula = o.formula AND n.end_ns <= o.end_ns AND n.dtype IS NOT NULL
    GROUP BY n.run, n.owner
), passes AS (
    -- pass spans and counted ops of a thread by start (a span first at a tie): an op
    -- is in a pass when a span of it that started before ends at or after the op's end
    SELECT run, event_id,
           max(CASE WHEN pass = 'optimizer' THEN end_ns END) OVER w AS optimizer_end_ns,
           max(CASE WHEN pass = 'backward' THEN end_ns END) OVER w AS backward_end_ns
    FROM (SELECT run, pid, tid, start_ns AS ts_ns, end_ns, pass, CAST(NULL AS BIGINT) AS event_id FROM flop_pass_spans_of(paired_only, walked_only := walked_only, one_run := one_run)
          WHERE run IN (SELECT run FROM outer_ops)
          UNION ALL
          SELECT run, pid, tid, ts_ns, end_ns, NULL, event_id FROM outer_ops)
    WINDOW w AS (PARTITION BY run, pid, tid ORDER BY ts_ns, event_id NULLS FIRST ROWS UNBOUNDED PRECEDING)
)
SELECT c.run, c.event_id, c.name, c.pid, c.tid, c.ts_ns, c.end_ns, c.formula, c.category,
       CASE WHEN c.name LIKE 'aten::_amp_%' OR p.optimizer_end_ns >= c.end_ns THEN 'optimizer'
            WHEN p.backward_end_ns >= c.end_ns THEN 'backward' ELSE 'forward' END AS pass,
       CASE WHEN c.ts_ns <= i.marker_end_ns THEN i.iteration END AS iteration,
       coalesce(d.dtype, c.dtype) AS dtype,
       CAST(round(c.flops_d) AS BIGINT) AS flops
FROM outer_ops c
JOIN passes p ON p.run = c.run AND p.event_id = c.event_id
ASOF LEFT JOIN iterations i ON i.run = c.run AND c.ts_ns >= i.start_ns
LEFT JOIN inner_dtype d ON d.run = c.run AND d.owner = c.event_id;

-- The counted ops: candidates not nested in another candidate on their thread
-- (aten::convolution counts, its aten::_convolution does not), with their
-- FLOPs, pass, iteration and data type. flops is NULL where the shapes are
-- missing (a trace without record_shapes). Sweeps over each thread's events
-- sorted by start (ops on a thread nest), never range joins: linear in the trace.
--
-- @column run        trace run
-- @column event_id   the op event (events.event_id)
-- @column name       op name (flop_formulas.op)
-- @column pid        process of the op, as written
-- @column tid        thread of the op, as written
-- @column ts_ns      start of the op, ns
-- @column end_ns     end of the op, ns
-- @column pass       forward | backward | optimizer: optimizer for aten::_amp_* ops, else the
--                    pass of a flop_pass_spans span on the op's thread that holds the op
--                    (optimizer when spans of both passes do), else forward
-- @column iteration  iteration whose step marker (iterations.start_ns to marker_end_ns)
--                    holds the op's start; NULL when none does
-- @column dtype      fp8 | fp16 | bf16 | fp32 | fp64: type of the first floating-point input; the
--                    narrowest (first in this list) among the candidates of the same formula
--                    nested in the op (under autocast, the op it redispatches to), else the op's own
-- @column flops      FLOPs of the op by its formula (FMA = 2), rounded; NULL where its shapes
--                    are missing
-- @columns_from flop_formulas
CREATE OR REPLACE VIEW flop_ops AS SELECT * FROM flop_ops_of(false);

-- Hardware FLOP counters of each kernel (ncu runs, and trace runs with CUPTI
-- range-profiler counters), by the quantities flop_* of metric_sources (FMA
-- already counted twice by the row's scale). tensor_flops: the tensor-path
-- math ops; fp64/fp32/fp16_flops: the SASS add, mul and fma thread
-- instructions of the CUDA cores. flop_tensor_fp16_volta (HMMA instructions x
-- 512) counts only on a Volta GPU (compute capability 7.0 or 7.2, from ncu's
-- device attributes or Kineto's deviceProperties): later GPUs run wider MMA
-- instructions under the same counter names and have tensor-path ops counters.
-- tensor_dtype: the source type of the tensor quantity with the most FLOPs.
--
-- @column run           run of the counters: an ncu run, or a trace run with CUPTI
--                       range-profiler counters
-- @column kernel_id     the kernel (kernels.kernel_id of that run)
-- @column tensor_flops  tensor-path math ops, summed over source types (flop_tensor_*), FLOPs
-- @column fp64_flops    fp64 add, mul and fma thread instructions of the CUDA cores, FLOPs
--                       (FMA = 2)
-- @column fp32_flops    fp32 add, mul and fma thread instructions of the CUDA cores, FLOPs
--                       (FMA = 2)
-- @column fp16_flops    fp16 add, mul and fma thread instructions of the CUDA cores, FLOPs
--                       (FMA = 2)
-- @column tensor_dtype  the tensor source type with the most ops (fp16, bf16, tf32, fp8, fp64,
--                       int8: the flop_tensor_* quantity's first word); NULL when none was counted
-- @column has_tensor    the kernel has a tensor-path counter (even a zero one)
-- @column has_sass      the kernel has a CUDA-core add, mul or fma counter (even a zero one)
-- @column counters      the ncu metrics that fed these columns, sorted, comma-separated
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

-- Every kernel of a trace run matched to counters (match_runs: an ncu run, or its
-- own CUPTI counters) with the op its work belongs to: the counted op of
-- flop_ops whose span on the launching thread holds the launch, else the
-- innermost op that launched it; with that op's pass (a kernel of no counted op:
-- the pass span on the launching thread that holds the launch, by a sweep as in flop_ops).
--
-- @column run          trace run
-- @column kernel_id    the kernel (kernels.kernel_id; kernels only, not memcpy or memset)
-- @column iteration    iteration the kernel was launched in (kernels.iteration)
-- @column dur_ns       kernel duration, ns
-- @column op_event_id  the counted op (flop_ops) whose span on the launching thread holds
--                      the launch, else the innermost framework op enclosing it
--                      (kernels.op_event_id); NULL when none
-- @column op_name      that op's name; '(no op)' when none
-- @column category     matrix | other: the counted op's flop_formulas.category; other when
--                      the kernel has no counted op
-- @column pass         forward | backward | optimizer: the counted op's pass; else optimizer
--                      when op_name is aten::_amp_*, else the pass of a flop_pass_spans span
--                      on the launching thread that holds the launch (optimizer when spans of
--                      both passes do), else forward
CREATE OR REPLACE VIEW kernel_flop_ops AS
WITH k AS (
    SELECT k.run, k.kernel_id, k.iteration, k.dur_ns, k.op_event_id, k.op_name,
           k.launch_pid, k.launch_tid, k.launch_ts_ns
    FROM kernels k
    JOIN runs r ON r.run = k.run AND r.kind = 'trace'
    WHERE k.kind = 'kernel' AND k.run IN (SELECT trace_run FROM match_runs)
      AND flop_kernel_in_window(k.run, k.kernel_id, k.launch_ts_ns, k.ts_ns)
), in_op AS (
    -- counted ops of a thread do not overlap: the last one started at or before the launch
    SELECT k.*, CASE WHEN k.launch_ts_ns <= o.end_ns THEN o.event_id END AS flop_event_id
    FROM k ASOF LEFT JOIN flop_ops_of(true) o
      ON o.run = k.run AND o.pid = k.launch_pid AND o.tid = k.launch_tid AND k.launch_ts_ns >= o.ts_ns
), spans AS (
    SELECT kernel_id, run,
           max(CASE WHEN pass = 'optimizer' THEN end_ns END) OVER w AS optimizer_end_ns,
           max(CASE WHEN pass = 'backward' THEN end_ns END) OVER w AS backward_end_ns, ts_ns
    FROM (SELECT run, pid, tid, start_ns AS ts_ns, end_ns, pass, CAST(NULL AS BIGINT) AS kernel_id FROM flop_pass_spans_of(true)
          WHERE run IN (SELECT run FROM k)
          UNION ALL
          SELECT run, launch_pid, launch_tid, launch_ts_ns, NULL, NULL, kernel_id FROM in_op
          WHERE flop_event_id IS NULL AND launch_ts_ns IS NOT NULL)
    WINDOW w AS (PARTITION BY run, pid, tid ORDER BY ts_ns, kernel_id NULLS FIRST ROWS UNBOUNDED PRECEDING)
)
SELECT k.run, k.kernel_id, k.iteration, k.dur_ns,
       coalesce(o.event_id, k.op_event_id) AS op_event_id,
       coalesce(o.name, k.op_name, '(no op)') AS op_name,
       coalesce(o.category, 'other') AS category,
       coalesce(o.pass,
           CASE WHEN k.op_name LIKE 'aten::_amp_%' OR s.optimizer_end_ns >= s.ts_ns THEN 'optimizer'
                WHEN s.backward_end_ns >= s.ts_ns THEN 'backward' ELSE 'forward' END) AS pass
FROM in_op k
LEFT JOIN flop_ops_of(true) o ON o.run = k.run AND o.event_id = k.flop_event_id
LEFT JOIN spans s ON s.run = k.run AND s.kernel_id = k.kernel_id AND k.flop_event_id IS NULL;

-- op_flops (below); walked_only: the analytic rows of the runs not in flop_stored_runs
-- only (the hardware rows of every run).
CREATE OR REPLACE MACRO op_flops_of(walked_only) AS TABLE
SELECT run, iteration, event_id AS op_event_id, name AS op_name, pass, category, dtype,
       'analytic' AS source, NULL::VARCHAR AS counter_run, CAST(NULL AS BIGINT) AS kernels, flops
FROM flop_ops_of(false, walked_only := walked_only)
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
JOIN (SELECT trace_run, ncu_run FROM ncu_pairings WHERE trace_run <> ncu_run   -- a forced pairing last
      QUALIFY row_number() OVER (PARTITION BY trace_run ORDER BY forced, matched_at DESC, ncu_run) = 1
      UNION ALL
      SELECT trace_run, ncu_run FROM match_runs WHERE trace_run = ncu_run) p
  ON p.trace_run = mk.run AND p.ncu_run = mk.ncu_run
JOIN kernel_flop_counters c ON c.run = mk.ncu_run AND c.kernel_id = mk.ncu_id
GROUP BY o.run, o.iteration, o.op_event_id, o.op_name, o.pass, o.category, mk.ncu_run, mk.run;

-- FLOPs per op event and source, one row each: analytic (flop_ops), and the
-- hardware counts of the op's kernels: cupti (the trace's own counters) or ncu
-- (the ncu run matched to the trace last). dtype: analytic, of the op's first
-- floating-point input; hardware, the kind of counter with the most FLOPs. kernels: kernels of the
-- op with counters; flops NULL where a source counts nothing for the op.
--
-- @column run          trace run
-- @column iteration    analytic: flop_ops.iteration; hardware: the iteration the op's kernels
--                      were launched in (one row per iteration)
-- @column op_event_id  the op event (events.event_id); hardware: kernel_flop_ops.op_event_id
--                      (NULL for kernels without an op)
-- @column op_name      op name; '(no op)' for kernels without an op
-- @column pass         forward | backward | optimizer (flop_ops.pass, kernel_flop_ops.pass)
-- @column category     matrix | other (flop_formulas.category; other for kernels without a
--                      counted op)
-- @column dtype        analytic: flop_ops.dtype; hardware: the kind of counter that counted
--                      the most FLOPs: tensor (the kernels' tensor_dtype, the alphabetically
--                      last; fp16 when none), fp32, fp16 or fp64; NULL when they count none
-- @column source       analytic (flop_ops) | cupti (the trace's own counters) | ncu (the ncu
--                      run matched to the trace last, a pairing kept by --force only when
--                      no sound one is left)
-- @column counter_run  hardware: the run of the counters (the ncu run, or the trace run for
--                      cupti); NULL for analytic
-- @column kernels      hardware: number of the op's kernels in the iteration with FLOP
--                      counters; NULL for analytic
-- @column flops        FLOPs: analytic, by the op's formula (NULL where its shapes are
--                      missing); hardware, the kernels' tensor, fp64, fp32 and fp16 FLOPs
--                      summed and rounded
CREATE OR REPLACE VIEW op_flops AS SELECT * FROM op_flops_of(false);

-- The peak FLOP/s rows of each run's device: those of the first peak_flops gpu
-- whose pattern matches the device name (users' rows first, then priority).
--
-- @column run          run (of any kind) whose device name a peak_flops pattern matches
-- @column device_name  the run's device name (runs.device_name)
-- @column gpu          the first peak_flops gpu whose name_pattern matches device_name
--                      (users' rows first, then by priority)
-- @columns_from peak_flops
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
--
-- @column run         trace run
-- @column op_name     op name (op_flops.op_name)
-- @column layer_type  layer type of the first (by priority) op rule of layer_rules whose
--                     pattern matches op_name; 'other' when none does
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
--
-- @column iteration      the window: iteration N; NULL for the whole trace
-- @column steady         true for the run's steady iteration (iteration_steadiness); NULL on
--                        the whole-trace rows
-- @column no_iterations  true on the whole-trace rows of a run without iterations; else false
-- @columns_from op_flops
CREATE OR REPLACE VIEW op_flops_windows AS
SELECT f.run, s.iteration, s.steady, s.no_iterations, f.op_event_id, f.op_name, f.pass, f.category,
       f.dtype, f.source, f.flops
FROM op_flops f
JOIN (SELECT run, iteration, steady, false AS no_iterations FROM iteration_steadiness
      UNION ALL
      SELECT run, CAST(NULL AS INTEGER), CAST(NULL AS BOOLEAN), run NOT IN (SELECT run FROM iterations)
      FROM runs WHERE kind = 'trace') s
  ON s.run = f.run AND (s.iteration IS NULL OR s.iteration = f.iteration);

-- op_flops_windows for the FLOP reports that sum it (flops_by_op, flop_utilization,
-- bwd_fwd_ratio), with the analytic rows of the runs of flop_stored_runs read from
-- op_flop_totals (summed per iteration at ingest with --op-totals) instead of swept:
-- the same sums in every window. A row is an op of op_flops (the hardware rows, and
-- the analytic rows of the other runs: calls NULL, ops 1) or a stored group of ops
-- (op_event_id NULL; calls and ops, its number of ops).
--
-- @column iteration      the window: iteration N; NULL for the whole trace
-- @column steady         true for the run's steady iteration (iteration_steadiness); NULL on
--                        the whole-trace rows
-- @column no_iterations  true on the whole-trace rows of a run without iterations; else false
-- @column op_event_id    the op event (op_flops.op_event_id); NULL for a stored group
-- @column calls          a stored group's number of ops; NULL for a row of op_flops
-- @column ops            ops the row stands for: 1, or a stored group's number
-- @column counted        of them, those with FLOPs (flops not NULL)
-- @column flops          FLOPs of the op, or the group's summed (NULL: none counted)
-- @columns_from op_flops
CREATE OR REPLACE VIEW op_flop_sums_windows AS
WITH w AS (
    SELECT run, iteration, steady, false AS no_iterations FROM iteration_steadiness
    UNION ALL
    SELECT run, CAST(NULL AS INTEGER), CAST(NULL AS BOOLEAN), run NOT IN (SELECT run FROM iterations)
    FROM runs WHERE kind = 'trace'
)
SELECT f.run, s.iteration, s.steady, s.no_iterations, f.op_event_id, f.op_name, f.pass, f.category,
       f.dtype, f.source, CAST(NULL AS BIGINT) AS calls, CAST(1 AS BIGINT) AS ops,
       CAST(f.flops IS NOT NULL AS BIGINT) AS counted, f.flops
FROM op_flops_of(true) f
JOIN w s ON s.run = f.run AND (s.iteration IS NULL OR s.iteration = f.iteration)
UNION ALL
SELECT t.run, s.iteration, s.steady, s.no_iterations, CAST(NULL AS BIGINT), t.op_name, t.pass, t.category,
       t.dtype, 'analytic', t.ops, t.ops, t.counted, t.flops
FROM op_flop_totals t
JOIN w s ON s.run = t.run AND (s.iteration IS NULL OR s.iteration = t.iteration)
WHERE t.ops > 0 AND t.run IN (SELECT run FROM flop_stored_runs);
