-- includes:

-- Power and energy (method.md sections 6-7): power runs paired with traces,
-- the cumulative energy integral of each power log, calibration fits.
-- Documented in docs/schema.md ("energy").

-- Power runs for each trace run: pairs recorded at ingest (power_alignment),
-- else power logs whose window overlaps the trace's iterations in epoch time.
--
-- @column run        trace run
-- @column power_run  power run paired with it
-- @column offset_ns  trace time = power ts_ns + offset_ns, ns (0 for a log paired by epoch overlap)
-- @column method     how the clocks were aligned: absolute | offset | window-start
--                    (power_alignment.method); absolute for a log paired by epoch overlap
-- @column note       power_alignment.note; for a log paired by epoch overlap, says so
CREATE OR REPLACE VIEW trace_power_pairs AS
WITH pw AS (SELECT run, min(ts_ns) AS s, max(ts_ns) AS e FROM power GROUP BY run),
     tr AS (SELECT i.run, min(i.start_ns) AS s, max(i.end_ns) AS e FROM iterations i
            JOIN runs r ON r.run = i.run WHERE r.base_time_ns > 0 GROUP BY i.run)
SELECT trace_run AS run, power_run, offset_ns, method, note FROM power_alignment
UNION ALL
SELECT tr.run, pw.run, 0, 'absolute', 'not paired at ingest: the log overlaps the trace in epoch time'
FROM tr JOIN pw ON pw.s <= tr.e AND tr.s <= pw.e
WHERE NOT EXISTS (SELECT 1 FROM power_alignment a WHERE a.trace_run = tr.run AND a.power_run = pw.run);

-- Each power sample that has a power, with the power used for integration (METHOD.md section 6:
-- instant power when the log has it, since nvmlDeviceGetPowerUsage/power.draw
-- and power.draw.average are 1 s averages on Ampere+ that smear a short window;
-- else power.draw, else power.draw.average; power_field says which), the
-- segment to the next sample and the energy integrated before it (trapezoids).
--
-- @column run            power run
-- @column gpu            GPU index of the sample (power.gpu)
-- @column ts_ns          sample time, absolute epoch ns (the power log's clock)
-- @column p_w            power used for integration, W: instant_power_w, else power_w, else
--                        average_power_w
-- @column power_field    which power p_w is: instant | draw | average
-- @column energy_j       the cumulative energy counter (power.energy_j), J
-- @column phase          tracedb power-log phase: idle_before | run | idle_after (NULL for other logs)
-- @column next_ts        ts_ns of the next sample of the run and GPU, ns (NULL on the last)
-- @column next_p         p_w of the next sample, W
-- @column next_energy_j  energy_j of the next sample, J
-- @column cum_j          energy integrated from the log's first sample to this one
--                        (trapezoids of p_w), J
CREATE OR REPLACE VIEW power_integral AS
WITH c AS (
    SELECT *, coalesce(instant_power_w, power_w, average_power_w) AS p_w,
           CASE WHEN instant_power_w IS NOT NULL THEN 'instant'
                WHEN power_w IS NOT NULL THEN 'draw'
                WHEN average_power_w IS NOT NULL THEN 'average' END AS power_field
    FROM power
    -- a sample with no power (NaN, empty or [N/A] in the log) is passed over: the
    -- trapezoid runs from the sample before it to the one after
    WHERE coalesce(instant_power_w, power_w, average_power_w) IS NOT NULL
), s AS (
    SELECT run, gpu, ts_ns, p_w, power_field, energy_j, phase,
           lead(ts_ns) OVER w AS next_ts, lead(p_w) OVER w AS next_p,
           lead(energy_j) OVER w AS next_energy_j
    FROM c
    WINDOW w AS (PARTITION BY run, gpu ORDER BY ts_ns)
)
SELECT *, coalesce(sum((next_ts - ts_ns) * (p_w + next_p) / 2e9) OVER (
              PARTITION BY run, gpu ORDER BY ts_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS cum_j
FROM s;

-- Energy integrated from the start of a log to time t (power clock), given the
-- power_integral row at or before t: trapezoid of the linearly interpolated power.
CREATE OR REPLACE MACRO energy_at(cum_j, ts_ns, p_w, next_ts, next_p, t) AS
    CASE WHEN next_ts IS NULL THEN CASE WHEN t = ts_ns THEN cum_j END
         ELSE cum_j + (t - ts_ns) * p_w / 1e9
                    + 0.5 * (t - ts_ns) * (t - ts_ns) * (next_p - p_w) / (next_ts - ts_ns) / 1e9 END;

-- The energy counter interpolated linearly between two of its points at time t.
CREATE OR REPLACE MACRO counter_at(energy_j, ts_ns, next_energy_j, next_ts, t) AS
    CASE WHEN next_ts IS NULL THEN CASE WHEN t = ts_ns THEN energy_j END
         ELSE energy_j + (t - ts_ns) * (next_energy_j - energy_j) / (next_ts - ts_ns) END;

-- The energy counter's update points: NVML's total-energy counter
-- steps about every 100 ms however often it is read, so between repeated samples
-- of one value it says nothing; interpolating between samples put a whole update's
-- energy into the few ms before the sample that saw it. An update point is a sample
-- whose counter differs from the previous sample's, placed midway between the two
-- (the update happened in between: at most half the sampling interval off); the
-- counter is interpolated between consecutive update points (energy_of_windows).
--
-- @column run            power run
-- @column gpu            GPU index (power.gpu)
-- @column ts_ns          the update's time: midway between the sample that first shows the new
--                        value and the one before it, absolute epoch ns (the power log's clock)
-- @column energy_j       the counter's new value, J
-- @column next_ts        ts_ns of the next update point (NULL on the last), ns
-- @column next_energy_j  energy_j of the next update point, J
CREATE OR REPLACE VIEW power_counter_updates AS
WITH c AS (
    SELECT run, gpu, ts_ns, energy_j, lag(ts_ns) OVER w AS prev_ts, lag(energy_j) OVER w AS prev_j
    FROM power WHERE energy_j IS NOT NULL
    WINDOW w AS (PARTITION BY run, gpu ORDER BY ts_ns)
), u AS (
    SELECT run, gpu, prev_ts + (ts_ns - prev_ts) // 2 AS ts_ns, energy_j FROM c
    WHERE prev_j IS NOT NULL AND energy_j <> prev_j
)
SELECT *, lead(ts_ns) OVER w AS next_ts, lead(energy_j) OVER w AS next_energy_j
FROM u WINDOW w AS (PARTITION BY run, gpu ORDER BY ts_ns);

-- Per power run and GPU: idle power (median of the idle phases recorded by
-- tracedb power-log, else the 5th percentile of the log) and how often the
-- sensors change (median time between changes of the energy counter and of
-- the integrated power).
--
-- @column run                power run
-- @column gpu                GPU index (power.gpu)
-- @column idle_power_w       idle power, W: the median p_w of the idle_before and idle_after
--                            samples, else the 5th percentile of p_w over the log
-- @column idle_source        which: 'median of the idle phases' or '5th percentile of the log'
-- @column samples            number of samples of the GPU in the log that have a power
-- @column start_ns           first sample time, absolute epoch ns (the power log's clock)
-- @column end_ns             last sample time, absolute epoch ns
-- @column counter_period_ns  median time between changes of the energy counter, ns
-- @column power_period_ns    median time between changes of p_w, ns
CREATE OR REPLACE VIEW power_sensors AS
WITH ch AS (
    SELECT run, gpu, ts_ns,
           energy_j IS DISTINCT FROM lag(energy_j) OVER w AS e_changed,
           p_w IS DISTINCT FROM lag(p_w) OVER w AS p_changed
    FROM power_integral WINDOW w AS (PARTITION BY run, gpu ORDER BY ts_ns)
), e AS (
    SELECT run, gpu, median(ts_ns - lag_ts) AS counter_period_ns FROM (
        SELECT run, gpu, ts_ns, lag(ts_ns) OVER (PARTITION BY run, gpu ORDER BY ts_ns) AS lag_ts
        FROM ch WHERE e_changed) GROUP BY run, gpu
), p AS (
    SELECT run, gpu, median(ts_ns - lag_ts) AS power_period_ns FROM (
        SELECT run, gpu, ts_ns, lag(ts_ns) OVER (PARTITION BY run, gpu ORDER BY ts_ns) AS lag_ts
        FROM ch WHERE p_changed) GROUP BY run, gpu
), idle AS (
    SELECT run, gpu,
           coalesce(median(p_w) FILTER (phase IN ('idle_before', 'idle_after')),
                    quantile_cont(p_w, 0.05)) AS idle_power_w,
           CASE WHEN count(*) FILTER (phase IN ('idle_before', 'idle_after')) > 0
                THEN 'median of the idle phases' ELSE '5th percentile of the log' END AS idle_source,
           count(*) AS samples, min(ts_ns) AS start_ns, max(ts_ns) AS end_ns
    FROM power_integral GROUP BY run, gpu
)
SELECT idle.*, e.counter_period_ns, p.power_period_ns
FROM idle LEFT JOIN e USING (run, gpu) LEFT JOIN p USING (run, gpu);

-- Fits of the calibration points: energy = eps x accesses + offset per GPU,
-- level and launch shape (valid points only), and the published reference
-- values; lower_bound marks, per GPU and level, the smallest eps among fits
-- with at least 3 points and r2 >= 0.95 (the model's lower bound).
-- counted_per_access: what the level's ncu counter counted per access in the
-- counter checks behind the points (shared: wavefronts per 32-byte load, 0.25
-- on the H200; about 1 sector per sector elsewhere); energy_breakdown turns
-- the application's shared wavefronts into the calibration's accesses with it.
-- The spread over repeats: eps fitted on each pass of the sweep alone
-- (eps_pass_*), over the passes with at least 2 access counts.
--
-- @column gpu                 GPU name (calibration.gpu; calibration_reference.gpu on a published row)
-- @column level               memory level: shared | l1 | l2 | dram
-- @column threads_per_block   launch shape of the fit's points: threads per block (NULL on a
--                             published row)
-- @column blocks              launch shape of the fit's points: blocks (NULL on a published row)
-- @column eps_pj              energy per access, pJ per 32-byte sector: the slope of energy_j over
--                             accesses x 1e12 (published row: calibration_reference.eps_pj)
-- @column offset_j            intercept of the fit, J (0 on a published row)
-- @column r2                  coefficient of determination of the fit (NULL on a published row)
-- @column n_points            valid points in the fit (NULL on a published row)
-- @column lower_bound         the model's lower bound for the GPU and level: the fit of smallest
--                             eps_pj among those with >= 3 points and r2 >= 0.95; true on every
--                             published row
-- @column reference           a point of the fit is a published value (calibration.reference);
--                             true on every published row
-- @column counted_per_access  what the level's ncu counter counted per access in the counter
--                             checks behind the points (shared: wavefronts, else sectors); NULL
--                             without counter checks
-- @column n_passes            sweep passes fitted alone: those with valid points at >= 2 access
--                             counts (NULL when none)
-- @column eps_pass_mean_pj    mean of the per-pass eps, pJ per 32-byte sector
-- @column eps_pass_std_pj     sample standard deviation of the per-pass eps, pJ per 32-byte sector
-- @column eps_pass_min_pj     smallest per-pass eps, pJ per 32-byte sector
-- @column eps_pass_max_pj     largest per-pass eps, pJ per 32-byte sector
CREATE OR REPLACE VIEW calibration_fits AS
WITH f AS (
    SELECT gpu, level, threads_per_block, blocks,
           regr_slope(energy_j, accesses) * 1e12 AS eps_pj,
           regr_intercept(energy_j, accesses) AS offset_j,
           regr_r2(energy_j, accesses) AS r2, count(*) AS n_points,
           bool_or(reference) AS reference,
           sum(counted) / sum(accesses) FILTER (counted IS NOT NULL) AS counted_per_access
    FROM calibration WHERE valid
    GROUP BY gpu, level, threads_per_block, blocks
), per_pass AS (
    SELECT gpu, level, threads_per_block, blocks, sweep_pass,
           regr_slope(energy_j, accesses) * 1e12 AS eps_pj
    FROM calibration WHERE valid AND sweep_pass IS NOT NULL
    GROUP BY gpu, level, threads_per_block, blocks, sweep_pass
    HAVING count(DISTINCT accesses) >= 2
), spread AS (
    SELECT gpu, level, threads_per_block, blocks, count(*) AS n_passes,
           avg(eps_pj) AS eps_pass_mean_pj, stddev_samp(eps_pj) AS eps_pass_std_pj,
           min(eps_pj) AS eps_pass_min_pj, max(eps_pj) AS eps_pass_max_pj
    FROM per_pass GROUP BY gpu, level, threads_per_block, blocks
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY gpu, level
                                 ORDER BY (n_points >= 3 AND r2 >= 0.95) DESC, eps_pj) = 1
                                 AND n_points >= 3 AND r2 >= 0.95 AS lower_bound
    FROM f
)
SELECT gpu, level, threads_per_block, blocks, eps_pj, offset_j, r2, n_points, lower_bound,
       coalesce(reference, false) AS reference, counted_per_access,
       n_passes, eps_pass_mean_pj, eps_pass_std_pj, eps_pass_min_pj, eps_pass_max_pj
FROM ranked LEFT JOIN spread USING (gpu, level, threads_per_block, blocks)
UNION ALL
SELECT gpu, level, NULL, NULL, eps_pj, 0, NULL, NULL, true, true, NULL, NULL, NULL, NULL, NULL, NULL
FROM calibration_reference;

-- The GPU of each trace run: the device its kernels ran on (the
-- most common, the lowest on a tie), else the one device its deviceProperties
-- list. A power or system log of several GPUs is read at this index (the CUDA
-- ordinal: under CUDA_VISIBLE_DEVICES it need not be the NVML index).
--
-- @column run     trace run
-- @column gpu     GPU index (kernels.device)
-- @column source  kernels | deviceProperties
CREATE OR REPLACE VIEW run_gpu AS
WITH k AS (
    SELECT run, device, count(*) AS n FROM kernels WHERE device IS NOT NULL GROUP BY run, device
    QUALIFY row_number() OVER (PARTITION BY run ORDER BY count(*) DESC, device) = 1
), p AS (
    SELECT run, CAST(device_properties -> 0 ->> 'id' AS INTEGER) AS device FROM runs
    WHERE kind = 'trace' AND json_array_length(device_properties) = 1
)
SELECT r.run, coalesce(k.device, p.device) AS gpu,
       CASE WHEN k.device IS NOT NULL THEN 'kernels' ELSE 'deviceProperties' END AS source
FROM runs r LEFT JOIN k USING (run) LEFT JOIN p USING (run)
WHERE r.kind = 'trace' AND coalesce(k.device, p.device) IS NOT NULL;

-- Energy of time windows on a trace's timeline: for each row of the temp
-- relation _energy_windows(run, iteration, label, s, e) (trace ns) and the power
-- run chosen per trace run, the integrated energy and the counter delta.
-- Used by the energy reports through energy_of_windows().
CREATE OR REPLACE MACRO energy_of_windows(windows, power_run_param, gpu_param) AS TABLE
WITH pr AS (
    SELECT * FROM trace_power_pairs
    WHERE power_run_param IS NULL OR power_run = power_run_param
    QUALIFY row_number() OVER (PARTITION BY run ORDER BY note LIKE 'not paired%', power_run) = 1
), g AS (          -- the GPU asked for, else the trace run's own GPU when the log has it (run_gpu), else the lowest
    SELECT pr.run, pr.power_run,
           coalesce(gpu_param, min(s.gpu) FILTER (WHERE s.gpu = rg.gpu), min(s.gpu)) AS gpu
    FROM pr JOIN power_sensors s ON s.run = pr.power_run LEFT JOIN run_gpu rg ON rg.run = pr.run
    GROUP BY pr.run, pr.power_run
), w AS (
    SELECT x.*, pr.power_run, pr.offset_ns, pr.method, pr.note AS alignment, g.gpu,
           x.s - pr.offset_ns AS ps, x.e - pr.offset_ns AS pe
    FROM query_table(windows) x JOIN pr USING (run) JOIN g USING (run, power_run)
), a AS (
    SELECT w.*, energy_at(i.cum_j, i.ts_ns, i.p_w, i.next_ts, i.next_p, w.ps) AS e0,
           counter_at(u.energy_j, u.ts_ns, u.next_energy_j, u.next_ts, w.ps) AS c0
    FROM w ASOF LEFT JOIN power_integral i ON i.run = w.power_run AND i.gpu = w.gpu AND w.ps >= i.ts_ns
    ASOF LEFT JOIN power_counter_updates u ON u.run = w.power_run AND u.gpu = w.gpu AND w.ps >= u.ts_ns
), b AS (
    SELECT a.*, energy_at(i.cum_j, i.ts_ns, i.p_w, i.next_ts, i.next_p, a.pe) AS e1,
           counter_at(u.energy_j, u.ts_ns, u.next_energy_j, u.next_ts, a.pe) AS c1
    FROM a ASOF LEFT JOIN power_integral i ON i.run = a.power_run AND i.gpu = a.gpu AND a.pe >= i.ts_ns
    ASOF LEFT JOIN power_counter_updates u ON u.run = a.power_run AND u.gpu = a.gpu AND a.pe >= u.ts_ns
)
SELECT b.* EXCLUDE (e0, e1, c0, c1), e1 - e0 AS energy_integrated_j, c1 - c0 AS energy_counter_j,
       ps.idle_power_w, ps.idle_source, ps.counter_period_ns, ps.power_period_ns
FROM b JOIN power_sensors ps ON ps.run = b.power_run AND ps.gpu = b.gpu;
