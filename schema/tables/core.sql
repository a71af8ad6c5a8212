-- tracedb schema: every table of the database. Column reference: docs/schema.md.
-- Times are integer nanoseconds on one timeline per run (absolute epoch ns
-- when the source says how: Kineto baseTimeNanoseconds, NVML wall clock).

CREATE TABLE IF NOT EXISTS schema_info (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR
);

-- One row per ingested source file.
CREATE TABLE IF NOT EXISTS runs (
    run               VARCHAR PRIMARY KEY,   -- run name (`--run`, default from the file name; `name~2` on a clash)
    kind              VARCHAR NOT NULL,      -- trace | ncu | power | host | calibration
    path              VARCHAR NOT NULL,      -- path as given at ingest
    content_hash      VARCHAR NOT NULL UNIQUE, -- sha256 of the decompressed content; a second ingest of it is skipped
    content_bytes     BIGINT,                -- size of the decompressed content
    framework         VARCHAR,               -- pytorch | tensorflow | jax | ncu | nvml ...
    device_name       VARCHAR,               -- Kineto `deviceProperties[0].name`, or the first XProf `/device:` process
    device_properties JSON,                  -- Kineto deviceProperties, ncu device__attribute_*
    rank              INTEGER,               -- from `distributedInfo` (or `--rank`)
    job               VARCHAR,               -- distributed job the trace is a rank of (`--job`, else the trace's directory name); a trace without a rank is its own job (its run name)
    world_size        INTEGER,               -- from `distributedInfo`
    distributed_info  JSON,                  -- `distributedInfo` as written
    base_time_ns      BIGINT,                -- Kineto `baseTimeNanoseconds` (0 when absent)
    metadata          JSON,                  -- every top-level member of the source but its events; source_format: the file's format
    paired_run        VARCHAR,               -- for ncu reports and power logs: the trace run they belong to
    n_events          BIGINT,                -- number of events
    ingested_at       TIMESTAMP DEFAULT current_timestamp -- when it was loaded
);

-- Process and thread names from metadata (ph = 'M') events.
CREATE TABLE IF NOT EXISTS threads (
    run          VARCHAR NOT NULL,
    pid          VARCHAR NOT NULL,
    tid          VARCHAR,                    -- NULL for process-level names
    process_name VARCHAR,
    thread_name  VARCHAR
);

-- Every event of a trace, in file order.
CREATE TABLE IF NOT EXISTS events (
    run          VARCHAR NOT NULL,
    event_id     BIGINT NOT NULL,            -- 0-based position in the trace's event array
    ph           VARCHAR,                    -- Chrome trace phase: X, B, E, i, M, s, f, C ...
    cat          VARCHAR,                    -- category as written (cpu_op, cuda_runtime, kernel, Operator, Kernel, ...)
    name         VARCHAR,
    pid          VARCHAR,                    -- as written; strings kept (`"Spans"`, `"stream 7"`)
    tid          VARCHAR,                    -- as written; strings kept (`"Spans"`, `"stream 7"`)
    ts_ns        BIGINT,                     -- start, ns (NULL when the trace has none or it is not a number)
    dur_ns       BIGINT,                     -- duration, ns (NULL for instant events)
    correlation  BIGINT,                     -- `args.correlation` (or `correlation_id`)
    external_id  BIGINT,                     -- `args."External id"`
    stream       BIGINT,                     -- `args.stream`, or N of a `"stream N"` tid
    device       BIGINT,                     -- `args.device`
    flow_id      VARCHAR,                    -- `id` of flow events (s/f)
    args         JSON USING COMPRESSION zstd -- all args as written (zstd: docs/benchmarks.md says why)
);

-- GPU activity (kernels, memcpy, memset) of traces and of ncu reports.
CREATE TABLE IF NOT EXISTS kernels (
    run                  VARCHAR NOT NULL,
    kernel_id            BIGINT NOT NULL,    -- trace: the event_id; ncu: the report's ID
    kind                 VARCHAR NOT NULL,   -- kernel | memcpy | memset
    name                 VARCHAR,            -- as the tool printed it
    ts_ns                BIGINT,             -- start, ns (NULL for ncu: replay makes its timing unusable for placement)
    dur_ns               BIGINT,             -- duration, ns (ncu: gpu__time_duration.sum)
    device               BIGINT,
    context              BIGINT,
    stream               BIGINT,
    correlation          BIGINT,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
    block_x INTEGER, block_y INTEGER, block_z INTEGER,
    registers_per_thread INTEGER,
    shared_mem_bytes     BIGINT,             -- shared memory, bytes (static + dynamic for ncu)
    static_shared_mem_bytes  BIGINT,         -- where the tool splits them (ncu)
    dynamic_shared_mem_bytes BIGINT,         -- where the tool splits them (ncu)
    launch_event_id      BIGINT,             -- runtime/driver call that launched it
    launch_name          VARCHAR,
    launch_ts_ns         BIGINT,
    launch_end_ns        BIGINT,
    launch_pid           VARCHAR,
    launch_tid           VARCHAR,
    op_event_id          BIGINT,             -- innermost framework op enclosing the launch
    op_name              VARCHAR,
    iteration            INTEGER,            -- iteration whose step marker holds the launch start (the latest-starting one where markers nest)
    seq                  BIGINT              -- launch order within the run (0-based)
);

-- Iterations (training steps).
CREATE TABLE IF NOT EXISTS iterations (
    run            VARCHAR NOT NULL,
    iteration      INTEGER NOT NULL,         -- N of `ProfilerStep#N` (PyTorch, CPU side) or `args.step_num` (TensorFlow)
    name           VARCHAR,                  -- marker name
    marker_event_id BIGINT,                  -- the step marker event
    start_ns       BIGINT NOT NULL,          -- start of the step marker
    marker_end_ns  BIGINT NOT NULL,          -- end of the step marker
    end_ns         BIGINT NOT NULL,          -- later of the marker end and the end of the last GPU activity launched inside it
    dur_ns         BIGINT NOT NULL           -- end_ns − start_ns
);

-- The ops report's rows of every iteration of a trace run, stored by an ingest with
-- --op-totals (schema/load/iteration_aggregates.sql): its per-call walk over the whole
-- run summed per iteration, level and name. A run without rows here (ingested without
-- --op-totals, made by an older tracedb, or without CPU events) is walked by the report
-- itself.
CREATE TABLE IF NOT EXISTS op_iteration_totals (
    run          VARCHAR NOT NULL,
    iteration    INTEGER,                    -- iteration whose step marker holds the call's start (NULL: none)
    level        VARCHAR,                    -- op | user | runtime | python
    name         VARCHAR,
    calls        BIGINT,
    cpu_total_ns BIGINT,                     -- summed call duration, ns
    cpu_self_ns  BIGINT,                     -- summed duration less the direct children's, ns
    gpu_total_ns BIGINT,                     -- GPU activity launched inside the calls, ns
    gpu_self_ns  BIGINT,                     -- GPU activity launched by their own runtime calls, ns
    kernels      BIGINT                      -- GPU activities launched inside the calls
);

-- The FLOP reports' analytic rows of every iteration of a trace run, stored at ingest
-- with --op-totals (schema/load/flop_aggregates.sql): the counted ops of flop_ops over
-- the whole run, summed per iteration, op name, pass, category and dtype, under the
-- flop_formulas of that time (formulas: flop_formulas_digest()). A run swept with no
-- op of a formula has one row with op_name NULL and ops 0. The reports read a run's
-- rows while flop_formulas is as it was; other runs they sweep themselves.
CREATE TABLE IF NOT EXISTS op_flop_totals (
    run       VARCHAR NOT NULL,
    iteration INTEGER,                       -- flop_ops.iteration (NULL: none)
    op_name   VARCHAR,                       -- flop_ops.name
    pass      VARCHAR,                       -- forward | backward | optimizer
    category  VARCHAR,                       -- matrix | other
    dtype     VARCHAR,                       -- flop_ops.dtype
    ops       BIGINT NOT NULL,               -- counted ops
    counted   BIGINT NOT NULL,               -- of them, those with FLOPs (shapes recorded)
    flops     BIGINT,                        -- their FLOPs summed (NULL: none counted)
    formulas  VARCHAR NOT NULL               -- flop_formulas_digest() when stored
);

-- The finding rules' per-iteration sums of every iteration of a trace run, stored at
-- ingest with --op-totals (schema/load/finding_aggregates.sql): what each rule that
-- sweeps the kernels or events (schema/views/findings.sql) sums per iteration, one row
-- per iteration. The rules read a run's rows for iteration=all; other runs, and one
-- iteration, they sweep themselves. A rule's columns are NULL where its sweep gives
-- the iteration no row.
CREATE TABLE IF NOT EXISTS finding_iteration_totals (
    run                VARCHAR NOT NULL,
    iteration          INTEGER NOT NULL,
    kernel_busy_ns     BIGINT,               -- iteration_gpu_time.kernel_busy_ns
    idle_ns            BIGINT,               -- iteration_gpu_time.idle_ns
    gpu_util_pct       DOUBLE,               -- iteration_gpu_time.gpu_util_pct
    graph_of_kernels   BIGINT,               -- iteration_graphs.kernels (NULL: no row there)
    graph_kernels      BIGINT,               -- iteration_graphs.graph_kernels
    graph_kernel_pct   DOUBLE,               -- iteration_graphs.graph_kernel_pct
    graph_launches     BIGINT,               -- iteration_graphs.graph_launches
    graph_launch_call_ns BIGINT,             -- iteration_graphs.launch_call_ns
    graph_between_replays_ns BIGINT,         -- iteration_graphs.between_replays_ns
    graph_eager_kernels BIGINT,              -- iteration_graphs.eager_kernels
    host_starved_ns    BIGINT,               -- host_bound: GPU idle with nothing queued, ns
    tiny_kernels       BIGINT,               -- tiny_kernels: kernels with their launch calls
    tiny_short         BIGINT,               -- tiny_kernels: of them, shorter than their launch call
    tiny_short_ns      BIGINT,               -- tiny_kernels: their time, ns
    tiny_all_ns        BIGINT,               -- tiny_kernels: time of all of them, ns
    tiny_launch_p50_ns DOUBLE,               -- tiny_kernels: median launch call, ns
    tiny_short_p50_ns  DOUBLE,               -- tiny_kernels: median of the short ones, ns
    tiny_waited_ns     BIGINT,               -- tiny_kernels: their streams' waits for the launches, ns
    tiny_lost_ns       BIGINT,               -- tiny_kernels: GPU idle in those waits, ns
    fusion_launches    BIGINT,               -- fusion_candidates: kernel launches
    fusion_all_ns      BIGINT,               -- fusion_candidates: their time, ns
    fusion_a           VARCHAR,              -- fusion_candidates: the sequence repeated most, first kernel
    fusion_b           VARCHAR,              -- fusion_candidates: its second kernel
    fusion_c           VARCHAR,              -- fusion_candidates: its third kernel
    fusion_runs        BIGINT,               -- fusion_candidates: the sequence's runs
    fusion_ns          BIGINT,               -- fusion_candidates: its kernels' time, ns
    fusion_span_ns     BIGINT,               -- fusion_candidates: its runs' spans, ns
    loader_calls       BIGINT,               -- data_loader_wait: DataLoader calls in the iteration
    loader_ns          BIGINT,               -- data_loader_wait: their time in the iteration, ns
    loader_idle_ns     BIGINT,               -- data_loader_wait: GPU idle in them, ns
    sync_calls         BIGINT,               -- sync_in_step: synchronizing calls in the step marker
    sync_ns            BIGINT,               -- sync_in_step: their time, ns
    sync_lost_ns       BIGINT,               -- sync_in_step: GPU idle they caused, ns
    sync_names         VARCHAR,              -- sync_in_step: the calls by name, with counts
    layout_all_ns      BIGINT,               -- layout_conversions: kernel time, ns
    layout_conv_ns     BIGINT,               -- layout_conversions: conversion kernels' time, ns
    layout_best_rank   BIGINT,               -- layout_conversions: the largest one's rank by time
    layout_launches    BIGINT                -- layout_conversions: conversion kernels
);

-- The GPU time of every iteration of a trace run and of its whole trace, stored by an
-- ingest with --op-totals (schema/load/kernel_aggregates.sql): iteration_gpu_time,
-- flop_utilization, system_metrics and time_breakdown read these rows instead of
-- sweeping the run's kernels (and CPU kernels) again. One row per iteration and one
-- with iteration NULL, the whole trace, whose presence marks the run as stored
-- (kernel_stored_runs); other runs the views and reports sweep themselves.
CREATE TABLE IF NOT EXISTS kernel_iteration_totals (
    run               VARCHAR NOT NULL,
    iteration         INTEGER,                -- iterations.iteration (NULL: the whole trace)
    kernel_busy_ns    BIGINT,                 -- iteration_gpu_time.kernel_busy_ns; whole trace: kernel_busy_intervals summed
    kernel_sum_ns     BIGINT,                 -- iteration_gpu_time.kernel_sum_ns
    gpu_event_sum_ns  BIGINT,                 -- iteration_gpu_time.gpu_event_sum_ns
    gpu_event_busy_ns BIGINT,                 -- iteration_gpu_time.gpu_event_busy_ns
    kernels           BIGINT,                 -- iteration_gpu_time.kernels
    window_busy_ns    BIGINT,                 -- kernel_busy_intervals of the iteration inside its window (iteration_windows); whole trace: of every iteration inside the whole window (NULL: none)
    cpu_kernel_ns     BIGINT,                 -- activity_segments in the iteration: CPU kernel and no GPU kernel running (time_breakdown)
    gpu_kernel_ns     BIGINT,                 -- GPU kernel and no CPU kernel
    overlap_ns        BIGINT,                 -- both
    overhead_ns       BIGINT                  -- neither (NULL in all four: no segment)
);

-- The part of each memcpy and memset of a trace run's iterations during which a kernel
-- of its iteration runs (its overlap with kernel_busy_intervals), stored by an ingest with
-- --op-totals (schema/load/kernel_aggregates.sql) for the runs of kernel_stored_runs:
-- transfers reads it instead of sweeping the run's kernels. A copy that overlaps no
-- busy interval has no row.
CREATE TABLE IF NOT EXISTS copy_kernel_overlap (
    run        VARCHAR NOT NULL,
    kernel_id  BIGINT NOT NULL,               -- the copy (kernels.kernel_id, kind memcpy or memset)
    overlap_ns BIGINT                          -- time with a kernel of its iteration running, ns
);

-- top_kernels' rows with iteration=all of a trace run, every kernel name (no limit),
-- stored by an ingest with --op-totals (ingest/trace.py runs the report over the run once)
-- under a digest of layer_rules: top_kernels reads them while the rules are as they were
-- and no kernel of the run is matched to counters (kernel_levels); other runs
-- it sweeps. A run without a row keeps one with name NULL.
CREATE TABLE IF NOT EXISTS top_kernel_totals (
    run            VARCHAR NOT NULL,
    iteration      INTEGER,                   -- NULL: the whole trace
    name           VARCHAR,                   -- NULL: the run's marker row (no row to report)
    launches       BIGINT,
    total_ns       BIGINT,
    mean_ns        DOUBLE,
    time_share_pct DOUBLE,
    op_name        VARCHAR,
    layer_type     VARCHAR,
    rules          VARCHAR NOT NULL           -- layer_rules_digest() when stored
);

-- idle_breakdown's rows with iteration=all and by=cause of a trace run (each iteration,
-- stream and cause, and the whole trace with iteration NULL), stored by an ingest with
-- --op-totals (ingest/trace.py runs the report over the run once) for the default
-- short_gap_ns: the report reads them when asked for that one. A run without a row keeps
-- one with cause NULL.
CREATE TABLE IF NOT EXISTS idle_totals (
    run          VARCHAR NOT NULL,
    iteration    INTEGER,                     -- NULL: the whole trace
    stream       BIGINT,
    cause        VARCHAR,                     -- NULL: the run's marker row (no row to report)
    gaps         BIGINT,
    idle_ns      BIGINT,
    share_pct    DOUBLE,
    short_gap_ns BIGINT NOT NULL              -- the short_gap_ns they were counted with
);

-- gpu_class_time's rows of a trace run (every iteration, and the whole trace with
-- iteration NULL), stored by an ingest with --op-totals (schema/load/kernel_aggregates.sql)
-- under a digest of kernel_class_rules: gpu_class_time reads them while the rules are as
-- they were (gpu_class_stored_runs) and sweeps the other runs. A run whose kernels give
-- no row keeps one with busy_ns NULL.
CREATE TABLE IF NOT EXISTS gpu_class_totals (
    run                      VARCHAR NOT NULL,
    iteration                INTEGER,         -- gpu_class_time.iteration (NULL: the whole trace)
    window_ns                BIGINT,
    busy_ns                  BIGINT,          -- NULL: the run's marker row (no GPU activity)
    compute_only_ns          BIGINT,
    communication_only_ns    BIGINT,
    memory_only_ns           BIGINT,
    compute_communication_ns BIGINT,
    compute_memory_ns        BIGINT,
    communication_memory_ns  BIGINT,
    all_three_ns             BIGINT,
    compute_ns               BIGINT,
    communication_ns         BIGINT,
    rules                    VARCHAR NOT NULL  -- kernel_class_rules_digest() when stored
);

-- launch_queue's summary rows with iteration=all of a trace run (each iteration and
-- stream, and the whole trace with iteration NULL), stored by an ingest with --op-totals
-- (ingest/trace.py runs the report over the run once). A run without a summary row
-- keeps one with max_queued NULL.
CREATE TABLE IF NOT EXISTS launch_queue_totals (
    run                VARCHAR NOT NULL,
    iteration          INTEGER,               -- NULL: the whole trace
    stream             BIGINT,
    mean_queued        DOUBLE,
    p95_queued         BIGINT,
    max_queued         BIGINT,                -- NULL: the run's marker row (no row to report)
    empty_pct          DOUBLE,
    empty_gpu_idle_pct DOUBLE
);

-- critical_path_summary's sums with iteration=all of a trace run (each iteration,
-- category and layer type of its critical path), stored by an ingest with --path-totals
-- (analysis/path_totals.py walks every iteration's path once, after the run's commit)
-- under digests of what the walk reads besides the run's own rows: the report reads
-- them while all three are as they were, no job is asked for and no power log applies
-- (energy_j needs each segment's time); else it walks. A run whose path gives no row
-- keeps one with iteration NULL.
CREATE TABLE IF NOT EXISTS path_iteration_totals (
    run        VARCHAR NOT NULL,
    iteration  INTEGER,                       -- NULL: the run's marker row (no row to report)
    category   VARCHAR,                       -- critical_path_summary.category
    layer_type VARCHAR,                       -- kernels: layer type; else NULL
    segments   BIGINT,                        -- segments of the path in the row
    dur_ns     BIGINT,                        -- time on the path, ns
    step_ns    BIGINT,                        -- the iteration's duration, ns
    rules      VARCHAR NOT NULL,              -- layer_rules_digest() when stored
    ranks      VARCHAR NOT NULL,              -- digest of the run's job as stored (its runs, ranks and contents: the collectives' last arrivals)
    code       VARCHAR NOT NULL               -- digest of the walk's code (analysis/critpath.py, path_totals.py) that stored them
);

-- Hardware counters (ncu): one row per kernel and metric, in base units.
CREATE TABLE IF NOT EXISTS counters (
    run       VARCHAR NOT NULL,              -- the ncu run
    kernel_id BIGINT NOT NULL,               -- the report's ID (kernels.kernel_id of the ncu run)
    metric    VARCHAR NOT NULL,              -- ncu metric name with rollup, as in the report (`dram__sectors_read.sum`)
    value     DOUBLE,                        -- in base units: ns, cycle, byte, sector, inst, hz (K/M/G/T and Ki/Mi/Gi prefixes and ms/us removed); NULL when not a number
    text_value VARCHAR,                      -- the value as printed when it is not a number (`n/a`, `PolicySpread`, stray text)
    unit      VARCHAR                        -- base unit (`byte/block`, `cycle`, `%`, ...)
);

-- Power samples (NVML, nvidia-smi, DCGM).
CREATE TABLE IF NOT EXISTS power (
    run              VARCHAR NOT NULL,
    gpu              INTEGER NOT NULL,
    ts_ns            BIGINT NOT NULL,        -- absolute epoch ns
    power_w          DOUBLE,                 -- nvmlDeviceGetPowerUsage / nvidia-smi power.draw: a 1 s average on Ampere (but A100) and newer
    energy_j         DOUBLE,                 -- cumulative energy counter
    instant_power_w  DOUBLE,                 -- NVML_FI_DEV_POWER_INSTANT / nvidia-smi power.draw.instant: the power the energy is integrated from when present (METHOD.md section 6)
    sm_clock_mhz     DOUBLE,
    mem_clock_mhz    DOUBLE,
    temp_c           DOUBLE,
    phase            VARCHAR,                -- tracedb power-log: idle_before | run | idle_after
    average_power_w  DOUBLE                  -- nvidia-smi power.draw.average (1 s average); integrated only when neither instant_power_w nor power_w is there
);

-- Sampled GPU metrics of an Nsight Systems run (nsys --gpu-metrics-devices: the
-- export's GPU_METRICS, named by TARGET_INFO_GPU_METRICS), one row per sample of
-- one metric on one GPU, as nsys wrote it (ingest/nsys.py, docs/nsys.md).
CREATE TABLE IF NOT EXISTS gpu_metric_samples (
    run        VARCHAR NOT NULL,
    device     INTEGER,                      -- the GPU: nsys's typeId & 0xFF, assumed (NVIDIA's docs, third-party readers; not verified on a real export) to be the kernels' device (kernels.device)
    ts_ns      BIGINT NOT NULL,              -- absolute epoch ns (the run's base time + nsys's timestamp): the end of the interval the value covers
    metric     VARCHAR NOT NULL,             -- nsys's metric name as written (`SMs Active [Throughput %]`, `DRAM Read Bandwidth [Throughput %]`)
    value      DOUBLE,                       -- the sample, in unit
    unit       VARCHAR                       -- the bracketed unit of the name: `%` for [Throughput %], else as written (`Hz`, `MHz`)
);

-- How a power run's clock maps onto a trace run's timeline:
-- trace time = power ts_ns + offset_ns.
CREATE TABLE IF NOT EXISTS power_alignment (
    power_run  VARCHAR NOT NULL,
    trace_run  VARCHAR NOT NULL,
    offset_ns  BIGINT NOT NULL,
    method     VARCHAR NOT NULL,             -- absolute | offset | window-start
    note       VARCHAR,
    PRIMARY KEY (power_run, trace_run)
);

-- Calibration points of the data-movement energy model (cuda_bench).
CREATE TABLE IF NOT EXISTS calibration (
    run               VARCHAR NOT NULL,
    gpu               VARCHAR NOT NULL,
    level             VARCHAR NOT NULL,      -- shared | l1 | l2 | dram
    threads_per_block INTEGER,
    blocks            INTEGER,
    accesses          DOUBLE,                -- 32-byte sectors of the measurement loop
    energy_j          DOUBLE,                -- (warm-up + measurement) - warm-up
    dur_ns            BIGINT,
    sm_clock_mhz      DOUBLE,
    mem_clock_mhz     DOUBLE,
    temp_c            DOUBLE,
    valid             BOOLEAN,
    reference         BOOLEAN DEFAULT false, -- published values, not measured here
    array_bytes       BIGINT,                -- size of the pointer-chasing array
    hit_rate_pct      DOUBLE,                -- ncu hit rate of the target level (safety check)
    note              VARCHAR,               -- why a point is not valid
    counted           DOUBLE,                -- what the level's ncu counter counts for this point (shared: wavefronts; else sectors), from the counter check of check_shape scaled to the point
    check_shape       VARCHAR,               -- launch shape (threads_per_block x blocks) of the ncu counter check behind valid, hit_rate_pct and counted
    sweep_pass        INTEGER                -- pass of the sweep over all access counts (0, 1, 2 ...): the repeats
);

-- Pairs of trace kernels and ncu kernels (one-to-one), with the score and its parts.
CREATE TABLE IF NOT EXISTS matches (
    trace_run        VARCHAR NOT NULL,
    ncu_run          VARCHAR NOT NULL,
    trace_kernel_id  BIGINT NOT NULL,
    ncu_kernel_id    BIGINT NOT NULL,
    score            DOUBLE NOT NULL,        -- weighted sum of the parts, 0..1
    name_score       DOUBLE,                 -- 1 = same normalized name, else 0.5 x Jaro-Winkler
    launch_score     DOUBLE,                 -- share of grid, block, registers, shared memory equal
    order_score      DOUBLE,                 -- 1 / (1 + distance from the expected stream position)
    duration_score   DOUBLE,                 -- shorter / longer duration
    order_distance   INTEGER,                -- launches between expected and actual stream position
    round            INTEGER                 -- assignment round that chose the pair
);

-- One row per matched (trace run, ncu run): what was matched and how well.
CREATE TABLE IF NOT EXISTS match_runs (
    trace_run      VARCHAR NOT NULL,
    ncu_run        VARCHAR NOT NULL,
    iteration      INTEGER,                  -- trace iteration matched (NULL: the whole run)
    trace_kernels  BIGINT,
    ncu_kernels    BIGINT,
    matched        BIGINT,
    candidates     BIGINT,
    seconds        DOUBLE,
    matched_at     TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (trace_run, ncu_run)
);

-- The ingest log: what each ingest of a run did and every warning it gave
-- (`tracedb query ingest_log`), so a suspicious number can be traced to its input.
CREATE TABLE IF NOT EXISTS ingest_log (
    run        VARCHAR NOT NULL,             -- the run loaded (or found already loaded)
    entry      INTEGER NOT NULL,             -- position of the line in the run's log, from 1
    logged_at  TIMESTAMP DEFAULT current_timestamp, -- when the ingest wrote it (local time)
    path       VARCHAR,                      -- the file given to the ingest
    level      VARCHAR NOT NULL,             -- info (what was done) | warning (what was mended or dropped)
    message    VARCHAR NOT NULL              -- the line, without the file name
);

-- One row per collective call per rank: each communication kernel of a trace,
-- with the metadata PyTorch's record_param_comms gives it (Kineto copies it onto
-- the kernel's args) and the call's sequence number within its process group.
-- Derived at ingest (schema/load/collectives.sql).
CREATE TABLE IF NOT EXISTS collectives (
    run             VARCHAR NOT NULL,        -- the trace run (one rank)
    kernel_id       BIGINT NOT NULL,         -- the communication kernel (kernels.kernel_id)
    op_event_id     BIGINT,                  -- the record_param_comms CPU op that launched it (NULL when none)
    iteration       INTEGER,                 -- iteration of the launch (kernels.iteration)
    process_group   VARCHAR NOT NULL,        -- `Process Group Name` ('0' is the default group); 'unknown' when the kernel carries none (one caught running from before the trace)
    pg_desc         VARCHAR,                 -- `Process Group Description` (default_pg, a new_group's group_desc ...)
    pg_ranks        VARCHAR,                 -- `Process Group Ranks` as written ("[0, 1]")
    group_size      INTEGER,                 -- `Group size`, else the run's world size
    collective      VARCHAR NOT NULL,        -- `Collective name` (allreduce, _allgather_base ...), else the collective of the kernel name, lower case
    seq             BIGINT,                  -- sequence number of the call within (run, process_group), what joins it across ranks: `Seq` of its record_param_comms op, else the order of those ops (0-based); NULL for a kernel the profiler caught running from before the trace (no launch, no op)
    seq_source      VARCHAR NOT NULL,        -- 'Seq' (the op's arg), 'op order' (order of the ops), 'kernel order' (a trace without record_param_comms links: kernel start order) or 'unlinked' (seq NULL)
    dtype           VARCHAR,                 -- `dtype` (Float, BFloat16 ...)
    in_nelems       BIGINT,                  -- `In msg nelems`
    out_nelems      BIGINT,                  -- `Out msg nelems`
    msg_bytes       BIGINT,                  -- the size nccl-tests calls S, bytes: out_nelems (all-gather) or in_nelems (others) x element size
    ts_ns           BIGINT,                  -- kernel start, ns
    dur_ns          BIGINT,                  -- kernel duration, ns
    stream          BIGINT,                  -- CUDA stream of the kernel
    busbw_factor    DOUBLE                   -- busbw / algbw (nccl-tests): 2(n-1)/n all-reduce, (n-1)/n all-gather, reduce-scatter, all-to-all, 1 broadcast, reduce, send/recv
);

-- GPU memory of a trace: Kineto `[memory]` instant events (profile_memory=True),
-- one row per allocation or free of the framework's allocator.
CREATE TABLE IF NOT EXISTS memory_events (
    run             VARCHAR NOT NULL,            -- trace run
    event_id        BIGINT NOT NULL,             -- the `[memory]` event (events.event_id)
    ts_ns           BIGINT NOT NULL,             -- when, on the run's timeline, ns
    device_type     VARCHAR NOT NULL,            -- cuda | cpu | other (`args."Device Type"`: 1 = CUDA, 0 = CPU)
    device          INTEGER,                     -- `args."Device Id"` (-1 for the CPU)
    bytes           BIGINT,                      -- `args.Bytes`: allocated (> 0) or freed (< 0) by this event, bytes
    addr            BIGINT,                      -- `args.Addr`: address of the block
    allocated_bytes BIGINT,                      -- `args."Total Allocated"` after the event: bytes in live tensors on the device
    reserved_bytes  BIGINT                       -- `args."Total Reserved"` after the event: bytes the caching allocator holds from the device
);

-- Launch and copy details of a trace's GPU activity, from the activity's own args
-- (Kineto writes them from CUPTI): occupancy for kernels, direction and memory
-- kind for copies. One row per kernels row of a trace that has any.
CREATE TABLE IF NOT EXISTS activity_args (
    run                VARCHAR NOT NULL,         -- trace run
    kernel_id          BIGINT NOT NULL,          -- kernels.kernel_id
    blocks_per_sm      DOUBLE,                   -- `args."blocks per SM"`: grid blocks / SMs
    warps_per_sm       DOUBLE,                   -- `args."warps per SM"`: grid warps / SMs
    est_occupancy_pct  DOUBLE,                   -- `args."est. achieved occupancy %"`: CUPTI's occupancy estimate from the launch, %
    copy_direction     VARCHAR,                  -- memcpy: HtoD | DtoH | DtoD | HtoH | PtoP (from the name `Memcpy HtoD (Pageable -> Device)`); memset: Memset
    src_memory         VARCHAR,                  -- memcpy source memory kind as the trace names it: Pageable | Pinned | Device | Managed ...
    dst_memory         VARCHAR,                  -- memcpy/memset destination memory kind
    copy_bytes         BIGINT,                   -- `args.bytes`: bytes copied or set
    trace_bandwidth_gb_per_s DOUBLE              -- `args."memory bandwidth (GB/s)"` as the trace computed it, GB/s
);

-- System samples of the GPUs beside their power samples: tracedb's NVML sampler
-- (`tracedb capture`, `tracedb power-log`) and nvidia-smi logs with utilization
-- or memory columns. Same run, gpu and ts_ns as the `power` row they came with.
CREATE TABLE IF NOT EXISTS gpu_samples (
    run                  VARCHAR NOT NULL,       -- power run
    gpu                  INTEGER NOT NULL,       -- NVML index
    ts_ns                BIGINT NOT NULL,        -- absolute epoch ns
    gpu_util_pct         DOUBLE,                 -- NVML/nvidia-smi utilization.gpu: share of the last sample period (1/6 s to 1 s) with a kernel running, %
    mem_util_pct         DOUBLE,                 -- NVML/nvidia-smi utilization.memory: share of that period the memory controller was busy, %
    mem_used_bytes       BIGINT,                 -- device memory used by all processes (CUDA contexts included), bytes
    mem_total_bytes      BIGINT,                 -- device memory, bytes
    throttle_reasons     BIGINT,                 -- NVML clocks event (throttle) reasons bitmask (nvmlClocksEventReason*; 0 or 1 = none/idle)
    pcie_tx_bytes_per_s  DOUBLE,                 -- PCIe transmit throughput (NVML, a 20 ms window), bytes/s
    pcie_rx_bytes_per_s  DOUBLE                  -- PCIe receive throughput, bytes/s
);

-- Host samples taken beside a trace (`tracedb capture`): CPU utilization per core
-- and of the whole machine, and the profiled process's resident memory.
CREATE TABLE IF NOT EXISTS host_samples (
    run           VARCHAR NOT NULL,              -- host run
    ts_ns         BIGINT NOT NULL,               -- absolute epoch ns
    cpu           INTEGER,                       -- core index; NULL: all cores together
    cpu_util_pct  DOUBLE,                        -- share of the period since the last sample the core(s) were not idle (/proc/stat), %
    rss_bytes     BIGINT                         -- resident set of the profiled process (on the all-cores row), bytes
);
