--
-- COPY FROM options of PostgreSQL 17+: ON_ERROR, LOG_VERBOSITY; 18: REJECT_LIMIT.
--
SET directpath.min_bytes = 0;
CREATE TABLE co (a int, b int);
CREATE TABLE cop (a int, b int);
/*+ APPEND */ COPY co FROM PROGRAM 'printf "1,1\nx,2\n3,3\n4,y\n5,5\n"' WITH (FORMAT csv, ON_ERROR ignore);
SELECT path, rows_inserted FROM directpath.last_statement();
/*+ NOAPPEND */ COPY cop FROM PROGRAM 'printf "1,1\nx,2\n3,3\n4,y\n5,5\n"' WITH (FORMAT csv, ON_ERROR ignore);
SELECT (SELECT array_agg(a ORDER BY a) FROM co) AS direct, (SELECT array_agg(a ORDER BY a) FROM cop) AS plain;
/*+ APPEND */ COPY co FROM PROGRAM 'printf "6,6\nz,7\n"' WITH (FORMAT csv, ON_ERROR ignore, LOG_VERBOSITY verbose);
/*+ APPEND */ COPY co FROM PROGRAM 'printf "1,1\nx,2\n3,3\n4,y\n5,5\n"' WITH (FORMAT csv, ON_ERROR ignore, REJECT_LIMIT 1);
SELECT count(*) FROM co;
DROP TABLE co, cop;
