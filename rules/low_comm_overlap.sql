-- rule: low_comm_overlap
-- description: Communication kernels (NCCL) run with no compute beside them:
--   the ranks wait for the network instead of hiding it behind the backward
--   pass. Value: comm_overlap's overlap_pct (issue 14), per rank and iteration.
-- threshold: 50
-- unit: % of communication time
-- fires: below
-- severity: high
-- next: comm_overlap
-- requires:
--   report_comm_overlap.overlap_pct: communication kernels in a multi-rank trace (comm_overlap report)
-- suggestion: Overlap gradient all-reduce with backward (DDP bucket_cap_mb, gradient_as_bucket_view,
--   FSDP backward_prefetch), avoid syncs between buckets, and check collective_skew for late ranks.
SELECT run, iteration, overlap_pct AS value,
       format('{:.1f}% of the {:.2f} ms of communication overlaps compute on rank {} ({:.2f} ms exposed)',
              overlap_pct, communication_ns / 1e6, rank, exposed_ns / 1e6)
       -- a rank of a job with a straggler: its communication is (mostly) the wait for it (issue 49)
       || coalesce(format('; {:.2f} ms of it is this rank waiting for rank {}, the job''s straggler (straggler_ranks): fix that rank first',
                          w.wait_ns / 1e6, w.waited_for), '') AS evidence
FROM report_comm_overlap LEFT JOIN (SELECT run, iteration, waited_for, wait_ns FROM straggler_waits) w USING (run, iteration)
WHERE overlap_pct IS NOT NULL AND ($run IS NULL OR run = $run);
