-- rule: low_comm_overlap
-- description: Communication kernels (NCCL) run with no compute beside them:
--   the ranks wait for the network instead of hiding it behind the backward
--   pass. Value: the communication that no compute hides (comm_overlap's
--   exposed_ns: time a communication kernel runs and no compute kernel does) as a
--   share of the iteration, per rank and iteration: the step time it costs, not the
--   overlap ratio (a rank whose 0.6 ms of communication is 9% hidden loses 1.6% of
--   its step). Graded by it: high from 10%, medium from 3%, low below.
-- threshold: 2
-- unit: % of the iteration (exposed communication)
-- fires: above
-- severity: high
-- next: comm_overlap
-- requires:
--   report_comm_overlap.overlap_pct: communication kernels in a multi-rank trace (comm_overlap report)
-- suggestion: Data parallelism: overlap gradient all-reduce with backward (DDP bucket_cap_mb,
--   gradient_as_bucket_view, FSDP backward_prefetch) and avoid syncs between buckets; tensor
--   parallelism blocks by design (sequence parallelism, async TP); the evidence says which kind
--   the communication is (process_group_kinds). Check straggler_ranks for a late rank.
SELECT run, iteration, 100.0 * exposed_ns / i.dur_ns AS value,
       format('{:.2f} ms of communication {} runs with no compute beside it, {:.2f}% of the {:.2f} ms iteration ({:.1f}% of the {:.2f} ms of communication overlaps compute)',
              exposed_ns / 1e6, coalesce('on rank ' || rank, 'on the run''s GPUs'), 100.0 * exposed_ns / i.dur_ns, i.dur_ns / 1e6, overlap_pct,
              communication_ns / 1e6)
       -- a rank of a job with a straggler: its communication is (mostly) the wait for it
       || coalesce(format('; {:.2f} ms of it is this rank waiting for rank {}, the job''s straggler (straggler_ranks): fix that rank first',
                          w.wait_ns / 1e6, w.waited_for), '')
       -- what kind of parallelism the communication is (process_group_kinds): the advice differs
       || coalesce('; most of the communication is ' || CASE k.kind
              WHEN 'TP' THEN format('tensor-parallel all-reduce (process group {}{}), blocking by design: the next layer needs its result, so DDP buckets and FSDP prefetch do not apply; overlap it with sequence parallelism or async TP, or lower the TP degree', k.process_group, coalesce(' ' || k.pg_desc, ''))
              WHEN 'DP' THEN format('data-parallel gradient all-reduce (process group {}{}), meant to run under the backward: bucket it (DDP bucket_cap_mb, gradient_as_bucket_view) and keep syncs out of the backward', k.process_group, coalesce(' ' || k.pg_desc, ''))
              WHEN 'FSDP' THEN format('FSDP parameter all-gather / gradient reduce-scatter (process group {}{}): prefetch the next all-gather (backward_prefetch, forward_prefetch) and check reshard_after_forward', k.process_group, coalesce(' ' || k.pg_desc, ''))
              WHEN 'PP' THEN format('pipeline send/recv (process group {}{}): the pipeline bubble; more micro-batches or an interleaved schedule shrink it', k.process_group, coalesce(' ' || k.pg_desc, ''))
              END, '') AS evidence,
       CASE WHEN 100.0 * exposed_ns / i.dur_ns >= 10 THEN 'high'
            WHEN 100.0 * exposed_ns / i.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM report_comm_overlap JOIN iterations i USING (run, iteration) LEFT JOIN (SELECT run, iteration, waited_for, wait_ns FROM straggler_waits) w USING (run, iteration)
LEFT JOIN (SELECT run, process_group, pg_desc, kind FROM process_group_kinds WHERE kind IS NOT NULL
           QUALIFY row_number() OVER (PARTITION BY run ORDER BY comm_ns DESC, process_group) = 1) k USING (run)
WHERE overlap_pct IS NOT NULL AND i.dur_ns > 0 AND ($run IS NULL OR run = $run);
