-- rule: fusion_candidates
-- description: The same short sequence of small elementwise or reduction
--   kernels runs again and again in the step: each launch reads and writes its
--   tensors in memory, where one fused kernel would do it once. Sequences are
--   three kernels in a row on a stream, each under 20 us and none a GEMM,
--   convolution, layout conversion or collective; the one repeated most counts
--   when it repeats at least 8 times. Value: the GPU time its runs take, as a share
--   of the iteration: each run from its first kernel's start to its third kernel's
--   end (the three kernels and the gaps between them on their stream), summed; the
--   most that fusing them can win, since one fused kernel still does their work once.
--   Graded by it: high from 10%, medium from 3%, low below.
-- threshold: 2
-- unit: % of the iteration (GPU time of the sequence)
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
    SELECT k.run, k.iteration, k.stream, k.name, k.ts_ns, k.dur_ns,
           k.dur_ns < 20000 AND NOT regexp_matches(k.name,
               '(?i)gemm|nvjet|xmma|cutlass|cublas|conv|implicit|wgrad|dgrad|fprop|nchw_?to_?nhwc|nhwc_?to_?nchw|nccl')
               AS fusible,
           row_number() OVER (PARTITION BY k.run, k.iteration, k.stream ORDER BY k.ts_ns, k.kernel_id) AS i
    FROM kernels k JOIN it USING (run, iteration)
    WHERE k.kind = 'kernel' AND k.dur_ns IS NOT NULL AND k.ts_ns IS NOT NULL
), tri AS (
    SELECT run, iteration, name AS a, lead(name, 1) OVER w AS b, lead(name, 2) OVER w AS c,
           dur_ns + lead(dur_ns, 1) OVER w + lead(dur_ns, 2) OVER w AS seq_ns,
           lead(ts_ns + dur_ns, 2) OVER w - ts_ns AS span_ns,
           fusible AND lead(fusible, 1) OVER w AND lead(fusible, 2) OVER w AS ok
    FROM k WINDOW w AS (PARTITION BY run, iteration, stream ORDER BY i)
), seqs AS (
    SELECT run, iteration, a, b, c, count(*) AS n, sum(seq_ns) AS ns, sum(span_ns) AS span_ns
    FROM tri WHERE ok AND NOT (a = b AND b = c)
    GROUP BY run, iteration, a, b, c
    QUALIFY row_number() OVER (PARTITION BY run, iteration ORDER BY count(*) DESC, sum(seq_ns) DESC, a, b, c) = 1
), tot AS (
    SELECT run, iteration, count(*) AS launches, sum(dur_ns) AS all_ns FROM k GROUP BY run, iteration
)
SELECT t.run, t.iteration,
       CASE WHEN s.n >= 8 THEN 100.0 * s.span_ns / it.dur_ns ELSE 0 END AS value,
       CASE WHEN s.n IS NULL THEN 'no sequence of three short elementwise or reduction kernels'
            ELSE format('{} -> {} -> {} ran {} times ({} of {} kernel launches, {:.1f}% of kernel time): its runs take {:.3f} ms of GPU time with the gaps between their kernels, {:.2f}% of the {:.2f} ms iteration',
                        coalesce(nullif(regexp_extract(s.a, '(\w+)[<(]', 1), ''), s.a),
                        coalesce(nullif(regexp_extract(s.b, '(\w+)[<(]', 1), ''), s.b),
                        coalesce(nullif(regexp_extract(s.c, '(\w+)[<(]', 1), ''), s.c),
                        s.n, 3 * s.n, t.launches, 100.0 * s.ns / t.all_ns, s.span_ns / 1e6,
                        100.0 * s.span_ns / it.dur_ns, it.dur_ns / 1e6) END AS evidence,
       CASE WHEN 100.0 * s.span_ns / it.dur_ns >= 10 THEN 'high'
            WHEN 100.0 * s.span_ns / it.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM tot t JOIN it USING (run, iteration) LEFT JOIN seqs s USING (run, iteration)
WHERE t.launches > 0;
