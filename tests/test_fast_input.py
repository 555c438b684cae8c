"""Exact fast input of a direct COPY (src/input/fastin.c), differentially.

For every type with a fast parser (int2, int4, int8, bool, date, timestamp,
timestamptz, uuid, float4, float8, numeric, with numeric's typmods apart): random values in canonical spellings (which the fast
parsers take) and in non-canonical ones (signs, leading zeros, whitespace,
underscores and other bases on 16+, exponents, infinity, leap days, BC
dates, 24:00:00 and 23:59:60, time zone names, abbreviations and offsets,
braces and upper case, NULL and the empty string), in text and csv, loaded
by plain COPY and by direct COPY (serial and parallel) with
directpath.copy_fast_input = check, which also runs the type's input
function and fails on any difference: the rows must be equal, under several
DateStyle and TimeZone settings (DST gaps and overlaps included).  Values
that are invalid fail each COPY with the same SQLSTATE, message and
context.  directpath.last_copy_input() counts fields taken and handed on.
Also: ALTER EXTENSION directpath UPDATE from 0.1 brings the functions.
"""

import random

import psycopg
import pytest

from conftest import last_statement

pytestmark = pytest.mark.directpath

ROWS = 20_000
TYPES = ["int2", "int4", "int8", "bool", "date", "timestamp", "timestamptz", "uuid",
         "float4", "float8", "numeric"]


def rand_date(r):
    y = r.choice([r.randint(1, 9999), r.randint(1990, 2030), 2000, 2024, 1900])
    m = r.randint(1, 12)
    d = r.randint(1, 31 if m in (1, 3, 5, 7, 8, 10, 12) else 30 if m != 2 else 29)
    if m == 2 and d == 29 and not (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)):
        d = 28
    return f"{y:04d}-{m:02d}-{d:02d}"


def rand_time(r):
    t = f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}"
    k = r.randint(0, 7)
    if k:
        t += "." + "".join(r.choice("0123456789") for _ in range(k if k <= 6 else 6))
    return t


def rand_offset(r):
    h = r.randint(0, 15)
    s = r.choice("+-")
    return r.choice([f"{s}{h:02d}", f"{s}{h:02d}:{r.choice([0, 30, 45]):02d}",
                     f"{s}{h:02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}"])


# Spellings the fast parsers must hand on (some valid, all with core's result).
ODD = {
    "int2": [" 12", "+7", "0012", "-0", "32767", "-32768", "1_000", "0x1F", "  -5  "],
    "int4": [" 42 ", "+42", "000000000042", "2147483647", "-2147483648", "1_000_000",
             "0o17", "0b101", "-0"],
    "int8": ["+9", "9223372036854775807", "-9223372036854775808", "0x7fffffffffffffff",
             "1_2_3", "  77"],
    "bool": ["TRUE", "yes", "no", "on", "off", "1", "0", " t", "F", "tRuE", "y"],
    "date": ["2024-02-29", "2000-02-29", "01/02/2024", "2024-1-2", "20240102",
             "infinity", "-infinity", "0099-01-01 BC", "January 8, 1999", "1999-Jan-08",
             "J2451187", "  2020-01-01", "2020-01-01 "],
    "timestamp": ["2020-01-01T10:00:00", "2020-01-01 24:00:00", "2020-01-01 23:59:60",
                  "2020-01-01 10:00", "2020-01-01 10:00:00.1234567", "infinity",
                  "2020-01-01 10:00:00+05", "epoch", "1999-01-08 04:05:06 BC",
                  "2020-01-01 10:00:00 PST"],
    "timestamptz": ["2020-01-01 10:00:00 Europe/Paris", "2020-01-01 10:00:00 PST",
                    "2020-01-01 10:00:00-0800", "2020-01-01 10:00:00+16",
                    "2020-01-01T10:00:00Z", "2026-03-08 02:30:00", "2026-11-01 01:30:00",
                    "2020-01-01 10:00:00 +05:30", "infinity", "2020-01-01 24:00:00+00",
                    "2020-01-01 10:00:00.1234567+00"],
    "float4": ["1e10", "1.5E-3", " 1.5", "NaN", "Infinity", "-inf", "1.", ".5", "+1.5",
               "0.123456789", "16777217", "3.4028235e38", "1.17549435e-38", "1e-45",
               "33554435", "16777218.5", "0.1", "1234567890123456789"],
    "float8": ["1e10", "1.5E-3", "1.5 ", "nan", "-Infinity", "1.", "-.5", "+2.25",
               "0.1234567890123456789", "9007199254740993", "1.7976931348623157e308",
               "4.9e-324", "123456789012345678", "18014398509481986", "9007199254740992.5",
               "9007199254740993.5", "0.30000000000000004", "12345678901234567890"],
    "numeric": [" 1.5", "+2", "1e3", "-1.5E-2", ".5", "5.", "NaN", "Infinity", "-inf",
                "1_000.5", "0x1F", "1" * 31, "0." + "0" * 29 + "1", "-0", "-0.000", "007.50",
                "12345678901234567890123456789.5"],
    "uuid": ["{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "A0EEBC999C0B4EF8BB6D6BB9BD380A11",
             "a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"],
}

# Values every type rejects, each failing a one-line COPY as core does.
BAD = {
    "int2": ["32768", "-32769", "", "1.5", "12a"],
    "int4": ["2147483648", "-2147483649", "", "1e3", " "],
    "int8": ["9223372036854775808", "", "--1"],
    "bool": ["maybe", "", "tru e"],
    "date": ["2023-02-29", "2024-13-01", "0000-01-01", "", "2024-00-10"],
    "timestamp": ["2020-01-01 25:00:00", "2020-02-30 00:00:00", "2020-01-01 10:60:00", ""],
    "timestamptz": ["2020-01-01 10:00:00+99", "2020-01-01 10:61:00+00", "2021-02-29 00:00:00+00"],
    "uuid": ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", ""],
    "float4": ["abc", "1e39", "", "1.5x", "1..5"],
    "float8": ["abc", "1e999", "", "-", "1.5.5"],
    "numeric": ["abc", "", "-", "1.5.5", "1e", "--1", "1 2"],
}


def canonical(t, r):
    if t == "int2":
        return str(r.randint(-9999, 9999))
    if t == "int4":
        return str(r.randint(-999_999_999, 999_999_999))
    if t == "int8":
        return str(r.randint(-10**18 + 1, 10**18 - 1))
    if t == "bool":
        return r.choice(["t", "f", "true", "false"])
    if t == "date":
        return rand_date(r)
    if t == "timestamp":
        return f"{rand_date(r)} {rand_time(r)}"
    if t == "timestamptz":
        base = f"{rand_date(r)} {rand_time(r)}"
        return base if r.random() < 0.3 else base + rand_offset(r)
    if t in ("float4", "float8"):
        # at most 19 digits in all, or a few more; an exponent in some
        n = r.randint(1, 21 if r.random() < 0.1 else 19)
        digits = "".join(r.choice("0123456789") for _ in range(n))
        at = r.randint(0, n)
        v = digits if at in (0, n) else digits[:at] + "." + digits[at:]
        if r.random() < 0.2:
            v += r.choice("eE") + r.choice(["", "+", "-"]) + str(r.randint(0, 15))
        return ("-" if r.random() < 0.3 else "") + v
    if t == "numeric":
        # at most 30 digits in all, or a few more; leading and trailing zeros
        n = r.randint(1, 34 if r.random() < 0.1 else 30)
        digits = "".join(r.choice("0123456789" if r.random() < 0.8 else "09") for _ in range(n))
        at = r.randint(0, n)
        v = digits if at in (0, n) else digits[:at] + "." + digits[at:]
        return ("-" if r.random() < 0.3 else "") + v
    if t == "uuid":
        h = "%032x" % r.getrandbits(128)
        if r.random() < 0.3:
            h = h.upper()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    raise ValueError(t)


def accepted(conn, t, v):
    """Whether core's input function takes v under every setting of
    SETTINGS (non-canonical spellings vary between majors: underscores and
    other bases are 16+; '01/02/2024' is no date under DateStyle YMD)."""
    try:
        for settings in SETTINGS:
            for k, x in settings.items():
                conn.execute(f"SET {k} = {x}")
            conn.execute("SELECT %s::text::" + t, (v,))
        return True
    except psycopg.Error:
        return False
    finally:
        conn.execute("RESET ALL")


def field(v, fmt):
    if v is None:
        return "\\N" if fmt == "text" else ""
    if fmt == "csv":
        return '"' + v.replace('"', '""') + '"'
    return v.replace("\\", "\\\\").replace("\t", "\\t")


def make_file(path, rows, fmt):
    sep = "\t" if fmt == "text" else ","
    with open(path, "w") as f:
        for i, vals in enumerate(rows, 1):
            f.write(sep.join([str(i)] + [field(v, fmt) for v in vals]) + "\n")
    path.chmod(0o644)


COLUMNS = ", ".join(f"c_{t} {t}" for t in TYPES)
SELECT = "SELECT id, " + ", ".join(f"c_{t}::text" for t in TYPES) + " FROM fi_t ORDER BY id"
SETTINGS = [{"DateStyle": "'ISO, MDY'", "TimeZone": "'UTC'"},
            {"DateStyle": "'SQL, DMY'", "TimeZone": "'America/New_York'"},
            {"DateStyle": "'German'", "TimeZone": "'Asia/Kolkata'"},
            {"DateStyle": "'Postgres, YMD'", "TimeZone": "'Australia/Lord_Howe'"}]
LOADS = {"plain": "COPY fi_t FROM '{f}'{o}",
         "direct": "/*+ APPEND */ COPY fi_t FROM '{f}'{o}",
         "parallel": "/*+ APPEND PARALLEL(2) */ COPY fi_t FROM '{f}'{o}"}


def load(conn, how, path, opts, settings):
    """Load into a fresh fi_t; (rows as text under fixed settings, or the
    error), last_statement(), last_copy_input()."""
    conn.execute("DROP TABLE IF EXISTS fi_t")
    conn.execute(f"CREATE TABLE fi_t (id int, {COLUMNS})")
    conn.execute("SET directpath.copy_fast_input = 'check'")
    conn.execute("SET directpath.min_bytes = 0")
    for k, v in settings.items():
        conn.execute(f"SET {k} = {v}")
    try:
        conn.execute(LOADS[how].format(f=path, o=opts))
        out = None
    except psycopg.Error as e:
        ctx = (e.diag.context or "").splitlines()
        out = ("error", e.diag.sqlstate, e.diag.message_primary, ctx[0] if ctx else None)
    st = last_statement(conn)
    counts = {r[0]: (r[1], r[2]) for r in
              conn.execute("SELECT typname::text, fast, fallback FROM directpath.last_copy_input() "
                           "JOIN pg_type ON pg_type.oid = type")}
    conn.execute("RESET ALL")
    if out is None:
        conn.execute("SET DateStyle = 'ISO, YMD'")
        conn.execute("SET TimeZone = 'UTC'")
        out = conn.execute(SELECT).fetchall()
        conn.execute("RESET ALL")
    return out, st, counts


@pytest.mark.parametrize("fmt", ["text", "csv"])
def test_fast_input_equals_input_functions(cluster, tmp_path, fmt):
    """ROWS rows, three in four canonical, the rest odd spellings and NULLs:
    plain, direct and parallel COPY store the same values under each
    setting, the check mode finds no difference, and the fast parsers took
    most fields."""
    r = random.Random(20261125 + (fmt == "csv"))
    with cluster.conn() as conn:
        odd = {t: [v for v in ODD[t] if accepted(conn, t, v)] for t in TYPES}
        rows = []
        for _ in range(ROWS):
            vals = []
            for t in TYPES:
                x = r.random()
                vals.append(None if x < 0.05 else r.choice(odd[t]) if x < 0.25
                            else canonical(t, r))
            rows.append(vals)
        path = tmp_path / f"fi.{fmt}"
        make_file(path, rows, fmt)
        opts = "" if fmt == "text" else " WITH (FORMAT csv)"
        for settings in SETTINGS:
            got = {how: load(conn, how, path, opts, settings) for how in LOADS}
            plain = got["plain"][0]
            assert isinstance(plain, list) and len(plain) == ROWS, plain
            for how in ("direct", "parallel"):
                assert got[how][0] == plain, (how, settings)
                assert got[how][1]["path"] == "direct", got[how][1]
            assert got["parallel"][1]["parallel_workers"] > 0, got["parallel"][1]
            for how in ("direct", "parallel"):
                counts = got[how][2]
                for t in TYPES:
                    fast, slow = counts[t]
                    assert fast + slow > 0.9 * ROWS and fast > 0.6 * ROWS, (how, t, counts)
                    assert slow > 0, (how, t, counts)
            # every field counted once, whichever process parsed it
            assert got["parallel"][2] == got["direct"][2]


@pytest.mark.parametrize("t", TYPES)
def test_invalid_values_fail_as_core(cluster, tmp_path, t):
    """Each invalid value fails a direct COPY (serial, check mode) with
    plain COPY's SQLSTATE, message and 'COPY fi_t, line 1, column ...'."""
    with cluster.conn() as conn:
        for i, v in enumerate(BAD[t]):
            vals = [canonical(x, random.Random(i)) for x in TYPES]
            vals[TYPES.index(t)] = v
            path = tmp_path / f"bad_{t}_{i}.txt"
            make_file(path, [vals], "text")
            plain = load(conn, "plain", path, "", SETTINGS[0])[0]
            direct = load(conn, "direct", path, "", SETTINGS[0])[0]
            assert plain[0] == "error", (v, plain)
            assert direct == plain, v
            assert plain[3].startswith("COPY fi_t, line 1, column c_"), plain


def test_off_and_counts(cluster, tmp_path):
    """directpath.copy_fast_input = off: no field is counted; on: canonical
    fields are taken, odd ones handed on, per type."""
    with cluster.conn() as conn:
        path = tmp_path / "counts.txt"
        make_file(path, [["1", "2", "3", "t", "2024-01-02", "2024-01-02 03:04:05",
                          "2024-01-02 03:04:05+00", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                          "-1.5", "2.25", "-12.50"],
                         [" 1", "+2", "0x3" if accepted(conn, "int8", "0x3") else " 3", "yes",
                          "01/02/2024", "2024-01-02T03:04:05", "2024-01-02 03:04:05 UTC",
                          "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "Infinity", " 2", "NaN"]], "text")
        _, _, counts = load(conn, "direct", path, "", SETTINGS[0])
        # int4: the id column's two fields besides c_int4's
        assert counts == {t: (3, 1) if t == "int4" else (1, 1) for t in TYPES}, counts
        conn.execute("DROP TABLE IF EXISTS fi_t")
        conn.execute(f"CREATE TABLE fi_t (id int, {COLUMNS})")
        conn.execute("SET directpath.copy_fast_input = off")
        conn.execute(f"/*+ APPEND */ COPY fi_t FROM '{path}'")
        assert conn.execute("SELECT count(*) FROM directpath.last_copy_input()").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM fi_t").fetchone()[0] == 2
        conn.execute("RESET ALL")


def test_update_from_0_1(cluster):
    """A database created at 0.1 updates to the current version and gains
    last_copy_input() (0.2), last_copy_reader() (0.3) and last_statement()'s
    foreign_partitions (0.4), statistics (0.5), resolve_shards() (0.6), the
    view progress (0.7), last_statement()'s updates (0.8) and the view's
    process (0.9); at
    0.3, last_statement()
    (11 columns) works with the current library."""
    with cluster.conn() as conn:
        conn.execute("DROP DATABASE IF EXISTS fi_upgrade")
        conn.execute("CREATE DATABASE fi_upgrade")
    with cluster.conn("fi_upgrade") as conn:
        conn.execute("CREATE EXTENSION directpath VERSION '0.1'")
        assert conn.execute("SELECT to_regproc('directpath.last_copy_input')").fetchone()[0] is None
        conn.execute("ALTER EXTENSION directpath UPDATE TO '0.3'")
        conn.execute("CREATE TABLE up_t (a int)")
        conn.execute("/*+ APPEND */ INSERT INTO up_t SELECT generate_series(1, 5000)")
        row = conn.execute("SELECT * FROM directpath.last_statement()").fetchone()
        assert len(row) == 11 and row[0] == "direct" and row[2] == 5000, row
        conn.execute("ALTER EXTENSION directpath UPDATE")
        assert conn.execute("SELECT extversion FROM pg_extension "
                            "WHERE extname = 'directpath'").fetchone()[0] == "0.9"
        assert conn.execute("SELECT to_regprocedure('directpath.resolve_shards()')"
                            ).fetchone()[0] is not None
        assert conn.execute("SELECT count(*) FROM directpath.progress").fetchone()[0] == 0
        assert conn.execute("SELECT to_regtype('directpath.progress') IS NOT NULL AND "
                            "EXISTS (SELECT FROM pg_attribute WHERE attrelid = "
                            "'directpath.progress'::regclass AND attname = 'process')"
                            ).fetchone()[0] is True
        row = conn.execute("SELECT path, foreign_partitions, statistics, updates "
                           "FROM directpath.last_statement()").fetchone()
        assert row == ("direct", None, "gathered for 1 relation from 5000 sample rows",
                       None), row
        conn.execute("/*+ APPEND */ DELETE FROM up_t WHERE a <= 100")
        assert conn.execute("SELECT updates FROM directpath.last_statement()"
                            ).fetchone() == ("100 rows deleted in bulk",)
        assert conn.execute("SELECT formed, core FROM directpath.last_copy_reader()").fetchone() == (0, 0)
        assert conn.execute("SELECT count(*) FROM directpath.last_copy_input()").fetchone()[0] == 0


def copy_checked(conn, table, cols, path, direct, sel):
    """COPY path into a fresh table (check mode, no min_bytes), plain or
    direct: (the rows of sel, or the error's SQLSTATE, message, detail and
    first context line), {type name: (fast, fallback)}."""
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} ({cols})")
    conn.execute("SET directpath.copy_fast_input = 'check'")
    conn.execute("SET directpath.min_bytes = 0")
    try:
        conn.execute(("/*+ APPEND */ " if direct else "") + f"COPY {table} FROM '{path}'")
        out = conn.execute(sel).fetchall()
    except psycopg.Error as e:
        out = (e.diag.sqlstate, e.diag.message_primary, e.diag.message_detail,
               e.diag.context.splitlines()[0])
    counts = {t: (f, s) for t, f, s in conn.execute(
        "SELECT typname::text, fast, fallback FROM directpath.last_copy_input() "
        "JOIN pg_type ON pg_type.oid = type")}
    conn.execute("RESET ALL")
    return out, counts


def test_character_types(cluster, tmp_path):
    """text, varchar(n), character(n) and unbounded varchar and character:
    ASCII and multibyte values at, under and over the limit (trailing spaces
    core clips), empty strings and NULLs, loaded by plain and direct COPY in
    check mode: the same values (padding included); a value too long fails
    as plain COPY does; the fast input took the values within the limits."""
    r = random.Random(42)
    words = ["", "a", "abcd", "abcde", "abcde   ", "ab  ", "  ab", "日本", "日本語です",
             "日本語です  ", "éé", "ééééé", "x y", "t\th"]
    rows = []
    for i in range(1, 3001):
        vals = [None if r.random() < 0.05 else r.choice(words) for _ in range(5)]
        rows.append(vals)
    path = tmp_path / "chars.txt"
    with open(path, "w") as f:
        for i, vals in enumerate(rows, 1):
            f.write("\t".join([str(i)] + [field(v, "text") for v in vals]) + "\n")
    path.chmod(0o644)
    cols = "id int, t text, v varchar(5), c char(5), vu varchar, cu bpchar"
    sel = "SELECT id, t, v, c, vu, cu, octet_length(c) FROM fc_t ORDER BY id"
    with cluster.conn() as conn:
        out = {}
        for how in ("plain", "direct"):
            out[how], counts = copy_checked(conn, "fc_t", cols, path, how == "direct", sel)
        assert out["direct"] == out["plain"] and len(out["plain"]) == 3000
        # every non-NULL text and unbounded value taken; the clipped ones handed on
        assert counts["text"][1] == 0 and counts["text"][0] > 2500, counts
        assert counts["varchar"][0] > 4000 and counts["varchar"][1] > 0, counts
        assert counts["bpchar"][0] > 4000 and counts["bpchar"][1] > 0, counts
        # too long for varchar(5) and char(5): plain COPY's error
        bad = tmp_path / "long.txt"
        bad.write_text("1\tx\tabcdef\tab\tx\tx\n")
        bad.chmod(0o644)
        errs = [copy_checked(conn, "fc_t", cols, bad, direct, sel)[0] for direct in (False, True)]
        assert errs[0] == errs[1], errs
        assert errs[0][0] == "22001" and errs[0][3].startswith("COPY fc_t, line 1, column v"), errs
        conn.execute("DROP TABLE fc_t")


NUMERIC_COLUMNS = ["numeric(12,2)", "numeric(5,3)", "numeric(3,0)", "numeric(20,0)",
                   "numeric(38,10)", "numeric(40,35)", "numeric(70,65)", "numeric(4,-2)",
                   "numeric(2,5)", "numeric(18,4)"]
NUMERIC_EDGES = ["0", "-0", "0.000", "-0.004", "0.005", "0.0049", "9.995", "-9.995", "99.5",
                 "999.4", "999.5", "12345.675", "0.99999", "-0.99995", "00012.5000", "9" * 18,
                 "9" * 20 + ".5", "1" * 30, "0." + "9" * 29, "1e3", "NaN", " 7"]


def test_numeric_typmods(cluster, tmp_path):
    """numeric columns with typmods (rounding half away from zero, carries
    into a new digit, a zero's sign, scales above the short header's 63, a
    negative scale, a scale above the precision): random and edge values
    that each column accepts, loaded by plain and direct COPY (check mode,
    which compares every taken value's bytes with numeric_in's): the same
    rows, most values taken by the fast parser; a value that overflows its
    column fails the direct COPY with plain COPY's error and context."""
    r = random.Random(7)

    def value():
        if r.random() < 0.15:
            return r.choice(NUMERIC_EDGES)
        ni, nf = r.randint(1, 16), r.randint(0, 12)
        v = "".join(r.choice("0123456789" if r.random() < 0.7 else "09") for _ in range(ni))
        if nf:
            v += "." + "".join(r.choice("0123456789" if r.random() < 0.7 else "059")
                               for _ in range(nf))
        return ("-" if r.random() < 0.3 else "") + v

    cols = "id int, " + ", ".join(f"n{i} {c}" for i, c in enumerate(NUMERIC_COLUMNS))
    with cluster.conn() as conn:
        fits = {}
        rows = []
        for _ in range(3000):
            vals = []
            for c in NUMERIC_COLUMNS:
                v = value()
                if (c, v) not in fits:
                    try:
                        conn.execute(f"SELECT %s::text::{c}", (v,))
                        fits[(c, v)] = True
                    except psycopg.errors.NumericValueOutOfRange:
                        fits[(c, v)] = False
                vals.append(v if fits[(c, v)] else None)
            rows.append(vals)
        path = tmp_path / "numeric.txt"
        make_file(path, rows, "text")
        sel = "SELECT fn_t::text FROM fn_t ORDER BY id"
        out = {}
        for how in ("plain", "direct"):
            out[how], counts = copy_checked(conn, "fn_t", cols, path, how == "direct", sel)
        counts = counts["numeric"]
        assert out["direct"] == out["plain"] and len(out["plain"]) == 3000
        # numeric(70,65), numeric(4,-2), numeric(2,5) and the odd spellings are handed on
        assert counts[0] > 10000 and counts[1] > 2000, counts
        for v, c in (("1000.00", 1), ("-999.5", 2), ("9" * 20 + ".5", 3)):
            vals = ["0"] * len(NUMERIC_COLUMNS)
            vals[c] = v
            bad = tmp_path / "overflow.txt"
            make_file(bad, [vals], "text")
            errs = [copy_checked(conn, "fn_t", cols, bad, direct, sel)[0]
                    for direct in (False, True)]
            assert errs[0] == errs[1], errs
            assert errs[0][0] == "22003", errs
            assert errs[0][3].startswith(f"COPY fn_t, line 1, column n{c}"), errs
        conn.execute("DROP TABLE fn_t")
