--
-- COPY ... WITH (REJECTS_TABLE, MAX_REJECTS): bad rows go to a table.
--
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE TABLE rj (a int PRIMARY KEY, b int CHECK (b >= 0), c text NOT NULL);
CREATE TABLE bad (LIKE directpath.rejects INCLUDING ALL);
CREATE TABLE rj_in (line text);
-- one row of each kind: good, malformed, duplicate of an existing key,
-- CHECK, missing column, extra column, NOT NULL, duplicate within the load
COPY rj_in FROM STDIN;
1,1,one
2,x,two
3,1,dup-existing
4,-1,neg
5,5
6,6,six,extra
7,7,
1,1,dup-in-load
8,8,eight
\.
COPY rj_in TO PROGRAM 'cat > dp_rejects.csv';

-- through the normal path (small statement) and the direct path
INSERT INTO rj VALUES (3, 0, 'existing');
COPY rj FROM 'dp_rejects.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
SELECT path FROM directpath.last_statement();
SELECT a, b, c FROM rj ORDER BY a;
SELECT line, raw_line, sqlstate, message, detail FROM bad ORDER BY line;
SET directpath.min_bytes = 0;
TRUNCATE rj, bad;
INSERT INTO rj VALUES (3, 0, 'existing');
COPY rj FROM 'dp_rejects.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
SELECT path, rows_inserted FROM directpath.last_statement();
SELECT a, b, c FROM rj ORDER BY a;
SELECT relation, line, raw_line, sqlstate FROM bad ORDER BY line;
SELECT count(*) FROM verify_heapam('rj');
SELECT bt_index_check('rj_pkey', true);
-- the rows after a rejected one still load; the table takes new rows
INSERT INTO rj VALUES (9, 9, 'nine');

-- MAX_REJECTS: one more rejected row fails the load, rejects roll back too
TRUNCATE bad;
COPY rj FROM 'dp_rejects.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad', MAX_REJECTS 2);
SELECT count(*) FROM bad;
SELECT count(*) FROM rj;

-- usage errors
COPY rj FROM 'dp_rejects.csv' WITH (FORMAT csv, MAX_REJECTS 2);
COPY rj FROM 'dp_rejects.csv' WITH (FORMAT csv, REJECTS_TABLE 'nosuch');
COPY rj FROM 'dp_rejects.csv' WITH (FORMAT csv, REJECTS_TABLE 'rj');
/*+ NOAPPEND */ COPY rj FROM 'dp_rejects.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
CREATE TEMP TABLE rj_temp (a int);
COPY rj_temp FROM 'dp_rejects.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
-- a larger load with scattered bad rows, many batches
SET directpath.batch_pages = 4;
TRUNCATE rj, bad;
COPY (SELECT g, CASE WHEN g % 1000 = 0 THEN -1 ELSE g END, 'v' || g FROM generate_series(1, 20000) g
      UNION ALL SELECT 500, 1, 'dup') TO PROGRAM 'cat > dp_rejects_big.csv' WITH (FORMAT csv);
COPY rj FROM 'dp_rejects_big.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
SELECT count(*) AS loaded FROM rj;
SELECT sqlstate, count(*) FROM bad GROUP BY 1 ORDER BY 1;
SELECT bt_index_check('rj_pkey', true);
DROP TABLE rj, bad, rj_in;

-- foreign keys: a violating row goes to the rejects table with core's
-- SQLSTATE, message and detail; a row that is also a duplicate is recorded
-- once; MATCH FULL's mixed NULLs; the good rows load, the tree is sound
RESET directpath.batch_pages;
CREATE TABLE rf_p (id int PRIMARY KEY);
CREATE TABLE rf_q (x int, y int, UNIQUE (x, y));
INSERT INTO rf_p SELECT generate_series(1, 10);
INSERT INTO rf_q VALUES (1, 1);
CREATE TABLE rf (a int PRIMARY KEY, p int REFERENCES rf_p, x int, y int,
                 FOREIGN KEY (x, y) REFERENCES rf_q (x, y) MATCH FULL);
CREATE TABLE bad (LIKE directpath.rejects INCLUDING ALL);
COPY (VALUES (1, 1, 1, 1), (2, 99, NULL, NULL), (3, 2, 1, NULL), (4, NULL, 7, 7),
             (1, 50, NULL, NULL), (5, 3, NULL, NULL), (6, 98, 8, NULL), (7, 10, 1, 1))
  TO PROGRAM 'cat > dp_rejects_fk.csv' WITH (FORMAT csv);
COPY rf FROM 'dp_rejects_fk.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
SELECT path, rows_inserted, foreign_keys FROM directpath.last_statement();
SELECT * FROM rf ORDER BY a;
SELECT line, raw_line, sqlstate, message, detail FROM bad ORDER BY line;
SELECT count(*) FROM verify_heapam('rf');
SELECT bt_index_check('rf_pkey', true);
-- a statement trigger's transition table holds only the rows loaded
CREATE FUNCTION rf_count() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN RAISE NOTICE 'new rows: %', (SELECT string_agg(a::text, ',' ORDER BY a) FROM n); RETURN NULL; END$$;
CREATE TRIGGER rf_count AFTER INSERT ON rf REFERENCING NEW TABLE AS n
  FOR EACH STATEMENT EXECUTE FUNCTION rf_count();
TRUNCATE rf, bad;
COPY rf FROM 'dp_rejects_fk.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
SELECT path, foreign_keys FROM directpath.last_statement();
SELECT line, sqlstate FROM bad ORDER BY line;
DROP TRIGGER rf_count ON rf;
DROP FUNCTION rf_count();
-- many batches, one row in a hundred referencing a missing parent
SET directpath.batch_pages = 4;
TRUNCATE rf, bad;
COPY (SELECT g, CASE WHEN g % 100 = 0 THEN 1000 + g ELSE g % 10 + 1 END, NULL, NULL
      FROM generate_series(1, 20000) g) TO PROGRAM 'cat > dp_rejects_fk_big.csv' WITH (FORMAT csv);
COPY rf FROM 'dp_rejects_fk_big.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
SELECT count(*) AS loaded, count(*) FILTER (WHERE p > 10) AS orphans FROM rf;
SELECT sqlstate, count(*), min(line), max(line) FROM bad GROUP BY 1;
SELECT bt_index_check('rf_pkey', true);
-- MAX_REJECTS counts them too
TRUNCATE rf, bad;
COPY rf FROM 'dp_rejects_fk_big.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad', MAX_REJECTS 10);
SELECT count(*) FROM rf;
RESET directpath.batch_pages;
-- a deferrable constraint keeps core's events: still fatal, as in plain COPY
ALTER TABLE rf ALTER CONSTRAINT rf_p_fkey DEFERRABLE;
COPY rf FROM 'dp_rejects_fk.csv' WITH (FORMAT csv, REJECTS_TABLE 'bad');
SELECT count(*) FROM rf;
DROP TABLE rf, rf_p, rf_q, bad;
