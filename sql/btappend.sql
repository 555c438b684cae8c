--
-- Right-edge append: a batch's sorted entries that all sort after an
-- existing btree's entries become new leaf pages at its right edge.
--
SET directpath.min_bytes = 0;
SET directpath.batch_pages = 16;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
-- every btree of the table through amcheck's strongest check
CREATE FUNCTION check_btrees(t regclass) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT c.relname || ': ' ||
         CASE WHEN bt_index_parent_check(c.oid, true, true)::text = '' THEN 'ok' END
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
  JOIN pg_am a ON a.oid = c.relam
  WHERE i.indrelid = t AND a.amname = 'btree' ORDER BY c.relname $$;
-- size of an index against a fresh build of the same definition
CREATE FUNCTION size_vs_fresh(i regclass) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  def text := replace(pg_get_indexdef(i), ' INDEX ' || quote_ident(i::text) || ' ON ',
                      ' INDEX size_vs_fresh_tmp ON ');
  fresh bigint;
BEGIN
  EXECUTE def;
  fresh := pg_relation_size('size_vs_fresh_tmp');
  EXECUTE 'DROP INDEX size_vs_fresh_tmp';
  RETURN pg_relation_size(i) <= fresh * 1.05;
END $$;

-- an ETL-like table: sequence key, arrival time, a wide key (many leaf
-- pages per batch: chunks of pages, parent splits, a taller tree) and a
-- random key (not at the right edge: merged into its leaves, or inserted in
-- key order)
CREATE TABLE ea (id bigserial PRIMARY KEY, ts timestamptz, w text, r int);
CREATE INDEX ea_ts ON ea (ts);
CREATE INDEX ea_w ON ea (w);
CREATE INDEX ea_r ON ea (hashint4(r));
INSERT INTO ea (ts, w, r)
  SELECT '2026-01-01'::timestamptz + g * interval '1 s', lpad(g::text, 200, '0'), g
  FROM generate_series(1, 3000) g;
/*+ APPEND */ INSERT INTO ea (ts, w, r)
  SELECT '2026-02-01'::timestamptz + g * interval '1 s',
         lpad((100000 + g)::text, 200, '0'), g
  FROM generate_series(1, 20000) g;
SELECT path, rows_inserted, index_maintenance FROM directpath.last_statement();
SELECT check_btrees('ea');
SELECT i, size_vs_fresh(i) FROM unnest(ARRAY['ea_pkey', 'ea_ts', 'ea_w']::regclass[]) i;
-- index scans, forward and backward, and index-only scans see every row
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM ea WHERE id BETWEEN 2990 AND 3010;
SELECT id FROM ea ORDER BY id DESC LIMIT 3;
SELECT count(*) FROM ea WHERE ts >= '2026-01-01';
SELECT count(*) FROM ea WHERE w > lpad('2999', 200, '0') AND w < lpad('100002', 200, '0');
SELECT count(*) FROM ea WHERE hashint4(r) = hashint4(777);
RESET enable_seqscan;
RESET enable_bitmapscan;
-- COPY appends the same way
/*+ APPEND */ COPY ea (ts, w, r) FROM PROGRAM 'seq 30001 34000 | awk "{printf \"2026-03-01 00:00:%02d\t%0200d\t%d\n\", \$1 % 60, \$1 + 200000, \$1}"';
SELECT path, rows_inserted, index_maintenance FROM directpath.last_statement();
SELECT check_btrees('ea');
SELECT count(*), count(DISTINCT id), max(id) FROM ea;

-- a unique index's duplicate within the load: INSERT's error, nothing left
\set VERBOSITY default
/*+ APPEND */ INSERT INTO ea (id, ts, w, r)
  SELECT g, now(), 'x', 1 FROM generate_series(40001, 45000) g
  UNION ALL SELECT 44000, now(), 'y', 2;
-- COPY names the line of the second row with the key
/*+ APPEND */ COPY ea (id, ts, w, r) FROM PROGRAM 'seq 50001 53000 | sed -e "s/^52999$/52000/" -e "s/$/\t2026-04-01\tz\t1/"';
-- the first entry equals the index's last key: inserted one by one, and
-- the duplicate found there
/*+ APPEND */ INSERT INTO ea (id, ts, w, r)
  SELECT g, now(), 'x', 1 FROM generate_series(24000, 26000) g;
SELECT count(*) FROM ea;
SELECT check_btrees('ea');

-- directpath.index_append off: the same entries, inserted in key order
SET directpath.index_append = off;
/*+ APPEND */ INSERT INTO ea (ts, w, r)
  SELECT '2026-05-01', lpad((300000 + g)::text, 200, '0'), g FROM generate_series(1, 2000) g;
SELECT index_maintenance FROM directpath.last_statement();
RESET directpath.index_append;
SELECT check_btrees('ea');
DROP TABLE ea;

-- an empty table (its indexes have no root yet), a one-page tree (the
-- tail is the root), posting lists (keys repeated), INCLUDE columns, a
-- partial and an expression index, a "C" collation; a DESC index sorts the
-- keys the other way and is inserted into
CREATE TABLE eb (id int PRIMARY KEY, k int, t text COLLATE "C", v int);
CREATE INDEX eb_k ON eb (k) INCLUDE (v);
CREATE INDEX eb_part ON eb (id) WHERE v % 2 = 0;
CREATE INDEX eb_expr ON eb ((id * 2));
CREATE INDEX eb_t ON eb (t);
CREATE INDEX eb_desc ON eb (id DESC);
/*+ APPEND */ INSERT INTO eb SELECT g, g / 10, 'k' || lpad(g::text, 8, '0'), g FROM generate_series(1, 20000) g;
SELECT index_maintenance FROM directpath.last_statement();
SELECT check_btrees('eb');
SELECT i, size_vs_fresh(i) FROM unnest(ARRAY['eb_pkey', 'eb_k', 'eb_part', 'eb_expr', 'eb_t']::regclass[]) i;
TRUNCATE eb;
INSERT INTO eb VALUES (0, 0, 'k', 0);
/*+ APPEND */ INSERT INTO eb SELECT g, g / 10, 'k' || lpad(g::text, 8, '0'), g FROM generate_series(1, 20000) g;
SELECT check_btrees('eb');
SET enable_seqscan = off;
SELECT count(*) FROM eb WHERE k = 77;
SELECT sum(v) FROM eb WHERE k BETWEEN 100 AND 109;
SELECT count(*) FROM eb WHERE id < 100 AND v % 2 = 0;
SELECT id FROM eb WHERE id * 2 = 39998;
SELECT count(*) FROM eb WHERE t >= 'k00019990';
SELECT id FROM eb ORDER BY id DESC LIMIT 2;
RESET enable_seqscan;
DROP TABLE eb;

-- NULLs in a unique index: distinct by default, duplicates with NULLS NOT
-- DISTINCT
CREATE TABLE ec (id int, u int UNIQUE, n int UNIQUE NULLS NOT DISTINCT);
INSERT INTO ec VALUES (1, 1, 1);
/*+ APPEND */ INSERT INTO ec SELECT g, CASE WHEN g > 15000 THEN NULL ELSE g END, g FROM generate_series(2, 20000) g;
SELECT index_maintenance FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO ec SELECT g, g, CASE WHEN g > 25000 THEN NULL ELSE g END FROM generate_series(20001, 30000) g;
SELECT count(*), count(u), count(n) FROM ec;
SELECT check_btrees('ec');
DROP TABLE ec;

-- a large load of scattered keys against non-unique indexes: each is
-- rewritten once with the new entries merged in, locked until the commit
CREATE TABLE em (id int PRIMARY KEY, r int, n text);
CREATE INDEX em_r ON em (hashint4(r));
CREATE INDEX em_n ON em (n DESC NULLS FIRST, r);
INSERT INTO em SELECT g, g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || g % 50 END
  FROM generate_series(1, 20000) g;
BEGIN;
/*+ APPEND */ INSERT INTO em SELECT g, g, CASE WHEN g % 9 = 0 THEN NULL ELSE 'n' || g % 50 END
  FROM generate_series(20001, 80000) g;
SELECT index_maintenance, indexes_rebuilt FROM directpath.last_statement();
SELECT relation::regclass FROM pg_locks
  WHERE locktype = 'relation' AND mode = 'AccessExclusiveLock'
    AND pid = pg_backend_pid() AND relation::regclass::text LIKE 'em%' ORDER BY 1;
COMMIT;
SELECT check_btrees('em');
SELECT i, size_vs_fresh(i) FROM unnest(ARRAY['em_r', 'em_n']::regclass[]) i;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM em WHERE hashint4(r) IN (hashint4(7), hashint4(77777));
SELECT count(*) FROM em WHERE n = 'n7';
SELECT count(*) FROM em WHERE n IS NULL;
SELECT n FROM em ORDER BY n DESC NULLS FIRST, r LIMIT 2;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*) FILTER (WHERE n = 'n7'), count(*) FILTER (WHERE n IS NULL) FROM em;
-- rolled back: the old storage is the index again
BEGIN;
/*+ APPEND */ INSERT INTO em SELECT g, g, 'x' FROM generate_series(80001, 140000) g;
SELECT index_maintenance FROM directpath.last_statement();
ROLLBACK;
SELECT check_btrees('em');
-- directpath.index_merge off: inserted after each batch instead (the keys
-- of the rolled-back load are still in the primary key: not appended, but
-- merged into the leaves that hold them, their dead entries dropped)
SET directpath.index_merge = off;
/*+ APPEND */ INSERT INTO em SELECT g, g, 'y' FROM generate_series(80001, 140000) g;
SELECT index_maintenance FROM directpath.last_statement();
RESET directpath.index_merge;
SELECT check_btrees('em');
SELECT count(*), count(DISTINCT hashint4(r)) > 130000 FROM em;
DROP TABLE em;

-- a merge whose old leaves hold posting lists larger than the ones a merge
-- makes (core's own deduplication makes them up to half a page): each goes
-- through whole
CREATE TABLE ep (k int, v int);
CREATE INDEX ep_k ON ep (k);
INSERT INTO ep SELECT g % 50, g FROM generate_series(1, 20000) g;
SELECT max(i.itemlen) > 1000 AS big_postings
  FROM generate_series(1, pg_relation_size('ep_k') / 8192 - 1) b,
       LATERAL bt_page_items('ep_k', b::int) i;
/*+ APPEND */ INSERT INTO ep SELECT g % 50, g FROM generate_series(20001, 80000) g;
SELECT index_maintenance FROM directpath.last_statement();
SELECT check_btrees('ep');
SET enable_seqscan = off;
SELECT count(*) FROM ep WHERE k = 7;
RESET enable_seqscan;
DROP TABLE ep;

-- runs: keys in interleaved ascending streams (per account) go after the
-- last item of their stream, inside the tree; each stream's batch entries
-- become new leaf pages there (the leaf split at the gap first when the
-- next stream's keys share it)
RESET directpath.batch_pages;
CREATE TABLE ru (acct int, seq int, note text);
CREATE UNIQUE INDEX ru_u ON ru (acct, seq) INCLUDE (note);
CREATE INDEX ru_d ON ru (acct DESC, note COLLATE "C" NULLS FIRST);
-- a row trigger keeps the non-unique index per batch (no spooling to the end)
CREATE FUNCTION ru_noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE TRIGGER ru_noop AFTER INSERT ON ru FOR EACH ROW EXECUTE FUNCTION ru_noop();
INSERT INTO ru SELECT g % 40, g / 40, 'n' || (g % 7) FROM generate_series(0, 39999) g;
/*+ APPEND */ INSERT INTO ru SELECT g % 40, g / 40,
    CASE WHEN g % 11 = 0 THEN NULL ELSE 'n' || (g % 7) END
  FROM generate_series(40000, 199999) g;
SELECT index_maintenance FROM directpath.last_statement();
SELECT check_btrees('ru');
SELECT count(*), count(DISTINCT (acct, seq)) FROM ru;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM ru WHERE acct = 17 AND seq BETWEEN 900 AND 1100;
SELECT acct, seq FROM ru WHERE acct = 39 ORDER BY seq DESC LIMIT 2;
SELECT count(*) FROM ru WHERE acct = 3 AND note IS NULL;
SELECT acct, note FROM ru ORDER BY acct DESC, note COLLATE "C" NULLS FIRST LIMIT 2;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*) FILTER (WHERE acct = 17 AND seq BETWEEN 900 AND 1100),
       count(*) FILTER (WHERE acct = 3 AND note IS NULL) FROM ru;
-- one leaf per stream is split at its gap and stays part full: at this
-- small size within a quarter of a fresh build (at 1M rows: 1.05)
CREATE UNIQUE INDEX ru_fresh ON ru (acct, seq) INCLUDE (note);
SELECT pg_relation_size('ru_u') <= 1.25 * pg_relation_size('ru_fresh') AS compact;
DROP INDEX ru_fresh;
-- a duplicate inside a run, and one of an existing key: INSERT's error,
-- nothing of the load left
/*+ APPEND */ INSERT INTO ru SELECT g % 40, g / 40, 'd' FROM generate_series(200000, 260000) g
  UNION ALL SELECT 5, 5500, 'dup';
/*+ APPEND */ INSERT INTO ru SELECT g % 40, g / 40, 'd' FROM generate_series(200000, 260000) g
  UNION ALL SELECT 5, 10, 'dup';
SELECT count(*) FROM ru;
SELECT check_btrees('ru');
-- directpath.index_runs off: the same load inserted entry by entry
SET directpath.index_runs = off;
/*+ APPEND */ INSERT INTO ru SELECT g % 40, g / 40, 'e' FROM generate_series(200000, 260000) g;
SELECT index_maintenance FROM directpath.last_statement();
RESET directpath.index_runs;
/*+ APPEND */ INSERT INTO ru SELECT g % 40, g / 40, 'f' FROM generate_series(260001, 400000) g;
SELECT index_maintenance FROM directpath.last_statement();
SELECT check_btrees('ru');
SELECT count(*), count(DISTINCT (acct, seq)) FROM ru;
DROP TABLE ru;
DROP FUNCTION ru_noop();

-- leaf merges: a retry of a failed load with the same keys.  The failed
-- load's entries sit where the keys go, so each batch is merged into the
-- leaves that hold them, and the entries of the aborted rows whose keys
-- it repeats are dropped: no heap visit by core, nothing left behind
SET directpath.batch_pages = 16;
CREATE TABLE rl (id int PRIMARY KEY, note text);
INSERT INTO rl SELECT g, 'old' FROM generate_series(1, 10000) g;
/*+ APPEND */ INSERT INTO rl SELECT g, 'new' FROM generate_series(10001, 60000) g
  UNION ALL SELECT 1, 'dup';
SELECT count(*) FROM rl;
/*+ APPEND */ INSERT INTO rl SELECT g, 'new' FROM generate_series(10001, 60000) g;
SELECT index_maintenance FROM directpath.last_statement();
SELECT check_btrees('rl');
SELECT count(*), count(DISTINCT id), min(id), max(id) FROM rl;
SELECT size_vs_fresh('rl_pkey');
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM rl WHERE id BETWEEN 9990 AND 10010;
SELECT id FROM rl WHERE id > 0 ORDER BY id DESC LIMIT 2;
RESET enable_seqscan;
RESET enable_bitmapscan;
-- the same after a rolled-back savepoint: its rows' inserter (a
-- subtransaction) aborted while the transaction goes on
BEGIN;
SAVEPOINT s;
/*+ APPEND */ INSERT INTO rl SELECT g, 'sp' FROM generate_series(60001, 90000) g
  UNION ALL SELECT 2, 'dup';
ROLLBACK TO s;
/*+ APPEND */ INSERT INTO rl SELECT g, 'sp' FROM generate_series(60001, 90000) g;
SELECT index_maintenance FROM directpath.last_statement();
COMMIT;
SELECT check_btrees('rl');
SELECT count(*), count(DISTINCT id) FROM rl;
-- a repeated key of a live row: core decides, with INSERT's error
/*+ APPEND */ INSERT INTO rl SELECT g, 'x' FROM generate_series(9000, 9500) g;
/*+ APPEND */ INSERT INTO rl SELECT g, 'x' FROM generate_series(95001, 96000) g
  UNION ALL SELECT 10, 'x';
-- a repeated key of a deleted row is no conflict: its entry stays beside
DELETE FROM rl WHERE id BETWEEN 5001 AND 6000;
/*+ APPEND */ INSERT INTO rl SELECT g, 'again' FROM generate_series(5001, 6000) g;
SELECT index_maintenance FROM directpath.last_statement();
SELECT check_btrees('rl');
SELECT count(*), count(*) FILTER (WHERE note = 'again') FROM rl;
-- directpath.index_leaf_merge off: a retry is inserted entry by entry
/*+ APPEND */ INSERT INTO rl SELECT g, 'f' FROM generate_series(100001, 130000) g
  UNION ALL SELECT 3, 'dup';
SET directpath.index_leaf_merge = off;
/*+ APPEND */ INSERT INTO rl SELECT g, 'f' FROM generate_series(100001, 130000) g;
SELECT index_maintenance FROM directpath.last_statement();
RESET directpath.index_leaf_merge;
SELECT check_btrees('rl');
SELECT count(*), count(DISTINCT id) FROM rl;
DROP TABLE rl;
-- NULLS NOT DISTINCT: a repeated NULL key is judged as any other key
CREATE TABLE rn (a int, b int);
CREATE UNIQUE INDEX rn_u ON rn (a, b) NULLS NOT DISTINCT;
INSERT INTO rn SELECT g, NULL FROM generate_series(1, 5000) g;
/*+ APPEND */ INSERT INTO rn SELECT g, NULL::int FROM generate_series(5001, 30000) g
  UNION ALL SELECT 1, NULL::int;
/*+ APPEND */ INSERT INTO rn SELECT g, NULL::int FROM generate_series(5001, 30000) g;
SELECT index_maintenance FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO rn SELECT g, NULL::int FROM generate_series(4000, 4500) g;
SELECT check_btrees('rn');
SELECT count(*), count(DISTINCT a) FROM rn;
DROP TABLE rn;
RESET directpath.batch_pages;

-- a table whose only row triggers check foreign keys of other tables: its
-- non-unique btree still waits for the end of the statement; a foreign key
-- to the table itself keeps it per batch (the check may read the table)
CREATE TABLE fw_parent (id int PRIMARY KEY);
INSERT INTO fw_parent SELECT generate_series(1, 1000);
CREATE TABLE fw (id int PRIMARY KEY, p int REFERENCES fw_parent, ts int, up int);
CREATE INDEX fw_ts ON fw (ts);
/*+ APPEND */ INSERT INTO fw SELECT g, g % 1000 + 1, (g * 7919) % 100000, NULL
  FROM generate_series(1, 60000) g;
SELECT index_maintenance FROM directpath.last_statement();
ALTER TABLE fw ADD FOREIGN KEY (up) REFERENCES fw (id);
/*+ APPEND */ INSERT INTO fw SELECT g, g % 1000 + 1, (g * 7919) % 100000, g - 60000
  FROM generate_series(60001, 90000) g;
SELECT index_maintenance FROM directpath.last_statement();
SELECT check_btrees('fw');
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*), sum(id) FROM fw WHERE ts BETWEEN 1000 AND 9000;
RESET enable_seqscan;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT count(*), sum(id) FROM fw WHERE ts BETWEEN 1000 AND 9000;
RESET enable_indexscan;
RESET enable_bitmapscan;
DROP TABLE fw, fw_parent;

-- unique indexes of a table with rows: once a load's rows reach 50,000 and
-- a sixteenth of the index, its later entries wait for the end and the
-- index is rewritten once with them merged in; a key that meets an old
-- entry is judged by its row (dead rows' keys may come back)
CREATE TABLE um (k int PRIMARY KEY, t text COLLATE "C" UNIQUE, u int, v int,
                 w int UNIQUE NULLS NOT DISTINCT);
CREATE UNIQUE INDEX um_uv ON um (u, v);
INSERT INTO um SELECT 2 * g, md5((2 * g)::text), g % 100,
    CASE WHEN g % 3 = 0 THEN NULL ELSE 2 * g END, 2 * g
  FROM generate_series(1, 20000) g;
DELETE FROM um WHERE k % 1000 = 0;
-- a failed load leaves its entries behind (an aborted row's)
BEGIN;
/*+ APPEND */ INSERT INTO um SELECT 2 * g + 1, md5((2 * g + 1)::text), g % 100, NULL, 2 * g + 1
  FROM generate_series(0, 59999) g ORDER BY hashint4(g);
ROLLBACK;
CREATE FUNCTION um_load(first int, last int) RETURNS TABLE (k int, t text, u int, v int, w int)
LANGUAGE sql STABLE AS $$
  SELECT k, md5(k::text), k % 100, CASE WHEN k % 3 = 0 THEN NULL ELSE k END, k
  FROM (SELECT 2 * g + 1 AS k FROM generate_series(first, last) g
        UNION ALL SELECT 1000 * g FROM generate_series(1, 40) g) s
  ORDER BY hashint4(k) $$;
BEGIN;
DELETE FROM um WHERE k % 1000 = 2;
/*+ APPEND */ INSERT INTO um SELECT * FROM um_load(0, 69999)
  UNION ALL SELECT 1000 * g + 2, md5((1000 * g + 2)::text), 2, NULL, 1000 * g + 2
  FROM generate_series(0, 39) g;
SELECT index_maintenance, indexes_rebuilt FROM directpath.last_statement();
COMMIT;
SELECT check_btrees('um');
SELECT count(*), count(DISTINCT k), count(DISTINCT t), count(w) FROM um;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM um WHERE k IN (1000, 1002, 2000, 77777, 4);
SELECT count(*) FROM um WHERE t = md5('77777');
SELECT count(*) FROM um WHERE u = 0 AND v IS NULL;
SELECT count(*) FROM um WHERE w IS NULL;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*) FILTER (WHERE k IN (1000, 1002, 2000, 77777, 4)),
       count(*) FILTER (WHERE u = 0 AND v IS NULL) FROM um;
-- a key the table holds live, one the load repeats, a second NULL in the
-- NULLS NOT DISTINCT index: INSERT's error, and nothing of the load stays
CREATE TABLE um2 (LIKE um INCLUDING INDEXES);
INSERT INTO um2 SELECT * FROM um WHERE k <= 40000;
INSERT INTO um2 VALUES (-1, 'n', NULL, NULL, NULL);
CREATE VIEW um_more AS SELECT * FROM um_load(20000, 89999) WHERE k % 1000 <> 0;
/*+ APPEND */ INSERT INTO um2 SELECT * FROM um_more UNION ALL SELECT 40, 'x', 1, NULL, 300000;
/*+ APPEND */ INSERT INTO um2 SELECT * FROM um_more UNION ALL SELECT 100001, 'y', 1, NULL, 300001;
/*+ APPEND */ INSERT INTO um2 SELECT * FROM um_more UNION ALL SELECT 200003, 'z', 1, NULL, NULL;
SELECT count(*), max(k) FROM um2;
SELECT check_btrees('um2');
-- the same keys once more: the load's rows are all new (the failed loads'
-- entries are an aborted row's), so it goes through
/*+ APPEND */ INSERT INTO um2 SELECT * FROM um_more;
SELECT index_maintenance FROM directpath.last_statement();
SELECT count(*) FROM um2;
SELECT check_btrees('um2');
-- a load small against the index stays per batch (a duplicate's error
-- names its row's input line, as the plain statement's does)
/*+ APPEND */ INSERT INTO um2 SELECT * FROM um_load(90000, 99999) WHERE k % 1000 <> 0;
SELECT index_maintenance FROM directpath.last_statement();
DROP VIEW um_more;
DROP TABLE um, um2;
DROP FUNCTION um_load(int, int);

DROP FUNCTION check_btrees(regclass);
DROP FUNCTION size_vs_fresh(regclass);
DROP EXTENSION pageinspect;
RESET directpath.batch_pages;
