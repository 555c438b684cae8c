"""wal_level = logical: full-page images cannot be decoded, so a hinted load
into a logically logged table takes the normal path, says why, and a
subscriber and a test_decoding slot see every row.  Never silent loss."""

import re
import time

import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, last_statement,
                      seed_insert, set_gucs, table_digest, verify_table,
                      verify_tree)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

N = 20_000


def wait_until(fn, what, timeout=120):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def create_tables(conn):
    conn.execute(f"CREATE TABLE lg_t {TABLE_COLUMNS}")
    conn.execute("ALTER TABLE lg_t ADD PRIMARY KEY (indid)")
    conn.execute(f"CREATE TABLE lg_trunc {TABLE_COLUMNS}")
    conn.execute("ALTER TABLE lg_trunc ADD PRIMARY KEY (indid)")
    conn.execute(f"CREATE TABLE lg_part {TABLE_COLUMNS} PARTITION BY RANGE (timeid)")
    conn.execute("CREATE TABLE lg_part_1 PARTITION OF lg_part FOR VALUES FROM (MINVALUE) TO (25)")
    conn.execute("CREATE TABLE lg_part_2 PARTITION OF lg_part FOR VALUES FROM (25) TO (MAXVALUE)")
    conn.execute(f"CREATE TABLE lg_unpub {TABLE_COLUMNS}")


def hinted(conn, sql, notices):
    """Run a hinted statement; returns last_statement() and the fallback
    NOTICEs it raised."""
    del notices[:]
    conn.execute(sql)
    st = last_statement(conn)
    return st, [n for n in notices if "normal path" in n]


def assert_fallback(st, msgs, table):
    assert st["path"] == "normal", st
    assert "logically logged" in (st["reason"] or ""), st
    assert msgs and "logically logged" in msgs[0] and table in msgs[0], msgs


def test_logical_fallback_subscriber_and_decoding(make_cluster):
    pub = make_cluster(name="pub", wal_level="logical")
    sub = make_cluster(name="sub")
    with pub.conn() as conn:
        create_tables(conn)
        conn.execute(seed_insert("lg_t", 1000, hint=False))
        conn.execute(seed_insert("lg_trunc", 500, hint=False))
        conn.execute("CREATE PUBLICATION lg_pub FOR TABLE lg_t, lg_trunc, lg_part "
                     "WITH (publish_via_partition_root = true)")
        conn.execute("SELECT pg_create_logical_replication_slot('lg_dec', 'test_decoding')")
    with sub.conn() as conn:
        create_tables(conn)
        conn.execute(f"CREATE SUBSCRIPTION lg_sub CONNECTION '{pub.conninfo()}' "
                     "PUBLICATION lg_pub")
        wait_until(lambda: conn.execute(
            "SELECT count(*) = 3 AND bool_and(srsubstate = 'r') FROM pg_subscription_rel"
        ).fetchone()[0], "the initial table sync")

    with pub.conn() as conn:
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        set_gucs(conn, SMALL_BATCHES)
        # existing published table
        st, msgs = hinted(conn, seed_insert("lg_t", 1000 + N, start=1001), notices)
        assert_fallback(st, msgs, "lg_t")
        # storage truncated in the transaction (would be frozen at replica)
        conn.execute("BEGIN")
        conn.execute("TRUNCATE lg_trunc")
        st, msgs = hinted(conn, seed_insert("lg_trunc", N), notices)
        conn.execute("COMMIT")
        assert_fallback(st, msgs, "lg_trunc")
        # Oracle's hint placement, a partitioned target
        st, msgs = hinted(conn, f"INSERT /*+ APPEND */ INTO lg_part "
                                f"SELECT a % 50, a % 10000, a, a FROM generate_series(1, {N}) a",
                          notices)
        assert_fallback(st, msgs, "lg_part")
        # directpath.mode = always, no hint
        conn.execute("SET directpath.mode = always")
        conn.execute(seed_insert("lg_t", 1000 + 2 * N, start=1001 + N, hint=False))
        st = last_statement(conn)
        conn.execute("RESET directpath.mode")
        assert st["path"] == "normal" and "logically logged" in st["reason"], st
        # an unpublished table is logically logged too (the slot decodes it)
        st, msgs = hinted(conn, seed_insert("lg_unpub", N), notices)
        assert_fallback(st, msgs, "lg_unpub")
        # a table created in the loading transaction
        conn.execute("BEGIN")
        conn.execute(f"CREATE TABLE lg_new {TABLE_COLUMNS}")
        st, msgs = hinted(conn, seed_insert("lg_new", N), notices)
        conn.execute("COMMIT")
        assert_fallback(st, msgs, "lg_new")
        # EXPLAIN says the same
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (COSTS OFF) " + seed_insert("lg_t", 10)).fetchall())
        assert "Direct Path: off" in plan and "logically logged" in plan, plan

        want = {t: table_digest(conn, t) for t in ("lg_t", "lg_trunc", "lg_part")}
        assert want["lg_t"][0] == 1000 + 2 * N and want["lg_trunc"][0] == N
        for t in ("lg_t", "lg_trunc", "lg_unpub", "lg_new"):
            verify_table(conn, t)
        verify_tree(conn, "lg_part")
        # test_decoding sees every row of every load, on every table
        changes = [r[0] for r in conn.execute(
            "SELECT data FROM pg_logical_slot_get_changes('lg_dec', NULL, NULL)").fetchall()]
    decoded = {}
    for line in changes:
        m = re.match(r"table public\.(\w+): (INSERT|TRUNCATE):", line)
        if m:
            decoded[m.groups()] = decoded.get(m.groups(), 0) + 1
    parts = decoded.pop(("lg_part_1", "INSERT"), 0) + decoded.pop(("lg_part_2", "INSERT"), 0)
    assert parts == N, decoded
    assert decoded == {("lg_t", "INSERT"): 2 * N, ("lg_trunc", "TRUNCATE"): 1,
                       ("lg_trunc", "INSERT"): N, ("lg_unpub", "INSERT"): N,
                       ("lg_new", "INSERT"): N}, decoded

    # the subscriber ends with the same rows
    with sub.conn() as conn:
        for t, d in want.items():
            wait_until(lambda: table_digest(conn, t) == d,
                       f"{t} on the subscriber to match the publisher "
                       f"({d[0]} rows)", timeout=180)
        for t in ("lg_t", "lg_trunc"):
            verify_table(conn, t)
        verify_tree(conn, "lg_part")
        conn.execute("DROP SUBSCRIPTION lg_sub")


def test_logical_unlogged_keeps_direct_path(make_cluster):
    """Tables that are not logically logged keep the direct path at
    wal_level = logical (unlogged); the fallback is only where needed."""
    c = make_cluster(name="logical", wal_level="logical")
    with c.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        conn.execute(f"CREATE UNLOGGED TABLE lg_unl {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX ON lg_unl (indid)")
        conn.execute("SELECT pg_create_logical_replication_slot('lg_dec2', 'test_decoding')")
        conn.execute(seed_insert("lg_unl", N))
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        assert conn.execute("SELECT count(*), sum(value::bigint) FROM lg_unl").fetchone() == \
            (N, N * (N + 1) // 2)
        verify_table(conn, "lg_unl")
        # and a logged table right after, in the same session, falls back
        conn.execute(f"CREATE TABLE lg_logged {TABLE_COLUMNS}")
        conn.execute(seed_insert("lg_logged", N))
        st = last_statement(conn)
        assert st["path"] == "normal" and "logically logged" in st["reason"], st
        n = conn.execute(
            "SELECT count(*) FROM pg_logical_slot_get_changes('lg_dec2', NULL, NULL) "
            "WHERE data LIKE 'table public.lg_logged: INSERT:%'").fetchone()[0]
        assert n == N
        conn.execute("SELECT pg_drop_replication_slot('lg_dec2')")
    c.stop()
    c.pg_checksums_check()
