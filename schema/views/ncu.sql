-- Nsight Compute: units, metric names across architectures, and the wide
-- per-kernel view of the counters that method.md sections 3 and 7 use.
-- Documented in docs/schema.md ("ncu counters").

-- Base unit of an ncu unit: time in ns, SI (K, M, G, T) and binary (Ki, Mi, Gi)
-- prefixes removed ("Kbyte/block" -> "byte/block", "Ghz" -> "hz", "msecond" -> "ns").
CREATE OR REPLACE MACRO ncu_base_unit(u) AS
    CASE WHEN u IN ('ns', 'nsecond', 'us', 'usecond', 'ms', 'msecond', 's', 'second') THEN 'ns'
         WHEN regexp_matches(u, '^[KMGT]i[a-z]') THEN u[3:]
         WHEN regexp_matches(u, '^[KMGT][a-z]') THEN u[2:]
         ELSE nullif(u, '') END;

-- Factor from an ncu unit to its base unit.
CREATE OR REPLACE MACRO ncu_unit_factor(u) AS
    CASE WHEN u IN ('us', 'usecond') THEN 1e3
         WHEN u IN ('ms', 'msecond') THEN 1e6
         WHEN u IN ('s', 'second') THEN 1e9
         WHEN regexp_matches(u, '^[KMGT]i[a-z]') THEN pow(1024, strpos('KMGT', u[1]))
         WHEN regexp_matches(u, '^[KMGT][a-z]') THEN pow(1000, strpos('KMGT', u[1]))
         ELSE 1 END;

-- ncu value text -> number: thousands separators removed; n/a and text -> NULL.
CREATE OR REPLACE MACRO ncu_number(t) AS TRY_CAST(replace(t, ',', '') AS DOUBLE);

-- "(128, 1, 1)" -> the n-th dimension.
CREATE OR REPLACE MACRO ncu_dim(t, n) AS TRY_CAST(regexp_extract(t, '\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)', n) AS INTEGER);

-- The counter chosen for each (run, kernel, quantity).
CREATE OR REPLACE VIEW ncu_metric_choice AS
SELECT c.run, c.kernel_id, s.quantity, c.value * s.scale AS value, s.metric AS source
FROM counters c
JOIN metric_sources s ON s.metric = c.metric
WHERE c.value IS NOT NULL AND NOT isnan(c.value)
QUALIFY row_number() OVER (PARTITION BY c.run, c.kernel_id, s.quantity ORDER BY s.priority) = 1;

-- One row per ncu kernel with the stable quantities (NULL when the report
-- lacks every counter for it) and the counter that fed each (*_source).
CREATE OR REPLACE VIEW ncu_kernel_metrics AS
SELECT run, kernel_id,
    max(value) FILTER (quantity = 'gpu_time_ns') AS gpu_time_ns,
    max(value) FILTER (quantity = 'smsp_cycles_elapsed') AS smsp_cycles_elapsed,
    max(value) FILTER (quantity = 'smsp_cycles_active') AS smsp_cycles_active,
    max(value) FILTER (quantity = 'smsp_issue_active') AS smsp_issue_active,
    max(value) FILTER (quantity = 'smsp_inst_issued') AS smsp_inst_issued,
    max(value) FILTER (quantity = 'tc_cycles_active') AS tc_cycles_active,
    max(value) FILTER (quantity = 'tc_inst') AS tc_inst,
    max(value) FILTER (quantity = 'l1_hit_sectors_ld') AS l1_hit_sectors_ld,
    max(value) FILTER (quantity = 'l1_hit_sectors_st') AS l1_hit_sectors_st,
    max(value) FILTER (quantity = 'l2_hit_sectors_read') AS l2_hit_sectors_read,
    max(value) FILTER (quantity = 'l2_hit_sectors_write') AS l2_hit_sectors_write,
    max(value) FILTER (quantity = 'dram_sectors_read') AS dram_sectors_read,
    max(value) FILTER (quantity = 'dram_sectors_write') AS dram_sectors_write,
    max(value) FILTER (quantity = 'shared_wavefronts_ld') AS shared_wavefronts_ld,
    max(value) FILTER (quantity = 'shared_wavefronts_st') AS shared_wavefronts_st,
    max(value) FILTER (quantity = 'achieved_occupancy_pct') AS achieved_occupancy_pct,
    max(source) FILTER (quantity = 'smsp_cycles_elapsed') AS smsp_cycles_elapsed_source,
    max(source) FILTER (quantity = 'smsp_cycles_active') AS smsp_cycles_active_source,
    max(source) FILTER (quantity = 'smsp_issue_active') AS smsp_issue_active_source,
    max(source) FILTER (quantity = 'tc_cycles_active') AS tc_cycles_active_source,
    max(source) FILTER (quantity = 'tc_inst') AS tc_inst_source
FROM ncu_metric_choice
GROUP BY run, kernel_id;

-- Kernel name with the differences between demanglers removed, for joining
-- trace kernels (cxxabi style) with ncu kernels (ncu's own style):
-- namespaces, `void`, const, spacing, integer suffixes (2ul), bool and enum-cast
-- template arguments, `{lambda(float)#1}` vs `[lambda(float) (instance 1)]`,
-- and the contents of parameter lists (ncu prints T1, T2 placeholders there).
CREATE OR REPLACE MACRO _kn_params_emptied(s) AS
    replace(replace(replace(
    regexp_replace(regexp_replace(regexp_replace(
        regexp_replace(s, 'lambda\(([^()]*)\)', 'lambda«\1»', 'g'),
        '\([^()]*\)', '⟨⟩', 'g'), '\([^()]*\)', '⟨⟩', 'g'), '\([^()]*\)', '⟨⟩', 'g'),
    '«', '('), '»', ')'), '⟨⟩', '()');
CREATE OR REPLACE MACRO normalize_kernel_name(n) AS
    _kn_params_emptied(
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
    regexp_replace(regexp_replace(
        regexp_replace(trim(n), '^void\s+', ''),
        '\(anonymous namespace\)::|<unnamed>::|\b(const|volatile|__restrict__)\b', '', 'g'),
        '\{lambda\(([^(){}]*)\)#(\d+)\}', 'lambda(\1)#\2', 'g'),
        '\[lambda\(([^()\[\]]*)\) \(instance (\d+)\)\]', 'lambda(\1)#\2', 'g'),
        '\s+', '', 'g'),
        '[A-Za-z_][A-Za-z0-9_]*::', '', 'g'),
        '\(([A-Za-z_][A-Za-z0-9_]*)\)(-?\d)', '\2', 'g'),
        '(\d)(?:ull|ul|ll|u|l|UL|ULL|LL|U|L)([^A-Za-z0-9_]|$)', '\1\2', 'g'),
        '\btrue\b', '1', 'g'),
        '\bfalse\b', '0', 'g'));

-- Matched kernels: the trace side (timing, stream, framework op, iteration)
-- joined with the ncu side (name, counters) through `matches`.
CREATE OR REPLACE VIEW matched_kernels AS
SELECT m.trace_run AS run, m.ncu_run, t.kernel_id, t.correlation, m.ncu_kernel_id AS ncu_id,
       m.score, m.name_score, m.launch_score, m.order_score, m.duration_score, m.order_distance,
       t.name AS trace_name, n.name AS ncu_name, t.iteration, t.stream, t.ts_ns, t.dur_ns,
       t.op_name, t.launch_name,
       t.grid_x, t.grid_y, t.grid_z, t.block_x, t.block_y, t.block_z,
       (t.grid_x, t.grid_y, t.grid_z, t.block_x, t.block_y, t.block_z)
         IS NOT DISTINCT FROM (n.grid_x, n.grid_y, n.grid_z, n.block_x, n.block_y, n.block_z) AS same_launch,
       c.* EXCLUDE (run, kernel_id)
FROM matches m
JOIN kernels t ON t.run = m.trace_run AND t.kernel_id = m.trace_kernel_id
JOIN kernels n ON n.run = m.ncu_run AND n.kernel_id = m.ncu_kernel_id
LEFT JOIN ncu_kernel_metrics c ON c.run = m.ncu_run AND c.kernel_id = m.ncu_kernel_id;

-- Kernels left without a partner by the last matching of each (trace, ncu)
-- pair of runs: trace kernels of the matched iteration, and ncu kernels.
CREATE OR REPLACE VIEW unmatched_kernels AS
SELECT r.trace_run, r.ncu_run, 'trace' AS side, k.kernel_id, k.name, k.stream, k.dur_ns, k.seq
FROM match_runs r
JOIN kernels k ON k.run = r.trace_run AND k.kind = 'kernel'
              AND (r.iteration IS NULL OR k.iteration = r.iteration)
WHERE NOT EXISTS (SELECT 1 FROM matches m WHERE m.trace_run = r.trace_run AND m.ncu_run = r.ncu_run
                                            AND m.trace_kernel_id = k.kernel_id)
UNION ALL
SELECT r.trace_run, r.ncu_run, 'ncu' AS side, k.kernel_id, k.name, k.stream, k.dur_ns, k.seq
FROM match_runs r
JOIN kernels k ON k.run = r.ncu_run
WHERE NOT EXISTS (SELECT 1 FROM matches m WHERE m.trace_run = r.trace_run AND m.ncu_run = r.ncu_run
                                            AND m.ncu_kernel_id = k.kernel_id);
