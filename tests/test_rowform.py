"""The COPY row former (src/input/rowform.c), differentially.

Random text and CSV files in many dialects (delimiters, NULL strings,
quotes and escapes, backslash escapes of every kind, escaped and quoted
newlines, \\n, \\r\\n and \\r line ends, a header line checked or skipped,
a last line without its end, non-ASCII text, NULLs and empty strings) are
loaded by plain COPY, by a direct serial COPY and by a direct parallel COPY;
the tables must hold the same rows.  Files the former hands to core's
reader (a wrong number of fields, a line end of the wrong style, an
unterminated quote, bytes the encoding rejects, an escape that makes one,
an end-of-copy marker) and rows that fail later (a bad value, a CHECK)
fail every load with the same SQLSTATE, message and context line, or load
the same rows.  directpath.last_copy_reader() says who read the rows, and
why core's reader read them all when the former was not used.
"""

import random

import psycopg
import pytest

from conftest import last_statement

pytestmark = pytest.mark.directpath

COLUMNS = "id int, a text, b text, n int, ts timestamptz, v varchar(12), c char(4)"
LOADS = {"plain": "COPY rf_t FROM '{f}'{o}",
         "direct": "/*+ APPEND */ COPY rf_t FROM '{f}'{o}",
         "parallel": "/*+ APPEND PARALLEL(2) */ COPY rf_t FROM '{f}'{o}"}

WORDS = ["alpha", "b", "", "naïve", "日本語", "x y", "tab\there", "nl\nhere", "cr\rhere",
         "back\\slash", "quote\"d", "semi;colon", "comma,here", "pipe|here", "\\N", "NULL",
         "nil", "'single'", "a" * 300, "end\\"]


def text_escape(s, delim, r):
    """A value in text format, escaped in one of the ways core reads."""
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == delim:
            out.append("\\" + ch if r.random() < 0.5 else "\\%03o" % ord(ch))
        elif ch == "\n":
            out.append(r.choice(["\\n", "\\012", "\\x0a", "\\\n"]))
        elif ch == "\r":
            out.append(r.choice(["\\r", "\\015", "\\x0D"]))
        elif ch == "\t":
            out.append(r.choice(["\\t", "\\011", "\\x09"]))
        elif ch.isalpha() and ch.isascii() and r.random() < 0.02:
            out.append(r.choice(["\\x%02x" % ord(ch), "\\%o" % ord(ch)]))
        else:
            out.append(ch)
    return "".join(out)


def csv_quote(s, d, r):
    q, e = d["quote"], d["escape"]
    if not any(c in s for c in (d["delim"], q, e, "\n", "\r")) and s != d["null"] \
            and s != "" and r.random() < 0.7:
        # unquoted, or quoted in the middle of the field
        if len(s) > 2 and r.random() < 0.1:
            return s[0] + q + s[1:] + q
        return s
    body = s.replace(e, e + e).replace(q, e + q) if e != q else s.replace(q, q + q)
    return q + body + q


def value(r):
    x = r.random()
    if x < 0.08:
        return None
    if x < 0.6:
        return r.choice(WORDS)
    return "".join(r.choice("abcdefghij klmnop,;|\t\"\\'\n\r") for _ in range(r.randint(0, 40)))


def make_rows(r, n):
    rows = []
    for i in range(1, n + 1):
        ts = f"2024-0{r.randint(1, 9)}-1{r.randint(0, 9)} 0{r.randint(0, 9)}:00:00+0{r.randint(0, 5)}"
        rows.append([str(i), value(r), value(r),
                     None if r.random() < 0.05 else str(r.randint(-99999, 99999)),
                     None if r.random() < 0.05 else ts,
                     r.choice([None, "", "short", "twelve chars", "v,;|\"x"]),
                     r.choice([None, "", "ab", "abcd", "a b"])])
    return rows


def render(rows, d, r, eol):
    """The rows as a file in dialect d with line ends eol."""
    lines = []
    if d.get("header"):
        lines.append(d["delim"].join(["id", "a", "b", "n", "ts", "v", "c"]))
    for row in rows:
        fields = []
        for v in row:
            if v is None:
                fields.append(d["null"])
            elif d["format"] == "csv":
                fields.append(csv_quote(v, d, r))
            else:
                fields.append(text_escape(v, d["delim"], r))
        lines.append(d["delim"].join(fields))
    return eol.join(lines) + ("" if d.get("no_last_eol") else eol)


def options(d):
    o = [f"FORMAT {d['format']}", f"DELIMITER '{d['delim']}'",
         "NULL '" + d["null"].replace("'", "''") + "'"]
    if d["format"] == "csv":
        o += ["QUOTE '" + d["quote"].replace("'", "''") + "'",
              "ESCAPE '" + d["escape"].replace("'", "''") + "'"]
    if d.get("header"):
        o.append(f"HEADER {d['header']}")
    return " WITH (" + ", ".join(o) + ")"


DIALECTS = {
    "text": {"format": "text", "delim": "\t", "null": "\\N"},
    "text_pipe": {"format": "text", "delim": "|", "null": "nil"},
    "text_null_x": {"format": "text", "delim": "|", "null": "\\X"},
    "text_header": {"format": "text", "delim": "\t", "null": "\\N", "header": "true"},
    "csv": {"format": "csv", "delim": ",", "null": "", "quote": '"', "escape": '"'},
    "csv_semi": {"format": "csv", "delim": ";", "null": "NULL", "quote": "'", "escape": "\\"},
    "csv_match": {"format": "csv", "delim": ",", "null": "", "quote": '"', "escape": '"',
                  "header": "match"},
    "csv_no_last_eol": {"format": "csv", "delim": ",", "null": "", "quote": '"',
                        "escape": '"', "no_last_eol": True},
}
EOLS = {"nl": "\n", "crnl": "\r\n", "cr": "\r"}


def load(conn, how, path, opts, extra=None):
    """Load into a fresh rf_t: (rows or the error, last_statement(),
    last_copy_reader())."""
    conn.execute("DROP TABLE IF EXISTS rf_t")
    conn.execute(f"CREATE TABLE rf_t ({COLUMNS}{extra or ''})")
    conn.execute("SET directpath.min_bytes = 0")
    conn.execute("SET TimeZone = 'UTC'")
    try:
        conn.execute(LOADS[how].format(f=path, o=opts))
        out = conn.execute("SELECT id, a, b, n, ts::text, v, c FROM rf_t ORDER BY id").fetchall()
    except psycopg.Error as e:
        ctx = (e.diag.context or "").splitlines()
        out = ("error", e.diag.sqlstate, e.diag.message_primary, ctx[0] if ctx else None)
    st = last_statement(conn)
    reader = conn.execute("SELECT formed, core, reason FROM directpath.last_copy_reader()").fetchone()
    conn.execute("RESET ALL")
    return out, st, reader


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    path.chmod(0o644)
    return path


def compare(conn, path, opts, extra=None, formed=True):
    got = {how: load(conn, how, path, opts, extra) for how in LOADS}
    plain = got["plain"][0]
    for how in ("direct", "parallel"):
        assert got[how][0] == plain, (how, got[how][0] if isinstance(got[how][0], tuple)
                                      else len(got[how][0]), plain if isinstance(plain, tuple)
                                      else len(plain))
    if formed and isinstance(plain, list):
        for how in ("direct", "parallel"):
            f, c, reason = got[how][2]
            assert reason is None and f > 0 and f + c == len(plain), (how, got[how][2])
        assert got["parallel"][1]["parallel_workers"] > 0, got["parallel"][1]
    return got


@pytest.mark.parametrize("eol", list(EOLS))
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_dialects_load_the_same_rows(cluster, tmp_path, dialect, eol):
    """3000 random rows (several chunks, serial and parallel) in each
    dialect and line style: the same rows as plain COPY, all formed by the
    row former (CSV quoted newlines and a header line included)."""
    d = DIALECTS[dialect]
    r = random.Random(hash((dialect, eol)) & 0xffff)
    rows = make_rows(r, 3000)
    path = write(tmp_path, f"{dialect}_{eol}.dat", render(rows, d, r, EOLS[eol]))
    with cluster.conn() as conn:
        got = compare(conn, path, options(d))
        assert isinstance(got["plain"][0], list) and len(got["plain"][0]) == 3000
        if d.get("header"):
            # the header line was core's, alone
            assert got["direct"][2][1] == 0


@pytest.mark.parametrize("at", [3100, 7900])
@pytest.mark.parametrize("dialect", ["text", "text_pipe", "csv", "csv_semi"])
def test_line_numbers_across_chunks(cluster, tmp_path, dialect, at):
    """8000 random rows (quoted and escaped newlines, doubled quotes,
    backslash runs; many chunks, serial and parallel) with one bad integer
    in a later chunk: every load fails on plain COPY's line.  The chunker
    counts the lines of blocks with quotes or backslashes from bitmaps
    (chunker.c count_lines), so a wrong count would move the line."""
    d = DIALECTS[dialect]
    r = random.Random(hash((dialect, at)) & 0xffff)
    rows = make_rows(r, 8000)
    rows[at - 1][3] = "12x"
    path = write(tmp_path, f"lines_{dialect}.dat", render(rows, d, r, "\n"))
    with cluster.conn() as conn:
        got = compare(conn, path, options(d), formed=False)
        plain = got["plain"][0]
        assert plain[:2] == ("error", "22P02"), plain
        assert plain[3].startswith("COPY rf_t, line "), plain


@pytest.mark.parametrize("at", [3100, 7900])
@pytest.mark.parametrize("how", ["in_field", "alone"])
def test_escaped_dot_deep_in_the_input(cluster, tmp_path, how, at):
    """A backslash before a dot (what core may read as an end-of-copy
    marker) deep in a text file whose blocks the chunker passes over by
    their bitmaps (an escaped dot's block takes the byte-by-byte scan):
    every load ends, fails or loads as plain COPY does."""
    line = "{i}\ta\\tb\tb\t{i}\t\\N\tv\tc\n"
    lines = [line.format(i=i) for i in range(1, 8001)]
    lines[at - 1] = (f"{at}\tx\\.y\tb\t{at}\t\\N\tv\tc\n" if how == "in_field"
                     else "\\.\n")
    path = write(tmp_path, f"dot_{how}.dat", "".join(lines))
    with cluster.conn() as conn:
        got = compare(conn, path, "", formed=False)
        plain = got["plain"][0]
        if how == "alone":
            # the marker ends the data (or is core's error after it)
            assert isinstance(plain, tuple) or len(plain) == at - 1, plain


BAD_FILES = {
    "extra_field": "1\ta\tb\t1\t\\N\tv\tc\n2\ta\tb\t2\t\\N\tv\tc\textra\n",
    "missing_field": "1\ta\tb\t1\t\\N\tv\tc\n2\ta\tb\n3\ta\tb\t3\t\\N\tv\tc\n",
    "bad_int": "1\ta\tb\t1\t\\N\tv\tc\n2\ta\tb\tx2\t\\N\tv\tc\n",
    "long_varchar": "1\ta\tb\t1\t\\N\tthirteen char\tc\n",
    "long_char": "1\ta\tb\t1\t\\N\tv\tcccccc\n",
    "cr_in_nl": "1\ta\tb\t1\t\\N\tv\tc\n2\ta\rb\tb\t2\t\\N\tv\tc\n",
    "nl_in_crnl": "1\ta\tb\t1\t\\N\tv\tc\r\n2\ta\nb\tb\t2\t\\N\tv\tc\r\n",
    "escape_makes_bad_utf8": "1\ta\\377\tb\t1\t\\N\tv\tc\n",
    "escape_makes_nul": "1\ta\\000b\tb\t1\t\\N\tv\tc\n",
    "end_marker": "1\ta\tb\t1\t\\N\tv\tc\n\\.\n2\ta\tb\t2\t\\N\tv\tc\n",
    "end_marker_last": "1\ta\tb\t1\t\\N\tv\tc\n\\.\n",
    "backslash_at_eof": "1\ta\tb\t1\t\\N\tv\tc\\",
    "empty_lines": "1\ta\tb\t1\t\\N\tv\tc\n\n",
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_core_reads_what_the_former_does_not(cluster, tmp_path, case):
    """Bad or unusual input after 2000 good rows (so the chunk has formed
    rows before it): every load fails with plain COPY's SQLSTATE, message
    and context line, or loads the same rows."""
    eol = "\r\n" if case == "nl_in_crnl" else "\n"
    good = render(make_rows(random.Random(7), 2000), DIALECTS["text"], random.Random(8), eol)
    body = BAD_FILES[case].replace("1\t", "90001\t").replace("2\t", "90002\t")
    path = write(tmp_path, case + ".txt", good + body)
    with cluster.conn() as conn:
        got = compare(conn, path, "", formed=False)
        plain = got["plain"][0]
        if isinstance(plain, tuple):
            assert plain[3] and plain[3].startswith("COPY rf_t, line "), plain


def test_bad_bytes_fail_as_core(cluster, tmp_path):
    """An invalid UTF-8 byte in the middle of a chunk, and a CSV field
    whose quote never ends: core's error on core's line, all loads."""
    good = render(make_rows(random.Random(9), 1500), DIALECTS["csv"], random.Random(10), "\n")
    with cluster.conn() as conn:
        for name, tail in (("bad_utf8", b'90001,x\xff\xfey,b,1,,v,c\n'),
                           ("unterminated", b'90001,"abc,b,1,,v,c\n90002,a,b,2,,v,c\n')):
            path = write(tmp_path, name + ".csv", good.encode() + tail)
            got = compare(conn, path, " WITH (FORMAT csv)", formed=False)
            plain = got["plain"][0]
            assert plain[0] == "error", plain
            assert plain[3].startswith("COPY rf_t, line "), plain


def test_check_violation_names_the_line(cluster, tmp_path):
    """A row formed by the former that a CHECK rejects: plain COPY's
    message and context, the line's text included."""
    rows = make_rows(random.Random(11), 1000)
    rows[700][3] = "-1000000"
    path = write(tmp_path, "check.txt", render(rows, DIALECTS["text"], random.Random(12), "\n"))
    with cluster.conn() as conn:
        conn.execute("SET TimeZone = 'UTC'")
        got = compare(conn, path, "", extra=", CHECK (n IS NULL OR n > -100000)", formed=False)
        plain = got["plain"][0]
        assert plain[1] == "23514" and plain[3].startswith("COPY rf_t, line 701: \"701\t"), plain


def test_defaults_and_column_lists(cluster, tmp_path):
    """A column list with the other columns' defaults (a sequence, an
    expression): the same rows as plain COPY, formed by the former."""
    path = write(tmp_path, "cols.txt", "".join(f"x{i}\t{i}\n" for i in range(5000)))
    with cluster.conn() as conn:
        out = {}
        for how in ("plain", "direct"):
            conn.execute("DROP TABLE IF EXISTS rf_d")
            conn.execute("CREATE TABLE rf_d (id bigserial, a text, n int, "
                         "d text DEFAULT 'dflt', z int DEFAULT 7 * 6)")
            stmt = "COPY rf_d (a, n) FROM '%s'" % path
            conn.execute(stmt if how == "plain" else "/*+ APPEND */ " + stmt)
            out[how] = conn.execute("SELECT * FROM rf_d ORDER BY id").fetchall()
            if how == "direct":
                assert conn.execute("SELECT formed, core, reason FROM "
                                    "directpath.last_copy_reader()").fetchone() == (5000, 0, None)
        assert out["direct"] == out["plain"] and len(out["plain"]) == 5000


def test_stdin_and_program(cluster, tmp_path):
    """COPY FROM STDIN (a driver's copy API, in small messages) and FROM
    PROGRAM: the same rows as plain COPY, formed by the former."""
    r = random.Random(13)
    data = render(make_rows(r, 4000), DIALECTS["csv"], r, "\r\n")
    path = write(tmp_path, "prog.csv", data)
    with cluster.conn() as conn:
        out = {}
        for how in ("plain", "direct"):
            conn.execute("DROP TABLE IF EXISTS rf_t")
            conn.execute(f"CREATE TABLE rf_t ({COLUMNS})")
            hint = "" if how == "plain" else "/*+ APPEND */ "
            with conn.cursor() as cur:
                with cur.copy(hint + "COPY rf_t FROM STDIN WITH (FORMAT csv)") as cp:
                    b = data.encode()
                    for i in range(0, len(b), 1000):
                        cp.write(b[i:i + 1000])
            out[how] = conn.execute("SELECT * FROM rf_t ORDER BY id").fetchall()
            if how == "direct":
                f, c, reason = conn.execute("SELECT * FROM directpath.last_copy_reader()").fetchone()
                assert (f, c, reason) == (4000, 0, None)
            conn.execute("TRUNCATE rf_t")
            conn.execute(hint + f"COPY rf_t FROM PROGRAM 'cat {path}' WITH (FORMAT csv)")
            assert conn.execute("SELECT * FROM rf_t ORDER BY id").fetchall() == out[how]
        assert out["direct"] == out["plain"] and len(out["plain"]) == 4000


def test_reasons_and_off(cluster, tmp_path):
    """What the former does not take is read by core's reader, and
    last_copy_reader() says why: the setting off, FORCE_NULL, a rejects
    table, encoding conversion, ON_ERROR (17+), DEFAULT (16+)."""
    path = write(tmp_path, "r.csv", "1,a,b,2,,v,c\n2,\"\",b,3,,v,c\n")
    with cluster.conn() as conn:
        ver = conn.info.server_version
        cases = [("SET directpath.copy_row_former = off", "", "copy_row_former is off"),
                 ("", ", FORCE_NULL (a)", "FORCE_NULL"),
                 ("SET client_encoding = 'LATIN1'", "", "converted from another encoding")]
        if ver >= 170000:
            cases.append(("", ", ON_ERROR ignore", "ON_ERROR"))
        if ver >= 160000:
            cases.append(("", ", DEFAULT '\\D'", "DEFAULT"))
        for setting, opt, why in cases:
            conn.execute("DROP TABLE IF EXISTS rf_t")
            conn.execute(f"CREATE TABLE rf_t ({COLUMNS})")
            conn.execute("SET directpath.min_bytes = 0")
            if setting:
                conn.execute(setting)
            conn.execute(f"/*+ APPEND */ COPY rf_t FROM '{path}' WITH (FORMAT csv{opt})")
            st = last_statement(conn)
            f, c, reason = conn.execute("SELECT * FROM directpath.last_copy_reader()").fetchone()
            conn.execute("RESET ALL")
            assert st["path"] == "direct", st
            assert f == 0 and reason and why in reason, (setting, opt, reason)
            assert conn.execute("SELECT count(*) FROM rf_t").fetchone()[0] == 2
        conn.execute("DROP TABLE rf_t")


QUOTED_TAILS = {
    "empty_strings": '"90001","","","7","2024-01-02 03:04:05+00","","  "\n',
    "delimiters_inside": '"90002","a,b","NULL","-3","2024-02-03 00:00:00+02","v,x","ab"\n',
    "quote_mid_field": '90003,x"y,z"w,"b","4",,"v","c"\n',
    "closing_not_last": '90004,"x"y,"b","4",,"v","c"\n',
    "doubled_quote": '90005,"a""b","b","4",,"v","c"\n',
    "empty_int": '90006,"a","b","",,"v","c"\n',
    "spaced_int": '90007,"a","b","9 0",,"v","c"\n',
    "long_varchar": '90008,"a","b","1",,"thirteen char","c"\n',
    "long_char": '90009,"a","b","1",,"v","cccccc"\n',
    "bad_timestamp": '90010,"a","b","1","2024-13-01",,"c"\n',
}


@pytest.mark.parametrize("tail", list(QUOTED_TAILS))
def test_quoted_fields_straight_to_parsers(cluster, tmp_path, tail):
    """CSV whose fields are quoted, as TPC-H's generator and many writers
    quote text: a field of one quoted run goes straight to its column's
    parser (rowvalues.c dp_form_plain), read between the quotes, never
    NULL; any other quoting is formed the general way.  2000 rows with every
    field quoted, then one unusual row: plain COPY's rows, or its error on
    its line, in every load."""
    r = random.Random(21)
    lines = []
    for i in range(1, 2001):
        ts = f"2024-0{r.randint(1, 9)}-1{r.randint(0, 9)} 0{r.randint(0, 9)}:00:00+00"
        fields = [str(i), r.choice(["alpha", "x y", "comma,here", "naïve", ""]),
                  r.choice(["b", "NULL", "semi;colon"]), str(r.randint(-999, 999)), ts,
                  r.choice(["short", "twelve chars", ""]), r.choice(["ab", "abcd", " a"])]
        lines.append(",".join('"' + f + '"' if "," in f or r.random() < 0.9 else f
                              for f in fields) + "\n")
    path = write(tmp_path, tail + ".csv", "".join(lines) + QUOTED_TAILS[tail])
    with cluster.conn() as conn:
        got = compare(conn, path, " WITH (FORMAT csv)", formed=False)
        plain = got["plain"][0]
        if isinstance(plain, tuple):
            assert plain[3] and plain[3].startswith("COPY rf_t, line 2001"), plain
        else:
            assert len(plain) == 2001
            # a quoted empty field is an empty string, an unquoted one NULL
            assert sum(1 for row in plain if row[1] == "") > 0
            for how in ("direct", "parallel"):
                f, c, reason = got[how][2]
                assert reason is None and f == 2001 and c == 0, (how, got[how][2])


@pytest.mark.parametrize("fmt", ["text", "csv"])
def test_nulls_straight_to_parsers(cluster, tmp_path, fmt):
    """NULL-heavy rows (pg_dump's \\N in text, empty fields in CSV) with
    17-digit floats and 20-digit numerics: the same rows as plain COPY, all
    formed by the former, and last_copy_input() counts exactly the non-NULL
    fields (a NULL is no parser's field)."""
    r = random.Random(31 + (fmt == "csv"))
    null = "\\N" if fmt == "text" else ""
    sep = "\t" if fmt == "text" else ","
    cols = "id int, f float8, n numeric(30,10), d date, t text, i int8"
    lines, nonnull = [], {"float8": 0, "numeric": 0, "date": 0, "text": 0, "int8": 0}
    for i in range(1, 4001):
        vals = [repr(r.uniform(-1e6, 1e6)), f"{r.randint(0, 10**19)}.{r.randint(0, 99)}",
                f"20{r.randint(10, 29)}-0{r.randint(1, 9)}-1{r.randint(0, 9)}",
                r.choice(["word", "two words", "naïve"]), str(r.randint(-10**18, 10**18))]
        row = [str(i)]
        for t, v in zip(nonnull, vals):
            if r.random() < 0.4:
                row.append(null)
            else:
                row.append(v)
                nonnull[t] += 1
        lines.append(sep.join(row) + "\n")
    path = write(tmp_path, f"nulls.{fmt}", "".join(lines))
    opts = "" if fmt == "text" else " WITH (FORMAT csv)"
    with cluster.conn() as conn:
        out = {}
        for how in LOADS:
            conn.execute("DROP TABLE IF EXISTS rf_n")
            conn.execute(f"CREATE TABLE rf_n ({cols})")
            conn.execute("SET directpath.min_bytes = 0")
            conn.execute(LOADS[how].replace("rf_t", "rf_n").format(f=path, o=opts))
            out[how] = conn.execute("SELECT * FROM rf_n ORDER BY id").fetchall()
            if how == "plain":
                continue
            assert conn.execute("SELECT formed, core, reason FROM "
                                "directpath.last_copy_reader()").fetchone() == (4000, 0, None)
            counts = {t: f + s for t, f, s in conn.execute(
                "SELECT typname::text, fast, fallback FROM directpath.last_copy_input() "
                "JOIN pg_type ON pg_type.oid = type")}
            for t, n in nonnull.items():
                assert counts.get(t) == n, (how, t, counts, nonnull)
        assert len(out["plain"]) == 4000
        assert out["direct"] == out["plain"] and out["parallel"] == out["plain"]


@pytest.mark.parametrize("null", ["\\N", "\\Z"])
def test_null_fields_beside_escapes(cluster, tmp_path, null):
    """Text fields that are the NULL string of two bytes, and fields that
    only look like it (an escaped backslash before it, text before or after
    it, two of them, one at the start of a record or before its end), at
    every offset in the 64-byte words of the former's bitmaps (padding of
    every length before them): the same rows as plain COPY, serial and
    parallel.  The plain records' split passes over a marked NULL field's
    backslash (rowsplit.c); each of these must still split as core does."""
    r = random.Random(47 + len(null) + ord(null[-1]))
    b = null[1]
    tokens = [null, null, "\\\\" + b, "a" + null, null + null, null + "x", "x", "",
              "\\\\", "\\\\" + null, "\\t" + null, null + "\\t"]
    lines = []
    for i in range(1, 3001):
        pad = "p" * r.randint(0, 70)
        fields = [r.choice(tokens) for _ in range(3)]
        first = null if r.random() < 0.05 else str(i)
        lines.append("\t".join([first, pad] + fields) + "\n")
    path = write(tmp_path, "nullfields.txt", "".join(lines))
    with cluster.conn() as conn:
        out = load_csv_each_way(conn, "rf_z", "id int, pad text, a text, b text, c text", path,
                                "SELECT * FROM rf_z ORDER BY id, pad, a, b, c", 3000,
                                opts=f" WITH (NULL '{null}')")
        assert sum(v is None for row in out["plain"] for v in row[2:]) > 1000


@pytest.mark.parametrize("shape", ["not_null", "check", "virtual"])
def test_constraints_of_rows_without_nulls(cluster, tmp_path, shape):
    """A row without NULLs is not given to ExecConstraints when only NOT
    NULLs could fail it: a NULL at line 700 under NOT NULL, a CHECK that a
    row without NULLs fails, and (18) a virtual generated column NOT NULL
    whose expression is NULL there give plain COPY's error and context,
    serial and parallel; without the bad line, the same rows."""
    cols = "id int NOT NULL, a text NOT NULL, n int NOT NULL"
    if shape == "check":
        cols += ", CHECK (n <> 700)"
    if shape == "virtual":
        cols += ", g int GENERATED ALWAYS AS (nullif(n, 700)) VIRTUAL NOT NULL"
    lines = [f"{i}\tx{i}\t{i}" for i in range(1, 1001)]
    bad = write(tmp_path, "bad.txt", "\n".join(
        ln if i != 700 or shape != "not_null" else "700\tx700\t\\N"
        for i, ln in enumerate(lines, 1)) + "\n")
    good = write(tmp_path, "good.txt", "\n".join(ln for i, ln in enumerate(lines, 1)
                                                 if i != 700) + "\n")
    with cluster.conn() as conn:
        if shape == "virtual" and conn.info.server_version < 180000:
            pytest.skip("virtual generated columns are 18's")
        conn.execute("SET directpath.min_bytes = 0")
        got = {}
        for how, stmt in LOADS.items():
            for name, path in (("bad", bad), ("good", good)):
                conn.execute("DROP TABLE IF EXISTS rf_c")
                conn.execute(f"CREATE TABLE rf_c ({cols})")
                try:
                    conn.execute(stmt.replace("rf_t", "rf_c").format(f=path, o=""))
                    got[how, name] = conn.execute(
                        "SELECT id, a, n FROM rf_c ORDER BY id").fetchall()
                    if how != "plain":
                        assert last_statement(conn)["path"] == "direct", (how, name)
                except psycopg.Error as e:
                    got[how, name] = (e.diag.sqlstate, e.diag.message_primary,
                                      (e.diag.context or "").splitlines()[0])
        want = "23514" if shape == "check" else "23502"
        assert got["plain", "bad"][0] == want, got["plain", "bad"]
        assert got["plain", "bad"][2].startswith("COPY rf_c, line 700"), got["plain", "bad"]
        assert len(got["plain", "good"]) == 999
        for how in ("direct", "parallel"):
            for name in ("bad", "good"):
                assert got[how, name] == got["plain", name], (how, name, got[how, name])


def load_csv_each_way(conn, table, cols, path, query, nrows, opts=" WITH (FORMAT csv)"):
    """Load the file at path (CSV unless opts say otherwise) into a fresh
    table each way of LOADS: the rows of query per way; every row of the
    direct ways formed by the former."""
    conn.execute("SET directpath.min_bytes = 0")
    got = {}
    for how, stmt in LOADS.items():
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} ({cols})")
        conn.execute(stmt.replace("rf_t", table).format(f=path, o=opts))
        got[how] = conn.execute(query).fetchall()
        if how != "plain":
            formed, core, why = conn.execute(
                "SELECT formed, core, reason FROM directpath.last_copy_reader()").fetchone()
            assert (formed, core, why) == (nrows, 0, None), (how, formed, core, why)
    assert len(got["plain"]) == nrows
    assert got["direct"] == got["plain"]
    assert got["parallel"] == got["plain"]
    return got


def test_every_field_quoted(cluster, tmp_path):
    """CSV as writers that quote every field make it (40 columns, a quoted
    run each, delimiters inside some, empty ones, runs across 64-byte
    words): plain COPY's rows, serial and parallel, every row formed by the
    former."""
    r = random.Random(41)
    ncols = 40
    lines = []
    for i in range(3000):
        fields = [f'"{i}"'] + ['"' + r.choice(["", "a,b", "x" * r.randint(0, 70), "c,,d,",
                                               str(r.randint(-99, 99))]) + '"'
                               for _ in range(ncols - 1)]
        lines.append(",".join(fields))
    path = write(tmp_path, "quoted.csv", "\n".join(lines) + "\n")
    cols = ", ".join(["id int"] + [f"c{k} text" for k in range(1, ncols)])
    with cluster.conn() as conn:
        got = load_csv_each_way(conn, "rf_q", cols, path, "SELECT * FROM rf_q ORDER BY id", 3000)
    assert got["plain"][0][1] is not None
    assert any("," in v for row in got["plain"] for v in row[1:] if v), "no delimiter inside"


def test_values_larger_than_their_space(cluster, tmp_path):
    """The row former makes a record's varlena and uuid values in one block
    that it empties before each record (rowvalues.c, dp_values_reset): rows
    of small values between rows whose values overflow the block (palloc'd,
    then the block grows) and rows larger than its largest size, dates in
    ISO and other spellings: plain COPY's rows, serial and parallel."""
    r = random.Random(45)
    cols = ("id int, a text, b char(3000), c numeric(30,4), d varchar(40000), "
            "u uuid, dt date, e text")
    dates = ["2024-02-29", "1999-12-31", "20240105", "2024-1-5", "0044-03-15 BC",
             "5874897-12-31", "2024-02-29"]
    lines = []
    for i in range(4000):
        big = i % 97 == 0
        huge = i in (500, 2501)
        n = 700000 if huge else (r.randint(3000, 30000) if big else r.randint(0, 20))
        fields = [str(i), "t" * n, "c" * min(n, 2999), f"{r.randint(-10**9, 10**9)}.{i % 10000:04d}",
                  "v" * min(n, 39999), f"{i:08x}-0000-4000-8000-{r.getrandbits(48):012x}",
                  dates[i % len(dates)], "" if i % 5 == 0 else "w" * (i % 50)]
        lines.append(",".join(fields))
    path = write(tmp_path, "sizes.csv", "\n".join(lines) + "\n")
    query = ("SELECT id, md5(a), md5(b::text), octet_length(b), c, md5(d), u, dt::text, e "
             "FROM rf_s ORDER BY id")
    with cluster.conn() as conn:
        got = load_csv_each_way(conn, "rf_s", cols, path, query, 4000)
    assert got["plain"][500][3] == 3000 and got["plain"][1][3] == 3000
