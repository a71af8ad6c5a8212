-- What an Nsight Systems export says beyond what derive_trace.sql reads from a
-- trace's events: names for the GPU side's processes and threads. (Static and
-- dynamic shared memory apart, which nsys gives and Kineto only as their sum,
-- derive_trace.sql reads from the kernels' args: an UPDATE of the kernels here made
-- DuckDB write the whole run into its log at the commit, 1.3 s, and hold it in
-- memory until a checkpoint, for the 1 GB export.)
-- Runs after derive_trace.sql (ingest/nsys.py).
-- Parameter: $run VARCHAR.
-- reads: kernels, threads
-- creates: nothing
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
