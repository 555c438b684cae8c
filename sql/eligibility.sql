--
-- What falls back to the normal path, and how it is reported.
--
SET directpath.min_bytes = 0;
CREATE TABLE e (a int PRIMARY KEY, b text);

-- ON CONFLICT DO UPDATE whose SET assigns a column of the arbiter
/*+ APPEND */ INSERT INTO e SELECT g, 'x' FROM generate_series(1, 10) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
-- the rows the normal path inserted are counted
SELECT path, rows_inserted FROM directpath.last_statement();
-- DO NOTHING is direct (tests/test_upsert.py); its rows that conflict are
-- not counted
CREATE TABLE ed (a int PRIMARY KEY);
INSERT INTO ed SELECT generate_series(1, 6);
/*+ APPEND */ INSERT INTO ed SELECT g FROM generate_series(5, 14) g ON CONFLICT DO NOTHING;
SELECT path, rows_inserted FROM directpath.last_statement();
DROP TABLE ed;
-- DO UPDATE is direct for the new keys (tests/test_upsert_update.py); the
-- command counts the rows updated too, rows_inserted only those inserted
CREATE TABLE eu (a int PRIMARY KEY, b text);
INSERT INTO eu SELECT g, 'old' FROM generate_series(1, 6) g;
/*+ APPEND */ INSERT INTO eu SELECT g, 'new' FROM generate_series(5, 14) g ON CONFLICT (a) DO UPDATE SET b = excluded.b;
SELECT path, rows_inserted FROM directpath.last_statement();
SELECT b, count(*) FROM eu GROUP BY b ORDER BY b;
DROP TABLE eu;
-- but not with a key whose equal values can differ in their bytes
CREATE TABLE en (a numeric PRIMARY KEY);
/*+ APPEND */ INSERT INTO en SELECT g FROM generate_series(1, 10) g ON CONFLICT DO NOTHING;
DROP TABLE en;
EXPLAIN (COSTS OFF) /*+ APPEND */ INSERT INTO e SELECT g, 'x' FROM generate_series(1, 10) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
SELECT count(*) FROM e;

-- temporary table
CREATE TEMP TABLE et (a int);
/*+ APPEND */ INSERT INTO et SELECT generate_series(1, 10);

-- a user-defined volatile function could read the table mid-load
CREATE FUNCTION vol(int) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT $1';
/*+ APPEND */ INSERT INTO e SELECT vol(g), 'v' FROM generate_series(11, 20) g;
SELECT path, rows_inserted FROM directpath.last_statement();
-- built-in volatile functions are fine
/*+ APPEND */ INSERT INTO e SELECT g, CASE WHEN random() >= 0 THEN 'r' END FROM generate_series(21, 30) g;
SELECT path, rows_inserted FROM directpath.last_statement();

-- data-modifying WITH
/*+ APPEND */ WITH d AS (DELETE FROM e WHERE a > 25 RETURNING a, b) INSERT INTO e SELECT a + 1000, b FROM d;

-- BEFORE ROW trigger
CREATE FUNCTION br() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.b := NEW.b || '!'; RETURN NEW; END $$;
CREATE TRIGGER e_br BEFORE INSERT ON e FOR EACH ROW EXECUTE FUNCTION br();
/*+ APPEND */ INSERT INTO e SELECT g, 't' FROM generate_series(31, 35) g;
SELECT b, count(*) FROM e WHERE a BETWEEN 31 AND 35 GROUP BY b;
DROP TRIGGER e_br ON e;

-- a view with an INSTEAD OF trigger
CREATE VIEW ev AS SELECT * FROM e;
CREATE FUNCTION io() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO e VALUES (NEW.a, 'io'); RETURN NEW; END $$;
CREATE TRIGGER ev_io INSTEAD OF INSERT ON ev FOR EACH ROW EXECUTE FUNCTION io();
/*+ APPEND */ INSERT INTO ev SELECT g, 'x' FROM generate_series(36, 37) g;
-- an auto-updatable view without triggers goes direct to its base table
DROP TRIGGER ev_io ON ev;
BEGIN;
/*+ APPEND */ INSERT INTO ev SELECT g, 'view' FROM generate_series(38, 40) g;
SELECT path, rows_inserted FROM directpath.last_statement();
-- the base table is written under ShareRowExclusiveLock all the same
SELECT relation::regclass, mode FROM pg_locks
 WHERE locktype = 'relation' AND relation = 'e'::regclass AND pid = pg_backend_pid() ORDER BY mode;
COMMIT;

-- a hinted INSERT holds ShareRowExclusiveLock from parse analysis on
BEGIN;
/*+ APPEND */ INSERT INTO e SELECT g, 'lock' FROM generate_series(41, 42) g;
SELECT relation::regclass, mode FROM pg_locks
 WHERE locktype = 'relation' AND relation = 'e'::regclass AND pid = pg_backend_pid() ORDER BY mode;
COMMIT;

-- a partition with a BEFORE ROW trigger sends the whole statement back
CREATE TABLE ep (k int, b text) PARTITION BY LIST (k);
CREATE TABLE ep1 PARTITION OF ep FOR VALUES IN (1);
CREATE TABLE ep2 PARTITION OF ep FOR VALUES IN (2);
CREATE TRIGGER ep2_br BEFORE INSERT ON ep2 FOR EACH ROW EXECUTE FUNCTION br();
/*+ APPEND */ INSERT INTO ep SELECT 1 + g % 2, 'x' FROM generate_series(1, 10) g;
SELECT tableoid::regclass, b, count(*) FROM ep GROUP BY 1, 2 ORDER BY 1;

-- small statements: below directpath.min_bytes the rows go the normal way;
-- they say so at DEBUG1 only (no NOTICE per small statement), and in
-- last_statement()
SET directpath.min_bytes = '8kB';
/*+ APPEND */ INSERT INTO e SELECT g, 'small' FROM generate_series(101, 103) g;
SELECT path, reason, rows_inserted, pages_written FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO e SELECT g, 'large' FROM generate_series(2001, 4000) g;
SELECT path, reason, rows_inserted, pages_written > 0 AS wrote FROM directpath.last_statement();
-- VALUES known to be small are refused at plan time, without the strong lock
BEGIN;
/*+ APPEND */ INSERT INTO e VALUES (104, 'values'), (105, 'values');
SELECT path, reason, rows_inserted FROM directpath.last_statement();
SELECT mode FROM pg_locks WHERE relation = 'e'::regclass AND pid = pg_backend_pid() ORDER BY mode;
COMMIT;
EXPLAIN (COSTS OFF) /*+ APPEND */ INSERT INTO e VALUES (106, 'values');
-- a large constant is not small
/*+ APPEND */ INSERT INTO e VALUES (107, repeat('x', 9000));
SELECT path, rows_inserted FROM directpath.last_statement();

-- the message level is configurable
SET directpath.fallback_message_level = warning;
/*+ APPEND */ INSERT INTO e SELECT g, 'x' FROM generate_series(1, 3) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
SET directpath.fallback_message_level = debug;
/*+ APPEND */ INSERT INTO e SELECT g, 'x' FROM generate_series(1, 3) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
RESET directpath.fallback_message_level;

-- no hint, default mode: no DirectPath node at all
EXPLAIN (COSTS OFF) INSERT INTO e SELECT g, 'x' FROM generate_series(1, 10) g;

-- mode = always: a statement refused at plan time keeps core's plan
-- untouched (no DirectPath node), and last_statement() still says why
SET directpath.mode = always;
EXPLAIN (COSTS OFF) INSERT INTO e SELECT g, 'x' FROM generate_series(1, 10) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
INSERT INTO e SELECT g, 'a' FROM generate_series(5001, 5010) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
SELECT path, reason, rows_inserted FROM directpath.last_statement();
WITH w AS (INSERT INTO e SELECT g, 'w' FROM generate_series(5011, 5015) g RETURNING a)
  INSERT INTO e SELECT a + 100, 'w2' FROM w;
SELECT path, reason FROM directpath.last_statement();
-- a prepared statement reports its reason at every execution, also from
-- its cached generic plan
SET plan_cache_mode = force_generic_plan;
PREPARE oc(int) AS INSERT INTO e SELECT g, 'p' FROM generate_series($1, $1 + 4) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
EXECUTE oc(6001);
SELECT path, reason, rows_inserted FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO e SELECT g, 'd' FROM generate_series(7001, 7010) g;
EXECUTE oc(6001);
SELECT path, reason, rows_inserted FROM directpath.last_statement();
DEALLOCATE oc;
RESET plan_cache_mode;
-- the hinted statement keeps the node that shows the reason
EXPLAIN (COSTS OFF) /*+ APPEND */ INSERT INTO e SELECT g, 'x' FROM generate_series(1, 10) g ON CONFLICT (a) DO UPDATE SET a = excluded.a;
RESET directpath.mode;

SELECT count(*) FROM e;
DROP VIEW ev;
DROP TABLE e, ep;
DROP FUNCTION vol(int), br(), io();
