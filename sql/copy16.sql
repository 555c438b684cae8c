--
-- COPY FROM options of PostgreSQL 16+: DEFAULT.
--
SET directpath.min_bytes = 0;
CREATE TABLE cd (a int, b text DEFAULT 'dflt', c int DEFAULT 42);
/*+ APPEND */ COPY cd FROM PROGRAM 'printf "1,D,D\n2,x,7\n"' WITH (FORMAT csv, DEFAULT 'D');
SELECT path, rows_inserted FROM directpath.last_statement();
SELECT * FROM cd ORDER BY a;
DROP TABLE cd;
