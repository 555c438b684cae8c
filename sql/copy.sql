--
-- COPY FROM through the direct path: same rows, same errors as core's COPY.
--
SET directpath.min_bytes = 0;
CREATE TABLE src (id int, t text, n numeric, d date, flag bool, j jsonb);
INSERT INTO src SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'text "' || g || E'",\\ tab\t' END,
	g / 3.0, date '2020-01-01' + g, g % 2 = 0, jsonb_build_object('k', g)
FROM generate_series(1, 3000) g;
-- server-side files, written into the data directory
COPY src TO PROGRAM 'cat > dp_text.dat';
COPY src TO PROGRAM 'cat > dp_csv.dat' WITH (FORMAT csv, HEADER, DELIMITER ';', QUOTE '''', ESCAPE '\', NULL 'NIL', FORCE_QUOTE (t));
COPY src TO PROGRAM 'cat > dp_bin.dat' WITH (FORMAT binary);

CREATE TABLE ct (LIKE src);
CREATE TABLE cp (LIKE src);
CREATE FUNCTION same() RETURNS bigint LANGUAGE sql AS
  'SELECT (SELECT count(*) FROM (TABLE ct EXCEPT ALL TABLE cp) a) + (SELECT count(*) FROM (TABLE cp EXCEPT ALL TABLE ct) b)';

-- text, csv with options, binary; each also plain (NOAPPEND) for comparison
/*+ APPEND */ COPY ct FROM 'dp_text.dat';
SELECT path, rows_inserted FROM directpath.last_statement();
/*+ NOAPPEND */ COPY cp FROM 'dp_text.dat';
/*+ APPEND */ COPY ct FROM 'dp_csv.dat' WITH (FORMAT csv, HEADER match, DELIMITER ';', QUOTE '''', ESCAPE '\', NULL 'NIL');
SELECT path, rows_inserted FROM directpath.last_statement();
/*+ NOAPPEND */ COPY cp FROM 'dp_csv.dat' WITH (FORMAT csv, HEADER match, DELIMITER ';', QUOTE '''', ESCAPE '\', NULL 'NIL');
/*+ APPEND */ COPY ct FROM 'dp_bin.dat' WITH (FORMAT binary);
SELECT path, rows_inserted FROM directpath.last_statement();
/*+ NOAPPEND */ COPY cp FROM 'dp_bin.dat' WITH (FORMAT binary);
SELECT count(*), same() FROM ct;

-- column list, FORCE_NOT_NULL / FORCE_NULL, ENCODING, PROGRAM, WHERE
TRUNCATE ct, cp;
/*+ APPEND */ COPY ct (id, t) FROM PROGRAM 'printf "1,\n2,\"\"\n3,x\n"' WITH (FORMAT csv, FORCE_NOT_NULL (t));
/*+ NOAPPEND */ COPY cp (id, t) FROM PROGRAM 'printf "1,\n2,\"\"\n3,x\n"' WITH (FORMAT csv, FORCE_NOT_NULL (t));
/*+ APPEND */ COPY ct (id, t) FROM PROGRAM 'printf "4,\n5,\"\"\n"' WITH (FORMAT csv, FORCE_NULL (t), ENCODING 'UTF8');
/*+ NOAPPEND */ COPY cp (id, t) FROM PROGRAM 'printf "4,\n5,\"\"\n"' WITH (FORMAT csv, FORCE_NULL (t), ENCODING 'UTF8');
SELECT id, t IS NULL AS null_t, t FROM ct ORDER BY id;
/*+ APPEND */ COPY ct FROM 'dp_text.dat' WHERE id % 10 = 0 AND flag;
/*+ NOAPPEND */ COPY cp FROM 'dp_text.dat' WHERE id % 10 = 0 AND flag;
SELECT count(*), same() FROM ct;

-- STDIN, as psql and drivers send it
/*+ APPEND */ COPY ct (id, t) FROM STDIN;
9001	from stdin
9002	\N
\.
SELECT path, rows_inserted FROM directpath.last_statement();
SELECT id, t FROM ct WHERE id > 9000 ORDER BY id;

-- the session setting, no hint
SET directpath.mode = always;
COPY ct (id) FROM PROGRAM 'seq 10001 12000';
SELECT path, rows_inserted FROM directpath.last_statement();
RESET directpath.mode;

-- errors: same message, same context line as core
CREATE TABLE ce (a int PRIMARY KEY, b int CHECK (b >= 0), c text NOT NULL);
INSERT INTO ce VALUES (2, 0, 'x');
/*+ APPEND */ COPY ce FROM PROGRAM 'printf "10,1,a\n11,-1,b\n"' WITH (FORMAT csv);
/*+ NOAPPEND */ COPY ce FROM PROGRAM 'printf "10,1,a\n11,-1,b\n"' WITH (FORMAT csv);
/*+ APPEND */ COPY ce FROM PROGRAM 'printf "10\t1\ta\n11\t1\t\\\\N\n"';
/*+ APPEND */ COPY ce FROM PROGRAM 'printf "10,1,a\n11,1\n"' WITH (FORMAT csv);
/*+ APPEND */ COPY ce FROM PROGRAM 'printf "10,1,a\nx,1,b\n"' WITH (FORMAT csv);
/*+ APPEND */ COPY ce FROM PROGRAM 'printf "10,1,a\n11,1,b,extra\n"' WITH (FORMAT csv);
/*+ APPEND */ COPY ce FROM PROGRAM 'printf "1,1,a\n2,1,b\n3,1,c\n"' WITH (FORMAT csv);
/*+ NOAPPEND */ COPY ce FROM PROGRAM 'printf "1,1,a\n2,1,b\n3,1,c\n"' WITH (FORMAT csv);
/*+ APPEND */ COPY ce FROM PROGRAM 'printf "\\xff\n"' WITH (ENCODING 'UTF8');
SELECT count(*) FROM ce;

-- FREEZE: core's rules, and frozen pages when they hold
CREATE EXTENSION IF NOT EXISTS pg_visibility;
/*+ APPEND */ COPY ct FROM 'dp_text.dat' WITH (FREEZE);
BEGIN;
TRUNCATE ct;
/*+ APPEND */ COPY ct FROM 'dp_text.dat' WITH (FREEZE);
SELECT path, frozen FROM directpath.last_statement();
COMMIT;
SELECT all_frozen = pg_relation_size('ct') / 8192 AS all_frozen FROM pg_visibility_map_summary('ct');
-- without the option too, where the storage is new
BEGIN;
TRUNCATE ct;
/*+ APPEND */ COPY ct FROM 'dp_text.dat';
SELECT path, frozen FROM directpath.last_statement();
COMMIT;

-- partitioned targets: routed per leaf, new leaves frozen (core's COPY
-- FREEZE refuses partitioned tables)
CREATE TABLE cpt (id int, t text) PARTITION BY RANGE (id);
CREATE TABLE cpt1 PARTITION OF cpt FOR VALUES FROM (0) TO (1500);
CREATE TABLE cpt2 PARTITION OF cpt FOR VALUES FROM (1500) TO (10000);
BEGIN;
TRUNCATE cpt;
/*+ APPEND */ COPY cpt FROM PROGRAM 'seq 1 3000';
SELECT path, frozen, relations FROM directpath.last_statement();
COMMIT;
SELECT tableoid::regclass, count(*) FROM cpt GROUP BY 1 ORDER BY 1;
/*+ APPEND */ COPY cpt FROM PROGRAM 'seq 1 3000' WITH (FREEZE);

-- what core refuses, core refuses; what cannot go direct goes normal
CREATE TABLE crls (a int);
ALTER TABLE crls ENABLE ROW LEVEL SECURITY;
CREATE ROLE dp_copy_user;
GRANT INSERT ON crls, ct TO dp_copy_user;
GRANT pg_execute_server_program TO dp_copy_user;
SET ROLE dp_copy_user;
/*+ APPEND */ COPY crls FROM PROGRAM 'seq 1 3';
/*+ APPEND */ COPY ct (id) FROM 'dp_text.dat';
/*+ APPEND */ COPY ct (id) FROM PROGRAM 'seq 1 3';
SELECT path, rows_inserted FROM directpath.last_statement();
/*+ APPEND */ COPY ct (id) FROM STDIN;
77777
\.
SELECT path, rows_inserted FROM directpath.last_statement();
RESET ROLE;
CREATE FUNCTION vdef() RETURNS int LANGUAGE sql VOLATILE AS 'SELECT 1';
CREATE TABLE cv (a int, b int DEFAULT vdef());
/*+ APPEND */ COPY cv (a) FROM PROGRAM 'seq 1 3';
SELECT path, rows_inserted FROM directpath.last_statement();
SELECT * FROM cv ORDER BY a;
CREATE TEMP TABLE ctemp (a int);
/*+ APPEND */ COPY ctemp FROM PROGRAM 'seq 1 3';

-- AFTER triggers see every row
CREATE TABLE ctr (a int);
CREATE TABLE ctr_log (n bigint);
CREATE FUNCTION ctr_count() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO ctr_log SELECT count(*) FROM new_rows; RETURN NULL; END $$;
CREATE TRIGGER ctr_as AFTER INSERT ON ctr REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION ctr_count();
/*+ APPEND */ COPY ctr FROM PROGRAM 'seq 1 5000';
SELECT * FROM ctr_log;

CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT count(*) FROM verify_heapam('ct');
SELECT count(*) FROM verify_heapam('cpt1');
DROP TABLE src, ct, cp, ce, cpt, crls, cv, ctr, ctr_log;
DROP FUNCTION same(), vdef(), ctr_count();
DROP ROLE dp_copy_user;
