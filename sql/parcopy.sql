--
-- Parallel COPY FROM: the input cut into chunks of whole lines, parsed by
-- parallel workers and the leader, every row in the leader's transaction.
-- Each load is compared with a plain COPY of the same input.
--
SET directpath.min_bytes = 0;
CREATE EXTENSION IF NOT EXISTS pg_visibility;
CREATE EXTENSION IF NOT EXISTS amcheck;
-- text with every character the formats escape or quote, NULLs, long lines
CREATE TABLE pc_src AS
  SELECT g AS id,
         CASE WHEN g % 11 = 0 THEN NULL
              WHEN g % 13 = 0 THEN 'tab	back\slash "quoted", comma' || g
              WHEN g % 1000 = 0 THEN E'new\nline\r\nand cr ' || g
              WHEN g % 5000 = 1 THEN (SELECT string_agg(md5((g * 100 + i)::text), '')
                                        FROM generate_series(1, 100) i)
              ELSE md5(g::text) END AS t,
         (g % 97)::numeric / 7 AS n
    FROM generate_series(1, 150000) g;
UPDATE pc_src SET t = E'multi\nline\nvalue ' || id WHERE id % 1000 = 500;
CREATE TABLE pc_t (id int NOT NULL, t text, n numeric CHECK (n >= 0));
CREATE TABLE pc_s (LIKE pc_t INCLUDING ALL);
COPY pc_src TO PROGRAM 'cat > dp_pc_text.dat';
COPY pc_src TO PROGRAM 'cat > dp_pc_csv.dat' WITH (FORMAT csv, HEADER);
COPY pc_src TO PROGRAM 'cat > dp_pc_csv2.dat' WITH (FORMAT csv, DELIMITER ';', QUOTE '''', ESCAPE '\', NULL 'NIL', FORCE_QUOTE (t));
COPY pc_src TO PROGRAM 'sed ''s/$/\r/'' > dp_pc_crlf.dat';

-- the rows of the parallel load equal the plain COPY's, both ways
CREATE FUNCTION pc_same() RETURNS text LANGUAGE sql AS $$
  SELECT format('%s rows, %s only parallel, %s only plain',
    (SELECT count(*) FROM pc_t),
    (SELECT count(*) FROM (SELECT * FROM pc_t EXCEPT ALL SELECT * FROM pc_s) d),
    (SELECT count(*) FROM (SELECT * FROM pc_s EXCEPT ALL SELECT * FROM pc_t) d))
$$;
CREATE FUNCTION pc_report() RETURNS text LANGUAGE sql AS $$
  SELECT format('%s, %s rows, parallel: %s%s', path, rows_inserted,
                parallel_workers > 0, coalesce(' (' || parallel || ')', ''))
    FROM directpath.last_statement()
$$;

-- text
/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_text.dat';
SELECT pc_report();
/*+ NOAPPEND */ COPY pc_s FROM 'dp_pc_text.dat';
SELECT pc_same();
SELECT count(*) FROM verify_heapam('pc_t');
-- the rows over the TOAST threshold went to the leader, which toasted them
SELECT pg_relation_size(reltoastrelid) > 0 AS toasted FROM pg_class WHERE oid = 'pc_t'::regclass;
TRUNCATE pc_t, pc_s;
-- each format and source: the parallel load, then the plain one compared
CREATE FUNCTION pc_both(source text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE '/*+ APPEND PARALLEL(2) */ COPY pc_t ' || source;
  RETURN NEXT pc_report();
  EXECUTE '/*+ NOAPPEND */ COPY pc_s ' || source;
  RETURN NEXT pc_same();
  TRUNCATE pc_t, pc_s;
END $$;
-- CSV with a header and quoted newlines
SELECT pc_both($$FROM 'dp_pc_csv.dat' WITH (FORMAT csv, HEADER match)$$);
-- CSV with its own quote, escape, delimiter and NULL
SELECT pc_both($$FROM 'dp_pc_csv2.dat' WITH (FORMAT csv, DELIMITER ';', QUOTE '''', ESCAPE '\', NULL 'NIL')$$);
-- \r\n line ends
SELECT pc_both($$FROM 'dp_pc_crlf.dat'$$);
-- from a program, with a WHERE clause and a column list
SELECT pc_both($$(id, t) FROM PROGRAM 'cut -f1,2 dp_pc_text.dat' WHERE id % 3 = 0$$);
-- binary: chunks of whole tuples, each after a file header of its own
COPY pc_src TO PROGRAM 'cat > dp_pc_bin.dat' WITH (FORMAT binary);
SELECT pc_both($$FROM 'dp_pc_bin.dat' WITH (FORMAT binary)$$);
-- an end-of-copy marker: nothing after it is loaded, as with core
COPY (SELECT * FROM pc_src WHERE id <= 100000) TO PROGRAM 'cat > dp_pc_mark.dat';
COPY (SELECT 0) TO PROGRAM 'cat >/dev/null; echo ''\.'' >> dp_pc_mark.dat';
COPY (SELECT * FROM pc_src WHERE id > 100000) TO PROGRAM 'cat >> dp_pc_mark.dat';
SELECT pc_both($$FROM 'dp_pc_mark.dat'$$);
-- the setting asks for workers without the hint's PARALLEL
SET directpath.parallel_workers = 2;
/*+ APPEND */ COPY pc_t FROM 'dp_pc_text.dat';
SELECT pc_report();
RESET directpath.parallel_workers;
TRUNCATE pc_t;

-- storage new in the transaction: frozen pages, every VM bit set (FREEZE)
BEGIN;
CREATE TABLE pc_f (LIKE pc_t);
/*+ APPEND PARALLEL(2) */ COPY pc_f FROM 'dp_pc_text.dat' WITH (FREEZE);
SELECT pc_report();
COMMIT;
SELECT all_visible = pg_relation_size('pc_f') / 8192 AS all_vis,
       all_frozen = pg_relation_size('pc_f') / 8192 AS all_frz
  FROM pg_visibility_map_summary('pc_f');
SELECT count(*) FROM verify_heapam('pc_f');
-- rolled back: only the committed rows are left
BEGIN;
/*+ APPEND PARALLEL(2) */ COPY pc_f FROM 'dp_pc_text.dat';
ROLLBACK;
SELECT count(*) FROM pc_f;
DROP TABLE pc_f;

-- a bad row fails the COPY with core's message and the line of the file,
-- whichever process parsed it; nothing is visible
CREATE FUNCTION pc_error(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  m text;
  d text;
  c text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL,
                          c = PG_EXCEPTION_CONTEXT;
  RETURN SQLSTATE || ': ' || m || coalesce(' | ' || nullif(d, ''), '')
         || coalesce(' | ' || substring(c from 'COPY \w+, line [^\n]*'), '');
END $$;
COPY (SELECT id, t, CASE WHEN id = 120000 THEN 'x' ELSE n::text END
        FROM pc_src) TO PROGRAM 'cat > dp_pc_bad.dat';
SELECT pc_error($$/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_bad.dat'$$);
SELECT pc_error($$/*+ NOAPPEND */ COPY pc_t FROM 'dp_pc_bad.dat'$$);
COPY (SELECT id, t, CASE WHEN id = 120000 THEN -1 ELSE n END
        FROM pc_src) TO PROGRAM 'cat > dp_pc_bad.dat' WITH (FORMAT csv);
SELECT pc_error($$/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_bad.dat' WITH (FORMAT csv)$$);
SELECT pc_error($$/*+ NOAPPEND */ COPY pc_t FROM 'dp_pc_bad.dat' WITH (FORMAT csv)$$);
-- a line end that does not match the first line's
COPY pc_src TO PROGRAM 'cat > dp_pc_bad.dat';
COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; printf ''7\tx\t1\r\n'' >> dp_pc_bad.dat';
SELECT pc_error($$/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_bad.dat'$$);
SELECT pc_error($$/*+ NOAPPEND */ COPY pc_t FROM 'dp_pc_bad.dat'$$);
-- a binary file cut short: core's error, at the tuple where it ends
COPY (SELECT 0) TO PROGRAM 'cat >/dev/null; head -c 3000000 dp_pc_bin.dat > dp_pc_binx.dat';
SELECT pc_error($$/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_binx.dat' WITH (FORMAT binary)$$);
SELECT pc_error($$/*+ NOAPPEND */ COPY pc_t FROM 'dp_pc_binx.dat' WITH (FORMAT binary)$$);
SELECT count(*) FROM pc_t;
-- a unique index: the leader inserts the entries, INSERT's error names the
-- key (not the line: the leader did not parse it)
CREATE UNIQUE INDEX pc_t_id ON pc_t (id);
/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_text.dat';
SELECT pc_report();
SELECT count(*), count(DISTINCT id) FROM pc_t;
SELECT bt_index_check('pc_t_id', true);
COPY (SELECT CASE WHEN id = 120000 THEN 7 ELSE id + 1000000 END, t, n FROM pc_src)
  TO PROGRAM 'cat > dp_pc_dup.dat';
SELECT pc_error($$/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_dup.dat'$$);
SELECT count(*) FROM pc_t;
TRUNCATE pc_t;
DROP INDEX pc_t_id;

-- from the client: the leader reads its CopyData messages into chunks
/*+ APPEND PARALLEL(2) */ COPY pc_t FROM STDIN WITH (FORMAT csv);
1,"two
lines",1
2,b,2
\.
SELECT pc_report();
SELECT * FROM pc_t ORDER BY id;
TRUNCATE pc_t;

-- what keeps a COPY serial, and says why
CREATE TABLE pc_rej (LIKE directpath.rejects INCLUDING ALL);
/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_text.dat' WITH (REJECTS_TABLE 'pc_rej');
SELECT pc_report();
TRUNCATE pc_t;
CREATE TABLE pc_seq (id serial, t text, n numeric);
/*+ APPEND PARALLEL(2) */ COPY pc_seq (t, n) FROM PROGRAM 'cut -f2,3 dp_pc_text.dat';
SELECT pc_report();
CREATE DOMAIN pc_dom AS numeric CHECK (VALUE >= 0);
CREATE TABLE pc_d (id int, t text, n pc_dom);
/*+ APPEND PARALLEL(2) */ COPY pc_d FROM 'dp_pc_text.dat';
SELECT pc_report();
CREATE FUNCTION pc_unsafe(numeric) RETURNS boolean LANGUAGE plpgsql
  STABLE PARALLEL UNSAFE AS 'BEGIN RETURN $1 >= 0; END';
CREATE TABLE pc_c (id int, t text, n numeric CHECK (pc_unsafe(n)));
/*+ APPEND PARALLEL(2) */ COPY pc_c FROM 'dp_pc_text.dat';
SELECT pc_report();
/*+ APPEND PARALLEL(2) */ COPY pc_s FROM 'dp_pc_text.dat' WHERE pc_unsafe(n);
SELECT pc_report();
TRUNCATE pc_s;
SET directpath.min_bytes = '64MB';
/*+ APPEND PARALLEL(2) */ COPY pc_t FROM 'dp_pc_text.dat';
SELECT pc_report();
RESET directpath.min_bytes;

DROP TABLE pc_src, pc_t, pc_s, pc_rej, pc_seq, pc_d, pc_c;
DROP DOMAIN pc_dom;
DROP FUNCTION pc_same(), pc_report(), pc_both(text), pc_error(text), pc_unsafe(numeric);
