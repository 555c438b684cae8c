"""The unprivileged user servers run as (PostgreSQL refuses to run as root).

As root, initdb, pg_ctl and the other server tools run as $DP_TEST_USER
(default dptest), created by scripts/lib.sh (dp_server_user), the one place
that creates it; otherwise everything runs as the invoking user.
"""

import os
import shutil
from pathlib import Path

from .proc import run

REPO = Path(__file__).resolve().parents[1]
SERVER_USER = os.environ.get("DP_TEST_USER") or "dptest"


def is_root():
    return os.geteuid() == 0


def ensure_server_user():
    """As root: the server user exists afterwards (scripts/lib.sh creates it)."""
    if is_root():
        run(["bash", REPO / "scripts" / "lib.sh", "dp_server_user"], check=True)


def as_server_user(cmd):
    """cmd, run as the server user when we are root."""
    return (["runuser", "-u", SERVER_USER, "--"] if is_root() else []) + [str(c) for c in cmd]


def give(path):
    """Hand a file or directory we created to the server user (as root)."""
    if is_root():
        shutil.chown(path, SERVER_USER, SERVER_USER)
    return path
