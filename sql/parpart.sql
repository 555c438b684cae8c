--
-- Parallel loads into partitioned targets: workers route each row with
-- core's tuple routing and place it on its leaf's page; the leader writes
-- every leaf's pages and does its index work.  Each load is compared with
-- a serial load of the same rows into a table of the same shape.
--
SET directpath.min_bytes = 0;
CREATE EXTENSION IF NOT EXISTS pg_visibility;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE TABLE pp_src AS
  SELECT g AS id, date '2024-01-01' + (g % 300) AS d, g % 5 AS k,
         CASE WHEN g % 17 = 0 THEN NULL ELSE md5(g::text) END AS v
    FROM generate_series(1, 200000) g;
COPY pp_src TO PROGRAM 'cat > dp_pp_src.dat';

-- range partitions by month: one of another column order with a dropped
-- column, one sub-partitioned by list, one with a CHECK of its own, the
-- default partition; a btree on the parent
CREATE FUNCTION pp_make(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TABLE %I (id int NOT NULL, d date, k int, v text) PARTITION BY RANGE (d)', t);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (''2024-01-01'') TO (''2024-03-01'')', t || '_1', t);
  EXECUTE format('CREATE TABLE %I (v text, x int, k int, d date, id int NOT NULL)', t || '_2');
  EXECUTE format('ALTER TABLE %I DROP COLUMN x', t || '_2');
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (''2024-03-01'') TO (''2024-06-01'')', t, t || '_2');
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (''2024-06-01'') TO (''2024-09-01'') PARTITION BY LIST (k)', t || '_3', t);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES IN (0, 1, 2)', t || '_3a', t || '_3');
  EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t || '_3b', t || '_3');
  EXECUTE format('CREATE TABLE %I PARTITION OF %I (CHECK (k < 5)) FOR VALUES FROM (''2024-09-01'') TO (''2024-10-01'')', t || '_4', t);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t || '_d', t);
  EXECUTE format('CREATE INDEX ON %I (k, d)', t);
END $$;
SELECT pp_make('pp_t'), pp_make('pp_s');

CREATE FUNCTION pp_same(a text, b text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
  only_a bigint;
  only_b bigint;
  leaves text;
BEGIN
  EXECUTE format('SELECT count(*) FROM %I', a) INTO n;
  EXECUTE format('SELECT count(*) FROM (SELECT * FROM %I EXCEPT ALL SELECT * FROM %I) x', a, b) INTO only_a;
  EXECUTE format('SELECT count(*) FROM (SELECT * FROM %I EXCEPT ALL SELECT * FROM %I) x', b, a) INTO only_b;
  EXECUTE format('SELECT string_agg(c::text, '' '' ORDER BY r) FROM (SELECT tableoid::regclass::text AS r, count(*) AS c FROM %I GROUP BY 1) x', a) INTO leaves;
  RETURN format('%s rows (%s), %s only in %s, %s only in %s', n, leaves, only_a, a, only_b, b);
END $$;
-- every leaf's heap and indexes are sound
CREATE FUNCTION pp_check(t text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  bad bigint := 0;
  n bigint;
  leaf regclass;
  idx regclass;
BEGIN
  FOR leaf IN SELECT relid FROM pg_partition_tree(t) WHERE isleaf LOOP
    SELECT count(*) INTO n FROM verify_heapam(leaf, check_toast => true);
    bad := bad + n;
    FOR idx IN SELECT indexrelid FROM pg_index WHERE indrelid = leaf LOOP
      PERFORM bt_index_check(idx, true);
    END LOOP;
  END LOOP;
  RETURN bad || ' problems';
END $$;
CREATE FUNCTION pp_report() RETURNS text LANGUAGE sql AS $$
  SELECT format('%s, %s rows, %s relations, parallel: %s%s', path, rows_inserted,
                relations, parallel_workers > 0, coalesce(' (' || nullif(parallel, '') || ')', ''))
    FROM directpath.last_statement()
$$;

-- INSERT ... SELECT
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_t SELECT * FROM pp_src;
SELECT pp_report();
/*+ APPEND */ INSERT INTO pp_s SELECT * FROM pp_src;
SELECT pp_report();
SELECT pp_same('pp_t', 'pp_s');
SELECT pp_check('pp_t');
-- COPY, appended to the same leaves (their indexes maintained per batch)
/*+ APPEND PARALLEL(2) */ COPY pp_t FROM 'dp_pp_src.dat';
SELECT pp_report();
/*+ APPEND */ COPY pp_s FROM 'dp_pp_src.dat';
SELECT pp_same('pp_t', 'pp_s');
SELECT pp_check('pp_t');
SET enable_seqscan = off;
SELECT count(*), (SELECT count(*) FROM pp_s WHERE k = 0 AND d = '2024-07-04') AS serial
  FROM pp_t WHERE k = 0 AND d = '2024-07-04';
RESET enable_seqscan;

-- leaves new in the transaction: every page frozen and all-visible
BEGIN;
SELECT pp_make('pp_n');
/*+ APPEND PARALLEL(2) */ COPY pp_n FROM 'dp_pp_src.dat';
SELECT pp_report();
SELECT frozen FROM directpath.last_statement();
COMMIT;
SELECT l.relid::regclass,
       all_visible = pg_relation_size(l.relid) / 8192 AS all_vis,
       all_frozen = pg_relation_size(l.relid) / 8192 AS all_frz
  FROM pg_partition_tree('pp_n') l, pg_visibility_map_summary(l.relid)
 WHERE l.isleaf ORDER BY 1;
SELECT pp_check('pp_n');
TRUNCATE pp_s;
/*+ APPEND */ COPY pp_s FROM 'dp_pp_src.dat';
SELECT pp_same('pp_n', 'pp_s');
DROP TABLE pp_n;

-- rows that need TOAST go to the leader, which routes and stores them
TRUNCATE pp_t, pp_s;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_t
  SELECT id, d, k, CASE WHEN id % 997 = 0 THEN repeat(v, 400) ELSE v END FROM pp_src;
SELECT pp_report();
/*+ APPEND */ INSERT INTO pp_s
  SELECT id, d, k, CASE WHEN id % 997 = 0 THEN repeat(v, 400) ELSE v END FROM pp_src;
SELECT pp_same('pp_t', 'pp_s');
SELECT pp_check('pp_t');

-- INSERT ... SELECT from a partitioned table: its partitions (those left
-- after plan-time pruning) scanned one after the other by every process
CREATE TABLE pp_stage (id int, d date, k int, v text) PARTITION BY RANGE (id);
CREATE TABLE pp_stage_1 PARTITION OF pp_stage FOR VALUES FROM (MINVALUE) TO (50001);
CREATE TABLE pp_stage_2 (v text, k int, d date, id int);
ALTER TABLE pp_stage ATTACH PARTITION pp_stage_2 FOR VALUES FROM (50001) TO (150001);
CREATE TABLE pp_stage_3 PARTITION OF pp_stage FOR VALUES FROM (150001) TO (MAXVALUE);
INSERT INTO pp_stage SELECT * FROM pp_src;
VACUUM ANALYZE pp_stage;
TRUNCATE pp_t, pp_s;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_t SELECT * FROM pp_stage WHERE k <> 2;
SELECT pp_report();
/*+ APPEND */ INSERT INTO pp_s SELECT * FROM pp_stage WHERE k <> 2;
SELECT pp_same('pp_t', 'pp_s');
SELECT pp_check('pp_t');
-- pruned to two partitions, into a plain table
CREATE TABLE pp_p (id int, d date, k int, v text);
CREATE TABLE pp_ps (LIKE pp_p);
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_p SELECT * FROM pp_stage WHERE id > 60000;
SELECT pp_report();
INSERT INTO pp_ps SELECT * FROM pp_src WHERE id > 60000;
SELECT pp_same('pp_p', 'pp_ps');
-- pruning at run time (a parameter) keeps it serial
PREPARE pp_q(int) AS /*+ APPEND PARALLEL(2) */ INSERT INTO pp_p SELECT * FROM pp_stage WHERE id > $1;
SET plan_cache_mode = force_generic_plan;
EXECUTE pp_q(190000);
SELECT pp_report();
RESET plan_cache_mode;
DEALLOCATE pp_q;
DROP TABLE pp_stage, pp_p, pp_ps;

-- errors: the plain statement's SQLSTATE, message and detail; nothing
-- of the load is visible
CREATE FUNCTION pp_error(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  m text;
  d text;
  c text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL,
                          c = PG_EXCEPTION_CONTEXT;
  RETURN SQLSTATE || ': ' || m || ' | ' || d ||
         coalesce(' | ' || substring(c from 'COPY [a-z_]+, line \d+'), '');
END $$;
-- the parallel load's error, and whether the plain statement's is the same
CREATE FUNCTION pp_errors(q text) RETURNS text LANGUAGE sql AS $$
  SELECT pp_error('/*+ APPEND PARALLEL(2) */ ' || q) ||
         CASE WHEN pp_error('/*+ APPEND PARALLEL(2) */ ' || q) = pp_error('/*+ NOAPPEND */ ' || q)
              THEN ' (plain: the same)' ELSE ' (plain: ' || pp_error('/*+ NOAPPEND */ ' || q) || ')' END
$$;
-- no partition takes the row (one row of the input): core's message, and
-- in a COPY the row's line
CREATE TABLE pp_nd (id int, d date) PARTITION BY RANGE (d);
CREATE TABLE pp_nd_1 PARTITION OF pp_nd FOR VALUES FROM ('2024-01-01') TO ('2024-12-01');
COPY (SELECT id, CASE WHEN id = 123457 THEN date '2025-01-01' ELSE d END FROM pp_src ORDER BY id)
  TO PROGRAM 'cat > dp_pp_nd.dat';
SELECT pp_errors('INSERT INTO pp_nd
  SELECT id, CASE WHEN id = 123457 THEN date ''2025-01-01'' ELSE d END FROM pp_src');
SELECT pp_errors('COPY pp_nd FROM ''dp_pp_nd.dat''');
SELECT count(*) FROM pp_nd;
-- a leaf's own CHECK constraint
SELECT pp_errors('INSERT INTO pp_t
  SELECT id, date ''2024-09-10'', CASE WHEN id = 123458 THEN 9 ELSE k END, v FROM pp_src');
-- NOT NULL, in a leaf of another column order
SELECT pp_errors('INSERT INTO pp_t
  SELECT CASE WHEN id = 150000 THEN NULL ELSE id END, date ''2024-04-01'', k, v FROM pp_src');
-- a partition targeted itself: its bound checked for every row
SELECT pp_errors('INSERT INTO pp_t_1
  SELECT id, CASE WHEN id = 123459 THEN date ''2024-05-05'' ELSE date ''2024-01-15'' END, k, v FROM pp_src');
SELECT (SELECT count(*) FROM pp_t) = (SELECT count(*) FROM pp_s) AS nothing_visible;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_t_1 SELECT id, date '2024-01-15', k, v FROM pp_src;
SELECT pp_report();

-- hash partitions beyond what one placer keeps open (DP_PLACER_OPEN_PAGES):
-- the least recently used leaf's page goes out partly filled
CREATE TABLE pp_h (id int, v text) PARTITION BY HASH (id);
DO $$ BEGIN
  FOR i IN 0..199 LOOP
    EXECUTE format('CREATE TABLE pp_h_%s PARTITION OF pp_h FOR VALUES WITH (MODULUS 200, REMAINDER %s)', i, i);
  END LOOP;
END $$;
CREATE TABLE pp_hs (LIKE pp_h);
/*+ APPEND PARALLEL(2) */ COPY pp_h FROM PROGRAM 'cut -f1,4 dp_pp_src.dat';
SELECT pp_report();
COPY pp_hs FROM PROGRAM 'cut -f1,4 dp_pp_src.dat';
SELECT pp_same('pp_h', 'pp_hs') ~ '^200000 rows .*, 0 only in pp_h, 0 only in pp_hs$' AS same;
SELECT count(*) FROM pg_partition_tree('pp_h') l WHERE l.isleaf AND pg_relation_size(l.relid) > 0;
SELECT pp_check('pp_h');

-- partitions whose rows need what a worker cannot do (a CHECK that is not
-- parallel safe) are held: the workers fill the other partitions and route
-- these rows to the leader, which loads them as a serial load does once the
-- workers are done.  A partition with an AFTER ROW trigger (pp_ht_4) is not
-- held: the leader queues its rows' events as it takes their pages; nor is
-- one whose triggers check foreign keys (pp_ht_1): the leader checks its
-- keys as a set at the end.  Each compared with the plain INSERT into a
-- table of the same shape.
CREATE FUNCTION pp_noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE TABLE pp_log (leaf text, id int);
CREATE FUNCTION pp_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO pp_log VALUES (TG_TABLE_NAME, NEW.id); RETURN NULL; END $$;
CREATE FUNCTION pp_small(int) RETURNS bool LANGUAGE plpgsql PARALLEL UNSAFE AS
  'BEGIN RETURN $1 < 5; END';
CREATE TABLE pp_ref (k int PRIMARY KEY);
INSERT INTO pp_ref SELECT generate_series(0, 9);
SELECT pp_make('pp_ht'), pp_make('pp_hq');
DO $$ DECLARE t text; BEGIN
  FOREACH t IN ARRAY ARRAY['pp_ht', 'pp_hq'] LOOP
    EXECUTE format('CREATE TRIGGER pp_log AFTER INSERT ON %I FOR EACH ROW EXECUTE FUNCTION pp_log()', t || '_4');
    EXECUTE format('ALTER TABLE %I ADD FOREIGN KEY (k) REFERENCES pp_ref', t || '_1');
    EXECUTE format('ALTER TABLE %I ADD CHECK (pp_small(k))', t || '_d');
  END LOOP;
END $$;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_ht SELECT * FROM pp_src;
SELECT pp_report();
SELECT count(*) AS logged FROM pp_log;
TRUNCATE pp_log;
INSERT INTO pp_hq SELECT * FROM pp_src;
SELECT pp_same('pp_ht', 'pp_hq');
SELECT count(*) AS logged FROM pp_log;
SELECT pp_check('pp_ht');
-- a row that fails its partition's foreign key (checked as a set) or a
-- held partition's CHECK fails the statement with core's error, and leaves
-- no row behind
TRUNCATE pp_ht;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_ht
  SELECT id, d, CASE WHEN id = 7230 THEN 42 ELSE k END, v FROM pp_src;
SELECT count(*) FROM pp_ht;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_ht
  SELECT id, CASE WHEN id = 9000 THEN date '2025-06-01' ELSE d END,
         CASE WHEN id = 9000 THEN 7 ELSE k END, v FROM pp_src;
SELECT count(*) FROM pp_ht;
-- a parallel COPY holds them too; a held row's error names its line, as
-- the plain COPY's does
TRUNCATE pp_log;
/*+ APPEND PARALLEL(2) */ COPY pp_ht FROM 'dp_pp_src.dat';
SELECT pp_report();
SELECT pp_same('pp_ht', 'pp_hq');
SELECT count(*) AS logged FROM pp_log;
TRUNCATE pp_ht, pp_hq;
COPY (SELECT id, d, CASE WHEN id = 150030 THEN 42 ELSE k END, v FROM pp_src ORDER BY id)
  TO PROGRAM 'cat > dp_pp_fk.dat';
COPY (SELECT id, CASE WHEN id = 170000 THEN date '2025-06-01' ELSE d END,
             CASE WHEN id = 170000 THEN 7 ELSE k END, v FROM pp_src ORDER BY id)
  TO PROGRAM 'cat > dp_pp_check.dat';
/*+ APPEND PARALLEL(2) */ COPY pp_ht FROM 'dp_pp_fk.dat';
COPY pp_hq FROM 'dp_pp_fk.dat';
/*+ APPEND PARALLEL(2) */ COPY pp_ht FROM 'dp_pp_check.dat';
COPY pp_hq FROM 'dp_pp_check.dat';
SELECT count(*) FROM pp_ht;
-- every partition held (an AFTER ROW trigger whose WHEN condition is not
-- parallel safe: the leader evaluates it in parallel mode): nothing for a
-- worker, the load runs serially, and every row's event fires
CREATE TABLE pp_all (id int, k int) PARTITION BY HASH (id);
CREATE TABLE pp_all_0 PARTITION OF pp_all FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pp_all_1 PARTITION OF pp_all FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TRIGGER pp_log AFTER INSERT ON pp_all_0 FOR EACH ROW
  WHEN (pp_small(NEW.k) OR NEW.k >= 5) EXECUTE FUNCTION pp_log();
CREATE TRIGGER pp_log AFTER INSERT ON pp_all_1 FOR EACH ROW
  WHEN (pp_small(NEW.k) OR NEW.k >= 5) EXECUTE FUNCTION pp_log();
TRUNCATE pp_log;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_all SELECT id, k FROM pp_src WHERE id <= 1000;
SELECT pp_report();
SELECT count(*) AS logged FROM pp_log;
DROP TABLE pp_ht, pp_hq, pp_log, pp_all;
DROP FUNCTION pp_log();
DROP FUNCTION pp_small(int);

-- what keeps a partitioned target serial or holds a partition, and why
-- (a statement trigger does neither: it fires in the leader, before or
-- after the load)
CREATE TRIGGER pp_noop AFTER INSERT ON pp_t FOR EACH STATEMENT EXECUTE FUNCTION pp_noop();
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_t SELECT * FROM pp_src WHERE id <= 1000;
SELECT pp_report();
DROP TRIGGER pp_noop ON pp_t;
ALTER TABLE pp_t_1 ADD FOREIGN KEY (k) REFERENCES pp_ref;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_t SELECT * FROM pp_src WHERE id <= 1000;
SELECT pp_report();
ALTER TABLE pp_t_1 DROP CONSTRAINT pp_t_1_k_fkey;
-- stored generated columns: computed by the workers (ExecInsert's order,
-- before the constraints: NOT NULL sees the computed value), unless an
-- expression is not parallel safe (the load then runs serially)
CREATE TABLE pp_g (id int, g int GENERATED ALWAYS AS (id * 2) STORED NOT NULL)
  PARTITION BY RANGE (id);
CREATE TABLE pp_g_1 PARTITION OF pp_g FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_g SELECT id FROM pp_src WHERE id <= 1000;
SELECT pp_report();
SELECT count(*), count(*) FILTER (WHERE g = id * 2) AS computed FROM pp_g;
CREATE FUNCTION pp_twice(int) RETURNS int IMMUTABLE PARALLEL UNSAFE LANGUAGE sql
  AS 'SELECT $1 * 2';
CREATE TABLE pp_gu (id int, g int GENERATED ALWAYS AS (pp_twice(id)) STORED);
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_gu SELECT id FROM pp_src WHERE id <= 1000;
SELECT pp_report();
SELECT count(*), count(*) FILTER (WHERE g = id * 2) AS computed FROM pp_gu;
DROP TABLE pp_gu;
DROP FUNCTION pp_twice(int);
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_t SELECT * FROM pp_src WHERE id <= 1000;
SELECT pp_report();
-- a partition key whose function is not parallel safe: routing it would
-- run that function in a worker
CREATE FUNCTION pp_key(int) RETURNS int IMMUTABLE PARALLEL UNSAFE LANGUAGE plpgsql
  AS 'BEGIN RETURN $1 % 10; END';
CREATE TABLE pp_k (id int) PARTITION BY LIST (pp_key(id));
CREATE TABLE pp_k_1 PARTITION OF pp_k FOR VALUES IN (0, 1, 2, 3, 4);
CREATE TABLE pp_k_2 PARTITION OF pp_k DEFAULT;
/*+ APPEND PARALLEL(2) */ INSERT INTO pp_k SELECT id FROM pp_src;
SELECT pp_report();
DROP TABLE pp_k;
DROP FUNCTION pp_key(int);

DROP TABLE pp_src, pp_t, pp_s, pp_nd, pp_h, pp_hs, pp_ref, pp_g;
DROP FUNCTION pp_make(text);
DROP FUNCTION pp_same(text, text);
DROP FUNCTION pp_check(text);
DROP FUNCTION pp_report();
DROP FUNCTION pp_errors(text);
DROP FUNCTION pp_error(text);
DROP FUNCTION pp_noop();
