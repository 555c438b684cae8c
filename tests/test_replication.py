"""Direct path loads replicated to a streaming standby."""

import pytest

from conftest import (TABLE_COLUMNS, last_statement, seed_insert, seed_sum,
                      table_digest, verify_table, vm_summary)

pytestmark = pytest.mark.directpath


def test_standby_replays_direct_loads(make_cluster, tmp_path):
    n = 200_000
    p = make_cluster(name="primary")
    with p.conn() as conn:
        conn.execute(f"CREATE TABLE s1 {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX s1_indid ON s1 (indid)")
        conn.execute(f"CREATE TABLE s2 {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX s2_indid ON s2 (indid)")
        conn.execute(seed_insert("s2", 1000, hint=False))
    sb = p.make_standby(tmp_path)

    with p.conn() as conn:
        # Existing table: appended pages, not frozen.
        conn.execute(seed_insert("s1", n))
        st = last_statement(conn)
        assert st["path"] == "direct", st
        # Truncated in the transaction: frozen pages.
        conn.execute("BEGIN")
        conn.execute("TRUNCATE s2")
        conn.execute(seed_insert("s2", n))
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct" and st["frozen"] is True, st
        # its index was built from the load's sorted entries (btree.c)
        assert st["index_maintenance"] == "build", st
        # Created in the transaction.
        conn.execute("BEGIN")
        conn.execute(f"CREATE TABLE s3 {TABLE_COLUMNS}")
        conn.execute(seed_insert("s3", n))
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct" and st["frozen"] is True, st
        # A second append to s1, after the first.
        conn.execute(seed_insert("s1", n + 5000, start=n + 1))
        assert last_statement(conn)["path"] == "direct"

        want = {t: table_digest(conn, t) for t in ("s1", "s2", "s3")}
        want_vm = {t: vm_summary(conn, t) for t in ("s2", "s3")}
        want_idx = conn.execute("SELECT count(*), sum(value) FROM s1 "
                                "WHERE indid BETWEEN 150000 AND 201000").fetchone()
        want_idx2 = conn.execute("SELECT count(*), sum(value) FROM s2 "
                                 "WHERE indid BETWEEN 1000 AND 5000").fetchone()
    assert want["s1"][0] == n + 5000 and want["s2"][0] == want["s3"][0] == n

    p.wait_replay(sb)
    with sb.conn() as conn:
        for t in ("s1", "s2", "s3"):
            assert table_digest(conn, t) == want[t], t
        for t in ("s2", "s3"):
            assert vm_summary(conn, t) == want_vm[t], t
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        assert conn.execute("SELECT count(*), sum(value) FROM s1 "
                            "WHERE indid BETWEEN 150000 AND 201000").fetchone() == want_idx
        assert conn.execute("SELECT count(*), sum(value) FROM s2 "
                            "WHERE indid BETWEEN 1000 AND 5000").fetchone() == want_idx2
        # the replayed index is a valid tree holding every row
        conn.execute("SELECT bt_index_check('s2_indid', heapallindexed => true)")

    sb.promote()
    with sb.conn() as conn:
        assert conn.execute("SELECT count(*), sum(value::bigint) FROM s1").fetchone() == \
            (n + 5000, seed_sum(n + 5000))
        verify_table(conn, "s1")
        verify_table(conn, "s2", frozen_expected=True)
        verify_table(conn, "s3", frozen_expected=True)
        conn.execute("INSERT INTO s1 VALUES (0, 0, 0, 0)")
        conn.execute(seed_insert("s3", n + 100_000, start=n + 1))
        assert last_statement(conn)["path"] == "direct"
        verify_table(conn, "s1")
        verify_table(conn, "s3")
    sb.stop()
    p.stop()
    sb.pg_checksums_check()
    p.pg_checksums_check()
