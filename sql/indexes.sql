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
SELECT path, rows_inserted, indexes_rebuilt, index_maintenance FROM directpath.last_statement();
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

-- new storage, every index a btree: built from the entries sorted during
-- the load, without reading the heap again (no heap page in shared buffers)
CREATE EXTENSION IF NOT EXISTS pg_buffercache;
BEGIN;
CREATE TABLE ixb (id bigserial PRIMARY KEY, ts timestamptz, acct int, t text);
CREATE INDEX ixb_ts ON ixb (ts);
CREATE INDEX ixb_h ON ixb (hashint4(acct));
CREATE INDEX ixb_acct ON ixb (acct);
CREATE INDEX ixb_part ON ixb (acct) WHERE acct % 2 = 0;
CREATE INDEX ixb_incl ON ixb (acct DESC) INCLUDE (t);
CREATE UNIQUE INDEX ixb_t ON ixb (t) NULLS NOT DISTINCT;
/*+ APPEND */ INSERT INTO ixb (ts, acct, t)
  SELECT '2026-01-01'::timestamptz + g * interval '1 second', g % 1000,
         CASE WHEN g = 7 THEN NULL ELSE 'T' || g END
    FROM generate_series(1, 30000) g;
SELECT path, rows_inserted, indexes_rebuilt, index_maintenance, frozen FROM directpath.last_statement();
COMMIT;
SELECT count(*) AS heap_buffers FROM pg_buffercache
 WHERE relfilenode = pg_relation_filenode('ixb') AND relforknumber = 0;
SELECT i, bt_index_parent_check(i::regclass, true, true)
  FROM unnest(ARRAY['ixb_pkey', 'ixb_ts', 'ixb_h', 'ixb_acct', 'ixb_part', 'ixb_incl', 'ixb_t']) i;
-- the same size as CREATE INDEX gives (deduplicated where it allows)
CREATE TEMP TABLE ixb_size AS
  SELECT i, pg_relation_size(i::regclass) AS built
    FROM unnest(ARRAY['ixb_pkey', 'ixb_ts', 'ixb_h', 'ixb_acct', 'ixb_part', 'ixb_incl', 'ixb_t']) i;
REINDEX TABLE ixb;
SELECT i, built = pg_relation_size(i::regclass) AS same_size FROM ixb_size ORDER BY i;
SET enable_seqscan = off;
SELECT count(*) FROM ixb WHERE acct = 42;
SELECT count(*) FROM ixb WHERE hashint4(acct) = hashint4(42);
SELECT count(*) FROM ixb WHERE acct = 42 AND acct % 2 = 0;
SELECT id FROM ixb WHERE t = 'T29999';
SELECT id FROM ixb WHERE t IS NULL;
SELECT count(*) FROM ixb WHERE ts < '2026-01-01 00:01:00';
RESET enable_seqscan;
-- a duplicate, and NULLS NOT DISTINCT: the plain path's error
BEGIN;
TRUNCATE ixb;
/*+ APPEND */ INSERT INTO ixb (acct, t) SELECT g, 'U' || (g % 9999) FROM generate_series(1, 10000) g;
ROLLBACK;
BEGIN;
TRUNCATE ixb;
/*+ APPEND */ INSERT INTO ixb (acct, t) SELECT g, CASE WHEN g % 5000 = 0 THEN NULL ELSE 'N' || g END FROM generate_series(1, 10000) g;
ROLLBACK;
-- COPY: a duplicate found by the build names no input line
BEGIN;
TRUNCATE ixb;
/*+ APPEND */ COPY ixb (acct, t) FROM PROGRAM 'seq 1 5000 | sed -e "s/^4000$/17/" -e "s/.*/&\tV&/"';
ROLLBACK;
-- a second load into the same new storage finds the indexes filled: REINDEX
BEGIN;
TRUNCATE ixb;
/*+ APPEND */ INSERT INTO ixb (acct, t) SELECT g, 'A' || g FROM generate_series(1, 5000) g;
/*+ APPEND */ INSERT INTO ixb (acct, t) SELECT g, 'B' || g FROM generate_series(1, 5000) g;
SELECT path, rows_inserted, indexes_rebuilt, index_maintenance FROM directpath.last_statement();
COMMIT;
SELECT i, bt_index_parent_check(i::regclass, true, true)
  FROM unnest(ARRAY['ixb_pkey', 'ixb_acct', 'ixb_t']) i;
-- directpath.index_spool off: REINDEX after the load, reading the heap
SET directpath.index_spool = off;
BEGIN;
TRUNCATE ixb;
/*+ APPEND */ INSERT INTO ixb (acct, t) SELECT g, 'C' || g FROM generate_series(1, 5000) g;
COMMIT;
RESET directpath.index_spool;
SELECT count(*) > 0 AS heap_read_again FROM pg_buffercache
 WHERE relfilenode = pg_relation_filenode('ixb') AND relforknumber = 0;
SELECT count(*) FROM ixb;
DROP TABLE ixb;
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
