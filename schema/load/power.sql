-- Load one power log from _power_src (typed by ingest/power.py) into `power`,
-- in time order per GPU.
-- reads: _power_src (ingest/power.py, which drops it)
-- creates: nothing temporary
INSERT INTO power (run, gpu, ts_ns, power_w, energy_j, instant_power_w, sm_clock_mhz,
                   mem_clock_mhz, temp_c, phase, average_power_w)
SELECT $run, gpu, ts_ns, power_w, energy_j, instant_power_w, sm_clock_mhz, mem_clock_mhz, temp_c, phase,
       average_power_w
FROM _power_src
ORDER BY gpu, ts_ns;
