"""Rows of the no-null layout and integers read a word at a time.

When every column of a table has a fixed width or is a varlena, the page
builder (src/heap/pages.c) stores a row without nulls by its own walk over
the columns' widths and alignments instead of through heap_fill_tuple;
the row former's integer parser
(src/input/fastin.c) reads up to eight digits in one 64-bit word.  Both
are checked against core, differentially:

- the tuples a direct load writes are byte for byte the ones the plain
  statement writes (pageinspect's t_data, t_bits, t_hoff and the format
  bits of t_infomask), for a table of fourteen fixed-width types of every
  alignment and by-reference width, rows with and without nulls, by
  INSERT ... SELECT and by COPY, and after a column is dropped; and with
  varlenas of every alignment beside them (short and long values, a
  type of plain storage, whose values are never made short);
- integers of every length and sign, and spellings the fast parser leaves
  to int2in/int4in/int8in (whitespace, '+', leading zeros, underscores,
  other bases, overflow by one), load the same values as plain COPY, and
  the bad ones fail with core's SQLSTATE, message and line.
"""

import random

import psycopg
import pytest

from conftest import last_statement

pytestmark = pytest.mark.directpath

FIXED = ('a int2, b int8, c "char", d bool, e float8, f int4, g uuid, '
         'h timestamptz, i float4, j name, k date, l point, m macaddr, n int2')

# the SELECT making fixed-width rows; about one in seven has a null
ROWS_SELECT = """
SELECT CASE WHEN g % 7 = 1 THEN NULL ELSE (g % 32000)::int2 END,
       g * 1000003::int8, chr(65 + g % 26)::"char", g % 3 = 0,
       g / 7.0, -g, md5(g::text)::uuid,
       timestamptz '2026-01-01 00:00+00' + g * interval '17 seconds',
       (g / 3.0)::float4, ('n' || g)::name,
       CASE WHEN g % 11 = 3 THEN NULL ELSE date '2000-01-01' + g % 9000 END,
       point(g, -g), ('08:00:2b:01:02:' || lpad(to_hex(g % 256), 2, '0'))::macaddr,
       (g % 3)::int2
FROM generate_series(1, {n}) g
"""

# varlenas beside them: text, varchar, numeric, bpchar, bytea, oidvector
# (plain storage: never made short), int4[] and jsonb; long and short
# values, some nulls.  (A text column set to plain storage would not do:
# core's INSERT ... SELECT forms its rows by the plan's descriptor, where
# text is packable, and its COPY by the table's, so the two plain
# statements store such a column's values differently.)
VARLENA = FIXED + (", p text, q varchar(20), r numeric, s char(4), t bytea, u oidvector, "
                   "v int4[], w jsonb")
VARLENA_SELECT = ROWS_SELECT.rstrip().replace("\nFROM generate_series", """,
       CASE WHEN g % 5 = 0 THEN repeat('x', 200 + g % 50) ELSE 't' || g END,
       CASE WHEN g % 9 = 4 THEN NULL ELSE 'q' || g END, g / 7.0, 's' || g % 10,
       decode(md5(g::text), 'hex'),
       (CASE WHEN g % 4 = 0 THEN repeat(g || ' ', 40) ELSE g || ' ' || g + 1 END)::oidvector,
       ARRAY[g, -g], jsonb_build_object('g', g)
FROM generate_series""") + "\n"

TUPLES = """
SELECT t_data, t_bits, t_hoff, t_infomask & (1 | 2 | 4) AS format
FROM generate_series(0, pg_relation_size('{t}') / current_setting('block_size')::int - 1) b,
     heap_page_items(get_raw_page('{t}', b::int))
WHERE lp_flags = 1
ORDER BY b, lp
"""


def tuples(conn, table):
    """The table's tuples in their bytes' order: rows of different lengths
    may take other places (core's insert fills earlier pages it finds room
    on through the free space map), each must be the same bytes."""
    return sorted(conn.execute(TUPLES.format(t=table)).fetchall())


def make_tables(conn, names, drop=False, varlena=False):
    for t in names:
        conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute(f"CREATE TABLE {t} ({VARLENA if varlena else FIXED})")
        if drop:
            conn.execute(f"ALTER TABLE {t} DROP COLUMN f")


@pytest.mark.parametrize("shape", ["fixed", "dropped_column", "varlena"])
def test_fixed_rows_are_the_bytes_core_writes(cluster, tmp_path, shape):
    """INSERT ... SELECT and COPY, plain and direct: the same tuples, byte for byte."""
    n = 20000
    drop = shape == "dropped_column"
    sfx = {"fixed": "", "dropped_column": "_d", "varlena": "_v"}[shape]
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        names = [f"fx_ins_plain{sfx}", f"fx_ins_direct{sfx}", f"fx_copy_plain{sfx}",
                 f"fx_copy_direct{sfx}"]
        make_tables(conn, names, drop, shape == "varlena")
        sel = (VARLENA_SELECT if shape == "varlena" else ROWS_SELECT).format(n=n)
        if drop:
            sel = sel.replace("-g, md5", "md5")
        conn.execute(f"INSERT INTO fx_ins_plain{sfx} {sel}")
        conn.execute(f"/*+ APPEND */ INSERT INTO fx_ins_direct{sfx} {sel}")
        assert last_statement(conn)["path"] == "direct"
        path = tmp_path / "fixed.txt"
        conn.execute(f"COPY fx_ins_plain{sfx} TO '{path}'")
        conn.execute(f"COPY fx_copy_plain{sfx} FROM '{path}'")
        conn.execute(f"/*+ APPEND */ COPY fx_copy_direct{sfx} FROM '{path}'")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        formed = conn.execute("SELECT formed FROM directpath.last_copy_reader()").fetchone()[0]
        assert formed == n

        want = tuples(conn, f"fx_ins_plain{sfx}")
        assert len(want) == n
        assert sum(1 for r in want if r[1] is not None) > n // 10  # rows with nulls
        assert tuples(conn, f"fx_ins_direct{sfx}") == want
        assert tuples(conn, f"fx_copy_plain{sfx}") == want
        assert tuples(conn, f"fx_copy_direct{sfx}") == want
        for t in names:
            conn.execute(f"DROP TABLE {t}")


def int_spellings(r, major):
    """Values for int2, int4 and int8 columns: mostly canonical of every
    length, some that core reads in another spelling."""
    odd = [" 12", "12 ", "+7", "0012", "-0", "00000000000000000001", "-00000042",
           "32767", "-32768", "2147483647", "-2147483648", "9223372036854775807",
           "-9223372036854775808", "99999999", "-99999999", "100000000", "12345678"]
    if major >= 16:
        odd += ["1_000", "0x1F", "0o17", "0b101", "-0x10"]
    out = []
    for _ in range(3000):
        row = []
        for bits, digits in ((16, 4), (32, 9), (64, 18)):
            x = r.random()
            if x < 0.05:
                row.append("\\N")
            elif x < 0.25:
                v = r.choice(odd)
                # an odd spelling that overflows this column is tried alone, below
                try:
                    iv = int(v.replace("_", ""), 0) if any(p in v for p in ("0x", "0o", "0b")) \
                        else int(v.replace("_", ""))
                except ValueError:
                    iv = 0
                row.append(v if -(2 ** (bits - 1)) <= iv < 2 ** (bits - 1) else "0")
            else:
                n = r.randint(1, digits + (1 if bits == 64 else 0))
                v = str(r.randint(10 ** (n - 1) if n > 1 else 0, 10 ** n - 1))
                if int(v) >= 2 ** (bits - 1):
                    v = str(2 ** (bits - 1) - 1)
                row.append(("-" if r.random() < 0.3 else "") + v)
        out.append(row)
    return out


BAD = [("a", "32768"), ("a", "-32769"), ("b", "2147483648"), ("c", "9223372036854775808"),
       ("a", "12a"), ("b", "1 2"), ("c", "-"), ("b", ""), ("a", "--1"), ("c", "1.0"),
       ("b", "１２"), ("a", "99999"), ("b", "-2147483649"), ("c", "0.5")]


def server_major(conn):
    return int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000


def test_integers_load_as_core_reads_them(cluster, tmp_path):
    """Integers of 1-19 digits, signed, and odd spellings: the values of plain COPY."""
    r = random.Random(20261126)
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        rows = int_spellings(r, server_major(conn))
        path = tmp_path / "ints.txt"
        path.write_text("".join("\t".join(row) + "\n" for row in rows))
        path.chmod(0o644)
        got = {}
        for how, hint in (("plain", ""), ("direct", "/*+ APPEND */ "),
                          ("parallel", "/*+ APPEND PARALLEL(2) */ ")):
            conn.execute(f"DROP TABLE IF EXISTS fx_int_{how}")
            conn.execute(f"CREATE TABLE fx_int_{how} (a int2, b int4, c int8)")
            conn.execute(f"{hint}COPY fx_int_{how} FROM '{path}'")
            if how != "plain":
                assert last_statement(conn)["path"] == "direct"
            got[how] = conn.execute(f"SELECT a, b, c FROM fx_int_{how} ORDER BY c, b, a").fetchall()
            fast = conn.execute("SELECT coalesce(sum(fast), 0) FROM directpath.last_copy_input()"
                                ).fetchone()[0]
            if how == "direct":
                assert fast > len(rows) * 1.8, fast    # most fields took the fast parser
        assert len(got["plain"]) == len(rows)
        assert got["direct"] == got["plain"]
        assert got["parallel"] == got["plain"]
        for how in ("plain", "direct", "parallel"):
            conn.execute(f"DROP TABLE fx_int_{how}")


@pytest.mark.parametrize("col,value", BAD)
def test_bad_integers_fail_as_core(cluster, tmp_path, col, value):
    """A bad integer on line 3: core's error, message and context, plain or direct."""
    row = {"a": "1", "b": "2", "c": "3"}
    row[col] = value
    path = tmp_path / "bad.txt"
    path.write_text("1\t2\t3\n4\t5\t6\n" + "\t".join(row[k] for k in "abc") + "\n7\t8\t9\n")
    path.chmod(0o644)
    seen = {}
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        for how, hint in (("plain", ""), ("direct", "/*+ APPEND */ ")):
            conn.execute("DROP TABLE IF EXISTS fx_bad")
            conn.execute("CREATE TABLE fx_bad (a int2, b int4, c int8)")
            with pytest.raises(psycopg.Error) as e:
                conn.execute(f"{hint}COPY fx_bad FROM '{path}'")
            seen[how] = (e.value.diag.sqlstate, e.value.diag.message_primary,
                         (e.value.diag.context or "").splitlines()[0])
        conn.execute("DROP TABLE fx_bad")
    assert seen["direct"] == seen["plain"]
    assert "line 3" in seen["plain"][2], seen
