-- The GPU rows of an Nsight Systems run (_gpu), in place of derive_trace.sql's own
-- statement for them (ingest/nsys.py runs derive_trace.sql with this one instead of
-- its CREATE ... _gpu): the same table, row for row, but the kernels' launch fields
-- are taken from the export's own columns (_nsys_gpu_fields, kept as each kernel
-- was loaded: nsys_rows.sql's section kernel_fields) and not parsed back out of the
-- args JSON that nsys_rows.sql built from those columns (the args of 2.2 M kernels
-- decompressed and searched for 26 paths: 0.85 s of the 1 GB export's derivation on
-- 16 cores). The values are those the JSON gives: the kernel section writes context,
-- grid, block, registers, shared memory (their sum, and each apart) and no occupancy,
-- copy or collective field, and an integer of the JSON cast back is that integer.
-- Other GPU rows (copies, sets, and any kernel the table lacks) are read as
-- derive_trace.sql reads them: its rows (_gpu_rows) and their fields from the args
-- (_gpu_fields), the same view and macro.
-- The names are held as an ENUM of the run's GPU activity names (_nsys_gpu_name; an
-- export has a few dozen, each a kernel's whole signature, 186 characters on average
-- in the 1 GB export): as text, _gpu held 832 MB for its 2.2 M rows under the load's
-- 1 GiB cap (406 MB so), and the kernels' insert sorted the names with the rows; it
-- writes them as text (the cast comes after its ORDER BY), collectives.sql compares
-- and trace_system.sql searches them as text (DuckDB casts an ENUM to VARCHAR there).
-- reads: _run_events, _xprof_streams, _gpu_rows, _gpu_fields (derive_trace.sql's), _nsys_gpu_fields
-- creates: _gpu, _nsys_gpu_unfielded (_gpu: derive_trace.sql's; the view _nsys_gpu_unfielded, dropped here;
--          the type _nsys_gpu_name, which ingest/nsys.py drops after trace_system.sql)
-- (The names of both branches of _gpu_rows, each found as its branch finds its rows: one
-- scan with an OR of them joined every event, 1.45 CPU s for the 1 GB export's 13 M, against 0.03.)
CREATE OR REPLACE TEMP TYPE _nsys_gpu_name AS ENUM (
    SELECT name FROM _run_events WHERE ph = 'X' AND name IS NOT NULL AND gpu_activity_kind(cat) IS NOT NULL
    UNION
    SELECT e.name FROM _run_events e JOIN _xprof_streams x ON x.pid = e.pid AND x.tid = e.tid
    WHERE e.ph = 'X' AND e.name IS NOT NULL);

CREATE OR REPLACE TEMP VIEW _nsys_gpu_unfielded AS
SELECT * FROM _gpu_rows WHERE event_id NOT IN (SELECT event_id FROM _nsys_gpu_fields);

CREATE OR REPLACE TEMP TABLE _gpu AS
SELECT g.event_id, g.cat, g.kind, CAST(g.name AS _nsys_gpu_name) AS name, g.ts_ns, g.dur_ns,
       g.device, g.stream, g.correlation,
       f.context,
       TRY_CAST(f.grid_x AS INTEGER) AS grid_x, TRY_CAST(f.grid_y AS INTEGER) AS grid_y,
       TRY_CAST(f.grid_z AS INTEGER) AS grid_z, TRY_CAST(f.block_x AS INTEGER) AS block_x,
       TRY_CAST(f.block_y AS INTEGER) AS block_y, TRY_CAST(f.block_z AS INTEGER) AS block_z,
       TRY_CAST(f.regs AS INTEGER) AS registers_per_thread,
       coalesce(f.ssm, 0) + coalesce(f.dsm, 0) AS shared_mem_bytes,
       f.ssm AS static_shared_mem_bytes, f.dsm AS dynamic_shared_mem_bytes,
       CAST(NULL AS VARCHAR[]) AS oa, CAST(NULL AS VARCHAR[]) AS ca
FROM _gpu_rows g JOIN _nsys_gpu_fields f ON f.event_id = g.event_id
UNION ALL
SELECT * REPLACE (CAST(name AS _nsys_gpu_name) AS name) FROM _gpu_fields('_nsys_gpu_unfielded');

DROP VIEW _nsys_gpu_unfielded;
