-- What an Nsight Systems export says of its kernels beyond what derive_trace.sql
-- reads from a trace's args: static and dynamic shared memory apart (nsys gives
-- both; Kineto only their sum); and names for the GPU side's processes and threads.
-- Runs after derive_trace.sql (ingest/nsys.py).
-- Parameter: $run VARCHAR.
-- reads: _run_events (trace_events.sql), kernels, threads
-- creates: nothing
UPDATE kernels SET static_shared_mem_bytes = e.ssm, dynamic_shared_mem_bytes = e.dsm
FROM (SELECT event_id, TRY_CAST(a[1] AS BIGINT) AS ssm, TRY_CAST(a[2] AS BIGINT) AS dsm
      FROM (SELECT event_id, json_extract_string(args, ['$."static shared memory"', '$."dynamic shared memory"']) AS a
            FROM _run_events WHERE cat = 'kernel' AND ph = 'X')) e
WHERE kernels.run = $run AND kernels.kernel_id = e.event_id;

-- The GPU side's names, as Kineto's trace names them: a process per device (pid =
-- device; `GPU N`, with its name where TARGET_INFO_GPU gave one) and a thread per
-- stream (tid = stream, `stream N`).
INSERT INTO threads
SELECT $run, CAST(s.device AS VARCHAR), CAST(s.stream AS VARCHAR),
       coalesce(p.process_name, 'GPU ' || s.device), 'stream ' || s.stream
FROM (SELECT DISTINCT device, stream FROM kernels
      WHERE run = $run AND device IS NOT NULL AND stream IS NOT NULL) s
LEFT JOIN (SELECT pid, any_value(process_name) AS process_name FROM threads
           WHERE run = $run AND tid IS NULL GROUP BY pid) p ON p.pid = CAST(s.device AS VARCHAR)
WHERE NOT EXISTS (SELECT 1 FROM threads t WHERE t.run = $run AND t.pid = CAST(s.device AS VARCHAR)
                                            AND t.tid = CAST(s.stream AS VARCHAR));
