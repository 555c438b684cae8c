--
-- Foreign keys of directly written rows, checked once per batch, against a
-- plain INSERT or COPY of the same rows (directpath.mode = off).
--
SET directpath.min_bytes = 0;
SET directpath.batch_pages = 8;
CREATE TABLE dim1 (id int PRIMARY KEY, n text);
CREATE TABLE dim2 (a bigint, b text, PRIMARY KEY (a, b));
INSERT INTO dim1 SELECT g, 'd' || g FROM generate_series(1, 1000) g;
INSERT INTO dim2 SELECT g, 'x' FROM generate_series(1, 100) g;
-- an int key referencing bigint (the constraint's cross-type operator)
CREATE TABLE fact (id int, d1 int REFERENCES dim1, d2a int, d2b text, v int,
  FOREIGN KEY (d2a, d2b) REFERENCES dim2 MATCH FULL);

/*+ APPEND */ INSERT INTO fact SELECT g, g % 1000 + 1, g % 100 + 1, 'x', g
  FROM generate_series(1, 20000) g;
SELECT path, rows_inserted, foreign_keys FROM directpath.last_statement();
-- NULL keys: MATCH SIMPLE skips a NULL column, MATCH FULL an all-NULL key
/*+ APPEND */ INSERT INTO fact SELECT g, NULL, NULL, NULL, g FROM generate_series(1, 5000) g;
SELECT count(*) FROM fact;

-- violations: the first row in input order, as a plain INSERT reports it;
-- here two constraints fail, in different rows of one batch
\set VERBOSITY default
/*+ APPEND */ INSERT INTO fact SELECT g, CASE WHEN g = 900 THEN -1 ELSE 1 END,
  CASE WHEN g = 300 THEN 555 ELSE 1 END, 'x', g FROM generate_series(1, 2000) g;
SET directpath.mode = off;
INSERT INTO fact SELECT g, CASE WHEN g = 900 THEN -1 ELSE 1 END,
  CASE WHEN g = 300 THEN 555 ELSE 1 END, 'x', g FROM generate_series(1, 2000) g;
RESET directpath.mode;
-- the same row fails both: the first constraint in trigger order
/*+ APPEND */ INSERT INTO fact SELECT g, CASE WHEN g = 700 THEN -1 ELSE 1 END,
  CASE WHEN g = 700 THEN 555 ELSE 1 END, 'x', g FROM generate_series(1, 2000) g;
SET directpath.mode = off;
INSERT INTO fact SELECT g, CASE WHEN g = 700 THEN -1 ELSE 1 END,
  CASE WHEN g = 700 THEN 555 ELSE 1 END, 'x', g FROM generate_series(1, 2000) g;
RESET directpath.mode;
-- MATCH FULL with a NULL and a value
/*+ APPEND */ INSERT INTO fact SELECT g, 1, CASE WHEN g = 1500 THEN NULL ELSE 1 END, 'x', g
  FROM generate_series(1, 2000) g;
SET directpath.mode = off;
INSERT INTO fact SELECT g, 1, CASE WHEN g = 1500 THEN NULL ELSE 1 END, 'x', g
  FROM generate_series(1, 2000) g;
RESET directpath.mode;
-- COPY names the line of the row
/*+ APPEND */ COPY fact FROM PROGRAM 'seq 1 3000 | awk "{print \$1 \"\t\" (\$1 == 2500 ? 7777 : 1) \"\t1\tx\t\" \$1}"';
SELECT count(*) FROM fact;

-- a user who may insert but not read: the check runs as the referenced
-- table's owner, and the detail hides the key, as core does
CREATE ROLE fk_writer;
GRANT INSERT ON fact TO fk_writer;
GRANT USAGE ON SCHEMA directpath TO fk_writer;
SET ROLE fk_writer;
/*+ APPEND */ INSERT INTO fact SELECT g, 5, 5, 'x', g FROM generate_series(1, 2000) g;
/*+ APPEND */ INSERT INTO fact SELECT g, CASE WHEN g = 10 THEN -5 ELSE 5 END, 5, 'x', g
  FROM generate_series(1, 2000) g;
RESET ROLE;
SELECT count(*) FROM fact WHERE d1 = 5;

-- kept per row, with the reason: deferrable, self-referencing, a
-- partitioned referenced table, a lasting snapshot, other AFTER ROW
-- triggers; the result is the plain one
CREATE TABLE fdef (id int, d1 int REFERENCES dim1 DEFERRABLE INITIALLY DEFERRED);
BEGIN;
/*+ APPEND */ INSERT INTO fdef SELECT g, g % 1000 + 1 FROM generate_series(1, 5000) g;
SELECT foreign_keys FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO fdef SELECT g, 5000 FROM generate_series(1, 5000) g;
INSERT INTO dim1 VALUES (5000, 'late');
COMMIT;
SELECT count(*) FROM fdef;
-- DEFERRABLE INITIALLY IMMEDIATE: checked per row, at the end of the
-- statement, or at COMMIT after SET CONSTRAINTS ... DEFERRED, as in core
CREATE TABLE fimm (id int, d1 int REFERENCES dim1 DEFERRABLE INITIALLY IMMEDIATE);
/*+ APPEND */ INSERT INTO fimm SELECT g, CASE WHEN g = 4000 THEN 7000 ELSE 1 END
  FROM generate_series(1, 5000) g;
BEGIN;
SET CONSTRAINTS fimm_d1_fkey DEFERRED;
/*+ APPEND */ INSERT INTO fimm SELECT g, CASE WHEN g = 4000 THEN 7000 ELSE 1 END
  FROM generate_series(1, 5000) g;
SELECT path, foreign_keys FROM directpath.last_statement();
INSERT INTO dim1 VALUES (7000, 'in time');
COMMIT;
SELECT count(*) FROM fimm;
BEGIN;
SET CONSTRAINTS ALL DEFERRED;
/*+ APPEND */ INSERT INTO fimm SELECT g, 7001 FROM generate_series(1, 5000) g;
COMMIT;
SELECT count(*) FROM fimm;
CREATE TABLE fself (id int PRIMARY KEY, parent int REFERENCES fself);
-- (each row references the next one, written in a later batch)
/*+ APPEND */ INSERT INTO fself SELECT g, CASE WHEN g < 5000 THEN g + 1 END
  FROM generate_series(1, 5000) g;
SELECT foreign_keys FROM directpath.last_statement();
CREATE TABLE pdim (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE pdim1 PARTITION OF pdim FOR VALUES FROM (0) TO (100000);
INSERT INTO pdim SELECT generate_series(1, 1000);
CREATE TABLE fpart (id int, p int REFERENCES pdim);
/*+ APPEND */ INSERT INTO fpart SELECT g, g % 1000 + 1 FROM generate_series(1, 5000) g;
SELECT foreign_keys FROM directpath.last_statement();
BEGIN ISOLATION LEVEL REPEATABLE READ;
/*+ APPEND */ INSERT INTO fact SELECT g, 1, 1, 'x', g FROM generate_series(1, 2000) g;
SELECT foreign_keys FROM directpath.last_statement();
COMMIT;
CREATE TABLE ftrig (id int, d1 int REFERENCES dim1);
CREATE FUNCTION ftrig_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER ftrig_after AFTER INSERT ON ftrig FOR EACH ROW EXECUTE FUNCTION ftrig_noop();
/*+ APPEND */ INSERT INTO ftrig SELECT g, g % 1000 + 1 FROM generate_series(1, 2000) g;
SELECT foreign_keys FROM directpath.last_statement();

-- a partitioned target: each partition's constraint, per batch, and the
-- error names the partition as core's does
CREATE TABLE fp (id int, d1 int REFERENCES dim1) PARTITION BY RANGE (id);
CREATE TABLE fp1 PARTITION OF fp FOR VALUES FROM (0) TO (10000);
CREATE TABLE fp2 PARTITION OF fp FOR VALUES FROM (10000) TO (20000);
/*+ APPEND */ INSERT INTO fp SELECT g, g % 1000 + 1 FROM generate_series(1, 19999) g;
SELECT path, relations, foreign_keys FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO fp SELECT g, CASE WHEN g = 15000 THEN 0 ELSE 1 END FROM generate_series(1, 19999) g;
SET directpath.mode = off;
INSERT INTO fp SELECT g, CASE WHEN g = 15000 THEN 0 ELSE 1 END FROM generate_series(1, 19999) g;
RESET directpath.mode;
-- violations in both partitions: the first row in input order
/*+ APPEND */ INSERT INTO fp SELECT g, CASE WHEN g IN (5000, 15000) THEN -g ELSE 1 END
  FROM generate_series(19999, 1, -1) g;
SET directpath.mode = off;
INSERT INTO fp SELECT g, CASE WHEN g IN (5000, 15000) THEN -g ELSE 1 END
  FROM generate_series(19999, 1, -1) g;
RESET directpath.mode;
SELECT count(*) FROM fp;

-- directpath.fkey_batches off: core's events
SET directpath.fkey_batches = off;
/*+ APPEND */ INSERT INTO fact SELECT g, 1, 1, 'x', g FROM generate_series(1, 2000) g;
SELECT foreign_keys FROM directpath.last_statement();
RESET directpath.fkey_batches;

DROP TABLE fact, fdef, fimm, fself, fpart, pdim, ftrig, fp, dim1, dim2;
DROP FUNCTION ftrig_noop();
REVOKE USAGE ON SCHEMA directpath FROM fk_writer;
DROP ROLE fk_writer;
RESET directpath.batch_pages;
