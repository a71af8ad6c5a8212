-- Raw trace events -> events table. The source view _trace_source has
-- event_id plus the raw columns of ingest/trace_json.RAW_COLUMNS, numbers as
-- their JSON text: ts/dur in µs are converted to ns from that text (us_text_to_ns),
-- never through a double.
-- Parameters: $run VARCHAR, $base_ns BIGINT (Kineto baseTimeNanoseconds or 0).
INSERT INTO events
SELECT
    $run, event_id, ph, cat, name, pid, tid,
    us_text_to_ns(ts) + $base_ns,
    us_text_to_ns(dur),
    TRY_CAST(coalesce(a[1], a[2]) AS BIGINT),
    TRY_CAST(coalesce(a[3], a[4]) AS BIGINT),
    coalesce(TRY_CAST(a[5] AS BIGINT),
             CASE WHEN tid LIKE 'stream %' THEN TRY_CAST(substr(tid, 8) AS BIGINT) END),
    TRY_CAST(a[6] AS BIGINT),
    id,
    args
FROM (
    SELECT *, json_extract_string(args, ['$.correlation', '$.correlation_id', '$."External id"',
                                         '$."external id"', '$.stream', '$.device']) AS a
    FROM _trace_source
);
