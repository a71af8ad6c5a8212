-- Collectives of one trace run: one row per communication kernel, with the
-- record_param_comms metadata (Kineto copies it onto the kernel's args; the
-- CPU op that launched the kernel has it too, and the call's `Seq`).
-- Parameters: $run VARCHAR, $world_size INTEGER (distributedInfo; NULL when absent).
-- reads: _run_events (trace_events.sql), _gpu (derive_trace.sql), kernels and kernel_class_rules
-- creates: _comm (dropped at its end)

-- Communication kernels: a collective name in the args, or a communication
-- rule of kernel_class_rules that matches the name.
CREATE OR REPLACE TEMP TABLE _comm AS
WITH rule_named AS (
    SELECT DISTINCT k.name FROM (SELECT DISTINCT name FROM kernels WHERE run = $run AND kind = 'kernel') k
    JOIN kernel_class_rules r ON r.field = 'name' AND r.kernel_class = 'communication' AND regexp_matches(k.name, r.pattern)
), k AS (
    -- the args of kernel events parsed once in _gpu (derive_trace.sql); those of
    -- kernels made from CUPTI ranges (cupti_ranges.sql: not in _gpu) here
    SELECT k.kernel_id, k.iteration, k.ts_ns, k.dur_ns, k.stream, k.name, k.op_event_id, g.ka
    FROM (SELECT event_id, ca AS ka FROM _gpu
          WHERE ca[1] IS NOT NULL OR name IN (SELECT name FROM rule_named)) g
    JOIN kernels k ON k.kernel_id = g.event_id
    WHERE k.run = $run AND k.kind = 'kernel' AND k.ts_ns IS NOT NULL
    UNION ALL
    SELECT k.kernel_id, k.iteration, k.ts_ns, k.dur_ns, k.stream, k.name, k.op_event_id,
           json_extract_string(e.args, ['$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                        '$."Process Group Ranks"', '$."Group size"', '$.dtype',
                                        '$."In msg nelems"', '$."Out msg nelems"'])
    FROM (SELECT * FROM kernels WHERE run = $run AND kind = 'kernel' AND ts_ns IS NOT NULL
            AND kernel_id NOT IN (SELECT event_id FROM _gpu)) k
    JOIN _run_events e ON e.event_id = k.kernel_id
    WHERE k.name IN (SELECT name FROM rule_named) OR json_exists(e.args, '$."Collective name"')
)
SELECT k.*, o.event_id AS rpc_event_id, o.ts_ns AS rpc_ts_ns,
       json_extract_string(o.args, ['$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                    '$."Process Group Ranks"', '$."Group size"', '$.dtype',
                                    '$."In msg nelems"', '$."Out msg nelems"', '$.Seq']) AS oa
FROM k LEFT JOIN _run_events o ON o.event_id = k.op_event_id AND o.name = 'record_param_comms';

INSERT INTO collectives
WITH m AS (
    SELECT kernel_id, rpc_event_id, rpc_ts_ns, iteration, ts_ns, dur_ns, stream,
           coalesce(ka[2], oa[2], 'unknown') AS process_group,
           coalesce(ka[3], oa[3]) AS pg_desc,
           coalesce(ka[4], oa[4]) AS pg_ranks,
           coalesce(TRY_CAST(coalesce(ka[5], oa[5]) AS INTEGER), CAST($world_size AS INTEGER)) AS group_size,
           lower(coalesce(ka[1], oa[1],
                          nullif(regexp_extract(name, '(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|SendRecv|Reduce|Send|Recv)', 1), ''),
                          nullif(regexp_extract(name, '^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast)', 1), ''),
                          'unknown')) AS collective,
           coalesce(ka[6], oa[6]) AS dtype,
           TRY_CAST(coalesce(ka[7], oa[7]) AS BIGINT) AS in_nelems,
           TRY_CAST(coalesce(ka[8], oa[8]) AS BIGINT) AS out_nelems,
           TRY_CAST(oa[9] AS BIGINT) AS op_seq
    FROM _comm
), g AS (
    -- Sequence numbers: the op's Seq when every call of the group launched from an op
    -- has one and no two share it; else the order of those ops (the order the rank
    -- issued the calls in). A kernel launched before the trace began (no launch call,
    -- no op: the profiler caught it running) gets none and joins no other rank's call.
    -- A trace without any record_param_comms link numbers its kernels by start.
    SELECT *, rpc_event_id IS NOT NULL AS linked,
           count(rpc_event_id) OVER () > 0 AS run_linked,
           count(rpc_event_id) OVER (PARTITION BY process_group) > 0
               AND count(op_seq) OVER (PARTITION BY process_group) = count(rpc_event_id) OVER (PARTITION BY process_group)
               AND count(DISTINCT op_seq) OVER (PARTITION BY process_group) = count(rpc_event_id) OVER (PARTITION BY process_group) AS by_seq,
           row_number() OVER (PARTITION BY process_group, rpc_event_id IS NOT NULL
                              ORDER BY coalesce(rpc_ts_ns, ts_ns), kernel_id) - 1 AS ord
    FROM m
)
SELECT $run, kernel_id, rpc_event_id, iteration, process_group, pg_desc, pg_ranks, group_size, collective,
       CASE WHEN linked AND by_seq THEN op_seq WHEN linked OR NOT run_linked THEN ord END,
       CASE WHEN linked AND by_seq THEN 'Seq' WHEN linked THEN 'op order' WHEN NOT run_linked THEN 'kernel order'
            ELSE 'unlinked' END,
       dtype, in_nelems, out_nelems,
       CASE WHEN collective_type(collective) = 'allgather' THEN out_nelems ELSE in_nelems END * dtype_bytes(dtype),
       ts_ns, dur_ns, stream,
       busbw_factor(collective_type(collective), group_size)
FROM g
ORDER BY process_group, ts_ns;

DROP TABLE _comm;
