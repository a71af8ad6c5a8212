-- The sampled GPU metrics of an Nsight Systems export (nsys --gpu-metrics-devices)
-- into gpu_metric_samples (ingest/nsys_metrics.py): a batch of the export's sample
-- table (GPU_METRICS: typeId, timestamp, metricId, value), its columns found by what
-- they hold and given here under fixed names, each sample named by the metric
-- descriptions (TARGET_INFO_GPU_METRICS, kept in _nsys_metric_names): the name of
-- the sample's own typeId and metricId, else one given with no typeId.
-- The GPU is the low byte of the sample's typeId, taken to be the deviceId the
-- export's kernels carry. ASSUMED, not verified on a real export: NVIDIA's docs
-- describe a GPU's metrics as one event type per GPU, and NVIDIA's and third-party
-- readers take `typeId & 0xFF` as the GPU id; whether that id is the CUDA device
-- of the kernels (not TARGET_INFO_GPU's id, nor a physical index under
-- CUDA_VISIBLE_DEVICES) is unchecked. The ingest notes samples whose GPUs no
-- kernel of the run ran on (nsys.py).
-- Times are ns since the session start: the run's base (tracedb_base_ns) is added,
-- as trace_events.sql adds it to the events.
-- A run of one process of several (--rank N, tracedb_metric_devices set): the samples
-- of that process's GPUs only (the devices its kernels ran on).
-- The unit is the bracketed end of the name (nsys_metrics.unit): `[Throughput %]` -> `%`, `[MHz]` -> `MHz`.
-- reads: _nsys_metric_raw (an Arrow batch: type_id, ts, metric_id, value), _nsys_metric_names
--        (type_id, metric_id, metric_name, unit: ingest/nsys_metrics.py's, the unit from the name)
-- creates: nothing (inserts into gpu_metric_samples)
INSERT INTO gpu_metric_samples
SELECT getvariable('tracedb_run') AS run,
       CAST(r.type_id & 255 AS INTEGER) AS device,
       r.ts + getvariable('tracedb_base_ns') AS ts_ns,
       coalesce(n.metric_name, a.metric_name, 'metric ' || r.metric_id) AS metric,
       r.value,
       CASE WHEN n.metric_name IS NOT NULL THEN n.unit ELSE a.unit END AS unit
FROM _nsys_metric_raw r
LEFT JOIN _nsys_metric_names n
       ON n.metric_id = r.metric_id AND n.type_id = r.type_id
LEFT JOIN _nsys_metric_names a
       ON a.metric_id = r.metric_id AND a.type_id IS NULL
WHERE r.ts IS NOT NULL
  AND (getvariable('tracedb_metric_devices') IS NULL
       OR list_contains(getvariable('tracedb_metric_devices'), CAST(r.type_id & 255 AS INTEGER)));
