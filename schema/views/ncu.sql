-- includes:

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
--
-- @column run        run of the counters: an ncu run, or a trace run with CUPTI
--                    range-profiler counters
-- @column kernel_id  the kernel (kernels.kernel_id of that run)
-- @column quantity   stable quantity name (metric_sources.quantity)
-- @column value      the chosen counter's value x metric_sources.scale, in the quantity's unit
-- @column source     the ncu metric chosen: of the quantity's metric_sources rows with a
--                    numeric value for the kernel, the most preferred (lowest priority number)
CREATE OR REPLACE VIEW ncu_metric_choice AS
SELECT c.run, c.kernel_id, s.quantity, c.value * s.scale AS value, s.metric AS source
FROM counters c
JOIN metric_sources s ON s.metric = c.metric
WHERE c.value IS NOT NULL AND NOT isnan(c.value)
QUALIFY row_number() OVER (PARTITION BY c.run, c.kernel_id, s.quantity ORDER BY s.priority) = 1;

-- One row per ncu kernel with the stable quantities (NULL when the report
-- lacks every counter for it) and the counter that fed each (*_source).
--
-- @column run                         run of the counters (ncu_metric_choice.run)
-- @column kernel_id                   the kernel (kernels.kernel_id of that run)
-- @column gpu_time_ns                 kernel duration as ncu replayed it (gpu__time_duration.sum), ns
-- @column smsp_cycles_elapsed         E: elapsed cycles summed over all SMSPs, cycles
-- @column smsp_cycles_active          A: SMSP cycles with at least one warp resident, summed over SMSPs
-- @column smsp_issue_active           I: SMSP cycles that issued an instruction, summed over SMSPs
--                                     (else warp instructions issued: one per issue cycle)
-- @column smsp_inst_issued            warp instructions issued, summed over SMSPs
-- @column tc_cycles_active            C: cycles the tensor pipe was active, summed over SMSPs
-- @column tc_inst                     N: warp instructions executed on the tensor pipe
-- @column l1_hit_sectors_ld           L1 hits of global loads, 32-byte sectors
-- @column l1_hit_sectors_st           L1 hits of global stores, 32-byte sectors
-- @column l2_hit_sectors_read         L2 read hits, 32-byte sectors
-- @column l2_hit_sectors_write        L2 write hits, 32-byte sectors
-- @column dram_sectors_read           DRAM sectors read, 32-byte sectors
-- @column dram_sectors_write          DRAM sectors written, 32-byte sectors
-- @column shared_wavefronts_ld        shared memory load wavefronts
-- @column shared_wavefronts_st        shared memory store wavefronts
-- @column achieved_occupancy_pct      achieved occupancy: warps active per active cycle / the
--                                     SM's maximum warps, %
-- @column smsp_cycles_elapsed_source  ncu metric that fed smsp_cycles_elapsed
-- @column smsp_cycles_active_source   ncu metric that fed smsp_cycles_active
-- @column smsp_issue_active_source    ncu metric that fed smsp_issue_active
-- @column tc_cycles_active_source     ncu metric that fed tc_cycles_active
-- @column tc_inst_source              ncu metric that fed tc_inst
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
-- The counter columns are ncu_kernel_metrics' of the ncu kernel.
--
-- @column run             trace run (matches.trace_run)
-- @column ncu_run         run of the counters: an ncu run, or the trace run itself for
--                         CUPTI range-profiler counters (matches.ncu_run)
-- @column kernel_id       the trace kernel (kernels.kernel_id of run)
-- @column correlation     the trace kernel's correlation id (kernels.correlation)
-- @column ncu_id          the ncu kernel (kernels.kernel_id of ncu_run: the report's ID)
-- @column score           match score: weighted sum of the four part scores
--                         (schema/match/prepare.sql), 0..1
-- @column name_score      1 = same normalized name, else 0.5 x Jaro-Winkler similarity of the names
-- @column launch_score    share of the launch parts that are equal: grid, block, and registers
--                         and shared memory where both kernels have them, 0..1
-- @column order_score     1 / (1 + |order_distance|)
-- @column duration_score  shorter / longer duration of the two kernels (NULL when one is 0)
-- @column order_distance  the ncu kernel's position on its stream minus the expected one,
--                         launches (signed)
-- @column trace_name      kernel name as the trace printed it
-- @column ncu_name        kernel name as ncu printed it
-- @column iteration       iteration the trace kernel was launched in (kernels.iteration)
-- @column stream          CUDA stream of the trace kernel
-- @column ts_ns           start of the trace kernel, ns
-- @column dur_ns          duration of the trace kernel, ns
-- @column op_name         innermost framework op enclosing the trace kernel's launch
-- @column launch_name     runtime or driver call that launched the trace kernel
-- @column grid_x          grid size of the trace kernel, x (blocks)
-- @column grid_y          grid size of the trace kernel, y (blocks)
-- @column grid_z          grid size of the trace kernel, z (blocks)
-- @column block_x         block size of the trace kernel, x (threads)
-- @column block_y         block size of the trace kernel, y (threads)
-- @column block_z         block size of the trace kernel, z (threads)
-- @column same_launch     grid and block of the trace kernel equal the ncu kernel's
--                         (NULL on both sides counts as equal)
-- @columns_from ncu_kernel_metrics
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
--
-- @column trace_run  trace run of the matching (match_runs.trace_run)
-- @column ncu_run    ncu run of the matching (match_runs.ncu_run)
-- @column side       'trace': a trace kernel without an ncu partner; 'ncu': an ncu kernel
--                    without a trace partner
-- @column kernel_id  the kernel (kernels.kernel_id of trace_run or ncu_run, by side)
-- @column name       kernel name as the tool printed it
-- @column stream     CUDA stream of the kernel (kernels.stream)
-- @column dur_ns     kernel duration, ns (ncu side: as ncu replayed it)
-- @column seq        launch order within its run, 0-based (kernels.seq)
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
