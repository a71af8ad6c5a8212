-- Load one ncu report from the readers' temp relations (_ncu_identity;
-- _ncu_values: all values as text, units as ncu printed them) into counters
-- and kernels. Values go to base units here. device__attribute_* describe the
-- GPU, not the kernel: they go to runs.device_properties (from
-- _ncu_device_values), not to counters.
-- reads: _ncu_identity, _ncu_values, _ncu_device_values (ingest/ncu_csv.py or ncu_rep.py, which drop them)
-- creates: nothing temporary

INSERT INTO counters (run, kernel_id, metric, value, text_value, unit)
SELECT $run, kernel_id, metric,
       ncu_number(value_text) * ncu_unit_factor(unit),
       CASE WHEN ncu_number(value_text) IS NULL THEN value_text END,
       CASE WHEN ncu_number(value_text) IS NOT NULL THEN ncu_base_unit(unit) ELSE nullif(unit, '') END
FROM _ncu_values
WHERE metric NOT LIKE 'device__attribute_%' AND value_text IS NOT NULL;

INSERT INTO kernels (run, kernel_id, kind, name, dur_ns, device, context, stream,
                     grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread,
                     shared_mem_bytes, static_shared_mem_bytes, dynamic_shared_mem_bytes, seq)
WITH m AS (
    SELECT kernel_id,
        max(value) FILTER (metric = 'gpu__time_duration.sum') AS dur,
        max(value) FILTER (metric = 'launch__registers_per_thread') AS regs,
        max(value) FILTER (metric = 'launch__shared_mem_per_block_static') AS smem_static,
        max(value) FILTER (metric = 'launch__shared_mem_per_block_dynamic') AS smem_dynamic,
        max(value) FILTER (metric = 'launch__grid_dim_x') AS gx,
        max(value) FILTER (metric = 'launch__grid_dim_y') AS gy,
        max(value) FILTER (metric = 'launch__grid_dim_z') AS gz,
        max(value) FILTER (metric = 'launch__block_dim_x') AS bx,
        max(value) FILTER (metric = 'launch__block_dim_y') AS by_,
        max(value) FILTER (metric = 'launch__block_dim_z') AS bz,
        max(value) FILTER (metric = 'launch__stream_id') AS stream,
        max(value) FILTER (metric = 'launch__context_id') AS context,
        max(value) FILTER (metric = 'launch__device_id') AS device
    FROM counters
    WHERE run = $run
      AND metric IN ('gpu__time_duration.sum', 'launch__registers_per_thread',
                     'launch__shared_mem_per_block_static', 'launch__shared_mem_per_block_dynamic',
                     'launch__grid_dim_x', 'launch__grid_dim_y', 'launch__grid_dim_z',
                     'launch__block_dim_x', 'launch__block_dim_y', 'launch__block_dim_z',
                     'launch__stream_id', 'launch__context_id', 'launch__device_id')
    GROUP BY kernel_id
)
SELECT $run, i.kernel_id, 'kernel', i.name,
       CAST(round(m.dur) AS BIGINT),
       coalesce(TRY_CAST(i.device AS BIGINT), CAST(m.device AS BIGINT)),
       coalesce(TRY_CAST(i.context AS BIGINT), CAST(m.context AS BIGINT)),
       coalesce(TRY_CAST(i.stream AS BIGINT), CAST(m.stream AS BIGINT)),
       coalesce(ncu_dim(i.grid_size, 1), CAST(m.gx AS INTEGER)),
       coalesce(ncu_dim(i.grid_size, 2), CAST(m.gy AS INTEGER)),
       coalesce(ncu_dim(i.grid_size, 3), CAST(m.gz AS INTEGER)),
       coalesce(ncu_dim(i.block_size, 1), CAST(m.bx AS INTEGER)),
       coalesce(ncu_dim(i.block_size, 2), CAST(m.by_ AS INTEGER)),
       coalesce(ncu_dim(i.block_size, 3), CAST(m.bz AS INTEGER)),
       CAST(m.regs AS INTEGER),
       CAST(round(m.smem_static + m.smem_dynamic) AS BIGINT),
       CAST(round(m.smem_static) AS BIGINT),
       CAST(round(m.smem_dynamic) AS BIGINT),
       row_number() OVER (ORDER BY i.kernel_id) - 1
FROM _ncu_identity i
LEFT JOIN m USING (kernel_id);
