-- Index size after a load of keys in 50 interleaved ascending streams, against
-- a fresh CREATE INDEX on the same rows: the direct path (runs) and a plain
-- INSERT.  Run with psql in a database where directpath is installed.
CREATE EXTENSION IF NOT EXISTS directpath;
SET directpath.min_bytes = 0;
CREATE OR REPLACE FUNCTION ratio(i regclass) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE def text := replace(pg_get_indexdef(i), ' INDEX ' || quote_ident(i::text) || ' ON ', ' INDEX ratio_tmp ON '); fresh bigint;
BEGIN EXECUTE def; fresh := pg_relation_size('ratio_tmp'); EXECUTE 'DROP INDEX ratio_tmp'; RETURN round(pg_relation_size(i)::numeric / fresh, 3); END $$;
DROP TABLE IF EXISTS r, r2;
CREATE TABLE r (k bigint, v int, pad text);
CREATE UNIQUE INDEX r_k ON r (k);
INSERT INTO r SELECT (g % 50)::bigint * 1000000000 + g / 50, g, 'x' FROM generate_series(0, 49999) g;
CREATE TABLE r2 (LIKE r INCLUDING INDEXES);
INSERT INTO r2 SELECT * FROM r;
/*+ APPEND */ INSERT INTO r SELECT (g % 50)::bigint * 1000000000 + g / 50, g, 'y' FROM generate_series(50000, 1049999) g;
SELECT index_maintenance FROM directpath.last_statement();
INSERT INTO r2 SELECT (g % 50)::bigint * 1000000000 + g / 50, g, 'y' FROM generate_series(50000, 1049999) g;
SELECT ratio('r_k') AS direct_runs, ratio('r2_k_idx') AS plain;
DROP TABLE r, r2;
DROP FUNCTION ratio(regclass);
