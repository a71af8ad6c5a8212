-- System details of one trace run from its own events (METHOD.md section 9):
-- GPU memory from Kineto `[memory]` instant events (written with
-- profile_memory=True) into memory_events, and the occupancy and copy args of
-- its GPU activity into activity_args. Runs after derive_trace.sql.
-- reads: _run_events (trace_events.sql), _gpu (derive_trace.sql: the GPU rows, their args parsed);
--        variable tracedb_run
-- creates: nothing temporary (drops _gpu)
INSERT INTO memory_events
SELECT run, event_id, ts_ns,
       CASE TRY_CAST(a[1] AS INTEGER) WHEN 1 THEN 'cuda' WHEN 0 THEN 'cpu' ELSE 'other' END AS device_type,
       TRY_CAST(a[2] AS INTEGER) AS device,
       TRY_CAST(a[3] AS BIGINT) AS bytes,
       TRY_CAST(a[4] AS BIGINT) AS addr,
       TRY_CAST(a[5] AS BIGINT) AS allocated_bytes,
       TRY_CAST(a[6] AS BIGINT) AS reserved_bytes
FROM (
    SELECT run, event_id, ts_ns,
           json_extract_string(args, ['$."Device Type"', '$."Device Id"', '$.Bytes', '$.Addr',
                                      '$."Total Allocated"', '$."Total Reserved"']) AS a
    FROM _run_events
    WHERE name = '[memory]' AND ph IN ('i', 'I') AND ts_ns IS NOT NULL
);

INSERT INTO activity_args
WITH g AS (
    SELECT getvariable('tracedb_run') AS run, event_id, name, kind, oa AS a
    FROM _gpu
    WHERE gpu_activity_kind(cat) IS NOT NULL
), d AS (
    -- (the names of copies and sets only: a kernel's name is long and says none of it)
    SELECT *,
           CASE WHEN kind = 'memcpy' THEN replace(regexp_extract(name, '(HtoD|DtoH|DtoD|HtoH|PtoP|H2D|D2H|D2D|H2H|P2P)'), '2', 'to') END AS dir,
           CASE WHEN kind = 'memcpy' THEN regexp_extract(name, '\(\s*(\w+)\s*->\s*(\w+)\s*\)', ['src', 'dst']) END AS sd,
           CASE WHEN kind = 'memset' THEN regexp_extract(name, '^Memset\s*\(\s*(\w+)\s*\)', 1) END AS memset_dst
    FROM g
)
SELECT run, event_id,
       TRY_CAST(a[1] AS DOUBLE), TRY_CAST(a[2] AS DOUBLE), TRY_CAST(a[3] AS DOUBLE),
       CASE WHEN kind = 'memset' THEN 'Memset' WHEN kind = 'memcpy' THEN nullif(dir, '') END,
       CASE WHEN kind = 'memcpy' THEN nullif(sd.src, '') END,
       CASE WHEN kind = 'memcpy' THEN nullif(sd.dst, '') WHEN kind = 'memset' THEN nullif(memset_dst, '') END,
       TRY_CAST(a[4] AS BIGINT), TRY_CAST(a[5] AS DOUBLE)
FROM d
WHERE a[1] IS NOT NULL OR a[2] IS NOT NULL OR a[3] IS NOT NULL OR a[4] IS NOT NULL OR kind <> 'kernel';

DROP TABLE _gpu;
