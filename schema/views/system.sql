-- includes: base, energy

-- System metrics (METHOD.md section 9): the iteration windows a per-iteration
-- report covers, host samples and device memory of a trace run, NVML throttle
-- reasons, ncu occupancy. Documented in docs/schema.md ("system").

-- The windows a per-iteration report covers, by its iteration parameter (text):
-- NULL = the steady iteration, N = iteration N, 'all' = every iteration plus one
-- whole-trace row (iteration NULL, from the first iteration's start to the last
-- one's end). Anything else is an error.
CREATE OR REPLACE MACRO iteration_windows(run_name, it) AS TABLE
SELECT i.run, i.iteration, i.start_ns, i.end_ns, i.end_ns - i.start_ns AS window_ns, s.steady, 1 AS iterations
FROM iterations i JOIN iteration_steadiness s USING (run, iteration)
WHERE (run_name IS NULL OR i.run = run_name)
  AND CASE WHEN it IS NULL THEN s.steady
           WHEN lower(trim(it)) = 'all' THEN true
           ELSE i.iteration = coalesce(TRY_CAST(trim(it) AS INTEGER),
                                       error('iteration must be a number or all, got ''' || it || '''')) END
UNION ALL
SELECT run, NULL, min(start_ns), max(end_ns), max(end_ns) - min(start_ns), NULL, count(*)
FROM iterations
WHERE lower(trim(coalesce(it, ''))) = 'all' AND (run_name IS NULL OR run = run_name)
GROUP BY run;

-- Host sample runs of each trace run (paired at ingest). Host samples carry the
-- epoch clock of tracedb's NVML sampler: the offset of the trace's power log
-- applies to them too (0 when the trace has absolute time).
--
-- @column run        trace run
-- @column host_run   host sample run paired with it (runs.paired_run)
-- @column offset_ns  trace time = host ts_ns + offset_ns, ns: the smallest offset_ns of the
--                    trace's trace_power_pairs, else 0
CREATE OR REPLACE VIEW trace_host_pairs AS
SELECT h.paired_run AS run, h.run AS host_run,
       coalesce((SELECT min(p.offset_ns) FROM trace_power_pairs p WHERE p.run = h.paired_run), 0) AS offset_ns
FROM runs h
WHERE h.kind = 'host' AND h.paired_run IS NOT NULL;

-- Device memory of each trace run's GPUs, from Kineto's deviceProperties.
--
-- @column run          trace run
-- @column device       GPU index (deviceProperties[].id)
-- @column device_name  GPU name (deviceProperties[].name)
-- @column total_bytes  device memory (deviceProperties[].totalGlobalMem), bytes
CREATE OR REPLACE VIEW trace_device_memory AS
SELECT run, TRY_CAST(d->>'id' AS INTEGER) AS device, d->>'name' AS device_name,
       TRY_CAST(d->>'totalGlobalMem' AS BIGINT) AS total_bytes
FROM (SELECT run, unnest(from_json(device_properties, '["json"]')) AS d
      FROM runs WHERE kind = 'trace' AND device_properties IS NOT NULL);

-- Names of the NVML clocks event (throttle) reasons set in a bitmask
-- (nvmlClocksEventReason*); 'none' for 0.
CREATE OR REPLACE MACRO throttle_reason_names(mask) AS
    CASE WHEN mask IS NULL THEN NULL WHEN mask = 0 THEN 'none' ELSE concat_ws(', ',
        CASE WHEN mask & 1 <> 0 THEN 'gpu_idle' END,
        CASE WHEN mask & 2 <> 0 THEN 'applications_clocks' END,
        CASE WHEN mask & 4 <> 0 THEN 'sw_power_cap' END,
        CASE WHEN mask & 8 <> 0 THEN 'hw_slowdown' END,
        CASE WHEN mask & 16 <> 0 THEN 'sync_boost' END,
        CASE WHEN mask & 32 <> 0 THEN 'sw_thermal' END,
        CASE WHEN mask & 64 <> 0 THEN 'hw_thermal' END,
        CASE WHEN mask & 128 <> 0 THEN 'hw_power_brake' END,
        CASE WHEN mask & 256 <> 0 THEN 'display_clocks' END) END;

-- Theoretical occupancy of each ncu kernel from its launch limits: the fewest
-- blocks any resource allows per SM x warps per block / the SM's maximum warps, %.
--
-- @column run                        ncu run
-- @column kernel_id                  the kernel (kernels.kernel_id of that run: the report's ID)
-- @column blocks_per_sm              the fewest blocks per SM any launch__occupancy_limit_* allows
-- @column warps_per_block            ceil(launch__block_size / 32)
-- @column theoretical_occupancy_pct  100 * blocks_per_sm * warps_per_block / the device's
--                                    max_warps_per_multiprocessor, %
CREATE OR REPLACE VIEW ncu_kernel_occupancy AS
WITH c AS (
    SELECT run, kernel_id,
           least(max(value) FILTER (metric = 'launch__occupancy_limit_blocks'),
                 max(value) FILTER (metric = 'launch__occupancy_limit_registers'),
                 max(value) FILTER (metric = 'launch__occupancy_limit_shared_mem'),
                 max(value) FILTER (metric = 'launch__occupancy_limit_warps'),
                 max(value) FILTER (metric = 'launch__occupancy_limit_barriers')) AS blocks_per_sm,
           ceil(max(value) FILTER (metric = 'launch__block_size') / 32) AS warps_per_block
    FROM counters
    WHERE metric LIKE 'launch__occupancy_limit_%' OR metric = 'launch__block_size'
    GROUP BY run, kernel_id
)
SELECT c.run, c.kernel_id, c.blocks_per_sm, c.warps_per_block,
       100.0 * c.blocks_per_sm * c.warps_per_block
         / TRY_CAST(r.device_properties->>'max_warps_per_multiprocessor' AS DOUBLE) AS theoretical_occupancy_pct
FROM c JOIN runs r USING (run);
