"""Bulk UPDATE and DELETE of partitioned tables and inheritance trees.

A hinted UPDATE or DELETE whose target is a partitioned table (any depth),
an inheritance parent or a partition is made in bulk leaf by leaf: each
leaf the plan kept has its own sort (or stream), its own lock, its own
pages and index work (src/load/upsert.c dispatches a plan row by its
tableoid, as core's ExecModifyTable does).  These tests compare every
statement with the plain one on a twin tree (row counts, contents, each
leaf's contents, RETURNING rows, trigger events), read every index of
every leaf by a forced index scan against a sequential scan, and run
amcheck (heapallindexed) and pg_visibility on every leaf, before and after
VACUUM.  Leaves whose columns are numbered differently from the root's (a
table attached with another column order, a dropped column, an inheritance
child with a column of its own) are in each tree.  What stays core's, and
says why: an UPDATE of a partition key column at any level (a row could
move), a leaf core would refuse the bulk path for (a BEFORE ROW trigger),
a foreign leaf.
"""

import pytest

from conftest import last_statement, set_gucs, table_digest
from test_update_access_paths import check_table

pytestmark = pytest.mark.directpath


def _range(conn, t):
    """Range by month, a leaf attached with its own column order and a
    dropped column, a second level hashed by id; a default leaf."""
    conn.execute(f"CREATE TABLE {t} (id bigint NOT NULL, ts date NOT NULL, a int, "
                 f"b text, PRIMARY KEY (id, ts)) PARTITION BY RANGE (ts)")
    conn.execute(f"CREATE INDEX ON {t} (a)")
    conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} "
                 f"FOR VALUES FROM ('2025-01-01') TO ('2025-02-01')")
    conn.execute(f"CREATE TABLE {t}_2 (junk int, b text, a int, ts date NOT NULL, "
                 f"id bigint NOT NULL)")
    conn.execute(f"ALTER TABLE {t}_2 DROP COLUMN junk")
    conn.execute(f"ALTER TABLE {t} ATTACH PARTITION {t}_2 "
                 f"FOR VALUES FROM ('2025-02-01') TO ('2025-03-01')")
    conn.execute(f"CREATE TABLE {t}_3 PARTITION OF {t} "
                 f"FOR VALUES FROM ('2025-03-01') TO ('2025-04-01') PARTITION BY HASH (id)")
    for r in range(2):
        conn.execute(f"CREATE TABLE {t}_3_{r} PARTITION OF {t}_3 "
                     f"FOR VALUES WITH (MODULUS 2, REMAINDER {r})")
    conn.execute(f"CREATE TABLE {t}_def PARTITION OF {t} DEFAULT")
    conn.execute(f"INSERT INTO {t} SELECT g, date '2025-01-01' + (g % 100), "
                 f"CASE WHEN g % 7 = 0 THEN NULL ELSE g % 1000 END, "
                 f"CASE WHEN g % 11 = 0 THEN NULL ELSE md5(g::text) END "
                 f"FROM generate_series(1, 40000) g")
    return [f"{t}_1", f"{t}_2", f"{t}_3_0", f"{t}_3_1", f"{t}_def"]


def _inherit(conn, t):
    """An inheritance parent with rows, a child with a column of its own
    and a child with its columns in another order (a dropped one)."""
    conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, ts date NOT NULL, "
                 f"a int, b text)")
    conn.execute(f"CREATE INDEX ON {t} (a)")
    conn.execute(f"CREATE TABLE {t}_c1 (extra text DEFAULT 'e') INHERITS ({t})")
    conn.execute(f"CREATE TABLE {t}_c2 (junk int, b text, a int, ts date NOT NULL, "
                 f"id bigint NOT NULL)")
    conn.execute(f"ALTER TABLE {t}_c2 DROP COLUMN junk")
    conn.execute(f"ALTER TABLE {t}_c2 INHERIT {t}")
    for c in ("_c1", "_c2"):
        conn.execute(f"CREATE INDEX ON {t}{c} (a)")
        conn.execute(f"ALTER TABLE {t}{c} ADD PRIMARY KEY (id)")
    conn.execute(f"INSERT INTO {t} SELECT g, date '2025-01-01' + (g % 100), g % 1000, "
                 f"md5(g::text) FROM generate_series(1, 15000) g")
    conn.execute(f"INSERT INTO {t}_c1 SELECT g, date '2025-01-01' + (g % 100), g % 1000, "
                 f"md5(g::text), 'x' || g FROM generate_series(15001, 30000) g")
    conn.execute(f"INSERT INTO {t}_c2 (id, ts, a, b) SELECT g, date '2025-01-01' + (g % 100), "
                 f"g % 1000, md5(g::text) FROM generate_series(30001, 40000) g")
    return [t, f"{t}_c1", f"{t}_c2"]


LAYOUTS = {"range": _range, "inherit": _inherit}

# statement, the number of result relations it leaves (None: all leaves)
STATEMENTS = {
    "update where (streams)": "UPDATE {t} SET a = a + 1, b = 'u' || id WHERE id % 3 = 0",
    "update from (sorted)": "UPDATE {t} x SET a = s.v, b = NULL FROM dp_pt_src s WHERE x.id = s.id",
    "delete where (streams)": "DELETE FROM {t} WHERE id % 4 = 1",
    "delete using (sorted)": "DELETE FROM {t} x USING dp_pt_src s WHERE x.id = s.id",
    "update pruned to one leaf": "UPDATE {t} SET b = 'p' WHERE ts >= '2025-02-03' "
                                 "AND ts < '2025-02-20'",
    "delete matching nothing": "DELETE FROM {t} WHERE id < 0",
}


def _trees(conn, layout, n):
    tp, td = f"dp_pt{n}_p", f"dp_pt{n}_d"
    leaves = {}
    for t in (tp, td):
        leaves[t] = LAYOUTS[layout](conn, t)
        conn.execute(f"VACUUM ANALYZE {t}")
        for leaf in leaves[t]:
            conn.execute(f"VACUUM ANALYZE {leaf}")
    return tp, td, leaves


def _same_trees(conn, tp, td, leaves):
    assert table_digest(conn, td) == table_digest(conn, tp)
    for lp, ld in zip(leaves[tp], leaves[td]):
        assert table_digest(conn, ld) == table_digest(conn, lp), ld


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("statement", list(STATEMENTS))
def test_against_plain(cluster, layout, statement):
    """Each statement, plain on one tree and hinted on its twin: the same
    count and rows in every leaf, every row changed in bulk, and every leaf
    sound by its indexes, amcheck and its visibility map, after VACUUM too."""
    n = list(LAYOUTS).index(layout) * 10 + list(STATEMENTS).index(statement)
    sql = STATEMENTS[statement]
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute("CREATE TABLE IF NOT EXISTS dp_pt_src AS SELECT g * 7 AS id, g AS v "
                     "FROM generate_series(1, 5000) g")
        conn.execute("ANALYZE dp_pt_src")
        tp, td, leaves = _trees(conn, layout, n)
        n_plain = conn.execute(sql.format(t=tp)).rowcount
        n_direct = conn.execute("/*+ APPEND */ " + sql.format(t=td)).rowcount
        rep = last_statement(conn)
        assert n_direct == n_plain, (n_direct, n_plain)
        assert rep["path"] == "direct", rep
        assert "in bulk" in rep["updates"] and "by core" not in rep["updates"], rep
        assert rep["updates"].startswith(f"{n_plain} rows "), rep
        _same_trees(conn, tp, td, leaves)
        for leaf in leaves[td]:
            check_table(conn, leaf)
        conn.execute(f"VACUUM {td}")
        for leaf in leaves[td]:
            conn.execute(f"VACUUM {leaf}")
            check_table(conn, leaf)
        _same_trees(conn, tp, td, leaves)


def test_explain_analyze_counts_every_leaf(cluster):
    """EXPLAIN ANALYZE's Updates line counts the rows of every leaf; a
    statement that finds no row still shows its node as run, as plain's."""
    with cluster.conn() as conn:
        tp, td, leaves = _trees(conn, "range", 90)
        plan = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) "
                            f"/*+ APPEND */ DELETE FROM {td} WHERE id % 2 = 0"
                            ).fetchone()[0][0]["Plan"]
        assert plan["Updates"] == "20000 rows deleted in bulk", plan
        plain = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) DELETE FROM {tp} WHERE id < 0"))
        direct = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) /*+ APPEND */ DELETE FROM {td} "
            f"WHERE id < 0"))
        delete_line = [ln for ln in direct.splitlines() if "Delete on" in ln]
        assert delete_line and "never executed" not in delete_line[0], direct
        assert "never executed" not in [ln for ln in plain.splitlines() if "Delete on" in ln][0]


def test_triggers_returning_and_transition_tables(cluster):
    """AFTER ROW triggers (cloned to every leaf), a statement trigger with
    a transition table on the root, and RETURNING: the plain statement's
    events, transition rows and returned rows (as sets), per leaf."""
    with cluster.conn() as conn:
        tp, td, leaves = _trees(conn, "range", 91)
        conn.execute("CREATE TABLE dp_pt_log (tree text, leaf text, op text, old_a int, "
                     "new_a int, id bigint)")
        conn.execute("CREATE FUNCTION dp_pt_row() RETURNS trigger LANGUAGE plpgsql AS $$"
                     "BEGIN INSERT INTO dp_pt_log VALUES (TG_ARGV[0], TG_TABLE_NAME, TG_OP, "
                     "OLD.a, CASE WHEN TG_OP = 'UPDATE' THEN NEW.a END, OLD.id); "
                     "RETURN NULL; END$$")
        conn.execute("CREATE FUNCTION dp_pt_stmt() RETURNS trigger LANGUAGE plpgsql AS $$"
                     "BEGIN INSERT INTO dp_pt_log SELECT TG_ARGV[0], 'stmt', TG_OP, "
                     "count(*), sum(a), NULL FROM old_rows; RETURN NULL; END$$")
        for t in (tp, td):
            tree = "p" if t == tp else "d"
            conn.execute(f"CREATE TRIGGER r AFTER UPDATE OR DELETE ON {t} FOR EACH ROW "
                         f"EXECUTE FUNCTION dp_pt_row('{tree}')")
            for op in ("UPDATE", "DELETE"):
                conn.execute(f"CREATE TRIGGER s_{op.lower()} AFTER {op} ON {t} "
                             f"REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
                             f"EXECUTE FUNCTION dp_pt_stmt('{tree}')")
        for sql in ("UPDATE {t} SET a = coalesce(a, 0) - 1 WHERE id % 5 = 0 "
                    "RETURNING substr(tableoid::regclass::text, 10), id, a, b",
                    "DELETE FROM {t} x USING dp_pt_src2 s WHERE x.id = s.id "
                    "RETURNING x.id, x.ts, s.id"):
            conn.execute("CREATE TABLE IF NOT EXISTS dp_pt_src2 AS SELECT g * 13 AS id "
                         "FROM generate_series(1, 2000) g")
            plain = sorted(conn.execute(sql.format(t=tp)).fetchall())
            direct = sorted(conn.execute("/*+ APPEND */ " + sql.format(t=td)).fetchall())
            rep = last_statement(conn)
            assert "in bulk" in rep["updates"] and "by core" not in rep["updates"], rep
            assert direct == plain
        log = {}
        for tree in ("p", "d"):
            rows = conn.execute("SELECT replace(leaf, %s, ''), op, old_a, new_a, id "
                                "FROM dp_pt_log WHERE tree = %s",
                                (f"dp_pt91_{tree}", tree)).fetchall()
            log[tree] = sorted(rows, key=repr)
        assert log["d"] == log["p"] and len(log["p"]) > 8000
        _same_trees(conn, tp, td, leaves)


# statement, the reason's part, DDL on each tree
LEFT_TO_CORE = {
    "partition key assigned": (
        "UPDATE {t} SET a = a + 5 WHERE id % 10 = 0",
        'of the partition key of "dp_ptk',
        "CREATE TABLE {t} (id int, a int, b text) PARTITION BY RANGE (a); "
        "CREATE TABLE {t}_lo PARTITION OF {t} FOR VALUES FROM (MINVALUE) TO (500); "
        "CREATE TABLE {t}_hi PARTITION OF {t} FOR VALUES FROM (500) TO (MAXVALUE); "
        "INSERT INTO {t} SELECT g, g % 1000, md5(g::text) FROM generate_series(1, 20000) g"),
    "key expression of a second level": (
        "UPDATE {t} SET b = upper(b) WHERE id % 10 = 0",
        'of the partition key of "dp_ptk',
        "CREATE TABLE {t} (id int, a int, b text) PARTITION BY RANGE (id); "
        "CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (0) TO (100000) "
        "PARTITION BY LIST ((left(b, 1))); "
        "CREATE TABLE {t}_1_x PARTITION OF {t}_1 DEFAULT; "
        "INSERT INTO {t} SELECT g, g % 1000, md5(g::text) FROM generate_series(1, 20000) g"),
    "a leaf with a BEFORE ROW trigger": (
        "DELETE FROM {t} WHERE id % 10 = 0",
        "BEFORE ROW triggers",
        "CREATE TABLE {t} (id int, a int, b text) PARTITION BY RANGE (id); "
        "CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (0) TO (10000); "
        "CREATE TABLE {t}_2 PARTITION OF {t} FOR VALUES FROM (10000) TO (100000); "
        "CREATE FUNCTION {t}_f() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN RETURN OLD;END$$; "
        "CREATE TRIGGER tr BEFORE DELETE ON {t}_2 FOR EACH ROW EXECUTE FUNCTION {t}_f(); "
        "INSERT INTO {t} SELECT g, g % 1000, md5(g::text) FROM generate_series(1, 20000) g"),
}


@pytest.mark.parametrize("case", list(LEFT_TO_CORE))
def test_left_to_core_with_the_reason(cluster, case):
    """What the bulk path does not take is the plain statement (rows that
    move between partitions included) and says why."""
    sql, why, ddl = LEFT_TO_CORE[case]
    n = list(LEFT_TO_CORE).index(case)
    with cluster.conn() as conn:
        tp, td = f"dp_ptk{n}_p", f"dp_ptk{n}_d"
        for t in (tp, td):
            for stmt in ddl.format(t=t).split("; "):  # (a function body has no "; ")
                conn.execute(stmt)
        n_plain = conn.execute(sql.format(t=tp)).rowcount
        n_direct = conn.execute("/*+ APPEND */ " + sql.format(t=td)).rowcount
        rep = last_statement(conn)
        assert n_direct == n_plain
        assert why in (rep["reason"] or ""), rep
        assert rep["path"] == "normal", rep
        assert table_digest(conn, td) == table_digest(conn, tp)
        moved = conn.execute(f"SELECT count(*) FROM {td}_hi WHERE a < 500").fetchone() \
            if case == "partition key assigned" else (0,)
        assert moved == (0,)


def test_partition_as_target(cluster):
    """A partition named directly is changed in bulk; an UPDATE that could
    take its rows out of it (its parent's key assigned) is core's, with
    core's partition constraint error."""
    with cluster.conn() as conn:
        tp, td, leaves = _trees(conn, "range", 92)
        sql = "UPDATE {t}_2 SET a = -a WHERE id % 2 = 0"
        assert conn.execute(sql.format(t=tp)).rowcount == \
            conn.execute("/*+ APPEND */ " + sql.format(t=td)).rowcount
        rep = last_statement(conn)
        assert rep["path"] == "direct" and "by core" not in rep["updates"], rep
        _same_trees(conn, tp, td, leaves)
        check_table(conn, f"{td}_2")
        conn.execute("CREATE TABLE dp_pt92_k (id int, a int) PARTITION BY RANGE (a)")
        conn.execute("CREATE TABLE dp_pt92_k_lo PARTITION OF dp_pt92_k "
                     "FOR VALUES FROM (MINVALUE) TO (500)")
        conn.execute("CREATE TABLE dp_pt92_k_hi PARTITION OF dp_pt92_k "
                     "FOR VALUES FROM (500) TO (MAXVALUE)")
        conn.execute("INSERT INTO dp_pt92_k SELECT g, g % 1000 FROM generate_series(1, 5000) g")
        errors = []
        for hint in ("", "/*+ APPEND */ "):
            try:
                with conn.transaction():
                    conn.execute(f"{hint}UPDATE dp_pt92_k_lo SET a = a + 600 WHERE id % 50 = 0")
            except Exception as e:  # noqa: BLE001 - the error is the point
                errors.append((getattr(e, "sqlstate", None), type(e).__name__))
            if hint:
                rep = last_statement(conn)
                assert 'partition key of "dp_pt92_k"' in (rep["reason"] or ""), rep
        assert errors == [("23514", "CheckViolation")] * 2, errors


def test_a_leaf_locked_by_another_session(cluster):
    """A leaf whose EXCLUSIVE lock is not free (another session writes it)
    has its rows taken by core's executor; the other leaves are changed in
    bulk; the outcome is the plain statement's."""
    with cluster.conn() as conn, cluster.conn() as other:
        tp, td, leaves = _trees(conn, "range", 93)
        other.execute("BEGIN")
        other.execute(f"LOCK TABLE {td}_2 IN ROW EXCLUSIVE MODE")
        sql = "UPDATE {t} SET b = 'l' WHERE id % 3 = 1"
        n_plain = conn.execute(sql.format(t=tp)).rowcount
        n_direct = conn.execute("/*+ APPEND */ " + sql.format(t=td)).rowcount
        rep = last_statement(conn)
        other.execute("COMMIT")
        assert n_direct == n_plain
        in_leaf = conn.execute(f"SELECT count(*) FROM {td}_2 WHERE b = 'l'").fetchone()[0]
        assert in_leaf > 0
        assert rep["updates"].endswith(
            f"{in_leaf} rows by core's executor: another transaction holds a lock on "
            "the table that excludes EXCLUSIVE (row locks, writes or VACUUM)"), rep
        _same_trees(conn, tp, td, leaves)
        for leaf in leaves[td]:
            check_table(conn, leaf)
