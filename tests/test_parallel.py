"""Parallel direct path (parallel.c): workers build pages, the leader writes.

What SQL alone cannot show: a streaming standby replays a parallel load
into the same rows (existing and new storage, the latter frozen); a worker
terminated or killed mid-load, the leader killed, an immediate stop, and
the statement cancelled, each while the leader sleeps after its first
batch with the workers' queues full: the statement fails (or the cluster
recovers), nothing of the load is visible, the heap passes verify_heapam,
and the same load then succeeds in parallel; a committed parallel load
survives an immediate stop.
"""

import time

import pytest

from conftest import (Background, crash_backend, crash_immediate, fault_gucs,
                      last_statement, table_digest, verify_table, wait_fault_sleep)

pytestmark = pytest.mark.directpath

ROWS = 300_000
LOAD = ("/*+ APPEND PARALLEL(2) */ INSERT INTO {t} "
        "SELECT id, v, k FROM par_src WHERE k <> 3")


def make_source(conn):
    """The source table (the same rows whenever a test of the shared
    cluster makes it again)."""
    if conn.execute("SELECT to_regclass('par_src')").fetchone()[0] is not None:
        return
    conn.execute("CREATE TABLE par_src AS SELECT g AS id, md5(g::text) AS v, g % 7 AS k "
                 f"FROM generate_series(1, {ROWS}) g")
    conn.execute("VACUUM ANALYZE par_src")


def make_target(conn, t):
    conn.execute(f"CREATE TABLE {t} (id int NOT NULL, v text, k int CHECK (k >= 0))")


def expected_digest(conn):
    return tuple(conn.execute(
        "SELECT count(*), coalesce(sum(hashtext(x::text)), 0) FROM "
        "(SELECT id, v, k FROM par_src WHERE k <> 3) x").fetchone())


def assert_parallel(conn):
    st = last_statement(conn)
    assert st["path"] == "direct" and st["parallel_workers"] > 0, st
    return st


def test_parallel_load_replayed_by_standby(make_cluster, tmp_path):
    p = make_cluster(name="primary")
    with p.conn() as conn:
        make_source(conn)
        make_target(conn, "par_e")
        want = expected_digest(conn)
    sb = p.make_standby(tmp_path)
    with p.conn() as conn:
        conn.execute(LOAD.format(t="par_e"))
        assert_parallel(conn)
        conn.execute("BEGIN")
        make_target(conn, "par_n")
        conn.execute(LOAD.format(t="par_n"))
        st = assert_parallel(conn)
        assert st["frozen"], st
        conn.execute("COMMIT")
        for t in ("par_e", "par_n"):
            assert table_digest(conn, t) == want, t
            verify_table(conn, t, frozen_expected=(t == "par_n"))
    p.wait_replay(sb)
    with sb.conn() as conn:
        for t in ("par_e", "par_n"):
            assert table_digest(conn, t) == want, t
            verify_table(conn, t)
    sb.stop()


def paused_parallel_load(cluster, t):
    """Start the parallel load of 't' and return (Background, worker pids)
    once the leader sleeps after its first batch."""
    off = cluster.log_size()
    settings = dict(fault_gucs("first_batch", 1, sleep_ms=60_000),
                    **{"directpath.batch_pages": 50})
    bg = Background(cluster, [LOAD.format(t=t)], settings, name="loader")
    bg.start()
    wait_fault_sleep(cluster, bg, "first_batch", off)
    with cluster.conn() as conn:
        workers = [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE leader_pid = %s AND pid <> %s",
            (bg.pid, bg.pid)).fetchall()]
    assert workers, "the load runs without parallel workers"
    return bg, workers


@pytest.mark.parametrize("how", ["terminate-worker", "kill-worker", "kill-leader",
                                 "immediate-stop"])
def test_process_stopped_mid_load(cluster, how):
    """A worker terminated (the statement fails with its error), a worker
    or the leader killed, or the server stopped in immediate mode (crash
    recovery): nothing of the load is visible, and the same load then
    succeeds in parallel."""
    t = "par_" + how.replace("-", "_")
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t)
        want = expected_digest(conn)
    bg, workers = paused_parallel_load(cluster, t)
    with bg:
        if how == "terminate-worker":
            with cluster.conn() as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (workers[0],))
        elif how == "immediate-stop":
            crash_immediate(cluster)
        else:
            crash_backend(cluster, workers[0] if how == "kill-worker" else bg.pid)
        bg.join()
        assert bg.error is not None, bg.results
    with cluster.conn() as conn:
        assert table_digest(conn, t) == (0, 0)
        verify_table(conn, t)
        conn.execute(LOAD.format(t=t))
        assert_parallel(conn)
        assert table_digest(conn, t) == want


def test_cancel_fails_the_statement(cluster):
    t = "par_c"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t)
    bg, _ = paused_parallel_load(cluster, t)
    with bg:
        with cluster.conn() as conn:
            conn.execute("SELECT pg_cancel_backend(%s)", (bg.pid,))
        bg.join()
        assert bg.sqlstate == "57014", bg.error
    with cluster.conn() as conn:
        assert table_digest(conn, t) == (0, 0)
        verify_table(conn, t)
        # no worker is left behind
        deadline = time.monotonic() + 30
        while conn.execute("SELECT count(*) FROM pg_stat_activity "
                           "WHERE backend_type = 'parallel worker'").fetchone()[0] > 0:
            assert time.monotonic() < deadline, "parallel workers outlived the statement"
            time.sleep(0.1)


def test_committed_load_survives_immediate_stop(cluster):
    """A committed parallel load, then an immediate stop: crash recovery
    replays the leader's WAL into the same rows."""
    t = "par_after_commit"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t)
        want = expected_digest(conn)
        conn.execute(LOAD.format(t=t))
        assert_parallel(conn)
    crash_immediate(cluster)
    with cluster.conn() as conn:
        assert table_digest(conn, t) == want
        verify_table(conn, t)
