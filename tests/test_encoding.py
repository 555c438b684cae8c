"""Parallel COPY and the session state core's COPY reader consults.

A parallel worker is another session: its client encoding is the database's
(core sets it so), and it has the leader's settings only as core's parallel
machinery restores them.  Each case here loads the same input three ways -
plain COPY (directpath.mode = off), serial direct COPY and parallel direct
COPY - and compares the stored bytes (textsend(v) in the database encoding)
or the error (SQLSTATE, message, the context's first line: "COPY t, line N").

Encodings: a UTF8 database read by LATIN1, WIN1252, EUC_JP and SJIS clients
(SJIS values whose second byte is 0x5C, the backslash, in text and csv; SJIS
is not ASCII-safe, so that COPY runs serially and says why), a LATIN1
database read by a UTF8 client, SQL_ASCII, the ENCODING option, binary
input (text values converted by their receive function in the client
encoding), invalid input failing with core's message and line; server
files, psycopg's copy API and psql's \\copy.  Settings that an input
function consults: DateStyle, IntervalStyle, TimeZone, search_path
(regclass input), array_nulls, standard_conforming_strings and
extra_float_digits (these two change no input: the loads must still agree).
"""

import subprocess

import psycopg
import pytest

from conftest import last_statement, setup_extensions
from test_copy import client_env

pytestmark = pytest.mark.directpath

# Enough rows that each of two workers parses chunks of its own (a worker's
# chunk is 128 kB).
ROWS = 30_000

PLAIN = "COPY enc_t FROM {src}{opts}"
SERIAL = "/*+ APPEND */ COPY enc_t FROM {src}{opts}"
PARALLEL = "/*+ APPEND PARALLEL(2) */ COPY enc_t FROM {src}{opts}"
LOADS = {"plain": PLAIN, "serial": SERIAL, "parallel": PARALLEL}

# Characters each client encoding can carry (as Python strings).
SAMPLES = {
    "LATIN1": ["café", "naïve Ærø", "¡señor!", "ß µ ½ ÿ"],
    "WIN1252": ["€ 5", "„quoted“ – dash", "œuvre Š ž", "café"],
    "EUC_JP": ["日本語", "東京 カタカナ", "ｶﾀｶﾅ half", "漢字 テスト"],
    # SJIS: 表 ソ 能 十 are 0x95 0x5C, 0x83 0x5C, 0x94 0x5C, 0x8F 0x5C.
    "SJIS": ["表示", "ソフト", "能力 十分", "予定表"],
    "UTF8": ["café", "naïve", "ÿ µ", "Ærø"],
}
PY_CODEC = {"LATIN1": "latin-1", "WIN1252": "cp1252", "EUC_JP": "euc_jp",
            "SJIS": "shift_jis", "UTF8": "utf-8", "SQL_ASCII": "latin-1"}


def text_field(s, fmt):
    """One value of a text or csv row, with the format's escapes: a
    backslash in text, quotes around every csv value with a comma."""
    if fmt == "text":
        return s.replace("\\", "\\\\").replace("\t", "\\t")
    return '"' + s.replace('"', '""') + '"'


def make_rows(encoding, fmt, rows=ROWS):
    """ROWS lines 'id<sep>value' whose values cycle through the samples,
    with a backslash and a delimiter byte among them, as bytes."""
    sep = "\t" if fmt == "text" else ","
    samples = SAMPLES[encoding] + ["back\\slash", "a,b\tc"]
    out = []
    for i in range(1, rows + 1):
        v = f"{samples[i % len(samples)]} {i}"
        out.append(f"{i}{sep}{text_field(v, fmt)}\n")
    return "".join(out).encode(PY_CODEC[encoding])


def opts_of(fmt, extra=""):
    parts = [] if fmt == "text" else ["FORMAT csv"]
    if extra:
        parts.append(extra)
    return f" WITH ({', '.join(parts)})" if parts else ""


@pytest.fixture(scope="module")
def encdb(cluster):
    """factory: a database of the given encoding (C locale), extensions made."""
    made = {}

    def get(encoding):
        name = f"enc_{encoding.lower()}"
        if name not in made:
            with cluster.conn() as c:
                c.execute(f"DROP DATABASE IF EXISTS {name}")
                c.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING '{encoding}' "
                          "LC_COLLATE 'C' LC_CTYPE 'C'")
            setup_extensions(cluster, name)
            made[name] = True
        return name
    return get


def outcome(conn, stmt, settings, columns="id int, v text", select=None):
    """Run one load into a fresh enc_t; its stored bytes (a sorted list of
    rows) or its error (sqlstate, message, the context's first line), and
    last_statement() after it."""
    conn.execute("DROP TABLE IF EXISTS enc_t")
    conn.execute(f"CREATE TABLE enc_t ({columns})")
    for k, v in settings.items():
        conn.execute(f"SET {k} TO {v}")
    try:
        conn.execute(stmt)
        result = ("rows", None)
    except psycopg.Error as e:
        ctx = (e.diag.context or "").splitlines()
        result = ("error", (e.diag.sqlstate, e.diag.message_primary, ctx[0] if ctx else None))
    conn.execute("RESET ALL")
    # (a SQL_ASCII client gets the report's text as bytes)
    st = {k: v.decode() if isinstance(v, bytes) else v
          for k, v in last_statement(conn).items()}
    if result[0] == "rows":
        # textsend: the stored bytes, unverified (a SQL_ASCII client's may
        # be invalid in the database encoding, as core stores them), with
        # the client encoding the database's
        q = select or ["SELECT set_config('client_encoding', pg_encoding_to_char(encoding), false) "
                       "FROM pg_database WHERE datname = current_database()",
                       "SELECT id, textsend(v) FROM enc_t ORDER BY id"]
        for stmt in q[:-1]:
            conn.execute(stmt)
        result = ("rows", [tuple(r) for r in conn.execute(q[-1]).fetchall()])
        conn.execute("RESET ALL")
    return result, st


def three_loads(cluster, dbname, src, opts, settings, **kw):
    """The same COPY plain, serial direct and parallel direct: the three
    outcomes must be equal; returns them and the parallel load's report."""
    got = {}
    with cluster.conn(dbname) as conn:
        conn.execute("SET directpath.min_bytes = 0")
        for name, stmt in LOADS.items():
            got[name], st = outcome(conn, stmt.format(src=src, opts=opts),
                                    dict(settings), **kw)
            conn.execute("SET directpath.min_bytes = 0")
            if name != "plain" and got[name][0] == "rows":
                assert st["path"] == "direct", st
    assert got["serial"] == got["plain"]
    assert got["parallel"] == got["plain"]
    return got, st


def write_file(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    path.chmod(0o644)
    return path


# -- encodings, server files ------------------------------------------------

@pytest.mark.parametrize("fmt", ["text", "csv"])
@pytest.mark.parametrize("client", ["LATIN1", "WIN1252", "EUC_JP"])
def test_utf8_database_client_encoding(cluster, encdb, tmp_path, client, fmt):
    """A UTF8 database, the file in the client's encoding: every load
    converts it, the parallel one in each worker too."""
    db = encdb("UTF8")
    f = write_file(tmp_path, f"{client}.{fmt}", make_rows(client, fmt))
    got, st = three_loads(cluster, db, f"'{f}'", opts_of(fmt), {"client_encoding": f"'{client}'"})
    assert st["parallel_workers"] > 0, st
    rows = got["plain"][1]
    assert len(rows) == ROWS
    # the stored bytes are UTF-8, converted from the client's
    assert bytes(rows[0][1]).decode("utf-8") == f"{SAMPLES[client][1]} 1"


@pytest.mark.parametrize("fmt", ["text", "csv"])
def test_sjis_client_runs_serially(cluster, encdb, tmp_path, fmt):
    """SJIS is not ASCII-safe: values whose second byte is 0x5C load as a
    plain COPY loads them, serially, with the reason."""
    db = encdb("UTF8")
    data = make_rows("SJIS", fmt)
    assert b"\x95\x5c" in data and b"\x83\x5c" in data
    f = write_file(tmp_path, f"sjis.{fmt}", data)
    got, st = three_loads(cluster, db, f"'{f}'", opts_of(fmt), {"client_encoding": "'SJIS'"})
    assert st["parallel_workers"] == 0 and "SJIS is not ASCII-safe" in st["parallel"], st
    assert bytes(got["plain"][1][1][1]).decode("utf-8") == "能力 十分 2"


@pytest.mark.parametrize("fmt", ["text", "csv"])
def test_latin1_database_utf8_client(cluster, encdb, tmp_path, fmt):
    """The first case of the report: a LATIN1 database, a UTF-8 file with
    'café': stored as caf\\xe9 by every load."""
    db = encdb("LATIN1")
    f = write_file(tmp_path, f"utf8.{fmt}", make_rows("UTF8", fmt))
    got, st = three_loads(cluster, db, f"'{f}'", opts_of(fmt), {"client_encoding": "'UTF8'"})
    assert st["parallel_workers"] > 0, st
    assert bytes(got["parallel"][1][0][1]) == b"na\xefve 1"


def test_sql_ascii(cluster, encdb, tmp_path):
    """A SQL_ASCII database stores the bytes as they come, unverified, and
    so does a UTF8 database read by a SQL_ASCII client (core converts
    nothing from SQL_ASCII)."""
    data = make_rows("LATIN1", "text")
    f = write_file(tmp_path, "bytes.txt", data)
    got, st = three_loads(cluster, encdb("SQL_ASCII"), f"'{f}'", "", {"client_encoding": "'SQL_ASCII'"})
    assert st["parallel_workers"] > 0, st
    assert bytes(got["plain"][1][0][1]) == "naïve Ærø 1".encode("latin-1")
    got, st = three_loads(cluster, encdb("UTF8"), f"'{f}'", "", {"client_encoding": "'SQL_ASCII'"})
    assert st["parallel_workers"] > 0, st
    assert bytes(got["plain"][1][0][1]) == "naïve Ærø 1".encode("latin-1")


def test_encoding_option(cluster, encdb, tmp_path):
    """COPY's ENCODING option overrides the client encoding, in workers too."""
    f = write_file(tmp_path, "latin1.csv", make_rows("LATIN1", "csv"))
    got, st = three_loads(cluster, encdb("UTF8"), f"'{f}'", opts_of("csv", "ENCODING 'LATIN1'"),
                          {"client_encoding": "'UTF8'"})
    assert st["parallel_workers"] > 0, st
    assert bytes(got["plain"][1][0][1]).decode("utf-8") == "naïve Ærø 1"


@pytest.mark.parametrize("case", ["invalid-utf8", "no-latin1-equivalent", "invalid-latin1-late"])
def test_invalid_input_fails_as_core(cluster, encdb, tmp_path, case):
    """A bad byte sequence far into the file (a worker's chunk), or a
    character the database encoding lacks: every load fails with core's
    SQLSTATE, message and line."""
    if case == "invalid-utf8":
        db, client = encdb("UTF8"), "UTF8"
        data = bytearray(make_rows("UTF8", "text"))
        bad_line = 25_001
    elif case == "no-latin1-equivalent":
        db, client = encdb("LATIN1"), "UTF8"
        data = bytearray(make_rows("UTF8", "text"))
        bad_line = 17_777
    else:
        db, client = encdb("UTF8"), "EUC_JP"
        data = bytearray(make_rows("EUC_JP", "text"))
        bad_line = 21_000
    lines = bytes(data).split(b"\n")
    bad = {"invalid-utf8": b"\xc3\x28", "no-latin1-equivalent": "€".encode(),
           "invalid-latin1-late": b"\xa4"}[case]
    lines[bad_line - 1] = lines[bad_line - 1] + bad + b" tail"
    f = write_file(tmp_path, "bad.txt", b"\n".join(lines))
    got, _ = three_loads(cluster, db, f"'{f}'", "", {"client_encoding": f"'{client}'"})
    kind, (sqlstate, message, context) = got["plain"]
    assert kind == "error" and sqlstate in ("22021", "22P05"), got["plain"]
    assert context == f"COPY enc_t, line {bad_line}", context
    with cluster.conn(db) as conn:
        assert conn.execute("SELECT to_regclass('enc_t') IS NOT NULL AND "
                            "NOT EXISTS (SELECT FROM enc_t)").fetchone()[0]


def test_binary_text_values_in_client_encoding(cluster, encdb, tmp_path):
    """Binary COPY: a text value's receive function converts it from the
    client encoding.  A file written with a LATIN1 client (COPY TO converts
    to it) loads back identically in the workers."""
    db = encdb("UTF8")
    f = tmp_path / "latin1.bin"
    with cluster.conn(db) as conn:
        conn.execute("DROP TABLE IF EXISTS enc_src")
        conn.execute("CREATE TABLE enc_src (id int, v text)")
        with conn.cursor().copy("COPY enc_src FROM STDIN") as cp:
            cp.write(make_rows("UTF8", "text"))
        conn.execute("SET client_encoding TO 'LATIN1'")
        conn.execute(f"COPY enc_src TO PROGRAM 'cat > {f}' WITH (FORMAT binary)")
    assert "naïve".encode("latin-1") in f.read_bytes()
    got, st = three_loads(cluster, db, f"'{f}'", " WITH (FORMAT binary)",
                          {"client_encoding": "'LATIN1'"})
    assert st["parallel_workers"] > 0, st
    assert bytes(got["plain"][1][0][1]).decode("utf-8") == "naïve 1"


def test_binary_worker_error_in_leader_encoding(cluster, encdb, tmp_path):
    """A binary value the client encoding cannot hold fails in a worker as
    in a plain COPY, and its message reaches the client intact."""
    db = encdb("LATIN1")
    f = tmp_path / "utf8.bin"
    with cluster.conn(db) as conn:
        conn.execute("DROP TABLE IF EXISTS enc_src")
        conn.execute(f"CREATE TABLE enc_src AS SELECT g AS id, CASE g WHEN 20000 THEN 'naïve' "
                     f"ELSE 'plain ' || g END AS v FROM generate_series(1, {ROWS}) g")
        conn.execute(f"COPY enc_src TO PROGRAM 'cat > {f}' WITH (FORMAT binary)")
    # the LATIN1 bytes read by a UTF8 client: row 20000 is not UTF-8
    got, _ = three_loads(cluster, db, f"'{f}'", " WITH (FORMAT binary)",
                         {"client_encoding": "'UTF8'"})
    kind, (sqlstate, message, context) = got["plain"]
    assert kind == "error" and sqlstate == "22021", got["plain"]
    assert context.startswith("COPY enc_t, line 20000"), context


# -- the client's COPY data: psycopg and psql -------------------------------

@pytest.mark.parametrize("client", ["LATIN1", "EUC_JP"])
def test_stdin_psycopg(cluster, encdb, client):
    """COPY FROM STDIN through psycopg's copy API, the bytes in the client
    encoding: the parallel load equals the plain one."""
    db = encdb("UTF8")
    data = make_rows(client, "csv")
    got = {}
    with cluster.conn(db) as conn:
        for name, stmt in LOADS.items():
            conn.execute("DROP TABLE IF EXISTS enc_t")
            conn.execute("CREATE TABLE enc_t (id int, v text)")
            conn.execute(f"SET client_encoding TO '{client}'")
            conn.execute("SET directpath.min_bytes = 0")
            with conn.cursor().copy(stmt.format(src="STDIN", opts=opts_of("csv"))) as cp:
                for i in range(0, len(data), 65536):
                    cp.write(data[i:i + 65536])
            st = last_statement(conn)
            conn.execute("RESET ALL")
            if name == "parallel":
                assert st["parallel_workers"] > 0, st
            got[name] = conn.execute("SELECT id, convert_to(v, 'UTF8') FROM enc_t "
                                     "ORDER BY id").fetchall()
    assert len(got["plain"]) == ROWS
    assert got["serial"] == got["plain"] and got["parallel"] == got["plain"]


def test_stdin_psql(cluster, encdb, tmp_path):
    """psql's \\copy of a LATIN1 file (PGCLIENTENCODING=LATIN1) into a UTF8
    database with directpath.parallel_workers set: as a plain \\copy."""
    db = encdb("UTF8")
    f = write_file(tmp_path, "psql.txt", make_rows("LATIN1", "text"))
    got = {}
    for name, opts in {"plain": "-c directpath.mode=off",
                       "parallel": "-c directpath.mode=always -c directpath.parallel_workers=2 "
                                   "-c directpath.min_bytes=0"}.items():
        with cluster.conn(db) as conn:
            conn.execute("DROP TABLE IF EXISTS enc_t")
            conn.execute("CREATE TABLE enc_t (id int, v text)")
        env = client_env(cluster, db, opts)
        env["PGCLIENTENCODING"] = "LATIN1"
        r = subprocess.run([str(cluster.bin("psql")), "-X", "-v", "ON_ERROR_STOP=1", "-At",
                            "-c", f"\\copy enc_t from '{f}'",
                            "-c", "SELECT parallel_workers FROM directpath.last_statement()"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        assert r.returncode == 0, r.stderr
        if name == "parallel":
            assert int(r.stdout.decode().split()[-1]) > 0, r.stdout
        with cluster.conn(db) as conn:
            got[name] = conn.execute("SELECT id, convert_to(v, 'UTF8') FROM enc_t "
                                     "ORDER BY id").fetchall()
    assert len(got["plain"]) == ROWS and got["parallel"] == got["plain"]


# -- settings an input function consults ------------------------------------

SETTINGS = {
    # name: (settings, column type, the value's text, the check of the result)
    "DateStyle": ({"DateStyle": "'SQL, DMY'"}, "date", "03/04/2020", "2020-04-03"),
    "IntervalStyle": ({"IntervalStyle": "sql_standard"}, "interval", "-1 2:03:04",
                      "-1 days -02:03:04"),
    "TimeZone": ({"TimeZone": "'Asia/Kolkata'"}, "timestamptz", "2020-01-01 00:00",
                 "2019-12-31 18:30:00+00"),
    "search_path": ({"search_path": "enc_schema, public"}, "regclass", "enc_target",
                    "enc_schema.enc_target"),
    "array_nulls": ({"array_nulls": "off"}, "text[]", "{NULL,a}", '{"NULL",a}'),
    "standard_conforming_strings": ({"standard_conforming_strings": "off"}, "text",
                                    "x\\\\y", "x\\y"),
    "extra_float_digits": ({"extra_float_digits": "-15"}, "float8", "0.1", "0.1"),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_session_setting_in_workers(cluster, tmp_path, name):
    """A value whose input depends on a setting loads the same in workers as
    in a plain COPY."""
    settings, typ, text, want = SETTINGS[name]
    f = write_file(tmp_path, f"{name}.txt",
                   "".join(f"{i}\t{text}\n" for i in range(1, ROWS + 1)).encode())
    with cluster.conn() as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS enc_schema")
        conn.execute("CREATE TABLE IF NOT EXISTS enc_schema.enc_target ()")
    select = ["SET search_path = public", "SET TimeZone = 'UTC'", "SET IntervalStyle = postgres",
              "SET DateStyle = ISO", "SELECT v::text, count(*) FROM enc_t GROUP BY 1"]
    got, st = three_loads(cluster, "postgres", f"'{f}'", "", settings,
                          columns=f"id int, v {typ}", select=select)
    assert st["parallel_workers"] > 0, st
    assert got["plain"][1] == [(want, ROWS)], got["plain"]
