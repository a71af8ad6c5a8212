-- The rows of a trace's event array as the events table holds them, from the
-- temp source _trace_source (the raw columns of ingest/trace_json.RAW_COLUMNS,
-- plus ts_ns and dur_ns already in ns, exactly, and needs_exact: ingest/trace.py
-- converts ts and dur from doubles or from their JSON text, and sends a batch
-- whose doubles cannot be exact down the exact path); the commonly used args
-- become typed columns. ts_ns is relative to the trace's base time;
-- trace_events.sql adds it and numbers the events.
-- Values that would load wrong are mended and named in `problem` (';'-separated; NULL for a
-- sound event; ingest/trace.py counts them into warnings, trace_events.sql leaves
-- the column out): a negative dur is dropped (NULL: no event lasts less than
-- nothing); NaN/Infinity (not JSON, but written by some tools) in ts or dur become
-- NULL, and so does a ts or dur that is not a number (the load reads such a file's
-- numbers as text; a number written as a string is that number; a boolean is 1 or
-- 0 µs when every other ts and dur is a number: read as doubles, DuckDB casts it);
-- an event other than metadata (ph M) without a ts is named (its ts_ns is NULL; an
-- event with neither, XProf's closing {}, is not);
-- a correlation or external id beyond 64 bits gets a negative stand-in derived from
-- its text (real ids are positive), so a kernel keeps its launch; one that is not
-- an integer (1.5, text) is dropped (NULL: DuckDB's cast would round 1.5 onto
-- another event's id 2); args that are not an object (a list, a string) and GPU
-- activity that is not a complete event (ph X: derive_trace.sql reads only those)
-- are named.
-- reads: _trace_source (ingest/trace.py: DuckDB's JSON reader over the pieces, or an Arrow batch)
-- columns of it read here: ph cat name pid tid ts dur id args ts_ns dur_ns needs_exact
-- creates: _trace_rows (view; ingest/trace.py drops it once staged)
CREATE OR REPLACE TEMP VIEW _trace_rows AS
SELECT
    ph, cat, name, pid, tid,
    ts_ns,
    CASE WHEN dur_ns >= 0 THEN dur_ns END AS dur_ns,
    CASE WHEN corr_bad THEN NULL WHEN corr_n IS NULL THEN id_stand_in(corr) ELSE corr_n END AS correlation,
    CASE WHEN ext_bad THEN NULL WHEN ext_n IS NULL THEN id_stand_in(ext) ELSE ext_n END AS external_id,
    coalesce(TRY_CAST(a[5] AS BIGINT),
             CASE WHEN tid LIKE 'stream %' THEN TRY_CAST(substr(tid, 8) AS BIGINT) END) AS stream,
    TRY_CAST(a[6] AS BIGINT) AS device,
    id AS flow_id,
    args,
    needs_exact,
    nullif(concat_ws(';',
        CASE WHEN (ts IS NOT NULL AND ts_ns IS NULL) OR (dur IS NOT NULL AND dur_ns IS NULL)
             THEN 'ts or dur not a number' END,
        CASE WHEN dur_ns < 0 THEN 'negative dur' END,
        CASE WHEN ts IS NULL AND ph <> 'M' THEN 'no ts' END,
        CASE WHEN corr_n IS NULL AND id_stand_in(corr) IS NOT NULL
               OR ext_n IS NULL AND id_stand_in(ext) IS NOT NULL THEN 'id beyond 64 bits' END,
        CASE WHEN corr_bad OR ext_bad THEN 'id not an integer' END,
        CASE WHEN NOT starts_with(CAST(args AS VARCHAR), '{') THEN 'args not an object' END,
        CASE WHEN ph IS DISTINCT FROM 'X' AND gpu_activity_kind(cat) IS NOT NULL THEN 'gpu activity not ph X' END
    ), '') AS problem
FROM (      -- (each alias read by the ones after it)
    SELECT *, coalesce(a[1], a[2]) AS corr, coalesce(a[3], a[4]) AS ext,
           TRY_CAST(corr AS BIGINT) AS corr_n, TRY_CAST(ext AS BIGINT) AS ext_n,
           id_unusable(corr, corr_n) AS corr_bad, id_unusable(ext, ext_n) AS ext_bad
    FROM (
        SELECT *, json_extract_string(args, ['$.correlation', '$.correlation_id', '$."External id"',
                                             '$."external id"', '$.stream', '$.device']) AS a
        FROM _trace_source
    )
);
