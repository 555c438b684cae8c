--
-- Partitioned targets: multi-level routing, each leaf its own writer.
--
SET directpath.min_bytes = 0;
CREATE TABLE pt (k int, d date, v text) PARTITION BY RANGE (k);
CREATE TABLE pt_a PARTITION OF pt FOR VALUES FROM (0) TO (1000);
CREATE TABLE pt_b PARTITION OF pt FOR VALUES FROM (1000) TO (100000) PARTITION BY HASH (k);
CREATE TABLE pt_b0 PARTITION OF pt_b FOR VALUES WITH (MODULUS 2, REMAINDER 0);
-- a partition with a different column order needs a tuple conversion
CREATE TABLE pt_b1 (v text, d date, k int);
ALTER TABLE pt_b ATTACH PARTITION pt_b1 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE pt_def PARTITION OF pt DEFAULT;
CREATE INDEX ON pt (k);
ALTER TABLE pt ADD CONSTRAINT pt_v CHECK (v <> 'bad');

CREATE TABLE pt_plain (LIKE pt);

/*+ APPEND */ INSERT INTO pt SELECT g, date '2024-01-01' + g % 365, md5(g::text) FROM generate_series(-100, 20000) g;
SELECT path, rows_inserted, relations FROM directpath.last_statement();
INSERT INTO pt_plain SELECT g, date '2024-01-01' + g % 365, md5(g::text) FROM generate_series(-100, 20000) g;
SELECT tableoid::regclass, count(*) FROM pt GROUP BY 1 ORDER BY 1;
SELECT count(*) FROM (SELECT * FROM pt EXCEPT SELECT * FROM pt_plain) x;

-- errors: constraint on a routed row, no partition for a row
CREATE TABLE pt_norange (k int) PARTITION BY RANGE (k);
CREATE TABLE pt_norange1 PARTITION OF pt_norange FOR VALUES FROM (0) TO (10);
/*+ APPEND */ INSERT INTO pt_norange SELECT generate_series(0, 10);
/*+ APPEND */ INSERT INTO pt SELECT g, NULL, CASE WHEN g = 5000 THEN 'bad' END FROM generate_series(1, 6000) g;
SELECT count(*) FROM pt;

-- inserting into a partition directly checks the partition constraint
/*+ APPEND */ INSERT INTO pt_a SELECT g, NULL, 'direct' FROM generate_series(990, 1010) g;
/*+ APPEND */ INSERT INTO pt_a SELECT g, NULL, 'direct' FROM generate_series(990, 999) g;
SELECT path, rows_inserted FROM directpath.last_statement();

-- RETURNING through partitions, in input order
/*+ APPEND */ INSERT INTO pt SELECT g * 997, NULL, 'ret' FROM generate_series(1, 5) g RETURNING k, tableoid::regclass;

-- partitions whose storage is new in the transaction are frozen
BEGIN;
TRUNCATE pt;
/*+ APPEND */ INSERT INTO pt SELECT g, NULL, 'fresh' FROM generate_series(0, 5000) g;
SELECT path, frozen, relations FROM directpath.last_statement();
COMMIT;
CREATE EXTENSION IF NOT EXISTS pg_visibility;
SELECT c.relname, s.all_visible = pg_relation_size(c.oid) / 8192 AS all_visible,
       s.all_frozen = pg_relation_size(c.oid) / 8192 AS all_frozen
  FROM pg_class c, pg_visibility_map_summary(c.oid) s
 WHERE c.relname IN ('pt_a', 'pt_b0', 'pt_b1') ORDER BY 1;
SELECT count(*) FROM pt;

DROP TABLE pt, pt_plain, pt_norange;
