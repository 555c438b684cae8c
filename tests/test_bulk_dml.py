"""A hinted UPDATE or DELETE made in bulk, against the plain statement.

`/*+ APPEND */ UPDATE` and `/*+ APPEND */ DELETE` keep the rows their plan
finds, sort them by TID and change each old page once (src/load/rewrite.c,
versions.c, oldpages.c); an UPDATE's new versions go to new pages and
their index entries in sorted bulk.  A version left out of an index, or an
old version still reachable, shows only through an index, so after every
statement these tests compare the table with a twin changed by the plain
statement (contents, the command's row count, pgstat's counters) and read
every index in full by a forced index scan against a sequential scan, then
run amcheck (heapallindexed) and pg_visibility, before and after VACUUM.

Shapes are drawn from fixed seeds (key types, column types with NULL
shares, secondary, partial, expression and two-column indexes; tables
vacuumed, frozen or fresh; autocommit, chained, savepoints), as the bulk
updates of upserts are tested (test_update_access_paths).  Beside them:
RETURNING rows, AFTER ROW trigger events, transition tables and foreign
key actions and checks as the plain statement's; what is left to core and
why (a volatile RETURNING or policy, a unique key assigned, BEFORE ROW triggers, HOT-minded tables, SERIALIZABLE;
partitioned tables and inheritance trees: test_bulk_dml_partitioned),
core's errors, a row met twice, rows another transaction changed or locks,
TOAST values (none leaked: the TOAST table after VACUUM is the plain
statement's), and a crash in the middle.
"""

import psycopg
import pytest

from conftest import (connect_as, crash_at_fault, last_statement, set_gucs, sqlstate_of,
                      table_digest, verify_table)
from test_update_access_paths import Shape, check_table

pytestmark = pytest.mark.directpath

STATEMENTS = ["update from", "update where", "delete using", "delete where"]


def dml(shape, statement, t, s):
    """The statement on 't' (alias x), from source 's' where it has one."""
    on = " AND ".join(f"x.{k} = s.{k}" for k in shape.key_cols)
    some = "abs(hashtext(x::text)) % 3 <> 0"
    if statement == "update from":
        sets = ", ".join(f"{c} = s.{c}" for c in shape.cols)
        return f"UPDATE {t} x SET {sets} FROM {s} s WHERE {on}"
    if statement == "update where":
        # every column assigned, half of them to another value
        sets = ", ".join(f"{c} = {c}" if i % 2 else f"{c} = NULL"
                         for i, c in enumerate(shape.cols))
        return f"UPDATE {t} x SET {sets} WHERE {some}"
    if statement == "delete using":
        return f"DELETE FROM {t} x USING {s} s WHERE {on}"
    return f"DELETE FROM {t} x WHERE {some}"


def run_one(conn, shape, statement, t, s, direct):
    sql = dml(shape, statement, t, s)
    if not direct:
        return conn.execute(sql).rowcount
    cur = conn.execute("/*+ APPEND */ " + sql)
    rep = last_statement(conn)
    assert rep["path"] == "direct", (shape, rep)
    assert "in bulk" in rep["updates"] and "by core" not in rep["updates"], (shape, rep)
    return cur.rowcount


def run_steps(conn, shape, statements, t, s, direct):
    """Two statements in the shape's transaction context; their row counts."""
    counts = []

    def one(st):
        counts.append(run_one(conn, shape, st, t, s, direct))

    ctx = shape.context
    if ctx == "autocommit":
        for st in statements:
            one(st)
        return counts
    conn.execute("BEGIN")
    if ctx == "chained":
        for st in statements:
            one(st)
    elif ctx == "savepoint rolled back":
        one(statements[0])
        conn.execute("SAVEPOINT a")
        one(statements[1])
        conn.execute("ROLLBACK TO SAVEPOINT a")
        one(statements[1])
    else:
        conn.execute("SAVEPOINT a")
        one(statements[0])
        conn.execute("RELEASE SAVEPOINT a")
        one(statements[1])
    conn.execute("COMMIT")
    return counts


def pgstat(conn, t):
    conn.execute("SELECT pg_stat_force_next_flush()")
    return conn.execute("SELECT n_tup_upd, n_tup_del, n_tup_hot_upd FROM pg_stat_user_tables "
                        "WHERE relname = %s", (t,)).fetchone()


@pytest.mark.parametrize("seed", range(16))
def test_random_shapes_against_plain(cluster, seed):
    shape = Shape(seed)
    statements = [STATEMENTS[seed % 4], STATEMENTS[(seed // 4 + seed + 1) % 4]]
    tp, td, s = f"bd_p_{seed}", f"bd_d_{seed}", f"bd_s_{seed}"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for t in (tp, td):
            shape.create(conn, t)
        shape.source(conn, s, 1)
        conn.execute(f"ANALYZE {s}")
        plain = run_steps(conn, shape, statements, tp, s, direct=False)
        direct = run_steps(conn, shape, statements, td, s, direct=True)
        where = (shape, statements)
        assert direct == plain, where
        assert table_digest(conn, td) == table_digest(conn, tp), where
        assert pgstat(conn, td)[:2] == pgstat(conn, tp)[:2], where
        for t in (tp, td):
            check_table(conn, t)
        conn.execute(f"VACUUM {td}")
        check_table(conn, td)
        assert table_digest(conn, td) == table_digest(conn, tp), where


def twins(conn, name, ddl, fill, extra=()):
    """A table and its twin, both filled and vacuumed; returns the names."""
    tp, td = f"{name}_p", f"{name}_d"
    for t in (tp, td):
        conn.execute(ddl.format(t=t))
        conn.execute(fill.format(t=t))
        for e in extra:
            conn.execute(e.format(t=t))
        conn.execute(f"VACUUM ANALYZE {t}")
    return tp, td


def both(conn, sql, tp, td):
    """The plain statement on tp, the hinted one on td: their row counts,
    the hinted one's report; the tables must agree."""
    n_plain = conn.execute(sql.format(t=tp)).rowcount
    n_direct = conn.execute("/*+ APPEND */ " + sql.format(t=td)).rowcount
    rep = last_statement(conn)
    assert n_direct == n_plain, (sql, n_direct, n_plain)
    assert table_digest(conn, td) == table_digest(conn, tp), sql
    return rep


BASE = "CREATE TABLE {t} (k int PRIMARY KEY, u int UNIQUE, a int, b text)"
FILL = ("INSERT INTO {t} SELECT g, g + 1000000, g % 100, md5(g::text) "
        "FROM generate_series(1, 20000) g")


def test_report_and_explain(cluster):
    with cluster.conn() as conn:
        tp, td = twins(conn, "bd_r", BASE, FILL, ["CREATE INDEX ON {t} (a)"])
        rep = both(conn, "UPDATE {t} SET a = a + 1, b = 'x' || k WHERE k % 4 = 0", tp, td)
        assert rep["path"] == "direct" and rep["rows_inserted"] == 5000, rep
        plan = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, FORMAT JSON) /*+ APPEND */ "
                            f"DELETE FROM {td} WHERE k % 4 = 1").fetchone()[0][0]["Plan"]
        conn.execute(f"DELETE FROM {tp} WHERE k % 4 = 1")
        assert plan["Updates"] == "5000 rows deleted in bulk", plan
        plan = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, FORMAT JSON) /*+ APPEND */ "
                            f"UPDATE {td} SET b = 'y' WHERE k % 4 = 2").fetchone()[0][0]["Plan"]
        conn.execute(f"UPDATE {tp} SET b = 'y' WHERE k % 4 = 2")
        assert plan["Updates"] == "5000 rows updated in bulk", plan
        assert plan["Pages Written"] > 0, plan
        assert table_digest(conn, td) == table_digest(conn, tp)
        check_table(conn, td)


# statement, the reason last_statement() gives (a part of it), extra DDL
REFUSED = {
    "returning volatile": ("UPDATE {t} SET a = 1 WHERE k < 100 RETURNING k, random() >= 0",
                           "volatile", []),
    "unique key assigned": ("UPDATE {t} SET u = u + 10000000 WHERE k < 100",
                            'assigns column "u" of the unique index', []),
    "primary key assigned": ("UPDATE {t} SET k = k + 100000 WHERE k < 100",
                             'assigns column "k" of the unique index', []),
    "row trigger": ("UPDATE {t} SET a = 1 WHERE k < 100", "BEFORE ROW triggers",
                    ["CREATE FUNCTION {t}_f() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$BEGIN NEW.b := 'trig'; RETURN NEW; END$$",
                     "CREATE TRIGGER {t}_tr BEFORE UPDATE ON {t} FOR EACH ROW "
                     "EXECUTE FUNCTION {t}_f()"]),
    "delete trigger": ("DELETE FROM {t} WHERE k < 100", "BEFORE ROW triggers",
                       ["CREATE TABLE {t}_log (k int)",
                        "CREATE FUNCTION {t}_f() RETURNS trigger LANGUAGE plpgsql AS "
                        "$$BEGIN INSERT INTO {t}_log VALUES (OLD.k); RETURN OLD; END$$",
                        "CREATE TRIGGER {t}_tr BEFORE DELETE ON {t} FOR EACH ROW "
                        "EXECUTE FUNCTION {t}_f()"]),
    "hot-minded table": ("UPDATE {t} SET b = 'hot' WHERE k < 5000", "HOT",
                         ["ALTER TABLE {t} SET (fillfactor = 70)"]),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_left_to_core_with_the_reason(cluster, case):
    """What the bulk path does not take runs as the plain statement does
    (same rows, same count, same table) and says why."""
    sql, why, extra = REFUSED[case]
    n = list(REFUSED).index(case)
    with cluster.conn() as conn:
        tp, td = twins(conn, f"bd_x{n}", BASE, FILL, extra)
        if case.startswith("returning"):
            plain = sorted(conn.execute(sql.format(t=tp)).fetchall())
            direct = sorted(conn.execute("/*+ APPEND */ " + sql.format(t=td)).fetchall())
            assert direct == plain
            rep = last_statement(conn)
        else:
            rep = both(conn, sql, tp, td)
        text = (rep["reason"] or "") + " " + (rep.get("updates") or "")
        assert why in text, (case, rep)
        assert not (rep["path"] == "direct" and "in bulk" in (rep.get("updates") or "")
                    and "by core" not in rep["updates"]), rep
        if case == "delete trigger":
            assert table_digest(conn, f"{td}_log") == table_digest(conn, f"{tp}_log")
        check_table(conn, td)


# statements with RETURNING: streamed (a scan of the target) and sorted
# (a join), other tables' columns, expressions, TOASTed old values
RETURNING = {
    "update streamed": "UPDATE {t} SET a = a + 1, b = 'r' || k WHERE k % 3 = 0 "
                       "RETURNING k, a, b, tableoid <> 0",
    "update from, sorted": "UPDATE {t} x SET a = s.v FROM bd_rt_s s WHERE s.k = x.k "
                           "RETURNING x.k, x.a, s.v * 2, length(x.b)",
    "delete streamed": "DELETE FROM {t} WHERE k % 5 = 0 RETURNING *",
    "delete using, sorted": "DELETE FROM {t} x USING bd_rt_s s WHERE s.k = x.k "
                            "RETURNING x.*, s.v",
    "delete of toasted rows": "DELETE FROM {t} WHERE k % 100 = 0 RETURNING k, md5(b)",
    "update keeping toasted values": "UPDATE {t} SET a = -a WHERE k % 50 = 0 "
                                     "RETURNING k, a, md5(b)",
    "old and new (18)": "UPDATE {t} SET a = a + 10 WHERE k % 7 = 0 "
                        "RETURNING old.a, new.a, k, old.b = new.b",
    "delete old and new (18)": "DELETE FROM {t} WHERE k % 9 = 0 RETURNING old.k, new.k",
    # core's RETURNING reads the deleted version, its xmax this transaction
    "delete returning xmax": "DELETE FROM {t} WHERE k % 11 = 0 "
                             "RETURNING k, xmax = pg_current_xact_id()::xid",
}


@pytest.mark.parametrize("case", list(RETURNING))
def test_returning_as_plain(cluster, case):
    """UPDATE and DELETE ... RETURNING in bulk: the plain statement's rows
    (as a set: bulk rows come in the order they are changed), its count and
    table, every row changed in bulk; then with another session's lock on
    the table, every row through core's node, RETURNING rows included."""
    n = list(RETURNING).index(case)
    with cluster.conn() as conn, cluster.conn() as other:
        if "(18)" in case and conn.info.server_version < 180000:
            pytest.skip("RETURNING old and new are 18's")
        big = ("UPDATE {t} SET b = (SELECT string_agg(md5(k::text || g), '') "
               "FROM generate_series(1, 120) g) WHERE k % 25 = 0")
        tp, td = twins(conn, f"bd_rt{n}", BASE, FILL, [big])
        conn.execute("DROP TABLE IF EXISTS bd_rt_s")
        conn.execute("CREATE TABLE bd_rt_s AS SELECT (g * 7919) % 20000 + 1 AS k, g AS v "
                     "FROM generate_series(1, 4000) g ORDER BY hashint4(g)")
        conn.execute("ANALYZE bd_rt_s")
        sql = RETURNING[case]
        for locked in (False, True):
            if locked:
                tp, td = twins(conn, f"bd_rt{n}l", BASE, FILL, [big])
                other.execute("BEGIN")
                other.execute(f"LOCK TABLE {td} IN ROW SHARE MODE")
            cur = conn.execute(sql.format(t=tp))
            plain, n_plain = sorted(cur.fetchall(), key=repr), cur.rowcount
            cur = conn.execute("/*+ APPEND */ " + sql.format(t=td))
            direct, n_direct = sorted(cur.fetchall(), key=repr), cur.rowcount
            rep = last_statement(conn)
            if locked:
                other.execute("COMMIT")
            assert len(plain) == n_plain > 0 and n_direct == n_plain, (case, n_plain, n_direct)
            assert direct == plain, case
            assert rep["path"] == "direct" and "in bulk" in rep["updates"], rep
            assert ("by core's executor" in rep["updates"]) == locked, rep
            assert table_digest(conn, td) == table_digest(conn, tp), case
            check_table(conn, td)


# AFTER ROW triggers (a WHEN condition, OLD and NEW logged), transition
# tables, and foreign keys on either side: the plain statement's effects
TRIGGERS = {
    "after update": ("UPDATE {t} SET a = a + 1, b = 'x' || k WHERE k % 3 = 0", [
        "CREATE TABLE {t}_log (op text, ok int, oa int, nk int, na int, nb text)",
        "CREATE FUNCTION {t}_f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
        "INSERT INTO {t}_log VALUES (TG_OP, OLD.k, OLD.a, NEW.k, NEW.a, NEW.b); "
        "RETURN NULL; END$$",
        "CREATE TRIGGER {t}_tr AFTER UPDATE ON {t} FOR EACH ROW "
        "WHEN (OLD.a % 2 = 0) EXECUTE FUNCTION {t}_f()"]),
    "after delete": ("DELETE FROM {t} x USING bd_tg_s s WHERE s.k = x.k", [
        "CREATE TABLE {t}_log (op text, ok int, oa int, nk int, na int, nb text)",
        "CREATE FUNCTION {t}_f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
        "INSERT INTO {t}_log VALUES (TG_OP, OLD.k, OLD.a, NULL, NULL, OLD.b); "
        "RETURN NULL; END$$",
        "CREATE TRIGGER {t}_tr AFTER DELETE ON {t} FOR EACH ROW EXECUTE FUNCTION {t}_f()"]),
    # a statement trigger and another event's row trigger: nothing per row
    "other events' triggers": ("DELETE FROM {t} x USING bd_tg_s s WHERE s.k = x.k", [
        "CREATE TABLE {t}_log (op text, ok int, oa int, nk int, na int, nb text)",
        "CREATE FUNCTION {t}_f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
        "INSERT INTO {t}_log VALUES (TG_OP || ' ' || TG_LEVEL, NULL, NULL, NULL, NULL, "
        "(SELECT count(*) FROM {t})::text); RETURN NULL; END$$",
        "CREATE TRIGGER {t}_ti AFTER INSERT OR UPDATE ON {t} FOR EACH ROW EXECUTE FUNCTION {t}_f()",
        "CREATE TRIGGER {t}_ts AFTER DELETE ON {t} FOR EACH STATEMENT EXECUTE FUNCTION {t}_f()"]),
    "transition tables": ("UPDATE {t} x SET a = s.v FROM bd_tg_s s WHERE s.k = x.k", [
        "CREATE TABLE {t}_log (op text, ok int, oa int, nk int, na int, nb text)",
        "CREATE FUNCTION {t}_f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
        "INSERT INTO {t}_log SELECT TG_OP, o.k, o.a, n.k, n.a, n.b "
        "FROM o JOIN n USING (k); RETURN NULL; END$$",
        "CREATE TRIGGER {t}_tr AFTER UPDATE ON {t} REFERENCING OLD TABLE AS o "
        "NEW TABLE AS n FOR EACH STATEMENT EXECUTE FUNCTION {t}_f()"]),
    "referenced, cascade": ("DELETE FROM {t} WHERE k > 19000", [
        "CREATE TABLE {t}_log (r int REFERENCES {t} ON DELETE CASCADE, nb text)",
        "INSERT INTO {t}_log SELECT g, 'c' FROM generate_series(18900, 19100) g"]),
    "referenced, set null": ("DELETE FROM {t} WHERE k % 2 = 0", [
        "CREATE TABLE {t}_log (r int REFERENCES {t} ON DELETE SET NULL, nb text)",
        "INSERT INTO {t}_log SELECT g, 'c' FROM generate_series(1, 20000, 7) g"]),
    "referenced, violated": ("DELETE FROM {t} WHERE k % 2 = 0", [
        "CREATE TABLE {t}_log (r int REFERENCES {t}, nb text)",
        "INSERT INTO {t}_log VALUES (5, 'a'), (19998, 'b')"]),
    "referencing, checked": ("UPDATE {t} SET a = (k % 50) + 1 WHERE k % 4 = 0", [
        "CREATE TABLE {t}_log (id int PRIMARY KEY, nb text)",
        "INSERT INTO {t}_log SELECT g, 'p' FROM generate_series(0, 99) g",
        "ALTER TABLE {t} ADD FOREIGN KEY (a) REFERENCES {t}_log"]),
    "referencing, violated": ("UPDATE {t} SET a = k WHERE k % 4 = 0", [
        "CREATE TABLE {t}_log (id int PRIMARY KEY, nb text)",
        "INSERT INTO {t}_log SELECT g, 'p' FROM generate_series(0, 200) g",
        "ALTER TABLE {t} ADD FOREIGN KEY (a) REFERENCES {t}_log"]),
}


@pytest.mark.parametrize("case", list(TRIGGERS))
def test_after_row_triggers_as_plain(cluster, case):
    """AFTER ROW triggers, transition tables and foreign keys of a bulk
    UPDATE or DELETE: the rows changed in bulk queue their events as core
    does (fired at the statement's end), so the logs, the cascaded rows and
    the errors are the plain statement's; nothing is left after an error."""
    sql, extra = TRIGGERS[case]
    n = list(TRIGGERS).index(case)
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS bd_tg_s")
        conn.execute("CREATE TABLE bd_tg_s AS SELECT (g * 7919) % 20000 + 1 AS k, g AS v "
                     "FROM generate_series(1, 3000) g ORDER BY hashint4(g)")
        conn.execute("ANALYZE bd_tg_s")
        tp, td = twins(conn, f"bd_tg{n}", BASE, FILL, extra)
        before = table_digest(conn, td), table_digest(conn, f"{td}_log")
        errs = []
        for t, hint in ((tp, ""), (td, "/*+ APPEND */ ")):
            try:
                errs.append((conn.execute(hint + sql.format(t=t)).rowcount, None))
            except psycopg.Error as e:
                errs.append((None, tuple((m or "").replace(t, "T") for m in (
                    e.sqlstate, e.diag.message_primary, e.diag.message_detail))))
        rep = last_statement(conn)
        assert errs[1] == errs[0], errs
        if errs[0][1] is None:
            assert errs[0][0] > 0
            assert "in bulk" in rep["updates"] and "by core" not in rep["updates"], rep
            assert table_digest(conn, td) == table_digest(conn, tp), case
            assert table_digest(conn, f"{td}_log") == table_digest(conn, f"{tp}_log"), case
        else:
            assert (table_digest(conn, td), table_digest(conn, f"{td}_log")) == before
        check_table(conn, td)


# statements run by a role that row security applies to, through views
# WITH CHECK OPTION, on a table with a stored generated column
CHECKED = {
    "policies pass": "UPDATE {t} SET a = a % 50 WHERE k < 3000 RETURNING k, a, g",
    "update check fails": "UPDATE {t} SET a = a + 5 WHERE k < 3000",
    "select policy on returning": "UPDATE {t} SET a = 95 WHERE k < 3000 RETURNING k",
    "delete sees its rows": "DELETE FROM {t} WHERE k % 3 = 0 RETURNING k, g",
    "view check passes": "UPDATE {t}_v SET a = a - 1 WHERE k < 3000 AND a > 0",
    "view check fails": "UPDATE {t}_v SET a = a + 1 WHERE k < 3000",
    "generated columns": "UPDATE {t}_v SET b = b || 'x', a = a - 1 WHERE a > 10",
    "volatile policy": "UPDATE {t} SET a = a % 50 WHERE k < 3000",
}


@pytest.mark.parametrize("case", list(CHECKED))
def test_row_security_views_generated_as_plain(cluster, case):
    """Row security (USING in the plan; an UPDATE's WITH CHECK and, with
    RETURNING, SELECT policies on each new version), a view's CHECK OPTION
    and stored generated columns in bulk: the plain statement's rows,
    table and errors (SQLSTATE, message), nothing left after an error; a
    policy calling a volatile function leaves the statement to core."""
    n = list(CHECKED).index(case)
    ddl = ["ALTER TABLE {t} ADD COLUMN g int GENERATED ALWAYS AS (a * 2 + k) STORED",
           "CREATE VIEW {t}_v AS SELECT * FROM {t} WHERE a < 50 WITH CHECK OPTION",
           "ALTER TABLE {t} ENABLE ROW LEVEL SECURITY",
           "CREATE POLICY {t}_s ON {t} FOR SELECT USING (a <> 95)",
           "CREATE POLICY {t}_u ON {t} FOR UPDATE USING (k % 2 = 0) WITH CHECK (a < 99)",
           "CREATE POLICY {t}_d ON {t} FOR DELETE USING (k % 4 = 0)",
           "GRANT SELECT, UPDATE, DELETE ON {t}, {t}_v TO dp_bd_user"]
    if case == "volatile policy":
        ddl.append("CREATE POLICY {t}_r ON {t} FOR UPDATE USING (true) WITH CHECK (random() < 2)")
    with cluster.conn() as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'dp_bd_user'").fetchone():
            conn.execute("CREATE ROLE dp_bd_user LOGIN")
        tp, td = twins(conn, f"bd_ck{n}", BASE, FILL, ddl)
        before = table_digest(conn, td)
        out = []
        with connect_as(cluster, "dp_bd_user") as user:
            for t, hint in ((tp, ""), (td, "/*+ APPEND */ ")):
                try:
                    cur = user.execute(hint + CHECKED[case].format(t=t))
                    out.append((cur.rowcount, sorted(cur.fetchall()) if cur.description else None))
                except psycopg.Error as e:
                    out.append(("error", e.sqlstate, (e.diag.message_primary or "").replace(t, "T")))
            rep = last_statement(user)
        assert out[1] == out[0], (case, out)
        if out[0][0] == "error":
            assert table_digest(conn, td) == before
        elif case == "volatile policy":
            assert "volatile" in rep["reason"] and rep["updates"] is None, rep
            assert table_digest(conn, td) == table_digest(conn, tp), case
        else:
            assert out[0][0] > 0, out
            assert rep["path"] == "direct" and "in bulk" in rep["updates"], rep
            assert "by core" not in rep["updates"], rep
            assert table_digest(conn, td) == table_digest(conn, tp), case
        check_table(conn, td)


def test_serializable_left_to_core(cluster):
    with cluster.conn() as conn:
        tp, td = twins(conn, "bd_ser", BASE, FILL)
        conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        rep = both(conn, "UPDATE {t} SET a = -a WHERE k % 10 = 0", tp, td)
        conn.execute("COMMIT")
        assert rep["path"] == "normal" and "SERIALIZABLE" in rep["reason"], rep


@pytest.mark.parametrize("error", ["check", "not null", "division"])
@pytest.mark.parametrize("statement", ["update", "update from"])
def test_errors_are_cores(cluster, error, statement):
    """A row that fails gives the plain statement's SQLSTATE and message,
    and the table is left as it was."""
    n = ["check", "not null", "division"].index(error) * 2 + (statement == "update from")
    with cluster.conn() as conn:
        tp, td = twins(conn, f"bd_e{n}",
                       "CREATE TABLE {t} (k int PRIMARY KEY, a int CHECK (a >= 0), "
                       "b text NOT NULL)", "INSERT INTO {t} SELECT g, g, 'b' "
                       "FROM generate_series(1, 20000) g")
        conn.execute(f"CREATE TABLE bd_e{n}_s AS SELECT g AS k FROM generate_series(1, 20000, 3) g")
        sets = {"check": "a = CASE WHEN x.k = 7777 THEN -1 ELSE a + 1 END",
                "not null": "b = CASE WHEN x.k = 7777 THEN NULL ELSE 'c' END",
                "division": "a = abs(1 / (x.k - 7777))"}[error]
        sql = (f"UPDATE {{t}} x SET {sets}" + (f" FROM bd_e{n}_s s WHERE s.k = x.k"
                                               if statement == "update from" else ""))
        before = table_digest(conn, td)
        errs = []
        for t, hint in ((tp, ""), (td, "/*+ APPEND */ ")):
            try:
                conn.execute(hint + sql.format(t=t))
                errs.append(None)
            except psycopg.Error as e:
                errs.append((e.sqlstate, e.diag.message_primary.replace(td, tp)))
        assert errs[0] is not None and errs[1] == errs[0], errs
        assert table_digest(conn, td) == before
        check_table(conn, td)


def test_row_met_twice_changes_once(cluster):
    """UPDATE ... FROM whose join meets a target row twice changes it once
    (core skips the second: TM_SelfModified), DELETE ... USING likewise."""
    with cluster.conn() as conn:
        tp, td = twins(conn, "bd_tw", BASE, FILL)
        conn.execute("CREATE TABLE bd_tw_s AS SELECT g % 5000 + 1 AS k, g AS v "
                     "FROM generate_series(1, 15000) g")
        conn.execute("ANALYZE bd_tw_s")
        n_plain = conn.execute(f"UPDATE {tp} x SET a = -1 FROM bd_tw_s s WHERE s.k = x.k").rowcount
        n_direct = conn.execute("/*+ APPEND */ UPDATE " + td +
                                " x SET a = -1 FROM bd_tw_s s WHERE s.k = x.k").rowcount
        assert n_direct == n_plain == 5000
        assert "5000 rows updated in bulk" in last_statement(conn)["updates"]
        assert table_digest(conn, td) == table_digest(conn, tp)
        rep = both(conn, "DELETE FROM {t} x USING bd_tw_s s WHERE s.k = x.k", tp, td)
        assert "5000 rows deleted in bulk" in rep["updates"], rep
        check_table(conn, td)


# plan settings: a scan of the target gives the rows in TID order (changed
# as they come); an index scan in the table's order streams too, one out of
# it streams until its first step back and sorts the rest; a join or a
# union does not stream (sorted first)
PLANS = {
    "seq scan": [],
    "bitmap scan": ["enable_seqscan = off", "enable_indexscan = off"],
    "index scan": ["enable_seqscan = off", "enable_bitmapscan = off"],
    "index scan in table order": ["enable_seqscan = off", "enable_bitmapscan = off"],
    "nested loop, source in random order": ["enable_hashjoin = off", "enable_mergejoin = off",
                                            "enable_seqscan = off", "enable_bitmapscan = off"],
    "a union of the table and the source": [],
}


@pytest.mark.parametrize("plan", list(PLANS))
@pytest.mark.parametrize("kind", ["update", "delete"])
def test_rows_in_any_order(cluster, plan, kind):
    """Rows a scan of the target gives in TID order are changed as they
    arrive, others sorted first; a target row the plan meets twice is
    changed once; every way gives the plain statement's table."""
    n = list(PLANS).index(plan) * 2 + (kind == "delete")
    with cluster.conn() as conn:
        tp, td = twins(conn, f"bd_o{n}", BASE, FILL, ["CREATE INDEX ON {t} (a)"])
        # a source with repeated keys, in random order
        conn.execute(f"CREATE TABLE bd_o{n}_s AS SELECT (g * 7919) % 6000 + 1 AS k "
                     f"FROM generate_series(1, 9000) g ORDER BY hashint4(g)")
        conn.execute(f"ANALYZE bd_o{n}_s")
        if plan == "a union of the table and the source":
            # a UNION ALL: the table's rows in TID order, then the source's
            src = (f"(SELECT k FROM {{t}} WHERE k % 7 = 0 UNION ALL "
                   f"SELECT k FROM bd_o{n}_s) s")
        elif plan.startswith("nested loop"):
            src = f"bd_o{n}_s s"
        else:
            src = None
        where = " WHERE x.k < 9000" if plan == "index scan in table order" else " WHERE x.a < 30"
        if kind == "update":
            sql = ("UPDATE {t} x SET b = 'n' || x.k, a = x.a + 1" +
                   (f" FROM {src} WHERE s.k = x.k" if src else where))
        else:
            sql = ("DELETE FROM {t} x" +
                   (f" USING {src} WHERE s.k = x.k" if src else where))
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute("BEGIN")
        for g in PLANS[plan]:
            conn.execute(f"SET LOCAL {g}")
        conn.execute("SET LOCAL client_min_messages = debug1")
        rep = both(conn, sql, tp, td)
        conn.execute("COMMIT")
        assert "in bulk" in rep["updates"], rep
        # the index on a (k % 100) steps back at once; the key's does not
        stepped = any("stopped arriving in TID order" in m for m in notices)
        assert stepped == (plan == "index scan"), (plan, notices)
        check_table(conn, td)


# a statement that scans the table (its rows stream), and one whose rows
# come from a hash join (sorted first: a DELETE's by TID alone)
CHANGED = {
    "update": "UPDATE {t} SET a = a + 1",
    "update from": "UPDATE {t} x SET a = x.a + 1 FROM bd_rr_s s WHERE s.k = x.k",
    "delete": "DELETE FROM {t}",
    "delete using": "DELETE FROM {t} x USING bd_rr_s s WHERE s.k = x.k",
}


@pytest.mark.parametrize("statement", list(CHANGED))
def test_row_changed_by_another_transaction(cluster, statement):
    """REPEATABLE READ: a row another transaction updated after the
    transaction's snapshot goes to core (streamed, sorted, or by a DELETE's
    TID sort), which raises core's serialization failure, as the plain
    statement does; the table is left as it was."""
    n = list(CHANGED).index(statement)
    with cluster.conn() as a, cluster.conn() as b:
        tp, td = twins(a, f"bd_rr{n}", BASE, FILL)
        a.execute("CREATE TABLE IF NOT EXISTS bd_rr_s AS SELECT g AS k "
                  "FROM generate_series(1, 20000, 2) g")
        b.execute("ANALYZE bd_rr_s")
        results = []
        for t in (tp, td):
            hint = "/*+ APPEND */ " if t == td else ""
            a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            a.execute(f"SELECT count(*) FROM {t}")
            b.execute(f"UPDATE {t} SET a = 999 WHERE k = 12345")
            results.append(sqlstate_of(a, hint + CHANGED[statement].format(t=t)))
            a.execute("ROLLBACK")
        assert results == ["40001", "40001"], results
        assert table_digest(a, td) == table_digest(a, tp)


def test_rows_locked_by_another_session(cluster):
    """Another session's row locks keep the bulk path off (it cannot take
    EXCLUSIVE): every row goes to core, after the lock is released."""
    with cluster.conn() as a, cluster.conn() as b:
        tp, td = twins(a, "bd_lk", BASE, FILL)
        b.execute("BEGIN")
        b.execute(f"SELECT * FROM {td} WHERE k = 5 FOR SHARE")
        b.execute(f"SELECT * FROM {tp} WHERE k = 5 FOR SHARE")
        n_plain = a.execute(f"DELETE FROM {tp} WHERE k BETWEEN 100 AND 200").rowcount
        n_direct = a.execute(f"/*+ APPEND */ DELETE FROM {td} WHERE k BETWEEN 100 AND 200").rowcount
        rep = last_statement(a)
        b.execute("COMMIT")
        assert n_direct == n_plain == 101
        assert "by core's executor" in rep["updates"], rep
        assert table_digest(a, td) == table_digest(a, tp)


def toast_live(conn, t):
    toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = %s",
                         (t,)).fetchone()[0]
    return conn.execute(f"SELECT count(*) FROM {toast}").fetchone()[0]


@pytest.mark.parametrize("statement", [
    "UPDATE {t} SET b = repeat(md5(k::text || 'n'), 200) WHERE k % 3 = 0",
    "UPDATE {t} SET a = a + 1 WHERE k % 3 = 0",
    "DELETE FROM {t} WHERE k % 3 = 0",
    "INSERT INTO {t} SELECT g, g + 1000000, 0, repeat(md5(g::text || 'u'), 200) "
    "FROM generate_series(1, 600, 2) g ON CONFLICT (k) DO UPDATE SET b = excluded.b",
])
def test_toast_values_not_leaked(cluster, statement):
    """TOAST values the new version shares stay, the others go, as with
    core's heap_update and heap_delete: after VACUUM the TOAST table holds
    what the plain statement's does."""
    n = abs(hash(statement)) % 100000
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        tp, td = twins(conn, f"bd_t{n}", BASE,
                       "INSERT INTO {t} SELECT g, g + 1000000, 0, "
                       "repeat(md5(g::text), 200) FROM generate_series(1, 600) g")
        rep = both(conn, statement, tp, td)
        assert "in bulk" in (rep.get("updates") or ""), rep
        for t in (tp, td):
            conn.execute(f"VACUUM {t}")
        assert toast_live(conn, td) == toast_live(conn, tp)
        verify_table(conn, td)


def make_crash_table(conn, t):
    conn.execute(BASE.format(t=t))
    conn.execute(f"CREATE INDEX ON {t} (a)")
    conn.execute(FILL.format(t=t))
    conn.execute(f"VACUUM {t}")


@pytest.mark.parametrize("how", ["kill backend", "immediate stop"])
@pytest.mark.parametrize("statement", ["UPDATE {t} SET a = a + 1, b = 'n'",
                                       "DELETE FROM {t} WHERE k % 2 = 0"])
def test_crash_in_the_middle(make_cluster, statement, how):
    """Killed with some old pages changed and logged: after recovery the
    table is as before the statement, and sound; the statement then runs."""
    c = make_cluster(name="bd_crash_" + how.split()[0] + statement.split()[0])
    with c.conn() as conn:
        make_crash_table(conn, "bd_c")
        conn.execute("CHECKPOINT")
        before = table_digest(conn, "bd_c")
    crash_at_fault(c, "/*+ APPEND */ " + statement.format(t="bd_c"), "versions_page", 20, how)
    with c.conn() as conn:
        assert table_digest(conn, "bd_c") == before
        verify_table(conn, "bd_c")
        conn.execute("/*+ APPEND */ " + statement.format(t="bd_c"))
        assert "in bulk" in last_statement(conn)["updates"]
        verify_table(conn, "bd_c")


def test_standby_replays_bulk_update_and_delete(make_cluster, tmp_path):
    """The old pages' images, the VM bits cleared and the new versions'
    pages replay: the standby's rows and its index-only scans (which trust
    the VM) match the primary's."""
    primary = make_cluster(name="bd_primary")
    standby = primary.make_standby(tmp_path)
    q = "SELECT count(*), sum(k) FROM bd_sb WHERE k > 0"
    with primary.conn() as conn:
        make_crash_table(conn, "bd_sb")
        conn.execute("CHECKPOINT")
        conn.execute("/*+ APPEND */ UPDATE bd_sb SET a = a + 1, b = 'n' WHERE k % 3 = 0")
        conn.execute("/*+ APPEND */ DELETE FROM bd_sb WHERE k % 5 = 0")
        assert "in bulk" in last_statement(conn)["updates"]
        digest = table_digest(conn, "bd_sb")
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        rows = conn.execute(q).fetchone()
        primary.wait_replay(standby)
    with standby.conn() as s:
        assert table_digest(s, "bd_sb") == digest
        s.execute("SET enable_seqscan = off")
        s.execute("SET enable_bitmapscan = off")
        plan = "\n".join(r[0] for r in s.execute("EXPLAIN " + q).fetchall())
        assert "Index Only Scan" in plan, plan
        assert s.execute(q).fetchone() == rows
        verify_table(s, "bd_sb")


def test_mode_always_takes_large_statements(cluster):
    """Under directpath.mode = always an UPDATE or DELETE the planner
    expects to change at least directpath.bulk_dml_min_rows rows is made
    in bulk; a smaller one, a NOAPPEND one and every one with the setting
    at -1 stay core's (and publish no report)."""
    with cluster.conn() as conn:
        tp, td = twins(conn, "bd_al", BASE, FILL)
        set_gucs(conn, {"directpath.mode": "always", "directpath.bulk_dml_min_rows": "1000"})
        rep = both(conn, "UPDATE {t} SET a = a + 1 WHERE k <= 5000", tp, td)
        assert rep["path"] == "direct" and "5000 rows updated in bulk" in rep["updates"], rep
        rep = both(conn, "DELETE FROM {t} WHERE k > 15000", tp, td)
        assert "5000 rows deleted in bulk" in rep["updates"], rep
        for sql in ("UPDATE {t} SET a = 0 WHERE k <= 10",
                    "/*+ NOAPPEND */ UPDATE {t} SET a = 1 WHERE k <= 5000"):
            n_plain = conn.execute(sql.format(t=tp)).rowcount
            n_direct = conn.execute(sql.format(t=td)).rowcount
            assert n_direct == n_plain
            assert last_statement(conn) == rep, sql
        set_gucs(conn, {"directpath.bulk_dml_min_rows": "-1"})
        conn.execute(f"DELETE FROM {td} WHERE k <= 5000")
        conn.execute(f"DELETE FROM {tp} WHERE k <= 5000")
        assert last_statement(conn) == rep
        assert table_digest(conn, td) == table_digest(conn, tp)
        check_table(conn, td)
