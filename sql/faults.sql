--
-- Errors at every point of a load leave nothing behind, and leave no
-- checkpoint delay behind (the CHECKPOINT after each would hang).
--
SET directpath.min_bytes = 0;
SET directpath.batch_pages = 8;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE TABLE fl (a int PRIMARY KEY, b text);
INSERT INTO fl SELECT g, 'before' FROM generate_series(1, 100) g;

CREATE FUNCTION fault_load(point text, new_storage bool) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('directpath.fault_point', point, true);
	IF new_storage THEN
		TRUNCATE fl;
	END IF;
	INSERT /*+ APPEND */ INTO fl SELECT g, 'load' FROM generate_series(1001, 20000) g;
	RETURN 'no fault';
EXCEPTION WHEN internal_error THEN
	RETURN SQLERRM;
END $$;

SELECT p, fault_load(p, false) FROM unnest(ARRAY['first_batch', 'batch_wal', 'batch_written', 'batch_done', 'finish']) p;
CHECKPOINT;
SELECT p, fault_load(p, true) FROM unnest(ARRAY['first_batch', 'batch_wal', 'before_index_rebuild', 'btree_leaves', 'after_index_rebuild', 'finish']) p;
CHECKPOINT;
-- freezing needs a top-level statement (no snapshot registered before it)
BEGIN;
TRUNCATE fl;
SET LOCAL directpath.fault_point = 'before_vm';
/*+ APPEND */ INSERT INTO fl SELECT g, 'frozen' FROM generate_series(1001, 20000) g;
ROLLBACK;
CHECKPOINT;
SELECT b, count(*) FROM fl GROUP BY b;
SELECT count(*) FROM verify_heapam('fl');
SELECT bt_index_check('fl_pkey', true);
-- the Nth hit
SET directpath.fault_point = 'batch_written';
SET directpath.fault_hit = 3;
SET directpath.fault_action = notice;
/*+ APPEND */ INSERT INTO fl SELECT g, 'third' FROM generate_series(20001, 40000) g;
RESET directpath.fault_point;
RESET directpath.fault_hit;
RESET directpath.fault_action;
SELECT b, count(*) FROM fl GROUP BY b ORDER BY b;
DROP TABLE fl;
DROP FUNCTION fault_load(text, bool);
