"""Bad input and limits: every error a load can meet gives the SQLSTATE of a
plain INSERT ... SELECT of the same rows, at the same step, leaves nothing
visible, leaves a table that verify_table passes and that takes another
direct load.

Each statement is run twice, on twin tables: without the hint (plain) and
with it (direct path, directpath.batch_pages = 8, min_bytes = 0).  The bad
row is late in the input where that is possible, so that the direct path has
written batches of pages before the error (checked with a fault point in
`notice` mode at batch_written)."""

import time
from dataclasses import dataclass, field

import psycopg
import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, Background, count_sum,
                      crash_backend, fault_gucs, last_statement, seed_insert,
                      set_gucs, table_digest, verify_table, wait_fault_sleep,
                      wait_lock_wait)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

ROWS = 20_000
BAD = 15_000    # the bad row (of ROWS)
HINT = "/*+ APPEND */ "

GOOD_DEFAULT = "INSERT INTO {t} SELECT g + 1000000, g FROM generate_series(1, 3000) g"
PRE_DEFAULT = "INSERT INTO {t} SELECT -g, -g FROM generate_series(1, 100) g"


@dataclass
class Bad:
    name: str
    ddl: list
    load: str                   # "{hint}INSERT INTO {t} ..."
    sqlstate: str
    shape: str = "auto"         # auto | txn (BEGIN; load; COMMIT) | truncate
    fails_at: str = "load"      # load | COMMIT
    pre: str = PRE_DEFAULT
    good: str = GOOD_DEFAULT
    pages_first: bool = True    # direct: batches written before the error
    settings: dict = field(default_factory=dict)


AB = "CREATE TABLE {t} (a int, b int)"

CASES = [
    Bad("row_too_big",
        ["CREATE TABLE {t} (a int, b text)",
         "ALTER TABLE {t} ALTER b SET STORAGE PLAIN"],
        "{hint}INSERT INTO {t} SELECT g, CASE WHEN g = %d THEN "
        "(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) i) "
        "ELSE 'x' END FROM generate_series(1, %d) g" % (BAD, ROWS),
        "54000"),
    Bad("row_too_big_first_row",
        ["CREATE TABLE {t} (a int, b text)",
         "ALTER TABLE {t} ALTER b SET STORAGE PLAIN"],
        "{hint}INSERT INTO {t} SELECT g, repeat(md5(g::text), 300) "
        "FROM generate_series(1, %d) g" % ROWS,
        "54000", pages_first=False),
    Bad("row_too_big_fixed_width",
        ["CREATE TABLE {t} (a int, b int, %s)"
         % ", ".join(f"c{i} int8 DEFAULT {i}" for i in range(1100))],
        "{hint}INSERT INTO {t} (a, b) SELECT g, g FROM generate_series(1, %d) g" % ROWS,
        "54000", pages_first=False, pre=None, good=None),
    Bad("not_null",
        ["CREATE TABLE {t} (a int NOT NULL, b int)"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN NULL ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23502"),
    Bad("check",
        ["CREATE TABLE {t} (a int CHECK (a < %d), b int)" % BAD],
        "{hint}INSERT INTO {t} SELECT g, g FROM generate_series(1, %d) g" % ROWS,
        "23514", good="INSERT INTO {t} SELECT -g - 1000, g FROM generate_series(1, 3000) g"),
    Bad("check_truncated",
        ["CREATE TABLE {t} (a int CHECK (a < %d), b int)" % BAD],
        "{hint}INSERT INTO {t} SELECT g, g FROM generate_series(1, %d) g" % ROWS,
        "23514", shape="truncate",
        good="INSERT INTO {t} SELECT -g - 1000, g FROM generate_series(1, 3000) g"),
    Bad("unique_within_load",
        ["CREATE TABLE {t} (a int PRIMARY KEY, b int)"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN 5 ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23505"),
    Bad("unique_within_load_truncated",
        ["CREATE TABLE {t} (a int PRIMARY KEY, b int)", "CREATE INDEX ON {t} (b)"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN 5 ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23505", shape="truncate"),
    Bad("unique_against_existing",
        ["CREATE TABLE {t} (a int PRIMARY KEY, b int)"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN -7 ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23505"),
    Bad("unique_multicolumn_last_row",
        ["CREATE TABLE {t} (a int, b int, UNIQUE (b, a))"],
        "{hint}INSERT INTO {t} SELECT g %% 7, g FROM generate_series(1, %d) g "
        "UNION ALL SELECT 3, 3" % ROWS,
        "23505"),
    Bad("deferrable_unique_deferred",
        ["CREATE TABLE {t} (a int UNIQUE DEFERRABLE INITIALLY DEFERRED, b int)"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN 5 ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23505", shape="txn", fails_at="COMMIT"),
    Bad("deferrable_unique_deferred_truncated",
        ["CREATE TABLE {t} (a int UNIQUE DEFERRABLE INITIALLY DEFERRED, b int)"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN 5 ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23505", shape="truncate", fails_at="COMMIT"),
    Bad("deferrable_unique_immediate",
        ["CREATE TABLE {t} (a int UNIQUE DEFERRABLE INITIALLY IMMEDIATE, b int)"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN 5 ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23505"),
    Bad("exclusion",
        ["CREATE TABLE {t} (a int, b int, EXCLUDE USING btree (a WITH =))"],
        "{hint}INSERT INTO {t} SELECT CASE WHEN g = %d THEN 5 ELSE g END, g "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "23P01"),
    Bad("foreign_key",
        ["CREATE TABLE {t}_parent (id int PRIMARY KEY)",
         "INSERT INTO {t}_parent SELECT g FROM generate_series(-100, %d) g WHERE g <> %d"
         % (ROWS, BAD),
         "CREATE TABLE {t} (a int REFERENCES {t}_parent, b int)"],
        "{hint}INSERT INTO {t} SELECT g, g FROM generate_series(1, %d) g" % ROWS,
        "23503", good="INSERT INTO {t} SELECT g, g FROM generate_series(1, 3000) g"),
    Bad("foreign_key_deferred",
        ["CREATE TABLE {t}_parent (id int PRIMARY KEY)",
         "INSERT INTO {t}_parent SELECT g FROM generate_series(-100, %d) g WHERE g <> %d"
         % (ROWS, BAD),
         "CREATE TABLE {t} (a int REFERENCES {t}_parent DEFERRABLE INITIALLY DEFERRED, b int)"],
        "{hint}INSERT INTO {t} SELECT g, g FROM generate_series(1, %d) g" % ROWS,
        "23503", shape="txn", fails_at="COMMIT",
        good="INSERT INTO {t} SELECT g, g FROM generate_series(1, 3000) g"),
    Bad("cast_error",
        [AB],
        "{hint}INSERT INTO {t} SELECT g, (CASE WHEN g = %d THEN 'x' ELSE g::text END)::int "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "22P02"),
    Bad("assignment_overflow",
        ["CREATE TABLE {t} (a int, b smallint)"],
        "{hint}INSERT INTO {t} SELECT g, CASE WHEN g = %d THEN 99999 ELSE 1 END "
        "FROM generate_series(1, %d) g" % (BAD, ROWS),
        "22003", good="INSERT INTO {t} SELECT g + 1000000, 1 FROM generate_series(1, 3000) g"),
    Bad("division_by_zero_truncated",
        [AB],
        "{hint}INSERT INTO {t} SELECT g, 1 / (g - %d) FROM generate_series(1, %d) g"
        % (BAD, ROWS),
        "22012", shape="truncate"),
    Bad("statement_timeout",
        [AB],
        "{hint}INSERT INTO {t} SELECT g, g + length(CASE WHEN g = %d THEN pg_sleep(30)::text "
        "ELSE '' END) FROM generate_series(1, %d) g" % (BAD, ROWS),
        "57014", settings={"statement_timeout": "1500ms"}),
    Bad("statement_timeout_truncated",
        [AB],
        "{hint}INSERT INTO {t} SELECT g, g + length(CASE WHEN g = %d THEN pg_sleep(30)::text "
        "ELSE '' END) FROM generate_series(1, %d) g" % (BAD, ROWS),
        "57014", shape="truncate", settings={"statement_timeout": "1500ms"}),
]


def drop(conn, t):
    conn.execute(f"DROP TABLE IF EXISTS {t}, {t}_parent CASCADE")


def statements(case, t, hint):
    load = case.load.format(t=t, hint=HINT if hint else "")
    if case.shape == "auto":
        return [load]
    if case.shape == "txn":
        return ["BEGIN", load, "COMMIT"]
    return ["BEGIN", f"TRUNCATE {t}", load, "COMMIT"]


def run_one(cluster, case, mode):
    """-> (sqlstate, failing step, message) of the case on the `mode` path
    (the table's name in the message replaced by T)."""
    t = f"bad_{case.name}_{mode}"
    direct = mode == "direct"
    with cluster.conn() as conn:
        drop(conn, t)
        for s in case.ddl:
            conn.execute(s.format(t=t))
        if case.pre:
            conn.execute(case.pre.format(t=t))
        before = table_digest(conn, t)
    with cluster.conn() as sess:
        notices = []
        sess.add_notice_handler(lambda d: notices.append(d.message_primary))
        set_gucs(sess, SMALL_BATCHES)
        if direct:
            plan = "\n".join(r[0] for r in sess.execute(
                "EXPLAIN (COSTS OFF) " + case.load.format(t=t, hint=HINT)).fetchall())
            assert "Direct Path: on" in plan, plan
            set_gucs(sess, fault_gucs("batch_written", 1, action="notice"))
        set_gucs(sess, case.settings)
        outcome = (None, None, None)
        stmts = statements(case, t, direct)
        for s in stmts:
            try:
                sess.execute(s)
            except psycopg.Error as e:
                step = "COMMIT" if s == "COMMIT" else ("load" if "INSERT" in s else s)
                outcome = (e.sqlstate, step, (e.diag.message_primary or "").replace(t, "T"))
                if sess.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    sess.execute("ROLLBACK")
                break
        for k in case.settings:
            sess.execute(f"RESET {k}")
        wrote = any('fault point "batch_written"' in n for n in notices)
        if direct and case.pages_first:
            assert wrote, f"{case.name}: no batch written before the error: {notices}"

        # Nothing of the failed load is visible, the table is sound and
        # takes another (direct) load.
        assert table_digest(sess, t) == before, f"{case.name} ({mode}): rows left behind"
        verify_table(sess, t)
        if case.good:
            sess.execute("RESET directpath.fault_point")
            n0 = sess.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            sess.execute(HINT + case.good.format(t=t))
            st = last_statement(sess)
            assert st["path"] == "direct", st
            assert sess.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == n0 + 3000
            verify_table(sess, t)
    return outcome


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_same_as_plain(cluster, case):
    plain = run_one(cluster, case, "plain")
    direct = run_one(cluster, case, "direct")
    assert plain[:2] == (case.sqlstate, case.fails_at), f"plain path: {plain}"
    assert direct == plain, f"plain {plain}, direct {direct}"


# -- interrupts and locks ------------------------------------------------------

def make_ab(conn, t, rows=100):
    conn.execute(f"DROP TABLE IF EXISTS {t}")
    conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS}")
    conn.execute(f"CREATE INDEX {t}_indid ON {t} (indid)")
    conn.execute(seed_insert(t, rows, hint=False))
    return table_digest(conn, t)


def after_checks(cluster, t, before):
    with cluster.conn() as conn:
        assert table_digest(conn, t) == before
        verify_table(conn, t)
        # no checkpoint delay left behind by the interrupted load
        conn.execute("SET statement_timeout = '60s'")
        conn.execute("CHECKPOINT")
        set_gucs(conn, SMALL_BATCHES)
        conn.execute(seed_insert(t, 5100, start=101))
        assert last_statement(conn)["path"] == "direct"
        assert count_sum(conn, t)[0] == 5100
        verify_table(conn, t)


SLEEPY = ("{hint}INSERT INTO {t} SELECT a %% 50, a %% 10000, a, "
          "a + length(CASE WHEN a = %d THEN pg_sleep(60)::text ELSE '' END) "
          "FROM generate_series(101, %d) a" % (BAD, ROWS))


@pytest.mark.parametrize("how", ["pg_sleep", "fault_batch_written", "fault_batch_wal"])
def test_cancel_mid_load(cluster, how):
    """pg_cancel_backend during a load: 57014 as for a plain INSERT."""
    outcomes = {}
    for mode in ("plain", "direct"):
        if how != "pg_sleep" and mode == "plain":
            outcomes[mode] = "57014"        # the plain twin is the pg_sleep case
            continue
        t = f"cancel_{how}_{mode}"
        with cluster.conn() as conn:
            before = make_ab(conn, t)
        settings = dict(SMALL_BATCHES)
        if how == "pg_sleep":
            sql = SLEEPY.format(t=t, hint=HINT if mode == "direct" else "")
        else:
            point = how[len("fault_"):]
            settings.update(fault_gucs(point, 2))
            sql = seed_insert(t, ROWS, start=101)
        off = cluster.log_size()
        with Background(cluster, ["BEGIN", sql, "COMMIT"], settings) as bg, \
                cluster.conn() as mon:
            bg.start()
            if how == "pg_sleep":
                deadline = time.monotonic() + 60
                while mon.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s",
                                  (bg.pid,)).fetchone()[0] != "PgSleep":
                    assert time.monotonic() < deadline and not bg.done.is_set(), bg.error
                    time.sleep(0.05)
            else:
                wait_fault_sleep(cluster, bg, point, off)
            assert mon.execute("SELECT pg_cancel_backend(%s)", (bg.pid,)).fetchone()[0]
            bg.join()
            outcomes[mode] = bg.sqlstate
        after_checks(cluster, t, before)
    assert outcomes["plain"] == "57014"
    assert outcomes["direct"] == outcomes["plain"], outcomes


def test_statement_timeout_in_checkpoint_delay_window(cluster):
    """statement_timeout while the load sits between a batch's WAL and its
    page writes: 57014, the delay flag is cleared (CHECKPOINT completes)."""
    t = "timeout_window"
    with cluster.conn() as conn:
        before = make_ab(conn, t)
    with cluster.conn() as sess:
        set_gucs(sess, dict(SMALL_BATCHES, **fault_gucs("batch_wal", 2)))
        sess.execute("SET statement_timeout = '1s'")
        with pytest.raises(psycopg.errors.QueryCanceled):
            sess.execute(seed_insert(t, ROWS, start=101))
    after_checks(cluster, t, before)


def test_lock_timeout_behind_conflicting_lock(cluster):
    """Another session holds a lock that blocks any INSERT: lock_timeout
    fires with 55P03 on both paths."""
    outcomes = {}
    for mode in ("plain", "direct"):
        t = f"locktimeout_{mode}"
        with cluster.conn() as conn:
            before = make_ab(conn, t)
        holder = cluster.conn(autocommit=False)
        try:
            holder.execute(f"LOCK TABLE {t} IN SHARE MODE")
            with cluster.conn() as sess:
                set_gucs(sess, SMALL_BATCHES)
                sess.execute("SET lock_timeout = '500ms'")
                t0 = time.monotonic()
                try:
                    sess.execute(seed_insert(t, ROWS, start=101, hint=mode == "direct"))
                    outcomes[mode] = None
                except psycopg.Error as e:
                    outcomes[mode] = e.sqlstate
                assert time.monotonic() - t0 < 10
        finally:
            holder.rollback()
            holder.close()
        after_checks(cluster, t, before)
    assert outcomes == {"plain": "55P03", "direct": "55P03"}, outcomes


def test_loader_terminated_while_holding_lock(cluster):
    """A loader terminated (pg_terminate_backend) while it holds the table's
    lock: it fails with 57P01, the loader queued behind it proceeds."""
    t = "terminated"
    with cluster.conn() as conn:
        make_ab(conn, t)
    off = cluster.log_size()
    first = seed_insert(t, ROWS, start=101)
    second = seed_insert(t, ROWS + 5000, start=ROWS + 1)
    with Background(cluster, ["BEGIN", first, "COMMIT"],
                    dict(SMALL_BATCHES, **fault_gucs("batch_done", 2)), name="a") as a, \
            Background(cluster, second, SMALL_BATCHES, name="b") as b, \
            cluster.conn() as mon:
        a.start()
        wait_fault_sleep(cluster, a, "batch_done", off)
        b.start()
        wait_lock_wait(mon, b.pid)
        assert mon.execute("SELECT pg_terminate_backend(%s)", (a.pid,)).fetchone()[0]
        a.join()
        b.join(60)
        assert a.sqlstate == "57P01" or isinstance(a.error, psycopg.OperationalError), a.error
        assert b.error is None, b.error
        st = last_statement(b.conn)
        assert st["path"] == "direct" and st["rows_inserted"] == 5000, st
    with cluster.conn() as conn:
        assert count_sum(conn, t)[0] == 100 + 5000
        verify_table(conn, t)


def test_loader_killed_while_holding_lock(make_cluster):
    """SIGKILL of a loader holding the lock (crash restart): the next loader
    proceeds on the direct path."""
    c = make_cluster()
    t = "killed"
    with c.conn() as conn:
        before = make_ab(conn, t)
    off = c.log_size()
    with Background(c, seed_insert(t, ROWS, start=101),
                    dict(SMALL_BATCHES, **fault_gucs("batch_written", 2))) as a:
        a.start()
        wait_fault_sleep(c, a, "batch_written", off)
        crash_backend(c, a.pid)
        a.join()
        assert a.error is not None
    with c.conn() as conn:
        assert table_digest(conn, t) == before
        set_gucs(conn, dict(SMALL_BATCHES, lock_timeout="5s"))
        conn.execute(seed_insert(t, 5100, start=101))
        assert last_statement(conn)["path"] == "direct"
        assert count_sum(conn, t)[0] == 5100
        verify_table(conn, t)
