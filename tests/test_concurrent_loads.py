"""Loads that run beside other writers (directpath.concurrent_loads).

A COPY or INSERT that directpath.mode = always sends to the direct path and
that finds the table's ShareRowExclusiveLock taken (another writer holds
RowExclusive) keeps to RowExclusiveLock and loads at once: its pages go
through shared buffers, its index entries through core's insertion.  Here
a plain INSERT left open holds RowExclusiveLock, so every load of the tests
loads beside it.  What is checked against the plain statement: the rows (a
plain twin), errors (unique keys met across sessions wait for the other
transaction, as core's do; foreign keys), amcheck with heapallindexed and
pg_visibility, index scans against sequential scans; crash recovery of a
committed load that reached only WAL; a streaming standby's replay.
"""

import pytest

from conftest import (SMALL_BATCHES, Background, crash_backend, crash_immediate,
                      error_of, fault_gucs, last_statement, run_while_paused, table_digest,
                      verify_table, wait_fault_sleep, wait_lock_wait)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

ALWAYS = dict(SMALL_BATCHES, **{"directpath.mode": "always"})


def copy_sql(t, first, last, parent_mod=100):
    """COPY of rows first..last: (id, id % parent_mod, a text of id)."""
    return (f"COPY {t} FROM PROGRAM 'seq {first} {last} | "
            f"awk ''{{print $1 \",\" $1 % {parent_mod} \",v\" ($1 * 7919) % 1000}}''' "
            "WITH (FORMAT csv)")


def make_tables(conn, t):
    conn.execute(f"DROP TABLE IF EXISTS {t}, {t}_parent CASCADE")
    conn.execute(f"CREATE TABLE {t}_parent (id int PRIMARY KEY)")
    conn.execute(f"INSERT INTO {t}_parent SELECT g FROM generate_series(0, 99) g")
    conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, p int REFERENCES {t}_parent, "
                 "v text)")
    conn.execute(f"CREATE INDEX {t}_v ON {t} (v)")
    conn.execute(f"INSERT INTO {t} SELECT g, -g % 100, 'seed' FROM generate_series(-1000, -1) g")


def holder(cluster, t, key=0):
    """A session whose open plain INSERT holds RowExclusiveLock on t."""
    h = cluster.conn()
    h.execute("BEGIN")
    h.execute(f"INSERT INTO {t} VALUES ({key}, 0, 'held')")
    return h


def scans_agree(conn, t):
    """Sequential and index scans see the same rows."""
    conn.execute("SET enable_indexscan = off; SET enable_bitmapscan = off")
    seq = conn.execute(f"SELECT count(*), sum(id) FROM {t} WHERE id > -2000").fetchone()
    conn.execute("RESET enable_indexscan; RESET enable_bitmapscan; SET enable_seqscan = off")
    idx = conn.execute(f"SELECT count(*), sum(id) FROM {t} WHERE id > -2000").fetchone()
    by_v = conn.execute(f"SELECT count(*) FROM {t} WHERE v >= ''").fetchone()[0]
    conn.execute("RESET enable_seqscan")
    assert seq == idx and by_v == seq[0], (seq, idx, by_v)
    return seq


def reference(conn, t, statements):
    """A plain twin of t after the same statements."""
    ref = t + "_ref"
    make_tables(conn, ref)
    for s in statements:
        conn.execute(s.replace(f" {t} ", f" {ref} "))
    return table_digest(conn, ref)


def test_two_copies_load_at_once(cluster):
    """Two COPYs load beside a writer and beside each other: the second
    runs to its commit while the first is paused between its batches, their
    pages interleave, and the table is what plain COPYs would leave."""
    t = "cl_two"
    with cluster.conn() as conn:
        make_tables(conn, t)
    a_sql, b_sql = copy_sql(t, 1, 20000), copy_sql(t, 20001, 40000)
    off = cluster.log_size()
    h = holder(cluster, t)
    try:
        a_set = dict(ALWAYS, **fault_gucs("batch_done", 2, sleep_ms=20000))
        with Background(cluster, ["BEGIN", a_sql, "COMMIT"], a_set, name="a") as a, \
                Background(cluster, ["BEGIN", b_sql, "COMMIT"], ALWAYS, name="b") as b:
            run_while_paused(cluster, a, b, "batch_done", off)
            a.join(60)
            assert a.error is None, a.error
            for bg in (a, b):
                st = last_statement(bg.conn)
                assert st["path"] == "direct" and st["rows_inserted"] == 20000, st
                assert "beside other writers" in st["statistics"], st
                assert st["pages_written"] > 0 and not st["frozen"], st
        h.execute("COMMIT")
    finally:
        h.close()
    with cluster.conn() as conn:
        blocks = conn.execute(
            f"SELECT min((ctid::text::point)[0]) FILTER (WHERE id > 20000), "
            f"max((ctid::text::point)[0]) FILTER (WHERE id BETWEEN 1 AND 20000) FROM {t}").fetchone()
        assert blocks[0] < blocks[1], f"the two loads' pages do not interleave: {blocks}"
        want = reference(conn, t, [f"INSERT INTO {t} VALUES (0, 0, 'held')", a_sql, b_sql])
        assert table_digest(conn, t) == want
        assert scans_agree(conn, t)[0] == 41001
        verify_table(conn, t)


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_key_of_another_transaction_waits_as_plain(cluster, end):
    """A key that another open transaction inserted makes the COPY wait for
    it, as a plain COPY waits; then core's unique error, or the load."""
    t = f"cl_wait_{end.lower()}"
    with cluster.conn() as conn:
        make_tables(conn, t)
    h = holder(cluster, t, key=5)
    try:
        with Background(cluster, [copy_sql(t, 1, 3000)], ALWAYS, name="a") as a, \
                cluster.conn() as mon:
            a.start()
            wait_lock_wait(mon, a.pid)
            lock = mon.execute("SELECT locktype FROM pg_locks WHERE pid = %s AND NOT granted",
                               (a.pid,)).fetchone()
            assert lock == ("transactionid",), lock
            h.execute(end)
            a.join(60)
            if end == "COMMIT":
                assert a.sqlstate == "23505", a.error
                with cluster.conn() as conn:
                    plain = error_of(conn, copy_sql(t, 1, 3000))
                assert (a.error.diag.message_primary, a.error.diag.message_detail) == plain[1:3]
            else:
                assert a.error is None, a.error
                st = last_statement(a.conn)
                assert "beside other writers" in st["statistics"], st
    finally:
        h.close()
    with cluster.conn() as conn:
        n = 1000 + (1 if end == "COMMIT" else 3000)
        assert scans_agree(conn, t)[0] == n
        verify_table(conn, t)


def test_foreign_key_violation_as_plain(cluster):
    """A row whose parent is missing fails the load with a plain COPY's
    error, and leaves nothing."""
    t = "cl_fk"
    with cluster.conn() as conn:
        make_tables(conn, t)
    bad = copy_sql(t, 1, 5000, parent_mod=101)
    h = holder(cluster, t)
    try:
        with Background(cluster, [bad], ALWAYS, name="a") as a:
            a.start()
            a.join(60)
            assert a.sqlstate == "23503", a.error
        h.execute("ROLLBACK")
    finally:
        h.close()
    with cluster.conn() as conn:
        plain = error_of(conn, bad)
        assert (a.error.diag.message_primary, a.error.diag.message_detail) == plain[1:3]
        assert scans_agree(conn, t)[0] == 1000
        verify_table(conn, t)


def waits_then_loads_alone(cluster, h, sql, settings):
    """`sql` waits for the lock of holder `h`, which then commits; the
    statement then loads alone, on the direct path."""
    with Background(cluster, [sql], settings, name="waiter") as bg, cluster.conn() as mon:
        bg.start()
        wait_lock_wait(mon, bg.pid)
        h.execute("COMMIT")
        bg.join(60)
        assert bg.error is None, bg.error
        st = last_statement(bg.conn)
        assert st["path"] == "direct" and "beside" not in (st["statistics"] or ""), st


@pytest.mark.parametrize("how", ["setting off", "hint"])
def test_waits_when_not_allowed(cluster, how):
    """With directpath.concurrent_loads off, or a hinted COPY, the load
    waits for the other writer and then loads alone, as before."""
    t = "cl_off_" + how.split()[0]
    with cluster.conn() as conn:
        make_tables(conn, t)
    sql = copy_sql(t, 1, 3000)
    settings = dict(ALWAYS)
    if how == "hint":
        sql = "/*+ APPEND */ " + sql
    else:
        settings["directpath.concurrent_loads"] = "off"
    h = holder(cluster, t)
    try:
        waits_then_loads_alone(cluster, h, sql, settings)
    finally:
        h.close()
    with cluster.conn() as conn:
        assert scans_agree(conn, t)[0] == 4001
        verify_table(conn, t)


def test_insert_loads_beside(cluster):
    """An INSERT ... SELECT under mode = always loads beside a writer as a
    COPY does, and leaves what the plain INSERT would; an INSERT ... ON
    CONFLICT waits for the writer and then loads alone (its table has NOT
    NULL columns and defaults: the row type compared after the wait is
    the same, constraints included)."""
    t = "cl_ins"
    with cluster.conn() as conn:
        make_tables(conn, t)
    ins = (f"INSERT INTO {t} SELECT g, g % 100, 'v' || (g * 7919) % 1000 "
           "FROM generate_series({a}, {b}) g")
    upsert = ins + " ON CONFLICT DO NOTHING"
    h = holder(cluster, t)
    try:
        with Background(cluster, [ins.format(a=1, b=20000)], ALWAYS, name="a") as a:
            a.start()
            a.join(60)
            assert a.error is None, a.error
            st = last_statement(a.conn)
            assert st["path"] == "direct" and st["rows_inserted"] == 20000, st
            assert "beside other writers" in st["statistics"], st
        waits_then_loads_alone(cluster, h, upsert.format(a=15001, b=30000), ALWAYS)
    finally:
        h.close()
    with cluster.conn() as conn:
        want = reference(conn, t, [f"INSERT INTO {t} VALUES (0, 0, 'held')",
                                   ins.format(a=1, b=20000), upsert.format(a=15001, b=30000)])
        assert table_digest(conn, t) == want
        assert scans_agree(conn, t)[0] == 31001
        verify_table(conn, t)


def test_crash_recovery(cluster):
    """A load beside a writer killed between its batches leaves no row; a
    committed one whose pages only WAL holds (no checkpoint before an
    immediate stop) comes back whole from crash recovery."""
    t = "cl_crash"
    with cluster.conn() as conn:
        make_tables(conn, t)
        conn.execute("CHECKPOINT")
    off = cluster.log_size()
    h = holder(cluster, t)
    with Background(cluster, ["BEGIN", copy_sql(t, 1, 20000)],
                    dict(ALWAYS, **fault_gucs("batch_done", 2)), name="a") as a:
        a.start()
        wait_fault_sleep(cluster, a, "batch_done", off)
        crash_backend(cluster, a.pid)
    h.close()
    with cluster.conn() as conn:
        assert scans_agree(conn, t)[0] == 1000
        verify_table(conn, t)
    h = holder(cluster, t)
    with Background(cluster, [copy_sql(t, 1, 20000)], ALWAYS, name="b") as b:
        b.start()
        b.join(60)
        assert b.error is None, b.error
        assert "beside other writers" in last_statement(b.conn)["statistics"]
    h.execute("COMMIT")
    h.close()
    with cluster.conn() as conn:
        before = table_digest(conn, t)
    crash_immediate(cluster)
    with cluster.conn() as conn:
        assert table_digest(conn, t) == before
        assert scans_agree(conn, t)[0] == 21001
        verify_table(conn, t)
        # the table takes more rows, by both paths
        conn.execute(copy_sql(t, 30001, 31000))
        conn.execute("SET directpath.mode = always")
        conn.execute(copy_sql(t, 31001, 40000))
        assert scans_agree(conn, t)[0] == 31001
        verify_table(conn, t)


def test_standby_replays_loads_beside(make_cluster, tmp_path):
    """A streaming standby replays two loads beside a writer into the same
    rows and sound indexes (index scans, amcheck), and after promotion the
    table takes more loads."""
    p = make_cluster(name="primary")
    t = "cl_rep"
    with p.conn() as conn:
        make_tables(conn, t)
    sb = p.make_standby(tmp_path)
    h = holder(p, t)
    try:
        for first, last in ((1, 15000), (15001, 30000)):
            with Background(p, [copy_sql(t, first, last)], ALWAYS, name="a") as a:
                a.start()
                a.join(60)
                assert a.error is None, a.error
                assert "beside other writers" in last_statement(a.conn)["statistics"]
        h.execute("COMMIT")
    finally:
        h.close()
    with p.conn() as conn:
        want = table_digest(conn, t)
        want_scan = scans_agree(conn, t)
    p.wait_replay(sb)
    with sb.conn() as conn:
        assert table_digest(conn, t) == want
        assert scans_agree(conn, t) == want_scan
        for i in (f"{t}_pkey", f"{t}_v"):
            conn.execute("SELECT bt_index_check(%s::regclass, heapallindexed => true)", (i,))
    sb.promote()
    with sb.conn() as conn:
        verify_table(conn, t)
        conn.execute("SET directpath.mode = always")
        conn.execute(copy_sql(t, 30001, 35000))
        assert scans_agree(conn, t)[0] == 36001
        verify_table(conn, t)
