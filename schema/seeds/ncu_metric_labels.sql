-- Shipped rows of ncu_metric_labels (label, metric); see schema/tables/settings.sql.
SELECT * FROM (VALUES
    ('Duration', 'gpu__time_duration.sum'),
    ('Elapsed Cycles', 'gpc__cycles_elapsed.max'),
    ('SM Active Cycles', 'sm__cycles_active.avg'),
    ('SM Frequency', 'gpc__cycles_elapsed.avg.per_second'),
    ('DRAM Frequency', 'dram__cycles_elapsed.avg.per_second'),
    ('Memory Throughput', 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'),
    ('Compute (SM) Throughput', 'sm__throughput.avg.pct_of_peak_sustained_elapsed'),
    ('Registers Per Thread', 'launch__registers_per_thread'),
    ('Block Size', 'launch__block_size'),
    ('Grid Size', 'launch__grid_size'),
    ('Threads', 'launch__thread_count'),
    ('Waves Per SM', 'launch__waves_per_multiprocessor'),
    ('Static Shared Memory Per Block', 'launch__shared_mem_per_block_static'),
    ('Dynamic Shared Memory Per Block', 'launch__shared_mem_per_block_dynamic'),
    ('Driver Shared Memory Per Block', 'launch__shared_mem_per_block_driver'),
    ('Achieved Occupancy', 'sm__warps_active.avg.pct_of_peak_sustained_active')
) AS t(label, metric);
