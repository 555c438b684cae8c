"""Concurrency around direct path loads: readers, a second loader, loaders
into different partitions, a plain INSERT behind a load, serializable
transactions.  A load is paused at a fault point (fault_action = sleep) to
hold it in the middle while the other sessions act."""

import threading
import time

import psycopg
import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, Background, fault_gucs,
                      last_statement, run_while_paused, seed_insert, set_gucs, table_digest,
                      verify_table, verify_tree, wait_fault_sleep,
                      wait_lock_wait)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

PRE = 1000
N = 20_000


def make_table(conn, t, index=True, rows=PRE):
    conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
    conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS}")
    if index:
        conn.execute(f"CREATE INDEX {t}_indid ON {t} (indid)")
    if rows:
        conn.execute(seed_insert(t, rows, hint=False))


def reference(conn, t, statements):
    """A plain twin of a table: the same statements without the hint."""
    make_table(conn, t, index=False, rows=0)
    for s in statements:
        conn.execute(s.format(t=t).replace("/*+ APPEND */ ", ""))
    return table_digest(conn, t)


def reader_count(reader, t, index_scan=False):
    if index_scan:
        reader.execute("SET enable_seqscan = off")
    try:
        t0 = time.monotonic()
        n = reader.execute(f"SELECT count(*) FROM {t} WHERE indid > -1").fetchone()[0]
        return n, time.monotonic() - t0
    finally:
        reader.execute("RESET enable_seqscan")


def test_readers_not_blocked_and_see_no_uncommitted_rows(cluster):
    t = "cc_read"
    with cluster.conn() as conn:
        make_table(conn, t)
        size0 = conn.execute(f"SELECT pg_relation_size('{t}')").fetchone()[0]
    load = seed_insert(t, PRE + N, start=PRE + 1)
    off = cluster.log_size()
    # the sixth batch: up to four logged batches wait for the WAL writer
    # before their pages are written (append.c), so at least two are on disk
    settings = dict(SMALL_BATCHES, **fault_gucs("batch_done", 6, sleep_ms=5000))
    with Background(cluster, ["BEGIN", load], settings, name="loader") as bg, \
            cluster.conn() as reader:
        bg.start()
        wait_fault_sleep(cluster, bg, "batch_done", off)
        reader.execute("SET lock_timeout = '2s'")
        reader.execute("SET statement_timeout = '10s'")
        # The load holds ShareRowExclusiveLock, and its first batches are on
        # disk (with their index entries): a reader sees none of those rows.
        mode = reader.execute(
            "SELECT mode FROM pg_locks WHERE pid = %s AND relation = %s::regclass "
            "AND granted ORDER BY mode", (bg.pid, t)).fetchall()
        assert ("ShareRowExclusiveLock",) in mode, mode
        assert reader.execute(f"SELECT pg_relation_size('{t}')").fetchone()[0] > size0
        n, secs = reader_count(reader, t)
        assert n == PRE and secs < 2, (n, secs)
        n, secs = reader_count(reader, t, index_scan=True)
        assert n == PRE and secs < 2, (n, secs)
        # A REPEATABLE READ transaction and a cursor, likewise.
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert reader.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == PRE
        reader.execute("COMMIT")
        assert not bg.done.is_set(), "the load did not stay paused during the reads"

        bg.join()
        assert bg.error is None, bg.error
        st = last_statement(bg.conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        # Done but not committed: still invisible.
        assert reader_count(reader, t)[0] == PRE
        bg.execute("COMMIT")
        assert reader_count(reader, t)[0] == PRE + N
        assert reader_count(reader, t, index_scan=True)[0] == PRE + N
    with cluster.conn() as conn:
        want = reference(conn, t + "_ref", [seed_insert("{t}", PRE), load.replace(t, "{t}")])
        assert table_digest(conn, t) == want
        verify_table(conn, t)


def test_two_direct_loaders_queue(cluster):
    """The second loader waits for the first (paused at a fault point), then
    both succeed on the direct path, with no deadlock."""
    t = "cc_two"
    with cluster.conn() as conn:
        make_table(conn, t)
    load_a = seed_insert(t, PRE + N, start=PRE + 1)
    load_b = seed_insert(t, PRE + 2 * N, start=PRE + N + 1)
    off = cluster.log_size()
    a_settings = dict(SMALL_BATCHES, **fault_gucs("batch_done", 1, sleep_ms=2500))
    with Background(cluster, ["BEGIN", load_a, "COMMIT"], a_settings, name="a") as a, \
            Background(cluster, ["BEGIN", load_b, "COMMIT"], SMALL_BATCHES, name="b") as b, \
            cluster.conn() as mon:
        a.start()
        wait_fault_sleep(cluster, a, "batch_done", off)
        b.start()
        wait_lock_wait(mon, b.pid)
        assert not a.done.is_set()
        a.join()
        b.join()
        assert a.error is None and b.error is None, (a.error, b.error)
        sta, stb = last_statement(a.conn), last_statement(b.conn)
        assert sta["path"] == stb["path"] == "direct", (sta, stb)
    with cluster.conn() as conn:
        want = reference(conn, t + "_ref", [seed_insert("{t}", PRE), load_a.replace(t, "{t}"),
                                            load_b.replace(t, "{t}")])
        assert table_digest(conn, t) == want
        verify_table(conn, t)


@pytest.mark.parametrize("shape", ["autocommit", "read-first"])
def test_simultaneous_loaders_no_deadlock(cluster, shape):
    """Loaders started at (nearly) the same moment, several rounds: no
    deadlock, every load on the direct path, every row there."""
    t = f"cc_sim_{shape.replace('-', '_')}"
    with cluster.conn() as conn:
        make_table(conn, t)
    rounds, loaders, n = 4, 3, 5000
    statements = []
    for r in range(rounds):
        barrier = threading.Barrier(loaders)
        bgs = []
        for i in range(loaders):
            start = PRE + 1 + (r * loaders + i) * n
            load = seed_insert(t, start + n - 1, start=start)
            statements.append(load)
            if shape == "autocommit":
                stmts = [load]
            else:
                # A reader of the table first (AccessShareLock), then the load.
                stmts = ["BEGIN", f"SELECT count(*) FROM {t}", load, "COMMIT"]
            bgs.append(Background(cluster, stmts, dict(SMALL_BATCHES, lock_timeout="60s"),
                                  name=f"r{r}l{i}", barrier=barrier))
        try:
            for bg in bgs:
                bg.start()
            for bg in bgs:
                bg.join()
            errors = [(bg.thread.name, bg.sqlstate, str(bg.error)) for bg in bgs if bg.error]
            assert errors == [], errors
            for bg in bgs:
                st = last_statement(bg.conn)
                assert st["path"] == "direct" and st["rows_inserted"] == n, st
        finally:
            for bg in bgs:
                bg.close()
    with cluster.conn() as conn:
        want = reference(conn, t + "_ref", [seed_insert("{t}", PRE)] +
                         [s.replace(t, "{t}") for s in statements])
        assert table_digest(conn, t) == want
        verify_table(conn, t)


def test_loaders_after_plain_insert_in_same_transaction(cluster):
    t = "cc_upgrade"
    outcome = {}
    for mode in ("plain", "direct"):
        with cluster.conn() as conn:
            make_table(conn, t)
        hint = mode == "direct"
        a = cluster.conn(autocommit=False)
        b = cluster.conn(autocommit=False)
        try:
            for x in (a, b):
                set_gucs(x, dict(SMALL_BATCHES, lock_timeout="30s"))
            a.execute(f"INSERT INTO {t} VALUES (-1, -1, -1, -1)")
            b.execute(f"INSERT INTO {t} VALUES (-2, -2, -2, -2)")
            # b's load waits for a (or, on the plain path, runs at once).
            res = {}

            def load_b():
                try:
                    b.execute(seed_insert(t, 2 * N, start=N + 1, hint=hint))
                    b.commit()
                    res["b"] = None
                except psycopg.Error as e:
                    res["b"] = e.sqlstate
                    b.rollback()
            th = threading.Thread(target=load_b, daemon=True)
            th.start()
            time.sleep(0.5)
            try:
                a.execute(seed_insert(t, N, hint=hint))
                a.commit()
                res["a"] = None
            except psycopg.Error as e:
                res["a"] = e.sqlstate
                a.rollback()
            th.join(60)
            outcome[mode] = (res.get("a"), res.get("b"))
        finally:
            a.close()
            b.close()
    assert outcome["plain"] == (None, None)
    assert outcome["direct"] == outcome["plain"], outcome


def test_partitions_loaded_directly_run_concurrently(cluster):
    """Loads into two partitions of one table, each addressed directly: the
    second does not wait for the first (paused at a fault point)."""
    t = "cc_part"
    with cluster.conn() as conn:
        conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
        conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS} PARTITION BY RANGE (indid)")
        conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (MINVALUE) TO (100000)")
        conn.execute(f"CREATE TABLE {t}_2 PARTITION OF {t} FOR VALUES FROM (100000) TO (MAXVALUE)")
        conn.execute(f"CREATE INDEX {t}_indid ON {t} (indid)")
    load1 = seed_insert(f"{t}_1", N)
    load2 = seed_insert(f"{t}_2", 100_000 + N - 1, start=100_000)
    off = cluster.log_size()
    s1 = dict(SMALL_BATCHES, **fault_gucs("batch_done", 1, sleep_ms=8000))
    with Background(cluster, load1, s1, name="p1") as b1, \
            Background(cluster, load2, dict(SMALL_BATCHES, lock_timeout="5s"), name="p2") as b2:
        run_while_paused(cluster, b1, b2, "batch_done", off, 30)
        st = last_statement(b2.conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        b1.join()
        assert b1.error is None, b1.error
        st = last_statement(b1.conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
    with cluster.conn() as conn:
        want = reference(conn, t + "_ref", [load1.replace(f"{t}_1", "{t}"),
                                            load2.replace(f"{t}_2", "{t}")])
        assert table_digest(conn, t) == want
        assert conn.execute(f"SELECT count(*) FROM ONLY {t}_1").fetchone()[0] == N
        verify_tree(conn, t)


def test_plain_insert_waits_behind_load(cluster):
    t = "cc_plain"
    with cluster.conn() as conn:
        make_table(conn, t)
    load = seed_insert(t, PRE + N, start=PRE + 1)
    off = cluster.log_size()
    settings = dict(SMALL_BATCHES, **fault_gucs("batch_done", 1, sleep_ms=1500))
    with Background(cluster, ["BEGIN", load], settings, name="loader") as bg, \
            Background(cluster, [f"INSERT INTO {t} VALUES (-1, -1, -1, -1)",
                                 f"SELECT count(*) FROM {t}"], name="plain") as pl, \
            cluster.conn() as mon:
        bg.start()
        wait_fault_sleep(cluster, bg, "batch_done", off)
        pl.start()
        wait_lock_wait(mon, pl.pid)
        bg.join()
        assert bg.error is None, bg.error
        # Load finished, not committed: the plain INSERT still waits.
        time.sleep(0.3)
        assert not pl.done.is_set()
        wait_lock_wait(mon, pl.pid)
        bg.execute("COMMIT")
        pl.join()
        assert pl.error is None, pl.error
        assert pl.results[1] == [(PRE + N + 1,)]
    with cluster.conn() as conn:
        want = reference(conn, t + "_ref", [seed_insert("{t}", PRE), load.replace(t, "{t}"),
                                            "INSERT INTO {t} VALUES (-1, -1, -1, -1)"])
        assert table_digest(conn, t) == want
        verify_table(conn, t)


# -- serializable ------------------------------------------------------------

def run_serializable(cluster, hint, sequence):
    """Run `sequence` [(session, sql)] on two SERIALIZABLE sessions; returns
    the outcome of each step (None or SQLSTATE).  A session whose statement
    failed skips its later statements (its transaction is aborted)."""
    for t in ("ser_a", "ser_b"):
        with cluster.conn() as conn:
            make_table(conn, t, index=True, rows=100)
    conns = {s: cluster.conn(autocommit=False) for s in ("T1", "T2")}
    for cx in conns.values():
        cx.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
    aborted = set()
    trace = []
    try:
        for cx in conns.values():
            set_gucs(cx, dict(SMALL_BATCHES, lock_timeout="10s"))
            cx.commit()
        for sess, sql in sequence:
            label = sql.replace("{hint}", "").split()[0]
            if sess in aborted:
                trace.append((sess, label, "skipped"))
                continue
            hinted = "{hint}" in sql
            sql = sql.replace("{hint}", "/*+ APPEND */ " if hint else "")
            try:
                if sql == "COMMIT":
                    conns[sess].commit()
                else:
                    conns[sess].execute(sql)
                    if hint and hinted:
                        st = last_statement(conns[sess])
                        assert st["path"] == "direct", st
                if sql != "COMMIT":
                    level = conns[sess].execute("SHOW transaction_isolation").fetchone()[0]
                    assert level == "serializable", level
                trace.append((sess, label, None))
            except psycopg.Error as e:
                trace.append((sess, label, e.sqlstate))
                conns[sess].rollback()
                aborted.add(sess)
    finally:
        for cx in conns.values():
            cx.close()
    with cluster.conn() as conn:
        counts = tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("ser_a", "ser_b"))
        verify_table(conn, "ser_a")
        verify_table(conn, "ser_b")
    return trace, counts


SER_LOAD = "{hint}INSERT INTO %s SELECT a %% 50, a %% 10000, a, a FROM generate_series(1001, 21000) a"

SERIALIZABLE_SEQUENCES = {
    # write skew: each reads one table and loads into the other
    "write-skew": [("T1", "SELECT count(*) FROM ser_a"),
                   ("T2", "SELECT count(*) FROM ser_b"),
                   ("T1", SER_LOAD % "ser_b"),
                   ("T2", SER_LOAD % "ser_a"),
                   ("T1", "COMMIT"),
                   ("T2", "COMMIT")],
    # same, commits in the other order
    "write-skew-2": [("T1", "SELECT count(*) FROM ser_a"),
                     ("T2", "SELECT count(*) FROM ser_b"),
                     ("T2", SER_LOAD % "ser_a"),
                     ("T1", SER_LOAD % "ser_b"),
                     ("T2", "COMMIT"),
                     ("T1", "COMMIT")],
    # write skew through index range reads (predicate locks on btree pages,
    # checked when the load's index entries go in)
    "write-skew-index": [("T1", "SET LOCAL enable_seqscan = off"),
                         ("T2", "SET LOCAL enable_seqscan = off"),
                         ("T1", "SELECT count(*) FROM ser_a WHERE indid BETWEEN 5000 AND 5010"),
                         ("T2", "SELECT count(*) FROM ser_b WHERE indid BETWEEN 5000 AND 5010"),
                         ("T1", SER_LOAD % "ser_b"),
                         ("T2", SER_LOAD % "ser_a"),
                         ("T1", "COMMIT"),
                         ("T2", "COMMIT")],
    # index range reads that the loads do not touch: no conflict
    "index-no-overlap": [("T1", "SET LOCAL enable_seqscan = off"),
                         ("T2", "SET LOCAL enable_seqscan = off"),
                         ("T1", "SELECT count(*) FROM ser_a WHERE indid BETWEEN 1 AND 10"),
                         ("T2", "SELECT count(*) FROM ser_b WHERE indid BETWEEN 1 AND 10"),
                         ("T1", SER_LOAD % "ser_b"),
                         ("T2", SER_LOAD % "ser_a"),
                         ("T1", "COMMIT"),
                         ("T2", "COMMIT")],
    # a reader of the table and a loader into it: no cycle, both commit
    "read-then-load": [("T1", "SELECT count(*) FROM ser_a"),
                       ("T2", SER_LOAD % "ser_a"),
                       ("T2", "COMMIT"),
                       ("T1", "SELECT count(*) FROM ser_a"),
                       ("T1", "COMMIT")],
    # the reader writes what the loader read after the load committed
    "read-load-write": [("T1", "SELECT count(*) FROM ser_a"),
                        ("T2", "SELECT count(*) FROM ser_b"),
                        ("T2", SER_LOAD % "ser_a"),
                        ("T2", "COMMIT"),
                        ("T1", "INSERT INTO ser_b VALUES (1, 1, 1, 1)"),
                        ("T1", "COMMIT")],
}


@pytest.mark.parametrize("name", list(SERIALIZABLE_SEQUENCES))
def test_serializable_like_plain_insert(cluster, name):
    seq = SERIALIZABLE_SEQUENCES[name]
    plain = run_serializable(cluster, False, seq)
    direct = run_serializable(cluster, True, seq)
    assert direct == plain, f"plain: {plain}\ndirect: {direct}"
    if name.startswith("write-skew"):
        # the plain outcome is the serialization failure the test is about
        assert any(s == "40001" for _, _, s in plain[0]), plain
