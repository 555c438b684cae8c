--
-- Where a hint is recognised, and where it is not.
--
CREATE EXTENSION directpath;
SET directpath.min_bytes = 0;
CREATE TABLE h (a int, b text);

-- leading comment
EXPLAIN (COSTS OFF) /*+ APPEND */ INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
-- Oracle's place, after INSERT; case does not matter
EXPLAIN (COSTS OFF) INSERT /*+ append */ INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
-- other words in the comment are ignored
EXPLAIN (COSTS OFF) /*+ PARALLEL(4) APPEND */ INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
-- an ordinary comment before the hint
EXPLAIN (COSTS OFF) /* load */ /*+ APPEND */ INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
-- not a hint: plain comment, hint deeper in the statement, hint in a literal
EXPLAIN (COSTS OFF) /* APPEND */ INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
EXPLAIN (COSTS OFF) INSERT INTO h SELECT g, 'x' FROM /*+ APPEND */ generate_series(1, 10) g;
EXPLAIN (COSTS OFF) INSERT INTO h SELECT 1, '/*+ APPEND */';

-- the hint takes the direct path and writes pages
/*+ APPEND */ INSERT INTO h SELECT g, 'x' FROM generate_series(1, 1000) g;
SELECT path, rows_inserted, pages_written > 0 AS wrote FROM directpath.last_statement();

-- second statement of a multi-statement string (PG 18 locates statements
-- after their leading comment)
SELECT 1 AS first \; /*+ APPEND */ INSERT INTO h SELECT g, 'm' FROM generate_series(1, 100) g;
SELECT path, rows_inserted FROM directpath.last_statement();

-- prepared statements, with the hint inside or before PREPARE
PREPARE p1 AS /*+ APPEND */ INSERT INTO h SELECT g, 'p' FROM generate_series(1, $1) g;
EXECUTE p1(50);
SELECT path, rows_inserted FROM directpath.last_statement();
EXECUTE p1(60);
SELECT path, rows_inserted FROM directpath.last_statement();
/*+ APPEND */ PREPARE p2 AS INSERT INTO h SELECT g, 'q' FROM generate_series(1, $1) g;
EXECUTE p2(70);
SELECT path, rows_inserted FROM directpath.last_statement();

-- PL/pgSQL drops a statement's leading comments: the hint goes after INSERT
DO $$
BEGIN
	INSERT /*+ APPEND */ INTO h SELECT g, 'plpgsql' FROM generate_series(1, 80) g;
END
$$;
SELECT path, rows_inserted FROM directpath.last_statement();

-- mode = always needs no hint; NOAPPEND refuses; single-row VALUES is left alone
SET directpath.mode = always;
EXPLAIN (COSTS OFF) INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
EXPLAIN (COSTS OFF) /*+ NOAPPEND */ INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
EXPLAIN (COSTS OFF) INSERT INTO h VALUES (1, 'one');
EXPLAIN (COSTS OFF) INSERT INTO h VALUES (1, 'one'), (2, 'two');
-- mode = off ignores hints
SET directpath.mode = off;
EXPLAIN (COSTS OFF) /*+ APPEND */ INSERT INTO h SELECT g, 'x' FROM generate_series(1, 10) g;
RESET directpath.mode;

SELECT b, count(*) FROM h GROUP BY b ORDER BY b;
DROP TABLE h;
