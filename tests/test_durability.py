"""Crashes around direct path loads: backend SIGKILL, immediate shutdown,
wal_level=minimal, unlogged tables."""

import threading
import time

import psycopg
import pytest

from conftest import (FSYNC_ON, TABLE_COLUMNS, crash_immediate, last_statement, seed_insert,
                      seed_sum, table_digest, verify_table)

pytestmark = pytest.mark.directpath


def count_sum(conn, table):
    return tuple(conn.execute(f"SELECT count(*), sum(value::bigint) FROM {table}").fetchone())


def create_table(conn, name, index=True, unlogged=False):
    conn.execute(f"CREATE {'UNLOGGED ' if unlogged else ''}TABLE {name} {TABLE_COLUMNS}")
    if index:
        conn.execute(f"CREATE INDEX {name}_indid ON {name} (indid)")


# Stalls {secs} s at row 300000 of 600000, so the backend can be killed mid-load.
SLOW_LOAD = ("/*+ APPEND */ INSERT INTO {table} "
             "SELECT g % 50, g % 10000, g, "
             "g + CASE WHEN g = 300000 THEN length(pg_sleep({secs})::text) ELSE 0 END "
             "FROM generate_series(1, 600000) g")


@pytest.mark.parametrize("variant", ["existing", "truncated"])
def test_sigkill_backend_mid_load(make_cluster, variant):
    c = make_cluster(extra_conf=FSYNC_ON)
    pre = 1000
    with c.conn() as conn:
        # The statement shape used below does take the direct path.
        create_table(conn, "k_probe")
        if variant == "truncated":
            conn.execute("BEGIN")
            conn.execute("TRUNCATE k_probe")
        conn.execute(SLOW_LOAD.format(table="k_probe", secs=0))
        st = last_statement(conn)
        conn.execute("COMMIT" if variant == "truncated" else "SELECT 1")
        assert st["path"] == "direct", st
        assert st["frozen"] is (variant == "truncated"), st
        conn.execute("DROP TABLE k_probe")

        create_table(conn, "k")
        conn.execute(seed_insert("k", pre, hint=False))
        committed = table_digest(conn, "k")
        start_size = conn.execute("SELECT pg_relation_size('k')").fetchone()[0]

    loader = c.conn()
    pid = c.backend_pid(loader)
    outcome = {}

    def load():
        try:
            if variant == "truncated":
                loader.execute("BEGIN")
                loader.execute("TRUNCATE k")
            loader.execute(SLOW_LOAD.format(table="k", secs=30))
            outcome["finished"] = True
        except psycopg.Error as e:
            outcome["error"] = e

    th = threading.Thread(target=load, name="slow-load", daemon=True)
    th.start()
    grew = None
    try:
        with c.conn() as mon:
            deadline = time.monotonic() + 180
            while True:
                assert time.monotonic() < deadline, "the load never reached its pg_sleep"
                assert th.is_alive(), f"the load ended early: {outcome}"
                ev = mon.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s",
                                 (pid,)).fetchone()
                if ev and ev[0] == "PgSleep":
                    break
                time.sleep(0.05)
            # Half the rows are through: give appended pages a moment to show.
            if variant == "existing":
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    size = mon.execute("SELECT pg_relation_size('k')").fetchone()[0]
                    if size > start_size:
                        grew = size
                        break
                    time.sleep(0.1)
            else:
                time.sleep(1)
        off = c.log_size()
        c.kill_backend(pid)
        th.join(60)
        assert not th.is_alive()
        assert "error" in outcome, outcome
        c.wait_crash_restart(off)
    finally:
        loader.close()
    print(f"relation size at kill: {grew} (start {start_size})")
    log = c.log(off)
    assert "terminated by signal 9" in log

    with c.conn() as conn:
        assert table_digest(conn, "k") == committed
        assert count_sum(conn, "k") == (pre, seed_sum(pre))
        verify_table(conn, "k")
        conn.execute("INSERT INTO k VALUES (-1, -1, -1, -1)")
        assert count_sum(conn, "k") == (pre + 1, seed_sum(pre) - 1)
        verify_table(conn, "k")
        # The table takes direct loads again.
        conn.execute(seed_insert("k", 100_000, start=pre + 1))
        assert last_statement(conn)["path"] == "direct"
        assert count_sum(conn, "k") == (100_001, seed_sum(100_000) - 1)
        verify_table(conn, "k")


def test_immediate_shutdown_after_commit(make_cluster):
    n = 300_000
    c = make_cluster(checksums=True, extra_conf=FSYNC_ON)
    with c.conn() as conn:
        create_table(conn, "d")
        conn.execute(seed_insert("d", n))
        assert last_statement(conn)["path"] == "direct"
        create_table(conn, "f")
        conn.execute(seed_insert("f", 1000, hint=False))
        conn.execute("BEGIN")
        conn.execute("TRUNCATE f")
        conn.execute(seed_insert("f", n))
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct" and st["frozen"] is True, st
        want_d = table_digest(conn, "d")
        want_f = table_digest(conn, "f")
    assert want_d[0] == want_f[0] == n

    off = c.log_size()
    c.kill_postmaster_immediate()
    c.start()
    c.wait_ready()
    assert "not properly shut down" in c.log(off)

    with c.conn() as conn:
        assert count_sum(conn, "d") == (n, seed_sum(n))
        assert table_digest(conn, "d") == want_d
        assert table_digest(conn, "f") == want_f
        verify_table(conn, "d")
        verify_table(conn, "f", frozen_expected=True)
    c.stop()
    c.pg_checksums_check()


def test_wal_level_minimal_create_and_load(make_cluster):
    n = 300_000
    c = make_cluster(wal_level="minimal", checksums=True, extra_conf=FSYNC_ON)
    with c.conn() as conn:
        conn.execute("BEGIN")
        create_table(conn, "m")
        conn.execute(seed_insert("m", n))
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct" and st["frozen"] is True, st

        create_table(conn, "m2")
        conn.execute(seed_insert("m2", 2000, hint=False))
        conn.execute("BEGIN")
        conn.execute("TRUNCATE m2")
        conn.execute(seed_insert("m2", n))
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct" and st["frozen"] is True, st
        want = table_digest(conn, "m"), table_digest(conn, "m2")

    off = c.log_size()
    c.kill_postmaster_immediate()
    c.start()
    c.wait_ready()
    assert "not properly shut down" in c.log(off)
    with c.conn() as conn:
        assert count_sum(conn, "m") == (n, seed_sum(n))
        assert (table_digest(conn, "m"), table_digest(conn, "m2")) == want
        verify_table(conn, "m", frozen_expected=True)
        verify_table(conn, "m2", frozen_expected=True)
    c.stop()
    c.pg_checksums_check()


def test_unlogged_table(make_cluster):
    n = 200_000
    c = make_cluster(extra_conf=FSYNC_ON)
    with c.conn() as conn:
        create_table(conn, "u", unlogged=True)
        conn.execute(seed_insert("u", n))
        assert last_statement(conn)["path"] == "direct"
        assert count_sum(conn, "u") == (n, seed_sum(n))
        want = table_digest(conn, "u")
        verify_table(conn, "u")

    c.restart("fast")
    with c.conn() as conn:
        assert table_digest(conn, "u") == want
        verify_table(conn, "u")

    # After a crash an unlogged table is reset to empty, and stays usable.
    c.kill_postmaster_immediate()
    c.start()
    c.wait_ready()
    with c.conn() as conn:
        assert count_sum(conn, "u") == (0, None)
        verify_table(conn, "u")
        conn.execute(seed_insert("u", n))
        assert last_statement(conn)["path"] == "direct"
        assert count_sum(conn, "u") == (n, seed_sum(n))
        verify_table(conn, "u")
    c.stop()
    c.pg_checksums_check()


# Blocks of the default 1 GB segment (8 kB blocks).
SEGMENT_BLOCKS = 131072


@pytest.mark.parametrize("wal_level", ["replica", "minimal"])
def test_load_across_a_segment_boundary(make_cluster, wal_level):
    """A load whose pages run past the first 1 GB segment file: append.c
    writes each segment's pages in vectored writes and its last one through
    smgrextend.  The second segment's file is made, every row reads back
    from both (the rows that straddle the boundary too), the fsync
    registration covers both (an immediate stop right after a checkpoint),
    and the checksums hold.  replica: a table made in an earlier
    transaction, WAL-logged; minimal: made in the load's transaction, WAL
    skipped (commit syncs)."""
    rows = 600_000              # 4 rows of ~1.8 kB a page: ~150,000 blocks
    c = make_cluster(wal_level=wal_level, checksums=True, extra_conf=FSYNC_ON)
    with c.conn() as conn:
        segsize, bs = conn.execute("SELECT current_setting('segment_size'), "
                                   "current_setting('block_size')").fetchone()
        if (segsize, bs) != ("1GB", "8192"):
            pytest.skip(f"a build with {segsize} segments of {bs}-byte blocks")
        if wal_level == "replica":
            conn.execute("CREATE TABLE seg (id int, pad text)")
        conn.execute("BEGIN")
        if wal_level == "minimal":
            conn.execute("CREATE TABLE seg (id int, pad text)")
        conn.execute("/*+ APPEND */ INSERT INTO seg SELECT g, repeat(chr(65 + g % 26), 1800) "
                     f"FROM generate_series(1, {rows}) g")
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct" and st["rows_inserted"] == rows, st
        blocks = conn.execute("SELECT pg_relation_size('seg') / 8192").fetchone()[0]
        assert blocks > SEGMENT_BLOCKS + 10_000, blocks
        path = conn.execute("SELECT pg_relation_filepath('seg')").fetchone()[0]
        seg1 = conn.execute("SELECT size FROM pg_stat_file(%s)", (path + ".1",)).fetchone()[0]
        assert seg1 == (blocks - SEGMENT_BLOCKS) * 8192
        around = (f"ctid >= '({SEGMENT_BLOCKS - 2},0)' AND ctid < '({SEGMENT_BLOCKS + 2},0)'")
        want = conn.execute(f"SELECT count(*), sum(id), sum(length(pad)), "
                            f"count(*) FILTER (WHERE pad <> repeat(chr(65 + id % 26), 1800)), "
                            f"(SELECT count(*) FROM seg WHERE {around}) FROM seg").fetchone()
        assert want == (rows, rows * (rows + 1) // 2, rows * 1800, 0, 16), want
        conn.execute("CHECKPOINT")

    crash_immediate(c)
    with c.conn() as conn:
        got = conn.execute(f"SELECT count(*), sum(id), sum(length(pad)), "
                           f"count(*) FILTER (WHERE pad <> repeat(chr(65 + id % 26), 1800)), "
                           f"(SELECT count(*) FROM seg WHERE {around}) FROM seg").fetchone()
        assert got == want
        verify_table(conn, "seg", frozen_expected=(wal_level == "minimal"))
    c.stop()
    c.pg_checksums_check()
