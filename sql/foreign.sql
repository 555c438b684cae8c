--
-- Partitioned targets with foreign partitions: local partitions take the
-- direct path, foreign ones (postgres_fdw, over a loopback connection here)
-- get their rows as one COPY per partition, or through the wrapper's
-- batched INSERTs where COPY cannot give what the statement needs.
--
SET directpath.min_bytes = 0;
CREATE EXTENSION postgres_fdw;
SELECT current_setting('port') AS port,
       current_setting('unix_socket_directories') AS sockdir,
       current_database() AS dbname \gset
CREATE SERVER loop FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'sockdir', port :'port', dbname :'dbname', batch_size '50');
CREATE USER MAPPING FOR CURRENT_USER SERVER loop;

CREATE TABLE fp (a int, b text) PARTITION BY RANGE (a);
CREATE TABLE fp_local PARTITION OF fp FOR VALUES FROM (0) TO (1000);
CREATE TABLE fp_remote_data (a int, b text CHECK (b <> 'bad'));
CREATE FOREIGN TABLE fp_remote PARTITION OF fp FOR VALUES FROM (1000) TO (2000)
  SERVER loop OPTIONS (table_name 'fp_remote_data');

-- both kinds of partition in one statement
EXPLAIN (COSTS OFF) /*+ APPEND */ INSERT INTO fp SELECT g, 'r' || g FROM generate_series(1, 1999) g;
/*+ APPEND */ INSERT INTO fp SELECT g, 'r' || g FROM generate_series(1, 1999) g;
SELECT path, reason, rows_inserted, pages_written > 0 AS wrote, relations,
       foreign_partitions
  FROM directpath.last_statement();
SELECT tableoid::regclass, count(*), sum(a), min(b), max(b) FROM fp GROUP BY 1 ORDER BY 1;
SELECT count(*), sum(a) FROM fp_remote_data;

-- the wrapper's batches instead, by the setting
SET directpath.foreign_copy = off;
/*+ APPEND */ INSERT INTO fp SELECT g, 'w' || g FROM generate_series(990, 1009) g;
SELECT path, rows_inserted, foreign_partitions FROM directpath.last_statement();
RESET directpath.foreign_copy;
SELECT count(*), sum(a) FROM fp_remote_data;

-- a row the remote side refuses fails the statement, and nothing is left
-- (the loopback connection's transaction rolls back with ours)
/*+ APPEND */ INSERT INTO fp SELECT g, CASE WHEN g = 1500 THEN 'bad' ELSE 'ok' END
  FROM generate_series(1, 1999) g;
SELECT count(*) FROM fp;

-- only foreign rows
/*+ APPEND */ INSERT INTO fp SELECT g, 'f' FROM generate_series(1000, 1009) g;
SELECT path, reason, rows_inserted, pages_written FROM directpath.last_statement();
SET directpath.min_bytes = '8kB';
/*+ APPEND */ INSERT INTO fp SELECT g, 'f' FROM generate_series(1010, 1019) g;
SELECT path, reason, rows_inserted, pages_written FROM directpath.last_statement();
SET directpath.min_bytes = 0;

-- RETURNING: row by row (postgres_fdw does not batch then), in input
-- order, local and foreign rows interleaved
/*+ APPEND */ INSERT INTO fp
  SELECT CASE WHEN g % 2 = 0 THEN 900 + g ELSE 1100 + g END, 'ret'
  FROM generate_series(1, 8) g
  RETURNING tableoid::regclass, a, b;
SELECT foreign_partitions FROM directpath.last_statement();

-- AFTER ROW triggers on the parent fire for every row, local and foreign
CREATE TABLE fp_log (a int, rel text);
CREATE FUNCTION fp_log_row() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN INSERT INTO fp_log VALUES (NEW.a, TG_TABLE_NAME); RETURN NULL; END$$;
CREATE TRIGGER fp_after AFTER INSERT ON fp FOR EACH ROW EXECUTE FUNCTION fp_log_row();
/*+ APPEND */ INSERT INTO fp SELECT g, 'trg' FROM generate_series(990, 1009) g;
SELECT path, rows_inserted FROM directpath.last_statement();
SELECT rel, count(*), min(a), max(a) FROM fp_log GROUP BY 1 ORDER BY 1;
DROP TRIGGER fp_after ON fp;

-- transition tables cannot hold rows of foreign partitions: the same
-- error as a plain INSERT
CREATE FUNCTION fp_stmt() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN RAISE NOTICE 'inserted: % rows, sum %', (SELECT count(*) FROM nt), (SELECT sum(a) FROM nt);
RETURN NULL; END$$;
CREATE TRIGGER fp_stmt AFTER INSERT ON fp REFERENCING NEW TABLE AS nt
  FOR EACH STATEMENT EXECUTE FUNCTION fp_stmt();
INSERT INTO fp SELECT g, 'tt' FROM generate_series(501, 1500) g;
/*+ APPEND */ INSERT INTO fp SELECT g, 'tt' FROM generate_series(501, 1500) g;
DROP TRIGGER fp_stmt ON fp;

-- COPY routes the same way
/*+ APPEND */ COPY fp FROM STDIN;
5	copy-local
1005	copy-remote
6	copy-local
1006	copy-remote
\.
SELECT path, rows_inserted, relations, foreign_partitions FROM directpath.last_statement();
SELECT tableoid::regclass, a, b FROM fp WHERE b LIKE 'copy%' ORDER BY a;

-- a foreign partition with a BEFORE ROW trigger keeps the statement on the
-- normal path (as any partition); a postgres_fdw table targeted itself gets
-- its rows as a COPY stream
CREATE FUNCTION fp_before() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN RETURN NEW; END$$;
CREATE TRIGGER fp_before BEFORE INSERT ON fp_remote FOR EACH ROW EXECUTE FUNCTION fp_before();
/*+ APPEND */ INSERT INTO fp SELECT g, 'b' FROM generate_series(1, 1999) g;
DROP TRIGGER fp_before ON fp_remote;
/*+ APPEND */ INSERT INTO fp_remote SELECT g, 'direct-target' FROM generate_series(1000, 1009) g;
SELECT path, rows_inserted, foreign_partitions FROM directpath.last_statement();

SELECT count(*) FROM fp_remote_data;
DROP TABLE fp, fp_log, fp_remote_data;

-- a parallel load holds a foreign partition: the workers route its rows
-- to the leader, which streams them to the server after the workers,
-- while the local partitions load in parallel; INSERT and COPY
CREATE TABLE fpp (a int NOT NULL, b text) PARTITION BY RANGE (a);
CREATE TABLE fpp_l1 PARTITION OF fpp FOR VALUES FROM (0) TO (100000);
CREATE TABLE fpp_l2 PARTITION OF fpp FOR VALUES FROM (100000) TO (200000);
CREATE TABLE fpp_remote_data (a int, b text CHECK (b <> 'bad'));
CREATE FOREIGN TABLE fpp_remote PARTITION OF fpp FOR VALUES FROM (200000) TO (300000)
  SERVER loop OPTIONS (table_name 'fpp_remote_data');
CREATE TABLE fpp_src AS SELECT g AS a, 'r' || g AS b FROM generate_series(1, 299999) g;
VACUUM ANALYZE fpp_src;
/*+ APPEND PARALLEL(2) */ INSERT INTO fpp SELECT * FROM fpp_src;
SELECT path, rows_inserted, parallel_workers > 0 AS parallel, parallel AS note,
       foreign_partitions
  FROM directpath.last_statement();
SELECT tableoid::regclass, count(*), sum(a), min(b) FROM fpp GROUP BY 1 ORDER BY 1;
TRUNCATE fpp_l1, fpp_l2;
DELETE FROM fpp_remote_data;
/*+ APPEND PARALLEL(2) */ COPY fpp FROM PROGRAM 'seq 1 299999 | sed -e "s/.*/&\tr&/"';
SELECT path, rows_inserted, parallel_workers > 0 AS parallel, parallel AS note,
       foreign_partitions
  FROM directpath.last_statement();
SELECT tableoid::regclass, count(*), sum(a), min(b) FROM fpp GROUP BY 1 ORDER BY 1;
SELECT NOT EXISTS (SELECT * FROM fpp EXCEPT ALL SELECT * FROM fpp_src) AS same;
-- the remote side refuses a row: the statement fails, nothing is left
TRUNCATE fpp_l1, fpp_l2;
DELETE FROM fpp_remote_data;
\set VERBOSITY terse
/*+ APPEND PARALLEL(2) */ INSERT INTO fpp
  SELECT a, CASE WHEN a = 250000 THEN 'bad' ELSE b END FROM fpp_src;
\set VERBOSITY default
SELECT count(*) FROM fpp;
-- every partition foreign or held: serial, with the reason
CREATE TABLE fpp2 (a int NOT NULL, b text) PARTITION BY RANGE (a);
CREATE FOREIGN TABLE fpp2_remote PARTITION OF fpp2 FOR VALUES FROM (0) TO (300000)
  SERVER loop OPTIONS (table_name 'fpp_remote_data');
/*+ APPEND PARALLEL(2) */ INSERT INTO fpp2 SELECT * FROM fpp_src WHERE a < 1000;
SELECT path, rows_inserted, parallel_workers, parallel FROM directpath.last_statement();
DROP TABLE fpp, fpp2, fpp_remote_data, fpp_src;
DROP USER MAPPING FOR CURRENT_USER SERVER loop;
DROP SERVER loop;
