"""Query helpers shared by the tests and the benchmarks.

The seed-like table of the experiments, directpath.last_statement(), WAL
positions, heap and visibility-map sizes, the leaves of a partitioned table.
"""

import time

from psycopg.rows import dict_row

# The seed table: (timeid int, insid int, indid int, value int).
TABLE_COLUMNS = "(timeid int, insid int, indid int, value int)"


def seed_select(n, start=1, named=False):
    """SELECT producing seed rows start..n (named: with the table's column
    names, for CREATE TABLE AS)."""
    cols = ("a % 50 AS timeid, a % 10000 AS insid, a AS indid, a AS value" if named
            else "a % 50, a % 10000, a, a")
    return f"SELECT {cols} FROM generate_series({int(start)}, {int(n)}) a"


def seed_insert(table, n, start=1, hint=True):
    """INSERT ... SELECT of the seed rows, with the APPEND hint leading."""
    prefix = "/*+ APPEND */ " if hint else ""
    return f"{prefix}INSERT INTO {table} {seed_select(n, start)}"


def seed_sum(n, start=1):
    """sum(value) of seed rows start..n."""
    return (n * (n + 1) - (start - 1) * start) // 2


def last_statement(conn):
    """directpath.last_statement() as a dict, or None when it returns no row."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM directpath.last_statement()").fetchone()


def insert_lsn(conn):
    return conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]


def wal_diff(conn, a, b):
    """Bytes of WAL from LSN a to LSN b."""
    return int(conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)",
                            (str(b), str(a))).fetchone()[0])


def wait_lsn(conn, fn, lsn, timeout, poll=0.005):
    """Poll until fn() (pg_last_wal_replay_lsn, ...) reaches lsn; False on timeout."""
    deadline = time.monotonic() + timeout
    while not conn.execute(f"SELECT coalesce({fn}() >= %s::pg_lsn, false)",
                           (str(lsn),)).fetchone()[0]:
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def heap_blocks(conn, table):
    return conn.execute(
        "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int",
        (table,)).fetchone()[0]


def vm_summary(conn, table):
    """(all_visible, all_frozen) pages of a table's visibility map."""
    return tuple(conn.execute(
        "SELECT all_visible, all_frozen FROM pg_visibility_map_summary(%s::regclass)",
        (table,)).fetchone())


def leaf_tables(conn, table, local_only=False):
    """The table itself, or the leaf partitions of a partitioned table
    (local_only: without foreign partitions)."""
    kinds = " AND c.relkind IN ('r', 'm')" if local_only else ""
    rows = conn.execute(
        "SELECT p.relid::regclass::text FROM pg_partition_tree(%s::regclass) p "
        f"JOIN pg_class c ON c.oid = p.relid WHERE p.isleaf{kinds} ORDER BY 1",
        (table,)).fetchall()
    return [r[0] for r in rows] or [table]
