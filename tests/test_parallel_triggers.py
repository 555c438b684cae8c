"""Parallel loads into targets with triggers (parcheck.c, queue.c).

The workers form the pages; the leader, which takes every page, queues each
row's AFTER ROW events and its place in a transition table as a serial load
queues them once the row's page is written, and they fire at the end of the
statement.  Against the plain statement: the same rows, the same events
(each row's triggers in name order, one row's before the next row's), the
same transition table, statement triggers once each; a WHEN condition
filters as core's; an error raised by a trigger fails the statement and
leaves nothing.  A WHEN condition that is not parallel safe keeps the
load serial and says so (a BEFORE ROW trigger keeps any load on the normal
path).  An AFTER STATEMENT trigger that reads pg_stat_progress_copy sees
a parallel COPY's rows processed and excluded as the plain COPY's.
"""

import pytest

from conftest import error_of, last_statement, set_gucs, table_digest

pytestmark = pytest.mark.directpath

ROWS = 60000


def make_functions(conn):
    conn.execute("CREATE TABLE IF NOT EXISTS pt_log (seq bigserial, tab text, tg text, "
                  "id int, v int, n bigint)")
    conn.execute("""CREATE OR REPLACE FUNCTION pt_row() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.v = -1 THEN RAISE EXCEPTION 'row % refused', NEW.id; END IF;
          INSERT INTO pt_log (tab, tg, id, v) VALUES (TG_ARGV[0], TG_NAME, NEW.id, NEW.v);
          RETURN NULL;
        END $$""")
    conn.execute("""CREATE OR REPLACE FUNCTION pt_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO pt_log (tab, tg, n) VALUES (TG_ARGV[0], TG_NAME, NULL);
          RETURN NULL;
        END $$""")
    conn.execute("""CREATE OR REPLACE FUNCTION pt_new() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO pt_log (tab, tg, id, n)
            SELECT TG_ARGV[0], TG_NAME, sum(id), count(*) FROM nt;
          RETURN NULL;
        END $$""")
    conn.execute("""CREATE OR REPLACE FUNCTION pt_before() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RETURN NEW; END $$""")
    conn.execute("CREATE OR REPLACE FUNCTION pt_unsafe(int) RETURNS bool LANGUAGE plpgsql "
                 "PARALLEL UNSAFE AS 'BEGIN RETURN $1 % 10 = 0; END'")


def make_target(conn, t, partitioned=False, when=None):
    part = " PARTITION BY RANGE (id)" if partitioned else ""
    conn.execute(f"CREATE TABLE {t} (id int, v int, pad text){part}")
    if partitioned:
        conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (MINVALUE) TO (30000)")
        conn.execute(f"CREATE TABLE {t}_2 PARTITION OF {t} FOR VALUES FROM (30000) TO (MAXVALUE)")
    conn.execute(f"CREATE INDEX ON {t} (v)")
    cond = f" WHEN ({when})" if when else ""
    for name in ("a_row", "b_row"):
        conn.execute(f"CREATE TRIGGER {name} AFTER INSERT ON {t} FOR EACH ROW{cond} "
                     f"EXECUTE FUNCTION pt_row('{t}')")
    conn.execute(f"CREATE TRIGGER c_before BEFORE INSERT ON {t} FOR EACH STATEMENT "
                 f"EXECUTE FUNCTION pt_stmt('{t}')")
    conn.execute(f"CREATE TRIGGER d_new AFTER INSERT ON {t} REFERENCING NEW TABLE AS nt "
                 f"FOR EACH STATEMENT EXECUTE FUNCTION pt_new('{t}')")


def make_source(conn, s, bad=None):
    v = f"CASE WHEN g = {bad} THEN -1 ELSE g % 97 END" if bad else "g % 97"
    conn.execute(f"CREATE TABLE {s} AS SELECT (g * 7919) % {ROWS} AS id, {v} AS v, "
                 f"repeat('p', 60) AS pad FROM generate_series(1, {ROWS}) g")
    conn.execute(f"ANALYZE {s}")


def load_sql(how, t, s, path, hint="/*+ APPEND PARALLEL(2) */ "):
    if how == "copy":
        return f"{hint}COPY {t} FROM '{path}'"
    return f"{hint}INSERT INTO {t} SELECT * FROM {s}"


def load(conn, how, t, s, path, hint="/*+ APPEND PARALLEL(2) */ "):
    conn.execute(load_sql(how, t, s, path, hint))


def events(conn, t):
    """The row events in firing order, and the statement triggers' rows."""
    rows = conn.execute("SELECT tg, id, v FROM pt_log WHERE tab = %s AND v IS NOT NULL "
                        "ORDER BY seq", (t,)).fetchall()
    stmts = conn.execute("SELECT tg, id, n FROM pt_log WHERE tab = %s AND v IS NULL "
                         "ORDER BY seq", (t,)).fetchall()
    return rows, stmts


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("how", ["insert", "copy"])
def test_same_events_as_plain(cluster, tmp_path, how, partitioned):
    n = 2 * int(partitioned) + (how == "copy")
    s, tp, td = f"pt_s{n}", f"pt_plain{n}", f"pt_par{n}"
    path = tmp_path / "rows.txt"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        make_functions(conn)
        make_source(conn, s)
        conn.execute(f"COPY {s} TO '{path}'")
        for t in (tp, td):
            make_target(conn, t, partitioned)
        load(conn, how, tp, s, path, hint="")
        load(conn, how, td, s, path)
        st = last_statement(conn)
        assert st["path"] == "direct" and st["parallel_workers"] >= 1, st
        assert "loaded by the leader" not in (st["parallel"] or ""), st
        assert table_digest(conn, td) == table_digest(conn, tp)

        plain, plain_stmts = events(conn, tp)
        par, par_stmts = events(conn, td)
        assert len(par) == 2 * ROWS
        assert sorted(par) == sorted(plain)
        # one row's events together, in trigger name order
        for i in range(0, len(par), 2):
            assert par[i][0] == "a_row" and par[i + 1][0] == "b_row", par[i:i + 2]
            assert par[i][1:] == par[i + 1][1:]
        # BEFORE STATEMENT once, then the transition table: every row once
        total = sum(r[0] for r in conn.execute(f"SELECT id FROM {s}"))
        assert par_stmts == plain_stmts == [("c_before", None, None), ("d_new", total, ROWS)]


def test_when_condition(cluster):
    s, tp, td, tu = "pt_ws", "pt_wplain", "pt_wpar", "pt_wunsafe"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        make_functions(conn)
        make_source(conn, s)
        for t in (tp, td):
            make_target(conn, t, when="NEW.v % 10 = 0")
        make_target(conn, tu, when="pt_unsafe(NEW.v)")
        load(conn, "insert", tp, s, None, hint="")
        load(conn, "insert", td, s, None)
        st = last_statement(conn)
        assert st["parallel_workers"] >= 1, st
        plain, _ = events(conn, tp)
        par, _ = events(conn, td)
        assert sorted(par) == sorted(plain)
        assert {r[2] % 10 for r in par} == {0} and len(par) > 0

        load(conn, "insert", tu, s, None)
        st = last_statement(conn)
        assert st["path"] == "direct" and st["parallel_workers"] == 0, st
        assert 'has trigger "a_row", whose WHEN condition is not parallel safe' \
            in st["parallel"], st
        unsafe, _ = events(conn, tu)
        assert sorted(unsafe) == sorted(plain)


def test_before_row_trigger_keeps_the_normal_path(cluster):
    """A BEFORE ROW trigger keeps even a serial load off the direct path."""
    s, t = "pt_bs", "pt_b"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        make_functions(conn)
        make_source(conn, s)
        make_target(conn, t)
        conn.execute(f"CREATE TRIGGER e_before BEFORE INSERT ON {t} FOR EACH ROW "
                     "EXECUTE FUNCTION pt_before()")
        load(conn, "insert", t, s, None)
        st = last_statement(conn)
        assert st["path"] == "normal", st
        assert "has a BEFORE ROW INSERT trigger" in st["reason"], st
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == ROWS
        assert len(events(conn, t)[0]) == 2 * ROWS


@pytest.mark.parametrize("how", ["insert", "copy"])
def test_trigger_error_leaves_nothing(cluster, tmp_path, how):
    n = int(how == "copy")
    s, tp, td = f"pt_es{n}", f"pt_eplain{n}", f"pt_epar{n}"
    path = tmp_path / "rows.txt"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        make_functions(conn)
        make_source(conn, s, bad=41234)
        conn.execute(f"COPY {s} TO '{path}'")
        for t in (tp, td):
            make_target(conn, t)
        want = error_of(conn, load_sql(how, tp, s, path, hint=""))
        got = error_of(conn, load_sql(how, td, s, path))
        assert want is not None and got is not None
        # SQLSTATE and message (the row named); core's CONTEXT is the trigger's
        assert got[:2] == want[:2] == ("P0001", f"row {(41234 * 7919) % ROWS} refused")
        for t in (tp, td):
            assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0
            assert events(conn, t) == ([], [])


@pytest.mark.parametrize("fmt", ["text", "csv"])
def test_copy_progress_at_the_end(cluster, tmp_path, fmt):
    """pg_stat_progress_copy as an AFTER STATEMENT trigger reads it at the
    end of a COPY with WHERE (core's copy test does so): a parallel COPY
    counts the rows its processes excluded, as the plain COPY does."""
    n = int(fmt == "csv")
    t, path = f"pt_prog{n}", tmp_path / "rows.txt"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute(f"CREATE TABLE {t} (id int, v text)")
        conn.execute(f"CREATE TABLE {t}_seen (processed bigint, excluded bigint)")
        conn.execute(f"""CREATE FUNCTION {t}_seen() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO {t}_seen SELECT tuples_processed, tuples_excluded
                FROM pg_stat_progress_copy WHERE pid = pg_backend_pid();
              RETURN NULL;
            END $$""")
        conn.execute(f"CREATE TRIGGER seen AFTER INSERT ON {t} FOR EACH STATEMENT "
                     f"EXECUTE FUNCTION {t}_seen()")
        conn.execute(f"COPY (SELECT g, repeat('v', 50) FROM generate_series(1, 200000) g) "
                     f"TO '{path}' WITH (FORMAT {fmt})")
        copy = f"COPY {t} FROM '{path}' WITH (FORMAT {fmt}) WHERE id % 7 <> 0"
        conn.execute(copy)
        conn.execute(f"/*+ APPEND PARALLEL(2) */ {copy}")
        st = last_statement(conn)
        assert st["parallel_workers"] >= 1, st
        seen = conn.execute(f"SELECT processed, excluded FROM {t}_seen").fetchall()
        assert seen == [(200000 - 28571, 28571)] * 2, seen
