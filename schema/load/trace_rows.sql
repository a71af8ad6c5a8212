-- The rows of a trace's event array as the events table holds them, from the
-- temp source _trace_source (the raw columns of ingest/trace_json.RAW_COLUMNS,
-- numbers as their JSON text): ts/dur in µs are converted to ns from that text
-- (us_text_to_ns), never through a double; the commonly used args become typed
-- columns. ts_ns is relative to the trace's base time; trace_events.sql adds it
-- and numbers the events.
-- reads: _trace_source (ingest/trace.py: DuckDB's JSON reader over the pieces, or an Arrow batch)
-- creates: _trace_rows (view; ingest/trace.py drops it once staged)
CREATE OR REPLACE TEMP VIEW _trace_rows AS
SELECT
    ph, cat, name, pid, tid,
    us_text_to_ns(ts) AS ts_ns,
    us_text_to_ns(dur) AS dur_ns,
    TRY_CAST(coalesce(a[1], a[2]) AS BIGINT) AS correlation,
    TRY_CAST(coalesce(a[3], a[4]) AS BIGINT) AS external_id,
    coalesce(TRY_CAST(a[5] AS BIGINT),
             CASE WHEN tid LIKE 'stream %' THEN TRY_CAST(substr(tid, 8) AS BIGINT) END) AS stream,
    TRY_CAST(a[6] AS BIGINT) AS device,
    id AS flow_id,
    args
FROM (
    SELECT *, json_extract_string(args, ['$.correlation', '$.correlation_id', '$."External id"',
                                         '$."external id"', '$.stream', '$.device']) AS a
    FROM _trace_source
);
