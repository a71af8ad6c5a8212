-- Load one host sample log from _host_src (typed by ingest/host.py, which drops
-- it) into `host_samples`, in time order.
-- reads: _host_src
-- creates: nothing temporary
INSERT INTO host_samples (run, ts_ns, cpu, cpu_util_pct, rss_bytes)
SELECT $run, ts_ns, cpu, cpu_util_pct, rss_bytes
FROM _host_src
ORDER BY ts_ns, cpu NULLS FIRST;
