"""Self-test of the cluster harness (no directpath statement is used).

Runs with DP_NO_EXT=1 too, where the servers start without the library.
"""

import os
import signal

import psycopg
import pytest

from conftest import (FSYNC, FSYNC_ON, ClusterError, TABLE_COLUMNS, heap_blocks, seed_insert,
                      seed_sum, table_digest, verify_table)


def test_start_restart_settings(make_cluster):
    c = make_cluster(extra_conf={"work_mem": "8MB", "autovacuum": True,
                                 "max_locks_per_transaction": 100})
    assert c.sql("SHOW work_mem") == [("8MB",)]
    assert c.sql("SHOW autovacuum") == [("on",)]
    assert c.sql("SHOW max_locks_per_transaction") == [("100",)]
    assert c.sql("SHOW data_checksums") == [("on",)]
    assert c.sql("SHOW wal_level") == [("replica",)]
    assert c.sql("SHOW fsync") == [("on" if FSYNC else "off",)]
    assert int(c.sql("SHOW server_version_num")[0][0]) // 10000 == c.major
    first = c.pid
    c.restart()
    assert c.pid != first and c.is_running()
    with c.conn() as conn:
        assert c.backend_pid(conn) == conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    c.stop()
    assert not c.is_running()


def test_fsync_asked_for(make_cluster):
    """A cluster that asks for fsync (test_durability's) has it, whatever
    DP_TEST_FSYNC says."""
    c = make_cluster(extra_conf=FSYNC_ON)
    assert c.sql("SHOW fsync") == [("on",)]


def test_checksums_off_and_minimal(make_cluster):
    c = make_cluster(checksums=False, wal_level="minimal")
    assert c.sql("SHOW data_checksums") == [("off",)]
    assert c.sql("SHOW wal_level") == [("minimal",)]
    assert c.sql("SHOW max_wal_senders") == [("0",)]


def test_backend_sigkill_crash_restart(make_cluster):
    c = make_cluster()
    with pytest.raises(ClusterError):
        c.kill_backend(os.getpid())          # not one of ours: refused
    victim = c.conn()
    pid = c.backend_pid(victim)
    off = c.log_size()
    c.kill_backend(pid, signal.SIGKILL)
    c.wait_crash_restart(off)
    assert "terminated by signal 9" in c.log(off)
    assert c.sql("SELECT 1") == [(1,)]
    with pytest.raises(psycopg.OperationalError):
        victim.execute("SELECT 1")
    victim.close()


def test_immediate_stop_recovers_and_checksums(make_cluster):
    c = make_cluster()
    with c.conn() as conn:
        conn.execute(f"CREATE TABLE h {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX h_indid ON h (indid)")
        conn.execute(seed_insert("h", 20000, hint=False))
        before = table_digest(conn, "h")
    off = c.log_size()
    c.kill_postmaster_immediate()
    c.start()
    c.wait_ready()
    assert "not properly shut down" in c.log(off)
    with c.conn() as conn:
        assert table_digest(conn, "h") == before
        assert conn.execute("SELECT sum(value) FROM h").fetchone()[0] == seed_sum(20000)
        verify_table(conn, "h")
    c.stop()
    out = c.pg_checksums_check()
    assert "Bad checksums" in out


def test_verify_table_frozen_detection(make_cluster):
    c = make_cluster()
    with c.conn() as conn:
        conn.execute(f"CREATE TABLE v {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX v_indid ON v (indid)")
        conn.execute(seed_insert("v", 20000, hint=False))
        info = verify_table(conn, "v")
        assert info["blocks"] == heap_blocks(conn, "v") > 0
        assert info["indexes"] == ["v_indid"]
        with pytest.raises(AssertionError):
            verify_table(conn, "v", frozen_expected=True)
        conn.execute("VACUUM (FREEZE) v")
        verify_table(conn, "v", frozen_expected=True)


def test_standby_replay_and_promote(make_cluster, tmp_path):
    p = make_cluster()
    with p.conn() as conn:
        conn.execute(f"CREATE TABLE r {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX r_indid ON r (indid)")
    sb = p.make_standby(tmp_path, extra_conf="work_mem = '9MB'")
    assert sb.sql("SELECT pg_is_in_recovery()") == [(True,)]
    assert sb.sql("SHOW work_mem") == [("9MB",)]
    assert sb.port != p.port and sb.sockdir != p.sockdir
    with p.conn() as conn:
        conn.execute(seed_insert("r", 30000, hint=False))
        want = table_digest(conn, "r")
    p.wait_replay(sb)
    with sb.conn() as conn:
        assert table_digest(conn, "r") == want
    sb.promote()
    with sb.conn() as conn:
        verify_table(conn, "r")
        conn.execute(seed_insert("r", 10, hint=False))
    sb.stop()
    p.stop()
