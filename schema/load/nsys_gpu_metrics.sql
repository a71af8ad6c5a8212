-- The sampled GPU metrics of an Nsight Systems export (nsys --gpu-metrics-devices)
-- into gpu_metric_samples (ingest/nsys_metrics.py): a batch of the export's sample
-- table (GPU_METRICS: typeId, timestamp, metricId, value), its columns found by what
-- they hold and given here under fixed names, each sample named by the metric
-- descriptions (TARGET_INFO_GPU_METRICS, kept in _nsys_metric_names).
-- The GPU is the low byte of the sample's typeId (a GPU's metrics are one event
-- type of nsys's per GPU; NVIDIA's own readers take `typeId & 0xFF` as the GPU id),
-- which is the deviceId the export's kernels carry.
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
       coalesce(n.metric_name, 'metric ' || r.metric_id) AS metric,
       r.value,
       n.unit
FROM _nsys_metric_raw r
LEFT JOIN _nsys_metric_names n
       ON n.metric_id = r.metric_id AND (n.type_id IS NULL OR n.type_id = r.type_id)
WHERE r.ts IS NOT NULL
  AND (getvariable('tracedb_metric_devices') IS NULL
       OR list_contains(getvariable('tracedb_metric_devices'), CAST(r.type_id & 255 AS INTEGER)));
