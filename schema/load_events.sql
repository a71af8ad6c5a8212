-- Trace events -> events table, numbered as they stream in file order (the
-- numbering window keeps the scan on one thread: for one piece of the event
-- array, and for the Arrow batches of the exact path).
-- Parameters: $run VARCHAR, $base_ns BIGINT (Kineto baseTimeNanoseconds or 0),
-- $first_event_id BIGINT (events already loaded from earlier batches).
INSERT INTO events
SELECT $run, $first_event_id + row_number() OVER () - 1, * REPLACE (ts_ns + $base_ns AS ts_ns)
FROM _trace_rows;
