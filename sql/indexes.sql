--
-- Index maintenance: per batch on existing storage, one rebuild at the
-- end on storage new in the transaction.
--
SET directpath.min_bytes = 0;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE TABLE ix (id int PRIMARY KEY, k int, t text);
CREATE INDEX ix_k ON ix (k);
CREATE INDEX ix_expr ON ix (lower(t));
CREATE INDEX ix_part ON ix (k) WHERE k < 10;
CREATE INDEX ix_brin ON ix USING brin (id);
CREATE INDEX ix_hash ON ix USING hash (k);

-- existing storage: entries inserted after each batch
SET directpath.batch_pages = 4;
/*+ APPEND */ INSERT INTO ix SELECT g, g % 97, 'T' || g FROM generate_series(1, 20000) g;
SELECT path, rows_inserted, indexes_rebuilt FROM directpath.last_statement();
RESET directpath.batch_pages;
SELECT bt_index_check(i::regclass, true) FROM unnest(ARRAY['ix_pkey', 'ix_k', 'ix_expr', 'ix_part']) i;
SET enable_seqscan = off;
SELECT count(*) FROM ix WHERE k = 5;
SELECT count(*) FROM ix WHERE lower(t) = 't777';
SELECT count(*) FROM ix WHERE k < 10 AND k = 3;
RESET enable_seqscan;

-- new storage: rebuilt once at the end
BEGIN;
TRUNCATE ix;
/*+ APPEND */ INSERT INTO ix SELECT g, g % 97, 'T' || g FROM generate_series(1, 20000) g;
SELECT path, rows_inserted, indexes_rebuilt, frozen FROM directpath.last_statement();
COMMIT;
SELECT bt_index_check(i::regclass, true) FROM unnest(ARRAY['ix_pkey', 'ix_k', 'ix_expr', 'ix_part']) i;
-- a duplicate found by the rebuild reports like an INSERT
\set VERBOSITY sqlstate
BEGIN;
TRUNCATE ix;
/*+ APPEND */ INSERT INTO ix SELECT g % 100, g, 'x' FROM generate_series(1, 20000) g;
ROLLBACK;
\set VERBOSITY default
SELECT count(*) FROM ix;
-- index_rebuild off: maintained row by row even on new storage
SET directpath.index_rebuild = off;
BEGIN;
TRUNCATE ix;
/*+ APPEND */ INSERT INTO ix SELECT g, g % 97, 'T' || g FROM generate_series(1, 5000) g;
SELECT path, indexes_rebuilt FROM directpath.last_statement();
COMMIT;
RESET directpath.index_rebuild;
SELECT bt_index_check('ix_pkey', true);

-- exclusion constraints are checked per row
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE TABLE ex (r int4range, EXCLUDE USING gist (r WITH &&));
\set VERBOSITY sqlstate
/*+ APPEND */ INSERT INTO ex SELECT int4range(g * 10, g * 10 + 5) FROM generate_series(1, 1000) g;
/*+ APPEND */ INSERT INTO ex SELECT int4range(g * 10 + 3, g * 10 + 4) FROM generate_series(500, 600) g;
\set VERBOSITY default
SELECT count(*) FROM ex;
DROP TABLE ix, ex;

-- existing storage, btrees only: each batch's entries go in sorted by key
CREATE TABLE ixs (id int PRIMARY KEY, k int, t text);
CREATE INDEX ixs_k ON ixs (k);
CREATE INDEX ixs_rand ON ixs (hashint4(id));
CREATE INDEX ixs_part ON ixs (k) WHERE k < 10;
CREATE UNIQUE INDEX ixs_lower ON ixs (lower(t));
INSERT INTO ixs SELECT g, g % 97, 'T' || g FROM generate_series(1, 1000) g;
SET directpath.batch_pages = 4;
/*+ APPEND */ INSERT INTO ixs SELECT g, g % 97, 'T' || g FROM generate_series(1001, 30000) g;
SELECT path, rows_inserted, indexes_rebuilt FROM directpath.last_statement();
SELECT bt_index_check(i::regclass, true)
  FROM unnest(ARRAY['ixs_pkey', 'ixs_k', 'ixs_rand', 'ixs_part', 'ixs_lower']) i;
SET enable_seqscan = off;
SELECT count(*) FROM ixs WHERE k = 5;
SELECT count(*) FROM ixs WHERE hashint4(id) = hashint4(12345);
SELECT count(*) FROM ixs WHERE k < 10 AND k = 3;
SELECT id FROM ixs WHERE lower(t) = 't29999';
RESET enable_seqscan;
-- a duplicate of a row in the table, and one within the batch (on an
-- expression index): a plain INSERT's error, nothing left behind
/*+ APPEND */ INSERT INTO ixs SELECT g, 1, 'x' || g FROM generate_series(30001, 40000) g
  UNION ALL SELECT 500, 1, 'dup-of-table';
/*+ APPEND */ INSERT INTO ixs SELECT g, 1, CASE WHEN g = 39000 THEN 'X30500' ELSE 'x' || g END
  FROM generate_series(30001, 40000) g;
SELECT count(*) FROM ixs;
-- COPY names the line of the row whose entry failed
/*+ APPEND */ COPY ixs FROM PROGRAM 'seq 40001 45000 | sed -e "s/^45000$/777/" -e "s/$/\t1\tc/" | awk -F"\t" "{print \$1 \"\t\" \$2 \"\t\" \$3 \$1}"';
SELECT count(*) FROM ixs;
-- index_sort off: the same entries, row by row
SET directpath.index_sort = off;
/*+ APPEND */ INSERT INTO ixs SELECT g, g % 97, 'T' || g FROM generate_series(50001, 60000) g;
RESET directpath.index_sort;
RESET directpath.batch_pages;
SELECT bt_index_check(i::regclass, true)
  FROM unnest(ARRAY['ixs_pkey', 'ixs_k', 'ixs_rand', 'ixs_part', 'ixs_lower']) i;
SELECT count(*), sum(id) FROM ixs;
DROP TABLE ixs;
