"""Binary COPY through the row former (src/input/rowform.c, fastin.c's
binary input), differentially.

A file written by COPY ... TO (FORMAT binary) from random rows of the
fixed-width types the fast binary input takes (int2, int4, int8, float4
with NaN and infinities, float8, bool, date and timestamps with their
infinities, uuid) and of types it leaves to their receive functions (text
with non-ASCII characters, numeric, varchar(n), timestamp(0), an array), NULLs in every column, is loaded by plain COPY,
by a direct serial COPY and by a direct parallel COPY with
directpath.copy_fast_input = check (which also calls each receive function
and fails on a difference): the same rows, every row formed by the former,
the fixed-width fields taken without a call.  Hand-made files with a field
of the wrong length, a date out of range, a NULL for a NOT NULL domain, a
negative length, a wrong field count, data after the trailer and a tuple
cut short fail every load with plain COPY's SQLSTATE, message and context
line (a table with a domain column loads serially: parallel loads refuse
domains).
"""

import struct

import psycopg
import pytest

from conftest import last_statement

pytestmark = pytest.mark.directpath

COLUMNS = ("id int, a int2, b int4, c int8, d float4, e float8, f bool, g date, "
           "h timestamp, i timestamptz, j uuid, k text, l numeric, m varchar(10), "
           "o timestamp(0), p int4[]")
FAST = ["int2", "int4", "int8", "float4", "float8", "bool", "date", "timestamp",
        "timestamptz", "uuid"]
ROWS = 30_000
SOURCE = """
SELECT g,
       nullif((g % 60000 - 30000), 7)::int2,
       CASE WHEN g % 19 = 0 THEN NULL ELSE g * 7919 END,
       (g::int8 * 2654435761) - 4000000000000,
       CASE g % 97 WHEN 0 THEN 'NaN'::float4 WHEN 1 THEN '-Infinity' ELSE g / 7.0 END,
       CASE WHEN g % 23 = 0 THEN NULL ELSE g / 13.0 END,
       CASE WHEN g % 3 = 0 THEN NULL ELSE g % 2 = 0 END,
       CASE g % 101 WHEN 0 THEN 'infinity'::date WHEN 1 THEN '4713-01-01 BC'
            ELSE date '2000-01-01' + (g % 40000 - 20000) END,
       CASE g % 89 WHEN 0 THEN '-infinity'::timestamp
            ELSE timestamp '1970-01-01' + g * interval '17 min 3.000001 s' END,
       timestamptz '2020-01-01 00:00+00' - g * interval '1 h 1 s',
       CASE WHEN g % 29 = 0 THEN NULL ELSE md5(g::text)::uuid END,
       CASE WHEN g % 31 = 0 THEN NULL ELSE 'ü' || repeat('x', g % 40) || '日本' END,
       CASE WHEN g % 37 = 0 THEN NULL ELSE (g - 15000) / 7.0 END,
       left(md5(g::text), g % 11),
       timestamp '2001-02-03 04:05:06.5' + g * interval '1.25 s',
       CASE WHEN g % 43 = 0 THEN NULL ELSE ARRAY[g, -g] END
FROM generate_series(1, {n}) g
"""
LOADS = {"plain": "COPY {t} FROM '{f}' WITH (FORMAT binary)",
         "direct": "/*+ APPEND */ COPY {t} FROM '{f}' WITH (FORMAT binary)",
         "parallel": "/*+ APPEND PARALLEL(2) */ COPY {t} FROM '{f}' WITH (FORMAT binary)"}


def load(conn, how, table, columns, path):
    """Load into a fresh table in check mode: (rows as text, or the
    error's SQLSTATE, message and first context line), last_statement(),
    last_copy_reader(), {type: (fast, fallback)}."""
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} ({columns})")
    conn.execute("SET directpath.copy_fast_input = 'check'")
    conn.execute("SET directpath.min_bytes = 0")
    try:
        conn.execute(LOADS[how].format(t=table, f=path))
        out = conn.execute(f"SELECT {table}::text FROM {table} ORDER BY 1").fetchall()
    except psycopg.Error as e:
        out = (e.diag.sqlstate, e.diag.message_primary,
               (e.diag.context or "").splitlines()[0] if e.diag.context else None)
    st = last_statement(conn)
    reader = conn.execute("SELECT formed, core FROM directpath.last_copy_reader()").fetchone()
    counts = {t: (f, s) for t, f, s in conn.execute(
        "SELECT typname::text, fast, fallback FROM directpath.last_copy_input() "
        "JOIN pg_type ON pg_type.oid = type")}
    conn.execute("RESET ALL")
    return out, st, reader, counts


@pytest.fixture
def domain(cluster):
    with cluster.conn() as conn:
        conn.execute("DROP DOMAIN IF EXISTS bf_nn CASCADE")
        conn.execute("CREATE DOMAIN bf_nn AS int4 NOT NULL")
    yield


def test_binary_loads_the_same_rows(cluster, tmp_path, domain):
    """Plain, serial direct and parallel direct COPY of the same binary
    file: equal rows; the former formed them all; each fixed-width type's
    fields were taken without their receive function (the check mode
    compared each with it)."""
    path = tmp_path / "bf.bin"
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS bf_src")
        conn.execute(f"CREATE TABLE bf_src ({COLUMNS})")
        conn.execute("INSERT INTO bf_src " + SOURCE.format(n=ROWS))
        conn.execute(f"COPY bf_src TO '{path}' WITH (FORMAT binary)")
        got = {how: load(conn, how, "bf_t", COLUMNS, path) for how in LOADS}
        plain = got["plain"][0]
        assert isinstance(plain, list) and len(plain) == ROWS, plain
        for how in ("direct", "parallel"):
            out, st, reader, counts = got[how]
            assert out == plain, how
            assert st["path"] == "direct", st
            assert reader == (ROWS, 0), (how, reader)
            for t in FAST:
                fast, slow = counts[t]
                assert fast > 0.5 * ROWS and slow == 0, (how, t, counts)
        assert got["parallel"][1]["parallel_workers"] > 0, got["parallel"][1]
        assert got["parallel"][3] == got["direct"][3]
        conn.execute("DROP TABLE bf_src, bf_t")


def field(b):
    return struct.pack("!i", -1) if b is None else struct.pack("!i", len(b)) + b


def tuple_(*fields):
    return struct.pack("!h", len(fields)) + b"".join(field(f) for f in fields)


HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
TRAILER = struct.pack("!h", -1)
GOOD = tuple_(struct.pack("!i", 1), struct.pack("!i", 0), struct.pack("!i", 5))
# the second tuple of each file is bad in one way
BAD = {
    "int4 of 8 bytes": tuple_(struct.pack("!q", 1), struct.pack("!i", 0), struct.pack("!i", 5)),
    "int4 of 2 bytes": tuple_(struct.pack("!h", 1), struct.pack("!i", 0), struct.pack("!i", 5)),
    "date out of range": tuple_(struct.pack("!i", 1), struct.pack("!i", 2**31 - 100),
                                struct.pack("!i", 5)),
    "NULL for a NOT NULL domain": tuple_(struct.pack("!i", 1), struct.pack("!i", 0), None),
    "negative length": struct.pack("!hi", 3, -2),
    "field count": tuple_(struct.pack("!i", 1)),
    "data after the trailer": TRAILER + b"x",
    "tuple cut short": struct.pack("!hi", 3, 4) + b"\x00\x00",
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_binary_fails_as_core(cluster, tmp_path, domain, case):
    """A bad second tuple fails plain, serial direct and parallel direct
    COPY alike: SQLSTATE, message, 'COPY bf_e, line 2[, column c]'."""
    path = tmp_path / "bad.bin"
    data = HEADER + GOOD + BAD[case]
    if not case.startswith(("data after", "tuple cut")):
        data += TRAILER
    path.write_bytes(data)
    path.chmod(0o644)
    with cluster.conn() as conn:
        columns = "a int4, d date, n " + ("bf_nn" if "domain" in case else "int4")
        got = {how: load(conn, how, "bf_e", columns, path)[0] for how in LOADS}
    assert isinstance(got["plain"], tuple), got["plain"]
    assert got["direct"] == got["plain"], got
    assert got["parallel"] == got["plain"], got
    if not case.startswith("data after"):
        assert "line 2" in got["plain"][2], got["plain"]
