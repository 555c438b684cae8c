"""wal_level = logical: direct path loads of logically logged tables write
multi-insert records that decoding reads, so a subscriber and a
test_decoding slot see every row, TOASTed values included, and nothing of a
load rolled back to a savepoint."""

import hashlib
import re
import time

import psycopg
import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, Background, crash_immediate, fault_gucs,
                      last_statement, set_gucs, sqlstate_of, table_digest,
                      verify_table, verify_tree, wait_fault_sleep)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

N = 20_000
TOAST_EVERY = 40          # every 40th row has a payload stored out of line
TOAST_PIECES = 100        # 100 md5 strings: 3200 bytes, over the threshold

LG_COLUMNS = "(id int PRIMARY KEY, grp int, note text, payload text)"


def wait_until(fn, what, timeout=120):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def payload(i):
    """The payload of row i (None for most rows), as lg_select builds it."""
    if i % TOAST_EVERY:
        return None
    return "".join(hashlib.md5(f"{i}{g}".encode()).hexdigest()
                   for g in range(1, TOAST_PIECES + 1))


def lg_select(first, last):
    return (f"SELECT a, a % 50, 'n' || a, CASE WHEN a % {TOAST_EVERY} = 0 THEN "
            f"(SELECT string_agg(md5(a::text || g), '' ORDER BY g) "
            f"FROM generate_series(1, {TOAST_PIECES}) g) END "
            f"FROM generate_series({first}, {last}) a")


def lg_insert(table, first, last):
    return f"/*+ APPEND */ INSERT INTO {table} {lg_select(first, last)}"


def create_lg(conn, table, unlogged=False, pkey=True):
    columns = LG_COLUMNS if pkey else LG_COLUMNS.replace(" PRIMARY KEY", "")
    conn.execute(f"CREATE {'UNLOGGED ' if unlogged else ''}TABLE {table} {columns}")
    # out of line without compression: every payload is in the TOAST table
    conn.execute(f"ALTER TABLE {table} ALTER payload SET STORAGE EXTERNAL")


def copy_lg(conn, table, first, last):
    """COPY FROM STDIN of rows first..last, direct by the leading hint."""
    with conn.cursor() as cur:
        with cur.copy(f"/*+ APPEND */ COPY {table} FROM STDIN") as cp:
            for i in range(first, last + 1):
                cp.write_row((i, i % 50, f"n{i}", payload(i)))
    st = last_statement(conn)
    assert st["path"] == "direct" and st["rows_inserted"] == last - first + 1, st


def direct(conn, sql, rows, frozen=None):
    conn.execute(sql)
    st = last_statement(conn)
    assert st["path"] == "direct" and st["rows_inserted"] == rows, (sql, st)
    if frozen is not None:
        assert st["frozen"] is frozen, st
    return st


def create_pub_tables(conn):
    create_lg(conn, "lg_t")
    create_lg(conn, "lg_trunc")
    # published through the root, and leaf by leaf
    for t in ("lg_proot", "lg_pleaf"):
        conn.execute(f"CREATE TABLE {t} {LG_COLUMNS} PARTITION BY RANGE (id)")
        conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (MINVALUE) TO (10000)")
        conn.execute(f"CREATE TABLE {t}_2 PARTITION OF {t} FOR VALUES FROM (10000) TO (MAXVALUE)")
        conn.execute(f"ALTER TABLE {t} ALTER payload SET STORAGE EXTERNAL")


def create_sub_tables(conn):
    create_lg(conn, "lg_t")
    create_lg(conn, "lg_trunc")
    # the root arrives as itself: a plain table here
    create_lg(conn, "lg_proot")
    # leaves arrive as themselves: plain tables of the same names
    create_lg(conn, "lg_pleaf_1")
    create_lg(conn, "lg_pleaf_2")


def subscribe(conn, pub, publications, tables):
    """Subscribe to 'publications' of 'pub' and wait for the initial sync
    of its 'tables' tables."""
    conn.execute(f"CREATE SUBSCRIPTION lg_sub CONNECTION '{pub.conninfo()}' "
                 f"PUBLICATION {publications}")
    wait_until(lambda: conn.execute(
        "SELECT count(*) = %s AND bool_and(srsubstate = 'r') FROM pg_subscription_rel",
        (tables,)).fetchone()[0], "the initial table sync")


def test_subscriber_receives_direct_loads(make_cluster):
    pub = make_cluster(name="pub", wal_level="logical")
    sub = make_cluster(name="sub")
    with pub.conn() as conn:
        create_pub_tables(conn)
        conn.execute(f"INSERT INTO lg_t {lg_select(1, 1000)}")
        conn.execute(f"INSERT INTO lg_trunc {lg_select(1, 500)}")
        conn.execute("CREATE PUBLICATION lg_pub FOR TABLE lg_t, lg_trunc, lg_proot "
                     "WITH (publish_via_partition_root = true)")
        conn.execute("CREATE PUBLICATION lg_pub_leaf FOR TABLE lg_pleaf "
                     "WITH (publish_via_partition_root = false)")
    with sub.conn() as conn:
        create_sub_tables(conn)
        subscribe(conn, pub, "lg_pub, lg_pub_leaf", 5)

    with pub.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        # an existing published table: INSERT, then COPY
        direct(conn, lg_insert("lg_t", 1001, 1000 + N), N, frozen=False)
        copy_lg(conn, "lg_t", 1001 + N, 1000 + 2 * N)
        # storage truncated in the transaction: frozen pages
        conn.execute("BEGIN")
        conn.execute("TRUNCATE lg_trunc")
        direct(conn, lg_insert("lg_trunc", 1, N), N, frozen=True)
        conn.execute("COMMIT")
        # partitioned, both ways of publishing; Oracle's hint placement
        for t in ("lg_proot", "lg_pleaf"):
            direct(conn, f"INSERT /*+ APPEND */ INTO {t} {lg_select(1, N)}", N)
            copy_lg(conn, t, N + 1, N + 5000)
        # rolled back to a savepoint: nothing of it may arrive
        conn.execute("BEGIN")
        direct(conn, lg_insert("lg_t", 1001 + 2 * N, 1000 + 3 * N), N)
        conn.execute("SAVEPOINT s")
        direct(conn, lg_insert("lg_t", 1001 + 3 * N, 1000 + 4 * N), N)
        copy_lg(conn, "lg_t", 1001 + 4 * N, 1000 + 5 * N)
        conn.execute("ROLLBACK TO SAVEPOINT s")
        copy_lg(conn, "lg_proot", N + 5001, 2 * N)
        conn.execute("COMMIT")
        # the session setting, no hint
        conn.execute("SET directpath.mode = always")
        conn.execute(f"INSERT INTO lg_t {lg_select(1001 + 5 * N, 1000 + 6 * N)}")
        conn.execute("RESET directpath.mode")
        assert last_statement(conn)["path"] == "direct"

        want = {t: table_digest(conn, t)
                for t in ("lg_t", "lg_trunc", "lg_proot", "lg_pleaf_1", "lg_pleaf_2")}
        assert want["lg_t"][0] == 1000 + 4 * N and want["lg_trunc"][0] == N
        assert want["lg_proot"][0] == 2 * N
        assert want["lg_pleaf_1"][0] + want["lg_pleaf_2"][0] == N + 5000
        assert conn.execute("SELECT count(*) FROM lg_t WHERE id BETWEEN %s AND %s",
                            (1001 + 3 * N, 1000 + 5 * N)).fetchone()[0] == 0
        toasted = conn.execute("SELECT count(*) FROM lg_t WHERE payload IS NOT NULL").fetchone()[0]
        assert toasted == (1000 + 4 * N) // TOAST_EVERY
        for t in ("lg_t", "lg_trunc"):
            verify_table(conn, t)
        verify_tree(conn, "lg_proot")

    with sub.conn() as conn:
        for t, d in want.items():
            wait_until(lambda: table_digest(conn, t) == d,
                       f"{t} on the subscriber to match the publisher ({d[0]} rows)",
                       timeout=180)
        assert conn.execute("SELECT count(*) FROM lg_t WHERE id BETWEEN %s AND %s",
                            (1001 + 3 * N, 1000 + 5 * N)).fetchone()[0] == 0
        for t in want:
            verify_table(conn, t)
        conn.execute("DROP SUBSCRIPTION lg_sub")
    sub.stop()
    pub.stop()
    pub.pg_checksums_check()


DECODED = re.compile(r"^table public\.(\w+): INSERT: id\[integer\]:(\d+) .*"
                     r"payload\[text\]:(null|'[0-9a-f]*'|unchanged-toast-datum)$")


def decoded_rows(conn, slot):
    """{table: {id: payload}} of the INSERTs a test_decoding slot prints;
    also returns the other lines."""
    rows, other = {}, []
    for (line,) in conn.execute(
            "SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL)", (slot,)):
        m = DECODED.match(line)
        if not m:
            other.append(line)
            continue
        t, i, p = m.groups()
        assert p != "unchanged-toast-datum", f"{t} row {i}: its TOAST value did not decode"
        per = rows.setdefault(t, {})
        assert int(i) not in per, f"{t} row {i} decoded twice"
        per[int(i)] = None if p == "null" else p[1:-1]
    return rows, other


def assert_decoded(rows, table, first, last):
    got = rows.get(table, {})
    assert sorted(got) == list(range(first, last + 1)), \
        f"{table}: decoded {len(got)} rows, want {first}..{last}"
    bad = [i for i in range(first, last + 1) if got[i] != payload(i)]
    assert not bad, f"{table}: payloads decoded wrongly for rows {bad[:10]}"


@pytest.mark.parametrize("wal_format", ["records", "image"])
def test_decoding_slot_prints_every_row(make_cluster, wal_format):
    """Every row of every kind of load decodes, TOAST values whole, in both
    settings of directpath.wal_format (a logically logged table gets
    records either way)."""
    c = make_cluster(name="logical", wal_level="logical")
    with c.conn() as conn:
        create_lg(conn, "lg_t")
        conn.execute(f"INSERT INTO lg_t {lg_select(1, 100)}")
        conn.execute(f"CREATE TABLE lg_part {LG_COLUMNS} PARTITION BY HASH (id)")
        for r in range(3):
            conn.execute(f"CREATE TABLE lg_part_{r} PARTITION OF lg_part "
                         f"FOR VALUES WITH (MODULUS 3, REMAINDER {r})")
        conn.execute("ALTER TABLE lg_part ALTER payload SET STORAGE EXTERNAL")
        create_lg(conn, "lg_unl", unlogged=True)
        conn.execute("SELECT pg_create_logical_replication_slot('lg_dec', 'test_decoding')")

        set_gucs(conn, SMALL_BATCHES)
        conn.execute(f"SET directpath.wal_format = {wal_format}")
        direct(conn, lg_insert("lg_t", 101, N), N - 100, frozen=False)
        copy_lg(conn, "lg_t", N + 1, 2 * N)
        conn.execute("BEGIN")
        create_lg(conn, "lg_new")
        direct(conn, lg_insert("lg_new", 1, N), N, frozen=True)
        conn.execute("SAVEPOINT s")
        direct(conn, lg_insert("lg_t", 2 * N + 1, 3 * N), N)
        conn.execute("ROLLBACK TO SAVEPOINT s")
        conn.execute("SAVEPOINT s2")
        copy_lg(conn, "lg_part", 1, N)
        conn.execute("RELEASE SAVEPOINT s2")
        conn.execute("COMMIT")
        # a transaction that fails after its load sends nothing
        conn.execute("BEGIN")
        direct(conn, lg_insert("lg_t", 3 * N + 1, 4 * N), N)
        assert sqlstate_of(conn, "SELECT 1 / 0") == "22012"
        conn.execute("ROLLBACK")
        # unlogged: direct, and not decoded
        direct(conn, lg_insert("lg_unl", 1, N), N)

        rows, other = decoded_rows(conn, "lg_dec")
        assert_decoded(rows, "lg_t", 101, 2 * N)
        assert_decoded(rows, "lg_new", 1, N)
        parts = {}
        for r in range(3):
            parts.update(rows.pop(f"lg_part_{r}", {}))
        rows["lg_part"] = parts
        assert_decoded(rows, "lg_part", 1, N)
        assert set(rows) == {"lg_t", "lg_new", "lg_part"}, set(rows)
        assert not [o for o in other if not o.startswith(("BEGIN", "COMMIT"))], other[:5]
        for t in ("lg_t", "lg_new", "lg_unl"):
            verify_table(conn, t)
        verify_tree(conn, "lg_part")
        conn.execute("SELECT pg_drop_replication_slot('lg_dec')")
    c.stop()
    c.pg_checksums_check()


def test_rejects_on_logically_logged_table(make_cluster):
    """REJECTS_TABLE on a logically logged table: rejected rows are written
    without breaking the decoding of the TOAST values of rows around them
    (one row in ten rejected, more than the rejects held back at a time);
    a duplicate key or a row violating a foreign key cannot be taken back
    from the decoded WAL, so that COPY fails, as plain COPY does, and nothing
    of it is decoded."""
    c = make_cluster(name="logical", wal_level="logical")
    with c.conn() as conn:
        create_lg(conn, "lg_r")
        conn.execute("ALTER TABLE lg_r ADD CHECK (grp % 10 <> 7)")
        conn.execute(f"CREATE TABLE lg_u {TABLE_COLUMNS}")
        conn.execute("ALTER TABLE lg_u ADD PRIMARY KEY (indid)")
        for t in ("lg_bad", "lg_bad2"):
            conn.execute(f"CREATE TABLE {t} (LIKE directpath.rejects INCLUDING ALL)")
        conn.execute("SELECT pg_create_logical_replication_slot('lg_rej', 'test_decoding')")
        set_gucs(conn, SMALL_BATCHES)
        with conn.cursor() as cur:
            with cur.copy("/*+ APPEND */ COPY lg_r FROM STDIN "
                          "WITH (REJECTS_TABLE 'lg_bad')") as cp:
                for i in range(1, N + 1):
                    cp.write_row((i, i % 50, f"n{i}", payload(i)))
        st = last_statement(conn)
        good = [i for i in range(1, N + 1) if i % 50 % 10 != 7]
        assert st["path"] == "direct" and st["rows_inserted"] == len(good), st
        bad = [r[0] for r in conn.execute("SELECT line FROM lg_bad ORDER BY line")]
        assert bad == [i for i in range(1, N + 1) if i % 50 % 10 == 7]

        dup = "".join(f"1\t1\t{i}\t{i}\n" for i in list(range(1, 5000)) + [42])
        with pytest.raises(psycopg.errors.UniqueViolation) as e:
            with conn.cursor() as cur:
                with cur.copy("/*+ APPEND */ COPY lg_u FROM STDIN "
                              "WITH (REJECTS_TABLE 'lg_bad2')") as cp:
                    cp.write(dup)
        assert "REJECTS_TABLE cannot reject duplicate keys" in e.value.diag.message_hint
        assert conn.execute("SELECT count(*) FROM lg_u").fetchone()[0] == 0

        conn.execute("CREATE TABLE lg_fp (id int PRIMARY KEY)")
        conn.execute("INSERT INTO lg_fp SELECT generate_series(1, 10)")
        conn.execute("CREATE TABLE lg_f (a int, p int REFERENCES lg_fp)")
        orphan = "".join(f"{i}\t{i % 10 + 1 if i != 3000 else 99}\n"
                         for i in range(1, 5000))
        with pytest.raises(psycopg.errors.ForeignKeyViolation) as e:
            with conn.cursor() as cur:
                with cur.copy("/*+ APPEND */ COPY lg_f FROM STDIN "
                              "WITH (REJECTS_TABLE 'lg_bad2')") as cp:
                    cp.write(orphan)
        assert "foreign-key violations of a logically logged table" in \
            e.value.diag.message_hint
        assert e.value.diag.message_detail == 'Key (p)=(99) is not present in table "lg_fp".'
        assert conn.execute("SELECT count(*) FROM lg_f").fetchone()[0] == 0

        rows, other = decoded_rows(conn, "lg_rej")
        got = rows.get("lg_r", {})
        assert sorted(got) == good
        assert all(got[i] == payload(i) for i in good), "payloads decoded wrongly"
        assert "lg_u" not in rows and "lg_f" not in rows
        assert sum(1 for o in other if o.startswith("table public.lg_bad: INSERT")) == \
            N - len(good)
        verify_table(conn, "lg_r")
        conn.execute("SELECT pg_drop_replication_slot('lg_rej')")
    c.stop()


def test_toast_chunks_released_during_long_loads(make_cluster):
    """Every row out of line, and no index (rows not queued, so a batch
    leaves the page still filling unwritten): toasted rows wait on that
    page at every batch, so the load writes it too once 16MB of them wait, and the records tell the decoder it may release the chunks
    (LAST_IN_MULTI) during the load, not only at its end.  Every row still
    decodes whole."""
    c = make_cluster(name="logical", wal_level="logical")
    n = 8000
    with c.conn() as conn:
        conn.execute("CREATE EXTENSION pg_walinspect")
        create_lg(conn, "lg_all", pkey=False)
        conn.execute("SELECT pg_create_logical_replication_slot('lg_mem', 'test_decoding')")
        set_gucs(conn, SMALL_BATCHES)
        start = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        direct(conn, f"/*+ APPEND */ INSERT INTO lg_all SELECT a, a % 50, 'n' || a, "
                     f"(SELECT string_agg(md5(a::text || g), '' ORDER BY g) "
                     f"FROM generate_series(1, {TOAST_PIECES}) g) "
                     f"FROM generate_series(1, {n}) a", n)
        end = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
        filenode = conn.execute("SELECT pg_relation_filenode('lg_all')").fetchone()[0]
        flags = [int(re.search(r"flags:? 0x([0-9A-F]{2})", d).group(1), 16) for (d,) in conn.execute(
            "SELECT description FROM pg_get_wal_records_info(%s, %s) "
            "WHERE record_type = 'MULTI_INSERT+INIT' AND block_ref ~ %s",
            (start, end, rf"rel \d+/\d+/{filenode}\M")).fetchall()]
        assert len(flags) > 40, len(flags)
        released = [i for i, f in enumerate(flags) if f & 0x02]
        # once in the middle (16MB of 26MB), and at the end
        assert len(released) >= 2 and released[-1] == len(flags) - 1, released
        assert released[0] < len(flags) - 1, released

        rows, other = decoded_rows(conn, "lg_mem")
        got = rows.get("lg_all", {})
        assert sorted(got) == list(range(1, n + 1))
        want = {i: "".join(hashlib.md5(f"{i}{g}".encode()).hexdigest()
                           for g in range(1, TOAST_PIECES + 1)) for i in range(1, n + 1)}
        assert got == want
        verify_table(conn, "lg_all")
        conn.execute("SELECT pg_drop_replication_slot('lg_mem')")
    c.stop()


def test_relogged_batch_decodes_once(make_cluster):
    """A pipelined batch whose WAL precedes a checkpoint that began before
    the batch was written is logged again, as page images: redo restores
    it, and decoding sees each of its rows once."""
    c = make_cluster(name="logical", wal_level="logical")
    with c.conn() as conn:
        conn.execute("CREATE EXTENSION pg_walinspect")
        create_lg(conn, "lg_p", pkey=False)   # no index: batches are pipelined
        conn.execute("SELECT pg_create_logical_replication_slot('lg_relog', 'test_decoding')")
        start = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    off = c.log_size()
    settings = dict(SMALL_BATCHES, **fault_gucs("batch_done", hit=1, sleep_ms=3000))
    with Background(c, [lg_insert("lg_p", 1, N)], settings=settings) as bg:
        bg.start()
        wait_fault_sleep(c, bg, "batch_done", off)
        c.sql("CHECKPOINT")
        bg.join()
        assert bg.error is None, bg.error
        st = bg.execute("SELECT path, rows_inserted FROM directpath.last_statement()").fetchone()
        assert st == ("direct", N), st
    with c.conn() as conn:
        filenode = conn.execute("SELECT pg_relation_filenode('lg_p')").fetchone()[0]
        kinds = dict(conn.execute(
            "SELECT record_type, count(*) FROM pg_get_wal_records_info(%s, "
            "pg_current_wal_flush_lsn()) WHERE block_ref ~ %s GROUP BY 1",
            (start, rf"rel \d+/\d+/{filenode}\M")).fetchall())
        assert kinds.get("FPI", 0) > 0 and kinds.get("MULTI_INSERT+INIT", 0) > 0, kinds
        rows, _ = decoded_rows(conn, "lg_relog")
        assert_decoded(rows, "lg_p", 1, N)
        verify_table(conn, "lg_p")
        conn.execute("SELECT pg_drop_replication_slot('lg_relog')")
    crash_immediate(c)
    with c.conn() as conn:
        assert conn.execute("SELECT count(*) FROM lg_p").fetchone()[0] == N
        verify_table(conn, "lg_p")
    c.stop()
    c.pg_checksums_check()


@pytest.mark.parametrize("streaming", ["on", "off"])
def test_streamed_transaction_reaches_subscriber(make_cluster, streaming):
    """A load larger than logical_decoding_work_mem: with streaming = on the
    publisher streams the transaction while it runs (toasted rows waiting
    for their record hold streaming back until their batch is complete),
    without it the publisher spills to disk; the subscriber gets every row
    either way, and none of a part rolled back to a savepoint."""
    pub = make_cluster(name="pub", wal_level="logical",
                       extra_conf={"logical_decoding_work_mem": "64kB"})
    sub = make_cluster(name="sub")
    for c in (pub, sub):
        with c.conn() as conn:
            create_lg(conn, "lg_s")
            create_lg(conn, "lg_snk", pkey=False)
            if c is sub:   # the subscriber needs no key to apply inserts
                continue
            conn.execute("CREATE PUBLICATION lg_spub FOR TABLE lg_s, lg_snk")
    with sub.conn() as conn:
        conn.execute(f"CREATE SUBSCRIPTION lg_ssub CONNECTION '{pub.conninfo()}' "
                     f"PUBLICATION lg_spub WITH (streaming = {streaming})")
        wait_until(lambda: conn.execute(
            "SELECT count(*) = 2 AND bool_and(srsubstate = 'r') FROM pg_subscription_rel"
        ).fetchone()[0], "the initial table sync")
    with pub.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        conn.execute("BEGIN")
        direct(conn, lg_insert("lg_s", 1, N), N)
        direct(conn, lg_insert("lg_snk", 1, N), N)
        conn.execute("SAVEPOINT s")
        direct(conn, lg_insert("lg_s", N + 1, 2 * N), N)
        conn.execute("ROLLBACK TO SAVEPOINT s")
        copy_lg(conn, "lg_snk", N + 1, 2 * N)
        conn.execute("COMMIT")
        want = {t: table_digest(conn, t) for t in ("lg_s", "lg_snk")}
        assert want["lg_s"][0] == N and want["lg_snk"][0] == 2 * N
    with sub.conn() as conn:
        for t, d in want.items():
            wait_until(lambda: table_digest(conn, t) == d,
                       f"{t} on the subscriber ({d[0]} rows)", timeout=180)
    with pub.conn() as conn:
        streamed, spilled = conn.execute(
            "SELECT coalesce(sum(stream_txns), 0), coalesce(sum(spill_txns), 0) "
            "FROM pg_stat_replication_slots").fetchone()
    if streaming == "on":
        assert streamed > 0, (streamed, spilled)
    else:
        assert spilled > 0 and streamed == 0, (streamed, spilled)
    with sub.conn() as conn:
        conn.execute("DROP SUBSCRIPTION lg_ssub")
    sub.stop()
    pub.stop()


def parallel(conn, sql, rows, frozen=None):
    """A parallel direct load: it must have had workers."""
    st = direct(conn, sql, rows, frozen)
    assert st["parallel_workers"] > 0, (sql, st)


def test_parallel_loads_reach_subscriber_and_decoder(make_cluster):
    """Parallel INSERT ... SELECT and COPY into logically logged tables
    (rows over the TOAST threshold go to the leader, which toasts them):
    a test_decoding slot prints every row once with its TOAST value, and
    a subscriber ends up equal to the publisher."""
    pub = make_cluster(name="pub", wal_level="logical")
    sub = make_cluster(name="sub")
    with pub.conn() as conn:
        conn.execute("CREATE TABLE lg_src (id int, grp int, note text, payload text)")
        conn.execute(f"INSERT INTO lg_src {lg_select(1, 2 * N)}")
        conn.execute("COPY (SELECT * FROM lg_src WHERE id > %d) TO PROGRAM 'cat > dp_lg.dat'" % N)
        create_lg(conn, "lg_t")
        conn.execute("CREATE PUBLICATION lg_pub FOR TABLE lg_t")
        conn.execute("SELECT pg_create_logical_replication_slot('lg_dec', 'test_decoding')")
    with sub.conn() as conn:
        create_lg(conn, "lg_t")
        subscribe(conn, pub, "lg_pub", 1)

    with pub.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        conn.execute("SET directpath.min_bytes = 0")
        parallel(conn, "/*+ APPEND PARALLEL(2) */ INSERT INTO lg_t "
                 f"SELECT * FROM lg_src WHERE id <= {N}", N, frozen=False)
        parallel(conn, "/*+ APPEND PARALLEL(2) */ COPY lg_t FROM 'dp_lg.dat'", N)
        conn.execute("BEGIN")
        create_lg(conn, "lg_new", pkey=False)
        parallel(conn, "/*+ APPEND PARALLEL(2) */ INSERT INTO lg_new SELECT * FROM lg_src",
                 2 * N, frozen=True)
        conn.execute("COMMIT")
        rows, other = decoded_rows(conn, "lg_dec")
        assert_decoded(rows, "lg_t", 1, 2 * N)
        assert_decoded(rows, "lg_new", 1, 2 * N)
        assert not [o for o in other if not o.startswith(("BEGIN", "COMMIT"))], other[:5]
        conn.execute("SELECT pg_drop_replication_slot('lg_dec')")
        want = table_digest(conn, "lg_t")
        assert want[0] == 2 * N
        verify_table(conn, "lg_t")
    with sub.conn() as conn:
        wait_until(lambda: table_digest(conn, "lg_t") == want,
                   "lg_t on the subscriber to match the publisher", timeout=180)
        verify_table(conn, "lg_t")
        conn.execute("DROP SUBSCRIPTION lg_sub")
    sub.stop()
    pub.stop()
