-- Bring a database made by an older tracedb up to this schema (idempotent;
-- runs after tables.sql on every writable open).
ALTER TABLE counters ADD COLUMN IF NOT EXISTS text_value VARCHAR;
ALTER TABLE matches ADD COLUMN IF NOT EXISTS order_distance INTEGER;
ALTER TABLE matches ADD COLUMN IF NOT EXISTS round INTEGER;
