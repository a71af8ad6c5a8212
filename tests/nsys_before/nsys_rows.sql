-- The rows of an Nsight Systems SQLite export as the events table holds them
-- (ingest/nsys.py): one section per kind of source table, each a SELECT over a
-- batch of that table's rows (an Arrow table under the name _nsys_raw, the
-- columns that ingest/nsys.py found by what they hold, under fixed names, NULL
-- where the export has none), giving the columns of _trace_rows
-- (load/trace_rows.sql) in the shape a Kineto trace gives them, so that
-- load/trace_events.sql numbers and inserts them and load/derive_trace.sql
-- derives kernels, launches, ops and iterations from them as from a trace:
--   kernels -> cat 'kernel', memcpy -> 'gpu_memcpy', memset -> 'gpu_memset'
--   (pid = device, tid = stream, as Kineto writes GPU activity); CUDA runtime
--   and driver calls -> 'cuda_runtime' / 'cuda_driver' (the _vNNNN version
--   suffix of nsys's names removed: cudaLaunchKernel_v7000 -> cudaLaunchKernel);
--   NVTX ranges -> 'user_annotation', or 'cpu_op' for the ranges of PyTorch's
--   emit_nvtx ("aten::mm, seq = 5, op_id = 12, sizes = [[2, 3], [3, 4]]": the
--   op name, the text before ", seq = ", ", op_id = " or ", sizes = [", with its
--   sizes as `Input Dims`, as record_shapes gives a trace's ops); NVTX marks -> instant events.
-- Correlation ids are per process in nsys: each gets its process's index
-- (_nsys_procs) times 2^32 added, so that one report's processes do not mix;
-- the index of the first CUDA process is 0 (a one-process report keeps nsys's ids).
-- Times are ns since the session start; trace_events.sql adds the run's base
-- (TARGET_INFO_SESSION_START_TIME.utcEpochNs).
-- Each row keeps pos, its position in the batch (trace_events.sql numbers the events by it).
-- reads: _nsys_raw (an Arrow batch), temp tables _nsys_strings (StringIds),
--        _nsys_procs (pid -> index), _nsys_nvtx_domains, _nsys_nvtx_categories
-- creates: nothing (each section is one SELECT)

-- @section kernel
SELECT 'X' AS ph, 'kernel' AS cat,
       coalesce(s.value, ss.value, '<unnamed kernel>') AS name,
       CAST(r.device AS VARCHAR) AS pid, CAST(r.stream AS VARCHAR) AS tid,
       r.start_ns AS ts_ns, CASE WHEN r.end_ns >= r.start_ns THEN r.end_ns - r.start_ns END AS dur_ns,
       r.corr + (coalesce(p.pidx, 0) << 32) AS correlation, CAST(NULL AS BIGINT) AS external_id,
       r.stream, r.device, CAST(NULL AS VARCHAR) AS flow_id,
       CAST(json_object('device', r.device, 'stream', r.stream, 'context', r.context,
                        'correlation', r.corr + (coalesce(p.pidx, 0) << 32),
                        'grid', [r.gx, r.gy, r.gz], 'block', [r.bx, r.by, r.bz],
                        'registers per thread', r.regs,
                        'shared memory', coalesce(r.ssm, 0) + coalesce(r.dsm, 0),
                        'static shared memory', r.ssm, 'dynamic shared memory', r.dsm,
                        'nsys correlationId', r.corr, 'nsys pid', (r.gpid >> 24) & 16777215,
                        'short name', ss.value, 'graph id', r.graph_id, 'graph node id', r.graph_node_id,
                        'launch type', r.launch_type) AS JSON) AS args, r.pos
FROM _nsys_raw r
LEFT JOIN _nsys_strings s ON s.id = r.name_id
LEFT JOIN _nsys_strings ss ON ss.id = r.short_id
LEFT JOIN _nsys_procs p ON p.pid = (r.gpid >> 24) & 16777215

-- @section runtime
SELECT 'X' AS ph,
       CASE WHEN r.event_class = 1 OR (starts_with(n, 'cu') AND NOT starts_with(n, 'cuda')) THEN 'cuda_driver'
            ELSE 'cuda_runtime' END AS cat,
       regexp_replace(n, '_v\d+$', '') AS name,
       CAST((r.gtid >> 24) & 16777215 AS VARCHAR) AS pid, CAST(r.gtid & 16777215 AS VARCHAR) AS tid,
       r.start_ns AS ts_ns, CASE WHEN r.end_ns >= r.start_ns THEN r.end_ns - r.start_ns END AS dur_ns,
       r.corr + (coalesce(p.pidx, 0) << 32) AS correlation, CAST(NULL AS BIGINT) AS external_id,
       CAST(NULL AS BIGINT) AS stream, CAST(NULL AS BIGINT) AS device, CAST(NULL AS VARCHAR) AS flow_id,
       CAST(json_object('correlation', r.corr + (coalesce(p.pidx, 0) << 32), 'nsys correlationId', r.corr,
                        'nsys name', n, 'return value', r.ret) AS JSON) AS args, r.pos
FROM (SELECT *, coalesce((SELECT value FROM _nsys_strings WHERE id = name_id), '<unnamed call>') AS n
      FROM _nsys_raw) r
LEFT JOIN _nsys_procs p ON p.pid = (r.gtid >> 24) & 16777215

-- @section memcpy
SELECT 'X' AS ph, 'gpu_memcpy' AS cat,
       'Memcpy ' || coalesce(d.dir, 'Unknown') || ' (' || coalesce(mk_src.value, 'Unknown') || ' -> '
           || coalesce(mk_dst.value, 'Unknown') || ')' AS name,
       CAST(r.device AS VARCHAR) AS pid, CAST(r.stream AS VARCHAR) AS tid,
       r.start_ns AS ts_ns, CASE WHEN r.end_ns >= r.start_ns THEN r.end_ns - r.start_ns END AS dur_ns,
       r.corr + (coalesce(p.pidx, 0) << 32) AS correlation, CAST(NULL AS BIGINT) AS external_id,
       r.stream, r.device, CAST(NULL AS VARCHAR) AS flow_id,
       CAST(json_object('device', r.device, 'stream', r.stream, 'context', r.context,
                        'correlation', r.corr + (coalesce(p.pidx, 0) << 32), 'bytes', r.bytes,
                        'memory bandwidth (GB/s)',
                        CASE WHEN r.end_ns > r.start_ns THEN r.bytes / (r.end_ns - r.start_ns) END,
                        'nsys correlationId', r.corr, 'nsys pid', (r.gpid >> 24) & 16777215,
                        'copy kind', r.copy_kind, 'src device', r.src_device, 'dst device', r.dst_device,
                        'graph node id', r.graph_node_id) AS JSON) AS args, r.pos
FROM _nsys_raw r
LEFT JOIN (VALUES (1, 'HtoD'), (2, 'DtoH'), (3, 'HtoA'), (4, 'AtoH'), (5, 'AtoA'), (6, 'AtoD'), (7, 'DtoA'),
                  (8, 'DtoD'), (9, 'HtoH'), (10, 'PtoP'), (11, 'HtoD'), (12, 'DtoH'), (13, 'DtoD')) d(kind, dir)
    ON d.kind = r.copy_kind
LEFT JOIN _nsys_mem_kinds mk_src ON mk_src.id = r.src_kind
LEFT JOIN _nsys_mem_kinds mk_dst ON mk_dst.id = r.dst_kind
LEFT JOIN _nsys_procs p ON p.pid = (r.gpid >> 24) & 16777215

-- @section memset
SELECT 'X' AS ph, 'gpu_memset' AS cat,
       'Memset (' || coalesce(mk.value, 'Unknown') || ')' AS name,
       CAST(r.device AS VARCHAR) AS pid, CAST(r.stream AS VARCHAR) AS tid,
       r.start_ns AS ts_ns, CASE WHEN r.end_ns >= r.start_ns THEN r.end_ns - r.start_ns END AS dur_ns,
       r.corr + (coalesce(p.pidx, 0) << 32) AS correlation, CAST(NULL AS BIGINT) AS external_id,
       r.stream, r.device, CAST(NULL AS VARCHAR) AS flow_id,
       CAST(json_object('device', r.device, 'stream', r.stream, 'context', r.context,
                        'correlation', r.corr + (coalesce(p.pidx, 0) << 32), 'bytes', r.bytes,
                        'memory bandwidth (GB/s)',
                        CASE WHEN r.end_ns > r.start_ns THEN r.bytes / (r.end_ns - r.start_ns) END,
                        'nsys correlationId', r.corr, 'nsys pid', (r.gpid >> 24) & 16777215,
                        'value', r.value, 'graph node id', r.graph_node_id) AS JSON) AS args, r.pos
FROM _nsys_raw r
LEFT JOIN _nsys_mem_kinds mk ON mk.id = r.mem_kind
LEFT JOIN _nsys_procs p ON p.pid = (r.gpid >> 24) & 16777215

-- @section nvtx
-- (push/pop 59 and start/end 60 ranges, marks 34: ingest/nsys.py reads no other; the text is inline or in StringIds)
SELECT CASE WHEN r.event_type = 34 THEN 'i' ELSE 'X' END AS ph,
       CASE WHEN op_name IS NOT NULL THEN 'cpu_op' ELSE 'user_annotation' END AS cat,
       coalesce(op_name, t) AS name,
       CAST((r.gtid >> 24) & 16777215 AS VARCHAR) AS pid, CAST(r.gtid & 16777215 AS VARCHAR) AS tid,
       r.start_ns AS ts_ns,
       CASE WHEN r.event_type <> 34 AND r.end_ns >= r.start_ns THEN r.end_ns - r.start_ns END AS dur_ns,
       CAST(NULL AS BIGINT) AS correlation, CAST(NULL AS BIGINT) AS external_id,
       CAST(NULL AS BIGINT) AS stream, CAST(NULL AS BIGINT) AS device, CAST(NULL AS VARCHAR) AS flow_id,
       CAST(json_object('nvtx text', t, 'domain', dm.name, 'domain id', r.domain_id,
                        'category', coalesce(cg.name, CAST(r.category AS VARCHAR)),
                        'color', r.color,
                        'kind', CASE r.event_type WHEN 59 THEN 'push/pop' WHEN 60 THEN 'start/end' WHEN 34 THEN 'mark' END,
                        'payload', coalesce(r.payload, (SELECT value FROM _nsys_strings WHERE id = r.json_text_id)),
                        'end thread', CASE WHEN r.end_gtid IS DISTINCT FROM r.gtid THEN r.end_gtid & 16777215 END,
                        'Sequence number', CASE WHEN p IS NOT NULL
                            THEN TRY_CAST(regexp_extract(t, ', seq = (-?\d+)', 1) AS BIGINT) END,
                        'Input Dims', CASE WHEN p IS NOT NULL
                            THEN TRY_CAST(regexp_extract(t, ', sizes = (\[(\[[0-9, ]*\](, )?)*\])', 1) AS JSON) END)
            AS JSON) AS args, r.pos
FROM (SELECT *, CASE WHEN p IS NULL THEN NULL
                         WHEN p > 1 AND regexp_matches(substr(t, p), '^, (seq = -?\d|op_id = \d|sizes = \[)')
                             THEN left(t, p - 1)
                         ELSE regexp_extract(t, '^(.+?), (seq = -?\d+|op_id = \d+|sizes = \[)', 1) END AS op_raw,
             nullif(op_raw, '') AS op_name
      -- (p: where the first ', seq = ', ', op_id = ' or ', sizes = [' begins; the text before it is the
      -- op's name when the regex above matches there, as it does for every emit_nvtx range, which spares
      -- the regex's slower search for the capture)
      FROM (SELECT *, least(nullif(strpos(t, ', seq = '), 0), nullif(strpos(t, ', op_id = '), 0),
                            nullif(strpos(t, ', sizes = ['), 0)) AS p
            FROM (SELECT *, coalesce(text, (SELECT value FROM _nsys_strings WHERE id = text_id), '') AS t
                  FROM _nsys_raw))) r
LEFT JOIN _nsys_nvtx_domains dm ON dm.id = r.domain_id
LEFT JOIN _nsys_nvtx_categories cg ON cg.domain_id = r.domain_id AND cg.id = r.category
