"""Direct path loads on one running cluster: results, freezing, rollback."""

import re

import pytest

from conftest import (TABLE_COLUMNS, heap_blocks, last_statement, page_lsns,
                      seed_insert, seed_select, seed_sum, table_digest,
                      verify_table, vm_summary)

pytestmark = pytest.mark.directpath

N = 200_000


def make_table(conn, name, index=True):
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} {TABLE_COLUMNS}")
    if index:
        conn.execute(f"CREATE INDEX {name}_indid ON {name} (indid)")


def sums(conn, table):
    return conn.execute(
        f"SELECT count(*), sum(timeid), sum(insid), sum(indid::bigint), sum(value::bigint) "
        f"FROM {table}").fetchone()


def test_direct_load_matches_plain(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_direct")
        make_table(conn, "b_plain")
        conn.execute(seed_insert("b_plain", N, hint=False))
        conn.execute(seed_insert("b_direct", N))
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert st["rows_inserted"] == N, st
        assert st["pages_written"] > 0, st
        # Not created or truncated in this transaction: must not be frozen.
        assert st["frozen"] is False, st
        assert st["pages_written"] <= heap_blocks(conn, "b_direct")

        assert sums(conn, "b_direct") == sums(conn, "b_plain")
        assert sums(conn, "b_direct")[4] == seed_sum(N)
        assert table_digest(conn, "b_direct") == table_digest(conn, "b_plain")
        diff = conn.execute("SELECT count(*) FROM ((TABLE b_direct EXCEPT ALL TABLE b_plain) "
                            "UNION ALL (TABLE b_plain EXCEPT ALL TABLE b_direct)) d").fetchone()[0]
        assert diff == 0

        # The index finds the rows (index scan forced).
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT count(*) FROM b_direct WHERE indid BETWEEN 1000 AND 1999").fetchall())
        assert "Index" in plan, plan
        assert conn.execute("SELECT count(*), sum(value) FROM b_direct "
                            "WHERE indid BETWEEN 1000 AND 1999").fetchone() == (1000, 1499500)
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")

        verify_table(conn, "b_direct")

        # A second direct load appends after the first one.
        conn.execute(seed_insert("b_direct", N + 1000, start=N + 1))
        assert last_statement(conn)["path"] == "direct"
        assert sums(conn, "b_direct")[0] == N + 1000
        assert sums(conn, "b_direct")[4] == seed_sum(N + 1000)
        verify_table(conn, "b_direct")


def test_hint_after_insert_keyword(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_hint2", index=False)
        conn.execute(f"INSERT /*+ APPEND */ INTO b_hint2 {seed_select(N)}")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert sums(conn, "b_hint2")[4] == seed_sum(N)
        verify_table(conn, "b_hint2")


def test_mode_always_without_hint(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_always")
        conn.execute("SET directpath.mode = 'always'")
        try:
            conn.execute(seed_insert("b_always", N, hint=False))
            st = last_statement(conn)
        finally:
            conn.execute("RESET directpath.mode")
        assert st["path"] == "direct", st
        assert sums(conn, "b_always")[4] == seed_sum(N)
        verify_table(conn, "b_always")


def test_small_insert_takes_normal_path(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_small")
        conn.execute("/*+ APPEND */ INSERT INTO b_small VALUES (1, 2, 3, 4)")
        st = last_statement(conn)
        assert st["path"] == "normal", st
        # The reason names the size threshold ("small" / directpath.min_bytes).
        assert re.search(r"small|min_bytes", st["reason"] or "", re.I), st
        assert conn.execute("TABLE b_small").fetchall() == [(1, 2, 3, 4)]
        verify_table(conn, "b_small")


def test_truncate_in_transaction_freezes(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_frz")
        conn.execute(seed_insert("b_frz", 5000, hint=False))
        conn.execute("BEGIN")
        conn.execute("TRUNCATE b_frz")
        conn.execute(seed_insert("b_frz", N))
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct", st
        assert st["frozen"] is True, st
        assert st["rows_inserted"] == N, st
        assert sums(conn, "b_frz")[0:5:4] == (N, seed_sum(N))

        info = verify_table(conn, "b_frz", frozen_expected=True)
        assert info["blocks"] > 0

        # Nothing left for VACUUM to do on the heap.
        vm_before = vm_summary(conn, "b_frz")
        lsn_before = page_lsns(conn, "b_frz")
        conn.execute("VACUUM b_frz")
        assert vm_summary(conn, "b_frz") == vm_before
        lsn_after = page_lsns(conn, "b_frz")
        changed = [b for b, (x, y) in enumerate(zip(lsn_before, lsn_after)) if x != y]
        assert changed == [], f"VACUUM modified heap blocks {changed[:20]} of a frozen load"
        verify_table(conn, "b_frz", frozen_expected=True)


def test_create_in_transaction_freezes(cluster):
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS b_new")
        conn.execute("BEGIN")
        conn.execute(f"CREATE TABLE b_new {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX b_new_indid ON b_new (indid)")
        conn.execute(seed_insert("b_new", N))
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["path"] == "direct" and st["frozen"] is True, st
        assert sums(conn, "b_new")[0:5:4] == (N, seed_sum(N))
        verify_table(conn, "b_new", frozen_expected=True)


def test_rollback(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_rb")
        conn.execute("BEGIN")
        conn.execute(seed_insert("b_rb", N))
        st = last_statement(conn)
        conn.execute("ROLLBACK")
        assert st["path"] == "direct", st
        assert conn.execute("SELECT count(*) FROM b_rb").fetchone() == (0,)
        verify_table(conn, "b_rb")

        conn.execute("INSERT INTO b_rb VALUES (1, 1, 1, 1)")
        assert conn.execute("SELECT count(*) FROM b_rb").fetchone() == (1,)
        conn.execute("SET enable_seqscan = off")
        assert conn.execute("SELECT count(*) FROM b_rb WHERE indid = 1").fetchone() == (1,)
        conn.execute("RESET enable_seqscan")
        verify_table(conn, "b_rb")

        # And a direct load after the aborted one.
        conn.execute(seed_insert("b_rb", 100_000, start=2))
        assert last_statement(conn)["path"] == "direct"
        assert sums(conn, "b_rb")[0:5:4] == (100_000, seed_sum(100_000))
        verify_table(conn, "b_rb")


def test_rollback_of_truncate_keeps_old_rows(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_rbt")
        conn.execute(seed_insert("b_rbt", 3000, hint=False))
        before = table_digest(conn, "b_rbt")
        conn.execute("BEGIN")
        conn.execute("TRUNCATE b_rbt")
        conn.execute(seed_insert("b_rbt", N))
        st = last_statement(conn)
        conn.execute("ROLLBACK")
        assert st["path"] == "direct", st
        assert table_digest(conn, "b_rbt") == before
        verify_table(conn, "b_rbt")


def test_savepoint_rollback(cluster):
    with cluster.conn() as conn:
        make_table(conn, "b_sp")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO b_sp VALUES (7, 7, 7, 7)")
        conn.execute("SAVEPOINT s")
        conn.execute(seed_insert("b_sp", 100_000))
        st = last_statement(conn)
        conn.execute("ROLLBACK TO SAVEPOINT s")
        conn.execute("COMMIT")
        assert st["path"] == "direct", st
        assert conn.execute("TABLE b_sp").fetchall() == [(7, 7, 7, 7)]
        verify_table(conn, "b_sp")


def test_savepoint_rollback_table_created_in_parent(cluster):
    """Table created by the top transaction, loaded (perhaps frozen) in a
    subtransaction that rolls back: none of those rows may survive."""
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS b_sp2")
        conn.execute("BEGIN")
        conn.execute(f"CREATE TABLE b_sp2 {TABLE_COLUMNS}")
        conn.execute("CREATE INDEX b_sp2_indid ON b_sp2 (indid)")
        conn.execute("SAVEPOINT a")
        conn.execute(seed_insert("b_sp2", 100_000))
        st = last_statement(conn)
        conn.execute("ROLLBACK TO SAVEPOINT a")
        conn.execute(seed_insert("b_sp2", 60_000, start=50_001))
        conn.execute("COMMIT")
        assert st["path"] == "direct", st
        assert sums(conn, "b_sp2")[0:5:4] == (10_000, seed_sum(60_000, 50_001))
        verify_table(conn, "b_sp2")
