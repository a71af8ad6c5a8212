-- rule: fusion_candidates
-- description: The same short sequence of small elementwise or reduction
--   kernels runs again and again in the step: each launch reads and writes its
--   tensors in memory, where one fused kernel would do it once. Sequences are
--   three kernels in a row on a stream, each under 20 us and none a GEMM,
--   convolution, layout conversion or collective; the one repeated most counts
--   when it repeats at least 8 times. Value: the launches of that sequence as a
--   share of the iteration's kernel launches.
-- threshold: 10
-- unit: % of kernel launches
-- fires: above
-- severity: low
-- next: top_kernels
-- steady: run
-- requires:
--   kernels: GPU kernels
-- suggestion: Let a compiler fuse them (torch.compile, or jax.jit / XLA), or use the fused implementations
--   (fused optimizers: foreach=True or fused=True; fused LayerNorm, GELU, softmax, bias-add).
WITH it AS (
    SELECT * FROM finding_iterations($run, $iteration, every_p := $every)
), k AS (
    SELECT k.run, k.iteration, k.stream, k.name, k.dur_ns,
           k.dur_ns < 20000 AND NOT regexp_matches(k.name,
               '(?i)gemm|nvjet|xmma|cutlass|cublas|conv|implicit|wgrad|dgrad|fprop|nchw_?to_?nhwc|nhwc_?to_?nchw|nccl')
               AS fusible,
           row_number() OVER (PARTITION BY k.run, k.iteration, k.stream ORDER BY k.ts_ns, k.kernel_id) AS i
    FROM kernels k JOIN it USING (run, iteration)
    WHERE k.kind = 'kernel' AND k.dur_ns IS NOT NULL AND k.ts_ns IS NOT NULL
), tri AS (
    SELECT run, iteration, name AS a, lead(name, 1) OVER w AS b, lead(name, 2) OVER w AS c,
           dur_ns + lead(dur_ns, 1) OVER w + lead(dur_ns, 2) OVER w AS seq_ns,
           fusible AND lead(fusible, 1) OVER w AND lead(fusible, 2) OVER w AS ok
    FROM k WINDOW w AS (PARTITION BY run, iteration, stream ORDER BY i)
), seqs AS (
    SELECT run, iteration, a, b, c, count(*) AS n, sum(seq_ns) AS ns
    FROM tri WHERE ok AND NOT (a = b AND b = c)
    GROUP BY run, iteration, a, b, c
    QUALIFY row_number() OVER (PARTITION BY run, iteration ORDER BY count(*) DESC, sum(seq_ns) DESC, a, b, c) = 1
), tot AS (
    SELECT run, iteration, count(*) AS launches, sum(dur_ns) AS all_ns FROM k GROUP BY run, iteration
)
SELECT t.run, t.iteration,
       CASE WHEN s.n >= 8 THEN 100.0 * 3 * s.n / t.launches ELSE 0 END AS value,
       CASE WHEN s.n IS NULL THEN 'no sequence of three short elementwise or reduction kernels'
            ELSE format('{} -> {} -> {} ran {} times ({} of {} kernel launches, {:.1f}% of kernel time)',
                        coalesce(nullif(regexp_extract(s.a, '(\w+)[<(]', 1), ''), s.a),
                        coalesce(nullif(regexp_extract(s.b, '(\w+)[<(]', 1), ''), s.b),
                        coalesce(nullif(regexp_extract(s.c, '(\w+)[<(]', 1), ''), s.c),
                        s.n, 3 * s.n, t.launches, 100.0 * s.ns / t.all_ns) END AS evidence
FROM tot t LEFT JOIN seqs s USING (run, iteration)
WHERE t.launches > 0;
