-- One trace run as Chrome trace JSON events, one JSON object per row (`line`), for
-- `tracedb export --perfetto`: the run's own events as the source wrote them (ts
-- in µs relative to baseTimeNanoseconds, written exactly from integer ns), each
-- GPU activity's args with what tracedb knows added under "tracedb" (layer type,
-- the matched ncu kernel's levels and counters), and tracedb's own tracks
-- (cat "tracedb"): iterations as slices, power, clocks and temperature of the
-- paired power logs and allocated memory as counters. Parameters: $run, $base_ns
-- (the run's base time), $pid (the process id of tracedb's tracks), and $lo, $hi:
-- perfetto.py asks for the run's own events a window of event ids at a time, each
-- sorted alone (one sort of every line of a 10 GB trace held 9.8 GB), then for
-- tracedb's tracks.

-- µs text of an integer ns offset, exact (ns / 1000 with three decimals).
CREATE OR REPLACE TEMP MACRO _pf_us(ns) AS
    CASE WHEN ns < 0 THEN '-' ELSE '' END || (abs(ns) // 1000)::VARCHAR || '.' || lpad((abs(ns) % 1000)::VARCHAR, 3, '0');

-- A pid or tid as written: a number when it is one, else a JSON string.
CREATE OR REPLACE TEMP MACRO _pf_id(v) AS
    CASE WHEN regexp_full_match(v, '-?[0-9]{1,15}') THEN v ELSE to_json(v)::VARCHAR END;

-- The run's own events with event ids in [$lo, $hi), in the file's order.
WITH lv AS (
    SELECT l.kernel_id, to_json({layer_type: l.layer_type, ncu_run: m.ncu_run, ncu_id: m.ncu_id,
                                 match_score: m.score, smsp_active_pct: m.smsp_active_pct,
                                 issue_slot_pct: m.issue_slot_pct, tc_active_pct: m.tc_active_pct,
                                 tc_issue_pct: m.tc_issue_pct, gpu_time_ns: m.gpu_time_ns,
                                 smsp_cycles_elapsed: m.smsp_cycles_elapsed, smsp_cycles_active: m.smsp_cycles_active,
                                 smsp_issue_active: m.smsp_issue_active, tc_cycles_active: m.tc_cycles_active,
                                 tc_inst: m.tc_inst, dram_sectors_read: m.dram_sectors_read,
                                 dram_sectors_write: m.dram_sectors_write}) AS known
    FROM kernel_layers l
    LEFT JOIN kernel_levels m ON m.run = l.run AND m.kernel_id = l.kernel_id
    WHERE l.run = $run AND l.kernel_id >= $lo AND l.kernel_id < $hi
)
SELECT '{' || concat_ws(',',
           '"ph":' || to_json(e.ph),
           '"cat":' || to_json(e.cat),
           '"name":' || to_json(e.name),
           '"pid":' || _pf_id(e.pid),
           '"tid":' || _pf_id(e.tid),
           '"ts":' || _pf_us(e.ts_ns - $base_ns),
           '"dur":' || _pf_us(e.dur_ns),
           '"id":' || _pf_id(e.flow_id),
           CASE WHEN e.ph = 'f' THEN '"bp":"e"' END,
           '"args":' || CASE WHEN lv.known IS NULL THEN e.args::VARCHAR
                             ELSE json_merge_patch(coalesce(e.args, '{}'::JSON),
                                                   json_object('tracedb', json(lv.known)))::VARCHAR END
       ) || '}' AS line
FROM events e LEFT JOIN lv ON lv.kernel_id = e.event_id
WHERE e.run = $run AND e.event_id >= $lo AND e.event_id < $hi
ORDER BY e.event_id;

-- tracedb's own tracks, after the run's events.
WITH span AS (
    SELECT min(ts_ns) AS s, max(ts_ns + coalesce(dur_ns, 0)) AS e FROM events WHERE run = $run
), added AS (
    SELECT 1 AS part, 0 AS sort,
           '{"ph":"M","cat":"tracedb","name":"process_name","pid":' || $pid || ',"tid":0,"args":{"name":"tracedb"}}' AS line
    UNION ALL
    SELECT 1, 1 + i.iteration,
           '{"ph":"X","cat":"tracedb","name":' || to_json('iteration ' || i.iteration || CASE WHEN g.steady THEN ' (steady)' ELSE '' END)
           || ',"pid":' || $pid || ',"tid":1,"ts":' || _pf_us(i.start_ns - $base_ns) || ',"dur":' || _pf_us(i.dur_ns)
           || ',"args":' || to_json({iteration: i.iteration, total_ns: g.total_ns, kernel_busy_ns: g.kernel_busy_ns,
                                     gpu_util_pct: g.gpu_util_pct, steady: g.steady})::VARCHAR || '}'
    FROM iterations i LEFT JOIN iteration_gpu_time g USING (run, iteration)
    WHERE i.run = $run
    UNION ALL
    SELECT 2, p.ts_ns + a.offset_ns,
           '{"ph":"C","cat":"tracedb","name":' || to_json('GPU ' || p.gpu || ' ' || c.track) || ',"pid":' || $pid
           || ',"tid":2,"ts":' || _pf_us(p.ts_ns + a.offset_ns - $base_ns) || ',"args":' || c.args || '}'
    FROM trace_power_pairs a
    JOIN power p ON p.run = a.power_run
    CROSS JOIN span
    CROSS JOIN LATERAL (VALUES
        ('power (' || a.power_run || ')', to_json({power_w: coalesce(p.instant_power_w, p.power_w)})::VARCHAR),
        ('clocks (' || a.power_run || ')', to_json({sm_clock_mhz: p.sm_clock_mhz, mem_clock_mhz: p.mem_clock_mhz})::VARCHAR),
        ('temperature (' || a.power_run || ')', to_json({temp_c: p.temp_c})::VARCHAR)) AS c(track, args)
    WHERE a.run = $run AND p.ts_ns + a.offset_ns BETWEEN span.s AND span.e
      AND c.args NOT IN ('{"power_w":null}', '{"sm_clock_mhz":null,"mem_clock_mhz":null}', '{"temp_c":null}')
    UNION ALL
    SELECT 3, e.ts_ns,
           '{"ph":"C","cat":"tracedb","name":"memory allocated (device ' || coalesce(e.args->>'Device Id', '?')
           || ')","pid":' || $pid || ',"tid":3,"ts":' || _pf_us(e.ts_ns - $base_ns)
           || ',"args":{"allocated_bytes":' || (e.args->>'Total Allocated') || '}}'
    FROM events e
    WHERE e.run = $run AND e.name = '[memory]' AND TRY_CAST(e.args->>'Total Allocated' AS BIGINT) IS NOT NULL
)
SELECT line FROM added
ORDER BY part, sort;
