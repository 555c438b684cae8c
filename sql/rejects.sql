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
