--
-- Freezing: only under COPY FREEZE's conditions.
--
SET directpath.min_bytes = 0;
CREATE EXTENSION IF NOT EXISTS pg_visibility;
CREATE TABLE fz (a int, b text);
/*+ APPEND */ INSERT INTO fz SELECT g, 'old' FROM generate_series(1, 1000) g;

-- existing storage: not frozen, nothing in the VM
/*+ APPEND */ INSERT INTO fz SELECT g, 'x' FROM generate_series(1, 5000) g;
SELECT path, frozen FROM directpath.last_statement();
SELECT all_visible, all_frozen FROM pg_visibility_map_summary('fz');

-- created in the transaction: frozen, every page all-visible and all-frozen
BEGIN;
CREATE TABLE fz2 (a int, b text);
/*+ APPEND */ INSERT INTO fz2 SELECT g, 'x' FROM generate_series(1, 5000) g;
SELECT path, frozen FROM directpath.last_statement();
COMMIT;
SELECT all_visible = pg_relation_size('fz2') / 8192 AS all_vis,
       all_frozen = pg_relation_size('fz2') / 8192 AS all_frz
  FROM pg_visibility_map_summary('fz2');
SELECT * FROM pg_check_frozen('fz2');
SELECT * FROM pg_check_visible('fz2');

-- truncated in the transaction, but the statement reads its target: not frozen
BEGIN;
TRUNCATE fz;
/*+ APPEND */ INSERT INTO fz SELECT g, 'x' FROM generate_series(1, 100) g;
/*+ APPEND */ INSERT INTO fz SELECT a + 100, b FROM fz;
SELECT path, frozen FROM directpath.last_statement();
COMMIT;
SELECT count(*) FROM fz;

-- truncated in an outer subtransaction: not frozen
BEGIN;
TRUNCATE fz;
SAVEPOINT s1;
/*+ APPEND */ INSERT INTO fz SELECT g, 'x' FROM generate_series(1, 5000) g;
SELECT path, frozen FROM directpath.last_statement();
COMMIT;

-- an open cursor (prior transaction activity): not frozen
BEGIN;
TRUNCATE fz;
DECLARE c CURSOR FOR SELECT 1;
/*+ APPEND */ INSERT INTO fz SELECT g, 'x' FROM generate_series(1, 5000) g;
SELECT path, frozen FROM directpath.last_statement();
COMMIT;

-- rolled-back savepoint discards frozen rows with their storage
BEGIN;
SAVEPOINT s1;
TRUNCATE fz;
/*+ APPEND */ INSERT INTO fz SELECT g, 'frozen' FROM generate_series(1, 5000) g;
SELECT path, frozen FROM directpath.last_statement();
ROLLBACK TO s1;
COMMIT;
SELECT b, count(*) FROM fz GROUP BY b;

-- a later VACUUM finds nothing to do on frozen pages
BEGIN;
TRUNCATE fz;
/*+ APPEND */ INSERT INTO fz SELECT g, 'v' FROM generate_series(1, 20000) g;
COMMIT;
SELECT all_frozen AS frozen_before FROM pg_visibility_map_summary('fz');
VACUUM fz;
SELECT all_frozen AS frozen_after FROM pg_visibility_map_summary('fz');
SELECT count(*) FROM pg_check_frozen('fz');
-- the last appended page, the only one with room left, is in the FSM
CREATE EXTENSION IF NOT EXISTS pg_freespacemap;
CREATE TABLE fsm (a int) WITH (fillfactor = 50);
/*+ APPEND */ INSERT INTO fsm SELECT generate_series(1, 10000);
SELECT count(*) AS pages_with_room FROM pg_freespace('fsm') WHERE avail > 0;
SELECT blkno = pg_relation_size('fsm') / 8192 - 1 AS is_last_page FROM pg_freespace('fsm') WHERE avail > 0;
DROP TABLE fz, fz2, fsm;

-- A cursor held over from an earlier transaction is a ready portal: no
-- freezing (COPY FREEZE's rule), and no hash-table scan left open by the
-- check (it used to warn "leaked hash_seq_search scan" at COMMIT).
BEGIN;
DECLARE held CURSOR WITH HOLD FOR SELECT 1;
COMMIT;
BEGIN;
CREATE TABLE fzc (a int);
/*+ APPEND */ INSERT INTO fzc SELECT generate_series(1, 3000);
SELECT path, frozen FROM directpath.last_statement();
COMMIT;
BEGIN;
TRUNCATE fzc;
/*+ APPEND */ COPY fzc FROM PROGRAM 'seq 1 3000';
SELECT path, frozen FROM directpath.last_statement();
COMMIT;
CLOSE held;
DROP TABLE fzc;
