-- Kernel matching, step 1 of 3: the two kernel sequences, anchors, candidates.
-- Parameters: $trace_run, $ncu_run, $iteration (NULL: the steady iteration),
-- $whole_run (true: every iteration), $window (launches either side of the
-- expected position that are considered).
--
-- Positions are launch order within a stream (trace: by start time; ncu: by
-- ID, its launch order). The expected ncu position of a trace kernel is its
-- own position plus a local shift: the median shift of nearby anchors (pairs
-- with the same normalized name, grid and block, and the same occurrence number
-- of these in their stream), which absorbs launches present in one run only.
-- reads: kernels, iterations, runs of the two runs
-- creates: _m_iter, _m_t, _m_n0, _m_n, _m_streams, _m_anchor, _m_te, _m_cand, _m_scored, _m_pairs (finish.sql drops them)

CREATE OR REPLACE TEMP TABLE _m_iter AS
SELECT CASE WHEN $whole_run THEN NULL
            ELSE coalesce($iteration, (SELECT min(iteration) FROM iteration_steadiness
                                       WHERE run = $trace_run AND steady)) END AS iteration;

CREATE OR REPLACE TEMP TABLE _m_t AS
SELECT kernel_id, name, normalize_kernel_name(name) AS norm, stream,
       grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread AS regs,
       shared_mem_bytes AS smem, dur_ns,
       row_number() OVER (PARTITION BY stream ORDER BY ts_ns, kernel_id) - 1 AS pos
FROM kernels
WHERE run = $trace_run AND kind = 'kernel'
  AND ((SELECT iteration FROM _m_iter) IS NULL OR iteration = (SELECT iteration FROM _m_iter));

CREATE OR REPLACE TEMP TABLE _m_n0 AS
SELECT kernel_id, name, normalize_kernel_name(name) AS norm, stream,
       grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread AS regs,
       shared_mem_bytes AS smem, dur_ns
FROM kernels
WHERE run = $ncu_run AND kind = 'kernel';

-- ncu streams are mapped to trace streams by id when the id exists in the
-- trace, else by rank of kernel count (another process may number them apart).
CREATE OR REPLACE TEMP TABLE _m_streams AS
WITH ts AS (SELECT stream, row_number() OVER (ORDER BY count(*) DESC, stream) AS r
            FROM _m_t GROUP BY stream),
     ns AS (SELECT stream, row_number() OVER (ORDER BY count(*) DESC, stream) AS r
            FROM _m_n0 GROUP BY stream)
SELECT ns.stream AS ncu_stream,
       CASE WHEN ns.stream IN (SELECT stream FROM ts) THEN ns.stream
            ELSE (SELECT ts.stream FROM ts WHERE ts.r = ns.r) END AS stream
FROM ns;

CREATE OR REPLACE TEMP TABLE _m_n AS
SELECT n.* REPLACE (s.stream AS stream),
       row_number() OVER (PARTITION BY s.stream ORDER BY n.kernel_id) - 1 AS pos
FROM _m_n0 n JOIN _m_streams s ON s.ncu_stream = n.stream;

CREATE OR REPLACE TEMP TABLE _m_anchor AS
WITH t AS (SELECT stream, pos, row_number() OVER (PARTITION BY stream, norm, grid_x, grid_y, grid_z, block_x, block_y, block_z
                                                 ORDER BY pos) AS occ,
                  norm, grid_x, grid_y, grid_z, block_x, block_y, block_z FROM _m_t),
     n AS (SELECT stream, pos, row_number() OVER (PARTITION BY stream, norm, grid_x, grid_y, grid_z, block_x, block_y, block_z
                                                 ORDER BY pos) AS occ,
                  norm, grid_x, grid_y, grid_z, block_x, block_y, block_z FROM _m_n)
SELECT t.stream, t.pos,
       median(n.pos - t.pos) OVER (PARTITION BY t.stream ORDER BY t.pos
                                   ROWS BETWEEN 10 PRECEDING AND 10 FOLLOWING) AS shift
FROM t JOIN n USING (stream, norm, grid_x, grid_y, grid_z, block_x, block_y, block_z, occ);

-- Each trace kernel with its expected ncu position (nearest anchor at or before it).
CREATE OR REPLACE TEMP TABLE _m_te AS
SELECT t.*, CAST(t.pos + coalesce(a.shift, 0) AS BIGINT) AS expected
FROM _m_t t ASOF LEFT JOIN _m_anchor a ON a.stream = t.stream AND t.pos >= a.pos;

-- Candidates: same stream, ncu position within $window of the expected one.
-- An equi-join on position buckets keeps this linear in the number of kernels.
CREATE OR REPLACE TEMP TABLE _m_cand AS
WITH tb AS (SELECT *, floor(expected / $window)::BIGINT + unnest([-1, 0, 1]) AS bucket FROM _m_te),
     nb AS (SELECT *, floor(pos / $window)::BIGINT AS bucket FROM _m_n),
     pairs AS (
        SELECT t.kernel_id AS tk, n.kernel_id AS nk, n.pos - t.expected AS d,
               t.norm = n.norm AS same_name,
               CASE WHEN t.norm = n.norm THEN 1.0
                    ELSE 0.5 * jaro_winkler_similarity(t.norm, n.norm) END AS name_score,
               ((t.grid_x, t.grid_y, t.grid_z) = (n.grid_x, n.grid_y, n.grid_z))::INT AS grid_eq,
               ((t.block_x, t.block_y, t.block_z) = (n.block_x, n.block_y, n.block_z))::INT AS block_eq,
               (t.regs = n.regs)::INT AS regs_eq,
               (t.smem = n.smem)::INT AS smem_eq,
               CASE WHEN t.dur_ns > 0 AND n.dur_ns > 0
                    THEN least(t.dur_ns, n.dur_ns) / greatest(t.dur_ns, n.dur_ns) END AS duration_score
        FROM tb t JOIN nb n ON n.stream = t.stream AND n.bucket = t.bucket
        WHERE abs(n.pos - t.expected) <= $window
     )
SELECT tk, nk, d, same_name, name_score, duration_score,
       (coalesce(grid_eq, 0) + coalesce(block_eq, 0) + coalesce(regs_eq, 0) + coalesce(smem_eq, 0))
         / (2 + (regs_eq IS NOT NULL)::INT + (smem_eq IS NOT NULL)::INT) AS launch_score,
       1.0 / (1 + abs(d)) AS order_score,
       grid_eq = 1 AND block_eq = 1 AS same_launch
FROM pairs;

-- The score: name 0.45, launch configuration 0.25, order 0.25, duration 0.05.
-- A pair must share the name or the launch configuration, or sit exactly
-- where it is expected.
CREATE OR REPLACE TEMP TABLE _m_scored AS
SELECT *, 0.45 * name_score + 0.25 * launch_score + 0.25 * order_score
          + 0.05 * coalesce(duration_score, 0.5) AS score
FROM _m_cand
WHERE same_name OR launch_score >= 0.5 OR d = 0;

CREATE OR REPLACE TEMP TABLE _m_pairs (tk BIGINT, nk BIGINT, round INTEGER);
