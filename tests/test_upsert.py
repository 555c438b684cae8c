"""INSERT ... ON CONFLICT DO NOTHING on the direct path (src/load/conflict.c).

Differential: each statement runs plain on one copy of the target and
hinted on another; the tables, the command's row count, RETURNING rows,
EXPLAIN ANALYZE's conflict count and the rows an AFTER trigger saw must be
the same.  The sources hold keys already in the table, keys repeated within
the statement (far apart, so that the earlier row's index entry is not in
the index yet, and across batches, so that it is), NULL keys, rows outside
a partial index, keys equal only through an expression index, and
partitioned targets (the conflict is within the routed leaf).  Isolation
and locking: a conflicting row committed after a REPEATABLE READ snapshot
fails both paths alike; a concurrent writer waits for the load and then
skips its rows; a prepared transaction's rows make both paths wait.  The
statements the direct path does not take say why.
"""

import random

import psycopg
import pytest

from conftest import (SMALL_BATCHES, last_statement, run_both, set_gucs, sqlstate_of,
                      table_digest, verify_table)

pytestmark = pytest.mark.directpath

TARGET = ("(id bigint PRIMARY KEY, email text, grp int, flag bool, ts timestamptz, "
          "note text)")
# every unique index of the target is an arbiter of the cases without a
# conflict target; a case naming one has that one only (a conflict in
# another unique index is an error on both paths)
ALL_INDEXES = ["CREATE UNIQUE INDEX ON {t} (lower(email))",
               "CREATE UNIQUE INDEX ON {t} (grp) WHERE flag",
               "CREATE INDEX ON {t} (ts)"]


def make_target(conn, t, rows, seed, partitioned=False, indexes=ALL_INDEXES,
                key="id"):
    if partitioned:
        conn.execute(f"CREATE TABLE {t} {TARGET[:-1]}) PARTITION BY HASH (id)")
        for i in range(3):
            conn.execute(f"CREATE TABLE {t}_{i} PARTITION OF {t} "
                         f"FOR VALUES WITH (MODULUS 3, REMAINDER {i})")
        conn.execute(f"CREATE INDEX ON {t} (ts)")
    else:
        ddl = TARGET if key == "id" else TARGET.replace(" PRIMARY KEY", "")
        conn.execute(f"CREATE TABLE {t} {ddl}")
        for ix in indexes:
            conn.execute(ix.format(t=t))
    conn.execute(f"INSERT INTO {t} SELECT * FROM stage_{seed} WHERE id % 3 = 0 "
                 f"ON CONFLICT DO NOTHING")


def make_stage(conn, seed, n):
    """Rows with repeated, NULL and case-folded keys, in a random order."""
    r = random.Random(seed)
    conn.execute(f"DROP TABLE IF EXISTS stage_{seed}")
    conn.execute(f"CREATE TABLE stage_{seed} {TARGET.replace(' PRIMARY KEY', '')}")
    rows = []
    for i in range(n):
        k = r.randrange(n // 2) if r.random() < 0.4 else r.randrange(n * 4)
        email = None if r.random() < 0.05 else \
            (f"U{k % (n // 3)}@X" if r.random() < 0.3 else f"u{k % (n // 3)}@x")
        grp = None if r.random() < 0.1 else r.randrange(n // 4)
        rows.append((k, email, grp, r.random() < 0.5, f"2026-01-01 00:00:{i % 60:02d}+00",
                     "n" * r.randrange(0, 40)))
    with conn.cursor().copy(f"COPY stage_{seed} FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)


INS = "INSERT INTO {t} SELECT * FROM stage_{s} "
# case: (the statement's tail, the target's unique key, its other indexes)
CASES = {
    "no target": ("ON CONFLICT DO NOTHING", "id", ALL_INDEXES),
    "primary key": ("ON CONFLICT (id) DO NOTHING", "id", ALL_INDEXES[2:]),
    "constraint": ("ON CONFLICT ON CONSTRAINT {t}_pkey DO NOTHING", "id", ALL_INDEXES[2:]),
    "expression": ("ON CONFLICT (lower(email)) DO NOTHING", None,
                   [ALL_INDEXES[0], ALL_INDEXES[2]]),
    "partial": ("ON CONFLICT (grp) WHERE flag DO NOTHING", None, ALL_INDEXES[1:]),
    "returning": ("ON CONFLICT DO NOTHING RETURNING id, email", "id", ALL_INDEXES),
    "nulls not distinct": ("ON CONFLICT (grp) DO NOTHING", None,
                           ["CREATE UNIQUE INDEX ON {t} (grp) NULLS NOT DISTINCT"]),
    "two columns, INCLUDE": ("ON CONFLICT (grp, flag) DO NOTHING", None,
                             ["CREATE UNIQUE INDEX ON {t} (grp, flag) INCLUDE (note)"]),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("batches", ["one batch", "small batches"])
@pytest.mark.parametrize("order", ["random", "by key"])
def test_differential(cluster, case, batches, order):
    """Against the plain statement: the same rows, RETURNING rows and
    counts; staged rows in a random order and sorted by their keys (the
    probes then take the batch's keys in index order without a sort)."""
    # a name of its own per case (a str's hash() varies between runs)
    seed = 300 + 4 * list(CASES).index(case) + 2 * (order == "by key") + \
        (batches == "small batches")
    with cluster.conn() as conn:
        make_stage(conn, seed, 6000)
        tp, td = f"up_p_{seed}", f"up_d_{seed}"
        tail, key, indexes = CASES[case]
        for t in (tp, td):
            make_target(conn, t, 6000, seed, indexes=indexes, key=key)
        sort = "ORDER BY id, lower(email), grp, flag " if order == "by key" else ""
        stmt = (INS + sort + tail).replace("{s}", str(seed))
        settings = dict(SMALL_BATCHES) if batches == "small batches" else \
            {"directpath.min_bytes": "0"}
        set_gucs(conn, settings)
        out = run_both(conn, stmt, tp, td)
        assert out["report"]["path"] == "direct", out["report"]
        assert out["direct"] == out["plain"]
        # indexes whole and pointing at the rows
        for t in (tp, td):
            for (ix,) in conn.execute(
                    "SELECT indexrelid::regclass::text FROM pg_index "
                    "WHERE indrelid = %s::regclass", (t,)).fetchall():
                conn.execute("SELECT bt_index_parent_check(%s::regclass, true, true)", (ix,))


@pytest.mark.parametrize("storage", ["new in the transaction", "partitioned"])
def test_new_storage_and_partitions(cluster, storage):
    seed = 71 if storage == "partitioned" else 72
    with cluster.conn(autocommit=False) as conn:
        make_stage(conn, seed, 8000)
        conn.commit()
        tp, td = f"up_sp_{seed}", f"up_sd_{seed}"
        for t in (tp, td):
            make_target(conn, t, 8000, seed, partitioned=storage == "partitioned")
        set_gucs(conn, SMALL_BATCHES)
        before = conn.execute(f"SELECT pg_relation_size('{td}') / 8192").fetchone()[0]
        # twice: the second run's keys are all in the table already
        for run in range(2):
            out = run_both(conn, f"INSERT INTO {{t}} SELECT * FROM stage_{seed} "
                                 f"ON CONFLICT DO NOTHING", tp, td)
            assert out["report"]["path"] == "direct", out["report"]
            assert out["direct"] == out["plain"]
            assert out["plain"]["rowcount"] > 0 if run == 0 else out["plain"]["rowcount"] == 0
            if run == 0 and storage == "new in the transaction":
                assert out["report"]["frozen"]
        conn.commit()
        if storage == "new in the transaction":
            # only the pages of the plain INSERT that filled it first are not
            # frozen: the direct rows went onto new, frozen pages
            st = conn.execute(f"SELECT count(*) FROM pg_visibility_map('{td}') "
                              f"WHERE NOT all_frozen").fetchone()[0]
            assert 0 < before and st <= before


def test_explain_analyze_counts_conflicts(cluster):
    with cluster.conn() as conn:
        make_stage(conn, 81, 3000)
        for t in ("up_ex_p", "up_ex_d"):
            make_target(conn, t, 3000, 81)
        set_gucs(conn, {"directpath.min_bytes": "0"})
        lines = {}
        for t, hint in (("up_ex_p", ""), ("up_ex_d", "/*+ APPEND */ ")):
            plan = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
                                f"{hint}INSERT INTO {t} SELECT * FROM stage_81 "
                                f"ON CONFLICT DO NOTHING").fetchall()
            lines[t] = [l.strip() for (l,) in plan if "Tuples" in l or "Conflict Res" in l]
        assert lines["up_ex_p"] == lines["up_ex_d"] and len(lines["up_ex_p"]) == 3


def test_after_trigger_and_transition_table(cluster):
    with cluster.conn() as conn:
        make_stage(conn, 91, 3000)
        conn.execute("CREATE TABLE up_seen (tg text, id bigint, n bigint)")
        conn.execute("""CREATE FUNCTION up_row() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO up_seen VALUES (TG_TABLE_NAME, NEW.id, NULL); RETURN NULL; END $$""")
        conn.execute("""CREATE FUNCTION up_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO up_seen SELECT TG_TABLE_NAME, NULL, count(*) FROM newrows;
            RETURN NULL; END $$""")
        for t in ("up_tr_p", "up_tr_d"):
            make_target(conn, t, 3000, 91)
            conn.execute(f"CREATE TRIGGER r AFTER INSERT ON {t} FOR EACH ROW "
                         f"EXECUTE FUNCTION up_row()")
            conn.execute(f"CREATE TRIGGER s AFTER INSERT ON {t} REFERENCING NEW TABLE AS newrows "
                         f"FOR EACH STATEMENT EXECUTE FUNCTION up_stmt()")
        set_gucs(conn, SMALL_BATCHES)
        out = run_both(conn, "INSERT INTO {t} SELECT * FROM stage_91 ON CONFLICT DO NOTHING",
                       "up_tr_p", "up_tr_d")
        assert out["report"]["path"] == "direct", out["report"]
        assert out["direct"] == out["plain"]
        seen = {t: conn.execute("SELECT id, n FROM up_seen WHERE tg = %s ORDER BY 1, 2",
                                (t,)).fetchall() for t in ("up_tr_p", "up_tr_d")}
        assert seen["up_tr_p"] == seen["up_tr_d"]
        assert seen["up_tr_p"][-1][1] == out["plain"]["rowcount"]


@pytest.mark.parametrize("action", ["DO NOTHING", "(id) DO UPDATE SET v = excluded.v"])
def test_repeatable_read_conflict_with_a_later_commit(cluster, action):
    """A conflicting row committed after the snapshot: 40001 on both paths;
    a row of the own transaction is no such conflict (DO UPDATE updates it)."""
    sfx = "u" if "UPDATE" in action else "n"
    tables = {"": f"up_rr_p{sfx}", "/*+ APPEND */ ": f"up_rr_d{sfx}"}
    with cluster.conn() as conn:
        for t in tables.values():
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
    for hint, t in tables.items():
        with cluster.conn() as a, cluster.conn() as b:
            set_gucs(a, {"directpath.min_bytes": "0"})
            a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            a.execute("SELECT 1").fetchone()
            b.execute(f"INSERT INTO {t} VALUES (5000, 0)")
            with pytest.raises(psycopg.errors.SerializationFailure) as e:
                a.execute(f"{hint}INSERT INTO {t} SELECT g, 1 FROM generate_series(1, 9000) g "
                          f"ON CONFLICT {action}")
            assert "could not serialize access due to concurrent update" in str(e.value)
            a.execute("ROLLBACK")
            a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            a.execute(f"INSERT INTO {t} SELECT g, 2 FROM generate_series(1, 100) g "
                      f"ON CONFLICT DO NOTHING")
            cur = a.execute(f"{hint}INSERT INTO {t} SELECT g, 1 FROM generate_series(1, 9000) g "
                            f"ON CONFLICT {action}")
            assert cur.rowcount == (9000 if "UPDATE" in action else 9000 - 101)
            if hint:
                assert last_statement(a)["path"] == "direct"
            a.execute("COMMIT")
    with cluster.conn() as conn:
        assert table_digest(conn, tables[""]) == table_digest(conn, tables["/*+ APPEND */ "])


def test_concurrent_writer_waits_then_skips(cluster):
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE up_cw (id int PRIMARY KEY, who text)")
    with cluster.conn(autocommit=False) as a, cluster.conn() as b:
        set_gucs(a, {"directpath.min_bytes": "0"})
        a.execute("/*+ APPEND */ INSERT INTO up_cw SELECT g, 'a' FROM generate_series(1, 5000) g "
                  "ON CONFLICT DO NOTHING")
        assert last_statement(a)["path"] == "direct"
        b.execute("SET lock_timeout = '300ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            b.execute("INSERT INTO up_cw SELECT g, 'b' FROM generate_series(4001, 6000) g "
                      "ON CONFLICT DO NOTHING")
        a.commit()
        cur = b.execute("INSERT INTO up_cw SELECT g, 'b' FROM generate_series(4001, 6000) g "
                        "ON CONFLICT DO NOTHING")
        assert cur.rowcount == 1000
        assert b.execute("SELECT who, count(*) FROM up_cw GROUP BY 1 ORDER BY 1").fetchall() == \
            [("a", 5000), ("b", 1000)]


def test_prepared_transaction_rows_wait_on_both_paths(make_cluster):
    c = make_cluster(extra_conf={"max_prepared_transactions": "2"})
    with c.conn() as conn:
        conn.execute("CREATE TABLE up_px (id int PRIMARY KEY)")
    with c.conn(autocommit=False) as p:
        p.execute("INSERT INTO up_px VALUES (7)")
        p.execute("PREPARE TRANSACTION 'up_px'")
    with c.conn() as conn:
        conn.execute("SET lock_timeout = '300ms'")
        for hint in ("", "/*+ APPEND */ "):
            code = sqlstate_of(conn, f"{hint}INSERT INTO up_px SELECT generate_series(1, 9000) "
                                     f"ON CONFLICT DO NOTHING")
            assert code == "55P03", (hint, code)
        conn.execute("COMMIT PREPARED 'up_px'")
        conn.execute("SET directpath.min_bytes = 0")
        cur = conn.execute("/*+ APPEND */ INSERT INTO up_px SELECT generate_series(1, 9000) "
                           "ON CONFLICT DO NOTHING")
        assert cur.rowcount == 8999
        assert last_statement(conn)["path"] == "direct"


REFUSED = {
    "numeric key": ("CREATE TABLE {t} (id numeric PRIMARY KEY, v int)",
                    "ON CONFLICT DO NOTHING", "equal values can differ in their bytes"),
    "exclusion": ("CREATE TABLE {t} (id int, v int, EXCLUDE USING btree (id WITH =))",
                  "ON CONFLICT DO NOTHING", "is an exclusion constraint"),
    "partition's own index": ("CREATE TABLE {t} (id int, v float8) PARTITION BY RANGE (id); "
                              "CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (0) TO (100000); "
                              "CREATE UNIQUE INDEX ON {t}_1 (v)",
                              "ON CONFLICT DO NOTHING", "equal values can differ in their bytes"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_say_why(cluster, case):
    ddl, clause, why = REFUSED[case]
    t = "up_ref_" + str(list(REFUSED).index(case))
    with cluster.conn() as conn:
        for s in ddl.format(t=t).split("; "):
            conn.execute(s)
        conn.execute("SET directpath.fallback_message_level = 'notice'")
        cur = conn.execute(f"/*+ APPEND */ INSERT INTO {t} SELECT g, g FROM "
                           f"generate_series(1, 5000) g {clause}")
        assert cur.rowcount == 5000
        st = last_statement(conn)
        assert st["path"] == "normal" and why in st["reason"], st
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN /*+ APPEND */ INSERT INTO {t} SELECT g, g FROM "
            f"generate_series(1, 5000) g {clause}").fetchall())
        assert why in plan


def test_parallel_hint(cluster):
    """DO NOTHING and DO UPDATE from a table scan load in parallel
    (test_parallel_upsert.py and test_parallel_do_update.py have the
    rest).  Each from the same start: half the keys there."""
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE up_par_src AS SELECT g AS id, g AS v FROM "
                     "generate_series(1, 50000) g")
        conn.execute("CREATE TABLE up_par (id int PRIMARY KEY, v int)")
        for action, rows, sum_v in (
                ("DO NOTHING", 25000, sum(range(2, 50001, 2))),
                ("(id) DO UPDATE SET v = excluded.v + 1", 50000, 2 * sum(range(2, 50001, 2)))):
            conn.execute("TRUNCATE up_par")
            conn.execute("INSERT INTO up_par SELECT g, 0 FROM generate_series(1, 50000, 2) g")
            cur = conn.execute("/*+ APPEND PARALLEL(2) */ INSERT INTO up_par "
                               f"SELECT * FROM up_par_src ON CONFLICT {action}")
            assert cur.rowcount == rows
            st = last_statement(conn)
            assert st["path"] == "direct" and st["parallel_workers"] > 0, st
            assert conn.execute("SELECT count(*), sum(v) FROM up_par").fetchone() == \
                (50000, sum_v)


def test_dead_entries_and_several_batches(cluster):
    """Entries of aborted and deleted rows are no conflict, across several
    batches of decisions; a key repeated in a later batch finds the earlier
    row, in the index or not yet."""
    with cluster.conn() as conn:
        for t in ("up_dead_p", "up_dead_d"):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
            conn.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 30000, 3) g")
            conn.execute("BEGIN")
            conn.execute(f"INSERT INTO {t} SELECT g, 'aborted' FROM generate_series(2, 30000, 3) g")
            conn.execute("ROLLBACK")
            conn.execute(f"DELETE FROM {t} WHERE id % 9 = 1")
        # several decisions (4 x batch_pages of rows each), several flushes
        set_gucs(conn, SMALL_BATCHES)
        out = run_both(conn, "INSERT INTO {t} SELECT g % 25000, 'new' FROM "
                             "generate_series(1, 40000) g ON CONFLICT DO NOTHING", "up_dead_p",
                       "up_dead_d")
        assert out["report"]["path"] == "direct", out["report"]
        assert out["direct"] == out["plain"]
        assert conn.execute("SELECT count(*) FROM up_dead_d WHERE v = 'new'").fetchone()[0] > 0


def test_key_whose_entries_span_two_leaves(cluster):
    """One row updated (not HOT) until its key's entries fill more than a
    leaf, an old snapshot keeping them all: the live entry is on a leaf to
    the right of the one the key's first entry is on, behind a high key
    equal to the key.  The probe must move right to it (it once stopped at
    that high key and took the key for new; the insert then failed the
    unique check)."""
    with cluster.conn() as conn, cluster.conn(autocommit=False) as old:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute("CREATE TABLE up_span (id int PRIMARY KEY, v int, w text) "
                     "WITH (autovacuum_enabled = off)")
        conn.execute("CREATE INDEX ON up_span (v)")
        conn.execute("INSERT INTO up_span SELECT g, g, 'x' FROM generate_series(1, 2000) g")
        old.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT count(*) FROM up_span")
        # every update changes the indexed v: a new pkey entry each time
        for _ in range(3000):
            conn.execute("UPDATE up_span SET v = v + 1 WHERE id = 1000")
        old.rollback()
        leaves = conn.execute(
            "SELECT count(DISTINCT b) FROM generate_series(1, "
            "pg_relation_size('up_span_pkey') / 8192 - 1) b, "
            "LATERAL bt_page_stats('up_span_pkey', b::int) s, "
            "LATERAL bt_page_items('up_span_pkey', b::int) i "
            "WHERE s.type = 'l' AND i.data = 'e8 03 00 00 00 00 00 00' "
            "AND (s.btpo_next = 0 OR i.itemoffset > 1)").fetchone()[0]
        assert leaves >= 2
        for action, expect in (("DO NOTHING", 0), ("DO UPDATE SET w = 'y'", 1)):
            cur = conn.execute("/*+ APPEND */ INSERT INTO up_span SELECT 1000, -1, 'new' "
                               f"FROM generate_series(1, 1) ON CONFLICT (id) {action}")
            assert cur.rowcount == expect, action
        assert conn.execute("SELECT count(*), max(w) FROM up_span WHERE id = 1000").fetchone() \
            == (1, "y")
        verify_table(conn, "up_span")


@pytest.mark.parametrize("action", ["nothing", "update", "copy"])
def test_conflicts_through_hot_chains_leave_the_index_sound(cluster, tmp_path, action):
    """Rows updated in place (HOT: their index entry names the chain's root,
    the live version is further along it) met by a direct ON CONFLICT, twice:
    the probe reads the chain without repointing the entry (it once did,
    leaving entries that named heap-only tuples: amcheck failed, and a later
    statement no longer found those keys and inserted them again)."""
    path = tmp_path / "hot_keys.txt"
    path.write_text("".join(f"{i}\t0\n" for i in range(1, 2001)))
    statements = {
        "nothing": "INSERT INTO {t} SELECT g, 0 FROM generate_series(1, 2000) g "
                   "ON CONFLICT (id) DO NOTHING",
        "update": "INSERT INTO {t} SELECT g, 0 FROM generate_series(1, 2000) g "
                  "ON CONFLICT (id) DO UPDATE SET v = {t}.v + 1",
        "copy": f"COPY {{t}} FROM '{path}' WITH (ON_CONFLICT 'nothing')",
    }
    p, d = f"up_hot_{action}_p", f"up_hot_{action}_d"
    with cluster.conn() as conn:
        for t in (p, d):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
            conn.execute(f"INSERT INTO {t} SELECT g, g FROM generate_series(1, 1500) g")
            conn.execute(f"UPDATE {t} SET v = v + 1")
            conn.execute(f"UPDATE {t} SET v = v + 1")
        set_gucs(conn, {"directpath.min_bytes": 0})
        for _ in range(2):
            if action == "copy":
                conn.execute("/*+ NOAPPEND */ " + statements["nothing"].format(t=p))
                conn.execute("/*+ APPEND */ " + statements[action].format(t=d))
                assert last_statement(conn)["path"] == "direct"
            else:
                out = run_both(conn, statements[action], p, d)
                assert out["report"]["path"] == "direct", out["report"]
                assert out["direct"] == out["plain"]
            verify_table(conn, d)
        # every key once, found through the index as through the heap
        assert conn.execute(f"SELECT count(*), count(DISTINCT id) FROM {d}").fetchone() \
            == (2000, 2000)
        assert table_digest(conn, d) == table_digest(conn, p)
        conn.execute(f"INSERT INTO {d} SELECT g, 0 FROM generate_series(1, 2000) g "
                     f"ON CONFLICT (id) DO UPDATE SET v = {d}.v")
        assert conn.execute(f"SELECT count(*) FROM {d}").fetchone()[0] == 2000


# -- COPY ... WITH (ON_CONFLICT 'nothing') -----------------------------------

def copy_upsert_reference(conn, t, path, seed, constraint=None):
    """What ON_CONFLICT 'nothing' must do, the plain way: COPY into a staging
    table, then INSERT ... ON CONFLICT DO NOTHING in input order."""
    conn.execute(f"CREATE TEMP TABLE ref_stage_{seed} (LIKE {t}) ")
    conn.execute(f"ALTER TABLE ref_stage_{seed} ADD COLUMN ord bigserial")
    cols = ", ".join(c for (c,) in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", (t,)).fetchall())
    conn.execute(f"COPY ref_stage_{seed} ({cols}) FROM '{path}'")
    target = f"ON CONSTRAINT {constraint}" if constraint else ""
    cur = conn.execute(f"INSERT INTO {t} SELECT {cols} FROM ref_stage_{seed} ORDER BY ord "
                       f"ON CONFLICT {target} DO NOTHING")
    return cur.rowcount


@pytest.mark.parametrize("kind", ["every unique index", "named constraint", "partitioned"])
def test_copy_on_conflict_nothing(cluster, tmp_path, kind):
    seed = {"every unique index": 101, "named constraint": 102, "partitioned": 103}[kind]
    with cluster.conn() as conn:
        make_stage(conn, seed, 9000)
        path = tmp_path / "in.dat"
        path.parent.chmod(0o755)
        conn.execute(f"COPY stage_{seed} TO '{path}'")
        tp, td = f"up_cp_p_{seed}", f"up_cp_d_{seed}"
        indexes = ALL_INDEXES if kind == "every unique index" else ALL_INDEXES[2:]
        for t in (tp, td):
            make_target(conn, t, 9000, seed, partitioned=kind == "partitioned",
                        indexes=indexes)
        constraint = None
        opts = "ON_CONFLICT 'nothing'"
        if kind == "named constraint":
            constraint = f"{td}_pkey"
            opts += f", ON_CONFLICT_CONSTRAINT '{constraint}'"
        set_gucs(conn, SMALL_BATCHES)
        expected = copy_upsert_reference(conn, tp, path, seed,
                                         constraint and f"{tp}_pkey")
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        cur = conn.execute(f"COPY {td} FROM '{path}' WITH ({opts})")
        assert cur.rowcount == expected
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == expected, st
        assert table_digest(conn, tp) == table_digest(conn, td)
        assert any("rows were skipped" in n for n in notices), notices
        # from STDIN too (\copy, drivers), a second time: every row skipped
        with conn.cursor() as c:
            with c.copy(f"COPY {td} FROM STDIN WITH ({opts})") as cp:
                cp.write(path.read_bytes())
            assert c.rowcount == 0
        assert table_digest(conn, tp) == table_digest(conn, td)


COPY_ERRORS = {
    "update with freeze": ("ON_CONFLICT 'update', FREEZE", "0A000", "FREEZE cannot be used"),
    "bad value": ("ON_CONFLICT 'sometimes'", "22023", "must be 'nothing'"),
    "constraint alone": ("ON_CONFLICT_CONSTRAINT 'x'", "22023", "needs ON_CONFLICT"),
    "not unique": ("ON_CONFLICT 'nothing', ON_CONFLICT_CONSTRAINT 'up_ce_chk'", "42809",
                   "not a unique or primary key constraint"),
    "with rejects": ("ON_CONFLICT 'nothing', REJECTS_TABLE 'r'", "0A000",
                     "cannot be used together"),
    "numeric key": ("ON_CONFLICT 'nothing'", "0A000", "equal values can differ"),
}


@pytest.mark.parametrize("case", list(COPY_ERRORS))
def test_copy_on_conflict_errors(cluster, tmp_path, case):
    opts, code, text = COPY_ERRORS[case]
    t = "up_ce_" + str(list(COPY_ERRORS).index(case))
    with cluster.conn() as conn:
        key = "numeric" if case == "numeric key" else "int"
        conn.execute(f"CREATE TABLE {t} (id {key} PRIMARY KEY, v int "
                     f"CONSTRAINT up_ce_chk CHECK (v > 0))")
        with pytest.raises(psycopg.Error) as e:
            with conn.cursor().copy(f"COPY {t} FROM STDIN WITH ({opts})") as cp:
                cp.write("1\t1\n")
        assert e.value.sqlstate == code and text in str(e.value), str(e.value)
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0


def test_copy_on_conflict_needs_the_direct_path(cluster):
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE up_cn (id int PRIMARY KEY)")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            with conn.cursor().copy("/*+ NOAPPEND */ COPY up_cn FROM STDIN "
                                    "WITH (ON_CONFLICT 'nothing')") as cp:
                cp.write("1\n")
        assert "COPY option ON_CONFLICT needs the direct path" in str(e.value)


@pytest.mark.parametrize("case", ["reads its own target", "small: held, then normal"])
def test_self_source_and_small_statements(cluster, case):
    tp, td = ("up_ss_p", "up_ss_d") if case == "reads its own target" else ("up_sm_p", "up_sm_d")
    with cluster.conn() as conn:
        for t in (tp, td):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
            conn.execute(f"INSERT INTO {t} SELECT g * 2, 'first' FROM generate_series(1, 20000) g")
        if case == "reads its own target":
            set_gucs(conn, {"directpath.min_bytes": "0"})
            stmt = ("INSERT INTO {t} SELECT id / 3 + 1, 'again' FROM {t} "
                    "ON CONFLICT DO NOTHING RETURNING id, v")
        else:
            # the default min_bytes: 10 rows are held, then inserted normally
            stmt = ("INSERT INTO {t} SELECT g, 'small' FROM generate_series(1, 10) g "
                    "ON CONFLICT DO NOTHING RETURNING id")
        out = run_both(conn, stmt, tp, td)
        assert out["direct"] == out["plain"]
        assert out["plain"]["rowcount"] > 0
        expect = "direct" if case == "reads its own target" else "normal"
        assert out["report"]["path"] == expect, out["report"]


def test_merge_says_why(cluster):
    """A MERGE that inserts nothing stays on the normal path, and says so:
    hinted (NOTICE, EXPLAIN) and under mode = always (last_statement(),
    core's plan untouched).  MERGEs that insert: test_merge.py."""
    merge = ("MERGE INTO {t} USING (SELECT g AS id FROM generate_series(1, 3000) g) s "
             "ON {t}.id = s.id WHEN MATCHED THEN UPDATE SET v = 2")
    why = "MERGE without WHEN NOT MATCHED THEN INSERT (nothing it does is an append)"
    with cluster.conn() as conn:
        for t in ("up_mg_p", "up_mg_d"):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
            conn.execute(f"INSERT INTO {t} SELECT generate_series(1, 3000, 2), 0")
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute("SET directpath.fallback_message_level = notice")
        conn.execute(merge.format(t="up_mg_p"))
        cur = conn.execute("/*+ APPEND */ " + merge.format(t="up_mg_d"))
        assert cur.rowcount == 1500
        st = last_statement(conn)
        assert st["path"] == "normal" and st["reason"] == why, st
        assert any("MERGE uses the normal path" in n for n in notices), notices
        assert table_digest(conn, "up_mg_p") == table_digest(conn, "up_mg_d")
        plan = [r[0] for r in conn.execute("EXPLAIN (COSTS OFF) /*+ APPEND */ " +
                                           merge.format(t="up_mg_d")).fetchall()]
        assert plan[0].startswith("Custom Scan (DirectPath)") and f"Reason: {why}" in \
            "\n".join(plan), plan
        conn.execute("SET directpath.mode = always")
        plan = [r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " +
                                           merge.format(t="up_mg_d")).fetchall()]
        assert plan[0].startswith("Merge on up_mg_d"), plan
        conn.execute(merge.format(t="up_mg_d"))
        assert last_statement(conn)["reason"] == why


def test_deferrable_unique_arbiter_fails_as_core(cluster):
    """A deferrable unique constraint cannot be an arbiter: core's error,
    on both paths, once the statement has a row to check."""
    with cluster.conn() as conn:
        conn.execute("CREATE TABLE up_def (id int UNIQUE DEFERRABLE, v int)")
        conn.execute("SET directpath.min_bytes = 0")
        errors = []
        for hint in ("", "/*+ APPEND */ "):
            with pytest.raises(psycopg.Error) as e:
                conn.execute(f"{hint}INSERT INTO up_def SELECT g, g FROM "
                             f"generate_series(1, 5000) g ON CONFLICT DO NOTHING")
            errors.append((e.value.sqlstate, e.value.diag.message_primary))
        assert errors[0] == errors[1] and errors[0][0] == "55000", errors
        assert conn.execute("SELECT count(*) FROM up_def").fetchone()[0] == 0
