"""A parallel COPY into a plain table keeps the input's order
(src/parallel/parorder.c): the workers and the leader parse chunks of the
input, and the leader takes their pages into the table in the order of
the chunks, so the heap holds the rows in the file's order, as a serial
COPY leaves them.

Each case loads numbered rows (the number grows with the line) and reads
them back by ctid: the numbers come in order, the rows are the serial
COPY's, the heap and its index pass amcheck, and the table has at most a
few more pages than the serial load's (one partly filled page where a
worker's chunk is followed by another process's).  Text, CSV and binary
files, one to three workers, COPY FROM STDIN through a driver; a WHERE
clause; rows that need TOAST (the leader places those on its own pages:
the other rows keep their order); and a leader that has kept as many
pages as it may for later chunks while the workers sleep: it waits, and
the order holds.

A parallel INSERT ... SELECT or CREATE TABLE AS whose SELECT is a scan
keeps the scan's order the same way: the processes claim block ranges of
the sources in turn, and the leader takes their pages in the order of the
ranges.  Those cases read rows of one width (ord_fix): the page builder
of an INSERT ... SELECT puts a short row in the room an earlier page has
left, serially too, so rows of several widths are not strictly in the
scan's order by ctid on either path.  For one table with a WHERE clause,
a partitioned source (its partitions in the Append's order), CREATE TABLE
AS, a table inserted into itself, and a leader that waits for a worker
whose claim it has not heard of yet.
"""

import pytest

from conftest import fault_gucs, last_statement, set_gucs, table_digest, verify_table

pytestmark = pytest.mark.directpath

ROWS = 400_000
COLS = "(n int NOT NULL, v text, k int)"


def make_source(conn):
    """ord_src's rows (n grows with the line) and their files in the data
    directory, in text, CSV and binary; made once per cluster."""
    if conn.execute("SELECT to_regclass('ord_src')").fetchone()[0] is not None:
        return
    conn.execute(f"CREATE TABLE ord_src {COLS}")
    conn.execute("INSERT INTO ord_src SELECT g, md5(g::text) || repeat('x', g % 40), g % 11 "
                 f"FROM generate_series(1, {ROWS}) g")
    for fmt in ("text", "csv", "binary"):
        conn.execute(f"COPY (SELECT * FROM ord_src ORDER BY n) TO PROGRAM "
                     f"'cat > dp_ord_src.{fmt}' WITH (FORMAT {fmt})")


def in_order(conn, t):
    """Rows read by ctid whose n is below the row before's."""
    return conn.execute(
        f"SELECT count(*) FROM (SELECT n, lag(n) OVER (ORDER BY ctid) AS before "
        f"FROM {t}) s WHERE n < before").fetchone()[0]


def pages(conn, t):
    return conn.execute(f"SELECT pg_relation_size('{t}') / 8192").fetchone()[0]


def load_both(conn, t, copy, workers):
    """The serial direct COPY into {t}_s and the parallel one into {t}_p
    ('copy' with {t}: the target); each table with a primary key."""
    for suffix, hint in (("_s", "/*+ APPEND */"),
                         ("_p", f"/*+ APPEND PARALLEL({workers}) */")):
        conn.execute(f"DROP TABLE IF EXISTS {t}{suffix}")
        conn.execute(f"CREATE TABLE {t}{suffix} {COLS}")
        conn.execute(f"ALTER TABLE {t}{suffix} ADD PRIMARY KEY (n)")
        conn.execute(f"{hint} " + copy.format(t=t + suffix))
    report = last_statement(conn)
    assert report["parallel_workers"] >= 1, report
    return t + "_s", t + "_p"


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("fmt", ["text", "csv", "binary"])
def test_copy_keeps_file_order(cluster, fmt, workers):
    """Every row of the file, in the file's order, in a heap that passes
    amcheck; a few more pages than the serial load's at most."""
    t = f"ord_{fmt}_{workers}"
    with cluster.conn() as conn:
        make_source(conn)
        serial, par = load_both(conn, t, f"COPY {{t}} FROM 'dp_ord_src.{fmt}' "
                                f"WITH (FORMAT {fmt})", workers)
        assert table_digest(conn, par) == table_digest(conn, serial)
        assert in_order(conn, serial) == 0
        assert in_order(conn, par) == 0
        more = pages(conn, par) - pages(conn, serial)
        assert 0 <= more <= pages(conn, serial) // 50, (pages(conn, par), pages(conn, serial))
        verify_table(conn, par)


def test_copy_from_stdin_keeps_order(cluster):
    """A driver's copy API (CopyData messages cut into chunks by the
    leader): the same order."""
    t = "ord_stdin"
    with cluster.conn() as conn:
        make_source(conn)
        conn.execute(f"CREATE TABLE {t} {COLS}")
        rows = conn.execute("SELECT n, v, k FROM ord_src ORDER BY n").fetchall()
        with conn.cursor() as cur:
            with cur.copy(f"/*+ APPEND PARALLEL(2) */ COPY {t} FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)
        assert last_statement(conn)["parallel_workers"] >= 1
        assert table_digest(conn, t) == table_digest(conn, "ord_src")
        assert in_order(conn, t) == 0
        verify_table(conn, t)


def test_where_and_toast_rows(cluster):
    """A WHERE clause drops rows in every process; rows too wide for a page
    (placed by the leader when their chunk's turn comes, on its own pages)
    are all there, and every other row keeps the file's order."""
    t = "ord_toast"
    with cluster.conn() as conn:
        make_source(conn)
        conn.execute("DROP TABLE IF EXISTS ord_wide")
        conn.execute(f"CREATE TABLE ord_wide {COLS}")
        # every 5000th row's text incompressible and past the TOAST threshold
        conn.execute("INSERT INTO ord_wide SELECT n, CASE WHEN n % 5000 = 0 THEN "
                     "(SELECT string_agg(md5(n::text || i::text), '') "
                     " FROM generate_series(1, 150) i) ELSE v END, k FROM ord_src")
        conn.execute("COPY (SELECT * FROM ord_wide ORDER BY n) TO PROGRAM "
                     "'cat > dp_ord_wide.csv' WITH (FORMAT csv)")
        serial, par = load_both(conn, t, "COPY {t} FROM 'dp_ord_wide.csv' "
                                "WITH (FORMAT csv) WHERE k <> 3", 2)
        assert table_digest(conn, par) == table_digest(conn, serial)
        assert conn.execute(f"SELECT count(*) FROM {par} WHERE k = 3").fetchone()[0] == 0
        wide = conn.execute(f"SELECT count(*) FROM {par} WHERE length(v) > 4000").fetchone()[0]
        assert wide == conn.execute("SELECT count(*) FROM ord_src "
                                    "WHERE n % 5000 = 0 AND k <> 3").fetchone()[0] > 0
        narrow = conn.execute(
            f"SELECT count(*) FROM (SELECT n, lag(n) OVER (ORDER BY ctid) AS before "
            f"FROM {par} WHERE length(v) < 4000) s WHERE n < before").fetchone()[0]
        assert narrow == 0
        verify_table(conn, par)


def test_leader_waits_when_it_kept_enough(cluster):
    """Both workers sleep before their second chunk: the leader parses
    chunks of its own and keeps their pages until it may keep no more
    (the DEBUG1 line), then waits for the workers' chunks; the table
    still holds every row in the file's order."""
    t = "ord_wait"
    with cluster.conn() as conn:
        make_source(conn)
        conn.execute(f"CREATE TABLE {t} {COLS}")
        set_gucs(conn, fault_gucs("worker_chunk", hit=2, sleep_ms=3000))
        conn.execute("SET client_min_messages = debug1")
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute(f"/*+ APPEND PARALLEL(2) */ COPY {t} FROM 'dp_ord_src.csv' "
                     "WITH (FORMAT csv)")
        conn.execute("RESET client_min_messages")
        set_gucs(conn, {"directpath.fault_point": ""})
        assert any("pages kept for later chunks" in m for m in notices), notices[-5:]
        assert table_digest(conn, t) == table_digest(conn, "ord_src")
        assert in_order(conn, t) == 0
        verify_table(conn, t)


def test_partitioned_target_still_loads(cluster):
    """A partitioned target is not kept in order (a page per leaf per
    chunk would be left partly empty): its rows are all there, routed as
    the serial load routes them."""
    t = "ord_part"
    with cluster.conn() as conn:
        make_source(conn)
        conn.execute(f"CREATE TABLE {t} {COLS} PARTITION BY HASH (n)")
        for r in range(4):
            conn.execute(f"CREATE TABLE {t}_{r} PARTITION OF {t} "
                         f"FOR VALUES WITH (MODULUS 4, REMAINDER {r})")
        conn.execute(f"/*+ APPEND PARALLEL(2) */ COPY {t} FROM 'dp_ord_src.text'")
        assert last_statement(conn)["parallel_workers"] >= 1
        assert table_digest(conn, t) == table_digest(conn, "ord_src")
        for r in range(4):
            want = conn.execute(f"SELECT count(*) FROM ord_src WHERE "
                                f"satisfies_hash_partition('{t}'::regclass, 4, {r}, n)"
                                ).fetchone()[0]
            assert conn.execute(f"SELECT count(*) FROM {t}_{r}").fetchone()[0] == want


def make_fixed(conn):
    """ord_fix: ROWS numbered rows of one width, in order; made once."""
    if conn.execute("SELECT to_regclass('ord_fix')").fetchone()[0] is not None:
        return
    conn.execute(f"CREATE TABLE ord_fix {COLS}")
    conn.execute("INSERT INTO ord_fix SELECT g, md5(g::text), g % 11 "
                 f"FROM generate_series(1, {ROWS}) g")


def assert_serial_order(conn, serial, par):
    """The serial load's rows, in the scan's order on both; pages within 2%
    of the serial load's (a serial load may leave a page partly empty at
    the end of a batch, a parallel one where another process takes over)."""
    assert table_digest(conn, par) == table_digest(conn, serial)
    assert in_order(conn, serial) == 0
    assert in_order(conn, par) == 0
    more = pages(conn, par) - pages(conn, serial)
    assert abs(more) <= pages(conn, serial) // 50, (pages(conn, par), pages(conn, serial))
    verify_table(conn, par)


def load_select_both(conn, t, select, workers, setup=None):
    """INSERT ... SELECT into {t}_s serially and into {t}_p in parallel,
    each table with a primary key ('setup' run on each first)."""
    for suffix, hint in (("_s", "/*+ APPEND */"),
                         ("_p", f"/*+ APPEND PARALLEL({workers}) */")):
        conn.execute(f"DROP TABLE IF EXISTS {t}{suffix}")
        conn.execute(f"CREATE TABLE {t}{suffix} {COLS}")
        conn.execute(f"ALTER TABLE {t}{suffix} ADD PRIMARY KEY (n)")
        if setup:
            conn.execute(setup.format(t=t + suffix))
        conn.execute(f"{hint} INSERT INTO {t}{suffix} " + select.format(t=t + suffix))
    report = last_statement(conn)
    assert report["parallel_workers"] >= 1, report
    return t + "_s", t + "_p"


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_insert_select_keeps_scan_order(cluster, workers):
    """The serial INSERT ... SELECT's rows on the serial load's pages; a
    WHERE clause filters in every process."""
    t = f"ord_ins_{workers}"
    with cluster.conn() as conn:
        make_fixed(conn)
        serial, par = load_select_both(conn, t, "SELECT * FROM ord_fix WHERE k <> 3",
                                       workers)
        assert conn.execute(f"SELECT count(*) FROM {par} WHERE k = 3").fetchone()[0] == 0
        assert_serial_order(conn, serial, par)


def test_partitioned_source_and_ctas_keep_order(cluster):
    """A range-partitioned source is read partition after partition, in the
    Append's order; a CREATE TABLE AS run in parallel
    (directpath.parallel_workers) keeps its scan's order too."""
    with cluster.conn() as conn:
        make_fixed(conn)
        conn.execute("DROP TABLE IF EXISTS ord_psrc, ord_ctas_s, ord_ctas_p")
        conn.execute(f"CREATE TABLE ord_psrc {COLS} PARTITION BY RANGE (n)")
        for lo in range(0, ROWS, ROWS // 4):
            conn.execute(f"CREATE TABLE ord_psrc_{lo} PARTITION OF ord_psrc "
                         f"FOR VALUES FROM ({lo + 1}) TO ({lo + ROWS // 4 + 1})")
        conn.execute("INSERT INTO ord_psrc SELECT * FROM ord_fix ORDER BY n")
        serial, par = load_select_both(conn, "ord_pdst", "SELECT * FROM ord_psrc", 2)
        assert table_digest(conn, par) == table_digest(conn, "ord_fix")
        assert_serial_order(conn, serial, par)
        set_gucs(conn, {"directpath.mode": "always"})
        conn.execute("CREATE TABLE ord_ctas_s AS SELECT * FROM ord_fix")
        set_gucs(conn, {"directpath.parallel_workers": "2"})
        conn.execute("CREATE TABLE ord_ctas_p AS SELECT * FROM ord_fix")
        report = last_statement(conn)
        set_gucs(conn, {"directpath.mode": "hint", "directpath.parallel_workers": "0"})
        assert report["parallel_workers"] >= 1, report
        assert_serial_order(conn, "ord_ctas_s", "ord_ctas_p")


def test_insert_into_itself_keeps_order(cluster):
    """INSERT INTO t SELECT ... FROM t reads only the blocks t had when the
    statement began; the copies follow the originals as serially."""
    with cluster.conn() as conn:
        make_fixed(conn)
        serial, par = load_select_both(
            conn, "ord_self", f"SELECT n + {ROWS}, v, k FROM {{t}}", 2,
            setup="INSERT INTO {t} SELECT * FROM ord_fix ORDER BY n")
        assert conn.execute(f"SELECT count(*), count(DISTINCT n), max(n) FROM {par}"
                            ).fetchone() == (2 * ROWS, 2 * ROWS, 2 * ROWS)
        assert_serial_order(conn, serial, par)


def test_scan_leader_waits_for_an_unannounced_range(cluster):
    """Both workers sleep as soon as they have claimed their first range,
    before saying so: the leader scans ranges of its own and keeps their
    pages until it may keep no more (the DEBUG1 line), then waits for the
    head range, whose worker it does not know yet; the order holds.  The
    source is large (about 100 ranges of 128 blocks), so that a worker that
    starts late still leaves the leader more than its bound to keep."""
    with cluster.conn() as conn:
        if conn.execute("SELECT to_regclass('ord_fix_big')").fetchone()[0] is None:
            conn.execute(f"CREATE TABLE ord_fix_big {COLS}")
            conn.execute("INSERT INTO ord_fix_big SELECT g, md5(g::text), g % 11 "
                         f"FROM generate_series(1, {4 * ROWS}) g")
        set_gucs(conn, fault_gucs("worker_chunk", hit=1, sleep_ms=3000))
        conn.execute("SET client_min_messages = debug1")
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        serial, par = load_select_both(conn, "ord_scan_wait", "SELECT * FROM ord_fix_big", 2)
        conn.execute("RESET client_min_messages")
        set_gucs(conn, {"directpath.fault_point": ""})
        assert any("pages kept for later chunks" in m for m in notices), notices[-5:]
        assert_serial_order(conn, serial, par)
