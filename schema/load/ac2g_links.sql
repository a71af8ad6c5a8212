-- Launch links written only as ac2g flow events: a trace whose GPU activity and
-- launch calls carry no args.correlation (a converter, or a trimmed export) but whose
-- flow arrows (ph s/f, cat ac2g) join them. The flow's id becomes the correlation of
-- the GPU event its 'f' end binds to (same pid and tid, the same start) and of the
-- launch call its 's' end starts (same pid and tid and start), before
-- derive_trace.sql links kernels to launches by correlation. Only events with no
-- correlation written are given one (an id written but unusable, a fraction or
-- text, stays NULL: it links to nothing, as ingest's warning says). Run by
-- ingest/trace.py only when the run has GPU activity without a correlation.
-- Parameter: $run VARCHAR.
-- reads: _run_events
-- creates: _ac2g (dropped at its end)
CREATE OR REPLACE TEMP TABLE _ac2g AS
SELECT ph, pid, tid, ts_ns, min(TRY_CAST(flow_id AS BIGINT)) AS correlation
FROM _run_events
WHERE cat = 'ac2g' AND ph IN ('s', 'f') AND ts_ns IS NOT NULL AND TRY_CAST(flow_id AS BIGINT) IS NOT NULL
GROUP BY ALL;

UPDATE events e SET correlation = a.correlation
FROM _ac2g a
WHERE e.run = $run AND e.correlation IS NULL AND e.ph = 'X'
  AND json_extract_string(e.args, '$.correlation') IS NULL AND json_extract_string(e.args, '$.correlation_id') IS NULL
  AND a.pid = e.pid AND a.tid = e.tid AND a.ts_ns = e.ts_ns
  AND ((a.ph = 'f' AND gpu_activity_kind(e.cat) IS NOT NULL)
       OR (a.ph = 's' AND (is_launch_category(e.cat)
                           OR (e.cat IS NULL AND regexp_matches(e.name, '^cu(da)?(Launch|GraphLaunch|Memcpy|Memset)')))));

DROP TABLE _ac2g;
