"""Disk full: a direct load into a tablespace on a small filesystem that runs
out of space fails cleanly, like a plain INSERT (SQLSTATE 53100), leaves
nothing visible, and the table is usable again once space is freed.

Needs a small filesystem writable by the test user, named by DP_SMALL_FS
(skipped otherwise).  As root, before the tests, e.g.:

    mkdir -p /mnt/dp_small
    mount -t tmpfs -o size=64m,mode=0755 tmpfs /mnt/dp_small
    chown dptest:dptest /mnt/dp_small
    export DP_SMALL_FS=/mnt/dp_small

The tests fill it with a ballast file (never more than the filesystem holds)
and remove everything they made there.
"""

import os
import shutil
import uuid

import psycopg
import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, ClusterError,
                      last_statement, seed_insert, set_gucs, table_digest,
                      verify_table)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

MAX_FS = 1 << 30            # refuse to fill anything bigger than 1 GB
MB = 1 << 20
LOAD_ROWS = 150_000         # ~6.5 MB of heap
SPACER_ROWS = 100_000       # ~4.4 MB


@pytest.fixture
def small_fs():
    path = os.environ.get("DP_SMALL_FS", "")
    if not path:
        pytest.skip("DP_SMALL_FS is not set: no small filesystem to fill (see "
                    "tests/test_diskfull.py for the root commands that make one)")
    if not os.path.isdir(path) or not os.access(path, os.W_OK):
        pytest.fail(f"DP_SMALL_FS={path} is not a writable directory", pytrace=False)
    st = os.statvfs(path)
    if st.f_blocks * st.f_frsize > MAX_FS:
        pytest.fail(f"DP_SMALL_FS={path} is {st.f_blocks * st.f_frsize // MB} MB: "
                    f"refusing to fill a filesystem larger than {MAX_FS // MB} MB",
                    pytrace=False)
    work = os.path.join(path, f"dp_{os.getpid()}_{uuid.uuid4().hex[:8]}")
    os.mkdir(work, 0o700)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


class Ballast:
    """A file that takes up all but `free` bytes of the filesystem."""

    def __init__(self, fs_dir):
        self.path = os.path.join(fs_dir, "ballast")
        open(self.path, "wb").close()

    def free(self):
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def leave_free(self, free):
        size = os.path.getsize(self.path)
        want = max(0, size + self.free() - free)
        if want < size:
            os.truncate(self.path, want)
        else:
            chunk = b"\0" * MB
            with open(self.path, "ab") as f:
                left = want - size
                try:
                    while left > 0:
                        n = f.write(chunk[:min(left, MB)])
                        left -= n
                    f.flush()
                    os.fsync(f.fileno())
                except OSError:
                    pass            # full already: as much as fits
        return self.free()

    def remove(self):
        os.truncate(self.path, 0)


def setup_tablespace(c, fs_dir):
    ts = os.path.join(fs_dir, "ts")
    os.mkdir(ts, 0o700)
    with c.conn() as conn:
        conn.execute(f"CREATE TABLESPACE small LOCATION '{ts}'")
        for t in ("df_direct", "df_plain"):
            conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS} TABLESPACE small")
            conn.execute(f"CREATE INDEX {t}_indid ON {t} (indid) TABLESPACE small")
            conn.execute(seed_insert(t, 1000, hint=False))
        conn.execute(f"CREATE TABLE df_spacer {TABLE_COLUMNS} TABLESPACE small")
        conn.execute(seed_insert("df_spacer", SPACER_ROWS, hint=False))
        conn.execute("CHECKPOINT")


def load(conn, t, storage, hint):
    """The oversized load: returns (SQLSTATE, message) or (None, None)."""
    stmts = (["BEGIN", f"TRUNCATE {t}"] if storage == "truncated" else [])
    stmts.append(seed_insert(t, 1000 + LOAD_ROWS, start=1001, hint=hint))
    if storage == "truncated":
        stmts.append("COMMIT")
    try:
        for s in stmts:
            conn.execute(s)
        return None, None
    except psycopg.Error as e:
        if storage == "truncated":
            conn.execute("ROLLBACK")
        return e.sqlstate, e.diag.message_primary


def drop_tablespace(c):
    """Best effort (a crash can leave orphaned files that keep the tablespace
    from being dropped); the fixture removes the directory afterwards."""
    if not c.is_running():
        return
    try:
        with c.conn() as conn:
            for t in ("df_direct", "df_plain", "df_spacer", "df_src"):
                conn.execute(f"DROP TABLE IF EXISTS {t}")
            conn.execute("CHECKPOINT")
            conn.execute("DROP TABLESPACE IF EXISTS small")
    except psycopg.Error:
        pass


@pytest.mark.parametrize("storage", ["existing", "truncated"])
def test_disk_full_like_plain_then_usable(small_fs, make_cluster, storage):
    c = make_cluster()
    ballast = Ballast(small_fs)
    try:
        setup_tablespace(c, small_fs)
        with c.conn() as conn:
            set_gucs(conn, SMALL_BATCHES)
            before = {t: table_digest(conn, t) for t in ("df_direct", "df_plain")}
            outcome = {}
            for t, hint in (("df_plain", False), ("df_direct", True)):
                # the same room for each: ~3 MB, less than half the load
                free = ballast.leave_free(3 * MB)
                assert free < LOAD_ROWS * 40 // 2 + MB, free
                outcome[t] = load(conn, t, storage, hint)
            assert outcome["df_plain"][0] == "53100", outcome
            assert outcome["df_direct"][0] == outcome["df_plain"][0], outcome
            assert "No space left on device" in outcome["df_direct"][1], outcome
            for t in before:
                assert table_digest(conn, t) == before[t], t
                verify_table(conn, t)
            # no checkpoint delay left behind by the failed batch
            conn.execute("SET statement_timeout = '60s'")
            conn.execute("CHECKPOINT")

            # Space freed by dropping another table of the tablespace: a load
            # that fits in it goes through.
            ballast.leave_free(256 * 1024)
            conn.execute("DROP TABLE df_spacer")
            conn.execute("CHECKPOINT")
            assert ballast.free() > 4 * MB
            for t, hint in (("df_plain", False), ("df_direct", True)):
                conn.execute(seed_insert(t, 2_000_000 + 20_000, start=2_000_001, hint=hint))
            st = last_statement(conn)
            assert st["path"] == "direct" and st["rows_inserted"] == 20_000, st
            assert table_digest(conn, "df_direct") == table_digest(conn, "df_plain")
            for t in before:
                verify_table(conn, t)
            # and the whole load, once there is room for it
            ballast.remove()
            for t, hint in (("df_plain", False), ("df_direct", True)):
                assert load(conn, t, storage, hint) == (None, None), t
            st = last_statement(conn)
            assert st["path"] == "direct" and st["rows_inserted"] == LOAD_ROWS, st
            assert table_digest(conn, "df_direct") == table_digest(conn, "df_plain")
            verify_table(conn, "df_plain")
            verify_table(conn, "df_direct",
                         frozen_expected=True if storage == "truncated" else None)
        c.stop()
        c.pg_checksums_check()
        c.start()
    finally:
        ballast.remove()
        drop_tablespace(c)


def crash_restart_while_full(c, ballast, hint, storage, fmt):
    """The load fails for lack of space; the server crashes before space is
    freed.  -> (restarted by itself?, startup error) and leaves it running."""
    with c.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        conn.execute("SELECT set_config('directpath.wal_format', %s, false)", (fmt,))
        ballast.leave_free(3 * MB)
        t = "df_direct" if hint else "df_plain"
        before = table_digest(conn, t)
        state, _ = load(conn, t, storage, hint)
        assert state == "53100", state
        # a committed transaction with an xid: all WAL so far is flushed,
        # whatever the load did or did not flush
        conn.execute("SELECT txid_current()")
    off = c.log_size()
    c.stop("immediate")
    try:
        c.start()
        c.wait_ready()
        restarted, err = True, None
    except ClusterError:
        restarted = False
        err = "\n".join(ln for ln in c.log(off).splitlines()
                        if "FATAL" in ln or "could not" in ln)[:2000]
        ballast.remove()
        c.start()
        c.wait_ready()
    with c.conn() as conn:
        assert table_digest(conn, t) == before
        verify_table(conn, t)
    return restarted, err


@pytest.mark.parametrize("storage,fmt", [
    ("existing", "image"),
    ("existing", "records"),
    ("truncated", "image"),
    ("truncated", "records"),
])
def test_crash_restart_while_disk_full(small_fs, make_cluster, storage, fmt):
    """A crash right after a load failed for lack of space: the server
    recovers without needing space the load never got (a plain INSERT's
    WAL only describes pages that were allocated)."""
    c = make_cluster()
    ballast = Ballast(small_fs)
    try:
        setup_tablespace(c, small_fs)
        vals = c.sql("SELECT enumvals FROM pg_settings WHERE name = 'directpath.wal_format'")
        if not vals or fmt not in (vals[0][0] or []):
            pytest.skip(f"directpath.wal_format = {fmt} not available")
        plain = crash_restart_while_full(c, ballast, False, storage, fmt)
        direct = crash_restart_while_full(c, ballast, True, storage, fmt)
        assert plain == (True, None), plain
        assert direct == plain, (
            f"after a direct load failed with disk full, crash recovery could not "
            f"complete until space was freed:\n{direct[1]}")
        c.stop()
        c.pg_checksums_check()
        c.start()
    finally:
        ballast.remove()
        drop_tablespace(c)


@pytest.mark.parametrize("kind", ["insert", "copy"])
def test_parallel_load_disk_full(small_fs, make_cluster, kind):
    """A parallel load (INSERT ... SELECT, or COPY from a file) that runs out
    of space: the leader's write fails with plain INSERT's SQLSTATE and
    message, the workers stop with it, nothing is visible, and once there
    is room the same load runs in parallel."""
    c = make_cluster()
    ballast = Ballast(small_fs)
    try:
        setup_tablespace(c, small_fs)
        with c.conn() as conn:
            conn.execute(f"CREATE TABLE df_src {TABLE_COLUMNS}")
            conn.execute(seed_insert("df_src", 1000 + LOAD_ROWS, start=1001, hint=False))
            conn.execute("COPY df_src TO PROGRAM 'cat > dp_df_src.dat'")
            stmt = ("/*+ APPEND PARALLEL(2) */ INSERT INTO df_direct SELECT * FROM df_src"
                    if kind == "insert" else
                    "/*+ APPEND PARALLEL(2) */ COPY df_direct FROM 'dp_df_src.dat'")
            set_gucs(conn, SMALL_BATCHES)
            conn.execute("SET directpath.min_bytes = 0")
            before = table_digest(conn, "df_direct")
            ballast.leave_free(3 * MB)
            with pytest.raises(psycopg.Error) as e:
                conn.execute(stmt)
            assert e.value.sqlstate == "53100", e.value
            assert "No space left on device" in e.value.diag.message_primary
            assert table_digest(conn, "df_direct") == before
            verify_table(conn, "df_direct")
            ballast.remove()
            conn.execute(stmt)
            st = last_statement(conn)
            assert st["path"] == "direct" and st["parallel_workers"] > 0, st
            assert st["rows_inserted"] == LOAD_ROWS, st
            verify_table(conn, "df_direct")
    finally:
        ballast.remove()
        drop_tablespace(c)
