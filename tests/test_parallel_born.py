"""Tables born ready in parallel: CREATE TABLE AS, SELECT INTO, CREATE
MATERIALIZED VIEW and REFRESH MATERIALIZED VIEW with /*+ APPEND PARALLEL(n) */
(statement/born.c, parallel/parplan.c: dp_parallel_born_refusal,
dp_parallel_select).

Differential: each statement runs plain and hinted with PARALLEL(2); the new
relations must hold the same rows, the parallel one built by workers
(last_statement().parallel_workers), frozen and all-visible, with its
statistics, and the command's row count as core's.  A SELECT that cannot be
split (ORDER BY, grouping, a parallel-restricted function, a temporary
table) runs serially on the direct path and says why.  A worker's error
fails the statement and leaves no relation.  Session settings reach the
workers: a query whose output depends on them gives the plain rows.
"""

import pytest

from conftest import last_statement, sqlstate_of, table_digest

pytestmark = pytest.mark.directpath

N = 300000
SOURCE = ("CREATE TABLE {t} AS SELECT g AS id, md5(g::text) AS v, g % 100 AS grp, "
          "timestamptz '2026-01-01' + g * interval '1 s' AS ts, g / 7.0 AS x "
          "FROM generate_series(1, " + str(N) + ") g")


@pytest.fixture
def src(cluster):
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS pb_src, pb_dim CASCADE")
        conn.execute(SOURCE.format(t="pb_src"))
        conn.execute("CREATE TABLE pb_dim AS SELECT g AS grp, 'group ' || g AS name "
                     "FROM generate_series(0, 99) g")
        conn.execute("VACUUM ANALYZE pb_src, pb_dim")
    return "pb_src"


def all_frozen(conn, rel):
    return conn.execute(f"SELECT count(*) FILTER (WHERE all_frozen AND all_visible), count(*) "
                        f"FROM pg_visibility_map('{rel}')").fetchone()


def plain_and_parallel(conn, form, tp, td, workers=2):
    """The plain statement into tp, the hinted parallel one into td: their
    command statuses, and the parallel one's last_statement()."""
    plain = conn.execute(form.format(t=tp, hint="")).statusmessage
    direct = conn.execute(form.format(t=td, hint=f"/*+ APPEND PARALLEL({workers}) */ ")
                          ).statusmessage
    return plain, direct, last_statement(conn)


# form: {hint} the hint, {t} the new relation
FORMS = {
    "scan": "{hint}CREATE TABLE {t} AS SELECT * FROM pb_src",
    "scan with quals and expressions": (
        "{hint}CREATE TABLE {t} AS SELECT id, upper(v) AS v, grp * 2 AS g2, "
        "ts + interval '1 day' AS ts, round(x, 2) AS x FROM pb_src WHERE grp < 70"),
    "join": ("{hint}CREATE TABLE {t} AS SELECT s.id, s.v, d.name FROM pb_src s "
             "JOIN pb_dim d ON d.grp = s.grp WHERE s.id % 3 <> 0"),
    "SELECT INTO": "{hint}SELECT id, v, grp INTO {t} FROM pb_src",
    "materialized view": "{hint}CREATE MATERIALIZED VIEW {t} AS SELECT id, v FROM pb_src",
    "unlogged": "{hint}CREATE UNLOGGED TABLE {t} AS SELECT * FROM pb_src",
}


@pytest.mark.parametrize("form", list(FORMS))
def test_born_in_parallel(cluster, src, form):
    i = list(FORMS).index(form)
    tp, td = f"pb_p_{i}", f"pb_d_{i}"
    with cluster.conn() as conn:
        plain, direct, st = plain_and_parallel(conn, FORMS[form], tp, td)
        assert direct == plain, (direct, plain)
        assert st["path"] == "direct" and st["parallel_workers"] >= 1, st
        assert st["parallel"] is None and st["frozen"] is True, st
        assert table_digest(conn, tp) == table_digest(conn, td)
        rows = table_digest(conn, td)[0]
        assert st["rows_inserted"] == rows > 100000, (st, rows)
        frozen, pages = all_frozen(conn, td)
        assert frozen == pages > 100
        assert st["statistics"].startswith("gathered"), st
        assert conn.execute("SELECT count(*) > 0 FROM pg_stats WHERE tablename = %s",
                            (td,)).fetchone()[0]


def test_refresh_in_parallel(cluster, src):
    with cluster.conn() as conn:
        for mv in ("pb_mv_p", "pb_mv_d"):
            conn.execute(f"CREATE MATERIALIZED VIEW {mv} AS SELECT s.id, s.v, d.name "
                         f"FROM pb_src s JOIN pb_dim d USING (grp) WITH NO DATA")
            conn.execute(f"CREATE UNIQUE INDEX ON {mv} (id)")
        conn.execute("DELETE FROM pb_src WHERE grp = 5")
        conn.execute("REFRESH MATERIALIZED VIEW pb_mv_p")
        conn.execute("/*+ APPEND PARALLEL(2) */ REFRESH MATERIALIZED VIEW pb_mv_d")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["parallel_workers"] >= 1, st
        assert st["rows_inserted"] == N - N // 100, st
        assert table_digest(conn, "pb_mv_p") == table_digest(conn, "pb_mv_d")
        frozen, pages = all_frozen(conn, "pb_mv_d")
        assert frozen == pages > 0
        conn.execute("SELECT bt_index_parent_check('pb_mv_d_id_idx'::regclass, true, true)")
        assert conn.execute("SELECT count(*) FROM pb_mv_d WHERE id = 1005").fetchone()[0] == 0


# the SELECTs that cannot be split, and what last_statement() says
SERIAL = {
    "order by": ("{hint}CREATE TABLE {t} AS SELECT id, v FROM pb_src ORDER BY v",
                 "its SELECT has ORDER BY"),
    "group by": ("{hint}CREATE TABLE {t} AS SELECT id, count(*) AS n FROM pb_src GROUP BY id",
                 "its SELECT aggregates or groups rows"),
    "restricted function": (
        "{hint}CREATE TABLE {t} AS SELECT id, v || pg_backend_pid()::text <> '' AS p FROM pb_src",
        "the statement calls a function that is not parallel safe"),
    "temporary table": ("{hint}CREATE TABLE {t} AS SELECT * FROM pb_tmp",
                        "its SELECT reads a temporary table"),
}


@pytest.mark.parametrize("case", list(SERIAL))
def test_serial_with_reason(cluster, src, case):
    form, why = SERIAL[case]
    i = list(SERIAL).index(case)
    with cluster.conn() as conn:
        conn.execute("CREATE TEMP TABLE pb_tmp AS SELECT * FROM pb_src")
        plain, direct, st = plain_and_parallel(conn, form, f"pb_sp_{i}", f"pb_sd_{i}")
        assert direct == plain
        assert st["path"] == "direct" and st["parallel_workers"] == 0, st
        assert st["parallel"] is not None and st["parallel"].startswith(why), st
        assert table_digest(conn, f"pb_sp_{i}") == table_digest(conn, f"pb_sd_{i}")


def test_worker_error_leaves_nothing(cluster, src):
    """A row that fails in whichever process reads it fails the statement:
    core's error, and no relation afterwards, also for a materialized view."""
    with cluster.conn() as conn:
        for form in ("{hint}CREATE TABLE pb_err AS SELECT id, 1 / (id - 200000) AS q FROM pb_src",
                     "{hint}CREATE MATERIALIZED VIEW pb_err AS "
                     "SELECT id, 1 / (id - 200000) AS q FROM pb_src"):
            sql = form.format(hint="/*+ APPEND PARALLEL(2) */ ")
            assert sqlstate_of(conn, sql) == "22012"
            assert conn.execute("SELECT to_regclass('pb_err')").fetchone()[0] is None


def test_settings_reach_the_workers(cluster, src):
    """Output that depends on the session's settings (time zone, date style,
    float digits, the interval style) is the plain statement's."""
    form = ("{hint}CREATE TABLE {t} AS SELECT id, ts::text AS ts_text, (x::float8)::text AS f, "
            "(ts - timestamptz '2026-01-01')::text AS iv, to_char(ts, 'Dy DD Mon TZ') AS c "
            "FROM pb_src")
    with cluster.conn() as conn:
        conn.execute("SET TimeZone = 'Asia/Kolkata'")
        conn.execute("SET DateStyle = 'SQL, DMY'")
        conn.execute("SET extra_float_digits = 0")
        conn.execute("SET IntervalStyle = 'iso_8601'")
        plain, direct, st = plain_and_parallel(conn, form, "pb_gp", "pb_gd")
        assert st["parallel_workers"] >= 1, st
        assert table_digest(conn, "pb_gp") == table_digest(conn, "pb_gd")
        sample = conn.execute("SELECT ts_text, iv FROM pb_gd WHERE id = 1").fetchone()
        assert sample[0].endswith("+0530") or "IST" in sample[0] or "+05:30" in sample[0], sample
        assert sample[1].startswith("P") or sample[1].startswith("PT"), sample
