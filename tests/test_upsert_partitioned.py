"""INSERT ... ON CONFLICT DO UPDATE and MERGE into partitioned tables and
inheritance trees, their updates made in bulk leaf by leaf.

An upsert routes its rows: each leaf a row that meets a row of the table
is routed to is judged at its first such row (src/load/bulkrules.c) and
has its own sorted changes (src/load/upsert.c keys them by relation).  A
MERGE's matched rows carry their leaf's tableoid, as an UPDATE's do.  Each
statement runs plain on one tree and hinted on its twin: the same count,
the same rows in every leaf (leaves whose columns are numbered differently
from the root's are in each tree), every index of every leaf read by a
forced index scan against a sequential scan, amcheck (heapallindexed) and
pg_visibility, before and after VACUUM.  What stays core's, and says why:
a leaf with row triggers of the update (its rows only), an update that
assigns a column of a partition key (a row could move), and core's errors
(a CHECK constraint of one leaf, a row moved out of a partition that is
the target) come out as plain's.
"""

import pytest

from conftest import last_statement, set_gucs, sqlstate_of, table_digest
from test_bulk_dml_partitioned import _same_trees, _trees
from test_update_access_paths import check_table

pytestmark = pytest.mark.directpath

UPSERT = ("INSERT INTO {t} SELECT g, date '2025-01-01' + (g % 100), g % 500, 'n' || g "
          "FROM generate_series(20001, 60000) g ON CONFLICT (id, ts) DO UPDATE "
          "SET a = EXCLUDED.a, b = {t}.b || 'u' WHERE {t}.id % 5 <> 0")
MERGE = ("MERGE INTO {t} x USING (SELECT g AS id, date '2025-01-01' + (g % 100) AS ts, "
         "g % 500 AS a FROM generate_series(20001, 60000) g) s "
         "ON x.id = s.id AND x.ts = s.ts "
         "WHEN MATCHED AND s.id % 5 <> 0 THEN UPDATE SET a = s.a, b = x.b || 'm' "
         "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.ts, s.a, 'new')")

CASES = {
    "upsert, range tree": ("range", UPSERT, 16000),
    "merge, range tree": ("range", MERGE, 16000),
    "merge, inheritance tree": ("inherit", MERGE, 16000),
}


@pytest.mark.parametrize("case", list(CASES))
def test_against_plain(cluster, case):
    """Plain on one tree, hinted on its twin: the same count and rows in
    every leaf, every update made in bulk, and every leaf sound by its
    indexes, amcheck and its visibility map, after VACUUM too."""
    layout, sql, updated = CASES[case]
    n = list(CASES).index(case)
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        tp, td, leaves = _trees(conn, layout, 60 + n)
        n_plain = conn.execute(sql.format(t=tp)).rowcount
        n_direct = conn.execute("/*+ APPEND */ " + sql.format(t=td)).rowcount
        rep = last_statement(conn)
        assert n_direct == n_plain, (n_direct, n_plain)
        assert rep["path"] == "direct", rep
        assert rep["updates"].startswith(f"{updated} in bulk"), rep
        assert "by core" not in rep["updates"], rep
        _same_trees(conn, tp, td, leaves)
        for leaf in leaves[td]:
            check_table(conn, leaf)
        for leaf in leaves[td]:
            conn.execute(f"VACUUM {leaf}")
            check_table(conn, leaf)
        _same_trees(conn, tp, td, leaves)


def test_a_leaf_with_row_triggers_is_cores(cluster):
    """One leaf has an AFTER UPDATE row trigger: its rows are updated by
    core's executor (the trigger fires once per row, as plain), the other
    leaves' rows in bulk, and the Updates line says both."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        tp, td, leaves = _trees(conn, "range", 70)
        conn.execute("CREATE TABLE up_pt_log (tree text, id bigint, old_a int, new_a int)")
        conn.execute("CREATE FUNCTION up_pt_row() RETURNS trigger LANGUAGE plpgsql AS $$"
                     "BEGIN INSERT INTO up_pt_log VALUES (TG_ARGV[0], NEW.id, OLD.a, NEW.a); "
                     "RETURN NULL; END$$")
        for t, tree in ((tp, "p"), (td, "d")):
            conn.execute(f"CREATE TRIGGER r AFTER UPDATE ON {t}_2 FOR EACH ROW "
                         f"EXECUTE FUNCTION up_pt_row('{tree}')")
        for sql in (UPSERT, MERGE):
            assert (conn.execute(sql.format(t=tp)).rowcount ==
                    conn.execute("/*+ APPEND */ " + sql.format(t=td)).rowcount)
            rep = last_statement(conn)
            assert " in bulk" in rep["updates"], rep
            assert "rows by core's executor: the table has row triggers" in rep["updates"], rep
            _same_trees(conn, tp, td, leaves)
        log = {tree: sorted(conn.execute("SELECT id, old_a, new_a FROM up_pt_log "
                                         "WHERE tree = %s", (tree,)).fetchall(), key=repr)
               for tree in ("p", "d")}
        assert log["d"] == log["p"] and len(log["p"]) > 1000
        for leaf in leaves[td]:
            check_table(conn, leaf)


def test_partition_key_assigned_is_cores(cluster):
    """A MERGE whose update assigns the partition key (no unique index holds
    it, so the statement takes the direct path): its updates are core's,
    which moves the rows, with the reason; the trees end alike."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for t in ("up_pk_p", "up_pk_d"):
            conn.execute(f"CREATE TABLE {t} (id int, k int, v text) PARTITION BY LIST (k)")
            conn.execute(f"CREATE TABLE {t}_0 PARTITION OF {t} FOR VALUES IN (0)")
            conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES IN (1)")
            conn.execute(f"INSERT INTO {t} SELECT g, g % 2, 'old' FROM generate_series(1, 20000) g")
        sql = ("MERGE INTO {t} x USING generate_series(10001, 30000) g ON x.id = g "
               "WHEN MATCHED THEN UPDATE SET k = 1 - x.k, v = 'm' "
               "WHEN NOT MATCHED THEN INSERT VALUES (g, g % 2, 'new')")
        assert (conn.execute(sql.format(t="up_pk_p")).rowcount ==
                conn.execute("/*+ APPEND */ " + sql.format(t="up_pk_d")).rowcount == 20000)
        rep = last_statement(conn)
        assert rep["path"] == "direct", rep
        assert "assigns a column of a partition key" in rep["updates"], rep
        for suffix in ("", "_0", "_1"):
            assert (table_digest(conn, "up_pk_d" + suffix) ==
                    table_digest(conn, "up_pk_p" + suffix))


def test_errors_as_plain(cluster):
    """Core's errors, by SQLSTATE: a CHECK constraint of one leaf that an
    update breaks (23514), and an upsert into a partition whose update
    would move the row out of it (core's "invalid ON UPDATE
    specification"); nothing of either statement is left."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        tp, td, leaves = _trees(conn, "range", 71)
        for t in (tp, td):
            conn.execute(f"ALTER TABLE {t}_2 ADD CONSTRAINT small_a CHECK (a < 400) NOT VALID")
        sql = ("INSERT INTO {t} SELECT g, date '2025-01-01' + (g % 100), g % 300, 'n' "
               "FROM generate_series(20001, 60000) g ON CONFLICT (id, ts) DO UPDATE "
               "SET a = EXCLUDED.a + 150")
        assert (sqlstate_of(conn, sql.format(t=tp)) ==
                sqlstate_of(conn, "/*+ APPEND */ " + sql.format(t=td)) == "23514")
        for t in ("up_pe_p", "up_pe_d"):
            conn.execute(f"CREATE TABLE {t} (id int, k int, v text) PARTITION BY LIST (k)")
            conn.execute(f"CREATE TABLE {t}_0 PARTITION OF {t} FOR VALUES IN (0)")
            conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES IN (1)")
            conn.execute(f"CREATE UNIQUE INDEX ON {t}_0 (id)")
            conn.execute(f"INSERT INTO {t} SELECT g, g % 2, 'old' FROM generate_series(1, 20000) g")
        sql = ("INSERT INTO {t}_0 SELECT g * 2, 0, 'n' FROM generate_series(1, 20000) g "
               "ON CONFLICT (id) DO UPDATE SET k = 1")
        state = sqlstate_of(conn, sql.format(t="up_pe_p"))
        assert state is not None
        assert sqlstate_of(conn, "/*+ APPEND */ " + sql.format(t="up_pe_d")) == state
        _same_trees(conn, tp, td, leaves)
        assert table_digest(conn, "up_pe_d") == table_digest(conn, "up_pe_p")
