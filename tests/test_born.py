"""Tables born ready (src/statement/born.c): CREATE TABLE AS, SELECT INTO,
CREATE TABLE AS EXECUTE, CREATE MATERIALIZED VIEW and REFRESH MATERIALIZED
VIEW write their rows on the direct path.

Differential: each statement runs plain and hinted (or under mode =
always); the new relations must hold the same rows, the direct one frozen
and all-visible in the visibility map, with less WAL.  A statement that
fails, or a transaction that aborts, leaves no relation; a standby replays
the pages; a restart after a crash keeps them.  The refused forms (a
temporary table, NOAPPEND, REFRESH CONCURRENTLY) run as core runs them.
"""

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
        # CONCURRENTLY is core's (its new data goes to a temporary table)
        conn.execute("/*+ APPEND */ REFRESH MATERIALIZED VIEW CONCURRENTLY bn_mv_d")
        assert table_digest(conn, "bn_mv_p") == table_digest(conn, "bn_mv_d")


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
