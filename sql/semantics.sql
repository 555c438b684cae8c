--
-- Row semantics: the direct path gives the same rows and the same errors
-- as a plain INSERT.
--
SET directpath.min_bytes = 0;
CREATE TABLE s (
	id int PRIMARY KEY,
	v text NOT NULL DEFAULT 'dflt',
	n int CHECK (n >= 0),
	g int GENERATED ALWAYS AS (id * 10) STORED,
	ident bigint GENERATED ALWAYS AS IDENTITY,
	big text
);
CREATE TABLE s_plain (LIKE s INCLUDING ALL);

/*+ APPEND */ INSERT INTO s (id, n, big) SELECT g, g % 7, CASE WHEN g % 100 = 0 THEN repeat(md5(g::text), 500) END FROM generate_series(1, 3000) g;
SELECT path, rows_inserted FROM directpath.last_statement();
INSERT INTO s_plain (id, n, big) SELECT g, g % 7, CASE WHEN g % 100 = 0 THEN repeat(md5(g::text), 500) END FROM generate_series(1, 3000) g;
-- same rows, TOASTed values included
SELECT count(*) FROM (SELECT id, v, n, g, ident, big FROM s EXCEPT SELECT id, v, n, g, ident, big FROM s_plain) d;
SELECT count(*) FROM (SELECT id, v, n, g, ident, big FROM s_plain EXCEPT SELECT id, v, n, g, ident, big FROM s) d;
SELECT pg_column_size(big) < length(big) AS toasted FROM s WHERE id = 100;

-- violations: same SQLSTATE and message as the plain path, nothing left behind
\set VERBOSITY sqlstate
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, g - 5000 FROM generate_series(3001, 6000) g;
INSERT INTO s (id, n) SELECT g, g - 5000 FROM generate_series(3001, 6000) g;
/*+ APPEND */ INSERT INTO s (id, v, n) SELECT g, CASE WHEN g = 4000 THEN NULL ELSE 'v' END, 1 FROM generate_series(3001, 6000) g;
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, 1 FROM generate_series(2990, 4000) g;
INSERT INTO s (id, n) SELECT g, 1 FROM generate_series(2990, 4000) g;
/*+ APPEND */ INSERT INTO s (id, n) SELECT 5000 + g % 10, 1 FROM generate_series(1, 3000) g;
/*+ APPEND */ INSERT INTO s (id, n, g) SELECT 9999, 1, 1;
\set VERBOSITY default
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, g - 5000 FROM generate_series(3001, 6000) g;
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, 1 FROM generate_series(2990, 4000) g;
SELECT count(*), max(id) FROM s;

-- RETURNING, in input order, and the row count
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, 0 FROM generate_series(7001, 7005) g RETURNING id, g, v, tableoid::regclass;
WITH r AS (SELECT 1) SELECT count(*) FROM s WHERE id > 7000;

-- transactions and savepoints
BEGIN;
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, 0 FROM generate_series(8001, 9000) g;
SELECT count(*) FROM s WHERE id > 8000;
ROLLBACK;
SELECT count(*) FROM s WHERE id > 8000;
BEGIN;
INSERT INTO s (id, n) VALUES (8000, 0);
SAVEPOINT sp;
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, 0 FROM generate_series(8001, 9000) g;
ROLLBACK TO sp;
/*+ APPEND */ INSERT INTO s (id, n) SELECT g, 0 FROM generate_series(8501, 8600) g;
COMMIT;
SELECT count(*), min(id), max(id) FROM s WHERE id >= 8000;

-- the table still takes normal inserts and updates afterwards
INSERT INTO s (id, n) VALUES (10000, 1);
UPDATE s SET n = n + 1 WHERE id IN (1, 8501, 10000);
DELETE FROM s WHERE id = 2;
SELECT id, n FROM s WHERE id IN (1, 2, 8501, 10000) ORDER BY id;

-- foreign keys in both directions
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id int, pid int REFERENCES parent);
/*+ APPEND */ INSERT INTO parent SELECT generate_series(1, 2000);
/*+ APPEND */ INSERT INTO child SELECT g, g FROM generate_series(1, 2000) g;
SELECT path, rows_inserted FROM directpath.last_statement();
\set VERBOSITY sqlstate
/*+ APPEND */ INSERT INTO child SELECT g, g FROM generate_series(1990, 2010) g;
\set VERBOSITY default
/*+ APPEND */ INSERT INTO child SELECT g, g FROM generate_series(1990, 2010) g;
SELECT count(*) FROM child;

-- row-level security WITH CHECK
CREATE ROLE dp_rls_user;
CREATE TABLE r (owner text, v int);
ALTER TABLE r ENABLE ROW LEVEL SECURITY;
CREATE POLICY r_ins ON r FOR INSERT WITH CHECK (owner = current_user);
CREATE POLICY r_sel ON r FOR SELECT USING (true);
GRANT INSERT, SELECT ON r TO dp_rls_user;
SET ROLE dp_rls_user;
/*+ APPEND */ INSERT INTO r SELECT 'dp_rls_user', g FROM generate_series(1, 1000) g;
SELECT path, rows_inserted FROM directpath.last_statement();
/*+ APPEND */ INSERT INTO r SELECT CASE WHEN g = 500 THEN 'other' ELSE 'dp_rls_user' END, g FROM generate_series(1, 1000) g;
RESET ROLE;
SELECT count(*) FROM r;
-- privileges: no INSERT privilege, no load
CREATE TABLE nopriv (a int);
SET ROLE dp_rls_user;
/*+ APPEND */ INSERT INTO nopriv SELECT generate_series(1, 100);
RESET ROLE;
DROP TABLE r, nopriv;
DROP ROLE dp_rls_user;

-- command tag and pg_stat counters
CREATE TABLE st (a int);
/*+ APPEND */ INSERT INTO st SELECT generate_series(1, 5000);
SELECT pg_stat_force_next_flush();
SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'st';

-- integrity of everything written above
CREATE EXTENSION amcheck;
SELECT count(*) FROM verify_heapam('s');
SELECT bt_index_check('s_pkey', true);
SELECT count(*) FROM verify_heapam('child');
DROP TABLE s, s_plain, child, parent, st;
