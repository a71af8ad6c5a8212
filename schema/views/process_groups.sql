-- includes: distributed

-- Process groups as users configure them: tensor (TP), data (DP),
-- fully sharded data (FSDP) or pipeline (PP) parallelism, per trace run and
-- process group, so that advice on exposed communication knows whether it is a
-- tensor-parallel all-reduce (blocking by design: the next layer needs its
-- result) or a data-parallel one (meant to hide under the backward). Per run:
-- the lake materializes it. Documented in docs/schema.md ("process_groups").
--
-- The kind comes from the group's description when it names one
-- (torch.distributed new_group(group_desc=...), DeviceMesh dimension names:
-- tp / tensor, pp / pipe, fsdp / shard, dp / ddp / data / replicate), else from
-- its collectives: send/recv only: PP; all-gather and reduce-scatter: FSDP;
-- all-reduce launched from the main thread twice or more per iteration (the
-- forward: activations) as well as from the autograd thread: TP; all-reduce from
-- the autograd thread (backward hooks: gradient buckets) and not twice an
-- iteration from the main thread: DP; anything else (a group for metrics, say)
-- stays unlabelled (kind NULL).

-- @column run            trace run
-- @column process_group  process group name (collectives.process_group)
-- @column pg_desc        its description (collectives.pg_desc)
-- @column calls          collective calls of the group on this run
-- @column collectives    the distinct collectives, comma-separated
-- @column comm_ns        summed kernel time of the group's collectives, ns
-- @column kind           TP | DP | FSDP | PP | NULL (not told)
-- @column kind_source    description | collectives: what the kind was read from
CREATE OR REPLACE VIEW process_group_kinds AS
WITH c AS (
    SELECT c.run, c.process_group, c.pg_desc, c.collective, collective_type(c.collective) AS ctype,
           c.iteration, c.dur_ns, e.tid IS NOT NULL AND e.tid <> e.pid AS from_autograd
    FROM collectives c LEFT JOIN events e ON e.run = c.run AND e.event_id = c.op_event_id
    WHERE c.process_group <> 'unknown'      -- kernels with no group in their args (launched before the trace)
), g AS (
    SELECT run, process_group, min(pg_desc) AS pg_desc, count(*) AS calls,
           string_agg(DISTINCT collective, ', ' ORDER BY collective) AS collectives,
           CAST(sum(dur_ns) AS BIGINT) AS comm_ns,
           greatest(count(DISTINCT iteration), 1) AS its,
           sum(CASE WHEN ctype = 'sendrecv' THEN 1 ELSE 0 END) AS sendrecv,
           sum(CASE WHEN ctype = 'allgather' THEN 1 ELSE 0 END) AS allgather,
           sum(CASE WHEN ctype = 'reducescatter' THEN 1 ELSE 0 END) AS reducescatter,
           sum(CASE WHEN ctype = 'allreduce' AND from_autograd THEN 1 ELSE 0 END) AS allreduce_autograd,
           sum(CASE WHEN ctype = 'allreduce' AND NOT from_autograd THEN 1 ELSE 0 END) AS allreduce_main
    FROM c GROUP BY run, process_group
), d AS (
    SELECT *, CASE WHEN regexp_matches(lower(coalesce(pg_desc, '')), '(^|[^a-z])(tp|tensor)') THEN 'TP'
                   WHEN regexp_matches(lower(coalesce(pg_desc, '')), '(^|[^a-z])(pp|pipe)') THEN 'PP'
                   WHEN regexp_matches(lower(coalesce(pg_desc, '')), '(^|[^a-z])(fsdp|shard)') THEN 'FSDP'
                   WHEN regexp_matches(lower(coalesce(pg_desc, '')), '(^|[^a-z])(dp|ddp|data|replicate)') THEN 'DP'
              END AS by_desc
    FROM g
)
SELECT run, process_group, pg_desc, calls, collectives, comm_ns,
       coalesce(by_desc,
                CASE WHEN sendrecv = calls THEN 'PP'
                     WHEN allgather > 0 AND reducescatter > 0 THEN 'FSDP'
                     WHEN allreduce_main >= 2 * its AND allreduce_autograd > 0 THEN 'TP'
                     WHEN allreduce_autograd > 0 THEN 'DP' END) AS kind,
       CASE WHEN by_desc IS NOT NULL THEN 'description'
            WHEN sendrecv = calls OR (allgather > 0 AND reducescatter > 0) OR allreduce_autograd > 0
                 THEN 'collectives' END AS kind_source
FROM d;
