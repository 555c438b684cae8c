"""pytest harness for directpath: throwaway PostgreSQL clusters.

Environment:
  DP_PG_BINDIR  bin/ of the PostgreSQL under test (default: <repo>/.pg/18/bin)
  DP_NO_EXT=1   start clusters without shared_preload_libraries='directpath'
                and skip the tests marked `directpath` (harness self-test)

Every server is started with pg_ctl on a data directory of its own, on a free
127.0.0.1 port and a private unix socket directory, and is stopped (by
pg_ctl on that data directory, or by its own postmaster pid) at teardown.
PostgreSQL refuses to run as root: run this through scripts/test.sh.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

REPO = Path(__file__).resolve().parent.parent
NO_EXT = os.environ.get("DP_NO_EXT", "") not in ("", "0")

# Seed-like test table and data.
TABLE_COLUMNS = "(timeid int, insid int, indid int, value int)"


def seed_select(n, start=1):
    """SELECT producing rows start..n of the seed-like table."""
    return (f"SELECT a % 50, a % 10000, a, a "
            f"FROM generate_series({int(start)}, {int(n)}) a")


def seed_insert(table, n, start=1, hint=True):
    """INSERT ... SELECT of the seed-like rows, with the APPEND hint leading."""
    prefix = "/*+ APPEND */ " if hint else ""
    return f"{prefix}INSERT INTO {table} {seed_select(n, start)}"


def seed_sum(n, start=1):
    """sum(value) of seed rows start..n."""
    return (n * (n + 1) - (start - 1) * start) // 2


def pg_bindir():
    b = os.environ.get("DP_PG_BINDIR")
    return Path(b) if b else REPO / ".pg" / "18" / "bin"


class ClusterError(RuntimeError):
    pass


# Postmaster pids started by this test session (for the final leak check).
STARTED_POSTMASTERS = set()
# Clusters not yet cleaned up (their logs are attached to failing tests).
LIVE_CLUSTERS = []
_USED_PORTS = set()


def free_port():
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _USED_PORTS:
            _USED_PORTS.add(port)
            return port
    raise ClusterError("no free port")


def pid_alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is as good as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _run(cmd, timeout=300, check=False, **kw):
    r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise ClusterError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}")
    return r


_MAJOR_CACHE = {}


def pg_major(bindir):
    bindir = Path(bindir)
    if bindir not in _MAJOR_CACHE:
        out = _run([bindir / "postgres", "--version"], check=True).stdout
        m = re.search(r"(\d+)(?:\.\d+)?", out.split(")")[-1])
        _MAJOR_CACHE[bindir] = int(m.group(1))
    return _MAJOR_CACHE[bindir]


def format_conf(extra_conf):
    """postgresql.conf lines from a dict (values quoted as needed) or a string."""
    if not extra_conf:
        return ""
    if not isinstance(extra_conf, dict):
        return str(extra_conf).rstrip("\n") + "\n"
    lines = []
    for k, v in extra_conf.items():
        if isinstance(v, bool):
            v = "on" if v else "off"
        elif isinstance(v, str):
            v = "'" + v.replace("'", "''") + "'"
        lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


class Cluster:
    """One PostgreSQL instance in <tmp_path>/<name>/data."""

    def __init__(self, bindir, tmp_path, *, wal_level="replica", checksums=True,
                 extra_conf=None, name="primary", initdb=True):
        self.bindir = Path(bindir)
        self.name = name
        self.base = Path(tmp_path) / name
        self.datadir = self.base / "data"
        self.logfile = self.datadir / "server.log"
        self.wal_level = wal_level
        self.checksums = checksums
        self.major = pg_major(self.bindir)
        # unix socket paths are limited to ~107 bytes: keep it short.
        self.sockdir = Path(tempfile.mkdtemp(prefix="dps"))
        self.port = free_port()
        self.pid = None
        self.standbys = []
        LIVE_CLUSTERS.append(self)
        if initdb:
            self._initdb()
            self._write_conf(extra_conf)

    # -- setup -----------------------------------------------------------
    def bin(self, prog):
        return self.bindir / prog

    def _initdb(self):
        self.base.mkdir(parents=True, exist_ok=True)
        cmd = [self.bin("initdb"), "-D", self.datadir, "-U", "postgres",
               "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]
        if self.checksums:
            cmd.append("--data-checksums")
        elif self.major >= 18:
            cmd.append("--no-data-checksums")
        _run(cmd, check=True)

    def _conf_text(self, extra_conf=None):
        preload = "" if NO_EXT else "directpath"
        senders = 0 if self.wal_level == "minimal" else 10
        lines = [
            "",
            "# --- directpath test harness ---",
            f"port = {self.port}",
            "listen_addresses = '127.0.0.1'",
            f"unix_socket_directories = '{self.sockdir}'",
            f"shared_preload_libraries = '{preload}'",
            "fsync = on",
            "synchronous_commit = on",
            "full_page_writes = on",
            f"wal_level = {self.wal_level}",
            f"max_wal_senders = {senders}",
            "wal_keep_size = '512MB'",
            "max_wal_size = '2GB'",
            "checkpoint_timeout = '1h'",
            "hot_standby = on",
            "autovacuum = off",
            "max_connections = 40",
            "restart_after_crash = on",
            "lc_messages = 'C'",
            "log_line_prefix = '%m [%p] %q%a '",
            "log_checkpoints = on",
        ]
        return "\n".join(lines) + "\n" + format_conf(extra_conf)

    def _write_conf(self, extra_conf=None):
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write(self._conf_text(extra_conf))

    def append_conf(self, text):
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write(text.rstrip("\n") + "\n")

    # -- server log ------------------------------------------------------
    def log_size(self):
        try:
            return self.logfile.stat().st_size
        except FileNotFoundError:
            return 0

    def log(self, offset=0):
        try:
            with open(self.logfile, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines=60, offset=0):
        return "\n".join(self.log(offset).splitlines()[-lines:])

    def wait_for_log(self, pattern, offset=0, timeout=60):
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            m = rx.search(self.log(offset))
            if m:
                return m
            time.sleep(0.1)
        raise ClusterError(f"{self.name}: /{pattern}/ not in server log after "
                           f"{timeout}s:\n{self.log_tail(offset=offset)}")

    # -- lifecycle -------------------------------------------------------
    def _read_pid(self):
        try:
            with open(self.datadir / "postmaster.pid") as f:
                return int(f.readline().strip())
        except (FileNotFoundError, ValueError):
            return None

    def is_running(self):
        return pid_alive(self.pid) and (self.datadir / "postmaster.pid").exists()

    def server_env(self):
        # Modules the server dlopen()s (libpqwalreceiver, postgres_fdw) have no
        # RUNPATH: without this they would pick up the system's libpq, if any.
        env = dict(os.environ)
        libdir = str(self.bindir.parent / "lib")
        env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"]
                                           if env.get("LD_LIBRARY_PATH") else "")
        return env

    def start(self, timeout=120):
        for attempt in range(3):
            off = self.log_size()
            r = _run([self.bin("pg_ctl"), "-D", self.datadir, "-l", self.logfile,
                      "-w", "-t", str(timeout), "start"], timeout=timeout + 30,
                     env=self.server_env())
            pid = self._read_pid()
            if r.returncode == 0 and pid:
                self.pid = pid
                STARTED_POSTMASTERS.add(pid)
                return self
            if pid and pid_alive(pid):
                # pg_ctl gave up waiting but the postmaster lives: ours to stop.
                self.pid = pid
                STARTED_POSTMASTERS.add(pid)
                self.stop("immediate", check=False)
            text = self.log(off)
            if attempt < 2 and ("could not bind" in text or "could not create any TCP/IP" in text):
                self.port = free_port()
                self.append_conf(f"port = {self.port}")
                continue
            raise ClusterError(
                f"{self.name}: pg_ctl start failed (rc {r.returncode}):\n{r.stdout}\n"
                f"--- server log ---\n{self.log_tail(80, off)}")
        raise AssertionError("unreachable")

    def stop(self, mode="fast", check=True, timeout=120):
        r = _run([self.bin("pg_ctl"), "-D", self.datadir, "-m", mode, "-w",
                  "-t", str(timeout), "stop"], timeout=timeout + 30)
        pid = self.pid
        deadline = time.monotonic() + 30
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if check and (r.returncode != 0 or pid_alive(pid)):
            raise ClusterError(f"{self.name}: pg_ctl stop -m {mode} failed "
                               f"(rc {r.returncode}):\n{r.stdout}\n{self.log_tail(40)}")
        return r.returncode == 0

    def restart(self, mode="fast"):
        self.stop(mode)
        self.start()
        self.wait_ready()
        return self

    def kill_postmaster_immediate(self):
        """pg_ctl stop -m immediate: a crash as far as the data directory knows."""
        self.stop("immediate")

    def promote(self, timeout=60):
        _run([self.bin("pg_ctl"), "-D", self.datadir, "-w", "-t", str(timeout),
              "promote"], check=True, timeout=timeout + 30)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not self.sql("SELECT pg_is_in_recovery()")[0][0]:
                    return self
            except psycopg.OperationalError:
                pass
            time.sleep(0.1)
        raise ClusterError(f"{self.name}: still in recovery after promote")

    def cleanup(self):
        """Stop this cluster (and its standbys) whatever state it is in."""
        for sb in self.standbys:
            sb.cleanup()
        if self.pid and pid_alive(self.pid):
            try:
                self.stop("immediate", check=False, timeout=60)
            except Exception:
                pass
            if pid_alive(self.pid):
                # The postmaster we started; its children exit on postmaster death.
                os.kill(self.pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
                while pid_alive(self.pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
        shutil.rmtree(self.sockdir, ignore_errors=True)
        if self in LIVE_CLUSTERS:
            LIVE_CLUSTERS.remove(self)

    # -- connections -----------------------------------------------------
    def conninfo(self, dbname="postgres"):
        return f"host={self.sockdir} port={self.port} user=postgres dbname={dbname}"

    def conn(self, dbname="postgres", autocommit=True, **kw):
        kw.setdefault("connect_timeout", 10)
        return psycopg.connect(host=str(self.sockdir), port=self.port, user="postgres",
                               dbname=dbname, autocommit=autocommit, **kw)

    def sql(self, query, params=None, dbname="postgres"):
        with self.conn(dbname) as c:
            cur = c.execute(query, params)
            return cur.fetchall() if cur.description else None

    @staticmethod
    def backend_pid(conn):
        return conn.info.backend_pid

    def kill_backend(self, pid, sig=signal.SIGKILL):
        """Signal one backend of this cluster (refuses any other process)."""
        try:
            with open(f"/proc/{pid}/status") as f:
                ppid = int(re.search(r"^PPid:\s+(\d+)", f.read(), re.M).group(1))
        except FileNotFoundError:
            raise ClusterError(f"backend {pid} does not exist")
        if ppid != self.pid:
            raise ClusterError(f"pid {pid} is not a child of postmaster {self.pid}")
        os.kill(pid, sig)

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                with self.conn(connect_timeout=5) as c:
                    c.execute("SELECT 1")
                return self
            except psycopg.OperationalError as e:
                last = e
                if self.pid and not pid_alive(self.pid):
                    break
                time.sleep(0.1)
        raise ClusterError(f"{self.name}: not accepting connections: {last}\n"
                           f"{self.log_tail(40)}")

    def wait_crash_restart(self, log_offset, timeout=120):
        """After a backend died: wait for the reinitialization and recovery."""
        self.wait_for_log(r"all server processes terminated; reinitializing",
                          log_offset, timeout)
        self.wait_for_log(r"database system is ready to accept connections",
                          log_offset, timeout)
        return self.wait_ready(timeout)

    # -- replication -----------------------------------------------------
    def make_standby(self, tmp, name="standby", extra_conf=None):
        sb = Cluster(self.bindir, tmp, wal_level=self.wal_level,
                     checksums=self.checksums, name=name, initdb=False)
        self.standbys.append(sb)
        sb.base.mkdir(parents=True, exist_ok=True)
        _run([self.bin("pg_basebackup"), "-D", sb.datadir, "-h", self.sockdir,
              "-p", self.port, "-U", "postgres", "-R", "-X", "stream",
              "-c", "fast", "--no-sync"], check=True, timeout=600)
        # Not the primary's log.
        (sb.datadir / "server.log").unlink(missing_ok=True)
        sb.append_conf("\n# --- standby ---\n"
                       f"port = {sb.port}\n"
                       f"unix_socket_directories = '{sb.sockdir}'\n"
                       "hot_standby = on\n")
        if extra_conf:
            sb.append_conf(format_conf(extra_conf))
        sb.start()
        sb.wait_ready()
        return sb

    def wait_replay(self, standby, timeout=180):
        lsn = self.sql("SELECT pg_current_wal_lsn()::text")[0][0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = standby.sql("SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)",
                             (lsn,))[0][0]
            if ok:
                return lsn
            time.sleep(0.1)
        raise ClusterError(f"{standby.name} did not replay up to {lsn} in {timeout}s:\n"
                           f"{standby.log_tail(40)}")

    # -- offline checks --------------------------------------------------
    def pg_checksums_check(self):
        assert not self.is_running(), "pg_checksums needs a stopped cluster"
        r = _run([self.bin("pg_checksums"), "--check", "-D", self.datadir], timeout=600)
        assert r.returncode == 0, f"pg_checksums --check failed (rc {r.returncode}):\n{r.stdout}"
        return r.stdout

    def __repr__(self):
        return f"<Cluster {self.name} pg{self.major} port={self.port} pid={self.pid}>"


# -- SQL helpers -----------------------------------------------------------

def last_statement(conn):
    """directpath.last_statement() as a dict."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM directpath.last_statement()").fetchone()
    assert row is not None, "directpath.last_statement() returned no row"
    return row


def table_digest(conn, table):
    """(count, order-independent hash of the contents) of a table."""
    return tuple(conn.execute(
        f"SELECT count(*), coalesce(sum(hashtext(x::text)), 0) FROM {table} x").fetchone())


def heap_blocks(conn, table):
    return conn.execute(
        "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int",
        (table,)).fetchone()[0]


def vm_summary(conn, table):
    return tuple(conn.execute(
        "SELECT all_visible, all_frozen FROM pg_visibility_map_summary(%s::regclass)",
        (table,)).fetchone())


def page_lsns(conn, table):
    """Page LSN of every heap block (needs pageinspect)."""
    return [r[0] for r in conn.execute(
        "SELECT (page_header(get_raw_page(%s, 'main', b::int))).lsn::text "
        "FROM generate_series(0, pg_relation_size(%s::regclass) / "
        "current_setting('block_size')::int - 1) b ORDER BY b",
        (table, table)).fetchall()]


def verify_table(conn, table, frozen_expected=None):
    """amcheck + pg_visibility checks of one table; returns what it saw.

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
    for i in idx:
        conn.execute("SELECT bt_index_check(%s::regclass, heapallindexed => true)", (i,))

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
    r = _run([bindir / "pg_config", "--pkglibdir", "--sharedir"], check=True)
    libdir, sharedir = r.stdout.split()
    missing = [p for p in (Path(libdir) / "directpath.so",
                           Path(sharedir) / "extension" / "directpath.control")
               if not p.exists()]
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
    kw.setdefault("connect_timeout", 10)
    return psycopg.connect(host=str(cluster.sockdir), port=cluster.port, user=user,
                           dbname=dbname, autocommit=autocommit, **kw)


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


def leaf_tables(conn, table):
    """The table itself, or the leaf partitions of a partitioned table."""
    rows = conn.execute(
        "SELECT relid::regclass::text FROM pg_partition_tree(%s::regclass) "
        "WHERE isleaf ORDER BY 1", (table,)).fetchall()
    return [r[0] for r in rows] or [table]


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


def checksums_roundtrip(cluster):
    """Clean stop, pg_checksums --check, start again."""
    cluster.stop("fast")
    out = cluster.pg_checksums_check() if cluster.checksums else ""
    cluster.start()
    cluster.wait_ready()
    return out
