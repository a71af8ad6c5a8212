-- The FLOP reports' analytic rows of one trace run, summed per iteration at ingest
-- (--op-totals, after iteration_aggregates.sql) so that flops_by_op, flop_utilization
-- and bwd_fwd_ratio read them (view op_flop_sums_windows) instead of sweeping the run's
-- ops: their args' JSON parse and the per-thread sweeps of flop_ops run once here.
-- Parameters: $run VARCHAR.
-- reads: events, flop_formulas and iterations of the run (flop_ops_of)
-- creates: the variable tracedb_op_windows (reset); rows of op_flop_totals
--
-- flop_ops over this run only (its runs row comes after the load), the op windows
-- (flop_event_in_window) set to the run's event ids and the whole of its time, so the
-- events scan skips the other runs' row groups.
-- Each (iteration, name, pass, category, dtype) keeps its ops, those with FLOPs and their
-- sum: every FLOP report's window (an iteration, the whole trace) is a union of such
-- groups, and each report's sums and counts are sums of theirs. A run with no op of a
-- formula keeps one row with op_name NULL and ops 0 (stored: nothing to sweep).
SET VARIABLE tracedb_op_windows = (
    SELECT {'lo_ns': CAST(-9223372036854775808 AS BIGINT), 'hi_ns': CAST(9223372036854775807 AS BIGINT),
            'first_event_id': coalesce(min(event_id), 0), 'last_event_id': coalesce(max(event_id), -1),
            'first_kernel_id': 0, 'last_kernel_id': -1,
            'runs': MAP([CAST($run AS VARCHAR)],
                        [{'lo_ns': CAST(-9223372036854775808 AS BIGINT), 'hi_ns': CAST(9223372036854775807 AS BIGINT)}])}
    FROM events WHERE run = $run);

DELETE FROM op_flop_totals WHERE run = $run;
INSERT INTO op_flop_totals
SELECT $run, iteration, name, pass, category, dtype, count(*), count(flops), CAST(sum(flops) AS BIGINT),
       flop_formulas_digest()
FROM flop_ops_of(false, one_run := $run)
GROUP BY iteration, name, pass, category, dtype;
INSERT INTO op_flop_totals
SELECT $run, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, flop_formulas_digest()
WHERE NOT EXISTS (SELECT 1 FROM op_flop_totals WHERE run = $run);

RESET VARIABLE tracedb_op_windows;
