-- includes: base, ncu

-- Multi-level utilization (method.md section 3): layer types, per-kernel and
-- per-iteration levels. The saved reports in queries/ read these views.
-- Documented in docs/schema.md ("utilization").

-- Layer type of every trace kernel, by layer_rules. Rules are tried on the
-- distinct (kind, op, name) combinations only, then joined back.
--
-- @column run         trace run
-- @column kernel_id   the GPU activity (kernels.kernel_id): every kernels row with a start
-- @column layer_type  layer type of the first layer_rules row (by priority) that matches its
--                     kind, op or name; 'other' when none does
CREATE OR REPLACE VIEW kernel_layers AS
WITH combos AS (
    SELECT DISTINCT kind, coalesce(op_name, '') AS op, name FROM kernels WHERE ts_ns IS NOT NULL
), typed AS (
    SELECT c.kind, c.op, c.name, r.layer_type
    FROM combos c JOIN layer_rules r
      ON regexp_matches(CASE r.field WHEN 'kind' THEN c.kind WHEN 'op' THEN c.op ELSE c.name END, r.pattern)
    QUALIFY row_number() OVER (PARTITION BY c.kind, c.op, c.name ORDER BY r.priority) = 1
)
SELECT k.run, k.kernel_id, coalesce(t.layer_type, 'other') AS layer_type
FROM kernels k
LEFT JOIN typed t ON t.kind = k.kind AND t.op = coalesce(k.op_name, '') AND t.name = k.name
WHERE k.ts_ns IS NOT NULL;

-- A digest of layer_rules as it is: the stored top_kernels rows (top_kernel_totals) were
-- typed under the rules whose digest they carry.
CREATE OR REPLACE MACRO layer_rules_digest() AS (
    SELECT rows_digest((priority, field, pattern, layer_type)) FROM layer_rules);

-- layer_rules_digest() as a relation: top_kernels reads the stored rows of a run
-- (top_kernel_totals) while their digest is this one (a view, so that a lake keeps it for
-- Spark: one row, no run).
--
-- @column digest  layer_rules_digest()
CREATE OR REPLACE VIEW layer_rules_version AS SELECT layer_rules_digest() AS digest;

-- The ncu run whose matches the utilization reports use for a trace run:
-- the one matched last, a pairing kept by --force (more than 20% of its matched
-- kernels under another name) only when no sound one is left.
--
-- @column run                trace run
-- @column ncu_run            the run of counters matched to it last (match_runs.matched_at): an
--                            ncu run, or the trace run itself for CUPTI range-profiler counters
-- @column matched_iteration  the trace iteration that matching covered; NULL: the whole run
-- @column name_mismatch_pct  % of its matched kernels whose names disagree (above 20%: forced)
CREATE OR REPLACE VIEW trace_ncu_pairs AS
WITH mm AS (
    SELECT trace_run, ncu_run, 100.0 * count(*) FILTER (name_score < 1) / count(*) AS pct
    FROM matches GROUP BY trace_run, ncu_run
)
SELECT m.trace_run AS run, m.ncu_run, m.iteration AS matched_iteration, coalesce(mm.pct, 0) AS name_mismatch_pct
FROM match_runs m LEFT JOIN mm USING (trace_run, ncu_run)
QUALIFY row_number() OVER (PARTITION BY m.trace_run ORDER BY coalesce(mm.pct, 0) > 20, m.matched_at DESC, m.ncu_run) = 1;

-- Every pairing of a trace run with counters (match_runs): whether it was kept by
-- --force (more than 20% of its matched kernels under another name) and whether
-- the utilization reports use it (trace_ncu_pairs). A report that reads counters
-- through a forced pairing says so (query/pairing_caveat.py).
--
-- @column trace_run          trace run
-- @column ncu_run            the run of counters matched to it (an ncu run, or the trace run
--                            itself for CUPTI range-profiler counters)
-- @column matched_at         when it was matched (match_runs.matched_at)
-- @column name_mismatch_pct  % of its matched kernels whose names disagree
-- @column forced             name_mismatch_pct above 20: the pairing was kept by --force
-- @column in_use             the pairing trace_ncu_pairs picks for the trace run
CREATE OR REPLACE VIEW ncu_pairings AS
WITH mm AS (
    SELECT trace_run, ncu_run, 100.0 * count(*) FILTER (name_score < 1) / count(*) AS pct
    FROM matches GROUP BY trace_run, ncu_run
)
SELECT m.trace_run, m.ncu_run, m.matched_at, coalesce(mm.pct, 0) AS name_mismatch_pct,
       coalesce(mm.pct, 0) > 20 AS forced,
       EXISTS (SELECT 1 FROM trace_ncu_pairs p WHERE p.run = m.trace_run AND p.ncu_run = m.ncu_run) AS in_use
FROM match_runs m LEFT JOIN mm USING (trace_run, ncu_run);

-- One row per matched kernel with its layer type and per-kernel levels, %
-- of the kernel's SMSP elapsed cycles, and the two tensor-core bounds of
-- METHOD.md section 3: tensor instructions over all issued instructions (N/I)
-- and tensor-pipe active over SMSP active cycles (C/A). Issued instructions are
-- smsp__inst_issued where the report has it, else the issue cycles (one
-- instruction per cycle).
--
-- @column layer_type           layer type of the trace kernel (kernel_layers; 'other' when none)
-- @column smsp_active_pct      100 * smsp_cycles_active / smsp_cycles_elapsed, %
-- @column issue_slot_pct       100 * smsp_issue_active / smsp_cycles_elapsed, %
-- @column tc_active_pct        100 * tc_cycles_active / smsp_cycles_elapsed, %
-- @column tc_issue_pct         100 * tc_inst / smsp_cycles_elapsed, %
-- @column tc_issue_bound_pct   N/I: 100 * tc_inst / instructions issued (smsp_inst_issued, else
--                              smsp_issue_active), %
-- @column tc_active_bound_pct  C/A: 100 * tc_cycles_active / smsp_cycles_active, %
-- @columns_from matched_kernels
CREATE OR REPLACE VIEW kernel_levels AS
SELECT mk.*, coalesce(l.layer_type, 'other') AS layer_type,
       100.0 * smsp_cycles_active / nullif(smsp_cycles_elapsed, 0) AS smsp_active_pct,
       100.0 * smsp_issue_active / nullif(smsp_cycles_elapsed, 0) AS issue_slot_pct,
       100.0 * tc_cycles_active / nullif(smsp_cycles_elapsed, 0) AS tc_active_pct,
       100.0 * tc_inst / nullif(smsp_cycles_elapsed, 0) AS tc_issue_pct,
       100.0 * tc_inst / nullif(coalesce(smsp_inst_issued, smsp_issue_active), 0) AS tc_issue_bound_pct,
       100.0 * tc_cycles_active / nullif(smsp_cycles_active, 0) AS tc_active_bound_pct
FROM matched_kernels mk
JOIN trace_ncu_pairs p ON p.run = mk.run AND p.ncu_run = mk.ncu_run
LEFT JOIN kernel_layers l ON l.run = mk.run AND l.kernel_id = mk.kernel_id;


-- Per run and iteration: time, GPU utilization and (where an ncu run is
-- matched to that iteration) the summed counters and the five levels, both
-- relative to the kernels' SMSP elapsed cycles and scaled to the iteration
-- by GPU utilization (*_iter), and the tensor-core bounds N/I and C/A.
-- note says why a level is NULL.
-- The counters are summed over the iteration's matched kernels, and NULL unless
-- every matched kernel has one.
--
-- @column ncu_run               the run of counters matched to the trace run last
--                               (trace_ncu_pairs); NULL when none is
-- @column matched_kernels       the iteration's trace kernels matched to ncu_run's kernels
--                               (rows of kernel_levels)
-- @column matched_ns            summed duration of the matched kernels, ns
-- @column matched_time_pct      100 * matched_ns / kernel_sum_ns, %
-- @column smsp_cycles_elapsed   E: SMSP elapsed cycles of the matched kernels
-- @column smsp_cycles_active    A: SMSP active cycles of the matched kernels
-- @column smsp_issue_cycles     I: SMSP issue cycles of the matched kernels (their smsp_issue_active)
-- @column tc_active_cycles      C: tensor pipe active cycles of the matched kernels
--                               (their tc_cycles_active)
-- @column tc_inst               N: tensor pipe warp instructions of the matched kernels
-- @column inst_issued           instructions issued by the matched kernels (smsp_inst_issued, else
--                               smsp_issue_active, summed): the denominator of N/I
-- @column smsp_active_pct       100 * A / E, %
-- @column issue_slot_pct        100 * I / E, %
-- @column tc_active_pct         100 * C / E, %
-- @column tc_issue_pct          100 * N / E, %
-- @column tc_issue_bound_pct    N/I: 100 * N / instructions issued (smsp_inst_issued, else
--                               smsp_issue_active, summed), %
-- @column tc_active_bound_pct   C/A: 100 * C / A, %
-- @column smsp_active_pct_iter  smsp_active_pct scaled to the iteration: gpu_util_pct * A / E, %
-- @column issue_slot_pct_iter   issue_slot_pct scaled to the iteration: gpu_util_pct * I / E, %
-- @column tc_active_pct_iter    tc_active_pct scaled to the iteration: gpu_util_pct * C / E, %
-- @column tc_issue_pct_iter     tc_issue_pct scaled to the iteration: gpu_util_pct * N / E, %
-- @column note                  why levels are NULL or partial (no kernels, no ncu run matched,
--                               matched to another iteration, counters missing, counters
--                               covering under 99% of kernel time), and the ncu run and the
--                               counters that fed C and N
-- @columns_from iteration_gpu_time
CREATE OR REPLACE VIEW iteration_utilization AS
WITH c AS (
    SELECT run, iteration, count(*) AS matched, sum(dur_ns) AS matched_ns,
           sum(smsp_cycles_elapsed) AS e, count(smsp_cycles_elapsed) AS n_e,
           sum(smsp_cycles_active) AS a, count(smsp_cycles_active) AS n_a,
           sum(smsp_issue_active) AS i, count(smsp_issue_active) AS n_i,
           sum(coalesce(smsp_inst_issued, smsp_issue_active)) AS ii,
           count(coalesce(smsp_inst_issued, smsp_issue_active)) AS n_ii,
           sum(tc_cycles_active) AS tc, count(tc_cycles_active) AS n_tc,
           sum(tc_inst) AS tn, count(tc_inst) AS n_tn,
           string_agg(DISTINCT tc_cycles_active_source, ', ') AS tc_src,
           string_agg(DISTINCT tc_inst_source, ', ') AS tn_src
    FROM kernel_levels GROUP BY run, iteration
), lv AS (
    SELECT i.run, i.iteration, i.steady, i.total_ns, i.kernel_busy_ns, i.kernel_sum_ns, i.kernels,
           i.gpu_util_pct, i.gpu_event_sum_ns, i.gpu_event_busy_ns, i.gpu_event_util_pct,
           p.ncu_run, p.matched_iteration, coalesce(c.matched, 0) AS matched_kernels, c.matched_ns,
           100.0 * c.matched_ns / nullif(i.kernel_sum_ns, 0) AS matched_time_pct,
           CASE WHEN c.n_e = c.matched THEN c.e END AS smsp_cycles_elapsed,
           CASE WHEN c.n_a = c.matched THEN c.a END AS smsp_cycles_active,
           CASE WHEN c.n_i = c.matched THEN c.i END AS smsp_issue_cycles,
           CASE WHEN c.n_tc = c.matched THEN c.tc END AS tc_active_cycles,
           CASE WHEN c.n_tn = c.matched THEN c.tn END AS tc_inst,
           CASE WHEN c.n_ii = c.matched THEN c.ii END AS inst_issued,
           c.n_e, c.n_a, c.n_i, c.n_tc, c.n_tn, c.matched, c.tc_src, c.tn_src
    FROM iteration_gpu_time i
    LEFT JOIN trace_ncu_pairs p ON p.run = i.run
    LEFT JOIN c ON c.run = i.run AND c.iteration = i.iteration
)
SELECT run, iteration, steady, total_ns, kernel_busy_ns, kernel_sum_ns, kernels, gpu_util_pct,
       gpu_event_sum_ns, gpu_event_busy_ns, gpu_event_util_pct, ncu_run, matched_kernels, matched_ns, matched_time_pct,
       smsp_cycles_elapsed, smsp_cycles_active, smsp_issue_cycles, tc_active_cycles, tc_inst, inst_issued,
       100.0 * smsp_cycles_active / smsp_cycles_elapsed AS smsp_active_pct,
       100.0 * smsp_issue_cycles / smsp_cycles_elapsed AS issue_slot_pct,
       100.0 * tc_active_cycles / smsp_cycles_elapsed AS tc_active_pct,
       100.0 * tc_inst / smsp_cycles_elapsed AS tc_issue_pct,
       100.0 * tc_inst / nullif(inst_issued, 0) AS tc_issue_bound_pct,
       100.0 * tc_active_cycles / nullif(smsp_cycles_active, 0) AS tc_active_bound_pct,
       gpu_util_pct * smsp_cycles_active / smsp_cycles_elapsed AS smsp_active_pct_iter,
       gpu_util_pct * smsp_issue_cycles / smsp_cycles_elapsed AS issue_slot_pct_iter,
       gpu_util_pct * tc_active_cycles / smsp_cycles_elapsed AS tc_active_pct_iter,
       gpu_util_pct * tc_inst / smsp_cycles_elapsed AS tc_issue_pct_iter,
       concat_ws('; ',
       CASE WHEN kernels = 0 THEN 'no GPU kernel events in this iteration (a CPU-only trace, or a CUPTI '
                                  || 'range-profiler trace, which records no kernels): no GPU time or levels' END,
       CASE
         WHEN ncu_run IS NULL THEN 'no ncu run matched to this trace run: ingest one with --pair-with or run tracedb match'
         WHEN coalesce(matched, 0) = 0 THEN 'ncu run ' || ncu_run || ' was matched to iteration '
              || coalesce(CAST(matched_iteration AS VARCHAR), 'all') || ', not this one'
         ELSE concat_ws('; ',
              CASE WHEN n_e < matched THEN 'SMSP elapsed cycles missing for ' || (matched - n_e) || ' kernels' END,
              CASE WHEN n_a < matched THEN 'SMSP active cycles missing for ' || (matched - n_a) || ' kernels' END,
              CASE WHEN n_i < matched THEN 'issue cycles missing for ' || (matched - n_i) || ' kernels' END,
              CASE WHEN n_tc < matched THEN 'no tensor pipe cycle counter for ' || (matched - n_tc) || ' kernels (see metric_sources)' END,
              CASE WHEN n_tn < matched THEN 'no tensor instruction counter for ' || (matched - n_tn) || ' kernels (see metric_sources)' END,
              CASE WHEN matched_time_pct < 99 THEN 'counters cover ' || round(matched_time_pct, 1) || '% of kernel time' END,
              'ncu ' || ncu_run || '; TC cycles: ' || coalesce(tc_src, '-') || '; TC instructions: ' || coalesce(tn_src, '-'))
       END) AS note
FROM lv;
