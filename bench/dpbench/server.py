"""The benchmark's servers: docs/baseline.md's settings, the phases, the
work directory, and what was built.  Clusters themselves are pgharness's
(provisioning, build, initdb, start/stop, standbys, the server user).
"""

import subprocess
import tempfile
from pathlib import Path

from pgharness.cluster import Cluster
from pgharness.user import REPO, give

# docs/baseline.md, section 2 ("Settings").  wal_level and
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
    "logical": {"wal_level": "logical"},
}


def server_settings(phase, extra=None):
    """docs/baseline.md's settings for a phase, directpath preloaded."""
    s = dict(BASELINE_SETTINGS)
    s.update(PHASE_SETTINGS[phase])
    s["shared_preload_libraries"] = "directpath"
    s.update(extra or {})
    return s


def new_server(bindir, workdir, name, settings):
    """A cluster in <workdir>/<name>, initialised and configured (not started)."""
    return Cluster(bindir, workdir, name).initdb(sync=True).configure(settings)


def git_facts():
    def g(*args):
        r = subprocess.run(["git", "-C", str(REPO), *args], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    status = g("status", "--porcelain", "--", "src", "Makefile", "directpath--0.1.sql")
    return {"commit": g("rev-parse", "--short=12", "HEAD"), "subject": g("log", "-1", "--format=%s"),
            "source_modified": bool(status)}


def make_workdir():
    """A temporary directory the server user owns (data, data files)."""
    d = Path(tempfile.mkdtemp(prefix="dpb.", dir="/tmp"))
    d.chmod(0o755)
    return give(d)
