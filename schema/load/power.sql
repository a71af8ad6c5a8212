-- Load one power log from _power_src (typed by ingest/power.py) into `power`,
-- in time order per GPU, and its system columns into `gpu_samples`.
-- reads: _power_src (ingest/power.py, which drops it)
-- creates: nothing temporary
INSERT INTO power (run, gpu, ts_ns, power_w, energy_j, instant_power_w, sm_clock_mhz,
                   mem_clock_mhz, temp_c, phase, average_power_w)
SELECT $run, gpu, ts_ns, power_w, energy_j, instant_power_w, sm_clock_mhz, mem_clock_mhz, temp_c, phase,
       average_power_w
FROM _power_src
ORDER BY gpu, ts_ns;

-- The system columns of the same samples (sampler and nvidia-smi logs that have any).
INSERT INTO gpu_samples (run, gpu, ts_ns, gpu_util_pct, mem_util_pct, mem_used_bytes, mem_total_bytes,
                         throttle_reasons, pcie_tx_bytes_per_s, pcie_rx_bytes_per_s)
SELECT $run, gpu, ts_ns, gpu_util_pct, mem_util_pct, mem_used_bytes, mem_total_bytes,
       throttle_reasons, pcie_tx_bytes_per_s, pcie_rx_bytes_per_s
FROM _power_src
WHERE coalesce(gpu_util_pct, mem_util_pct, mem_used_bytes, mem_total_bytes, throttle_reasons,
               pcie_tx_bytes_per_s, pcie_rx_bytes_per_s) IS NOT NULL
ORDER BY gpu, ts_ns;
