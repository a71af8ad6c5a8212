-- Settings: tables whose rows tracedb ships (seed data in schema/seeds/, one
-- file per table) and users may extend or override. source is 'tracedb' on a
-- shipped row and anything else ('user' by default) on a user's row. Shipped
-- rows are rewritten only when a new tracedb ships other seed rows, and never
-- over a user's row with the same key; a user's edit of a shipped row lasts
-- until then (set its source to 'user' to keep it for good).

-- Labels of the details page (without --print-metric-name name) -> metric names.
CREATE TABLE IF NOT EXISTS ncu_metric_labels (
    label  VARCHAR PRIMARY KEY,
    metric VARCHAR NOT NULL,
    source VARCHAR NOT NULL DEFAULT 'user'  -- 'tracedb' (shipped) or 'user'
);

-- Which counter feeds each stable quantity, in order of preference; the
-- first one a report holds is used. scale converts to the stable unit
-- (SMSP cycles / instructions summed over all SMSPs). Users may add rows.
CREATE TABLE IF NOT EXISTS metric_sources (
    quantity VARCHAR NOT NULL,   -- stable name (column of ncu_kernel_metrics)
    priority INTEGER NOT NULL,   -- 1 = preferred
    metric   VARCHAR NOT NULL,   -- ncu metric name with rollup
    scale    DOUBLE NOT NULL DEFAULT 1,
    note     VARCHAR,
    source     VARCHAR NOT NULL DEFAULT 'user', -- 'tracedb' (shipped) or 'user'
    PRIMARY KEY (quantity, metric)
);

-- Rules that give a kernel its layer type, tried in priority order (lowest
-- first); the first whose regular expression matches wins, else 'other'.
-- field: 'kind' (kernels.kind), 'op' (innermost framework op that launched
-- it) or 'kernel' (kernel name; used when no op rule matched, e.g. a kernel
-- without a launching op). Users may add rows.
CREATE TABLE IF NOT EXISTS layer_rules (
    priority   INTEGER NOT NULL,
    field      VARCHAR NOT NULL,
    pattern    VARCHAR NOT NULL,     -- RE2 regular expression
    layer_type VARCHAR NOT NULL,
    source     VARCHAR NOT NULL DEFAULT 'user', -- 'tracedb' (shipped) or 'user'
    PRIMARY KEY (field, pattern)
);

-- Published per-access energies (method.md section 7: A100 at base clock),
-- shipped so energy_breakdown can be shown before a local calibration exists.
CREATE TABLE IF NOT EXISTS calibration_reference (
    gpu    VARCHAR NOT NULL,
    level  VARCHAR NOT NULL,
    eps_pj DOUBLE NOT NULL,        -- pJ per 32-byte sector
    citation VARCHAR,              -- where the value is published
    source     VARCHAR NOT NULL DEFAULT 'user', -- 'tracedb' (shipped) or 'user'
    PRIMARY KEY (gpu, level)
);

-- Dense peak FLOP/s per GPU and data type (no sparsity), for model-FLOPs
-- utilization. A device (Kineto deviceProperties name, ncu display name) takes
-- the rows of the first gpu whose pattern matches it: users' rows before
-- shipped ones, then by priority. Users may add or override rows.
CREATE TABLE IF NOT EXISTS peak_flops (
    gpu          VARCHAR NOT NULL,   -- GPU model (`H100 SXM`)
    name_pattern VARCHAR NOT NULL,   -- RE2 regular expression over the device name
    priority     INTEGER NOT NULL,   -- lower first (a PCIe pattern before the generic one)
    dtype        VARCHAR NOT NULL,   -- fp64 | fp64_tensor | fp32 | tf32 | bf16 | fp16 | fp8
    peak_tflops  DOUBLE NOT NULL,    -- dense peak, TFLOP/s (10^12 FLOP/s), FMA = 2 FLOP
    citation     VARCHAR,            -- where the value is published
    source       VARCHAR NOT NULL DEFAULT 'user', -- 'tracedb' (shipped) or 'user'
    PRIMARY KEY (gpu, dtype)
);

-- How many FLOPs an operator of a record_shapes trace performs, by formula
-- (schema/views/flops.sql): matrix ops (mm, addmm, bmm, baddbmm, scaled_mm,
-- conv, conv_bwd, sdpa, sdpa_bwd, with the shapes of `Input Dims` and the
-- arguments of `Concrete Inputs`) and per-element ops (eltwise:
-- flops_per_element x the elements of the op's largest tensor input). When
-- ops of this table nest (aten::relu_ calls aten::clamp_min_), only the
-- outermost counts. Users may add rows.
CREATE TABLE IF NOT EXISTS flop_formulas (
    op                VARCHAR PRIMARY KEY, -- framework op name as in the trace (`aten::addmm`)
    formula           VARCHAR NOT NULL,    -- mm | addmm | bmm | baddbmm | conv | conv_bwd | sdpa | sdpa_bwd | sdpa_bshd | sdpa_bwd_bshd | eltwise | none
    category          VARCHAR NOT NULL,    -- matrix (counted in model FLOPs) | other (elementwise, normalization, reduction, optimizer)
    flops_per_element DOUBLE,              -- eltwise: FLOPs per element of the largest tensor input
    note              VARCHAR,             -- why this count
    source            VARCHAR NOT NULL DEFAULT 'user' -- 'tracedb' (shipped) or 'user'
);

-- Rules that give each GPU activity its class for the distributed reports:
-- compute, communication or memory. Tried in priority order (lowest first);
-- the first whose regular expression matches wins, else 'compute'. field:
-- 'kind' (kernels.kind: kernel | memcpy | memset) or 'name' (the kernel name).
-- A kernel that carries collective metadata (a collectives row) is
-- communication whatever its name. Users may add rows.
CREATE TABLE IF NOT EXISTS kernel_class_rules (
    priority     INTEGER NOT NULL,
    field        VARCHAR NOT NULL,
    pattern      VARCHAR NOT NULL,     -- RE2 regular expression
    kernel_class VARCHAR NOT NULL,     -- compute | communication | memory
    note         VARCHAR,              -- what the rule is for
    source       VARCHAR NOT NULL DEFAULT 'user', -- 'tracedb' (shipped) or 'user'
    PRIMARY KEY (field, pattern)
);
