-- What an Nsight Systems export says of its kernels beyond what derive_trace.sql
-- reads from a trace's args: static and dynamic shared memory apart (nsys gives
-- both; Kineto only their sum). Runs after derive_trace.sql (ingest/nsys.py).
-- Parameter: $run VARCHAR.
-- reads: _run_events (trace_events.sql), kernels
-- creates: nothing
UPDATE kernels SET static_shared_mem_bytes = e.ssm, dynamic_shared_mem_bytes = e.dsm
FROM (SELECT event_id, TRY_CAST(a[1] AS BIGINT) AS ssm, TRY_CAST(a[2] AS BIGINT) AS dsm
      FROM (SELECT event_id, json_extract_string(args, ['$."static shared memory"', '$."dynamic shared memory"']) AS a
            FROM _run_events WHERE cat = 'kernel' AND ph = 'X')) e
WHERE kernels.run = $run AND kernels.kernel_id = e.event_id;
