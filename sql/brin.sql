--
-- BRIN indexes: the ranges a load writes are summarized once, at the end
-- of the statement; no index call per row.
--
SET directpath.min_bytes = 0;
CREATE EXTENSION IF NOT EXISTS pageinspect;
-- every row a BRIN scan finds equals what a sequential scan finds, for a
-- few windows over the column; 'ok' or the first window that differs
CREATE FUNCTION brin_agrees(t regclass, col text, maxval int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  lo int;
  by_index bigint;
  by_heap bigint;
BEGIN
  FOR lo IN SELECT g FROM generate_series(-10, maxval, greatest(maxval / 7, 1)) g LOOP
    SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off;
    EXECUTE format('SELECT count(*) FROM %s WHERE %s BETWEEN $1 AND $1 + 25', t, col)
      INTO by_index USING lo;
    SET LOCAL enable_seqscan = on; SET LOCAL enable_bitmapscan = off;
    EXECUTE format('SELECT count(*) FROM %s WHERE %s BETWEEN $1 AND $1 + 25', t, col)
      INTO by_heap USING lo;
    RESET enable_seqscan; RESET enable_indexscan; RESET enable_bitmapscan;
    IF by_index <> by_heap THEN
      RETURN format('differs at %s: %s by index, %s by heap', lo, by_index, by_heap);
    END IF;
  END LOOP;
  RETURN 'ok';
END $$;
-- the summaries of a BRIN index (first block of each range, its value)
CREATE FUNCTION brin_ranges(i regclass) RETURNS TABLE (blknum bigint, value text)
LANGUAGE sql AS $$
  SELECT p.blknum, p.value FROM generate_series(2, pg_relation_size(i) / 8192 - 1) b,
         brin_page_items(get_raw_page(i::text, b::int), i) p
  WHERE p.blknum IS NOT NULL ORDER BY 1 $$;

-- an existing table whose last range has a summary: it is summarized
-- again with the new rows, and every new range gets one
CREATE TABLE br (id int, ts int, pad text);
CREATE INDEX br_ts ON br USING brin (ts) WITH (pages_per_range = 16);
CREATE INDEX br_id ON br (id);
INSERT INTO br SELECT g, g, 'old' FROM generate_series(1, 5000) g;
SELECT brin_summarize_new_values('br_ts');
SELECT * FROM brin_ranges('br_ts');
/*+ APPEND */ INSERT INTO br SELECT g, g, 'new' FROM generate_series(5001, 20000) g;
SELECT path, index_maintenance FROM directpath.last_statement();
SELECT * FROM brin_ranges('br_ts');
SELECT brin_agrees('br', 'ts', 20000);

-- an old range without a summary that the load writes into gets one;
-- older ranges without one are left to vacuum
SELECT brin_desummarize_range('br_ts', 0);
SELECT brin_desummarize_range('br_ts', (pg_relation_size('br') / 8192 - 1));
/*+ APPEND */ INSERT INTO br SELECT g, g, 'more' FROM generate_series(20001, 23000) g;
SELECT * FROM brin_ranges('br_ts');
SELECT brin_agrees('br', 'ts', 23000);

-- a rolled back load leaves summaries that still cover every live row
BEGIN;
/*+ APPEND */ INSERT INTO br SELECT g, -g, 'gone' FROM generate_series(1, 3000) g;
ROLLBACK;
/*+ APPEND */ INSERT INTO br SELECT g, g, 'after' FROM generate_series(23001, 24000) g;
SELECT brin_agrees('br', 'ts', 24000);

-- COPY, a partial and an expression BRIN index, a loader that only may
-- INSERT (summaries are made as the table's owner, as autovacuum makes them)
CREATE TABLE brc (id int, ts int, flag bool);
INSERT INTO brc SELECT g, g, g % 2 = 0 FROM generate_series(1, 3000) g;
CREATE INDEX brc_ts ON brc USING brin (ts) WITH (pages_per_range = 8);
CREATE INDEX brc_part ON brc USING brin (id) WITH (pages_per_range = 8) WHERE flag;
CREATE INDEX brc_expr ON brc USING brin ((ts * 2)) WITH (pages_per_range = 8);
CREATE ROLE dp_brin_loader;
GRANT INSERT, SELECT ON brc TO dp_brin_loader;
COPY (SELECT g, g, g % 2 = 0 FROM generate_series(3001, 9000) g) TO PROGRAM 'cat > dp_brin.csv';
GRANT pg_read_server_files TO dp_brin_loader;
SET ROLE dp_brin_loader;
COPY brc FROM 'dp_brin.csv';
SELECT path, index_maintenance FROM directpath.last_statement();
RESET ROLE;
SELECT brin_agrees('brc', 'ts', 9000);
SELECT brin_agrees('brc', 'id', 9000);
SELECT brin_agrees('brc', 'ts * 2', 18000);
SELECT count(*) FROM brin_ranges('brc_ts') WHERE value IS NOT NULL;

-- new storage: the btrees are built from sorted entries, the BRIN index
-- summarized; the heap is not read back for the btrees
BEGIN;
CREATE TABLE brn (id int PRIMARY KEY, ts int);
CREATE INDEX brn_ts ON brn USING brin (ts) WITH (pages_per_range = 16);
/*+ APPEND */ INSERT INTO brn SELECT g, g FROM generate_series(1, 10000) g;
SELECT path, index_maintenance, indexes_rebuilt FROM directpath.last_statement();
COMMIT;
SELECT brin_agrees('brn', 'ts', 10000);
SELECT * FROM brin_ranges('brn_ts');
-- a vacuum that truncates the heap leaves its cut-off ranges' summaries:
-- a load into those blocks summarizes them anew
DELETE FROM brn WHERE id > 100;
VACUUM brn;
SELECT pg_relation_size('brn') / 8192 AS blocks_after_truncation;
/*+ APPEND */ INSERT INTO brn SELECT g, g + 20000 FROM generate_series(101, 10000) g;
SELECT brin_agrees('brn', 'ts', 30000);
SELECT * FROM brin_ranges('brn_ts');

-- kept per row: a table with a row trigger, and the setting off
CREATE FUNCTION br_noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE TRIGGER br_noop AFTER INSERT ON brc FOR EACH ROW EXECUTE FUNCTION br_noop();
/*+ APPEND */ INSERT INTO brc SELECT g, g, true FROM generate_series(9001, 9500) g;
SELECT path, index_maintenance FROM directpath.last_statement();
DROP TRIGGER br_noop ON brc;
SET directpath.brin_summarize = off;
/*+ APPEND */ INSERT INTO brc SELECT g, g, true FROM generate_series(9501, 10000) g;
SELECT path, index_maintenance FROM directpath.last_statement();
RESET directpath.brin_summarize;
SELECT brin_agrees('brc', 'ts', 10000);

-- a table whose only row trigger checks a foreign key of another table is
-- summarized at the end
CREATE TABLE brf_parent (id int PRIMARY KEY);
INSERT INTO brf_parent SELECT generate_series(1, 100);
CREATE TABLE brf (id int, p int REFERENCES brf_parent, ts int);
CREATE INDEX brf_ts ON brf USING brin (ts) WITH (pages_per_range = 4);
/*+ APPEND */ INSERT INTO brf SELECT g, g % 100 + 1, g FROM generate_series(1, 20000) g;
SELECT path, index_maintenance FROM directpath.last_statement();
SELECT brin_agrees('brf', 'ts', 20000);
DROP TABLE brf, brf_parent;

DROP TABLE br, brc, brn;
DROP FUNCTION br_noop();
REVOKE pg_read_server_files FROM dp_brin_loader;
DROP ROLE dp_brin_loader;
