-- Bring a database made by an older tracedb up to this schema (idempotent;
-- runs after tables.sql on every writable open).
ALTER TABLE counters ADD COLUMN IF NOT EXISTS text_value VARCHAR;
ALTER TABLE matches ADD COLUMN IF NOT EXISTS order_distance INTEGER;
ALTER TABLE matches ADD COLUMN IF NOT EXISTS round INTEGER;
ALTER TABLE power ADD COLUMN IF NOT EXISTS phase VARCHAR;
ALTER TABLE power ADD COLUMN IF NOT EXISTS average_power_w DOUBLE;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS job VARCHAR;
ALTER TABLE calibration ADD COLUMN IF NOT EXISTS array_bytes BIGINT;
ALTER TABLE calibration ADD COLUMN IF NOT EXISTS hit_rate_pct DOUBLE;
ALTER TABLE calibration ADD COLUMN IF NOT EXISTS note VARCHAR;
ALTER TABLE calibration ADD COLUMN IF NOT EXISTS counted DOUBLE;
ALTER TABLE calibration ADD COLUMN IF NOT EXISTS check_shape VARCHAR;
ALTER TABLE calibration ADD COLUMN IF NOT EXISTS sweep_pass INTEGER;
-- Before the reader registry an .ncu-rep run had kind 'ncu-rep' (and could never
-- be matched): its kind is ncu, its format goes to the metadata.
UPDATE runs SET kind = 'ncu',
       metadata = json_merge_patch(coalesce(metadata, '{}'), '{"source_format": "ncu-rep"}')
WHERE kind = 'ncu-rep';
