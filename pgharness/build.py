"""PostgreSQL majors and the directpath build against them.

provision() unpacks a major into .pg/<major> (scripts/provision.sh);
build_and_install() builds directpath from a private copy of the work tree
and installs it there; missing_install() says what of an install is absent.
"""

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from .proc import HarnessError, run
from .user import REPO


def pg_bindir(major=None):
    """bin/ of the PostgreSQL under test: $DP_PG_BINDIR, else .pg/<major or 18>."""
    b = os.environ.get("DP_PG_BINDIR")
    if b and major is None:
        return Path(b)
    return REPO / ".pg" / str(major or 18) / "bin"


def provision(major, log=print):
    """scripts/provision.sh <major>; returns the bin directory."""
    log(f"provisioning PostgreSQL {major} (scripts/provision.sh)")
    run([REPO / "scripts" / "provision.sh", str(major)], capture=False, timeout=None,
        check=True)
    bindir = pg_bindir(major)
    if not (bindir / "pg_config").exists():
        raise HarnessError(f"no pg_config in {bindir} after provisioning")
    return bindir


def _copy_sources(bdir):
    """Makefile, control and SQL files and src/ into bdir; returns their hash."""
    for name in os.listdir(REPO):
        p = REPO / name
        if p.is_file() and (name == "Makefile" or name.endswith(".control")
                            or (name.startswith("directpath--") and name.endswith(".sql"))):
            shutil.copy2(p, bdir / name)
    for p in (REPO / "src").rglob("*"):
        if p.suffix in (".c", ".h"):
            dest = bdir / p.relative_to(REPO)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest)
    h = hashlib.sha256()
    for p in sorted((bdir / "src").rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(bdir)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def build_and_install(bindir, attempts=3, wait_s=30, log=print):
    """Build and install directpath against bindir/pg_config.

    The build runs in a private copy of the source, not in the work tree:
    other people build in the work tree at the same time, possibly against
    another major, and stale objects there would be linked silently.  A
    failed build (someone's edit in progress) is retried.  Returns facts
    about what was installed."""
    pg_config = Path(bindir) / "pg_config"
    last = ""
    for attempt in range(1, attempts + 1):
        bdir = Path(tempfile.mkdtemp(prefix="dp-build."))
        try:
            src_hash = _copy_sources(bdir)
            log(f"building directpath against {pg_config} (attempt {attempt}/{attempts})")
            r = run(["make", "-C", bdir, "-j2", "-s", f"PG_CONFIG={pg_config}", "install"],
                    timeout=900)
            if r.returncode == 0:
                libdir = run([pg_config, "--pkglibdir"], check=True).stdout.strip()
                so = Path(libdir) / "directpath.so"
                return {"pg_config": str(pg_config), "source_sha256": src_hash,
                        "so_sha256": hashlib.sha256(so.read_bytes()).hexdigest()[:16],
                        "build_attempts": attempt}
            last = r.stdout[-3000:]
            log(f"build failed (another engineer's edit in progress?):\n{last}")
        finally:
            shutil.rmtree(bdir, ignore_errors=True)
        if attempt < attempts:
            log(f"retrying the build in {wait_s} s")
            time.sleep(wait_s)
    raise HarnessError(f"directpath does not build against {pg_config}:\n{last}")


def missing_install(bindir):
    """The files of a directpath install absent from the PostgreSQL in bindir."""
    r = run([Path(bindir) / "pg_config", "--pkglibdir", "--sharedir"], check=True)
    libdir, sharedir = r.stdout.split()
    return [p for p in (Path(libdir) / "directpath.so",
                        Path(sharedir) / "extension" / "directpath.control")
            if not p.exists()]
