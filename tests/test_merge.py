"""MERGE on the direct path: its WHEN NOT MATCHED inserts are appended, its
matched rows are core's, after the load (src/statement/exec.c,
src/load/upsert.c).

Differential: each MERGE runs plain on one copy of the target and hinted on
another; the tables, the command's row count, EXPLAIN ANALYZE's inserted /
updated / deleted counts, and what AFTER triggers and transition tables saw
must agree.  Errors: a target row matched twice fails both with 21000.  The
MERGEs the direct path does not take say why (one without an INSERT
action: test_upsert.py).
"""

import pytest

from conftest import SMALL_BATCHES, last_statement, run_both, set_gucs, sqlstate_of

pytestmark = pytest.mark.directpath

SOURCE = ("SELECT (abs(hashint8(g)) % 12000)::int AS id, 'src' || g AS v, g % 7 AS k "
          "FROM generate_series(1, 8000) g")


def make_tables(conn, n, partitioned=False):
    conn.execute(f"CREATE TABLE mg_src_{n} AS SELECT DISTINCT ON (id) * FROM ({SOURCE}) s "
                 f"ORDER BY id, v")
    for t in (f"mg_p_{n}", f"mg_d_{n}"):
        if partitioned:
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text, k int, "
                         f"n int DEFAULT 0) PARTITION BY RANGE (id)")
            conn.execute(f"CREATE TABLE {t}_a PARTITION OF {t} FOR VALUES FROM (0) TO (5000)")
            conn.execute(f"CREATE TABLE {t}_b PARTITION OF {t} DEFAULT")
        else:
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text, k int, n int DEFAULT 0)")
        conn.execute(f"CREATE INDEX ON {t} (k)")
        conn.execute(f"INSERT INTO {t} SELECT g * 2, 'old', g % 5 FROM generate_series(1, 4000) g")
    return f"mg_src_{n}", f"mg_p_{n}", f"mg_d_{n}"


ACTIONS = {
    "update and insert": "WHEN MATCHED THEN UPDATE SET v = s.v, n = t.n + 1 "
                         "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, s.k)",
    "conditions, do nothing": "WHEN MATCHED AND s.k = 0 THEN DO NOTHING "
                                      "WHEN MATCHED AND s.k < 3 THEN UPDATE SET v = 'u' "
                                      "WHEN NOT MATCHED AND s.k = 1 THEN DO NOTHING "
                                      "WHEN NOT MATCHED AND s.k = 2 THEN INSERT (id) VALUES (s.id) "
                                      "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, s.k, 9)",
    "insert only": "WHEN NOT MATCHED THEN INSERT VALUES (s.id, upper(s.v), s.k)",
}


def tuples_line(conn, sql):
    plan = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql).fetchall()
    return [line.strip() for (line,) in plan if "Tuples:" in line]


@pytest.mark.parametrize("case", list(ACTIONS))
@pytest.mark.parametrize("shape", ["table", "partitioned, small batches"])
def test_differential(cluster, case, shape):
    n = 10 * list(ACTIONS).index(case) + (shape != "table")
    with cluster.conn() as conn:
        src, tp, td = make_tables(conn, n, partitioned=shape != "table")
        set_gucs(conn, SMALL_BATCHES if shape != "table" else {"directpath.min_bytes": "0"})
        stmt = f"MERGE INTO {{t}} t USING {src} s ON t.id = s.id {ACTIONS[case]}"
        out = run_both(conn, stmt, tp, td)
        assert out["report"]["path"] == "direct", out["report"]
        assert out["report"]["frozen"] is False
        assert out["direct"] == out["plain"]
        assert out["report"]["rows_inserted"] > 0
        # EXPLAIN ANALYZE counts alike (in a transaction rolled back)
        lines = {}
        for t, hint in ((tp, ""), (td, "/*+ APPEND */ ")):
            conn.execute("BEGIN")
            lines[t] = tuples_line(conn, hint + stmt.format(t=t))
            conn.execute("ROLLBACK")
        assert lines[tp] == lines[td] and lines[tp], lines
        for t in (tp, td):
            conn.execute(f"SELECT bt_index_parent_check(i.indexrelid, true, true) FROM pg_index i "
                         f"JOIN pg_inherits h ON h.inhrelid = i.indrelid WHERE h.inhparent = "
                         f"'{t}'::regclass UNION ALL SELECT bt_index_parent_check(indexrelid, "
                         f"true, true) FROM pg_index WHERE indrelid = '{t}'::regclass "
                         f"AND (SELECT relkind FROM pg_class WHERE oid = indexrelid) = 'i'"
                         ).fetchall()


def test_triggers_and_transition_tables(cluster):
    with cluster.conn() as conn:
        src, tp, td = make_tables(conn, 90)
        conn.execute("CREATE TABLE mg_seen (tg text, op text, id int, n bigint)")
        conn.execute("""CREATE FUNCTION mg_row() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO mg_seen VALUES (TG_TABLE_NAME, TG_OP,
                  CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END, NULL);
            RETURN NULL; END $$""")
        conn.execute("""CREATE FUNCTION mg_ins() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO mg_seen SELECT TG_TABLE_NAME, 'S' || TG_OP, NULL, count(*)
            FROM newrows; RETURN NULL; END $$""")
        conn.execute("""CREATE FUNCTION mg_upd() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO mg_seen SELECT TG_TABLE_NAME, 'S' || TG_OP, NULL, count(*)
            FROM oldrows; RETURN NULL; END $$""")
        for t in (tp, td):
            conn.execute(f"CREATE TRIGGER r AFTER INSERT OR UPDATE OR DELETE ON {t} "
                         f"FOR EACH ROW EXECUTE FUNCTION mg_row()")
            conn.execute(f"CREATE TRIGGER si AFTER INSERT ON {t} REFERENCING NEW TABLE AS "
                         f"newrows FOR EACH STATEMENT EXECUTE FUNCTION mg_ins()")
            conn.execute(f"CREATE TRIGGER su AFTER UPDATE ON {t} REFERENCING OLD TABLE AS "
                         f"oldrows FOR EACH STATEMENT EXECUTE FUNCTION mg_upd()")
        set_gucs(conn, SMALL_BATCHES)
        out = run_both(conn, f"MERGE INTO {{t}} t USING {src} s ON t.id = s.id "
                             f"WHEN MATCHED AND s.k = 0 THEN DO NOTHING "
                             f"WHEN MATCHED THEN UPDATE SET v = s.v "
                             f"WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, s.k)", tp, td)
        assert out["report"]["path"] == "direct", out["report"]
        assert out["direct"] == out["plain"]
        seen = {t: conn.execute("SELECT op, id, n FROM mg_seen WHERE tg = %s ORDER BY 1, 2, 3",
                                (t,)).fetchall() for t in (tp, td)}
        assert seen[tp] == seen[td]
        assert {op for op, _, _ in seen[tp]} == {"INSERT", "UPDATE", "SINSERT", "SUPDATE"}


def test_target_row_matched_twice(cluster):
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for t in ("mg_tw_p", "mg_tw_d"):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
            conn.execute(f"INSERT INTO {t} VALUES (1, 'old')")
        for t, hint in (("mg_tw_p", ""), ("mg_tw_d", "/*+ APPEND */ ")):
            code = sqlstate_of(conn, f"{hint}MERGE INTO {t} t USING (SELECT g % 3000 AS id "
                                     f"FROM generate_series(1, 6000) g) s ON t.id = s.id "
                                     f"WHEN MATCHED THEN UPDATE SET v = 'u' "
                                     f"WHEN NOT MATCHED THEN DO NOTHING")
            assert code == "21000", hint
            assert conn.execute(f"SELECT v FROM {t}").fetchall() == [("old",)]


REFUSED = {
    "BEFORE UPDATE trigger": ("WHEN MATCHED THEN UPDATE SET v = s.v "
                              "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
                              "BEFORE ROW UPDATE trigger"),
    # a key the update or delete frees could be taken by a row inserted
    # before it on the direct path, after it in core's order
    "DELETE with a unique index": ("WHEN MATCHED THEN DELETE "
                                   "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
                                   "deletes rows of"),
    "UPDATE of a unique column": ("WHEN MATCHED THEN UPDATE SET id = s.id + 100000 "
                                  "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
                                  "assigns column \"id\" of the unique index"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_say_why(cluster, case):
    actions, why = REFUSED[case]
    t = f"mg_ref_{list(REFUSED).index(case)}"
    with cluster.conn() as conn:
        conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 3000) g")
        if "trigger" in case:
            conn.execute("CREATE FUNCTION mg_noop() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$ BEGIN RETURN NEW; END $$")
            conn.execute(f"CREATE TRIGGER b BEFORE UPDATE ON {t} FOR EACH ROW "
                         f"EXECUTE FUNCTION mg_noop()")
        cur = conn.execute(f"/*+ APPEND */ MERGE INTO {t} t USING (SELECT g AS id, 'new' AS v "
                           f"FROM generate_series(1, 6000) g) s ON t.id = s.id {actions}")
        st = last_statement(conn)
        assert st["path"] == "normal" and why in st["reason"], st
        assert cur.rowcount >= 3000


def test_merge_returning_is_refused(cluster):
    with cluster.conn() as conn:
        if conn.info.server_version < 170000:
            pytest.skip("MERGE ... RETURNING is PostgreSQL 17+")
        conn.execute("CREATE TABLE mg_ret (id int PRIMARY KEY, v text)")
        cur = conn.execute("/*+ APPEND */ MERGE INTO mg_ret t USING (SELECT g AS id FROM "
                           "generate_series(1, 5000) g) s ON t.id = s.id WHEN NOT MATCHED "
                           "THEN INSERT VALUES (s.id, 'n') RETURNING t.id")
        assert len(cur.fetchall()) == 5000
        st = last_statement(conn)
        assert st["path"] == "normal" and "RETURNING" in st["reason"], st


def test_refused_delete_merge_takes_no_strong_lock(cluster):
    """A MERGE with a DELETE action into a table with a unique index is
    refused at plan time; it does not take the load's lock at parse time
    either, so other writers go on while its transaction is open."""
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE mg_lk (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO mg_lk SELECT g, 'old' FROM generate_series(1, 3000) g")
    with cluster.conn(autocommit=False) as a, cluster.conn() as b:
        a.execute("/*+ APPEND */ MERGE INTO mg_lk t USING (SELECT g AS id FROM "
                  "generate_series(1, 6000) g) s ON t.id = s.id WHEN MATCHED AND s.id % 2 = 0 "
                  "THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'new')")
        assert "deletes rows of" in last_statement(a)["reason"]
        b.execute("SET lock_timeout = '2s'")
        b.execute("INSERT INTO mg_lk VALUES (100000, 'other')")
        a.commit()
        assert b.execute("SELECT count(*) FROM mg_lk").fetchone()[0] == 3000 - 1500 + 3000 + 1


LEAF_RULES = {
    "a unique index of its own": ("CREATE UNIQUE INDEX ON {t}_2 (c)",
                                  "assigns column \"c\" of the unique index"),
    "a BEFORE UPDATE trigger of its own": (
        "CREATE TRIGGER b BEFORE UPDATE ON {t}_2 FOR EACH ROW EXECUTE FUNCTION mg_leaf_noop()",
        "has a BEFORE ROW UPDATE trigger"),
}


@pytest.mark.parametrize("case", list(LEAF_RULES))
def test_rules_hold_for_every_leaf(cluster, case):
    """A MERGE into a partitioned table is judged by every leaf, not only the
    plan's first result relation.  Here the second leaf (its columns in
    another order) has a unique index of its own on the column the update
    assigns, or a BEFORE UPDATE trigger: the statement, large enough for the
    direct path, is refused with the reason, and does what plain does.  With
    the unique index, core updates c = 5 to 6 before it inserts a new c = 5,
    which succeeds; inserting first would fail with 23505."""
    ddl, why = LEAF_RULES[case]
    n = list(LEAF_RULES).index(case)
    with cluster.conn() as conn:
        conn.execute("CREATE OR REPLACE FUNCTION mg_leaf_noop() RETURNS trigger "
                     "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$")
        conn.execute(f"CREATE TABLE mg_lr_src_{n} (k int, id int, c int)")
        conn.execute(f"INSERT INTO mg_lr_src_{n} VALUES (2, 1, 6), (2, 2, 5)")
        conn.execute(f"INSERT INTO mg_lr_src_{n} SELECT 1, g, g FROM generate_series(3, 3000) g")
        for t in (f"mg_lr_p_{n}", f"mg_lr_d_{n}"):
            conn.execute(f"CREATE TABLE {t} (k int, id int, c int) PARTITION BY LIST (k)")
            conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES IN (1)")
            conn.execute(f"CREATE TABLE {t}_2 (c int, id int, k int)")
            conn.execute(f"ALTER TABLE {t} ATTACH PARTITION {t}_2 FOR VALUES IN (2)")
            conn.execute(ddl.format(t=t))
            conn.execute(f"INSERT INTO {t} VALUES (2, 1, 5)")
        stmt = (f"MERGE INTO {{t}} p USING (SELECT * FROM mg_lr_src_{n} ORDER BY id) s "
                f"ON p.k = s.k AND p.id = s.id WHEN MATCHED THEN UPDATE SET c = s.c "
                f"WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.id, s.c)")
        conn.execute("SET enable_hashjoin = off")
        conn.execute("SET enable_mergejoin = off")
        out = run_both(conn, stmt, f"mg_lr_p_{n}", f"mg_lr_d_{n}")
        st = out.pop("report")
        assert out["plain"] == out["direct"], out
        assert out["plain"]["rowcount"] == 3000
        assert st["path"] == "normal" and why in st["reason"], st
