-- name: ingest_log
-- topic: single GPU
-- description: What each ingest did, per run: the line that says how the file
--   was loaded (or that its content was already there), how it was paired, and
--   every warning it gave (values mended or dropped, a cut-off last line, a
--   compressed stream without its end), so a suspicious number can be traced
--   to its input.
-- parameters:
--   run RUN = NULL: run to report on (all runs when absent)
--   level VARCHAR = NULL: only this level (info | warning; all when absent)
-- columns:
--   run VARCHAR: run name
--   entry INTEGER: position of the line in the run's log, from 1
--   logged_at TIMESTAMP: when the ingest wrote it (local time)
--   kind VARCHAR: trace | ncu | power | calibration
--   path VARCHAR: the file given to the ingest
--   level VARCHAR: info (what was done) | warning (what was mended or dropped)
--   message VARCHAR: the line, without the file name
-- requires:
--   ingest_log: runs ingested with this version of tracedb (tracedb ingest FILE --db DB)
-- engines: duckdb
SELECT l.run, l.entry, l.logged_at, r.kind, l.path, l.level, l.message
FROM ingest_log l
LEFT JOIN runs r USING (run)
WHERE ($run IS NULL OR l.run = $run)
  AND ($level IS NULL OR l.level = $level)
ORDER BY l.run, l.entry;
