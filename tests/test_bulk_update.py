"""ON CONFLICT DO UPDATE's updates in bulk (src/load/versions.c).

The rows that meet a row of the table get their new versions from a page
builder; each old version's page is changed once and logged as a full-page
image after its visibility-map bits are cleared.  Every test compares with
the plain statement (or with the table before the statement) and checks the
table with amcheck and pg_visibility: the headers (xmax, cmax and combo
command ids, t_ctid), the WAL (crash recovery and a standby), the visibility
map (index-only scans on the standby), what goes to core's executor (rows
locked by others or earlier in the transaction, another session's ROW
SHARE), and errors (CHECK on the new version, a key twice).
"""

import psycopg
import pytest

from conftest import crash_at_fault, set_gucs, sqlstate_of, table_digest, verify_table

pytestmark = pytest.mark.directpath

UPSERT = ("INSERT INTO {t} AS x SELECT * FROM {s} ON CONFLICT (id) DO UPDATE "
          "SET v = excluded.v, ts = excluded.ts, n = x.n + 1 WHERE x.ts < excluded.ts")


def make_tables(conn, t, s, rows=20000, vacuum=True):
    """Target 't' (every other id up to 2 * rows, three btrees, a TOASTed
    column on some rows), settled by VACUUM so its pages are all-visible;
    staging 's': every id up to 2 * rows in a scattered order, newer than
    the target's rows except where id % 7 = 0 (the WHERE clause is false)."""
    conn.execute(f"DROP TABLE IF EXISTS {t}, {s}")
    conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, ts timestamptz, v text, "
                 f"n int NOT NULL DEFAULT 0, big text)")
    conn.execute(f"CREATE INDEX ON {t} (ts)")
    conn.execute(f"CREATE INDEX ON {t} (v)")
    conn.execute(f"INSERT INTO {t} SELECT g, timestamptz '2026-01-01' + g * interval '1 s', "
                 f"'old' || g, 0, CASE WHEN g % 97 = 1 THEN repeat(md5(g::text), 400) END "
                 f"FROM generate_series(2, {2 * rows}, 2) g")
    if vacuum:
        conn.execute(f"VACUUM ANALYZE {t}")
    conn.execute(f"CREATE TABLE {s} AS SELECT g::bigint AS id, "
                 f"CASE WHEN g % 7 = 0 THEN timestamptz '2000-01-01' "
                 f"ELSE timestamptz '2027-01-01' + g * interval '1 s' END AS ts, "
                 f"'new' || g AS v, 0 AS n, NULL::text AS big "
                 f"FROM generate_series(1, {2 * rows}) g ORDER BY hashint4(g)")


def explain_updates(conn, sql):
    """Run 'sql' under EXPLAIN ANALYZE; the DirectPath node's Updates line."""
    plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).fetchone()[0]
    return plan[0]["Plan"].get("Updates", "")


def test_bulk_matches_plain_and_checks(cluster):
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        make_tables(conn, "bu_p", "bu_s")
        make_tables(conn, "bu_d", "bu_s")
        sql = "/*+ APPEND */ " + UPSERT.format(t="bu_d", s="bu_s")
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).fetchone()[0][0]["Plan"]
        # 20000 ids meet a row; those with id % 7 = 0 are only locked
        locked = conn.execute("SELECT count(*) FROM generate_series(2, 40000, 2) g "
                              "WHERE g % 7 = 0").fetchone()[0]
        assert plan["Updates"] == f"{20000 - locked} in bulk ({locked} more locked: WHERE false)"
        # EXPLAIN's counts, as core's ModifyTable node gives them
        insert = plan["Plans"][0]
        assert (insert["Tuples Inserted"], insert["Conflicting Tuples"],
                insert["Rows Removed by Conflict Filter"]) == (20000, 20000, locked)
        conn.execute(UPSERT.format(t="bu_p", s="bu_s"))
        assert table_digest(conn, "bu_d") == table_digest(conn, "bu_p")
        verify_table(conn, "bu_d")
        # the old versions are dead to VACUUM, the new ones indexed
        conn.execute("VACUUM bu_d")
        verify_table(conn, "bu_d")
        conn.execute("SET enable_seqscan = off")
        assert conn.execute("SELECT count(*), sum(n) FROM bu_d WHERE id > 0").fetchone() == \
            conn.execute("SELECT count(*), sum(n) FROM bu_p WHERE id > 0").fetchone()
        # pgstat counts updates as updates
        conn.execute("SELECT pg_stat_force_next_flush()")
        ins, upd = conn.execute("SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables "
                                "WHERE relname = 'bu_d'").fetchone()
        assert upd == 20000 - locked and ins == 20000 + 20000


def test_again_every_row_an_update(cluster):
    """A second run meets the first run's new versions (several entries per
    key in every index, some of them dead)."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for t in ("bu_ap", "bu_ad"):
            make_tables(conn, t, "bu_as")
        for i in range(3):
            conn.execute(f"UPDATE bu_as SET ts = ts + interval '1 day', v = v || '{i}'")
            conn.execute("/*+ APPEND */ " + UPSERT.format(t="bu_ad", s="bu_as"))
            conn.execute(UPSERT.format(t="bu_ap", s="bu_as"))
            assert table_digest(conn, "bu_ad") == table_digest(conn, "bu_ap")
        verify_table(conn, "bu_ad")


def test_setting_off_and_refusals_say_why(cluster):
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0", "directpath.bulk_update": "off"})
        make_tables(conn, "bu_op", "bu_os", rows=2000)
        sql = "/*+ APPEND */ " + UPSERT.format(t="bu_op", s="bu_os")
        assert explain_updates(conn, "/*+ APPEND */ " + UPSERT.format(t="bu_op", s="bu_os")) \
            .endswith("by core's executor: directpath.bulk_update is off")
        conn.execute("RESET directpath.bulk_update")
        conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        assert "SERIALIZABLE" in explain_updates(conn, sql)
        conn.execute("ROLLBACK")
        conn.execute("CREATE FUNCTION bu_noop() RETURNS trigger LANGUAGE plpgsql "
                     "AS 'BEGIN RETURN NEW; END'")
        conn.execute("CREATE TRIGGER bu_t AFTER UPDATE ON bu_op FOR EACH ROW "
                     "EXECUTE FUNCTION bu_noop()")
        assert "rows by core's executor: the table has row triggers" in \
            explain_updates(conn, sql)


def test_rows_locked_go_to_core(cluster):
    """A row this transaction locked before goes to core's path; another
    session holding ROW SHARE sends every row there; the outcome is the
    plain statement's either way."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for t in ("bu_lp", "bu_ld"):
            make_tables(conn, t, "bu_ls", rows=3000)
        conn.execute("BEGIN")
        conn.execute("SELECT * FROM bu_ld WHERE id % 100 = 0 FOR UPDATE")
        updates = explain_updates(conn, "/*+ APPEND */ " + UPSERT.format(t="bu_ld", s="bu_ls"))
        assert "60 rows by core's executor: a row was locked" in updates, updates
        conn.execute("COMMIT")
        conn.execute(UPSERT.format(t="bu_lp", s="bu_ls"))
        assert table_digest(conn, "bu_ld") == table_digest(conn, "bu_lp")

        conn.execute("UPDATE bu_ls SET ts = ts + interval '1 day'")
        for t in ("bu_lp", "bu_ld"):
            conn.execute(f"INSERT INTO {t} VALUES (999999, '2026-01-01', 'not met')")
        with cluster.conn(autocommit=False) as other:
            # a row no staged row meets: core's updates do not wait for it
            other.execute("SELECT * FROM bu_ld WHERE id = 999999 FOR SHARE")
            updates = explain_updates(conn, "/*+ APPEND */ " +
                                      UPSERT.format(t="bu_ld", s="bu_ls"))
            assert "another transaction holds a lock on the table" in updates, updates
            other.rollback()
        conn.execute(UPSERT.format(t="bu_lp", s="bu_ls"))
        assert table_digest(conn, "bu_ld") == table_digest(conn, "bu_lp")
        verify_table(conn, "bu_ld")


def test_rows_of_this_transaction_and_a_cursor(cluster):
    """Rows inserted earlier in the transaction get a combo command id when
    updated; a cursor opened before the upsert still sees the old versions,
    the statement after it the new ones, as with the plain statement."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        seen = {}
        for hint, t in (("", "bu_cp"), ("/*+ APPEND */ ", "bu_cd")):
            make_tables(conn, t, "bu_cs", rows=2000)
            conn.execute("BEGIN")
            conn.execute(f"INSERT INTO {t} SELECT g, timestamptz '2026-01-01', 'mine', 0 "
                         f"FROM generate_series(100001, 103000) g")
            conn.execute("INSERT INTO bu_cs SELECT g, timestamptz '2027-06-01', 'again', 0 "
                         "FROM generate_series(100001, 103000, 3) g")
            conn.execute(f"DECLARE c CURSOR FOR SELECT id, v, n FROM {t} ORDER BY id")
            conn.execute(hint + UPSERT.format(t=t, s="bu_cs"))
            before = conn.execute("FETCH ALL FROM c").fetchall()
            after = conn.execute(f"SELECT id, v, n FROM {t} ORDER BY id").fetchall()
            conn.execute("COMMIT")
            conn.execute("DELETE FROM bu_cs WHERE id > 100000")
            seen[hint] = (before, after, table_digest(conn, t))
        assert seen[""] == seen["/*+ APPEND */ "]
        assert seen[""][0] != seen[""][1]
        verify_table(conn, "bu_cd")


def test_errors_like_plain(cluster):
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        make_tables(conn, "bu_e", "bu_es", rows=2000)
        conn.execute("ALTER TABLE bu_e ADD CONSTRAINT small_n CHECK (n < 1)")
        before = table_digest(conn, "bu_e")
        errs = []
        for hint in ("", "/*+ APPEND */ "):
            try:
                conn.execute(hint + UPSERT.format(t="bu_e", s="bu_es"))
            except psycopg.Error as e:
                errs.append((e.sqlstate, e.diag.message_primary, e.diag.constraint_name))
        assert errs[0] == errs[1] and errs[0][0] == "23514"
        assert table_digest(conn, "bu_e") == before
        verify_table(conn, "bu_e")
        # a key twice: core's cardinality error, nothing left behind
        conn.execute("ALTER TABLE bu_e DROP CONSTRAINT small_n")
        conn.execute("INSERT INTO bu_es SELECT id, ts + interval '1 s', v, n, big "
                     "FROM bu_es WHERE id = 40")
        assert sqlstate_of(conn, "/*+ APPEND */ " + UPSERT.format(t="bu_e", s="bu_es")) == "21000"
        assert table_digest(conn, "bu_e") == before
        verify_table(conn, "bu_e")
        # rolled back to a savepoint: the old versions live again, and the
        # table takes a second run in the same transaction
        conn.execute("DELETE FROM bu_es WHERE id = 40 AND ts = (SELECT max(ts) FROM bu_es "
                     "WHERE id = 40)")
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT s")
        conn.execute("/*+ APPEND */ " + UPSERT.format(t="bu_e", s="bu_es"))
        assert table_digest(conn, "bu_e") != before
        conn.execute("ROLLBACK TO SAVEPOINT s")
        assert table_digest(conn, "bu_e") == before
        conn.execute("/*+ APPEND */ " + UPSERT.format(t="bu_e", s="bu_es"))
        conn.execute("COMMIT")
        assert conn.execute("SELECT count(*) FROM bu_e WHERE n = 1").fetchone()[0] > 0
        verify_table(conn, "bu_e")


@pytest.mark.parametrize("how", ["kill backend", "immediate stop"])
def test_crash_during_the_updates(make_cluster, how):
    """Killed with some old pages changed and logged: after recovery the
    table is what it was, and checks clean; the statement then succeeds."""
    c = make_cluster(name="bu_crash_" + how.split()[0])
    with c.conn() as conn:
        make_tables(conn, "bu_k", "bu_ks", rows=20000)
        conn.execute("CHECKPOINT")
        before = table_digest(conn, "bu_k")
    crash_at_fault(c, "/*+ APPEND */ " + UPSERT.format(t="bu_k", s="bu_ks"), "versions_page",
                   20, how, {"directpath.min_bytes": "0"})
    with c.conn() as conn:
        assert table_digest(conn, "bu_k") == before
        verify_table(conn, "bu_k")
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute("/*+ APPEND */ " + UPSERT.format(t="bu_k", s="bu_ks"))
        assert conn.execute("SELECT count(*) FROM bu_k WHERE v LIKE 'new%'").fetchone()[0] > 0
        verify_table(conn, "bu_k")


def test_standby_replays_the_bulk_updates(make_cluster, tmp_path):
    """The old pages' images and the VM pages replay: the standby's rows,
    and its index-only scans (which trust the VM), match the primary's."""
    primary = make_cluster(name="bu_primary")
    standby = primary.make_standby(tmp_path)
    q = "SELECT count(*), sum(n), count(DISTINCT v) FROM bu_r WHERE id > 0"
    with primary.conn() as conn:
        make_tables(conn, "bu_r", "bu_rs", rows=20000)
        conn.execute("CHECKPOINT")
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute("/*+ APPEND */ " + UPSERT.format(t="bu_r", s="bu_rs"))
        digest = table_digest(conn, "bu_r")
        ids = conn.execute("SELECT count(*) FROM bu_r WHERE id > 0").fetchone()
        rows = conn.execute(q).fetchone()
        primary.wait_replay(standby)
    with standby.conn() as s:
        assert table_digest(s, "bu_r") == digest
        s.execute("SET enable_seqscan = off")
        s.execute("SET enable_bitmapscan = off")
        plan = s.execute("EXPLAIN SELECT count(*) FROM bu_r WHERE id > 0").fetchall()
        assert "Index Only Scan" in str(plan)
        assert s.execute("SELECT count(*) FROM bu_r WHERE id > 0").fetchone() == ids
        assert s.execute(q).fetchone() == rows
        verify_table(s, "bu_r")


MERGE = ("MERGE INTO {t} x USING {s} s ON x.id = s.id "
         "WHEN MATCHED AND x.ts < s.ts THEN UPDATE SET v = s.v, ts = s.ts, n = x.n + 1 "
         "WHEN MATCHED AND s.id % 3 = 0 THEN DO NOTHING "
         "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.ts, s.v, 0)")


def test_merge_matched_rows_in_bulk(cluster):
    """MERGE's WHEN MATCHED UPDATE in bulk, DO NOTHING and rows no action
    takes left alone, its inserts direct: the plain MERGE's outcome; a
    target row two source rows match fails with core's error."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for t in ("bu_mp", "bu_md"):
            make_tables(conn, t, "bu_ms")
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) /*+ APPEND */ " +
                            MERGE.format(t="bu_md", s="bu_ms")).fetchone()[0][0]["Plan"]
        updated = conn.execute("SELECT count(*) FROM generate_series(2, 40000, 2) g "
                               "WHERE g % 7 <> 0").fetchone()[0]
        assert plan["Updates"] == f"{updated} in bulk"
        assert plan["Plans"][0]["Tuples Updated"] == updated
        cur = conn.execute(MERGE.format(t="bu_mp", s="bu_ms"))
        assert table_digest(conn, "bu_md") == table_digest(conn, "bu_mp")
        verify_table(conn, "bu_md")
        conn.execute("UPDATE bu_ms SET ts = ts + interval '1 day'")
        conn.execute("INSERT INTO bu_ms SELECT id, ts + interval '1 s', v, n, big "
                     "FROM bu_ms WHERE id = 40")
        before = table_digest(conn, "bu_md")
        with pytest.raises(psycopg.errors.CardinalityViolation,
                           match="MERGE command cannot affect row a second time"):
            conn.execute("/*+ APPEND */ " + MERGE.format(t="bu_md", s="bu_ms"))
        assert table_digest(conn, "bu_md") == before
        assert cur.rowcount > 0


def test_copy_on_conflict_update_in_bulk(cluster, tmp_path):
    """COPY's ON_CONFLICT 'update' runs its kept rows through a hinted
    DO UPDATE: in bulk, and the rows of the plain way."""
    path = tmp_path / "rows.csv"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        for t in ("bu_cp2", "bu_cd2"):
            make_tables(conn, t, "bu_cs2")
        conn.execute(f"COPY (SELECT * FROM bu_cs2) TO '{path}' WITH (FORMAT csv)")
        conn.execute(f"COPY bu_cd2 FROM '{path}' WITH (FORMAT csv, ON_CONFLICT 'update')")
        conn.execute(f"CREATE TEMP TABLE bu_cstage (LIKE bu_cp2)")
        conn.execute(f"COPY bu_cstage FROM '{path}' WITH (FORMAT csv)")
        conn.execute("INSERT INTO bu_cp2 SELECT * FROM bu_cstage ON CONFLICT (id) DO UPDATE "
                     "SET (ts, v, n, big) = ROW(excluded.ts, excluded.v, excluded.n, excluded.big)")
        assert table_digest(conn, "bu_cd2") == table_digest(conn, "bu_cp2")
        verify_table(conn, "bu_cd2")
        # the old versions' pages were changed in place and logged as images
        conn.execute("SELECT pg_stat_force_next_flush()")
        assert conn.execute("SELECT n_tup_upd FROM pg_stat_user_tables "
                            "WHERE relname = 'bu_cd2'").fetchone()[0] == 20000


@pytest.mark.parametrize("key_sort", ["on", "off"])
def test_every_row_an_update_with_the_default_min_bytes(cluster, key_sort):
    """Nothing to insert: the load itself stays below directpath.min_bytes
    and goes the normal path (its spooled index entries handed over row by
    row), the updates are made in bulk after it.  The hand-over once began
    a tuplesort in a context it then deleted, and ended it again: freed
    memory that the updates' own contexts reused (a crash)."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.index_key_sort": key_sort})
        for t in ("bu_hp", "bu_hd"):
            make_tables(conn, t, "bu_hs", rows=20000)
            conn.execute(f"CREATE INDEX ON {t} (n)")
        conn.execute("DELETE FROM bu_hs WHERE id % 2 = 1")
        updates = explain_updates(conn, "/*+ APPEND */ " + UPSERT.format(t="bu_hd", s="bu_hs"))
        assert updates.endswith("in bulk (2857 more locked: WHERE false)"), updates
        conn.execute(UPSERT.format(t="bu_hp", s="bu_hs"))
        assert table_digest(conn, "bu_hd") == table_digest(conn, "bu_hp")
        verify_table(conn, "bu_hd")
