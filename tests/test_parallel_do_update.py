"""Parallel ON CONFLICT DO UPDATE: `/*+ APPEND PARALLEL(n) */ INSERT ...
SELECT ... ON CONFLICT (...) DO UPDATE` from a heap table and `COPY ... WITH
(ON_CONFLICT 'update')` into a plain table.  The workers scan or parse
their share, probe the arbiter and decide their rows: a row whose key is in
the table goes to the leader, in input order, for the updates in bulk after
the load (load/versions.c, as serially); the others are placed on pages.
A key that two rows of the input bring (new or in the table) is core's
"cannot affect row a second time", whichever processes the two rows are in.

The input (pud_src, and the same rows as a CSV file in line order) has
300,000 lines with distinct keys in a scattered order; the target holds
every third key with other values, so a third of the lines update a row and
two thirds insert one.  Each parallel statement is compared with the plain
statement on a target made alike (the COPY: with the serial direct COPY,
and with core's INSERT ... ON CONFLICT DO UPDATE of the staged rows in line
order): the table, the command's count, EXPLAIN ANALYZE's Tuples Inserted
and Conflicting Tuples; then amcheck (heapallindexed) and index scans
against sequential scans on every indexed column.  A key repeated in the
input, near (the next line) or far (the last line), fails the parallel
statement with the plain statement's error and leaves the table as it was.
"""

import pytest

from conftest import (Background, error_of, fault_gucs, last_statement, set_gucs, table_digest,
                      verify_table)
from test_parallel_upsert import explain_counts, kill_at_fault, parallel_report, scans_agree

pytestmark = pytest.mark.directpath

ROWS = 300_000
COLS = "k, n, u, v"
# line g (n): key (g * 7919) mod 300007, distinct for g < 300007 (a prime);
# u repeats, NULL on every fifth line; v names the line
SOURCE = ("SELECT (g::bigint * 7919 % 300007)::int, g, CASE WHEN g % 5 = 0 THEN NULL "
          "ELSE g % 1000 END, md5(g::text) FROM generate_series(1, {rows}) g")
# every third key, with values no line has
OLD = ("SELECT g, -g, g % 1000, 'old' FROM generate_series(0, 300006, 3) g")
TARGET = "(k int PRIMARY KEY, n int NOT NULL, u int, v text)"

# case: (ON CONFLICT clause, {t}: the target)
CASES = {
    "SET from excluded": "ON CONFLICT (k) DO UPDATE SET n = excluded.n, v = excluded.v",
    "WHERE on both rows": "ON CONFLICT (k) DO UPDATE SET v = t.v || excluded.v "
                          "WHERE t.k % 2 = 0 AND excluded.n % 3 <> 1",
    "indexed column, on constraint": "ON CONFLICT ON CONSTRAINT {t}_pkey DO UPDATE "
                                     "SET u = excluded.u, n = excluded.n",
}


def session(conn):
    # the plain statement's scan must start at block 0, as the load's order
    set_gucs(conn, {"synchronize_seqscans": "off"})


def make_source(conn):
    """pud_src in line order, pud_twice_near / pud_twice_far (a key again,
    on the next line or the last) and the CSV file dp_pud.csv; made once."""
    if conn.execute("SELECT to_regclass('pud_src')").fetchone()[0] is not None:
        return
    conn.execute("CREATE TABLE pud_src (k int, n int, u int, v text)")
    conn.execute("INSERT INTO pud_src " + SOURCE.format(rows=ROWS))
    assert conn.execute("SELECT count(DISTINCT k) FROM pud_src").fetchone()[0] == ROWS
    conn.execute(f"COPY (SELECT {COLS} FROM pud_src ORDER BY n) TO PROGRAM "
                 "'cat > dp_pud.csv' WITH (FORMAT csv)")
    # n doubled, so that a line can go between two; line 20's key again
    for name, at in (("near", 41), ("far", 2 * ROWS + 1)):
        for what, key_of in (("new", "k % 3 <> 0"), ("old", "k % 3 = 0")):
            t = f"pud_twice_{name}_{what}"
            conn.execute(f"CREATE TABLE {t} (k int, n int, u int, v text)")
            conn.execute(f"INSERT INTO {t} SELECT * FROM (SELECT k, 2 * n AS n, u, v FROM pud_src "
                         f"UNION ALL (SELECT k, {at}, u, 'again' FROM pud_src WHERE {key_of} "
                         "AND n > 20 ORDER BY n LIMIT 1)) s ORDER BY n")


def make_target(conn, t, index_u=True):
    conn.execute(f"DROP TABLE IF EXISTS {t}")
    conn.execute(f"CREATE TABLE {t} {TARGET}")
    conn.execute(f"INSERT INTO {t} {OLD}")
    if index_u:
        conn.execute(f"CREATE INDEX ON {t} (u)")
    conn.execute(f"VACUUM ANALYZE {t}")


def check_loaded(conn, t):
    verify_table(conn, t)
    scans_agree(conn, t, ["k", "u"])


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_insert_select_do_update(cluster, case, workers):
    """Against the plain statement on a target made alike: the same rows,
    count and EXPLAIN ANALYZE counts."""
    n = list(CASES).index(case)
    tp, td = f"pud_ip_{n}_{workers}", f"pud_id_{n}_{workers}"
    with cluster.conn() as conn:
        session(conn)
        make_source(conn)
        got = {}
        for t, hint in ((tp, ""), (td, f"/*+ APPEND PARALLEL({workers}) */ ")):
            make_target(conn, t)
            sql = f"{hint}INSERT INTO {t} AS t SELECT {COLS} FROM pud_src " + \
                CASES[case].format(t=t)
            got[t] = explain_counts(conn, sql)
        (plain, _), (par, par_plan) = got[tp], got[td]
        st = parallel_report(conn)
        assert "in bulk" in (st["updates"] or ""), st
        assert par["Tuples Inserted"] == plain["Tuples Inserted"] == 2 * ROWS // 3, par_plan
        assert par["Conflicting Tuples"] == plain["Conflicting Tuples"] == ROWS // 3, par_plan
        assert par["Parallel Workers"] is not None and par["Parallel Workers"] >= 1, par_plan
        assert table_digest(conn, td) == table_digest(conn, tp)
        # rows of the table were changed (old rows: n = -k, v 'old')
        assert conn.execute(f"SELECT count(*) FROM {td} WHERE k % 3 = 0 "
                            "AND (n > 0 OR v <> 'old')").fetchone()[0] > 0
        check_loaded(conn, td)


def copy_sql(t):
    return f"COPY {t} FROM 'dp_pud.csv' WITH (FORMAT csv, ON_CONFLICT 'update')"


@pytest.mark.parametrize("workers", [1, 2])
def test_copy_on_conflict_update(cluster, workers):
    """The parallel COPY keeps the rows and count of the serial direct COPY
    and of core's INSERT ... ON CONFLICT DO UPDATE of the staged rows."""
    with cluster.conn() as conn:
        session(conn)
        make_source(conn)
        tp, ts, td = "pud_cp", "pud_cs", f"pud_cd_{workers}"
        make_target(conn, tp)
        cur = conn.execute(f"INSERT INTO {tp} SELECT {COLS} FROM pud_src ORDER BY n "
                           "ON CONFLICT (k) DO UPDATE SET (n, u, v) = "
                           "ROW(excluded.n, excluded.u, excluded.v)")
        assert cur.rowcount == ROWS
        counts = {}
        for t, hint in ((ts, "/*+ APPEND */ "), (td, f"/*+ APPEND PARALLEL({workers}) */ ")):
            make_target(conn, t)
            counts[t] = conn.execute(hint + copy_sql(t)).rowcount
            st = last_statement(conn)
            assert st["path"] == "direct", st
            assert (st["parallel_workers"] >= 1) == (t == td), st
        assert counts[td] == counts[ts] == ROWS
        assert table_digest(conn, td) == table_digest(conn, ts) == table_digest(conn, tp)
        check_loaded(conn, td)


@pytest.mark.parametrize("what", ["new", "old"])
@pytest.mark.parametrize("where", ["near", "far"])
@pytest.mark.parametrize("how", ["insert", "copy"])
def test_key_twice_is_core_error(cluster, how, where, what):
    """A key two lines bring, new or in the table, the lines next to each
    other or at both ends: the plain statement's error, in the parallel
    statement, and the table as it was."""
    src = f"pud_twice_{where}_{what}"
    with cluster.conn() as conn:
        session(conn)
        make_source(conn)
        if how == "copy":
            conn.execute(f"COPY (SELECT {COLS} FROM {src} ORDER BY n) TO PROGRAM "
                         f"'cat > dp_{src}.csv' WITH (FORMAT csv)")
        errs = {}
        for t, hint in (("pud_ep", ""), ("pud_ed", "/*+ APPEND PARALLEL(2) */ ")):
            make_target(conn, t)
            before = table_digest(conn, t)
            if how == "copy" and hint:
                sql = (f"{hint}COPY {t} FROM 'dp_{src}.csv' WITH (FORMAT csv, "
                       "ON_CONFLICT 'update')")
            else:
                sql = (f"INSERT INTO {t} SELECT {COLS} FROM {src} ORDER BY n ON CONFLICT (k) "
                       "DO UPDATE SET (n, u, v) = ROW(excluded.n, excluded.u, excluded.v)")
                if hint:
                    sql = hint + sql.replace(" ORDER BY n", "")
            errs[t] = error_of(conn, sql)
            assert table_digest(conn, t) == before
            verify_table(conn, t)
        assert errs["pud_ep"] is not None and errs["pud_ep"][0] == "21000", errs
        assert errs["pud_ed"][:2] == errs["pud_ep"][:2], errs


def test_kept_rows_follow_input_order(cluster):
    """Two lines meeting one row of the table, far apart: the first fails
    the WHERE clause and the second passes it, which core allows (only an
    update counts); any other order would be core's error."""
    with cluster.conn() as conn:
        session(conn)
        make_source(conn)
        conn.execute("DROP TABLE IF EXISTS pud_order_src")
        # line 20's key (in the table) again on the last line, 'pass' there
        conn.execute("CREATE TABLE pud_order_src AS SELECT * FROM (SELECT k, 2 * n AS n, u, v "
                     "FROM pud_src UNION ALL (SELECT k, 2 * 300000 + 1, u, 'pass' FROM pud_src "
                     "WHERE k % 3 = 0 AND n > 20 ORDER BY n LIMIT 1)) s ORDER BY n")
        rows = {}
        for t, hint in (("pud_op", ""), ("pud_od", "/*+ APPEND PARALLEL(2) */ ")):
            make_target(conn, t)
            rows[t] = conn.execute(
                f"{hint}INSERT INTO {t} AS t SELECT {COLS} FROM pud_order_src "
                "ON CONFLICT (k) DO UPDATE SET v = excluded.v "
                "WHERE excluded.v = 'pass' OR excluded.n % 2 = 0 AND t.k % 3 <> 0").rowcount
            if hint:
                parallel_report(conn)
        assert rows["pud_od"] == rows["pud_op"]
        assert table_digest(conn, "pud_od") == table_digest(conn, "pud_op")
        assert conn.execute("SELECT count(*) FROM pud_od WHERE v = 'pass'").fetchone()[0] == 1
        check_loaded(conn, "pud_od")


def test_updates_by_core_when_the_table_is_shared(cluster):
    """Another session holds ROW SHARE on the target: the updates cannot
    take their lock, so the kept rows of every process go through core's
    executor after the load, with the plain statement's outcome."""
    sql = ("INSERT INTO {t} AS t SELECT " + COLS + " FROM pud_src ON CONFLICT (k) "
           "DO UPDATE SET n = excluded.n, v = t.v || excluded.v")
    with cluster.conn() as conn, cluster.conn() as other:
        session(conn)
        make_source(conn)
        for t in ("pud_sp", "pud_sd"):
            make_target(conn, t)
        conn.execute(sql.format(t="pud_sp"))
        other.execute("BEGIN")
        other.execute("LOCK TABLE pud_sd IN ROW SHARE MODE")
        cur = conn.execute("/*+ APPEND PARALLEL(2) */ " + sql.format(t="pud_sd"))
        st = parallel_report(conn)
        other.execute("COMMIT")
        assert "by core's executor" in (st["updates"] or ""), st
        assert cur.rowcount == ROWS
        assert table_digest(conn, "pud_sd") == table_digest(conn, "pud_sp")
        check_loaded(conn, "pud_sd")


UPSERT = ("INSERT INTO {t} AS t SELECT " + COLS + " FROM pud_src ON CONFLICT (k) "
          "DO UPDATE SET n = excluded.n, u = excluded.u, v = excluded.v")


def test_standby_replays_parallel_do_update(make_cluster, tmp_path):
    """The new rows' pages, the new versions and the old pages' images
    reach a streaming standby: the same rows, sound indexes, index scans
    agreeing with sequential scans there too."""
    p = make_cluster(name="primary")
    with p.conn() as conn:
        make_source(conn)
        make_target(conn, "pud_sb")
        make_target(conn, "pud_sb_plain")
    sb = p.make_standby(tmp_path)
    with p.conn() as conn:
        session(conn)
        conn.execute(UPSERT.format(t="pud_sb_plain"))
        conn.execute("/*+ APPEND PARALLEL(2) */ " + UPSERT.format(t="pud_sb"))
        assert "in bulk" in (parallel_report(conn)["updates"] or "")
        want = table_digest(conn, "pud_sb")
        assert want == table_digest(conn, "pud_sb_plain")
    p.wait_replay(sb)
    with sb.conn() as conn:
        assert table_digest(conn, "pud_sb") == want
        check_loaded(conn, "pud_sb")
    sb.stop()


@pytest.mark.parametrize("how", ["kill-worker", "kill-leader-in-updates"])
def test_process_killed_leaves_nothing(cluster, how):
    """A worker killed after the leader's first batch, or the leader killed
    while it updates the old pages after the load: nothing of the statement
    is visible after crash recovery, and it then succeeds in parallel with
    the plain statement's rows."""
    t = "pud_kill_" + how.replace("-", "_")
    sql = "/*+ APPEND PARALLEL(2) */ " + UPSERT.format(t=t)
    point = "first_batch" if how == "kill-worker" else "versions_page"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t)
        make_target(conn, "pud_kill_plain")
        conn.execute(UPSERT.format(t="pud_kill_plain"))
        before = table_digest(conn, t)
    off = cluster.log_size()
    settings = dict(fault_gucs(point, 1, sleep_ms=60_000),
                    **{"directpath.batch_pages": 50, "synchronize_seqscans": "off"})
    bg = Background(cluster, [sql], settings, name="loader")
    kill_at_fault(cluster, bg, point, off, how == "kill-worker", how == "kill-worker")
    with cluster.conn() as conn:
        session(conn)
        assert table_digest(conn, t) == before
        verify_table(conn, t)
        conn.execute(sql)
        parallel_report(conn)
        assert table_digest(conn, t) == table_digest(conn, "pud_kill_plain")
        check_loaded(conn, t)
