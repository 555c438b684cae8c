"""Embedded PostgreSQL for the benchmark: provisioning, building directpath,
and throwaway clusters.

Servers run as the unprivileged user 'dptest' when the suite runs as root
(PostgreSQL refuses root), in a temporary directory owned by that user, with
the Unix socket in that directory and a free port.  Only servers started here
are ever stopped, and always by pg_ctl on their own data directory.
"""

import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from .util import BenchError, log

REPO = Path(__file__).resolve().parents[2]
SERVER_USER = "dptest"

# shared/design/baseline.md, section 2 ("Settings").  wal_level and
# max_wal_senders are set per phase.
BASELINE_SETTINGS = {
    "shared_buffers": "2GB",
    "max_wal_size": "20GB",
    "checkpoint_timeout": "30min",
    "synchronous_commit": "on",
    "fsync": "on",
    "full_page_writes": "on",
    "autovacuum": "off",
    "maintenance_work_mem": "1GB",
}
PHASE_SETTINGS = {
    "replica": {"wal_level": "replica"},
    "minimal": {"wal_level": "minimal", "max_wal_senders": "0"},
}


def is_root():
    return os.geteuid() == 0


def ensure_server_user():
    if not is_root():
        return
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        log(f"creating system user {SERVER_USER}")
        subprocess.run(["useradd", "-r", "-m", SERVER_USER], check=True)


def as_server_user(cmd):
    return (["runuser", "-u", SERVER_USER, "--"] if is_root() else []) + [str(c) for c in cmd]


def run(cmd, *, env=None, cwd=None, timeout=None, check=True, capture=True):
    r = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, timeout=timeout,
                       stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.STDOUT if capture else None, text=True)
    if check and r.returncode != 0:
        raise BenchError(f"command failed (exit {r.returncode}): {' '.join(map(str, cmd))}\n"
                         f"{(r.stdout or '')[-4000:]}")
    return r


def free_port(taken=()):
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            return port
    raise BenchError("no free TCP port")


def provision(major):
    """scripts/provision.sh <major>; returns the bin directory."""
    log(f"provisioning PostgreSQL {major} (scripts/provision.sh)")
    run([REPO / "scripts" / "provision.sh", str(major)], capture=False)
    bindir = REPO / ".pg" / str(major) / "bin"
    if not (bindir / "pg_config").exists():
        raise BenchError(f"no pg_config in {bindir} after provisioning")
    return bindir


def build_and_install(bindir, attempts=3, wait_s=30):
    """Build and install directpath against bindir/pg_config.

    The build runs in a private copy of the source (Makefile, control and SQL
    files, src/), not in the work tree: other people build in the work tree
    at the same time, possibly against another major, and stale objects
    there would be linked silently.  A failed build (someone's edit in
    progress) is retried.  Returns facts about what was installed."""
    pg_config = bindir / "pg_config"
    last = ""
    for attempt in range(1, attempts + 1):
        bdir = Path(tempfile.mkdtemp(prefix="dpbench-build."))
        try:
            for name in os.listdir(REPO):
                p = REPO / name
                if p.is_file() and (name == "Makefile" or name.endswith(".control")
                                    or (name.startswith("directpath--") and name.endswith(".sql"))):
                    shutil.copy2(p, bdir / name)
            (bdir / "src").mkdir()
            for p in (REPO / "src").iterdir():
                if p.suffix in (".c", ".h"):
                    shutil.copy2(p, bdir / "src" / p.name)
            src_hash = hashlib.sha256()
            for p in sorted((bdir / "src").iterdir()):
                src_hash.update(p.name.encode() + b"\0" + p.read_bytes())
            log(f"building directpath against {pg_config} (attempt {attempt}/{attempts})")
            r = run(["make", "-C", bdir, "-j2", "-s", f"PG_CONFIG={pg_config}", "install"],
                    check=False, timeout=900)
            if r.returncode == 0:
                libdir = run([pg_config, "--pkglibdir"]).stdout.strip()
                so = Path(libdir) / "directpath.so"
                return {"pg_config": str(pg_config), "source_sha256": src_hash.hexdigest()[:16],
                        "so_sha256": hashlib.sha256(so.read_bytes()).hexdigest()[:16],
                        "build_attempts": attempt}
            last = r.stdout[-3000:]
            log(f"build failed (another engineer's edit in progress?):\n{last}")
        finally:
            shutil.rmtree(bdir, ignore_errors=True)
        if attempt < attempts:
            log(f"retrying the build in {wait_s} s")
            time.sleep(wait_s)
    raise BenchError(f"directpath does not build against {pg_config}:\n{last}")


def git_facts():
    def g(*args):
        r = subprocess.run(["git", "-C", str(REPO), *args], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    status = g("status", "--porcelain", "--", "src", "Makefile", "directpath--0.1.sql")
    return {"commit": g("rev-parse", "--short=12", "HEAD"), "subject": g("log", "-1", "--format=%s"),
            "source_modified": bool(status)}


class Server:
    """One throwaway cluster in <workdir>/<name>."""

    def __init__(self, bindir, workdir, name, *, port_taken=()):
        self.bindir = Path(bindir)
        self.base = Path(workdir)
        self.name = name
        self.datadir = self.base / name
        self.sockdir = self.base  # short path: socket names are limited to ~107 bytes
        self.logfile = self.base / f"{name}.log"
        self.port = free_port(port_taken)
        self.running = False
        self.env = dict(os.environ)
        libdir = str(self.bindir.parent / "lib")
        self.env["LD_LIBRARY_PATH"] = libdir + (
            ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        for k in ("PGOPTIONS", "PGDATABASE", "PGUSER", "PGHOST", "PGPORT", "PGSERVICE"):
            self.env.pop(k, None)

    def initdb(self):
        run(as_server_user([self.bindir / "initdb", "-D", self.datadir, "-U", "postgres",
                            "--auth=trust", "-E", "UTF8", "--locale=C", "-k"]),
            env=self.env, cwd=self.base)
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write("\ninclude 'bench.conf'\n")

    def configure(self, settings):
        lines = [f"port = {self.port}",
                 "listen_addresses = '127.0.0.1'",
                 f"unix_socket_directories = '{self.sockdir}'"]
        for k, v in settings.items():
            lines.append(f"{k} = '{v}'")
        path = self.datadir / "bench.conf"
        path.write_text("\n".join(lines) + "\n")
        if is_root():
            shutil.chown(path, SERVER_USER)
        self.settings = dict(settings)

    def start(self):
        r = run(as_server_user([self.bindir / "pg_ctl", "-D", self.datadir, "-l", self.logfile,
                                "-w", "-t", "300", "start"]), env=self.env, cwd=self.base,
                check=False)
        if r.returncode != 0:
            tail = ""
            try:
                tail = self.logfile.read_text()[-3000:]
            except OSError:
                pass
            raise BenchError(f"server {self.name} did not start:\n{r.stdout}\n{tail}")
        self.running = True

    def stop(self):
        if self.running or (self.datadir / "postmaster.pid").exists():
            run(as_server_user([self.bindir / "pg_ctl", "-D", self.datadir, "-m", "fast", "-w",
                                "-t", "300", "stop"]), env=self.env, cwd=self.base, check=False)
        self.running = False

    def conninfo(self, dbname="postgres"):
        return {"host": str(self.sockdir), "port": self.port, "user": "postgres", "dbname": dbname}

    def connect(self, dbname="postgres", notices=None):
        conn = psycopg.connect(**self.conninfo(dbname), autocommit=True)
        if notices is not None:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        return conn

    def client_env(self, pgoptions=None):
        env = dict(self.env)
        env.update({"PGHOST": str(self.sockdir), "PGPORT": str(self.port), "PGUSER": "postgres",
                    "PGDATABASE": "postgres"})
        if pgoptions:
            env["PGOPTIONS"] = pgoptions
        return env

    def tool(self, name):
        return self.bindir / name


def make_workdir():
    """A temporary directory the server user owns (data, sockets, data files)."""
    d = Path(tempfile.mkdtemp(prefix="dpb.", dir="/tmp"))
    os.chmod(d, 0o755)
    if is_root():
        shutil.chown(d, SERVER_USER, SERVER_USER)
    return d
