"""Right-edge append to existing btrees (btappend.c), under readers.

While a direct load appends leaf pages at the right edge of existing
btrees (batch after batch, many pages per batch for a wide key, so that
chunks, parent splits and a taller tree all happen), readers on the
primary and on a streaming standby run index scans forward, backward and
index-only, over and over: every answer must be the committed rows, never an
error.  After the commit both see every row, amcheck is clean on both, and
an interrupted append (an error after some chunks) leaves a valid index that
the next load extends.
"""

import threading
import time

import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, Background, crash_backend,
                      crash_immediate, fault_gucs, last_statement, seed_insert,
                      set_gucs, table_digest, verify_table, wait_fault_sleep)

pytestmark = pytest.mark.directpath

PRE, N = 3000, 30_000
WIDE = "lpad(indid::text, 150, '0')"

QUERIES = {
    # name: (query, answer from the committed rows 1..rows)
    "range": (f"SELECT count(*) FROM {{t}} WHERE indid BETWEEN {PRE - 10} AND {PRE + N}",
              lambda rows: min(rows, PRE + N) - (PRE - 10) + 1),
    "backward": ("SELECT indid FROM {t} ORDER BY indid DESC LIMIT 1", lambda rows: rows),
    "wide": (f"SELECT count(*) FROM {{t}} WHERE {WIDE} >= lpad('{PRE - 5}', 150, '0')",
             lambda rows: rows - (PRE - 5) + 1),
    "index_only": ("SELECT count(indid) FROM {t} WHERE indid > 0", lambda rows: rows),
}


def make_table(conn, t):
    conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS}")
    conn.execute(f"CREATE INDEX {t}_indid ON {t} (indid)")
    conn.execute(f"CREATE INDEX {t}_wide ON {t} (({WIDE}))")
    conn.execute(seed_insert(t, PRE, hint=False))
    conn.execute(f"VACUUM {t}")


class Reader(threading.Thread):
    """Runs QUERIES with index scans until stopped; records wrong answers
    and errors.  'rows' is the number of committed rows it must see."""

    def __init__(self, cluster, t, rows, queries=None):
        super().__init__(daemon=True)
        self.conn = cluster.conn()
        self.t = t
        self.rows = rows
        self.queries = queries or QUERIES
        self.stop = threading.Event()
        self.wrong = []
        self.rounds = 0

    def run(self):
        c = self.conn
        c.execute("SET enable_seqscan = off")
        c.execute("SET enable_bitmapscan = off")
        try:
            while not self.stop.is_set():
                for name, (q, want) in self.queries.items():
                    got = c.execute(q.format(t=self.t)).fetchone()[0]
                    if got != want(self.rows):
                        self.wrong.append((name, got, want(self.rows)))
                self.rounds += 1
        except Exception as e:      # an error is a failure too
            self.wrong.append(("error", repr(e), None))
        finally:
            c.close()

    def finish(self):
        self.stop.set()
        self.join(60)
        return self.rounds, self.wrong


def load_while_reading(p, sb, t, rows, queries, load, settings):
    """Run 'load' in a transaction while readers on the primary and the
    standby run 'queries' (the committed answer: 'rows'), until the standby
    has replayed it; commit; every reader's every answer must have been
    right.  Returns the load's last_statement()."""
    readers = [Reader(c, t, rows, queries) for c in (p, sb)]
    for r in readers:
        r.start()
    with p.conn() as conn:
        set_gucs(conn, settings)
        conn.execute("BEGIN")
        conn.execute(load)
        st = last_statement(conn)
        # the standby replays it all, the readers go on a moment, then stop
        p.wait_replay(sb)
        time.sleep(0.5)
        results = [r.finish() for r in readers]
        conn.execute("COMMIT")
    for where, (rounds, wrong) in zip(("primary", "standby"), results):
        assert rounds > 0, f"{where}: the reader never completed a round"
        assert wrong == [], f"{where}: readers saw {wrong[:5]}"
    return st


def check_answers(p, sb, t, queries, rows):
    """After replay, index scans on both clusters give the answers for
    'rows', and both pass amcheck."""
    p.wait_replay(sb)
    for c in (p, sb):
        with c.conn() as conn:
            conn.execute("SET enable_seqscan = off")
            conn.execute("SET enable_bitmapscan = off")
            for name, (q, want) in queries.items():
                got = conn.execute(q.format(t=t)).fetchone()[0]
                assert got == want(rows), (c.name, name, got)
            conn.execute("RESET enable_seqscan")
            conn.execute("RESET enable_bitmapscan")
            verify_table(conn, t)


def test_readers_during_append_primary_and_standby(make_cluster, tmp_path):
    p = make_cluster(name="primary")
    t = "ra"
    with p.conn() as conn:
        make_table(conn, t)
    sb = p.make_standby(tmp_path)
    st = load_while_reading(p, sb, t, PRE, QUERIES,
                            seed_insert(t, PRE + N, start=PRE + 1), SMALL_BATCHES)
    assert st["path"] == "direct" and st["index_maintenance"] == "append", st
    check_answers(p, sb, t, QUERIES, PRE + N)
    with p.conn() as conn:
        want = table_digest(conn, t)
    with sb.conn() as conn:
        assert table_digest(conn, t) == want
    sb.stop()


STREAMS, PER_STREAM, MORE = 20, 500, 3000
RUN_QUERIES = {
    # rows = committed rows per stream
    "stream": ("SELECT count(*) FROM {t} WHERE acct = 7", lambda rows: rows),
    "stream_last": ("SELECT seq FROM {t} WHERE acct = 7 ORDER BY seq DESC LIMIT 1",
                    lambda rows: rows - 1),
    "backward_all": ("SELECT count(*) FROM (SELECT acct FROM {t} "
                     "ORDER BY acct DESC, seq DESC) s", lambda rows: STREAMS * rows),
    "index_only": ("SELECT count(acct) FROM {t} WHERE acct >= 0",
                   lambda rows: STREAMS * rows),
}


def streams_table(conn, t):
    """PER_STREAM rows of each of STREAMS interleaved streams (acct, seq)."""
    conn.execute(f"CREATE TABLE {t} (acct int, seq int, pad text)")
    conn.execute(f"CREATE UNIQUE INDEX {t}_u ON {t} (acct, seq)")
    conn.execute(f"INSERT INTO {t} SELECT g % {STREAMS}, g / {STREAMS}, 'p' "
                 f"FROM generate_series(0, {STREAMS * PER_STREAM - 1}) g")


def streams_load(t, first_seq, last_seq, pad):
    """The direct load of seq first_seq..last_seq of every stream."""
    return (f"/*+ APPEND */ INSERT INTO {t} SELECT g % {STREAMS}, g / {STREAMS}, "
            f"'{pad}' FROM generate_series({STREAMS * first_seq}, "
            f"{STREAMS * (last_seq + 1) - 1}) g")


def streams_under_readers(make_cluster, tmp_path, t, strategy, fail_first=False):
    """The streams load (after the same load failed at its end, if
    'fail_first') under readers on the primary and a standby; its
    index_maintenance must name 'strategy'."""
    p = make_cluster(name="primary")
    load = streams_load(t, PER_STREAM, PER_STREAM + MORE - 1, "n")
    with p.conn() as conn:
        streams_table(conn, t)
        conn.execute(f"VACUUM {t}")
        if fail_first:
            conn.execute("SET directpath.batch_pages = 100")
            conn.execute("SET directpath.index_merge = off")
            with pytest.raises(Exception, match="duplicate key"):
                conn.execute(load + " UNION ALL SELECT 0, 0, 'dup'")
    sb = p.make_standby(tmp_path)
    # per batch (a load this large against the index would otherwise wait
    # for the end and be merged into a rewrite: test_unique_merge)
    st = load_while_reading(p, sb, t, PER_STREAM, RUN_QUERIES, load,
                            {"directpath.batch_pages": 100, "directpath.index_merge": "off"})
    assert st["path"] == "direct" and strategy in st["index_maintenance"], st
    check_answers(p, sb, t, RUN_QUERIES, PER_STREAM + MORE)
    sb.stop()


def test_readers_during_runs_primary_and_standby(make_cluster, tmp_path):
    """Keys in interleaved ascending streams: each stream's entries become
    new leaf pages inside the tree, after the leaf holding the stream's
    last key is split at the gap (btappend.c's runs).  Readers on the
    primary and the standby scan forward, backward across every stream and
    index-only throughout, and always get the committed answer."""
    streams_under_readers(make_cluster, tmp_path, "rr", "runs")


def test_interrupted_runs_leave_a_valid_index(cluster):
    """An error after a run's split or chunk record, before core completes
    the splits: the load fails, the index stays valid (amcheck), and the
    same load then succeeds with every stream's rows found by index."""
    t = "ri"
    with cluster.conn() as conn:
        streams_table(conn, t)
        load = streams_load(t, PER_STREAM, PER_STREAM + MORE - 1, "n")
        before = table_digest(conn, t)
        conn.execute("SET directpath.batch_pages = 100")
        conn.execute("SET directpath.index_merge = off")
        for hit in (1, 2, 7):
            set_gucs(conn, fault_gucs("btree_append_chunk", hit, action="error"))
            with pytest.raises(Exception, match="btree_append_chunk"):
                conn.execute(load)
            set_gucs(conn, {"directpath.fault_point": ""})
            assert table_digest(conn, t) == before
            verify_table(conn, t)
        # keys past the failed loads' (dead) entries: runs again
        conn.execute(streams_load(t, PER_STREAM + MORE, PER_STREAM + 2 * MORE - 1, "l"))
        st = last_statement(conn)
        assert st["path"] == "direct" and "runs" in st["index_maintenance"], st
        verify_table(conn, t)
        # the failed keys themselves: merged into the leaves holding their
        # dead entries, which are dropped
        conn.execute(load)
        st = last_statement(conn)
        assert st["path"] == "direct" and "leaf merge" in st["index_maintenance"], st
        verify_table(conn, t)
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        for name, (q, want) in RUN_QUERIES.items():
            got = conn.execute(q.format(t=t)).fetchone()[0]
            assert got == want(PER_STREAM + 2 * MORE), (name, got)


def test_runs_killed_mid_load(cluster):
    """SIGKILL while a load sleeps after a run's record (a split at a gap or
    a chunk inside the tree), and an immediate stop at the same place:
    after crash recovery nothing of the load is visible, the index passes
    amcheck, and the next load of new keys goes in as runs."""
    t = "rk"
    with cluster.conn() as conn:
        streams_table(conn, t)
        before = table_digest(conn, t)
    load = streams_load(t, PER_STREAM, PER_STREAM + MORE - 1, "n")
    settings = dict(fault_gucs("btree_append_chunk", 3, sleep_ms=30000),
                    **{"directpath.batch_pages": 100, "directpath.index_merge": "off"})
    for how in ("sigkill", "immediate"):
        off = cluster.log_size()
        with Background(cluster, [load], settings, name="loader") as bg:
            bg.start()
            wait_fault_sleep(cluster, bg, "btree_append_chunk", off)
            if how == "sigkill":
                crash_backend(cluster, bg.pid)
            else:
                crash_immediate(cluster)
            bg.join()
        with cluster.conn() as conn:
            assert table_digest(conn, t) == before, how
            verify_table(conn, t)
    with cluster.conn() as conn:
        conn.execute("SET directpath.batch_pages = 100")
        conn.execute("SET directpath.index_merge = off")
        conn.execute(streams_load(t, PER_STREAM + MORE, PER_STREAM + 2 * MORE - 1, "l"))
        st = last_statement(conn)
        assert st["path"] == "direct" and "runs" in st["index_maintenance"], st
        verify_table(conn, t)
        conn.execute("SET enable_seqscan = off")
        assert conn.execute(f"SELECT count(*) FROM {t} WHERE acct = 7").fetchone()[0] == \
            PER_STREAM + MORE


def test_readers_during_leaf_merges_primary_and_standby(make_cluster, tmp_path):
    """A load that failed at its end left dead entries inside the tree (its
    runs); the same load again repeats their keys, so each batch is merged
    into the leaves holding them and drops them (btappend.c's leaf
    merges).  Readers on the primary and the standby scan forward,
    backward and index-only throughout and always get the committed
    answer; afterwards amcheck is clean on both."""
    streams_under_readers(make_cluster, tmp_path, "rm", "leaf merge", fail_first=True)


def test_short_runs_merge_into_their_leaves(cluster):
    """A btree of many keys with a few entries each takes a load whose
    entries go after each key's old ones: a run of ten entries per key, too
    short to be written on its own, but hundreds into every leaf.  Each
    leaf is merged with all of its entries at once (btrun.c,
    dp_bt_widen_to_merge) instead of each entry being inserted by core:
    in a non-unique index of posting lists and in a unique one.  The
    table and its indexes end as the plain load leaves them, and index
    scans find what a sequential scan finds."""
    load = "INSERT INTO {t} SELECT g, g % 2000, 'new' FROM generate_series(20001, 40000) g"
    q = "SELECT grp, count(*), max(id) FROM {t} WHERE grp BETWEEN 100 AND 160 GROUP BY 1 ORDER BY 1"
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0", "directpath.index_merge": "off"})
        for t in ("sr_plain", "sr_direct"):
            conn.execute(f"CREATE TABLE {t} (id int, grp int, pad text)")
            conn.execute(f"CREATE INDEX {t}_grp ON {t} (grp)")
            conn.execute(f"CREATE UNIQUE INDEX {t}_u ON {t} (grp, id)")
            conn.execute(f"INSERT INTO {t} SELECT g, g % 2000, 'old' "
                         "FROM generate_series(1, 20000) g")
            conn.execute(f"VACUUM {t}")
        conn.execute(load.format(t="sr_plain"))
        conn.execute("/*+ APPEND */ " + load.format(t="sr_direct"))
        st = last_statement(conn)
        assert st["path"] == "direct" and "leaf merge" in st["index_maintenance"], st
        verify_table(conn, "sr_direct")
        assert table_digest(conn, "sr_direct") == table_digest(conn, "sr_plain")
        seq = conn.execute(q.format(t="sr_direct")).fetchall()
        assert seq == conn.execute(q.format(t="sr_plain")).fetchall()
        conn.execute("SET enable_seqscan = off")
        for scan in ("enable_bitmapscan", "enable_indexscan"):
            conn.execute(f"SET {scan} = off")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN " + q.format(t="sr_direct")).fetchall())
            assert "Index" in plan, plan
            assert conn.execute(q.format(t="sr_direct")).fetchall() == seq, scan
            conn.execute(f"RESET {scan}")


def test_retry_after_killed_load(cluster):
    """A load killed after some batches leaves their index entries behind,
    dead (the inserter crashed).  The same load again repeats those keys:
    its first batches are merged into the leaves holding them, the rest
    into a rewrite of the index (the load is large against it), and both
    drop the dead entries, judged from their rows' heap pages read through
    a small ring, so the killed load's pages do not come into shared
    buffers (core's insertion visits every one), and the index ends as
    compact as a fresh build."""
    t = "rk2"
    pre, rows = 10_000, 300_000
    with cluster.conn() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, pad text)")
        conn.execute(f"INSERT INTO {t} SELECT g, repeat('p', 60) "
                     f"FROM generate_series(1, {pre}) g")
        conn.execute(f"VACUUM {t}")
        before = table_digest(conn, t)
        old_pages = conn.execute(f"SELECT pg_relation_size('{t}') / 8192").fetchone()[0]
    load = (f"/*+ APPEND */ INSERT INTO {t} SELECT g, repeat('n', 60) "
            f"FROM generate_series({pre + 1}, {pre + rows}) g")
    settings = dict(fault_gucs("btree_append_chunk", 25, sleep_ms=30000),
                    **{"directpath.batch_pages": 100})
    off = cluster.log_size()
    with Background(cluster, [load], settings, name="loader") as bg:
        bg.start()
        wait_fault_sleep(cluster, bg, "btree_append_chunk", off)
        crash_backend(cluster, bg.pid)
        bg.join()
    with cluster.conn() as conn:
        assert table_digest(conn, t) == before
        dead_pages = conn.execute(
            f"SELECT pg_relation_size('{t}') / 8192").fetchone()[0] - old_pages
        assert dead_pages > 2000, dead_pages
    # recovery and the digest read the killed load's pages into shared
    # buffers: empty them
    cluster.stop("fast")
    cluster.start()
    cluster.wait_ready()
    with cluster.conn() as conn:
        conn.execute("SET directpath.batch_pages = 100")
        conn.execute(load)
        st = last_statement(conn)
        assert st["path"] == "direct" and "merge" in st["index_maintenance"], st
        in_buffers = conn.execute(
            "SELECT count(*) FROM pg_buffercache WHERE relforknumber = 0 "
            "AND relfilenode = pg_relation_filenode(%s) "
            "AND relblocknumber >= %s AND relblocknumber < %s",
            (t, old_pages, old_pages + dead_pages)).fetchone()[0]
        assert in_buffers < dead_pages / 4, (in_buffers, dead_pages)
        verify_table(conn, t)
        assert conn.execute(f"SELECT count(*), count(DISTINCT id) FROM {t}").fetchone() == \
            (pre + rows, pre + rows)
        size = conn.execute(f"SELECT pg_relation_size('{t}_pkey')").fetchone()[0]
        conn.execute(f"CREATE UNIQUE INDEX {t}_fresh ON {t} (id)")
        fresh = conn.execute(f"SELECT pg_relation_size('{t}_fresh')").fetchone()[0]
        assert size <= 1.05 * fresh, (size, fresh)


def test_interrupted_append_leaves_a_valid_index(cluster):
    """An error between chunks (fault point after a chunk's WAL record,
    before its splits are completed): the index stays valid with its
    incomplete splits, the next load beyond its keys completes them and
    appends, and a retry of the failed keys (below the index's last key now)
    is inserted in key order."""
    t = "rb"
    with cluster.conn() as conn:
        make_table(conn, t)
        before = table_digest(conn, t)
        set_gucs(conn, SMALL_BATCHES)
        set_gucs(conn, fault_gucs("btree_append_chunk", 5, action="error"))
        with pytest.raises(Exception, match="btree_append_chunk"):
            conn.execute(seed_insert(t, PRE + N, start=PRE + 1))
        set_gucs(conn, {"directpath.fault_point": ""})
        assert table_digest(conn, t) == before
        verify_table(conn, t)
        incomplete = sum(conn.execute(
            "SELECT count(*) FROM generate_series(1, pg_relation_size(%s) / 8192 - 1) b, "
            "LATERAL bt_page_stats(%s, b::int) s WHERE s.btpo_flags & 128 <> 0",
            (i, i)).fetchone()[0] for i in (f"{t}_indid", f"{t}_wide"))
        assert incomplete > 0, "the fault left no incomplete split to complete"

        conn.execute(seed_insert(t, PRE + 2 * N, start=PRE + N + 1))
        st = last_statement(conn)
        assert st["path"] == "direct" and st["index_maintenance"] == "append", st
        verify_table(conn, t)
        conn.execute(seed_insert(t, PRE + N, start=PRE + 1))
        st = last_statement(conn)
        assert st["path"] == "direct" and "sorted" in st["index_maintenance"], st
        verify_table(conn, t)
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        for q in (f"SELECT count(*) FROM {t} WHERE indid > 0",
                  f"SELECT count(*) FROM {t} WHERE {WIDE} > ''"):
            assert conn.execute(q).fetchone()[0] == PRE + 2 * N, q
        assert conn.execute(f"SELECT max(indid) FROM {t}").fetchone()[0] == PRE + 2 * N


def merge_table(conn, t, rows):
    conn.execute(f"CREATE TABLE {t} {TABLE_COLUMNS}")
    conn.execute(f"CREATE INDEX {t}_rand ON {t} (hashint4(indid))")
    conn.execute(f"CREATE INDEX {t}_mod ON {t} ((indid % 1000), insid)")
    conn.execute(seed_insert(t, rows, hint=False))


MERGE_CHECKS = ("SELECT count(*) FROM {t} WHERE hashint4(indid) = ANY(ARRAY["
                "hashint4(7), hashint4(20007), hashint4(59999), hashint4(79999)])",
                "SELECT count(*), sum(value::bigint) FROM {t} WHERE indid % 1000 = 7")


def index_answers(conn, t):
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_bitmapscan = off")
    try:
        return [conn.execute(q.format(t=t)).fetchone() for q in MERGE_CHECKS]
    finally:
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")


def test_merge_replayed_by_standby_and_undone_by_crash(make_cluster, tmp_path):
    """A merge-rebuild (new storage, WAL-logged as an index build) replays on
    a standby into the same answers and a valid index; a crash after a merge,
    before the commit, leaves the old index as it was."""
    p = make_cluster(name="primary")
    t = "rm"
    with p.conn() as conn:
        merge_table(conn, t, 20_000)
    sb = p.make_standby(tmp_path)
    with p.conn() as conn:
        conn.execute(seed_insert(t, 80_000, start=20_001))
        st = last_statement(conn)
        assert st["path"] == "direct" and "merge" in st["index_maintenance"], st
        assert st["indexes_rebuilt"] == 2, st
        want = index_answers(conn, t)
        assert want[0][0] == 4 and want[1] == (80, sum(range(7, 80_000, 1000))), want
        verify_table(conn, t)
        digest = table_digest(conn, t)
    p.wait_replay(sb)
    with sb.conn() as conn:
        assert index_answers(conn, t) == want
        assert table_digest(conn, t) == digest
        verify_table(conn, t)
    sb.stop()

    # merged, not committed, and the backend killed
    conn = p.conn()
    pid = conn.info.backend_pid
    conn.execute("BEGIN")
    conn.execute(seed_insert(t, 140_000, start=80_001))
    assert "merge" in last_statement(conn)["index_maintenance"]
    crash_backend(p, pid)
    with p.conn() as conn:
        assert table_digest(conn, t) == digest
        assert index_answers(conn, t) == want
        verify_table(conn, t)
        conn.execute(seed_insert(t, 140_000, start=80_001))
        assert "merge" in last_statement(conn)["index_maintenance"]
        verify_table(conn, t)
        assert index_answers(conn, t)[0][0] == 4


BRIN_COUNTS = [(lo, lo + 999) for lo in (1, 2500, 9000, 20_000, 39_000)]


def brin_counts(conn, t):
    """Row counts of a few windows through the BRIN index (bitmap scans
    only), each beside the count a sequential scan gives."""
    out = []
    for lo, hi in BRIN_COUNTS:
        q = f"SELECT count(*) FROM {t} WHERE ts BETWEEN {lo} AND {hi}"
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_indexscan = off")
            plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + q))
            assert "Bitmap Index Scan" in plan, plan
            by_index = conn.execute(q).fetchone()[0]
        with conn.transaction():
            conn.execute("SET LOCAL enable_bitmapscan = off")
            by_heap = conn.execute(q).fetchone()[0]
        out.append((by_index, by_heap))
    return out


def test_brin_summaries_replayed_and_crash_safe(make_cluster, tmp_path):
    """BRIN ranges summarized at the end of a load (brin.c) replay on a
    standby into the same answers; a backend killed after the summaries,
    before its commit, leaves summaries that still answer right, and the
    next load summarizes again."""
    p = make_cluster(name="primary")
    t = "rb"
    with p.conn() as conn:
        conn.execute(f"CREATE TABLE {t} (id int, ts int, pad text)")
        conn.execute(f"CREATE INDEX {t}_ts ON {t} USING brin (ts) "
                     "WITH (pages_per_range = 8)")
        conn.execute(f"INSERT INTO {t} SELECT g, g, 'old' FROM generate_series(1, 5000) g")
        conn.execute(f"SELECT brin_summarize_new_values('{t}_ts')")
    sb = p.make_standby(tmp_path)
    with p.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        conn.execute(f"/*+ APPEND */ INSERT INTO {t} SELECT g, g, 'new' "
                     "FROM generate_series(5001, 30000) g")
        st = last_statement(conn)
        assert st["path"] == "direct" and "summarize" in st["index_maintenance"], st
        want = brin_counts(conn, t)
        assert all(a == b for a, b in want) and want[3][0] == 1000, want
    p.wait_replay(sb)
    with sb.conn() as conn:
        assert brin_counts(conn, t) == want
    sb.stop()

    conn = p.conn()
    pid = conn.info.backend_pid
    conn.execute("BEGIN")
    conn.execute(f"/*+ APPEND */ INSERT INTO {t} SELECT g, g, 'lost' "
                 "FROM generate_series(30001, 40000) g")
    assert "summarize" in last_statement(conn)["index_maintenance"]
    crash_backend(p, pid)
    with p.conn() as conn:
        assert brin_counts(conn, t) == want
        conn.execute(f"/*+ APPEND */ INSERT INTO {t} SELECT g, g, 'again' "
                     "FROM generate_series(30001, 40000) g")
        got = brin_counts(conn, t)
        assert all(a == b for a, b in got) and got[4][0] == 1000, got
