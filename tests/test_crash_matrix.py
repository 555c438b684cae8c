"""Crash matrix: a direct path load is stopped at a named fault point (the
backend sleeps there, directpath.fault_action = sleep) and the server crashes
there, by SIGKILL of the loading backend or by `pg_ctl stop -m immediate`.

Axes: fault point x hit, kill method, storage (existing table / truncated in
the loading transaction / created in it), wal_level (replica / minimal), with
or without a btree index, a partitioned target, "just before COMMIT" and
"just after COMMIT", and CHECKPOINTs running during the load.  Every case is
one crash; CASES below lists them (their number is printed by
test_crash_point_count).

After each crash: the table holds exactly the rows of a plain reference load
of what was committed (an uncommitted load is invisible, a committed one
complete), verify_table (amcheck + pg_visibility) passes on every leaf, an
index-only scan agrees, the table takes a plain INSERT and another direct
load, and the result again matches its reference.  Where the server is
restarted anyway (immediate stop) it is also stopped cleanly once more and
`pg_checksums --check`ed; the last test of each cluster checks checksums over
everything the matrix left behind.

Tuples of a crashed load that reached the disk carry its xid: the restarted
server must not hand that xid out again (it was made durable before them).
A structural test checks the full-page-write invariant around checkpoints
taken between batches (pg_walinspect).

One cluster per wal_level is shared by the cases (a backend SIGKILL makes the
postmaster reinitialize, an immediate stop needs a start; both recover).
"""

import re
import threading
import time
from dataclasses import dataclass

import psycopg
import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, Background, Cluster,
                      checksums_roundtrip, crash_backend, crash_immediate,
                      fault_gucs, last_statement, leaf_tables, seed_insert, set_gucs,
                      setup_extensions, table_digest, verify_tree,
                      wait_fault_sleep)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

PRE = 1000                  # rows committed before the load (seed 1..PRE)
LOAD_START, N = 100_001, 20_000     # the crashed load: ~110 pages, ~14 batches of 8
AFTER_START, M = 200_001, 3_000     # the direct load after recovery


def load_sql(table):
    return seed_insert(table, LOAD_START + N - 1, start=LOAD_START)


def after_sql(table):
    return seed_insert(table, AFTER_START + M - 1, start=AFTER_START)


@dataclass(frozen=True)
class Case:
    wal: str                # replica | minimal
    storage: str            # existing | truncated | created
    point: str              # fault point, or precommit / postcommit / ckpt-*
    hit: int = 1
    kill: str = "sigkill"   # sigkill | immediate
    index: bool = True
    partitioned: bool = False
    fmt: str = None         # directpath.wal_format, None: the default

    @property
    def id(self):
        hit = f"#{self.hit}" if self.hit != 1 else ""
        part = "-part" if self.partitioned else ""
        fmt = f"-{self.fmt}" if self.fmt else ""
        return (f"{self.wal}-{self.storage}{part}-{self.point}{hit}-{self.kill}-"
                f"{'idx' if self.index else 'noidx'}{fmt}")

    @property
    def settings(self):
        s = dict(SMALL_BATCHES)
        if self.fmt:
            s["directpath.wal_format"] = self.fmt
        return s

    @property
    def committed(self):
        return self.point.startswith("postcommit") or self.point.endswith("-commit")


# -- the matrix -------------------------------------------------------------

POINTS_EXISTING = [("first_batch", 1), ("batch_wal", 1), ("batch_wal", 3),
                   ("batch_written", 2), ("batch_done", 1), ("batch_done", 4),
                   ("btree_append_chunk", 2), ("finish", 1)]
POINTS_NEW = [("first_batch", 1), ("batch_wal", 1), ("batch_wal", 3),
              ("batch_written", 2), ("batch_done", 1), ("before_vm", 1),
              ("before_index_rebuild", 1), ("btree_leaves", 1), ("after_index_rebuild", 1),
              ("finish", 1)]
NEEDS_INDEX = {"before_index_rebuild", "btree_leaves", "after_index_rebuild",
               "btree_append_chunk"}


def fault_cases():
    cases = []
    for wal in ("replica", "minimal"):
        for storage, points in (("existing", POINTS_EXISTING), ("truncated", POINTS_NEW)):
            for i, (point, hit) in enumerate(points):
                # New storage at wal_level=minimal writes no WAL: no batch_wal.
                if wal == "minimal" and storage == "truncated" and point == "batch_wal":
                    continue
                for kill in ("sigkill", "immediate"):
                    # Spread the index axis over both kill methods.
                    index = point in NEEDS_INDEX or ((i + (kill == "immediate")) % 2 == 0)
                    cases.append(Case(wal, storage, point, hit, kill, index))
    return cases


PARTITION_CASES = [
    Case("replica", "existing", "batch_wal", 3, "sigkill", True, True),
    Case("replica", "truncated", "before_vm", 1, "immediate", True, True),
    Case("minimal", "truncated", "before_index_rebuild", 1, "sigkill", True, True),
    Case("minimal", "existing", "batch_written", 2, "immediate", False, True),
    Case("replica", "truncated", "postcommit", 1, "immediate", True, True),
]

COMMIT_CASES = [
    # load finished, COMMIT not sent
    Case("replica", "existing", "precommit", 1, "sigkill", True),
    Case("replica", "truncated", "precommit", 1, "immediate", True),
    Case("minimal", "existing", "precommit", 1, "immediate", False),
    Case("minimal", "truncated", "precommit", 1, "sigkill", True),
    # COMMIT returned
    Case("replica", "existing", "postcommit", 1, "immediate", True),
    Case("replica", "truncated", "postcommit", 1, "immediate", False),
    Case("replica", "created", "postcommit", 1, "sigkill", True),
    Case("minimal", "existing", "postcommit", 1, "sigkill", False),
    Case("minimal", "truncated", "postcommit", 1, "immediate", True),
    Case("minimal", "created", "postcommit", 1, "immediate", True),
]

CHECKPOINT_CASES = [
    # CHECKPOINT in a loop on a second connection while the load runs
    Case("replica", "existing", "ckpt-loop-kill", 5, "sigkill", True),
    Case("replica", "existing", "ckpt-loop-commit", 3, "immediate", False),
    Case("minimal", "truncated", "ckpt-loop-commit", 3, "immediate", True),
    Case("replica", "truncated", "ckpt-loop-kill", 2, "immediate", True),
    # a CHECKPOINT started while the load sits in the checkpoint-delay window
    Case("replica", "existing", "ckpt-window-commit", 2, "immediate", True),
    Case("replica", "existing", "ckpt-window-kill", 2, "sigkill", False),
]

# Both WAL formats of the appended pages (directpath.wal_format), whichever
# is the default: recovery from full-page images and from init-page records.
FORMAT_CASES = [
    Case(wal, storage, point, hit, kill, index, fmt=fmt)
    for fmt in ("image", "records")
    for wal, storage, point, hit, kill, index in [
        ("replica", "existing", "batch_wal", 3, "sigkill", True),
        ("replica", "truncated", "batch_written", 2, "immediate", True),
        ("replica", "existing", "postcommit", 1, "immediate", False),
        ("replica", "truncated", "postcommit", 1, "immediate", True),
        ("minimal", "existing", "postcommit", 1, "sigkill", True),
        ("replica", "existing", "ckpt-loop-commit", 3, "immediate", False),
    ]
]

CASES = fault_cases() + PARTITION_CASES + COMMIT_CASES + CHECKPOINT_CASES + FORMAT_CASES


# -- clusters and references ------------------------------------------------

REFS = {
    # name: statements building the plain reference
    "ref_pre": [seed_insert("{t}", PRE, hint=False)],
    "ref_committed": [seed_insert("{t}", PRE, hint=False),
                      seed_insert("{t}", LOAD_START + N - 1, start=LOAD_START, hint=False)],
    "ref_loadonly": [seed_insert("{t}", LOAD_START + N - 1, start=LOAD_START, hint=False)],
}
for _base in list(REFS):
    REFS[_base + "_after"] = REFS[_base] + [
        "INSERT INTO {t} VALUES (-1, -1, -1, -1)",
        seed_insert("{t}", AFTER_START + M - 1, start=AFTER_START, hint=False)]


class CrashClusters:
    def __init__(self, bindir, tmp_factory):
        self.bindir = bindir
        self.tmp_factory = tmp_factory
        self.clusters = {}
        self.refs = {}
        self.seq = 0

    def get(self, wal):
        if wal not in self.clusters:
            c = Cluster(self.bindir, self.tmp_factory.mktemp(f"crash_{wal}"),
                        name=f"crash_{wal}", wal_level=wal, checksums=True)
            self.clusters[wal] = c
            c.start()
            setup_extensions(c)
            with c.conn() as conn:
                refs = {}
                for name, stmts in REFS.items():
                    conn.execute(f"CREATE TABLE {name} {TABLE_COLUMNS}")
                    for s in stmts:
                        conn.execute(s.format(t=name))
                    refs[name] = table_digest(conn, name)
                self.refs[wal] = refs
        c = self.clusters[wal]
        if not c.is_running():          # an earlier case failed half-way
            c.start()
            c.wait_ready()
        return c

    def table_name(self, case):
        self.seq += 1
        return f"t{self.seq}_{case.storage[:3]}"

    def cleanup(self):
        for c in self.clusters.values():
            c.cleanup()


@pytest.fixture(scope="module")
def crash_clusters(bindir, tmp_path_factory):
    cc = CrashClusters(bindir, tmp_path_factory)
    try:
        yield cc
    finally:
        cc.cleanup()


def require_wal_format(c, fmt):
    vals = c.sql("SELECT enumvals FROM pg_settings WHERE name = 'directpath.wal_format'")
    if not vals or fmt not in (vals[0][0] or []):
        pytest.skip(f"directpath.wal_format = {fmt} not available")


def create_target(conn, t, case, rows=PRE):
    if case.partitioned:
        conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS} PARTITION BY RANGE (timeid)")
        conn.execute(f"CREATE TABLE {t}_p1 PARTITION OF {t} FOR VALUES FROM (MINVALUE) TO (17)")
        conn.execute(f"CREATE TABLE {t}_p2 PARTITION OF {t} FOR VALUES FROM (17) TO (34)")
        conn.execute(f"CREATE TABLE {t}_p3 PARTITION OF {t} FOR VALUES FROM (34) TO (MAXVALUE)")
    else:
        conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS}")
    if case.index:
        conn.execute(f"CREATE INDEX {t}_indid ON {t} (indid)")
    if rows:
        conn.execute(seed_insert(t, rows, hint=False))


def check_index_only(conn, t, case, want_count):
    """An index-only scan (which trusts the VM) counts what a seqscan does."""
    if not case.index:
        return
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_bitmapscan = off")
    try:
        got = conn.execute(f"SELECT count(*) FROM {t} WHERE indid > -1000000").fetchone()[0]
    finally:
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")
    assert got == want_count, f"index-only count {got} != {want_count}"


def check_after_crash(c, refs, t, case, ref, frozen=None):
    """The table after recovery: contents, amcheck, usable for more loads."""
    with c.conn() as conn:
        got = table_digest(conn, t)
        assert got == refs[ref], (
            f"{case.id}: after the crash {t} has {got[0]} rows, digest {got}; "
            f"expected {ref} {refs[ref]}")
        verify_tree(conn, t, frozen_expected=frozen)
        check_index_only(conn, t, case, got[0])
        conn.execute(f"INSERT INTO {t} VALUES (-1, -1, -1, -1)")
        set_gucs(conn, SMALL_BATCHES)
        conn.execute(after_sql(t))
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == M, st
        got = table_digest(conn, t)
        assert got == refs[ref + "_after"], (
            f"{case.id}: after the crash and two more loads {t} has {got}, "
            f"expected {refs[ref + '_after']}")
        verify_tree(conn, t)
        check_index_only(conn, t, case, got[0])


def crash(c, case, pid):
    if case.kill == "sigkill":
        crash_backend(c, pid)
    else:
        crash_immediate(c)


# -- the cases --------------------------------------------------------------

def heap_bytes(conn, t):
    """Size of the main forks of a table or of all its leaves."""
    return sum(conn.execute("SELECT pg_relation_size(%s::regclass)", (leaf,)).fetchone()[0]
               for leaf in leaf_tables(conn, t))


# case id -> tuples of the crashed load found on disk after the restart
ON_DISK = {}


def loader_xid(c, pid):
    with c.conn() as mon:
        x = mon.execute("SELECT backend_xid::text FROM pg_stat_activity WHERE pid = %s",
                        (pid,)).fetchone()
    return int(x[0]) if x and x[0] else None


def check_xid_not_reused(c, t, xid):
    """Run first after the restart.  Tuples of the crashed load that reached
    the disk carry its xid: that xid must have been made durable (WAL flushed)
    before them, else the restarted server hands it out again and a later
    commit of it makes the dead load visible."""
    if xid is None:
        return 0
    with c.conn() as conn:
        on_disk = 0
        for leaf in leaf_tables(conn, t):
            on_disk += conn.execute(
                "SELECT count(*) FROM generate_series(0, pg_relation_size(%s::regclass) / "
                "current_setting('block_size')::int - 1) b, "
                "LATERAL heap_page_items(get_raw_page(%s, b::int)) "
                "WHERE t_xmin::text::bigint = %s", (leaf, leaf, xid)).fetchone()[0]
        nxt = conn.execute("SELECT txid_current() % 4294967296").fetchone()[0]
    if on_disk:
        assert nxt > xid, (
            f"{on_disk} tuples of the crashed load (xid {xid}) are on disk, and the "
            f"restarted server assigned xid {nxt} <= {xid}: the xid was not durable "
            f"before its tuples were written")
    return on_disk


def run_fault_case(c, refs, t, case):
    with c.conn() as conn:
        create_target(conn, t, case)
        size_before = heap_bytes(conn, t)
    stmts = []
    if case.storage == "truncated":
        stmts += ["BEGIN", f"TRUNCATE {t}"]
    stmts.append(load_sql(t))
    if case.storage == "truncated":
        stmts.append("COMMIT")
    off = c.log_size()
    settings = dict(case.settings, **fault_gucs(case.point, case.hit))
    with Background(c, stmts, settings, name=f"load-{case.id}") as bg:
        bg.start()
        wait_fault_sleep(c, bg, case.point, off)
        xid = loader_xid(c, bg.pid)
        crash(c, case, bg.pid)
        bg.join()
        assert isinstance(bg.error, psycopg.OperationalError), bg.error
        assert len(bg.results) < len(stmts)
    ON_DISK[case.id] = check_xid_not_reused(c, t, xid)
    with c.conn() as conn:
        size_after = heap_bytes(conn, t)
    if case.storage == "existing":
        # Pages of the load may have reached the disk (or been restored by
        # recovery from their WAL): dead space after the committed rows.
        assert size_after >= size_before, (size_before, size_after)
    else:
        # Written to the truncation's new (now orphaned) storage: the
        # committed storage is as it was.
        assert size_after == size_before, (size_before, size_after)
    check_after_crash(c, refs, t, case, "ref_pre")


def run_commit_case(c, refs, t, case):
    """precommit: the load is done and COMMIT not sent; postcommit: COMMIT
    returned.  Then the crash."""
    with c.conn() as conn:
        if case.storage != "created":
            create_target(conn, t, case)
    loader = c.conn(autocommit=False)
    try:
        set_gucs(loader, case.settings)
        if case.storage == "truncated":
            loader.execute(f"TRUNCATE {t}")
        elif case.storage == "created":
            create_target(loader, t, case, rows=0)
        loader.execute(load_sql(t))
        st = last_statement(loader)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        assert st["frozen"] is (case.storage != "existing"), st
        if case.point == "postcommit":
            loader.commit()
        pid = c.backend_pid(loader)
        crash(c, case, pid)
    finally:
        loader.close()
    if case.point == "precommit":
        check_after_crash(c, refs, t, case, "ref_pre")
    else:
        ref = {"existing": "ref_committed", "truncated": "ref_loadonly",
               "created": "ref_loadonly"}[case.storage]
        check_after_crash(c, refs, t, case, ref,
                          frozen=True if case.storage != "existing" else None)


class CheckpointLoop:
    """CHECKPOINT over and over on a connection of its own."""

    def __init__(self, c):
        self.conn = c.conn()
        self.count = 0
        self.stop = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, name="checkpoint-loop", daemon=True)

    def _run(self):
        try:
            while not self.stop.is_set():
                self.conn.execute("CHECKPOINT")
                self.count += 1
                time.sleep(0.02)
        except psycopg.Error as e:
            self.error = e

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)
        try:
            self.conn.close()
        except Exception:
            pass


def run_checkpoint_case(c, refs, t, case):
    with c.conn() as conn:
        create_target(conn, t, case)
    stmts = []
    if case.storage == "truncated":
        stmts += ["BEGIN", f"TRUNCATE {t}"]
    stmts.append(load_sql(t))
    if case.storage == "truncated":
        stmts.append("COMMIT")
    commit = case.point.endswith("-commit")

    if case.point.startswith("ckpt-loop"):
        # Pause after a few batches long enough for several checkpoints.
        point = "batch_done"
        settings = dict(case.settings, **fault_gucs(point, case.hit,
                                                    sleep_ms=1500 if commit else 120_000))
        off = c.log_size()
        with CheckpointLoop(c) as loop, Background(c, stmts, settings) as bg:
            bg.start()
            wait_fault_sleep(c, bg, point, off)
            n0 = loop.count
            deadline = time.monotonic() + 30
            while loop.count < n0 + 2 and not bg.done.is_set():
                assert time.monotonic() < deadline, "no checkpoint completed"
                time.sleep(0.05)
            if commit:
                bg.join()
                assert bg.error is None, bg.error
                assert loop.count > n0, "no checkpoint completed during the load"
                # and one more after the commit, then the crash
                n1 = loop.count
                deadline = time.monotonic() + 30
                while loop.count <= n1:
                    assert loop.error is None and time.monotonic() < deadline, loop.error
                    time.sleep(0.05)
                crash(c, case, bg.pid)
            else:
                assert not bg.done.is_set(), bg.error
                crash(c, case, bg.pid)
                bg.join()
                assert bg.error is not None
    else:
        # ckpt-window: the load sleeps inside its checkpoint-delay window
        # (after the batch's WAL, before its pages are written); a CHECKPOINT
        # requested now must wait for it.
        point = "batch_wal"
        settings = dict(case.settings, **fault_gucs(point, case.hit,
                                                    sleep_ms=4000 if commit else 120_000))
        off = c.log_size()
        with Background(c, stmts, settings, name="load") as bg:
            bg.start()
            wait_fault_sleep(c, bg, point, off)
            with Background(c, ["CHECKPOINT"], name="checkpoint") as ck:
                ck.start()
                time.sleep(1.5)
                if not bg.done.is_set():
                    assert not ck.done.is_set(), (
                        "CHECKPOINT completed while a direct load was inside its "
                        "checkpoint-delay window (DELAY_CHKPT_START not honoured)")
                if commit:
                    bg.join()
                    assert bg.error is None, bg.error
                    ck.join()
                    assert ck.error is None, ck.error
                    crash(c, case, bg.pid)
                else:
                    crash(c, case, bg.pid)
                    bg.join()
                    ck.join()
                    assert bg.error is not None and ck.error is not None
    if commit:
        ref = "ref_committed" if case.storage == "existing" else "ref_loadonly"
        check_after_crash(c, refs, t, case, ref,
                          frozen=True if case.storage != "existing" else None)
    else:
        check_after_crash(c, refs, t, case, "ref_pre")


@pytest.mark.parametrize("case", CASES, ids=[cs.id for cs in CASES])
def test_crash(crash_clusters, case):
    c = crash_clusters.get(case.wal)
    if case.fmt:
        require_wal_format(c, case.fmt)
    refs = crash_clusters.refs[case.wal]
    t = crash_clusters.table_name(case)
    if case.point in ("precommit", "postcommit"):
        run_commit_case(c, refs, t, case)
    elif case.point.startswith("ckpt-"):
        run_checkpoint_case(c, refs, t, case)
    else:
        run_fault_case(c, refs, t, case)
    if case.kill == "immediate":
        # restarted anyway: a clean stop and the checksums of everything so far
        checksums_roundtrip(c)


# -- torn-page protection -------------------------------------------------------

def restoring_blocks_since(conn, major, lsn, filenode):
    """Main-fork blocks of relfilenode `filenode` that the WAL from `lsn` on
    restores completely: a full-page image, or a record that initialises the
    page (record type ...+INIT).  Uses pg_walinspect."""
    if major >= 16:
        rows = conn.execute(
            "SELECT DISTINCT relblocknumber FROM pg_get_wal_block_info(%s::pg_lsn, "
            "pg_current_wal_lsn()) WHERE relfilenode = %s AND relforknumber = 0 "
            "AND (block_fpi_length > 0 OR record_type LIKE '%%+INIT')",
            (lsn, filenode)).fetchall()
        return {r[0] for r in rows}
    blocks = set()
    for rtype, ref in conn.execute(
            "SELECT record_type, block_ref FROM pg_get_wal_records_info(%s::pg_lsn, "
            "pg_current_wal_lsn()) WHERE block_ref LIKE %s", (lsn, f"%/{filenode} %")).fetchall():
        for m in re.finditer(r"rel \d+/\d+/(\d+) fork (\w+) blk (\d+)( \(FPW)?", ref):
            if int(m.group(1)) == filenode and m.group(2) == "main" and \
                    (m.group(4) or rtype.endswith("+INIT")):
                blocks.add(int(m.group(3)))
    return blocks


@pytest.mark.parametrize("fmt", ["image", "records"])
@pytest.mark.parametrize("storage,hit", [
    ("existing", 1),
    ("existing", 3),
    ("truncated", 1),
])
def test_pages_written_after_checkpoint_restored_by_wal_after_redo(crash_clusters, storage,
                                                                   hit, fmt):
    """Full-page-write invariant: a heap page written after a checkpoint
    completed is restored completely by WAL at or after that checkpoint's
    redo pointer, a full-page image or an init-page record (else a torn
    write of it could not be repaired by recovery).
    The load pauses between batches, a CHECKPOINT completes, the load goes on."""
    c = crash_clusters.get("replica")
    require_wal_format(c, fmt)
    case = Case("replica", storage, "fpw", index=False, fmt=fmt)
    t = crash_clusters.table_name(case)
    with c.conn() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        create_target(conn, t, case)
        conn.execute("CHECKPOINT")
    stmts = ["BEGIN"] + ([f"TRUNCATE {t}"] if storage == "truncated" else [])
    stmts += [f"SELECT pg_relation_filepath('{t}'), pg_relation_filenode('{t}')", load_sql(t)]
    off = c.log_size()
    settings = dict(case.settings, **fault_gucs("batch_done", hit, sleep_ms=2500))
    with Background(c, stmts, settings) as bg, c.conn() as conn:
        bg.start()
        wait_fault_sleep(c, bg, "batch_done", off)
        path, filenode = bg.results[-1][0]
        conn.execute("CHECKPOINT")
        redo = conn.execute("SELECT redo_lsn::text FROM pg_control_checkpoint()").fetchone()[0]
        # what was in the file when the checkpoint completed is covered by it
        on_disk = conn.execute("SELECT (pg_stat_file(%s)).size / current_setting('block_size')::int",
                               (path,)).fetchone()[0]
        assert not bg.done.is_set(), "the load did not stay paused over the checkpoint"
        bg.join()
        assert bg.error is None, bg.error
        first, last = bg.execute(
            f"SELECT min((ctid::text::point)[0]), max((ctid::text::point)[0]) "
            f"FROM {t} WHERE indid > {PRE}").fetchone()
        bg.execute("COMMIT")
        covered = restoring_blocks_since(conn, c.major, redo, filenode)
    first, last = int(first), int(last)
    missing = [b for b in range(max(first, on_disk), last + 1) if b not in covered]
    assert missing == [], (
        f"heap blocks {missing[:20]} (load: {first}..{last}; {on_disk} blocks on disk at "
        f"the checkpoint) were written after the checkpoint with redo {redo} but no "
        f"WAL after it restores them (full-page image or init-page record)")


def test_crash_point_count():
    ids = [cs.id for cs in CASES]
    assert len(set(ids)) == len(ids)
    print(f"\n{len(CASES)} distinct crash points")
    assert len(CASES) >= 50
    # Every axis is covered.
    assert {cs.kill for cs in CASES} == {"sigkill", "immediate"}
    assert {cs.wal for cs in CASES} == {"replica", "minimal"}
    assert {cs.storage for cs in CASES} == {"existing", "truncated", "created"}
    assert {cs.index for cs in CASES} == {True, False}
    assert any(cs.partitioned for cs in CASES)
    points = {cs.point for cs in CASES}
    assert set(p for p, _ in POINTS_NEW + POINTS_EXISTING) <= points
    assert {"precommit", "postcommit"} <= points


def test_xid_check_exercised():
    """The xid-durability check above saw tuples of crashed loads on disk
    (else it proved nothing)."""
    if not ON_DISK:
        pytest.skip("no fault case ran")
    hit = sorted(k for k, v in ON_DISK.items() if v)
    print(f"\n{len(hit)} of {len(ON_DISK)} fault cases left tuples of the crashed load on disk")
    assert len(hit) >= 5, ON_DISK


@pytest.mark.parametrize("wal", ["replica", "minimal"])
def test_checksums_after_matrix(crash_clusters, wal):
    """Everything the crashes left behind, after a clean stop."""
    c = crash_clusters.get(wal)
    with c.conn() as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT c.oid::regclass::text FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
            "AND NOT c.relispartition ORDER BY 1").fetchall()]
        for t in tables:
            verify_tree(conn, t)
    c.stop("fast")
    c.pg_checksums_check()
