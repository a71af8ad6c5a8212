-- The one place a trace's events are numbered and moved onto the run's
-- timeline. Reads the temp table _trace_staged (the rows of _trace_rows in file
-- order, however they were read: DuckDB's JSON reader over the pieces of the
-- event array, one thread per piece, or the Arrow batches of the exact path; its
-- rowid is the event's position because insertion order is preserved) and the
-- variables tracedb_run and tracedb_base_ns (Kineto baseTimeNanoseconds or 0).
-- Creates the temp view _run_events (the run's events as the events table holds
-- them), which derive_trace.sql reads: scanning the uncompressed staging table
-- instead of the zstd columns of events saves ~0.3 s on 2.7 M events.
-- ingest/trace.py drops _run_events and _trace_staged after the derivation.
-- reads: _trace_staged (ingest/trace.py); variables tracedb_run, tracedb_base_ns
-- creates: _run_events (view; ingest/trace.py drops it with _trace_staged after derive_trace.sql)
SET VARIABLE tracedb_first_rowid = (SELECT coalesce(min(rowid), 0) FROM _trace_staged);

CREATE OR REPLACE TEMP VIEW _run_events AS
SELECT CAST(getvariable('tracedb_run') AS VARCHAR) AS run,
       rowid - CAST(getvariable('tracedb_first_rowid') AS BIGINT) AS event_id,
       * EXCLUDE (problem) REPLACE (ts_ns + CAST(getvariable('tracedb_base_ns') AS BIGINT) AS ts_ns)
FROM _trace_staged;

-- The insert runs in parallel and compresses as it writes.
INSERT INTO events SELECT * FROM _run_events;
