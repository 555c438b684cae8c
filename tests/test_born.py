"""Tables born ready (src/statement/born.c): CREATE TABLE AS, SELECT INTO,
CREATE TABLE AS EXECUTE, CREATE MATERIALIZED VIEW and REFRESH MATERIALIZED
VIEW write their rows on the direct path.

Differential: each statement runs plain and hinted (or under mode =
always); the new relations must hold the same rows, the direct one frozen
and all-visible in the visibility map, with less WAL.  A statement that
fails, or a transaction that aborts, leaves no relation; a standby replays
the pages; a restart after a crash keeps them.  The refused forms (a
temporary table, NOAPPEND) run as core runs them; REFRESH CONCURRENTLY's
own DELETE and INSERT on the view take the REFRESH's hint.
"""

import re

import psycopg
import pytest

from conftest import last_statement, set_gucs, sqlstate_of, table_digest

pytestmark = pytest.mark.directpath

QUERY = ("SELECT g AS id, md5(g::text) AS v, g % 100 AS grp, "
         "timestamptz '2026-01-01' + g * interval '1 s' AS ts FROM generate_series(1, {n}) g")


def wal_bytes(conn, sql):
    start = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    conn.execute(sql)
    return int(conn.execute("SELECT pg_current_wal_insert_lsn() - %s::pg_lsn",
                            (start,)).fetchone()[0])


def all_frozen(conn, rel):
    return conn.execute(f"SELECT count(*) FILTER (WHERE all_frozen AND all_visible), count(*) "
                        f"FROM pg_visibility_map('{rel}')").fetchone()


# statement kind: (plain form, direct form) with {t} the new relation
FORMS = {
    "CREATE TABLE AS": ("CREATE TABLE {t} AS " + QUERY,
                        "/*+ APPEND */ CREATE TABLE {t} AS " + QUERY),
    "hint after AS": ("CREATE TABLE {t} AS " + QUERY,
                      "CREATE TABLE {t} AS /*+ APPEND */ " + QUERY),
    "SELECT INTO": ("SELECT * INTO {t} FROM (" + QUERY + ") s",
                    "/*+ APPEND */ SELECT * INTO {t} FROM (" + QUERY + ") s"),
    "CREATE MATERIALIZED VIEW": ("CREATE MATERIALIZED VIEW {t} AS " + QUERY,
                                 "/*+ APPEND */ CREATE MATERIALIZED VIEW {t} AS " + QUERY),
    "unlogged": ("CREATE UNLOGGED TABLE {t} AS " + QUERY,
                 "/*+ APPEND */ CREATE UNLOGGED TABLE {t} AS " + QUERY),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_born_ready(cluster, form):
    plain, direct = FORMS[form]
    i = list(FORMS).index(form)
    tp, td = f"bn_p_{i}", f"bn_d_{i}"
    with cluster.conn() as conn:
        wal_plain = wal_bytes(conn, plain.format(t=tp, n=200000))
        wal_direct = wal_bytes(conn, direct.format(t=td, n=200000))
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == 200000, st
        assert st["frozen"] is True
        assert table_digest(conn, tp) == table_digest(conn, td)
        frozen, pages = all_frozen(conn, td)
        assert frozen == pages and pages > 1000
        assert all_frozen(conn, tp)[0] == 0
        if form != "unlogged":
            assert wal_direct < wal_plain * 0.8, (wal_direct, wal_plain)
        if "MATERIALIZED" in form:
            assert conn.execute(f"SELECT ispopulated FROM pg_matviews WHERE matviewname = "
                                f"'{td}'").fetchone()[0] is True


def test_refresh_materialized_view(cluster):
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE bn_src AS " + QUERY.format(n=100000))
        for mv in ("bn_mv_p", "bn_mv_d"):
            conn.execute(f"CREATE MATERIALIZED VIEW {mv} AS SELECT * FROM bn_src WHERE grp < 50 "
                         f"WITH NO DATA")
            assert sqlstate_of(conn, f"SELECT * FROM {mv}") == "55000"
        conn.execute("REFRESH MATERIALIZED VIEW bn_mv_p")
        conn.execute("/*+ APPEND */ REFRESH MATERIALIZED VIEW bn_mv_d")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == 50000 and st["frozen"], st
        assert table_digest(conn, "bn_mv_p") == table_digest(conn, "bn_mv_d")
        frozen, pages = all_frozen(conn, "bn_mv_d")
        assert frozen == pages > 0
        # again, after the source changed; an index on the view is rebuilt
        conn.execute("DELETE FROM bn_src WHERE grp = 7")
        conn.execute("CREATE UNIQUE INDEX ON bn_mv_d (id)")
        conn.execute("CREATE UNIQUE INDEX ON bn_mv_p (id)")
        conn.execute("REFRESH MATERIALIZED VIEW bn_mv_p")
        conn.execute("/*+ APPEND */ REFRESH MATERIALIZED VIEW bn_mv_d")
        assert table_digest(conn, "bn_mv_p") == table_digest(conn, "bn_mv_d")
        assert conn.execute("SELECT count(*) FROM bn_mv_d WHERE id = 1007").fetchone()[0] == 0
        conn.execute("SELECT bt_index_parent_check('bn_mv_d_id_idx'::regclass, true, true)")


def refresh_logged(conn, sql):
    """Run 'sql' with the direct path's LOG lines sent to the client; the
    kinds and targets of the loads it logged ("DELETE public.v")."""
    notices = []

    def keep(d):
        notices.append(d.message_primary)

    conn.add_notice_handler(keep)
    conn.execute("SET client_min_messages = log")
    conn.execute("SET directpath.log_min_rows = 0")
    try:
        conn.execute(sql)
    finally:
        conn.execute("RESET client_min_messages")
        conn.execute("RESET directpath.log_min_rows")
        conn.remove_notice_handler(keep)
    found = (re.match(r'directpath: (\w+) "([^"]+)": \d+ rows, ', n) for n in notices)
    return {f"{m[1]} {m[2]}" for m in found if m}


def mv_views_agree(conn, plain, direct):
    """The two views' rows, by a sequential scan and through their unique
    index, and the index checked against the heap (amcheck)."""
    assert table_digest(conn, plain) == table_digest(conn, direct)
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_bitmapscan = off")
    by_index = [conn.execute(f"SELECT count(*), sum(hashtext(v)) FROM {t} WHERE id > 0"
                             ).fetchone() for t in (plain, direct)]
    conn.execute("RESET enable_seqscan")
    conn.execute("RESET enable_bitmapscan")
    assert by_index[0] == by_index[1]
    conn.execute(f"SELECT bt_index_parent_check('{direct}_id'::regclass, true, true)")


def test_refresh_concurrently(cluster):
    """REFRESH ... CONCURRENTLY: core fills a temporary table and diffs it
    against the view; the DELETE and INSERT it then runs on the view take
    the REFRESH's hint, a bulk DELETE and a direct INSERT."""
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE bn_csrc AS " + QUERY.format(n=60000))
        for mv in ("bn_cmv_p", "bn_cmv_d"):
            conn.execute(f"CREATE MATERIALIZED VIEW {mv} AS SELECT * FROM bn_csrc "
                         f"WHERE grp < 80")
            conn.execute(f"CREATE UNIQUE INDEX {mv}_id ON {mv} (id)")
            conn.execute(f"CREATE INDEX ON {mv} (grp, ts)")
        # rows gone, rows changed under the same key, rows new
        conn.execute("DELETE FROM bn_csrc WHERE grp = 7")
        conn.execute("UPDATE bn_csrc SET v = upper(v) WHERE id % 10 = 3")
        conn.execute("INSERT INTO bn_csrc " + QUERY.format(n=70000).replace(
            "generate_series(1,", "generate_series(60001,"))
        conn.execute("REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_p")
        loads = refresh_logged(conn, "/*+ APPEND */ REFRESH MATERIALIZED VIEW "
                                     "CONCURRENTLY bn_cmv_d")
        assert loads == {"DELETE public.bn_cmv_d", "INSERT public.bn_cmv_d"}, loads
        mv_views_agree(conn, "bn_cmv_p", "bn_cmv_d")
        # directpath.mode = always takes it unhinted; NOAPPEND leaves it to core
        conn.execute("UPDATE bn_csrc SET grp = 90 WHERE id % 7 = 1")
        conn.execute("REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_p")
        set_gucs(conn, {"directpath.mode": "always"})
        loads = refresh_logged(conn, "REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_d")
        # the DELETE of 8,000 rows is below directpath.bulk_dml_min_rows
        assert loads == {"INSERT public.bn_cmv_d"}, loads
        mv_views_agree(conn, "bn_cmv_p", "bn_cmv_d")
        conn.execute("UPDATE bn_csrc SET v = v || 'x' WHERE id % 3 = 0")
        conn.execute("REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_p")
        set_gucs(conn, {"directpath.bulk_dml_min_rows": "1000"})
        loads = refresh_logged(conn, "REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_d")
        assert loads == {"DELETE public.bn_cmv_d", "INSERT public.bn_cmv_d"}, loads
        mv_views_agree(conn, "bn_cmv_p", "bn_cmv_d")
        conn.execute("UPDATE bn_csrc SET grp = 1 WHERE id % 7 = 1")
        conn.execute("REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_p")
        loads = refresh_logged(conn, "/*+ NOAPPEND */ REFRESH MATERIALIZED VIEW "
                                     "CONCURRENTLY bn_cmv_d")
        assert loads == set(), loads
        mv_views_agree(conn, "bn_cmv_p", "bn_cmv_d")
        # an aborted refresh leaves the view as it was
        before = table_digest(conn, "bn_cmv_d")
        conn.execute("UPDATE bn_csrc SET v = v || '!' WHERE id % 5 = 0")
        conn.execute("BEGIN")
        conn.execute("/*+ APPEND */ REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_d")
        assert table_digest(conn, "bn_cmv_d") != before
        conn.execute("ROLLBACK")
        assert table_digest(conn, "bn_cmv_d") == before
        mv_views_agree(conn, "bn_cmv_p", "bn_cmv_d")
        # a materialized view is written by DML only there
        conn.execute("/*+ APPEND */ REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_d")
        conn.execute("REFRESH MATERIALIZED VIEW CONCURRENTLY bn_cmv_p")
        mv_views_agree(conn, "bn_cmv_p", "bn_cmv_d")
        assert sqlstate_of(conn, "/*+ APPEND */ INSERT INTO bn_cmv_d "
                                 "SELECT * FROM bn_csrc LIMIT 1") == "42809"


def test_mode_always_noappend_and_execute(cluster):
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.mode": "always"})
        conn.execute("CREATE TABLE bn_al AS " + QUERY.format(n=50000))
        assert last_statement(conn)["path"] == "direct"
        conn.execute("SELECT 1")
        conn.execute("/*+ NOAPPEND */ CREATE TABLE bn_no AS " + QUERY.format(n=50000))
        assert all_frozen(conn, "bn_no")[0] == 0
        conn.execute("PREPARE bn_q(int) AS " + QUERY.format(n="$1"))
        conn.execute("CREATE TABLE bn_ex AS EXECUTE bn_q(50000)")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == 50000, st
        assert table_digest(conn, "bn_al") == table_digest(conn, "bn_ex") == \
            table_digest(conn, "bn_no")


def test_refused_temporary_table_says_why(cluster):
    with cluster.conn() as conn:
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute("/*+ APPEND */ CREATE TEMP TABLE bn_tmp AS " + QUERY.format(n=20000))
        st = last_statement(conn)
        assert st["path"] == "normal" and "temporary" in st["reason"], st
        assert st["rows_inserted"] == 20000
        assert any("CREATE TABLE AS uses the normal path" in n for n in notices), notices
        assert conn.execute("SELECT count(*) FROM bn_tmp").fetchone()[0] == 20000


def test_failure_and_abort_leave_nothing(cluster):
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0", "directpath.batch_pages": "8"})
        # fails after several batches were written
        code = sqlstate_of(conn, "/*+ APPEND */ CREATE TABLE bn_fail AS SELECT g, "
                                 "1 / (g - 150000) AS x FROM generate_series(1, 200000) g")
        assert code == "22012"
        assert conn.execute("SELECT to_regclass('bn_fail')").fetchone()[0] is None
        conn.execute("BEGIN")
        conn.execute("/*+ APPEND */ CREATE TABLE bn_abort AS " + QUERY.format(n=100000))
        assert last_statement(conn)["path"] == "direct"
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT to_regclass('bn_abort')").fetchone()[0] is None


def test_repeatable_read_is_not_frozen(cluster):
    """COPY FREEZE's rule: a snapshot registered before the statement (an
    isolation snapshot) keeps the rows from being frozen."""
    with cluster.conn() as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1").fetchone()
        conn.execute("/*+ APPEND */ CREATE TABLE bn_rr AS " + QUERY.format(n=50000))
        st = last_statement(conn)
        assert st["path"] == "direct" and st["frozen"] is False, st
        assert conn.execute("SELECT count(*) FROM bn_rr").fetchone()[0] == 50000
        conn.execute("COMMIT")


def test_standby_and_crash(make_cluster, tmp_path):
    primary = make_cluster(name="bn_primary")
    standby = primary.make_standby(tmp_path)
    with primary.conn() as conn:
        conn.execute("/*+ APPEND */ CREATE TABLE bn_rep AS " + QUERY.format(n=150000))
        conn.execute("/*+ APPEND */ CREATE MATERIALIZED VIEW bn_rep_mv AS "
                     "SELECT grp, count(*) FROM bn_rep GROUP BY grp")
        digest = table_digest(conn, "bn_rep")
        primary.wait_replay(standby)
    with standby.conn() as s:
        assert table_digest(s, "bn_rep") == digest
        assert s.execute("SELECT sum(count) FROM bn_rep_mv").fetchone()[0] == 150000
    primary.kill_postmaster_immediate()
    primary.start()
    with primary.conn() as conn:
        assert table_digest(conn, "bn_rep") == digest
        assert conn.execute("SELECT * FROM verify_heapam('bn_rep')").fetchall() == []
        frozen, pages = all_frozen(conn, "bn_rep")
        assert frozen == pages > 0
