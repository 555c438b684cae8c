"""Cluster: one throwaway PostgreSQL instance.

Data in <base>/<name>/data (server.log beside postgresql.conf), a free
127.0.0.1 port, a private unix socket directory (short: socket paths are
limited to ~107 bytes).  Settings go to harness.conf, included from
postgresql.conf and rewritten by configure().  Started and stopped by pg_ctl
on its own data directory; cleanup() falls back to the postmaster pid it
started.  As root, the server tools run as the server user (user.py).
"""

import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psycopg

from .proc import HarnessError, free_port, pid_alive, run
from .sql import wait_lsn
from .user import as_server_user, give

# libpq variables that would change every session (server-side libpq too).
CLIENT_ENV = ("PGOPTIONS", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE",
              "PGSERVICEFILE", "PGCONNECT_TIMEOUT")

_MAJOR_CACHE = {}


def pg_major(bindir):
    """The major version of the PostgreSQL in bindir."""
    bindir = Path(bindir)
    if bindir not in _MAJOR_CACHE:
        out = run([bindir / "postgres", "--version"], check=True).stdout
        m = re.search(r"(\d+)(?:\.\d+)?", out.split(")")[-1])
        _MAJOR_CACHE[bindir] = int(m.group(1))
    return _MAJOR_CACHE[bindir]


def format_conf(conf):
    """postgresql.conf lines from a dict (values quoted as needed) or a string."""
    if not conf:
        return ""
    if not isinstance(conf, dict):
        return str(conf).rstrip("\n") + "\n"
    lines = []
    for k, v in conf.items():
        if isinstance(v, bool):
            v = "on" if v else "off"
        elif isinstance(v, str):
            v = "'" + v.replace("'", "''") + "'"
        lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


class Cluster:
    """One PostgreSQL instance in <base>/<name>/data."""

    def __init__(self, bindir, base, name="primary", *, checksums=True):
        self.bindir = Path(bindir)
        self.name = name
        self.base = Path(base) / name
        self.datadir = self.base / "data"
        self.logfile = self.datadir / "server.log"
        self.checksums = checksums
        self.major = pg_major(self.bindir)
        self.sockdir = Path(tempfile.mkdtemp(prefix="dps"))
        give(self.sockdir)
        self.port = free_port()
        self.pid = None
        self.settings = {}
        self.extra_conf = None
        self.standbys = []

    def bin(self, prog):
        return self.bindir / prog

    def _tool(self, args, **kw):
        """A server tool (initdb, pg_ctl, ...) as the server user."""
        kw.setdefault("env", self.server_env())
        return run(as_server_user([self.bin(args[0]), *args[1:]]), **kw)

    # -- setup -----------------------------------------------------------
    def initdb(self, sync=False):
        self.base.mkdir(parents=True, exist_ok=True)
        give(self.base)
        cmd = ["initdb", "-D", self.datadir, "-U", "postgres", "--auth=trust", "-E", "UTF8",
               "--locale=C"]
        if not sync:
            cmd.append("--no-sync")
        if self.checksums:
            cmd.append("--data-checksums")
        elif self.major >= 18:
            cmd.append("--no-data-checksums")
        self._tool(cmd, check=True, cwd=self.base)
        self.append_conf("\n# --- pgharness: port, sockets and settings ---\n"
                         "include 'harness.conf'")
        return self

    def configure(self, settings=None, extra_conf=None):
        """(Re)write harness.conf: port, sockets, settings (a dict), then
        extra_conf (a dict or postgresql.conf text), which wins."""
        self.settings = dict(settings or {})
        self.extra_conf = extra_conf
        head = {"port": self.port, "listen_addresses": "127.0.0.1",
                "unix_socket_directories": str(self.sockdir)}
        path = self.datadir / "harness.conf"
        path.write_text(format_conf(head) + format_conf(self.settings)
                        + format_conf(extra_conf))
        give(path)
        return self

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
        raise HarnessError(f"{self.name}: /{pattern}/ not in server log after "
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
        """The environment of the server and its tools: no libpq variables,
        and our lib/ first (modules the server dlopen()s, libpqwalreceiver
        and postgres_fdw, have no RUNPATH: they would pick up the system's
        libpq, if any)."""
        env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV}
        libdir = str(self.bindir.parent / "lib")
        env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"]
                                           if env.get("LD_LIBRARY_PATH") else "")
        return env

    def client_env(self, pgoptions=None):
        """The environment for a client program (pgbench, psql) of this cluster."""
        env = self.server_env()
        env.update({"PGHOST": str(self.sockdir), "PGPORT": str(self.port),
                    "PGUSER": "postgres", "PGDATABASE": "postgres"})
        if pgoptions:
            env["PGOPTIONS"] = pgoptions
        return env

    def start(self, timeout=120):
        for attempt in range(3):
            off = self.log_size()
            r = self._tool(["pg_ctl", "-D", self.datadir, "-l", self.logfile, "-w",
                            "-t", str(timeout), "start"], timeout=timeout + 30, cwd=self.base)
            pid = self._read_pid()
            if r.returncode == 0 and pid:
                self.pid = pid
                return self
            if pid and pid_alive(pid):
                # pg_ctl gave up waiting but the postmaster lives: ours to stop.
                self.pid = pid
                self.stop("immediate", check=False)
            text = self.log(off)
            if attempt < 2 and ("could not bind" in text or "could not create any TCP/IP" in text):
                self.port = free_port()
                self.configure(self.settings, self.extra_conf)
                continue
            raise HarnessError(
                f"{self.name}: pg_ctl start failed (rc {r.returncode}):\n{r.stdout}\n"
                f"--- server log ---\n{self.log_tail(80, off)}")
        raise AssertionError("unreachable")

    def stop(self, mode="fast", check=True, timeout=120):
        r = self._tool(["pg_ctl", "-D", self.datadir, "-m", mode, "-w", "-t", str(timeout),
                        "stop"], timeout=timeout + 30, cwd=self.base)
        pid = self.pid
        deadline = time.monotonic() + 30
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if check and (r.returncode != 0 or pid_alive(pid)):
            raise HarnessError(f"{self.name}: pg_ctl stop -m {mode} failed "
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
        self._tool(["pg_ctl", "-D", self.datadir, "-w", "-t", str(timeout), "promote"],
                   check=True, timeout=timeout + 30, cwd=self.base)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not self.sql("SELECT pg_is_in_recovery()")[0][0]:
                    return self
            except psycopg.OperationalError:
                pass
            time.sleep(0.1)
        raise HarnessError(f"{self.name}: still in recovery after promote")

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

    # -- connections -----------------------------------------------------
    def conninfo(self, dbname="postgres"):
        return f"host={self.sockdir} port={self.port} user=postgres dbname={dbname}"

    def conn(self, dbname="postgres", autocommit=True, user="postgres", notices=None, **kw):
        """A connection; notices, a list, collects the server's notices."""
        kw.setdefault("connect_timeout", 10)
        c = psycopg.connect(host=str(self.sockdir), port=self.port, user=user,
                            dbname=dbname, autocommit=autocommit, **kw)
        if notices is not None:
            c.add_notice_handler(lambda d: notices.append(d.message_primary))
        return c

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
            raise HarnessError(f"backend {pid} does not exist")
        if ppid != self.pid:
            raise HarnessError(f"pid {pid} is not a child of postmaster {self.pid}")
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
        raise HarnessError(f"{self.name}: not accepting connections: {last}\n"
                           f"{self.log_tail(40)}")

    def wait_crash_restart(self, log_offset, timeout=120):
        """After a backend died: wait for the reinitialization and recovery."""
        self.wait_for_log(r"all server processes terminated; reinitializing",
                          log_offset, timeout)
        self.wait_for_log(r"database system is ready to accept connections",
                          log_offset, timeout)
        return self.wait_ready(timeout)

    # -- replication -----------------------------------------------------
    def peer(self, base, name):
        """A new, not initialised cluster like this one (standbys, remotes)."""
        return Cluster(self.bindir, base, name, checksums=self.checksums)

    def make_standby(self, base, name="standby", extra_conf=None, sync=False):
        """A streaming standby (pg_basebackup -R) with this cluster's settings
        and extra_conf, started and accepting connections."""
        sb = self.peer(base, name)
        self.standbys.append(sb)
        sb.base.mkdir(parents=True, exist_ok=True)
        give(sb.base)
        cmd = ["pg_basebackup", "-D", sb.datadir, "-h", self.sockdir, "-p", self.port,
               "-U", "postgres", "-R", "-X", "stream", "-c", "fast"]
        self._tool(cmd + ([] if sync else ["--no-sync"]), check=True, timeout=900,
                   cwd=sb.base)
        # Not the primary's log.
        sb.logfile.unlink(missing_ok=True)
        sb.configure(self.settings, format_conf(self.extra_conf)
                     + format_conf({"hot_standby": True}) + format_conf(extra_conf))
        sb.start()
        sb.wait_ready()
        return sb

    def wait_replay(self, standby, timeout=180):
        """Wait until standby has replayed all WAL written so far; returns the LSN."""
        lsn = self.sql("SELECT pg_current_wal_lsn()::text")[0][0]
        with standby.conn() as c:
            if not wait_lsn(c, "pg_last_wal_replay_lsn", lsn, timeout, poll=0.1):
                raise HarnessError(f"{standby.name} did not replay up to {lsn} in "
                                   f"{timeout}s:\n{standby.log_tail(40)}")
        return lsn

    # -- offline checks --------------------------------------------------
    def pg_checksums_check(self):
        assert not self.is_running(), "pg_checksums needs a stopped cluster"
        r = self._tool(["pg_checksums", "--check", "-D", self.datadir], timeout=600)
        assert r.returncode == 0, f"pg_checksums --check failed (rc {r.returncode}):\n{r.stdout}"
        return r.stdout

    def __repr__(self):
        return f"<Cluster {self.name} pg{self.major} port={self.port} pid={self.pid}>"
