--
-- Statement and AFTER ROW triggers, transition tables, deferred constraints.
--
SET directpath.min_bytes = 0;
CREATE TABLE tg (a int, b text);
CREATE TABLE tg_log (seq serial, what text, n bigint);

CREATE FUNCTION tg_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO tg_log (what, n) VALUES (TG_WHEN || ' ' || TG_LEVEL, (SELECT count(*) FROM tg));
	RETURN NULL;
END $$;
CREATE FUNCTION tg_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- the row is visible through its TID when the trigger fires
	INSERT INTO tg_log (what, n) VALUES ('row ' || NEW.b, (SELECT count(*) FROM tg WHERE a = NEW.a));
	RETURN NULL;
END $$;
CREATE FUNCTION tg_trans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO tg_log (what, n) VALUES ('transition', (SELECT sum(a) FROM new_rows));
	RETURN NULL;
END $$;

CREATE TRIGGER tg_bs BEFORE INSERT ON tg FOR EACH STATEMENT EXECUTE FUNCTION tg_stmt();
CREATE TRIGGER tg_as AFTER INSERT ON tg FOR EACH STATEMENT EXECUTE FUNCTION tg_stmt();
CREATE TRIGGER tg_ar AFTER INSERT ON tg FOR EACH ROW WHEN (NEW.a % 1000 = 0) EXECUTE FUNCTION tg_row();
CREATE TRIGGER tg_tt AFTER INSERT ON tg REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tg_trans();

/*+ APPEND */ INSERT INTO tg SELECT g, 'd' || g FROM generate_series(1, 3000) g;
SELECT path, rows_inserted FROM directpath.last_statement();
SELECT what, n FROM tg_log ORDER BY seq;

-- transition tables through partitions
CREATE TABLE tgp (a int, b text) PARTITION BY RANGE (a);
CREATE TABLE tgp1 PARTITION OF tgp FOR VALUES FROM (0) TO (1500);
CREATE TABLE tgp2 (b text, a int);
ALTER TABLE tgp ATTACH PARTITION tgp2 FOR VALUES FROM (1500) TO (10000);
CREATE TRIGGER tgp_tt AFTER INSERT ON tgp REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tg_trans();
TRUNCATE tg_log;
/*+ APPEND */ INSERT INTO tgp SELECT g, 'p' FROM generate_series(1, 3000) g;
SELECT path, relations FROM directpath.last_statement();
SELECT what, n FROM tg_log;

-- deferrable unique constraint: checked at commit, as for a plain INSERT
CREATE TABLE dfr (a int UNIQUE DEFERRABLE INITIALLY DEFERRED);
BEGIN;
/*+ APPEND */ INSERT INTO dfr SELECT generate_series(1, 2000);
/*+ APPEND */ INSERT INTO dfr SELECT 5;
DELETE FROM dfr WHERE ctid = (SELECT min(ctid) FROM dfr WHERE a = 5);
COMMIT;
SELECT count(*) FROM dfr;
BEGIN;
/*+ APPEND */ INSERT INTO dfr SELECT 7;
COMMIT;

DROP TABLE tg, tg_log, tgp, dfr;
DROP FUNCTION tg_stmt(), tg_row(), tg_trans();
