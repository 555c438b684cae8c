--
-- Parallel direct path: /*+ APPEND PARALLEL(n) */ INSERT ... SELECT from one
-- table into a plain heap; workers build the pages, the leader writes them.
--
SET directpath.min_bytes = 0;
CREATE EXTENSION IF NOT EXISTS pg_visibility;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE TABLE par_src AS
  SELECT g AS id, md5(g::text) AS v, g % 7 AS k FROM generate_series(1, 200000) g;
VACUUM ANALYZE par_src;
CREATE TABLE par_t (id int NOT NULL, v text, k int CHECK (k >= 0));
CREATE TABLE par_s (LIKE par_t INCLUDING ALL);

-- the same rows as the serial direct path, in the leader's transaction
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, k FROM par_src WHERE k <> 3;
SELECT path, rows_inserted, parallel_workers > 0 AS parallel, parallel AS why_not
  FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO par_s SELECT id, v, k FROM par_src WHERE k <> 3;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
SELECT count(*), sum(id), sum(hashtext(v)), sum(k) FROM par_t;
SELECT count(*), sum(id), sum(hashtext(v)), sum(k) FROM par_s;
SELECT (SELECT count(*) FROM (SELECT * FROM par_t EXCEPT ALL SELECT * FROM par_s) d) AS only_parallel,
       (SELECT count(*) FROM (SELECT * FROM par_s EXCEPT ALL SELECT * FROM par_t) d) AS only_serial;
-- every tuple's t_ctid names its own place; the heap is sound
SELECT count(*) FROM par_t t WHERE (SELECT ctid FROM par_t WHERE ctid = t.ctid) IS NULL;
SELECT count(*) FROM verify_heapam('par_t');
-- nothing in the VM: the storage is not new
SELECT all_visible, all_frozen FROM pg_visibility_map_summary('par_t');

-- storage new in the transaction: frozen pages, every VM bit set
BEGIN;
CREATE TABLE par_f (id int NOT NULL, v text, k int);
/*+ APPEND PARALLEL(2) */ INSERT INTO par_f SELECT * FROM par_src;
SELECT path, frozen, parallel_workers > 0 AS parallel FROM directpath.last_statement();
COMMIT;
SELECT count(*), sum(id) FROM par_f;
SELECT all_visible = pg_relation_size('par_f') / 8192 AS all_vis,
       all_frozen = pg_relation_size('par_f') / 8192 AS all_frz
  FROM pg_visibility_map_summary('par_f');
SELECT count(*) FROM verify_heapam('par_f');
-- rolled back: nothing left
BEGIN;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_f SELECT * FROM par_src;
ROLLBACK;
SELECT count(*) FROM par_f;
-- in a subtransaction: the workers' rows carry its XID, rolled back with it
BEGIN;
SAVEPOINT s;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_f SELECT * FROM par_src WHERE id <= 50000;
SELECT parallel_workers > 0 AS parallel FROM directpath.last_statement();
ROLLBACK TO s;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_f SELECT * FROM par_src WHERE id > 150000;
COMMIT;
SELECT count(*), min(id) FROM par_f;

-- a row that needs TOAST goes to the leader, which stores it
CREATE TABLE par_big (id int, big text);
/*+ APPEND PARALLEL(2) */ INSERT INTO par_big
  SELECT id, CASE WHEN id % 1000 = 0 THEN repeat(v, 300) ELSE v END FROM par_src;
SELECT path, parallel_workers > 0 AS parallel FROM directpath.last_statement();
SELECT count(*), sum(length(big)), count(*) FILTER (WHERE length(big) > 9000) FROM par_big;
SELECT count(*) FROM verify_heapam('par_big', check_toast => true);

-- an error in a worker (or in the leader's own share: which one meets the
-- row varies, and a worker's error carries the context line "parallel
-- worker") fails the statement with the plain INSERT's SQLSTATE, message
-- and detail; nothing of the load is visible
CREATE FUNCTION par_error(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  m text;
  d text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || m || ' | ' || d;
END $$;
SELECT par_error('/*+ APPEND PARALLEL(2) */ INSERT INTO par_t
  SELECT CASE WHEN id = 150000 THEN NULL ELSE id END, v, k FROM par_src');
SELECT par_error('/*+ APPEND PARALLEL(2) */ INSERT INTO par_t
  SELECT id, v, k - 10 FROM par_src WHERE id = 123456');
SELECT count(*) FROM par_t;

-- a column list, a default and a dropped column: the row the INSERT forms
CREATE TABLE par_d (a int, dropme int, b text, c int DEFAULT 7);
ALTER TABLE par_d DROP COLUMN dropme;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_d (b, a) SELECT v, id FROM par_src;
SELECT path, rows_inserted, parallel_workers > 0 AS parallel FROM directpath.last_statement();
SELECT count(*), sum(a), sum(c), count(b) FROM par_d;
DROP TABLE par_d;

-- the setting asks for workers without the hint's PARALLEL
SET directpath.parallel_workers = 2;
/*+ APPEND */ INSERT INTO par_t SELECT id, v, k FROM par_src WHERE k = 3;
SELECT path, parallel_workers > 0 AS parallel FROM directpath.last_statement();
-- NOAPPEND and PARALLEL(0) keep it serial
/*+ APPEND PARALLEL(0) */ INSERT INTO par_t SELECT id, v, k FROM par_src WHERE k = 3;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
RESET directpath.parallel_workers;

-- indexes: the leader gives the workers' rows their entries as a serial
-- load gives its own (per batch on existing storage, built at the end on
-- new storage)
CREATE TABLE par_i (id int PRIMARY KEY, v text, k int);
CREATE INDEX par_i_v ON par_i (v);
/*+ APPEND PARALLEL(2) */ INSERT INTO par_i SELECT id, v, k FROM par_src WHERE id <= 100000;
SELECT path, rows_inserted, parallel_workers > 0 AS parallel FROM directpath.last_statement();
/*+ APPEND PARALLEL(2) */ INSERT INTO par_i SELECT id, v, k FROM par_src WHERE id > 100000;
SELECT path, rows_inserted, parallel_workers > 0 AS parallel FROM directpath.last_statement();
SELECT count(*), count(DISTINCT id), count(DISTINCT v) FROM par_i;
SELECT bt_index_check('par_i_pkey', true), bt_index_check('par_i_v', true);
-- a duplicate key: INSERT's error, nothing of the statement visible
SELECT par_error('/*+ APPEND PARALLEL(2) */ INSERT INTO par_i
  SELECT CASE WHEN id = 150000 THEN 5 ELSE id + 200000 END, v, k FROM par_src');
SELECT count(*) FROM par_i;
-- new storage: the entries sorted during the load, the index built at the end
BEGIN;
CREATE TABLE par_n (id int PRIMARY KEY, v text, k int);
/*+ APPEND PARALLEL(2) */ INSERT INTO par_n SELECT * FROM par_src;
SELECT path, index_maintenance, frozen, parallel_workers > 0 AS parallel
  FROM directpath.last_statement();
COMMIT;
SELECT bt_index_check('par_n_pkey', true);
SET enable_seqscan = off;
SELECT count(*), sum(id) FROM par_n WHERE id BETWEEN 1000 AND 1999;
RESET enable_seqscan;
DROP TABLE par_i, par_n;

-- a SELECT that is a plan, not a scan (src/parallel/parplan.c): every
-- process runs the whole plan, the blocks of its first table shared; each
-- load against the serial direct path of the same statement
CREATE TABLE par_dim AS SELECT g AS k, 'k' || g AS name FROM generate_series(0, 5) g;
CREATE UNIQUE INDEX ON par_dim (k);
VACUUM ANALYZE par_dim;
CREATE TABLE par_j (id int NOT NULL, v text, k int CHECK (k >= 0), name text);
CREATE TABLE par_js (LIKE par_j INCLUDING ALL);
CREATE FUNCTION par_join(q text, target text DEFAULT 'par_j')
RETURNS TABLE (workers boolean, why text, nrows bigint, same boolean)
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('TRUNCATE %I, par_js', target);
  EXECUTE '/*+ APPEND */ ' || replace(q, '@', 'par_js');
  EXECUTE '/*+ APPEND PARALLEL(2) */ ' || replace(q, '@', quote_ident(target));
  RETURN QUERY EXECUTE format(
    'SELECT s.parallel_workers > 0, s.parallel, s.rows_inserted,
            NOT EXISTS (SELECT * FROM %1$I EXCEPT ALL SELECT * FROM par_js)
            AND NOT EXISTS (SELECT * FROM par_js EXCEPT ALL SELECT * FROM %1$I)
       FROM directpath.last_statement() s', target);
END $$;
-- a hash join, a left join, a semi and an anti join
SELECT * FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_src s JOIN par_dim d USING (k)');
SELECT * FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_src s LEFT JOIN par_dim d USING (k)');
SELECT * FROM par_join($$INSERT INTO @ SELECT id, v, k, NULL FROM par_src s
  WHERE EXISTS (SELECT FROM par_dim d WHERE d.k = s.k AND d.name <> 'k2')$$);
SELECT * FROM par_join($$INSERT INTO @ SELECT id, v, k, NULL FROM par_src s
  WHERE NOT EXISTS (SELECT FROM par_dim d WHERE d.k = s.k AND d.name <> 'k2')$$);
-- three tables, a sort on top, a nested loop (parameterized inner side),
-- a merge join
SELECT * FROM par_join($$INSERT INTO @ SELECT s.id, s.v, s.k, d.name || e.name
  FROM par_src s JOIN par_dim d USING (k) JOIN par_dim e ON e.k = (s.k + 1) % 6 ORDER BY s.v$$);
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT * FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_src s JOIN par_dim d USING (k)');
SET enable_nestloop = off;
SET enable_mergejoin = on;
SELECT * FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_src s JOIN par_dim d USING (k)');
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_nestloop;
-- a partitioned source under the join: each partition's scan shared
CREATE TABLE par_psrc (id int, v text, k int) PARTITION BY RANGE (id);
CREATE TABLE par_psrc1 PARTITION OF par_psrc FOR VALUES FROM (MINVALUE) TO (70000);
CREATE TABLE par_psrc2 PARTITION OF par_psrc FOR VALUES FROM (70000) TO (MAXVALUE);
INSERT INTO par_psrc SELECT * FROM par_src;
VACUUM ANALYZE par_psrc;
SELECT * FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_psrc s JOIN par_dim d USING (k) WHERE s.id > 1000');
DROP TABLE par_psrc;
-- a partitioned target: the workers route the join's rows
CREATE TABLE par_jp (id int NOT NULL, v text, k int CHECK (k >= 0), name text) PARTITION BY HASH (id);
CREATE TABLE par_jp0 PARTITION OF par_jp FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE par_jp1 PARTITION OF par_jp FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE par_jp2 PARTITION OF par_jp FOR VALUES WITH (MODULUS 3, REMAINDER 2);
SELECT * FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_src s JOIN par_dim d USING (k)', 'par_jp');
SELECT count(*) > 0 AS each_leaf FROM par_jp0 UNION ALL SELECT count(*) > 0 FROM par_jp1;
SELECT count(*) FROM verify_heapam('par_jp1');
-- a CHECK violation in a worker fails the statement, nothing left
TRUNCATE par_j;
\set VERBOSITY terse
/*+ APPEND PARALLEL(2) */ INSERT INTO par_j SELECT s.id, s.v, s.k - 3, d.name FROM par_src s JOIN par_dim d USING (k);
\set VERBOSITY default
SELECT count(*) FROM par_j;
-- a SELECT that needs its rows in one place (aggregates, grouping): run
-- again as a SELECT in core's parallel query (src/parallel/pargather.c),
-- its rows loaded by the leader; a column left out is NULL
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT * FROM par_join('INSERT INTO @ SELECT max(id), max(v), k, NULL FROM par_src GROUP BY k');
SELECT * FROM par_join('INSERT INTO @ (k, id) SELECT k, count(*) FROM par_src GROUP BY k');
SELECT count(*), count(v), count(name), sum(id) FROM par_j;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
-- what keeps a plan serial, and why (core's planner kept from planning the
-- SELECT in parallel too)
SET parallel_setup_cost = 1e9;
SELECT workers, why FROM par_join('INSERT INTO @ SELECT max(id), max(v), k, NULL FROM par_src GROUP BY k');
SELECT workers, why FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_src s FULL JOIN par_dim d USING (k)');
SELECT workers, why FROM par_join($$INSERT INTO @ SELECT id, v, k,
  (SELECT name FROM par_dim d WHERE d.k = s.k) FROM par_src s$$);
SELECT workers, why FROM par_join($$INSERT INTO @ SELECT s.id, s.v, s.k, d.name
  FROM par_src s JOIN par_dim d TABLESAMPLE SYSTEM (100) USING (k)$$);
SELECT workers, why FROM par_join('INSERT INTO @ SELECT id, v, k, (count(*) OVER ())::text FROM par_src');
CREATE TEMP TABLE par_tdim AS SELECT * FROM par_dim;
SELECT workers, why FROM par_join('INSERT INTO @ SELECT s.id, s.v, s.k, d.name FROM par_src s JOIN par_tdim d USING (k)');
DROP TABLE par_tdim;
SET plan_cache_mode = force_generic_plan;
PREPARE par_p(int) AS /*+ APPEND PARALLEL(2) */ INSERT INTO par_j
  SELECT s.id, s.v, s.k, d.name FROM par_src s JOIN par_dim d USING (k) WHERE s.k <> $1;
EXECUTE par_p(3);
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
DEALLOCATE par_p;
RESET plan_cache_mode;
RESET parallel_setup_cost;
DROP TABLE par_j, par_js, par_jp, par_dim;
DROP FUNCTION par_join;

-- what runs serially, and why (core's planner kept from planning the SELECT
-- in parallel too)
SET parallel_setup_cost = 1e9;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, k FROM par_src LIMIT 10;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT s.id, s.v, s.k FROM par_src s JOIN par_src u USING (id) WHERE u.k = 1;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
CREATE TEMP TABLE par_tmp AS SELECT * FROM par_src LIMIT 1000;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT * FROM par_tmp;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, (random() * 0)::int FROM par_src;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
-- RETURNING of a scan's rows: in parallel, the rows in the scan's order
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, k FROM par_src WHERE id = 1 RETURNING id;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
CREATE FUNCTION par_noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
-- a statement trigger fires in the leader: the load stays parallel
CREATE TRIGGER par_noop AFTER INSERT ON par_big FOR EACH STATEMENT EXECUTE FUNCTION par_noop();
/*+ APPEND PARALLEL(2) */ INSERT INTO par_big SELECT id, v FROM par_src;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
BEGIN ISOLATION LEVEL SERIALIZABLE;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, k FROM par_src;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
ROLLBACK;
SET max_parallel_workers = 0;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, k FROM par_src;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
RESET max_parallel_workers;
RESET directpath.min_bytes;
/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, k FROM par_src WHERE id < 0;
SELECT path, parallel_workers, parallel FROM directpath.last_statement();
SET directpath.min_bytes = 0;
RESET parallel_setup_cost;

-- EXPLAIN ANALYZE names the workers
CREATE FUNCTION par_explain(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Direct Path|Parallel' THEN
      RETURN NEXT regexp_replace(line, '\d+$', 'N');
    END IF;
  END LOOP;
END $$;
SELECT par_explain('/*+ APPEND PARALLEL(2) */ INSERT INTO par_t SELECT id, v, k FROM par_src WHERE id <= 100');
SELECT count(*) FROM par_t;

DROP TABLE par_src, par_t, par_s, par_f, par_big;
DROP FUNCTION par_noop();
DROP FUNCTION par_explain(text);
DROP FUNCTION par_error(text);
