-- rule: pageable_memcpy
-- description: Host-device copies from or to pageable (not pinned) host memory:
--   the driver stages them through a pinned buffer and the copy cannot overlap
--   with the host (nsys's cuda_memcpy_async rule). Value: their time as a share
--   of the iteration.
--   Graded by that share: high from 10%, medium from 0.5%, low below.
-- threshold: 0
-- unit: % of the iteration
-- fires: above
-- severity: medium
-- next: top_kernels
-- steady: run
-- requires:
--   kernels: GPU activity (kernels, memcpy, memset)
-- suggestion: Pin the host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with
--   .to(device, non_blocking=True).
WITH it AS (
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every, stored := $stored)
), m AS (
    SELECT k.run, k.iteration, count(*) AS n, sum(k.dur_ns) AS ns, string_agg(DISTINCT k.name, ', ') AS names
    FROM kernels k JOIN it USING (run, iteration)
    WHERE k.kind = 'memcpy' AND k.name ILIKE '%pageable%'
    GROUP BY ALL
)
SELECT it.run, it.iteration, 100.0 * coalesce(m.ns, 0) / it.dur_ns AS value,
       CASE WHEN m.n IS NULL THEN 'no copy from or to pageable memory'
            ELSE format('{} copies with pageable host memory ({}) took {:.3f} ms, {:.2f}% of the {:.2f} ms iteration',
                        m.n, m.names, m.ns / 1e6, 100.0 * m.ns / it.dur_ns, it.dur_ns / 1e6) END AS evidence,
       CASE WHEN 100.0 * coalesce(m.ns, 0) / it.dur_ns >= 10 THEN 'high'
            WHEN 100.0 * coalesce(m.ns, 0) / it.dur_ns >= 0.5 THEN 'medium' ELSE 'low' END AS severity
FROM it LEFT JOIN m USING (run, iteration);
