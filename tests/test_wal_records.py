"""The WAL of direct path loads, per directpath.wal_format: redo reproduces
the pages we wrote (a streaming standby, and crash recovery after COMMIT),
compared byte by byte through pageinspect, and the WAL holds the records we
expect (pg_walinspect and pg_waldump)."""

import re
import struct
import subprocess

import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, crash_immediate, heap_blocks,
                      last_statement, seed_insert, set_gucs, verify_table)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

N = 30_000

XLH_INSERT_LAST_IN_MULTI = 0x02
XLH_INSERT_CONTAINS_NEW_TUPLE = 0x08
XLH_INSERT_ALL_FROZEN_SET = 0x20

PAGE_HEADER = 24          # SizeOfPageHeaderData
CHECKSUM = slice(8, 10)   # pd_checksum
TUPLE_CMIN = slice(8, 12)  # t_field3 (cmin) in a heap tuple header


def raw_pages(conn, table, first):
    """Raw heap pages first..end of a table."""
    return [bytes(r[0]) for r in conn.execute(
        "SELECT get_raw_page(%s, 'main', b::int) FROM generate_series(%s, "
        "pg_relation_size(%s::regclass) / current_setting('block_size')::int - 1) b "
        "ORDER BY b", (table, first, table)).fetchall()]


def masked(page, cmin=True):
    """A page without its checksum, which is set when a page goes to disk
    (a page redo built in shared buffers has none yet), and, with 'cmin',
    without the command id of each tuple, which redo sets to FirstCommandId."""
    p = bytearray(page)
    p[CHECKSUM] = b"\0\0"
    if not cmin:
        return bytes(p)
    lower = struct.unpack_from("<H", p, 12)[0]
    for lp in range(PAGE_HEADER, lower, 4):
        word = struct.unpack_from("<I", p, lp)[0]
        off, flags = word & 0x7FFF, (word >> 15) & 3
        if flags == 1:  # LP_NORMAL
            p[off + TUPLE_CMIN.start:off + TUPLE_CMIN.stop] = b"\0\0\0\0"
    return bytes(p)


def ntuples(page):
    return (struct.unpack_from("<H", page, 12)[0] - PAGE_HEADER) // 4


def compare_pages(want, got, what, exact):
    """Pages equal but for checksums and command ids; command ids too where
    'exact' (loads that were their transaction's first command)."""
    assert len(got) == len(want), f"{what}: {len(got)} pages, want {len(want)}"
    for b, (w, g) in enumerate(zip(want, got)):
        assert masked(g) == masked(w), f"{what}: page {b} differs"
        if exact:
            assert masked(g, cmin=False) == masked(w, cmin=False), \
                f"{what}: page {b} differs in its command ids"


LOADS = ("w_app", "w_frozen", "w_toast")


def create_tables(conn):
    conn.execute(f"CREATE TABLE w_app {TABLE_COLUMNS}")
    conn.execute("CREATE INDEX ON w_app (indid)")
    conn.execute(seed_insert("w_app", 1000, hint=False))
    conn.execute(f"CREATE TABLE w_frozen {TABLE_COLUMNS}")
    conn.execute("CREATE TABLE w_toast (id int, payload text)")
    conn.execute("ALTER TABLE w_toast ALTER payload SET STORAGE EXTERNAL")


def load(conn):
    """The three loads; returns {table: first block written}."""
    first = {t: heap_blocks(conn, t) for t in LOADS}
    # existing storage, the transaction's first command: exact pages
    conn.execute(seed_insert("w_app", N + 1000, start=1001))
    assert last_statement(conn)["path"] == "direct"
    # truncated in the transaction: frozen, two loads (the second with cid 2)
    conn.execute("BEGIN")
    conn.execute("TRUNCATE w_frozen")
    conn.execute(seed_insert("w_frozen", N))
    conn.execute(seed_insert("w_frozen", 2 * N, start=N + 1))
    st = last_statement(conn)
    conn.execute("COMMIT")
    assert st["path"] == "direct" and st["frozen"] is True, st
    first["w_frozen"] = 0
    # rows with values out of line
    conn.execute("/*+ APPEND */ INSERT INTO w_toast SELECT a, CASE WHEN a % 7 = 0 THEN "
                 "(SELECT string_agg(md5(a::text || g), '') FROM generate_series(1, 80) g) "
                 "ELSE 'short ' || a END FROM generate_series(1, 20000) a")
    assert last_statement(conn)["path"] == "direct"
    return first


def capture(conn, first):
    return {t: raw_pages(conn, t, first[t]) for t in LOADS}


BLOCKREF = re.compile(r"blkref #\d+: rel \d+/\d+/(\d+)(?: fork (\w+))? blk (\d+)")
FLAGS = re.compile(r"flags:? 0x([0-9A-F]{2})")


def check_records(conn, pages, first, wal_level, wal_format, start, end):
    """The WAL between start and end holds, for every page loaded, one
    multi-insert record initialising it ('records', or any table when
    logically logged) or a page image ('image'), and nothing else for the
    heap's main fork."""
    logical = wal_level == "logical"
    use_records = wal_format == "records" or logical
    recs = conn.execute(
        "SELECT resource_manager, record_type, description, coalesce(block_ref, ''), "
        "fpi_length FROM pg_get_wal_records_info(%s, %s)", (start, end)).fetchall()
    for t in LOADS:
        filenode = str(conn.execute("SELECT pg_relation_filenode(%s)", (t,)).fetchone()[0])
        seen = {}
        for rm, rtype, desc, bref, fpi_len in recs:
            blocks = [int(b) for node, fork, b in BLOCKREF.findall(bref)
                      if node == filenode and fork in (None, "", "main")]
            if not blocks:
                continue
            if use_records:
                assert (rm, rtype) == ("Heap2", "MULTI_INSERT+INIT"), (t, rm, rtype, desc)
                assert len(blocks) == 1 and fpi_len == 0, (t, bref)
                flags = int(FLAGS.search(desc).group(1), 16)
                page = pages[t][blocks[0] - first[t]]
                assert str(ntuples(page)) in desc, (t, desc)
                assert bool(flags & XLH_INSERT_CONTAINS_NEW_TUPLE) == logical, (t, desc)
                assert bool(flags & XLH_INSERT_ALL_FROZEN_SET) == (t == "w_frozen"), (t, desc)
            else:
                assert (rm, rtype) == ("XLOG", "FPI"), (t, rm, rtype, desc)
                assert fpi_len > 0, (t, bref)
            for b in blocks:
                seen[b] = seen.get(b, 0) + 1
        want = {first[t] + i: 1 for i in range(len(pages[t]))}
        assert seen == want, f"{t}: blocks logged {sorted(seen.items())[:8]}..., want each of " \
                             f"{first[t]}..{first[t] + len(pages[t]) - 1} once"
    return recs


@pytest.mark.parametrize("wal_level,wal_format", [
    ("replica", "records"), ("logical", "records"), ("replica", "image"),
    ("logical", "image")])
def test_redo_reproduces_loaded_pages(make_cluster, tmp_path, wal_level, wal_format):
    p = make_cluster(name="primary", wal_level=wal_level)
    with p.conn() as conn:
        conn.execute("CREATE EXTENSION pg_walinspect")
        create_tables(conn)
    sb = p.make_standby(tmp_path)

    with p.conn() as conn:
        conn.execute("CHECKPOINT")
        set_gucs(conn, SMALL_BATCHES)
        conn.execute(f"SET directpath.wal_format = {wal_format}")
        start = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        first = load(conn)
        end = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
        # before anything reads the rows (hint bits)
        want = capture(conn, first)
        check_records(conn, want, first, wal_level, wal_format, start, end)
    assert all(len(v) > 10 for v in want.values()), {t: len(v) for t, v in want.items()}

    # pg_waldump agrees with pg_walinspect on the record mix
    dump = subprocess.run(
        [p.bin("pg_waldump"), "-p", p.datadir / "pg_wal", "-s", str(start), "-e", str(end),
         "--stats=record"], capture_output=True, text=True, timeout=300)
    assert dump.returncode == 0, dump.stderr
    inits = re.search(r"^Heap2/MULTI_INSERT\+INIT\s+(\d+)", dump.stdout, re.M)
    if wal_format == "records" or wal_level == "logical":
        assert inits and int(inits.group(1)) >= sum(len(v) for v in want.values()), dump.stdout
    else:
        assert not inits, dump.stdout

    # a streaming standby
    p.wait_replay(sb)
    with sb.conn() as conn:
        got = capture(conn, first)
    for t in LOADS:
        compare_pages(want[t], got[t], f"standby {t}", exact=t != "w_frozen")

    # crash recovery from the checkpoint before the loads
    crash_immediate(p)
    with p.conn() as conn:
        got = capture(conn, first)
        for t in LOADS:
            compare_pages(want[t], got[t], f"recovered {t}", exact=t != "w_frozen")
        for t in LOADS:
            verify_table(conn, t, frozen_expected=(t == "w_frozen") or None)
        assert conn.execute("SELECT count(*), sum(value::bigint) FROM w_app").fetchone() == \
            (N + 1000, (N + 1000) * (N + 1001) // 2)
        assert conn.execute("SELECT count(*) FROM w_frozen").fetchone()[0] == 2 * N
    sb.stop()
    p.stop()
    p.pg_checksums_check()
