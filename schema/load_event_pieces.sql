-- The pieces of a trace's event array -> events table, in parallel: the
-- pieces (files) are parsed one per thread into a temp table, whose rows keep
-- the order of the pieces and of the events in each (insertion order is
-- preserved), so its rowid gives the event's position; then the insert, also in
-- parallel, compresses and writes them. (A numbering window over the scan would
-- hold it to one thread: 6.5 s for 2.7 M events on two cores, against ~4 s so.)
-- (ingest/trace.py caps DuckDB's memory meanwhile: the temp table spills to disk
-- rather than growing with the trace.)
-- The temp table stays for derive_trace.sql to read (ingest/trace.py drops it).
-- Parameters: $run VARCHAR, $base_ns BIGINT.
CREATE OR REPLACE TEMP TABLE _trace_staged AS SELECT * FROM _trace_rows;

INSERT INTO events
SELECT $run, rowid - (SELECT min(rowid) FROM _trace_staged),
       * REPLACE (ts_ns + $base_ns AS ts_ns)
FROM _trace_staged;
