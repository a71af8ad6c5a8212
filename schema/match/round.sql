-- Kernel matching, step 2 of 3 (repeated): pairs that are each other's best
-- remaining candidate are assigned. Parameter: $round.
-- reads: _m_scored, _m_pairs
-- creates: nothing temporary (adds rows to _m_pairs)
INSERT INTO _m_pairs
WITH free AS (
    SELECT * FROM _m_scored c
    WHERE NOT EXISTS (SELECT 1 FROM _m_pairs p WHERE p.tk = c.tk)
      AND NOT EXISTS (SELECT 1 FROM _m_pairs p WHERE p.nk = c.nk)
), best_t AS (
    SELECT tk, nk FROM free
    QUALIFY row_number() OVER (PARTITION BY tk ORDER BY score DESC, abs(d), nk) = 1
), best_n AS (
    SELECT tk, nk FROM free
    QUALIFY row_number() OVER (PARTITION BY nk ORDER BY score DESC, abs(d), tk) = 1
)
SELECT tk, nk, $round FROM best_t JOIN best_n USING (tk, nk);
