"""pytest harness for directpath: throwaway PostgreSQL clusters.

Environment:
  DP_PG_BINDIR  bin/ of the PostgreSQL under test (default: <repo>/.pg/18/bin)
  DP_NO_EXT=1   start clusters without shared_preload_libraries='directpath'
                and skip the tests marked `directpath` (harness self-test)
  DP_TEST_FSYNC=on  clusters with fsync on (default off; test_durability's
                have it on either way)

Clusters are pgharness's (the package at the repository root, shared with
bench/): pg_ctl on a data directory of their own, a free 127.0.0.1 port and a
private unix socket directory, stopped (by pg_ctl on that data directory, or
by their own postmaster pid) at teardown.  Here: the test settings, fixtures
and the checks the tests share.  PostgreSQL refuses to run as root: run this
through scripts/test.sh.
"""

import os
import re
import signal
import sys
import time
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pgharness.cluster  # noqa: E402
from pgharness.build import missing_install, pg_bindir  # noqa: E402
from pgharness.proc import HarnessError, pid_alive  # noqa: E402
from pgharness.sql import (TABLE_COLUMNS, heap_blocks, leaf_tables, seed_insert,  # noqa: E402,F401
                           seed_select, seed_sum, vm_summary)
from pgharness.sql import last_statement as _last_statement  # noqa: E402

NO_EXT = os.environ.get("DP_NO_EXT", "") not in ("", "0")

ClusterError = HarnessError

# Postmaster pids started by this test session (for the final leak check).
STARTED_POSTMASTERS = set()
# Clusters not yet cleaned up (their logs are attached to failing tests).
LIVE_CLUSTERS = []


# fsync is off unless DP_TEST_FSYNC=on: the tests crash servers (immediate
# stops, killed processes), never the machine, so what a server wrote is in
# the operating system's cache after every crash they make, and the flushes
# only cost time (two files on 18: 195 s with it, 177 s without).  The code paths run
# either way (sync requests are registered and processed; pg_fsync returns
# early).  test_durability's clusters ask for it (FSYNC_ON).
FSYNC = os.environ.get("DP_TEST_FSYNC", "off") == "on"
FSYNC_ON = {"fsync": "on"}


def cluster_settings(wal_level):
    """What every test cluster runs with (extra_conf comes after)."""
    return {
        "shared_preload_libraries": "" if NO_EXT else "directpath",
        "fsync": FSYNC,
        "synchronous_commit": True,
        "full_page_writes": True,
        "wal_level": wal_level,
        "max_wal_senders": 0 if wal_level == "minimal" else 10,
        "wal_keep_size": "512MB",
        "max_wal_size": "2GB",
        "checkpoint_timeout": "1h",
        "hot_standby": True,
        "autovacuum": False,
        "max_connections": 40,
        "restart_after_crash": True,
        "lc_messages": "C",
        "log_line_prefix": "%m [%p] %q%a ",
        "log_checkpoints": True,
    }


class Cluster(pgharness.cluster.Cluster):
    """A test cluster in <tmp_path>/<name>/data: pgharness's Cluster with the
    test settings, registered for the log attached to failures and for the
    leak check at the end of the session."""

    def __init__(self, bindir, tmp_path, *, wal_level="replica", checksums=True,
                 extra_conf=None, name="primary", initdb=True):
        super().__init__(bindir, tmp_path, name, checksums=checksums)
        self.wal_level = wal_level
        LIVE_CLUSTERS.append(self)
        if initdb:
            self.initdb()
            self.configure(cluster_settings(wal_level), extra_conf)

    def start(self, timeout=120):
        try:
            return super().start(timeout)
        finally:
            if self.pid:
                STARTED_POSTMASTERS.add(self.pid)

    def cleanup(self):
        super().cleanup()
        if self in LIVE_CLUSTERS:
            LIVE_CLUSTERS.remove(self)

    def peer(self, base, name):
        return Cluster(self.bindir, base, wal_level=self.wal_level, checksums=self.checksums,
                       name=name, initdb=False)


# -- SQL helpers -----------------------------------------------------------

def error_of(conn, sql):
    """Run one statement: None when it succeeds, else its error as
    (SQLSTATE, message, DETAIL, CONTEXT), for comparing two statements'."""
    try:
        conn.execute(sql)
    except psycopg.Error as e:
        return (e.sqlstate, e.diag.message_primary, e.diag.message_detail, e.diag.context)
    return None


def errors_of_both(conn, how, rows, t_plain, t_direct, path, hint="/*+ APPEND */"):
    """The errors (error_of) of loading the rows of the SELECT 'rows' into
    t_plain by the plain statement and into t_direct with 'hint': by
    INSERT ... SELECT, or (how == "copy") by COPY from a CSV file written to
    'path' first.  The direct error's names are mapped to t_plain's, so the
    two compare equal when only the table differs."""
    if how == "copy":
        conn.execute(f"COPY ({rows}) TO '{path}' WITH (FORMAT csv)")
        stmt = "COPY {t} FROM '" + str(path) + "' WITH (FORMAT csv)"
    else:
        stmt = "INSERT INTO {t} " + rows
    plain = error_of(conn, stmt.format(t=t_plain))
    direct = error_of(conn, hint + " " + stmt.format(t=t_direct))
    return plain, renamed(direct, t_direct, t_plain)


def renamed(error, t_direct, t_plain):
    """An error (error_of) with t_direct's names as t_plain's, or None."""
    if error is None:
        return None
    return tuple(x.replace(t_direct, t_plain) if isinstance(x, str) else x for x in error)


def last_statement(conn):
    """directpath.last_statement() as a dict."""
    row = _last_statement(conn)
    assert row is not None, "directpath.last_statement() returned no row"
    return row


def table_digest(conn, table):
    """(count, order-independent hash of the contents) of a table."""
    return tuple(conn.execute(
        f"SELECT count(*), coalesce(sum(hashtext(x::text)), 0) FROM {table} x").fetchone())


def run_both(conn, stmt, t_plain, t_direct):
    """Run 'stmt' ({t}: the target) plain on one table and hinted on the
    other; return what each did (row count, sorted RETURNING rows, the
    table's digest) and the hinted one's last_statement()."""
    out = {}
    for kind, t in (("plain", t_plain), ("direct", t_direct)):
        sql = stmt.format(t=t)
        if kind == "direct":
            sql = "/*+ APPEND */ " + sql
        cur = conn.execute(sql)
        ret = sorted(cur.fetchall()) if cur.description else None
        out[kind] = {"rowcount": cur.rowcount, "returning": ret,
                     "digest": table_digest(conn, t)}
        if kind == "direct":
            out["report"] = last_statement(conn)
    return out


def page_lsns(conn, table):
    """Page LSN of every heap block (needs pageinspect)."""
    return [r[0] for r in conn.execute(
        "SELECT (page_header(get_raw_page(%s, 'main', b::int))).lsn::text "
        "FROM generate_series(0, pg_relation_size(%s::regclass) / "
        "current_setting('block_size')::int - 1) b ORDER BY b",
        (table, table)).fetchall()]


def verify_table(conn, table, frozen_expected=None):
    """amcheck + pg_visibility checks of one table; returns what it saw.

    Every btree index gets bt_index_parent_check with heapallindexed and
    rootdescend (bt_index_check on a standby).

    frozen_expected=True additionally requires every heap block to be
    all-visible and all-frozen in the visibility map.
    """
    bad = conn.execute(
        "SELECT blkno, offnum, attnum, msg FROM verify_heapam(%s::regclass, "
        "on_error_stop => false, check_toast => true) LIMIT 20", (table,)).fetchall()
    assert bad == [], f"verify_heapam({table}) reports corruption: {bad}"

    idx = [r[0] for r in conn.execute(
        "SELECT i.indexrelid::regclass::text FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
        "WHERE i.indrelid = %s::regclass AND a.amname = 'btree' ORDER BY 1",
        (table,)).fetchall()]
    # the strongest check where it may run (a standby has bt_index_check only)
    standby = conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    for i in idx:
        if standby:
            conn.execute("SELECT bt_index_check(%s::regclass, heapallindexed => true)", (i,))
        else:
            conn.execute("SELECT bt_index_parent_check(%s::regclass, heapallindexed => true, "
                         "rootdescend => true)", (i,))

    notvis = conn.execute("SELECT t_ctid::text FROM pg_check_visible(%s::regclass) LIMIT 20",
                          (table,)).fetchall()
    assert notvis == [], f"pg_check_visible({table}): all-visible pages hold non-visible tuples {notvis}"
    notfrozen = conn.execute("SELECT t_ctid::text FROM pg_check_frozen(%s::regclass) LIMIT 20",
                             (table,)).fetchall()
    assert notfrozen == [], f"pg_check_frozen({table}): all-frozen pages hold unfrozen tuples {notfrozen}"

    nblocks = heap_blocks(conn, table)
    all_visible, all_frozen = vm_summary(conn, table)
    if frozen_expected:
        assert nblocks > 0, f"{table} is empty"
        assert (all_visible, all_frozen) == (nblocks, nblocks), (
            f"{table}: {nblocks} heap blocks but the VM has {all_visible} all-visible, "
            f"{all_frozen} all-frozen")
    return {"blocks": nblocks, "all_visible": all_visible, "all_frozen": all_frozen,
            "indexes": idx}


EXTENSIONS = ("amcheck", "pg_visibility", "pageinspect")


def setup_extensions(cluster, dbname="postgres"):
    with cluster.conn(dbname) as c:
        if not NO_EXT:
            c.execute("CREATE EXTENSION IF NOT EXISTS directpath")
        for e in EXTENSIONS:
            c.execute(f"CREATE EXTENSION IF NOT EXISTS {e}")


def _check_installed():
    """Fail fast, and clearly, when directpath is not installed."""
    if NO_EXT:
        return
    bindir = pg_bindir()
    missing = missing_install(bindir)
    if missing:
        pytest.fail(f"directpath is not installed in {bindir.parent} (missing "
                    f"{', '.join(map(str, missing))}): run "
                    f"make PG_CONFIG={bindir}/pg_config install, or set DP_NO_EXT=1 "
                    f"for the harness self-test", pytrace=False)


# -- fixtures --------------------------------------------------------------

@pytest.fixture(scope="session")
def bindir():
    b = pg_bindir()
    if not (b / "postgres").exists():
        pytest.fail(f"no PostgreSQL in {b}: set DP_PG_BINDIR or run scripts/provision.sh",
                    pytrace=False)
    _check_installed()
    return b


@pytest.fixture(scope="module")
def cluster(bindir, tmp_path_factory):
    """One started cluster per test module, extensions created in postgres."""
    c = Cluster(bindir, tmp_path_factory.mktemp("module"), name="module")
    try:
        c.start()
        setup_extensions(c)
        yield c
    finally:
        c.cleanup()


@pytest.fixture
def make_cluster(bindir, tmp_path):
    """Factory: make_cluster(wal_level=..., checksums=..., extra_conf=...,
    start=True, extensions=True) -> started Cluster, stopped at teardown."""
    made = []

    def factory(name=None, start=True, extensions=True, **opts):
        c = Cluster(bindir, tmp_path, name=name or f"c{len(made)}", **opts)
        made.append(c)
        if start:
            c.start()
            if extensions:
                setup_extensions(c)
        return c

    yield factory
    for c in reversed(made):
        c.cleanup()


# -- hooks -----------------------------------------------------------------

def pytest_sessionstart(session):
    if os.geteuid() == 0:
        pytest.exit("PostgreSQL refuses to run as root: run scripts/test.sh "
                    "(it switches to an unprivileged user)", returncode=4)


def pytest_collection_modifyitems(config, items):
    if NO_EXT:
        skip = pytest.mark.skip(reason="DP_NO_EXT=1: directpath not loaded")
        for item in items:
            if "directpath" in item.keywords:
                item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and call.when in ("setup", "call"):
        for c in list(LIVE_CLUSTERS):
            rep.sections.append((f"server log {c.name} ({c.datadir})",
                                 c.log_tail(60) or "(empty)"))


def pytest_sessionfinish(session, exitstatus):
    # Whatever happened, no server of ours may outlive the session.
    for c in list(LIVE_CLUSTERS):
        c.cleanup()
    alive = [p for p in STARTED_POSTMASTERS if pid_alive(p)]
    if alive:
        print(f"\nWARNING: postmasters still alive after the session: {alive}")


# -- reliability helpers (tests marked `reliability`) ----------------------
#
# Small loads made of many batches, fault points, statements run on their own
# connection in a thread, SQLSTATE comparisons with the plain path.

import threading  # noqa: E402  (appended section)

# Settings for small loads that still make many batches (direct path forced).
SMALL_BATCHES = {"directpath.min_bytes": "0", "directpath.batch_pages": "8"}


def set_gucs(conn, settings):
    """set_config() each of a dict of settings (session level)."""
    for k, v in (settings or {}).items():
        conn.execute("SELECT set_config(%s, %s, false)", (k, str(v)))


def fault_gucs(point, hit=1, action="sleep", sleep_ms=120_000):
    return {"directpath.fault_point": point, "directpath.fault_hit": str(hit),
            "directpath.fault_action": action, "directpath.fault_sleep_ms": str(sleep_ms)}


def connect_as(cluster, user, dbname="postgres", autocommit=True, **kw):
    """A connection as another role (the clusters use trust authentication)."""
    return cluster.conn(dbname, autocommit, user=user, **kw)


def count_sum(conn, table):
    """(count(*), sum(value)) of a seed-like table."""
    return tuple(conn.execute(f"SELECT count(*), sum(value::bigint) FROM {table}").fetchone())


def sqlstate_of(conn, query, params=None):
    """Run one statement: None when it succeeds, else its SQLSTATE.  An open
    transaction is rolled back after an error."""
    try:
        conn.execute(query, params)
        return None
    except psycopg.Error as e:
        if not conn.autocommit and not conn.closed:
            try:
                conn.rollback()
            except psycopg.Error:
                pass
        return e.sqlstate


def verify_tree(conn, table, frozen_expected=None):
    """verify_table() on a table or on every leaf of a partitioned table."""
    return {leaf: verify_table(conn, leaf, frozen_expected)
            for leaf in leaf_tables(conn, table)}


class Background:
    """Statements run in order on a connection of their own, in a thread.

    `settings` are set first (set_config); `pid` is the backend's pid; with a
    threading.Barrier the statements start when all its parties arrive.  After
    join(): `error` (the psycopg exception, if any), `results` (rows or
    status of each statement that ran), `notices`, `elapsed`."""

    def __init__(self, cluster, statements, settings=None, user="postgres",
                 dbname="postgres", name="background", barrier=None):
        if isinstance(statements, str):
            statements = [statements]
        self.cluster = cluster
        self.statements = list(statements)
        self.conn = connect_as(cluster, user, dbname)
        self.pid = self.conn.info.backend_pid
        self.notices = []
        self.conn.add_notice_handler(lambda d: self.notices.append(d.message_primary))
        set_gucs(self.conn, settings)
        self.error = None
        self.results = []
        self.elapsed = None
        self.started = None
        self.done = threading.Event()
        self.barrier = barrier
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self):
        if self.barrier is not None:
            # start together with the other threads of the barrier
            self.barrier.wait(60)
        self.started = time.monotonic()
        try:
            for s in self.statements:
                cur = self.conn.execute(s)
                self.results.append(cur.fetchall() if cur.description else cur.statusmessage)
        except psycopg.Error as e:
            self.error = e
        finally:
            self.elapsed = time.monotonic() - self.started
            self.done.set()

    def start(self):
        self.thread.start()
        return self

    def execute(self, query, params=None):
        """One more statement on this connection (only once the thread is done)."""
        assert self.done.is_set(), "the background statements are still running"
        return self.conn.execute(query, params)

    def join(self, timeout=120):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), (
            f"{self.thread.name} (pid {self.pid}) still running after {timeout}s")
        return self

    @property
    def sqlstate(self):
        return self.error.sqlstate if self.error is not None else None

    def close(self):
        if self.thread.is_alive():
            self.thread.join(30)
        try:
            self.conn.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_fault_sleep(cluster, bg, point, log_offset, timeout=90):
    """Wait until background `bg` sleeps at fault point `point` (server log)."""
    rx = re.compile(r"\[%d\] .*directpath: sleeping at fault point \"%s\""
                    % (bg.pid, re.escape(point)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if rx.search(cluster.log(log_offset)):
            return
        if bg.done.is_set():
            raise AssertionError(
                f"{bg.thread.name} ended before fault point {point!r}: error={bg.error!r} "
                f"results={bg.results!r}\n{cluster.log_tail(30, log_offset)}")
        time.sleep(0.05)
    raise AssertionError(f"fault point {point!r} not reached in {timeout}s:\n"
                         f"{cluster.log_tail(30, log_offset)}")


def run_while_paused(cluster, first, second, point, log_offset, timeout=60):
    """Start Background `first`, wait until it sleeps at fault point `point`,
    and run `second` to its end meanwhile: it must succeed while `first`
    stays paused."""
    first.start()
    wait_fault_sleep(cluster, first, point, log_offset)
    second.start()
    second.join(timeout)
    assert second.error is None, second.error
    assert not first.done.is_set(), (
        f"{first.thread.name} did not stay paused while {second.thread.name} ran")


def wait_lock_wait(conn, pid, timeout=60):
    """Wait until backend `pid` waits for a heavyweight lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute("SELECT wait_event_type, wait_event FROM pg_stat_activity "
                           "WHERE pid = %s", (pid,)).fetchone()
        if row and row[0] == "Lock":
            return row
        time.sleep(0.05)
    raise AssertionError(f"backend {pid} never waited for a lock (last: {row})")


def crash_backend(cluster, pid):
    """SIGKILL one backend and wait for the crash restart to finish."""
    off = cluster.log_size()
    cluster.kill_backend(pid, signal.SIGKILL)
    cluster.wait_crash_restart(off)
    assert f"[{pid}]" in cluster.log(off) or "terminated by signal 9" in cluster.log(off)


def crash_immediate(cluster):
    """pg_ctl stop -m immediate, then start (crash recovery)."""
    off = cluster.log_size()
    cluster.stop("immediate")
    cluster.start()
    cluster.wait_ready()
    assert "not properly shut down" in cluster.log(off)


def crash_at_fault(cluster, sql, point, hit, how, settings=None):
    """Run 'sql' in the background with fault point 'point' sleeping at its
    hit-th pass, then crash there: "kill backend" (SIGKILL, crash restart)
    or "immediate stop" (pg_ctl stop -m immediate, start)."""
    off = cluster.log_size()
    gucs = dict(settings or {}, **fault_gucs(point, hit=hit))
    with Background(cluster, sql, gucs) as bg:
        bg.start()
        wait_fault_sleep(cluster, bg, point, off)
        if how == "kill backend":
            crash_backend(cluster, bg.pid)
        else:
            crash_immediate(cluster)


def checksums_roundtrip(cluster):
    """Clean stop, pg_checksums --check, start again."""
    cluster.stop("fast")
    out = cluster.pg_checksums_check() if cluster.checksums else ""
    cluster.start()
    cluster.wait_ready()
    return out
