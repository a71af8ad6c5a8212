-- Kineto's CUPTI range-profiler mode: each kernel is a `cuda_profiler_range`
-- event (name = kernel name) whose args map metric names to values; the trace
-- has no kernel events then. The ranges become kernels of the run, paired with
-- the kernel launch calls by position (both in time order, as Holistic Trace
-- Analysis pairs them; only when their counts agree), their args become counters
-- of the run, and the run is matched to itself (matches, match_runs), so every
-- counter-based view (ncu_kernel_metrics, matched_kernels, the utilization
-- levels, the FLOP views) reads them as it reads a paired ncu report.
-- Parameter: $run VARCHAR. Runs after derive_trace.sql.
-- reads: _run_events, kernels, iterations
-- creates: _cupti_range, _cupti_launch, _cupti_kernel (all dropped at its end)

CREATE OR REPLACE TEMP TABLE _cupti_range AS
SELECT event_id, name, ts_ns, dur_ns, args,
       row_number() OVER (ORDER BY ts_ns, event_id) AS n
FROM _run_events
WHERE ph = 'X' AND cat = 'cuda_profiler_range';

CREATE OR REPLACE TEMP TABLE _cupti_launch AS
SELECT event_id, name, ts_ns, ts_ns + coalesce(dur_ns, 0) AS end_ns, pid, tid, correlation,
       row_number() OVER (ORDER BY ts_ns, event_id) AS n
FROM _run_events
WHERE ph = 'X' AND is_launch_category(cat)
  AND regexp_matches(name, '^cu(da)?(LaunchKernel|LaunchCooperativeKernel|ModuleLaunchKernel|LaunchKernelEx)')
  AND EXISTS (SELECT 1 FROM _cupti_range);

-- One kernel per range; its launch only when the counts agree. A range whose
-- launch already has a kernel event keeps that kernel's id.
CREATE OR REPLACE TEMP TABLE _cupti_kernel AS
WITH paired AS (
    SELECT r.*, l.event_id AS launch_event_id, l.name AS launch_name, l.ts_ns AS launch_ts_ns,
           l.end_ns AS launch_end_ns, l.pid AS launch_pid, l.tid AS launch_tid, l.correlation
    FROM _cupti_range r
    LEFT JOIN _cupti_launch l
      ON l.n = r.n AND (SELECT count(*) FROM _cupti_launch) = (SELECT count(*) FROM _cupti_range)
)
SELECT p.*, k.kernel_id AS existing_id, coalesce(k.kernel_id, p.event_id) AS kernel_id,
       (SELECT arg_max(e.event_id, e.ts_ns) FROM _run_events e
        WHERE e.ph = 'X' AND is_framework_op_category(e.cat) AND e.dur_ns > 0
          AND e.pid IS NOT DISTINCT FROM p.launch_pid AND e.tid IS NOT DISTINCT FROM p.launch_tid
          AND p.launch_ts_ns BETWEEN e.ts_ns AND e.ts_ns + e.dur_ns) AS op_event_id
FROM paired p
LEFT JOIN kernels k ON k.run = $run AND k.correlation = p.correlation AND k.kind = 'kernel';

INSERT INTO kernels (run, kernel_id, kind, name, ts_ns, dur_ns, correlation, launch_event_id, launch_name,
                     launch_ts_ns, launch_end_ns, launch_pid, launch_tid, op_event_id, op_name, iteration, seq)
SELECT $run, c.kernel_id, 'kernel', c.name, c.ts_ns, c.dur_ns, c.correlation, c.launch_event_id, c.launch_name,
       c.launch_ts_ns, c.launch_end_ns, c.launch_pid, c.launch_tid, c.op_event_id, o.name,
       (SELECT i.iteration FROM iterations i
        WHERE i.run = $run AND coalesce(c.launch_ts_ns, c.ts_ns) BETWEEN i.start_ns AND i.marker_end_ns),
       (SELECT coalesce(max(seq) + 1, 0) FROM kernels WHERE run = $run) + c.n - 1
FROM _cupti_kernel c
LEFT JOIN _run_events o ON o.event_id = c.op_event_id
WHERE c.existing_id IS NULL
ORDER BY c.n;

INSERT INTO counters (run, kernel_id, metric, value, text_value, unit)
SELECT $run, c.kernel_id, j.key, TRY_CAST(j.value AS DOUBLE),
       CASE WHEN TRY_CAST(j.value AS DOUBLE) IS NULL THEN j.value ->> '$' END, NULL
FROM _cupti_kernel c, json_each(c.args) j;

INSERT INTO matches (trace_run, ncu_run, trace_kernel_id, ncu_kernel_id, score, name_score, launch_score,
                     order_score, duration_score, order_distance, round)
SELECT $run, $run, kernel_id, kernel_id, 1, 1, 1, 1, 1, 0, 0 FROM _cupti_kernel;

INSERT INTO match_runs (trace_run, ncu_run, iteration, trace_kernels, ncu_kernels, matched, candidates, seconds)
SELECT $run, $run, NULL, count(*), count(*), count(*), count(*), 0 FROM _cupti_kernel HAVING count(*) > 0;

DROP TABLE _cupti_range;
DROP TABLE _cupti_launch;
DROP TABLE _cupti_kernel;
