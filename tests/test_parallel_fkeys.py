"""Parallel loads into targets with foreign keys (parcheck.c, fkeys.c).

A parallel load's leader takes the workers' pages in parallel mode, where no
query may run, so a target whose INSERT triggers are all foreign key checks
that can be checked as a set has every key sorted from the first row and
checked once, after the workers, as a serial load's set check.  Against the
plain statement and the serial direct load: the same rows (INSERT ... SELECT
and COPY, a plain and a partitioned target, one- and two-column keys, NULL
keys); a violation fails with core's error (23503, message, DETAIL naming
the key) and leaves nothing; the referenced rows are locked FOR KEY SHARE
as a serial load locks them; and what still keeps a load serial says so.
The sets' finds run in a worker beside the leader's index work
(load/fkahead.c; a serial load's too, as max_parallel_maintenance_workers
allows): the report says how many keys it found, the rows and
errors are the same with directpath.fkey_sets_ahead off, and a referenced
row deleted or added after the worker's snapshot, before the leader takes
its rows, gives what the plain statement gives at that moment.
"""

import psycopg
import pytest

from conftest import (Background, error_of, fault_gucs, last_statement, set_gucs,
                      table_digest, verify_table, wait_fault_sleep)
from test_fkey_sets import make_parents
from test_parallel_upsert import kill_at_fault

pytestmark = pytest.mark.directpath

ROWS = 120000


def gucs(conn, extra=None):
    set_gucs(conn, dict({"directpath.min_bytes": "0"}, **(extra or {})))


def make_child(conn, t, p, partitioned=False):
    part = " PARTITION BY RANGE (n)" if partitioned else ""
    conn.execute(f"CREATE TABLE {t} (n int, a int REFERENCES {p}_a, x int, y text, "
                 f"pad text, FOREIGN KEY (x, y) REFERENCES {p}_b){part}")
    if partitioned:
        conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (0) TO (60000)")
        conn.execute(f"CREATE TABLE {t}_2 PARTITION OF {t} FOR VALUES FROM (60000) TO (MAXVALUE)")
    conn.execute(f"CREATE INDEX ON {t} (x)")


def make_source(conn, s, bad=None):
    """ROWS rows; the row numbered 'bad' gets a missing key in column a."""
    a = f"CASE WHEN g = {bad} THEN 900000 ELSE (g * 7) % 5000 + 1 END" if bad \
        else "(g * 7) % 5000 + 1"
    conn.execute(f"CREATE TABLE {s} AS SELECT g AS n, "
                 f"CASE WHEN g % 11 = 0 THEN NULL ELSE {a} END AS a, "
                 f"(g * 13) % 3000 + 1 AS x, "
                 f"CASE WHEN g % 13 = 0 THEN NULL ELSE 'y' || ((((g * 13) % 3000) + 1) % 7) END AS y, "
                 f"repeat('p', 40) AS pad FROM generate_series(1, {ROWS}) g")
    conn.execute(f"ANALYZE {s}")


def make_all(conn, p, s, children):
    """The parents, the source and an empty child table each name."""
    make_parents(conn, p)
    make_source(conn, s)
    for t in children:
        make_child(conn, t, p)


def load_sql(how, t, s, path):
    if how == "copy":
        return f"/*+ APPEND PARALLEL(2) */ COPY {t} FROM '{path}' WITH (FORMAT csv)"
    return f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT * FROM {s}"



@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("how", ["insert", "copy"])
def test_same_rows_as_plain(cluster, tmp_path, how, partitioned):
    n = 2 * int(partitioned) + (how == "copy")
    p, s, tp, td = f"pf_p{n}", f"pf_s{n}", f"pf_plain{n}", f"pf_par{n}"
    path = tmp_path / "rows.csv"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_source(conn, s)
        for t in (tp, td):
            make_child(conn, t, p, partitioned)
        conn.execute(f"COPY {s} TO '{path}' WITH (FORMAT csv)")
        gucs(conn)
        conn.execute(f"INSERT INTO {tp} SELECT * FROM {s}")
        conn.execute(load_sql(how, td, s, path))
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert st["parallel_workers"] >= 1, st
        assert "then as a set at the end:" in st["foreign_keys"], st
        assert table_digest(conn, td) == table_digest(conn, tp)
        # the index agrees with the heap
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        by_index = conn.execute(f"SELECT count(*), sum(n) FROM {td} WHERE x < 500").fetchone()
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")
        conn.execute("SET enable_indexscan = off")
        conn.execute("SET enable_bitmapscan = off")
        by_heap = conn.execute(f"SELECT count(*), sum(n) FROM {td} WHERE x < 500").fetchone()
        assert by_index == by_heap


@pytest.mark.parametrize("how", ["insert", "copy"])
@pytest.mark.parametrize("bad", [5, 70000, ROWS])
def test_violation_like_plain(cluster, tmp_path, how, bad):
    n = f"{how[0]}{bad}"
    p, s, tp, td = f"pv_p{n}", f"pv_s{n}", f"pv_plain{n}", f"pv_par{n}"
    path = tmp_path / "rows.csv"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_source(conn, s, bad=bad)
        for t in (tp, td):
            make_child(conn, t, p)
        conn.execute(f"COPY {s} TO '{path}' WITH (FORMAT csv)")
        gucs(conn)
        stmt = f"INSERT INTO {tp} SELECT * FROM {s}" if how == "insert" else \
            f"COPY {tp} FROM '{path}' WITH (FORMAT csv)"
        plain = error_of(conn, stmt)
        par = error_of(conn, load_sql(how, td, s, path))
        assert plain is not None and plain[0] == "23503"
        par = tuple(x.replace(td, tp) if isinstance(x, str) else x for x in par)
        assert par[:3] == plain[:3]
        assert conn.execute(f"SELECT count(*) FROM {td}").fetchone()[0] == 0


def test_referenced_rows_locked_as_serial(cluster):
    """The set check locks each referenced row FOR KEY SHARE, as the serial
    load does: a DELETE of a referenced parent waits; an unreferenced one
    does not; the same rows are locked as by the serial direct load."""
    p, s = "pl_p", "pl_s"
    with cluster.conn() as conn:
        # a child each: a load rolled back leaves its index entries, which
        # the next load would merge under a lock of the index
        make_all(conn, p, s, ("pl_c0", "pl_c1"))
        conn.execute(f"DELETE FROM {s} WHERE a = 4000")
        conn.execute(f"INSERT INTO {p}_a VALUES (9999)")

    def locked(bg):
        return bg.conn.execute(f"SELECT array_agg(id ORDER BY id) FROM {p}_a "
                               f"WHERE xmax = pg_current_xact_id()::xid").fetchone()[0]

    seen = {}
    for t, hint in (("pl_c0", "APPEND"), ("pl_c1", "APPEND PARALLEL(2)")):
        with Background(cluster, ["BEGIN", f"/*+ {hint} */ INSERT INTO {t} SELECT * FROM {s}"],
                        {"directpath.min_bytes": "0"}, name="loader") as bg, \
                cluster.conn() as other:
            bg.start()
            bg.join()
            assert bg.error is None, bg.error
            st = last_statement(bg.conn)
            assert (st["parallel_workers"] >= 1) == ("PARALLEL" in hint), st
            seen[hint] = locked(bg)
            other.execute("SET lock_timeout = '300ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute(f"DELETE FROM {p}_a WHERE id = 17")
            other.execute("BEGIN")
            other.execute(f"DELETE FROM {p}_a WHERE id = 9999")
            other.execute("ROLLBACK")
            bg.execute("ROLLBACK")
    assert seen["APPEND"] == seen["APPEND PARALLEL(2)"]
    assert 4000 not in seen["APPEND"] and 17 in seen["APPEND"]


REFUSALS = {
    "deferrable": ("ALTER TABLE {t} ADD FOREIGN KEY (n) REFERENCES {p}_a "
                   "DEFERRABLE", "checked per row (deferrable)"),
    "self reference": ("ALTER TABLE {t} ADD PRIMARY KEY (n), "
                       "ADD FOREIGN KEY (a) REFERENCES {t} (n)",
                       "checked per row (it references the table loaded)"),
    # its events would run before core's checks, which then see what they did
    "row trigger": ("CREATE TRIGGER tr AFTER INSERT ON {t} FOR EACH ROW "
                    "EXECUTE FUNCTION pr_noop()",
                    "checked per row (the table has AFTER ROW triggers)"),
    "set check off": ("SET directpath.fkey_set_rows = 0",
                      "has foreign keys and directpath.fkey_set_rows is 0"),
    "batches off": ("SET directpath.fkey_batches = off",
                    "checked per row (directpath.fkey_batches is off)"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_what_keeps_it_serial(cluster, case):
    n = list(REFUSALS).index(case)
    p, s, t = f"pr_p{n}", f"pr_s{n}", f"pr_c{n}"
    ddl, why = REFUSALS[case]
    with cluster.conn() as conn:
        conn.execute("CREATE OR REPLACE FUNCTION pr_noop() RETURNS trigger LANGUAGE plpgsql "
                     "AS 'BEGIN RETURN NULL; END'")
        make_parents(conn, p)
        make_source(conn, s)
        make_child(conn, t, p)
        gucs(conn)
        conn.execute(ddl.format(t=t, p=p))
        # every row's keys present: n within the parents' ids, or a row of
        # the load itself for the self reference
        src = {"deferrable": f"SELECT * FROM {s} WHERE n <= 5000",
               "self reference": f"SELECT n, CASE WHEN n > 1 THEN 1 END, x, y, pad FROM {s}",
               }.get(case, f"SELECT * FROM {s}")
        conn.execute(f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} {src}")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["parallel_workers"] == 0, st
        assert why in st["parallel"], st


def test_repeatable_read_keeps_it_serial(cluster):
    p, s, t = "prr_p", "prr_s", "prr_c"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_source(conn, s)
        make_child(conn, t, p)
        gucs(conn)
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute(f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT * FROM {s}")
        st = last_statement(conn)
        conn.execute("COMMIT")
        assert st["parallel_workers"] == 0, st
        assert "the transaction's snapshot lasts" in st["parallel"], st
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == ROWS


AHEAD = "found by a worker beside the indexes"


@pytest.mark.parametrize("how", ["insert", "copy"])
def test_sets_found_beside_the_indexes(cluster, tmp_path, how):
    """A parallel load's one-column set is found by the worker of
    fkahead.c (the report counts its keys); with fkey_sets_ahead off the
    leader finds it; the same rows and btree either way, with a BRIN and a
    hash index made beside the worker."""
    n = how[0]
    p, s = f"pa_p{n}", f"pa_s{n}"
    path = tmp_path / "rows.csv"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_source(conn, s)
        conn.execute(f"COPY {s} TO '{path}' WITH (FORMAT csv)")
        for t in (f"pa_plain{n}", f"pa_on{n}", f"pa_off{n}"):
            make_child(conn, t, p)
            # index work of other kinds in the leader's parallel mode
            conn.execute(f"CREATE INDEX ON {t} USING brin (n)")
            conn.execute(f"CREATE INDEX ON {t} USING hash (a)")
        gucs(conn)
        conn.execute(f"INSERT INTO pa_plain{n} SELECT * FROM {s}")
        digests = {}
        for ahead in ("on", "off"):
            t = f"pa_{ahead}{n}"
            conn.execute(f"SET directpath.fkey_sets_ahead = {ahead}")
            conn.execute(load_sql(how, t, s, path))
            st = last_statement(conn)
            assert st["path"] == "direct" and st["parallel_workers"] >= 1, st
            # the distinct keys of column a: 5000 ids, less the NULLs' none
            distinct = conn.execute(f"SELECT count(DISTINCT a) FROM {s}").fetchone()[0]
            if ahead == "on":
                assert f"{t}_a_fkey ({distinct} keys, {distinct} {AHEAD})" in \
                    st["foreign_keys"], st
            else:
                assert AHEAD not in st["foreign_keys"], st
                assert f"{t}_a_fkey ({distinct} keys)" in st["foreign_keys"], st
            digests[ahead] = table_digest(conn, t)
            conn.execute("RESET directpath.fkey_sets_ahead")
        assert digests["on"] == digests["off"] == table_digest(conn, f"pa_plain{n}")
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        for ahead in ("on", "off"):
            for (idx,) in conn.execute(
                    "SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_class c "
                    "ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
                    f"WHERE indrelid = 'pa_{ahead}{n}'::regclass AND amname = 'btree'"
                    ).fetchall():
                conn.execute("SELECT bt_index_check(%s, true)", (idx,))


@pytest.mark.parametrize("change", ["delete", "insert"])
def test_parent_changed_after_the_workers_snapshot(cluster, change):
    """The worker finds the keys with a snapshot taken before the indexes;
    the leader takes its rows after them.  A referenced row deleted (and
    committed) in between: the leader's lock sees it gone and the check
    query's fresh snapshot misses the key: core's error, as the plain
    statement's check at that moment gives.  A referenced row added in
    between for a key the worker missed: the check query finds and locks
    it, no error, as plain."""
    p, s, t = f"pc_p{change[0]}", f"pc_s{change[0]}", f"pc_c{change[0]}"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_source(conn, s, bad=ROWS // 2 if change == "insert" else None)
        make_child(conn, t, p)
    # key 17 is referenced by the load; 900000 (the 'bad' row's) is not a parent yet
    other_sql = {"delete": f"DELETE FROM {p}_a WHERE id = 17",
                 "insert": f"INSERT INTO {p}_a VALUES (900000)"}[change]
    point = "fkey_sets_ahead"
    settings = dict({"directpath.min_bytes": "0"}, **fault_gucs(point, sleep_ms=4000))
    offset = cluster.log_size()
    with Background(cluster, ["BEGIN",
                              f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT * FROM {s}"],
                    settings, name="loader") as bg, cluster.conn() as other:
        bg.start()
        wait_fault_sleep(cluster, bg, point, offset)
        other.execute(other_sql)
        bg.join()
        if change == "delete":
            assert bg.sqlstate == "23503", bg.error
            assert "Key (a)=(17) is not present" in str(bg.error.diag.message_detail), bg.error
            bg.execute("ROLLBACK")
            assert other.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0
            return
        assert bg.error is None, bg.error
        st = last_statement(bg.conn)
        assert st["parallel_workers"] >= 1, st
        # the added parent is locked FOR KEY SHARE by the load's check
        other.execute("SET lock_timeout = '300ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute(f"DELETE FROM {p}_a WHERE id = 900000")
        bg.execute("COMMIT")
        assert other.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == ROWS


@pytest.mark.parametrize("how", ["kill-worker", "kill-leader"])
def test_killed_while_sets_found_ahead(cluster, how):
    """The worker that finds the sets, or the leader, killed while both
    sleep at fkey_sets_ahead (the worker before its finds, the leader after
    the indexes): after crash recovery nothing of the load is visible, and
    the same load then gives the plain statement's rows."""
    p, s, t = f"pk_p{how[5]}", f"pk_s{how[5]}", f"pk_c{how[5]}"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_source(conn, s)
        make_child(conn, t, p)
        make_child(conn, f"{t}_plain", p)
        conn.execute(f"INSERT INTO {t}_plain SELECT * FROM {s}")
    off = cluster.log_size()
    settings = dict({"directpath.min_bytes": "0"},
                    **fault_gucs("fkey_sets_ahead", sleep_ms=60_000))
    bg = Background(cluster, [f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT * FROM {s}"],
                    settings, name="loader")
    kill_at_fault(cluster, bg, "fkey_sets_ahead", off, how == "kill-worker", True)
    with cluster.conn() as conn:
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0
        verify_table(conn, t)
        # emptied: a leaf that had rows (the killed load's) merges its
        # indexes, and its sets are found after them (finish.c)
        conn.execute(f"TRUNCATE {t}")
        gucs(conn)
        conn.execute(f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT * FROM {s}")
        assert AHEAD in last_statement(conn)["foreign_keys"]
        assert table_digest(conn, t) == table_digest(conn, f"{t}_plain")



def test_table_with_rows_finds_after_the_indexes(cluster):
    """A second parallel load into the same table (it has rows: its index
    entries may be merged into a rewrite, a catalog change parallel mode
    forbids) finds its sets after the index work, and gives the rows of
    the plain statement run twice."""
    p, s = "pw_p", "pw_s"
    with cluster.conn() as conn:
        make_all(conn, p, s, ("pw_plain", "pw_par"))
        gucs(conn)
        for _ in range(2):
            conn.execute(f"INSERT INTO pw_plain SELECT * FROM {s}")
        conn.execute(load_sql("insert", "pw_par", s, None))
        assert AHEAD in last_statement(conn)["foreign_keys"]
        conn.execute(load_sql("insert", "pw_par", s, None))
        st = last_statement(conn)
        assert st["parallel_workers"] >= 1 and AHEAD not in st["foreign_keys"], st
        assert "then as a set at the end:" in st["foreign_keys"], st
        assert table_digest(conn, "pw_par") == table_digest(conn, "pw_plain")
        verify_table(conn, "pw_par")


def test_serial_load_finds_its_sets_beside_the_indexes(cluster):
    """A serial direct load's sets are found by a worker too, as
    max_parallel_maintenance_workers allows (core's CREATE INDEX takes its
    workers so); with it 0, or no worker to be had (max_parallel_workers
    0), by the leader after the indexes; the same rows as the plain
    statement each way."""
    p, s = "ps_p", "ps_s"
    with cluster.conn() as conn:
        make_all(conn, p, s, ("ps_plain", "ps_on", "ps_off", "ps_none"))
        gucs(conn, {"directpath.fkey_set_rows": "2000"})
        conn.execute(f"INSERT INTO ps_plain SELECT * FROM {s}")
        for t, maintenance, workers in (("ps_on", 2, 8), ("ps_off", 0, 8), ("ps_none", 2, 0)):
            conn.execute(f"SET max_parallel_maintenance_workers = {maintenance}")
            conn.execute(f"SET max_parallel_workers = {workers}")
            conn.execute(f"/*+ APPEND */ INSERT INTO {t} SELECT * FROM {s}")
            st = last_statement(conn)
            assert st["path"] == "direct" and st["parallel_workers"] == 0, st
            assert (AHEAD in st["foreign_keys"]) == (t == "ps_on"), st
            assert table_digest(conn, t) == table_digest(conn, "ps_plain")
        conn.execute("RESET max_parallel_maintenance_workers")
        conn.execute("RESET max_parallel_workers")

