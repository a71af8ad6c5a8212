-- The one place a trace's events are numbered and moved onto the run's
-- timeline. Reads _trace_staged: a batch of the rows of _trace_rows in file order,
-- however they were read (DuckDB's JSON reader over pieces of the event array, one
-- thread per piece, or Arrow batches of the exact path), as an Arrow table that
-- ingest/trace.py hands this script under that name (db.run_script_over), with
-- pos, each row's position in the batch; and the variables tracedb_run,
-- tracedb_base_ns (Kineto baseTimeNanoseconds or 0) and tracedb_event_offset (events
-- of the run already loaded from earlier batches). Run once per batch: a trace is
-- staged in batches of bounded size, so memory does not grow with the trace.
-- reads: _trace_staged (ingest/trace.py); variables tracedb_run, tracedb_base_ns, tracedb_event_offset
-- creates: nothing
-- The insert runs in parallel and compresses as it writes.
INSERT INTO events
SELECT CAST(getvariable('tracedb_run') AS VARCHAR) AS run,
       pos + CAST(getvariable('tracedb_event_offset') AS BIGINT) AS event_id,
       * EXCLUDE (problem, needs_exact, pos) REPLACE (ts_ns + CAST(getvariable('tracedb_base_ns') AS BIGINT) AS ts_ns)
FROM _trace_staged;
