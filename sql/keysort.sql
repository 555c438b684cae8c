--
-- Index entries sorted on integer and uuid keys (src/index/keysort.c) against
-- core's btree tuplesort (directpath.index_key_sort = off): every key kind,
-- DESC columns, duplicates, extreme values, NULL keys and memory overflow
-- (both hand the entries to the tuplesort), indexes it does not take, and
-- every strategy that sorts (per batch, the merge at the end, a build of
-- new storage).  Each pair of loads must leave the same rows, and every
-- btree must pass amcheck's parent check with heapallindexed, which
-- verifies the key order across pages and that every row has its entry.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS directpath;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
SET directpath.min_bytes = 0;
SET directpath.batch_pages = 16;
CREATE FUNCTION ks_check(t regclass) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT c.relname || ': ' ||
         CASE WHEN bt_index_parent_check(c.oid, true, true)::text = '' THEN 'ok' END
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
  WHERE i.indrelid = t ORDER BY c.relname $$;
-- the same rows, read through each table's index on the given columns
CREATE FUNCTION ks_same_order(a regclass, b regclass, cols text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  ha text;
  hb text;
BEGIN
  SET LOCAL enable_seqscan = off;
  SET LOCAL enable_bitmapscan = off;
  SET LOCAL enable_sort = off;
  EXECUTE format('SELECT md5(string_agg(r::text, '','')) FROM (SELECT %s FROM %s ORDER BY %s) r',
                 cols, a, cols) INTO ha;
  EXECUTE format('SELECT md5(string_agg(r::text, '','')) FROM (SELECT %s FROM %s ORDER BY %s) r',
                 cols, b, cols) INTO hb;
  RETURN ha = hb;
END $$;

CREATE DOMAIN ks_dom AS int4;
-- 60,000 rows: keys scattered, repeated (n), and every kind's extremes
CREATE TABLE ks_src (id int8, a int2, b int4, c int8, d oid, e date,
                     f timestamp, g timestamptz, h ks_dom, n int, u uuid);
INSERT INTO ks_src
  SELECT x, (x % 65536 - 32768)::int2, hashint4(x), hashint4(x)::int8 * 2147483648,
         (hashint4(x)::int8 & 4294967295)::oid,
         date '2000-01-01' + hashint4(x) % 1000000,
         timestamp '2000-01-01' + hashint4(x) * interval '1 s',
         timestamptz '2000-01-01 UTC' + hashint4(x + 1) * interval '1 ms',
         -hashint4(x), x % 7, md5((x % 40000)::text)::uuid
  FROM generate_series(1, 59990) x;
INSERT INTO ks_src VALUES
  (59991, -32768, -2147483648, -9223372036854775808, 0, '-infinity', '-infinity', '-infinity', -2147483648, 0, '00000000-0000-0000-0000-000000000000'),
  (59992, 32767, 2147483647, 9223372036854775807, 4294967295, 'infinity', 'infinity', 'infinity', 2147483647, 6, 'ffffffff-ffff-ffff-ffff-ffffffffffff'),
  (59993, 0, 0, 0, 2147483648, '4713-01-01 BC', '4713-01-01 BC', '4713-01-01 BC', 0, 3, '80000000-0000-0000-0000-000000000000'),
  (59994, -1, -1, -1, 2147483647, '1999-12-31', '1999-12-31 23:59:59.999999', '1999-12-31 23:59:59.999999+00', -1, 3, '7fffffff-ffff-ffff-8000-000000000000'),
  (59995, 1, 1, 1, 1, '2000-01-02', '2000-01-01 00:00:00.000001', '2000-01-01 00:00:00.000001+00', 1, 3, '00000000-0000-0001-0000-000000000000');
INSERT INTO ks_src SELECT id + 100000, a, b, c, d, e, f, g, h, n, u FROM ks_src WHERE id <= 5;

CREATE FUNCTION ks_table(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TABLE %I (LIKE ks_src)', t);
  EXECUTE format('CREATE UNIQUE INDEX %I ON %I (id)', t || '_id', t);
  EXECUTE format('CREATE INDEX %I ON %I (a)', t || '_a', t);
  EXECUTE format('CREATE INDEX %I ON %I (b DESC)', t || '_b', t);
  EXECUTE format('CREATE INDEX %I ON %I (c)', t || '_c', t);
  EXECUTE format('CREATE INDEX %I ON %I (d)', t || '_d', t);
  EXECUTE format('CREATE INDEX %I ON %I (e)', t || '_e', t);
  EXECUTE format('CREATE INDEX %I ON %I (f)', t || '_f', t);
  EXECUTE format('CREATE INDEX %I ON %I (g)', t || '_g', t);
  EXECUTE format('CREATE INDEX %I ON %I (h)', t || '_h', t);
  EXECUTE format('CREATE INDEX %I ON %I (n, g)', t || '_ng', t);
  EXECUTE format('CREATE INDEX %I ON %I (n DESC, c)', t || '_nc', t);
  EXECUTE format('CREATE INDEX %I ON %I (a, e DESC, d)', t || '_aed', t);
  EXECUTE format('CREATE INDEX %I ON %I ((b %% 100))', t || '_expr', t);
  EXECUTE format('CREATE INDEX %I ON %I (u)', t || '_u', t);
  EXECUTE format('CREATE INDEX %I ON %I (u DESC)', t || '_ud', t);
  EXECUTE format('CREATE INDEX %I ON %I (n, u)', t || '_nu', t);
  -- not taken: four key columns, four words (two uuids), an INCLUDE
  -- column, a text key
  EXECUTE format('CREATE INDEX %I ON %I (u, u DESC)', t || '_uu', t);
  EXECUTE format('CREATE INDEX %I ON %I (n, b, c, a)', t || '_four', t);
  EXECUTE format('CREATE INDEX %I ON %I (b) INCLUDE (c)', t || '_incl', t);
  EXECUTE format('CREATE INDEX %I ON %I ((id::text))', t || '_text', t);
END $$;
-- one load into 'on' and the same into 'off', each setting in turn
CREATE FUNCTION ks_pair(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  m text;
BEGIN
  SET LOCAL directpath.index_key_sort = off;
  EXECUTE replace(sql, '@', 'ks_off');
  SET LOCAL directpath.index_key_sort = on;
  EXECUTE replace(sql, '@', 'ks_on');
  SELECT index_maintenance INTO m FROM directpath.last_statement();
  RETURN m;
END $$;
CREATE FUNCTION ks_compare() RETURNS TABLE (cols text, same boolean)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT c, ks_same_order('ks_on', 'ks_off', c)
  FROM unnest(ARRAY['id', 'a, id', 'b DESC, id', 'c, id', 'd, id', 'e, id',
                    'f, id', 'g, id', 'h, id', 'n, g, id', 'n DESC, c, id',
                    'a, e DESC, d, id', 'u, id', 'u DESC, id', 'n, u, id']) c;
END $$;

-- existing storage with rows: each batch sorted and merged into the trees
SELECT ks_table('ks_on'), ks_table('ks_off');
INSERT INTO ks_on SELECT * FROM ks_src WHERE id % 20 = 0;
INSERT INTO ks_off SELECT * FROM ks_src WHERE id % 20 = 0;
SELECT ks_pair('/*+ APPEND */ INSERT INTO @ SELECT * FROM ks_src WHERE id % 20 <> 0 AND id <= 30000 ORDER BY hashint4(id::int)') IS NOT NULL;
SELECT * FROM ks_check('ks_on');
SELECT * FROM ks_compare();
-- keys that all sort after the trees' (appended), then a large load (the
-- non-unique indexes' entries merged at the end)
SELECT ks_pair('/*+ APPEND */ INSERT INTO @ SELECT * FROM ks_src WHERE id % 20 <> 0 AND id > 30000');
SELECT * FROM ks_check('ks_on');
SELECT * FROM ks_compare();
SELECT (SELECT count(*) FROM ks_on) AS on_rows, (SELECT count(*) FROM ks_off) AS off_rows,
       NOT EXISTS (SELECT * FROM ks_on EXCEPT SELECT * FROM ks_off) AS same_rows;

-- NULL keys after many others, and entries past maintenance_work_mem:
-- the sort hands what it took to core's tuplesort
TRUNCATE ks_on, ks_off;
INSERT INTO ks_on SELECT * FROM ks_src WHERE id % 100 = 0;
INSERT INTO ks_off SELECT * FROM ks_src WHERE id % 100 = 0;
SET maintenance_work_mem = '1MB';
SELECT ks_pair($$/*+ APPEND */ INSERT INTO @
  SELECT id, CASE WHEN id % 5000 = 7 THEN NULL ELSE a END, b,
         CASE WHEN id > 40000 THEN NULL ELSE c END, d, e, f,
         CASE WHEN id % 3 = 0 THEN NULL ELSE g END, h,
         CASE WHEN id % 1000 = 1 THEN NULL ELSE n END,
         CASE WHEN id % 4 = 0 THEN NULL ELSE u END
  FROM ks_src WHERE id % 100 <> 0$$) IS NOT NULL;
RESET maintenance_work_mem;
SELECT * FROM ks_check('ks_on');
SELECT * FROM ks_compare();
SELECT NOT EXISTS (SELECT * FROM ks_on EXCEPT SELECT * FROM ks_off) AS same_rows;
-- nulls sort last in every column that has them, as core's sort puts them
SELECT (SELECT count(*) FROM (SELECT a FROM ks_on ORDER BY a, id) s) AS rows,
       (SELECT a FROM ks_on ORDER BY a DESC NULLS FIRST LIMIT 1) AS first_desc;

-- entries past maintenance_work_mem without NULL keys, into tables left
-- empty by an earlier transaction (every btree's entries kept for the end):
-- the sort words go to temporary files in sorted runs, merged when read
TRUNCATE ks_on, ks_off;
SET maintenance_work_mem = '1MB';
SELECT ks_pair('/*+ APPEND */ INSERT INTO @ SELECT * FROM ks_src ORDER BY hashint4(id::int)');
SELECT * FROM ks_check('ks_on');
SELECT * FROM ks_compare();
SELECT NOT EXISTS (SELECT * FROM ks_on EXCEPT SELECT * FROM ks_off) AS same_rows;
-- a duplicate of the unique index is found across the runs
TRUNCATE ks_on;
/*+ APPEND */ INSERT INTO ks_on SELECT * FROM ks_src UNION ALL SELECT * FROM ks_src WHERE id = 777;
SELECT count(*) FROM ks_on;
RESET maintenance_work_mem;

-- new storage: the indexes built from entries sorted during the load (a
-- unique index's sort must check duplicates: core's tuplesort)
BEGIN;
DROP TABLE ks_on, ks_off;
SELECT ks_table('ks_on'), ks_table('ks_off');
SELECT ks_pair('/*+ APPEND */ INSERT INTO @ SELECT * FROM ks_src ORDER BY hashint4(id::int)');
COMMIT;
SELECT * FROM ks_check('ks_on');
SELECT * FROM ks_compare();
SELECT NOT EXISTS (SELECT * FROM ks_on EXCEPT SELECT * FROM ks_off) AS same_rows;
-- a duplicate in the unique index of new storage fails as before
BEGIN;
TRUNCATE ks_on;
/*+ APPEND */ INSERT INTO ks_on SELECT * FROM ks_src UNION ALL SELECT * FROM ks_src WHERE id = 777;
ROLLBACK;

-- COPY and PARALLEL(1) sort the same way
TRUNCATE ks_on, ks_off;
INSERT INTO ks_on SELECT * FROM ks_src WHERE id % 20 = 0;
INSERT INTO ks_off SELECT * FROM ks_src WHERE id % 20 = 0;
CREATE TABLE ks_copy AS SELECT * FROM ks_src WHERE id % 20 <> 0;
-- (a batch may also merge into a leaf, depending on how the workers' rows
-- fall into batches)
SELECT ks_pair($$/*+ APPEND PARALLEL(1) */ INSERT INTO @ SELECT * FROM ks_copy$$)
  LIKE 'sorted, merge%' AS sorted_and_merged;
SELECT * FROM ks_check('ks_on');
SELECT * FROM ks_compare();
SELECT NOT EXISTS (SELECT * FROM ks_on EXCEPT SELECT * FROM ks_off) AS same_rows;
-- the same into tables left empty, past maintenance_work_mem: the
-- leader's sort words in runs on disk
TRUNCATE ks_on, ks_off;
SET maintenance_work_mem = '1MB';
SELECT ks_pair($$/*+ APPEND PARALLEL(1) */ INSERT INTO @ SELECT * FROM ks_copy$$) IS NOT NULL;
RESET maintenance_work_mem;
SELECT * FROM ks_check('ks_on');
SELECT * FROM ks_compare();
SELECT NOT EXISTS (SELECT * FROM ks_on EXCEPT SELECT * FROM ks_off) AS same_rows;

-- entries that come in key order (a serial key; rows in their key's
-- order): the radix sort finds them sorted and moves nothing; in order but
-- for the last entry, or in reverse, it sorts them
BEGIN;
CREATE TABLE ks_asc (k int8, n int4);
CREATE INDEX ks_asc_k ON ks_asc (k);
CREATE INDEX ks_asc_nk ON ks_asc (n, k);
CREATE TABLE ks_late (LIKE ks_asc INCLUDING INDEXES);
CREATE TABLE ks_rev (LIKE ks_asc INCLUDING INDEXES);
/*+ APPEND */ INSERT INTO ks_asc SELECT g, g / 10 FROM generate_series(1, 20000) g;
/*+ APPEND */ INSERT INTO ks_late
  SELECT * FROM (SELECT g, g / 10 FROM generate_series(1, 20000) g) s
  UNION ALL SELECT 0, 0;
/*+ APPEND */ INSERT INTO ks_rev SELECT g, g / 10 FROM generate_series(20000, 1, -1) g;
COMMIT;
SELECT * FROM ks_check('ks_asc') UNION ALL SELECT * FROM ks_check('ks_late')
  UNION ALL SELECT * FROM ks_check('ks_rev');
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT (SELECT k FROM ks_late ORDER BY k LIMIT 1) AS late_first,
       (SELECT k FROM ks_rev ORDER BY k LIMIT 1) AS rev_first,
       (SELECT array_agg(k) FROM (SELECT k FROM ks_late WHERE n = 0 ORDER BY n, k) s) AS late_n0;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE ks_asc, ks_late, ks_rev;

DROP TABLE ks_on, ks_off, ks_src, ks_copy;
DROP FUNCTION ks_check, ks_same_order, ks_table, ks_pair, ks_compare;
DROP DOMAIN ks_dom;
