-- Kernel matching, step 3 of 3: store the pairs and the summary.
-- Parameters: $trace_run, $ncu_run, $seconds.
-- reads: _m_pairs, _m_scored and the rest of prepare.sql's
-- creates: nothing temporary (drops every _m_ table)
DELETE FROM matches WHERE trace_run = $trace_run AND ncu_run = $ncu_run;

INSERT INTO matches
SELECT $trace_run, $ncu_run, s.tk, s.nk, s.score, s.name_score, s.launch_score, s.order_score,
       s.duration_score, s.d, p.round
FROM _m_pairs p JOIN _m_scored s USING (tk, nk);

INSERT OR REPLACE INTO match_runs (trace_run, ncu_run, iteration, trace_kernels, ncu_kernels,
                                   matched, candidates, seconds)
SELECT $trace_run, $ncu_run, (SELECT iteration FROM _m_iter), (SELECT count(*) FROM _m_t),
       (SELECT count(*) FROM _m_n), (SELECT count(*) FROM _m_pairs),
       (SELECT count(*) FROM _m_scored), $seconds;

UPDATE runs SET paired_run = $trace_run WHERE run = $ncu_run;

DROP TABLE _m_iter;
DROP TABLE _m_t;
DROP TABLE _m_n0;
DROP TABLE _m_n;
DROP TABLE _m_streams;
DROP TABLE _m_anchor;
DROP TABLE _m_te;
DROP TABLE _m_cand;
DROP TABLE _m_scored;
DROP TABLE _m_pairs;
