"""INSERT ... ON CONFLICT DO UPDATE on the direct path (src/load/upsert.c).

New keys take the direct path; rows whose key is in the table are updated
by core's own executor after the inserted rows are written.  Differential:
each statement runs plain on one copy of the target and hinted on another;
the tables, the row count, RETURNING rows (as sets: the updated rows' come
after the inserted rows' on the direct path), what AFTER triggers and
transition tables saw, and the indexes (amcheck) must agree.  Errors: a key
twice in the statement fails both paths with 21000, whether the first row
inserted or updated it; a WHERE clause that keeps the first from updating
lets the second update, on both.  Statements the direct path does not take
say why.  (REPEATABLE READ: test_upsert.py, for both actions.)
"""

import psycopg
import pytest

from conftest import (SMALL_BATCHES, last_statement, run_both, set_gucs, sqlstate_of,
                      table_digest)

pytestmark = pytest.mark.directpath

COLS = "(id bigint, email text, grp int, flag bool, ts timestamptz, note text)"


def make_stage(conn, name, n, seed):
    """n rows, unique in id, in lower(email) where not NULL, and in grp
    among rows with flag (so that each arbiter below sees each key once);
    a third of them have keys the targets hold already."""
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"""CREATE TABLE {name} AS
        SELECT id, CASE WHEN id % 17 = 0 THEN NULL
                        WHEN id % 2 = 0 THEN 'U' || id || '@X' ELSE 'u' || id || '@x' END AS email,
               CASE WHEN id % 11 = 0 THEN NULL ELSE id END::int AS grp,
               id % 3 <> 1 AS flag,
               timestamptz '2026-01-01' + (hashint8(id + {seed}) % 1000) * interval '1 s' AS ts,
               repeat('n', (hashint8(id) % 40)::int & 31) AS note
        FROM (SELECT DISTINCT (abs(hashint8(g + {seed})) % ({n} * 3))::bigint AS id
              FROM generate_series(1, {n}) g) k
        ORDER BY hashint8(id + {seed})""")


def make_target(conn, t, stage, arbiter_ddl, partitioned=False):
    if partitioned:
        conn.execute(f"CREATE TABLE {t} {COLS} PARTITION BY HASH (id)")
        for i in range(3):
            conn.execute(f"CREATE TABLE {t}_{i} PARTITION OF {t} "
                         f"FOR VALUES WITH (MODULUS 3, REMAINDER {i})")
    else:
        conn.execute(f"CREATE TABLE {t} {COLS}")
    conn.execute(arbiter_ddl.format(t=t))
    conn.execute(f"CREATE INDEX ON {t} (ts)")
    conn.execute(f"CREATE INDEX ON {t} (note)")
    conn.execute(f"INSERT INTO {t} SELECT id, email, grp, flag, "
                 f"ts - interval '1 day' * (id % 2), 'old' FROM {stage} WHERE id % 3 = 0")


def check_indexes(conn, tables):
    for t in tables:
        for (ix,) in conn.execute(
                "SELECT c.oid::regclass::text FROM pg_inherits i RIGHT JOIN pg_class r "
                "ON r.oid = i.inhrelid JOIN pg_index x ON x.indrelid = r.oid "
                "JOIN pg_class c ON c.oid = x.indexrelid "
                "WHERE (r.oid = %s::regclass OR i.inhparent = %s::regclass) "
                "AND c.relkind = 'i'", (t, t)).fetchall():
            conn.execute("SELECT bt_index_parent_check(%s::regclass, true, true)", (ix,))


PK = "ALTER TABLE {t} ADD PRIMARY KEY (id)"
# case: (arbiter DDL, the statement's ON CONFLICT tail, partitioned)
CASES = {
    "primary key": (PK, "ON CONFLICT (id) DO UPDATE SET note = excluded.note, "
                        "ts = excluded.ts", False),
    "where": (PK, "ON CONFLICT (id) DO UPDATE SET note = x.note || '+' || excluded.note "
                  "WHERE x.ts < excluded.ts", False),
    "returning": (PK, "ON CONFLICT ON CONSTRAINT {t}_pkey DO UPDATE SET grp = excluded.grp, note = 'r' "
                      "RETURNING id, grp, note, xmax = 0 AS inserted", False),
    "expression": ("CREATE UNIQUE INDEX ON {t} (lower(email))",
                   "ON CONFLICT (lower(email)) DO UPDATE SET note = 'e' || excluded.id", False),
    "partial": ("CREATE UNIQUE INDEX ON {t} (grp) WHERE flag",
                "ON CONFLICT (grp) WHERE flag DO UPDATE SET note = 'p', ts = excluded.ts", False),
    "partitioned": (PK, "ON CONFLICT (id) DO UPDATE SET note = excluded.note "
                        "WHERE x.flag RETURNING id, note", True),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("batches", ["one batch", "small batches"])
def test_differential(cluster, case, batches):
    n = 500 + 2 * list(CASES).index(case) + (batches == "small batches")
    stage = f"uu_stage_{n}"
    ddl, tail, partitioned = CASES[case]
    with cluster.conn() as conn:
        make_stage(conn, stage, 9000, n)
        tp, td = f"uu_p_{n}", f"uu_d_{n}"
        for t in (tp, td):
            make_target(conn, t, stage, ddl, partitioned)
        set_gucs(conn, SMALL_BATCHES if batches == "small batches"
                 else {"directpath.min_bytes": "0"})
        stmt = f"INSERT INTO {{t}} AS x SELECT * FROM {stage} " + tail
        out = run_both(conn, stmt, tp, td)
        assert out["report"]["path"] == "direct", out["report"]
        assert out["report"]["frozen"] is False
        assert out["direct"] == out["plain"]
        updated = conn.execute(f"SELECT count(*) FROM {td} WHERE note <> 'old' AND id % 3 = 0"
                               ).fetchone()[0]
        assert 0 < updated and out["plain"]["rowcount"] > updated
        check_indexes(conn, (tp, td))
        # again: now every key is in the table, every row is an update
        out = run_both(conn, stmt, tp, td)
        assert out["direct"] == out["plain"]
        check_indexes(conn, (tp, td))


# a key twice in the statement: (source rows, expected SQLSTATE or None)
TWICE = {
    "new key, then again": ("VALUES (1001, 'a'), (5, 'b'), (1001, 'c')", "21000"),
    "key in the table, then again": ("VALUES (7, 'a'), (1002, 'b'), (7, 'c')", "21000"),
    "where false first, then true": ("VALUES (8, 'skip'), (1003, 'b'), (8, 'c')", None),
}


@pytest.mark.parametrize("case", list(TWICE))
def test_key_twice_in_the_statement(cluster, case):
    rows, code = TWICE[case]
    i = list(TWICE).index(case)
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        digests = []
        for hint in ("", "/*+ APPEND */ "):
            t = f"uu_tw_{i}_{'d' if hint else 'p'}"
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
            conn.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 1000) g")
            # enough rows for a page of their own, the repeated key last
            sql = (f"{hint}INSERT INTO {t} AS x SELECT * FROM (SELECT g, 'fill' FROM "
                   f"generate_series(2000, 4000) g UNION ALL SELECT * FROM ({rows}) v) s "
                   f"ON CONFLICT (id) DO UPDATE SET v = excluded.v "
                   f"WHERE excluded.v <> 'skip'")
            assert sqlstate_of(conn, sql) == code, hint
            if hint and code is None:
                assert last_statement(conn)["path"] == "direct"
            digests.append(table_digest(conn, t))
        assert digests[0] == digests[1]


def test_triggers_and_transition_tables(cluster):
    with cluster.conn() as conn:
        make_stage(conn, "uu_tr_stage", 4000, 7)
        conn.execute("CREATE TABLE uu_seen (tg text, op text, id bigint, n bigint)")
        conn.execute("""CREATE FUNCTION uu_row() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO uu_seen VALUES (TG_TABLE_NAME, TG_OP, NEW.id, NULL);
            RETURN NULL; END $$""")
        conn.execute("""CREATE FUNCTION uu_ins() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO uu_seen SELECT TG_TABLE_NAME, 'S' || TG_OP, NULL, count(*)
            FROM newrows; RETURN NULL; END $$""")
        conn.execute("""CREATE FUNCTION uu_upd() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO uu_seen SELECT TG_TABLE_NAME, 'S' || TG_OP, sum(o.id), count(*)
            FROM oldrows o JOIN newrows n USING (id); RETURN NULL; END $$""")
        for t in ("uu_tr_p", "uu_tr_d"):
            make_target(conn, t, "uu_tr_stage", PK)
            conn.execute(f"CREATE TRIGGER r AFTER INSERT OR UPDATE ON {t} FOR EACH ROW "
                         f"EXECUTE FUNCTION uu_row()")
            conn.execute(f"CREATE TRIGGER si AFTER INSERT ON {t} REFERENCING NEW TABLE AS "
                         f"newrows FOR EACH STATEMENT EXECUTE FUNCTION uu_ins()")
            conn.execute(f"CREATE TRIGGER su AFTER UPDATE ON {t} REFERENCING OLD TABLE AS "
                         f"oldrows NEW TABLE AS newrows FOR EACH STATEMENT "
                         f"EXECUTE FUNCTION uu_upd()")
        set_gucs(conn, SMALL_BATCHES)
        out = run_both(conn, "INSERT INTO {t} AS x SELECT * FROM uu_tr_stage ON CONFLICT (id) "
                             "DO UPDATE SET note = excluded.note", "uu_tr_p", "uu_tr_d")
        assert out["report"]["path"] == "direct", out["report"]
        assert out["direct"] == out["plain"]
        seen = {t: conn.execute("SELECT op, id, n FROM uu_seen WHERE tg = %s ORDER BY 1, 2, 3",
                                (t,)).fetchall() for t in ("uu_tr_p", "uu_tr_d")}
        assert seen["uu_tr_p"] == seen["uu_tr_d"]
        ops = {op for op, _, _ in seen["uu_tr_p"]}
        assert ops == {"INSERT", "UPDATE", "SINSERT", "SUPDATE"}


def test_row_level_security_of_the_update(cluster):
    """An update the UPDATE policy's WITH CHECK rejects fails both paths
    alike; one it accepts is made on both."""
    with cluster.conn() as conn:
        conn.execute("CREATE ROLE uu_rls_user")
        for t in ("uu_rls_p", "uu_rls_d"):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
            conn.execute(f"INSERT INTO {t} SELECT g, g FROM generate_series(1, 1000) g")
            conn.execute(f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY")
            conn.execute(f"CREATE POLICY a ON {t} FOR SELECT USING (true)")
            conn.execute(f"CREATE POLICY i ON {t} FOR INSERT WITH CHECK (true)")
            conn.execute(f"CREATE POLICY u ON {t} FOR UPDATE USING (true) WITH CHECK (v < 100000)")
            conn.execute(f"GRANT SELECT, INSERT, UPDATE ON {t} TO uu_rls_user")
        conn.execute("GRANT USAGE ON SCHEMA directpath TO uu_rls_user")
        conn.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA directpath TO uu_rls_user")
        conn.execute("SET ROLE uu_rls_user")
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for bump, code in ((1, None), (200000, "42501")):
            for hint in ("", "/*+ APPEND */ "):
                t = "uu_rls_d" if hint else "uu_rls_p"
                got = sqlstate_of(conn, f"{hint}INSERT INTO {t} AS x SELECT g, g FROM "
                                        f"generate_series(900, 5000) g ON CONFLICT (id) "
                                        f"DO UPDATE SET v = x.v + {bump}")
                assert got == code, (hint, bump)
        assert table_digest(conn, "uu_rls_p") == table_digest(conn, "uu_rls_d")
        conn.execute("RESET ROLE")


REFUSED = {
    "two arbiters": ("CREATE TABLE {t} (id int PRIMARY KEY, v int); "
                     "CREATE UNIQUE INDEX ON {t} (id)",
                     "ON CONFLICT (id) DO UPDATE SET v = excluded.v",
                     "more than one arbiter index"),
    "SET assigns the key": ("CREATE TABLE {t} (id int PRIMARY KEY, v int)",
                            "ON CONFLICT (id) DO UPDATE SET id = excluded.id",
                            "SET assigns column \"id\""),
    "BEFORE UPDATE trigger": ("CREATE TABLE {t} (id int PRIMARY KEY, v int); "
                              "CREATE TRIGGER b BEFORE UPDATE ON {t} FOR EACH ROW "
                              "EXECUTE FUNCTION uu_noop()",
                              "ON CONFLICT (id) DO UPDATE SET v = excluded.v",
                              "BEFORE ROW UPDATE trigger"),
    "SET assigns another unique index's column": (
        "CREATE TABLE {t} (id int PRIMARY KEY, v int UNIQUE)",
        "ON CONFLICT (id) DO UPDATE SET v = excluded.v",
        "assigns column \"v\" of the unique index"),
    "numeric key": ("CREATE TABLE {t} (id numeric PRIMARY KEY, v int)",
                    "ON CONFLICT (id) DO UPDATE SET v = excluded.v",
                    "equal values can differ in their bytes"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_say_why(cluster, case):
    ddl, clause, why = REFUSED[case]
    t = "uu_ref_" + str(list(REFUSED).index(case))
    with cluster.conn() as conn:
        conn.execute("CREATE OR REPLACE FUNCTION uu_noop() RETURNS trigger "
                     "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$")
        for s in ddl.format(t=t).split("; "):
            conn.execute(s)
        conn.execute(f"INSERT INTO {t} SELECT g, -g FROM generate_series(1, 2500) g")
        cur = conn.execute(f"/*+ APPEND */ INSERT INTO {t} SELECT g, g FROM "
                           f"generate_series(1, 5000) g {clause}")
        assert cur.rowcount == 5000
        st = last_statement(conn)
        assert st["path"] == "normal" and why in st["reason"], st
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 5000


def test_standby_replays_the_upsert(make_cluster, tmp_path):
    """Inserted rows (direct WAL) and updated rows (core's) replay alike."""
    primary = make_cluster(name="uu_primary")
    standby = primary.make_standby(tmp_path)
    with primary.conn() as conn:
        conn.execute("CREATE TABLE uu_rep (id int PRIMARY KEY, v text, n int DEFAULT 0)")
        conn.execute("INSERT INTO uu_rep SELECT g, 'old' FROM generate_series(1, 20000, 2) g")
        set_gucs(conn, SMALL_BATCHES)
        conn.execute("/*+ APPEND */ INSERT INTO uu_rep AS x SELECT g, 'new' FROM "
                     "generate_series(1, 30000) g ON CONFLICT (id) DO UPDATE "
                     "SET v = 'upd', n = x.n + 1")
        assert last_statement(conn)["path"] == "direct"
        digest = table_digest(conn, "uu_rep")
        primary.wait_replay(standby)
    with standby.conn() as s:
        assert table_digest(s, "uu_rep") == digest
        assert s.execute("SELECT v, count(*) FROM uu_rep GROUP BY 1 ORDER BY 1").fetchall() == \
            [("new", 20000), ("upd", 10000)]


# -- COPY ... WITH (ON_CONFLICT 'update') ------------------------------------

# case: (arbiter DDL, the COPY's column list, ON_CONFLICT_CONSTRAINT, partitioned)
COPY_CASES = {
    "only unique index": (PK, None, None, False),
    "column list": (PK, "(id, email, note)", None, False),
    "named constraint": (PK, "(id, grp, note)", "{t}_pkey", False),
    "partitioned": (PK, None, None, True),
}


def copy_update_reference(conn, t, path, arbiter_cols, copied):
    """What ON_CONFLICT 'update' must do, the plain way: COPY into a staging
    table, then INSERT ... ON CONFLICT (key) DO UPDATE SET (the copied
    columns outside the key) = EXCLUDED, in input order."""
    conn.execute(f"CREATE TEMP TABLE ref_{t} (LIKE {t})")
    conn.execute(f"ALTER TABLE ref_{t} ADD COLUMN ord bigserial")
    conn.execute(f"COPY ref_{t} ({', '.join(copied)}) FROM '{path}'")
    assigned = [c for c in copied if c not in arbiter_cols]
    cur = conn.execute(
        f"INSERT INTO {t} ({', '.join(copied)}) SELECT {', '.join(copied)} FROM ref_{t} "
        f"ORDER BY ord ON CONFLICT ({', '.join(arbiter_cols)}) DO UPDATE SET "
        f"({', '.join(assigned)}) = ROW({', '.join('excluded.' + c for c in assigned)})")
    return cur.rowcount


@pytest.mark.parametrize("case", list(COPY_CASES))
def test_copy_on_conflict_update(cluster, tmp_path, case):
    """New keys loaded directly, rows whose key is in the table given the new
    row's values for the COPY's columns: the same table and count as
    staging + INSERT ... ON CONFLICT DO UPDATE, twice (the second time every
    key is in the table), indexes sound."""
    n = 700 + list(COPY_CASES).index(case)
    ddl, cols, constraint, partitioned = COPY_CASES[case]
    stage = f"uc_stage_{n}"
    path = tmp_path / "rows.txt"
    all_cols = ["id", "email", "grp", "flag", "ts", "note"]
    copied = all_cols if cols is None else cols.strip("()").split(", ")
    with cluster.conn() as conn:
        make_stage(conn, stage, 9000, n)
        conn.execute(f"COPY (SELECT {', '.join(copied)} FROM {stage}) TO '{path}'")
        tp, td = f"uc_p_{n}", f"uc_d_{n}"
        for t in (tp, td):
            make_target(conn, t, stage, ddl, partitioned)
            if constraint:
                # a second unique index, which the update does not assign
                conn.execute(f"CREATE UNIQUE INDEX ON {t} (lower(email))")
        set_gucs(conn, {"directpath.min_bytes": "0"})
        opts = "ON_CONFLICT 'update'" + (
            f", ON_CONFLICT_CONSTRAINT '{constraint.format(t=td)}'" if constraint else "")
        for _ in range(2):
            want = copy_update_reference(conn, tp, path, ["id"], copied)
            conn.execute(f"DROP TABLE ref_{tp}")
            got = conn.execute(f"COPY {td} {cols or ''} FROM '{path}' WITH ({opts})").rowcount
            st = last_statement(conn)
            assert st["path"] == "direct" and st["frozen"] is False, st
            assert got == want
            assert table_digest(conn, td) == table_digest(conn, tp)
            check_indexes(conn, (tp, td))
        # the updated rows took the new values of the copied columns only
        assert conn.execute(f"SELECT count(*) FROM {td} WHERE note = 'old'").fetchone()[0] == (
            0 if "note" in copied else conn.execute(
                f"SELECT count(*) FROM {tp} WHERE note = 'old'").fetchone()[0])


def test_copy_on_conflict_update_errors(cluster, tmp_path):
    """A key twice in the input fails with core's 21000 whether its first row
    was loaded or updated one; what the update cannot be says why; nothing of
    a failed COPY is visible."""
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE uc_err (id int PRIMARY KEY, v text, w int)")
        conn.execute("INSERT INTO uc_err SELECT g, 'old', g FROM generate_series(1, 100) g")
        set_gucs(conn, {"directpath.min_bytes": "0"})

        def copy(rows, opts="ON_CONFLICT 'update'", cols=""):
            path = tmp_path / "e.txt"
            path.write_text("".join(f"{r}\n" for r in rows))
            return sqlstate_of(conn, f"COPY uc_err {cols} FROM '{path}' WITH ({opts})")

        assert copy(["500\tnew\t1", "501\tnew\t1", "500\tnew\t2"]) == "21000"
        assert copy(["7\tnew\t1", "502\tnew\t1", "7\tnew\t2"]) == "21000"
        assert conn.execute("SELECT count(*), count(*) FILTER (WHERE v = 'old') FROM uc_err"
                            ).fetchone() == (100, 100)
        conn.execute("CREATE UNIQUE INDEX uc_err_v ON uc_err (w)")
        # two unique indexes: the key must be named
        assert copy(["7\tnew\t1"]) == "22023"
        # ... and the update may not assign another unique index's column
        assert copy(["7\tnew\t1"], "ON_CONFLICT 'update', ON_CONFLICT_CONSTRAINT 'uc_err_pkey'"
                    ) == "0A000"
        assert copy(["7\tnew"], "ON_CONFLICT 'update', ON_CONFLICT_CONSTRAINT 'uc_err_pkey'",
                    "(id, v)") is None
        assert conn.execute("SELECT v, w FROM uc_err WHERE id = 7").fetchone() == ("new", 7)
        conn.execute("DROP INDEX uc_err_v")
        conn.execute("CREATE FUNCTION uc_err_t() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$BEGIN RETURN NEW; END$$")
        conn.execute("CREATE TRIGGER uc_err_t BEFORE UPDATE ON uc_err FOR EACH ROW "
                     "EXECUTE FUNCTION uc_err_t()")
        assert copy(["8\tnew\t1"]) == "0A000"
        conn.execute("DROP TRIGGER uc_err_t ON uc_err")
        assert copy(["8\tnew\t1"], "ON_CONFLICT 'nonsense'") == "22023"
        assert copy(["8\tnew\t1"], "ON_CONFLICT 'update', FREEZE") == "0A000"
        # the refused ones changed nothing
        assert conn.execute("SELECT v, w FROM uc_err WHERE id = 8").fetchone() == ("old", 8)
