"""Direct path COPY through real clients.

psycopg's copy API (text and binary), psql's \\copy, pg_dump/pg_restore (plain,
--single-transaction, -j 2, and a restore script fed to psql), pgbench -i,
progress in pg_stat_progress_copy, and corrupted inputs that must fail exactly
as a plain COPY fails.

Client programs come from DP_PG_BINDIR and run with LD_LIBRARY_PATH=<bindir>/../lib.
"""

import datetime
import decimal
import os
import random
import re
import struct
import subprocess
import time
from collections import Counter

import psycopg
import pytest
from psycopg.types.json import Jsonb

from conftest import (Background, heap_blocks, last_statement,
                      setup_extensions, table_digest, verify_table, verify_tree,
                      vm_summary, wait_fault_sleep)

pytestmark = pytest.mark.directpath

ALWAYS = "-c directpath.mode=always"

# PGOPTIONS that make each load that went direct announce itself in the server
# log.  The test-only fault point "finish" is reached only by a load that took
# the direct path (after its last batch is written); with fault_action =
# notice it raises a NOTICE, and log_min_messages = notice logs that NOTICE
# with its CONTEXT line, which is core's "COPY <table>, line N".  (Sent to the
# client, a NOTICE carries no CONTEXT: libpq shows context for errors only.)
# Unlike last_statement(), this names every COPY of a multi-table client run.
TRACE_DIRECT = ("-c directpath.fault_point=finish -c directpath.fault_action=notice "
                "-c log_min_messages=notice")


# -- helpers -----------------------------------------------------------------

def client_env(cluster, dbname="postgres", pgoptions=None):
    """Environment for a client program of the cluster's installation."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(PGHOST=str(cluster.sockdir), PGPORT=str(cluster.port),
               PGUSER="postgres", PGDATABASE=dbname,
               LD_LIBRARY_PATH=str(cluster.bindir.parent / "lib"))
    if pgoptions:
        env["PGOPTIONS"] = pgoptions
    return env


def run_client(cluster, prog, *args, dbname="postgres", pgoptions=None,
               input=None, timeout=300, check=True):
    cmd = [str(cluster.bin(prog))] + [str(a) for a in args]
    r = subprocess.run(cmd, env=client_env(cluster, dbname, pgoptions), input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if check:
        assert r.returncode == 0, (
            f"{' '.join(cmd)} exited {r.returncode}\n--- stdout ---\n{r.stdout[-3000:]}"
            f"\n--- stderr ---\n{r.stderr[-3000:]}")
    return r


def direct_copies_in_log(cluster, offset):
    """Counter {table: n} of the COPYs that finished on the direct path since
    `offset` of the server log (see TRACE_DIRECT)."""
    lines = cluster.log(offset).splitlines()
    found = Counter()
    for i, line in enumerate(lines):
        m = re.search(r"\[(\d+)\] .*NOTICE:  directpath: fault point \"finish\"", line)
        if not m:
            continue
        for nxt in lines[i + 1:i + 6]:
            c = re.search(r"\[%s\] .*CONTEXT:  COPY (\S+?), line \d+" % m.group(1), nxt)
            if c:
                found[c.group(1)] += 1
                break
        else:
            found["<no COPY context>"] += 1
    return found


def except_all_diff(conn, a, b):
    """(rows of a not in b, rows of b not in a), as multisets."""
    return tuple(conn.execute(
        f"SELECT (SELECT count(*) FROM (TABLE {a} EXCEPT ALL TABLE {b}) x), "
        f"(SELECT count(*) FROM (TABLE {b} EXCEPT ALL TABLE {a}) y)").fetchone())


def count(conn, table):
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def create_db(cluster, name):
    with cluster.conn() as c:
        c.execute(f"DROP DATABASE IF EXISTS {name}")
        c.execute(f"CREATE DATABASE {name} TEMPLATE template0")


def wait_n_tup_ins(conn, table, expected, timeout=20):
    """pg_stat_user_tables.n_tup_ins of `table`, once it reaches `expected`
    (a client's backend flushes its counters when it exits, a moment after
    the client itself)."""
    deadline = time.monotonic() + timeout
    while True:
        n = conn.execute("SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = %s::regclass",
                         (table,)).fetchone()[0]
        if n >= expected or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


# -- 1. psycopg's copy API ---------------------------------------------------

COPY_COLUMNS = ("(id int, big bigint, t text, n numeric, ts timestamptz, flag bool, "
                "f float8, raw bytea, j jsonb, arr int[], d date)")
COPY_TYPES = ["int4", "int8", "text", "numeric", "timestamptz", "bool", "float8",
              "bytea", "jsonb", "int4[]", "date"]
N_COPY = 20_000


def numeric_value(i):
    if i % 31 == 0:
        return None
    if i % 97 == 0:
        return decimal.Decimal("NaN")
    if i % 2:
        return decimal.Decimal(i) / 7
    return decimal.Decimal(f"{i}.{i % 100:02d}")


def copy_rows():
    """Deterministic rows of COPY_COLUMNS: NULLs, text needing escapes, long
    (TOASTed) values, special floats, empty arrays and strings."""
    rnd = random.Random(20240601)
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    specials = [float("inf"), float("-inf"), float("nan"), -0.0, 1e308, 5e-324]
    rows = []
    for i in range(1, N_COPY + 1):
        if i % 1000 == 0:
            t = "long " + "".join(rnd.choice("abcdefghij0123456789") for _ in range(6000))
        elif i % 13 == 0:
            t = f"tab\there, newline\nthere, backslash \\ and quote \" {i} é✓"
        elif i % 17 == 0:
            t = ""
        else:
            t = f"row {i}"
        rows.append((
            i,
            None if i % 11 == 0 else i * 1_000_003 - 2**40,
            None if i % 29 == 0 else t,
            numeric_value(i),
            None if i % 37 == 0 else base + datetime.timedelta(seconds=i * 37, microseconds=i),
            None if i % 5 == 0 else i % 2 == 0,
            specials[(i // 50) % len(specials)] if i % 50 == 0 else i / 3,
            None if i % 41 == 0 else bytes((i * k) % 256 for k in range(i % 40)),
            None if i % 43 == 0 else Jsonb({"k": i, "s": f"v{i}", "a": [i, None, True]}),
            None if i % 47 == 0 else [] if i % 53 == 0 else [i, -i, None, i * 2],
            None if i % 59 == 0 else datetime.date(2000, 1, 1) + datetime.timedelta(days=i),
        ))
    return rows


@pytest.fixture(scope="module")
def psycopg_rows():
    return copy_rows()


def copy_in(conn, statement, rows, binary):
    with conn.cursor() as cur:
        with cur.copy(statement) as cp:
            if binary:
                cp.set_types(COPY_TYPES)
            for r in rows:
                cp.write_row(r)
        return cur.rowcount


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("how", ["mode", "hint", "hint-new-table"])
def test_psycopg_copy(cluster, psycopg_rows, binary, how):
    """cursor.copy() into a table with an index, direct (the session setting,
    or the hint) and plain into a twin: same rows, sound table."""
    fmt = " (FORMAT binary)" if binary else ""
    tag = f"{how.replace('-', '_')}_{'bin' if binary else 'txt'}"
    direct, plain = f"pc_d_{tag}", f"pc_p_{tag}"
    with cluster.conn() as conn:
        for t in (direct, plain):
            conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute(f"CREATE TABLE {plain} {COPY_COLUMNS}")
        conn.execute("SET directpath.mode = off")
        assert copy_in(conn, f"COPY {plain} FROM STDIN{fmt}", psycopg_rows, binary) == N_COPY
        conn.execute("RESET directpath.mode")

        def create():
            conn.execute(f"CREATE TABLE {direct} {COPY_COLUMNS}")
            conn.execute(f"CREATE INDEX {direct}_id ON {direct} (id)")

        if how == "mode":
            create()
            conn.execute("SET directpath.mode = always")
            try:
                n = copy_in(conn, f"COPY {direct} FROM STDIN{fmt}", psycopg_rows, binary)
                st = last_statement(conn)
            finally:
                conn.execute("RESET directpath.mode")
        elif how == "hint":
            create()
            n = copy_in(conn, f"/*+ APPEND */ COPY {direct} FROM STDIN{fmt}",
                        psycopg_rows, binary)
            st = last_statement(conn)
        else:
            # Created in the loading transaction: storage new, rows frozen,
            # the index rebuilt once at the end.
            with conn.transaction():
                create()
                n = copy_in(conn, f"/*+ APPEND */ COPY {direct} FROM STDIN{fmt}",
                            psycopg_rows, binary)
                st = last_statement(conn)

        assert n == N_COPY
        assert st["path"] == "direct", st
        assert st["rows_inserted"] == N_COPY, st
        assert st["pages_written"] > 0, st
        assert st["relations"] == 1, st
        new = how == "hint-new-table"
        assert st["frozen"] is new, st
        if new:
            assert st["indexes_rebuilt"] == 1, st

        assert count(conn, direct) == N_COPY
        assert except_all_diff(conn, direct, plain) == (0, 0)
        assert table_digest(conn, direct) == table_digest(conn, plain)
        # The index finds what the heap holds.
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        try:
            assert conn.execute(f"SELECT count(*), sum(big) FROM {direct} WHERE id BETWEEN 5000 AND 5999"
                                ).fetchone() == conn.execute(
                f"SELECT count(*), sum(big) FROM {plain} WHERE id BETWEEN 5000 AND 5999").fetchone()
        finally:
            conn.execute("RESET enable_seqscan")
            conn.execute("RESET enable_bitmapscan")
        # The long text values went to the TOAST table (verify_heapam checks it).
        assert conn.execute("SELECT pg_relation_size(reltoastrelid) FROM pg_class "
                            "WHERE oid = %s::regclass", (direct,)).fetchone()[0] > 0
        verify_table(conn, direct, frozen_expected=True if new else None)


# -- 2. psql's \copy ---------------------------------------------------------

N_CSV = 20_000


def write_csv(path):
    """A CSV file with a header: quoted fields with quotes, commas and
    newlines; unquoted empty (NULL) and quoted empty ("") fields."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("id,name,note,amount\n")
        for i in range(1, N_CSV + 1):
            name = f'"name ""{i}"", with comma"'
            if i % 50 == 0:
                name = f'"two\nlines {i}"'
            note = "" if i % 10 == 0 else '""' if i % 15 == 0 else f"note {i}"
            f.write(f"{i},{name},{note},{i * 1.25}\n")


@pytest.mark.parametrize("in_transaction", [False, True], ids=["existing", "created-in-psql-1"])
def test_psql_backslash_copy(cluster, tmp_path, in_transaction):
    table = "pq_new" if in_transaction else "pq_existing"
    csv_path = tmp_path / "data.csv"
    write_csv(csv_path)
    ddl = f"CREATE TABLE {table} (id int PRIMARY KEY, name text, note text, amount numeric)"
    with cluster.conn() as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"DROP TABLE IF EXISTS {table}_twin")
        if not in_transaction:
            conn.execute(ddl)
    # psql sends "COPY pq_... FROM STDIN with (format csv, header)": no hint,
    # the direct path comes from PGOPTIONS alone.
    args = ["-X", "-v", "ON_ERROR_STOP=1", "-At", "-F", "|"]
    if in_transaction:
        args += ["-1", "-c", ddl]
    args += ["-c", f"\\copy {table} from '{csv_path}' with (format csv, header)",
             "-c", "SELECT path, coalesce(reason, ''), rows_inserted, frozen, relations "
                   "FROM directpath.last_statement()"]
    r = run_client(cluster, "psql", *args, pgoptions=ALWAYS)
    out = r.stdout.strip().splitlines()
    assert f"COPY {N_CSV}" in out, r.stdout
    assert out[-1] == f"direct||{N_CSV}|{'t' if in_transaction else 'f'}|1", r.stdout

    with cluster.conn() as conn:
        conn.execute(f"CREATE TABLE {table}_twin (LIKE {table})")
        conn.execute("SET directpath.mode = off")
        conn.execute(f"COPY {table}_twin FROM '{csv_path}' WITH (FORMAT csv, HEADER)")
        assert count(conn, table) == N_CSV
        assert except_all_diff(conn, table, f"{table}_twin") == (0, 0)
        assert conn.execute(f"SELECT count(*) FILTER (WHERE note IS NULL), "
                            f"count(*) FILTER (WHERE note = ''), "
                            f"count(*) FILTER (WHERE name LIKE E'two\\nlines %%') FROM {table}"
                            ).fetchone() == (N_CSV // 10, N_CSV // 15 - N_CSV // 30, N_CSV // 50)
        verify_table(conn, table, frozen_expected=True if in_transaction else None)


# -- 3. pg_dump / pg_restore -------------------------------------------------

RESTORE_SOURCE_SQL = """
CREATE TABLE r_plain (id int, a text, b float8, c numeric, dropme int, d date);
INSERT INTO r_plain
  SELECT g, CASE WHEN g % 97 = 0 THEN NULL ELSE 'row ' || g || repeat('x', g % 40) END,
         g / 7.0, g * 1.5, g, date '2020-01-01' + g % 1000
  FROM generate_series(1, 20000) g;
ALTER TABLE r_plain DROP COLUMN dropme;

CREATE TABLE r_pk (id int PRIMARY KEY, k int, v text,
                   ident bigint GENERATED ALWAYS AS IDENTITY,
                   gen int GENERATED ALWAYS AS (k * 2) STORED);
CREATE INDEX r_pk_k ON r_pk (k);
CREATE UNIQUE INDEX r_pk_v ON r_pk (v);
INSERT INTO r_pk (id, k, v) SELECT g, g % 100, 'v' || g FROM generate_series(1, 20000) g;

CREATE TABLE r_part (id int, region int, v text) PARTITION BY RANGE (id);
CREATE TABLE r_part_1 PARTITION OF r_part FOR VALUES FROM (MINVALUE) TO (10001);
CREATE TABLE r_part_2 PARTITION OF r_part FOR VALUES FROM (10001) TO (20001)
  PARTITION BY LIST (region);
CREATE TABLE r_part_2a PARTITION OF r_part_2 FOR VALUES IN (0, 1);
CREATE TABLE r_part_2b PARTITION OF r_part_2 DEFAULT;
CREATE TABLE r_part_3 PARTITION OF r_part DEFAULT;
CREATE INDEX r_part_region ON r_part (region);
INSERT INTO r_part SELECT g, g % 4, md5(g::text) FROM generate_series(1, 30000) g;

CREATE TABLE r_toast (id int PRIMARY KEY, doc text, note text);
INSERT INTO r_toast
  SELECT g, CASE WHEN g % 3 = 0 THEN repeat('compressible ', 8000)
                 ELSE (SELECT string_agg(md5(g::text || ':' || i), '') FROM generate_series(1, 700) i)
            END, 'n' || g
  FROM generate_series(1, 150) g;

CREATE TABLE r_parent (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE r_child (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES r_parent,
                      qty int CHECK (qty >= 0));
INSERT INTO r_parent SELECT g, 'parent ' || g FROM generate_series(1, 1000) g;
INSERT INTO r_child SELECT g, 1 + g % 1000, g % 50 FROM generate_series(1, 20000) g;
"""
RESTORE_TABLES = ["r_plain", "r_pk", "r_part", "r_toast", "r_parent", "r_child"]
RESTORE_LEAVES = ["r_plain", "r_pk", "r_part_1", "r_part_2a", "r_part_2b", "r_part_3",
                  "r_toast", "r_parent", "r_child"]


@pytest.fixture(scope="module")
def dump_source(cluster, tmp_path_factory):
    """Database rs_src with the tables above, dumped with pg_dump -Fc."""
    create_db(cluster, "rs_src")
    with cluster.conn("rs_src") as conn:
        conn.execute(RESTORE_SOURCE_SQL)
        conn.execute("VACUUM ANALYZE")
        leaf_counts = {t: count(conn, f"ONLY {t}") for t in RESTORE_LEAVES}
        # Each table goes direct on its own (over directpath.min_bytes).
        assert min(leaf_counts.values()) >= 150
        # Both kinds of TOASTed values: compressed inline and out of line.
        assert conn.execute("SELECT pg_relation_size(reltoastrelid) > 0 FROM pg_class "
                            "WHERE oid = 'r_toast'::regclass").fetchone()[0]
    path = tmp_path_factory.mktemp("dump") / "rs_src.dump"
    run_client(cluster, "pg_dump", "-Fc", "-f", path, "rs_src")
    return path, leaf_counts


def check_restored(cluster, dbname, leaf_counts, frozen):
    """Every table of `dbname` equals rs_src's (EXCEPT ALL both ways, against
    a plain COPY of the source rows into schema orig); amcheck and
    pg_visibility on every leaf."""
    setup_extensions(cluster, dbname)
    with cluster.conn("rs_src") as src, cluster.conn(dbname) as dst:
        dst.execute("SET directpath.mode = off")
        dst.execute("DROP SCHEMA IF EXISTS orig CASCADE")
        dst.execute("CREATE SCHEMA orig")
        for t in RESTORE_TABLES:
            dst.execute(f"CREATE TABLE orig.{t} (LIKE public.{t})")
            with src.cursor().copy(f"COPY (SELECT * FROM public.{t}) TO STDOUT (FORMAT binary)") as out:
                with dst.cursor().copy(f"COPY orig.{t} FROM STDIN (FORMAT binary)") as inp:
                    for data in out:
                        inp.write(data)
            assert count(dst, f"public.{t}") == count(src, f"public.{t}"), t
            assert except_all_diff(dst, f"public.{t}", f"orig.{t}") == (0, 0), t
        for leaf, n in leaf_counts.items():
            assert count(dst, f"ONLY public.{leaf}") == n, leaf
        # The restored constraints hold and are valid.
        assert dst.execute("SELECT count(*) FROM pg_constraint WHERE conrelid = "
                           "'public.r_child'::regclass AND contype = 'f' AND convalidated"
                           ).fetchone()[0] == 1
        assert dst.execute("SELECT count(*) FROM r_child c LEFT JOIN r_parent p "
                           "ON p.id = c.parent_id WHERE p.id IS NULL").fetchone()[0] == 0
        seen = {}
        for t in RESTORE_TABLES:
            seen.update(verify_tree(dst, f"public.{t}", frozen_expected=frozen))
        assert sorted(k.split(".")[-1] for k in seen) == sorted(RESTORE_LEAVES), seen
        # The TOAST table of r_toast is sound too (verify_heapam check_toast
        # above); its values read back in full.
        assert dst.execute("SELECT sum(length(doc)) FROM r_toast").fetchone() == \
            src.execute("SELECT sum(length(doc)) FROM r_toast").fetchone()


@pytest.mark.parametrize("mode", ["plain", "single-transaction", "jobs"])
def test_pg_restore(cluster, dump_source, mode):
    """pg_restore -d under directpath.mode = always: every TABLE DATA item
    is a COPY that goes direct (seen in the server log, TRACE_DIRECT), the
    restored tables equal the originals and pass amcheck / pg_visibility.
    With --single-transaction the tables are created in the restoring
    transaction, and with -j 2 pg_restore precedes each COPY by a TRUNCATE
    in the same transaction: either way the storage is new and every page
    must come out all-visible and all-frozen (a plain COPY would set no VM
    bit)."""
    dump, leaf_counts = dump_source
    db = "rs_" + mode.replace("-", "_")
    create_db(cluster, db)
    opts = {"plain": [], "single-transaction": ["--single-transaction"],
            "jobs": ["-j", "2"]}[mode]
    off = cluster.log_size()
    run_client(cluster, "pg_restore", "--exit-on-error", *opts, "-d", db, dump,
               pgoptions=f"{ALWAYS} {TRACE_DIRECT}")
    direct = direct_copies_in_log(cluster, off)
    assert direct == Counter({t: 1 for t in RESTORE_LEAVES}), (
        f"COPYs that went direct: {dict(direct)}\n{cluster.log_tail(40, off)}")

    frozen = mode != "plain"
    check_restored(cluster, db, leaf_counts, frozen=frozen or None)
    with cluster.conn(db) as conn:
        for leaf, n in leaf_counts.items():
            assert wait_n_tup_ins(conn, f"public.{leaf}", n) == n, leaf
            if not frozen:
                # Existing storage: nothing frozen, no VM bit set by the load.
                assert vm_summary(conn, f"public.{leaf}") == (0, 0), leaf


def test_restore_script_reports_direct(cluster, dump_source, tmp_path):
    """pg_restore -f - writes the restore as an SQL script; psql runs it under
    directpath.mode = always, with a directpath.last_statement() query added
    after each COPY's data: each table's COPY reports path 'direct' and the
    table's row count."""
    dump, leaf_counts = dump_source
    db = "rs_script"
    create_db(cluster, db)
    with cluster.conn(db) as conn:
        conn.execute("CREATE EXTENSION directpath")
    script = run_client(cluster, "pg_restore", "-f", "-", dump).stdout
    out, current, ncopies = [], None, 0
    for line in script.splitlines():
        out.append(line)
        m = re.match(r"COPY public\.(\w+) .*FROM stdin;$", line)
        if m:
            current = m.group(1)
        elif line == "\\." and current:
            out.append(f"SELECT 'DPCHECK', '{current}', path, coalesce(reason, ''), "
                       f"rows_inserted, frozen FROM directpath.last_statement();")
            current, ncopies = None, ncopies + 1
    assert ncopies == len(RESTORE_LEAVES), script[:2000]
    (tmp_path / "restore.sql").write_text("\n".join(out) + "\n")
    r = run_client(cluster, "psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-F", "|",
                   "-f", tmp_path / "restore.sql", dbname=db, pgoptions=ALWAYS)
    checks = {}
    for line in r.stdout.splitlines():
        f = line.split("|")
        if f[0] == "DPCHECK":
            checks[f[1]] = tuple(f[2:])
    assert checks == {t: ("direct", "", str(n), "f") for t, n in leaf_counts.items()}, r.stdout
    check_restored(cluster, db, leaf_counts, frozen=None)


# -- 4. pgbench -i -----------------------------------------------------------

def pgbench_consistent(conn):
    """Sums of balances agree across the pgbench tables."""
    a, b, t, h = conn.execute(
        "SELECT (SELECT sum(abalance) FROM pgbench_accounts), "
        "(SELECT sum(bbalance) FROM pgbench_branches), "
        "(SELECT sum(tbalance) FROM pgbench_tellers), "
        "(SELECT coalesce(sum(delta), 0) FROM pgbench_history)").fetchone()
    assert a == b == t == h, (a, b, t, h)


def test_pgbench_init_and_run(cluster):
    db = "bench"
    create_db(cluster, db)
    setup_extensions(cluster, db)
    opts = f"{ALWAYS} {TRACE_DIRECT}"

    # pgbench -i as is: BEGIN; TRUNCATE; COPY ... (FREEZE ON) per table, then
    # vacuum and primary keys.
    off = cluster.log_size()
    run_client(cluster, "pgbench", "-i", "-s", "2", db, pgoptions=opts)
    # Only pgbench_accounts is over directpath.min_bytes (2 branches, 20 tellers).
    assert direct_copies_in_log(cluster, off) == Counter({"pgbench_accounts": 1}), \
        cluster.log_tail(40, off)
    with cluster.conn(db) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT aid), sum(bid), sum(abalance) "
                            "FROM pgbench_accounts").fetchone() == (200_000, 200_000, 300_000, 0)
        verify_table(conn, "pgbench_accounts", frozen_expected=True)

    # The same without the vacuum step, so that the all-frozen visibility map
    # can only come from the load itself; then vacuum and primary keys.
    off = cluster.log_size()
    run_client(cluster, "pgbench", "-i", "-s", "2", "-I", "dtg", db, pgoptions=opts)
    assert direct_copies_in_log(cluster, off) == Counter({"pgbench_accounts": 1})
    with cluster.conn(db) as conn:
        assert count(conn, "pgbench_accounts") == 200_000
        nblocks = heap_blocks(conn, "pgbench_accounts")
        assert vm_summary(conn, "pgbench_accounts") == (nblocks, nblocks)
        verify_table(conn, "pgbench_accounts", frozen_expected=True)
        for t in ("pgbench_branches", "pgbench_tellers"):
            verify_table(conn, t)
    run_client(cluster, "pgbench", "-i", "-I", "vp", db, pgoptions=ALWAYS)
    with cluster.conn(db) as conn:
        assert vm_summary(conn, "pgbench_accounts") == (nblocks, nblocks)
        assert heap_blocks(conn, "pgbench_accounts") == nblocks
        assert conn.execute("SELECT count(*) FROM pg_index WHERE indrelid = "
                            "'pgbench_accounts'::regclass AND indisprimary").fetchone()[0] == 1

    r = run_client(cluster, "pgbench", "-T", "3", "-c", "2", db, pgoptions=ALWAYS)
    assert re.search(r"number of transactions actually processed: [1-9]", r.stdout), r.stdout
    m = re.search(r"number of failed transactions: (\d+)", r.stdout)
    assert m is None or m.group(1) == "0", r.stdout
    assert "error" not in r.stderr.lower(), r.stderr
    with cluster.conn(db) as conn:
        assert count(conn, "pgbench_accounts") == 200_000
        assert count(conn, "pgbench_history") > 0
        pgbench_consistent(conn)
        verify_table(conn, "pgbench_accounts")


# -- 5. progress -------------------------------------------------------------

def test_progress_of_paused_copy(cluster):
    """A direct COPY FROM PROGRAM held at the end of its first batch shows in
    pg_stat_progress_copy; its rows appear, all of them, when it ends."""
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS prog_t")
        conn.execute("CREATE TABLE prog_t (a int)")
        settings = {"directpath.fault_point": "batch_done", "directpath.fault_hit": "1",
                    "directpath.fault_action": "sleep", "directpath.fault_sleep_ms": "5000",
                    "directpath.batch_pages": "8"}
        off = cluster.log_size()
        with Background(cluster, "/*+ APPEND */ COPY prog_t FROM PROGRAM 'seq 1 100000'",
                        settings=settings, name="copy-program") as bg:
            bg.start()
            wait_fault_sleep(cluster, bg, "batch_done", off)
            row = conn.execute(
                "SELECT command, type, relid::regclass::text, tuples_processed, "
                "bytes_processed, bytes_total, tuples_excluded "
                "FROM pg_stat_progress_copy WHERE pid = %s", (bg.pid,)).fetchone()
            assert row is not None, "the COPY is not in pg_stat_progress_copy"
            command, typ, rel, tuples, nbytes, total, excluded = row
            assert (command, typ, rel) == ("COPY FROM", "PROGRAM", "prog_t"), row
            assert 0 < tuples < 100_000, row
            assert nbytes > 0, row
            assert (total, excluded) == (0, 0), row
            # Readers are not blocked and see none of the rows yet.
            assert count(conn, "prog_t") == 0
            bg.join(120)
            assert bg.error is None, bg.error
            assert bg.results == ["COPY 100000"], bg.results
            st = last_statement(bg.conn)
            assert st["path"] == "direct" and st["rows_inserted"] == 100_000, st
        assert conn.execute("SELECT count(*), count(DISTINCT a), sum(a::bigint) FROM prog_t"
                            ).fetchone() == (100_000, 100_000, 5_000_050_000)
        assert conn.execute("SELECT count(*) FROM pg_stat_progress_copy WHERE relid = "
                            "'prog_t'::regclass").fetchone()[0] == 0
        verify_table(conn, "prog_t")


# -- 6. corrupted input ------------------------------------------------------

N_GOOD = 8_000
ERR_COLUMNS = "(id int NOT NULL, name text, code varchar(5), qty int CONSTRAINT e_t_qty_check CHECK (qty >= 0))"


def good_lines(fmt, start=1, n=N_GOOD):
    sep = "," if fmt == "csv" else "\t"
    return "".join(f"{i}{sep}name {i}{sep}c{i % 1000}{sep}{i % 7}\n"
                   for i in range(start, start + n)).encode()


def binary_copy(rows):
    """COPY binary data of (id int4, name text, code varchar, qty int4) rows;
    a row given as bytes is put in as is."""
    out = [b"PGCOPY\n\xff\r\n\x00", struct.pack("!ii", 0, 0)]
    for r in rows:
        if isinstance(r, bytes):
            out.append(r)
            continue
        out.append(struct.pack("!h", 4))
        for v in r:
            if v is None:
                out.append(struct.pack("!i", -1))
            elif isinstance(v, int):
                out.append(struct.pack("!ii", 4, v))
            else:
                b = v.encode()
                out.append(struct.pack("!i", len(b)) + b)
    out.append(struct.pack("!h", -1))
    return b"".join(out)


def bin_good(n=N_GOOD, start=1):
    return [(i, f"name {i}", f"c{i % 1000}", i % 7) for i in range(start, start + n)]


# name -> (COPY options, input bytes, expected SQLSTATE or None for success).
# The bad row comes after N_GOOD good ones, i.e. after several batches.
BAD_INPUTS = {
    "csv_missing_column": ("FORMAT csv", good_lines("csv") + b"8001,name,abc\n", "22P04"),
    "csv_extra_column": ("FORMAT csv", good_lines("csv") + b"8001,name,abc,1,extra\n", "22P04"),
    "csv_bad_utf8": ("FORMAT csv, ENCODING 'UTF8'",
                     good_lines("csv") + b"8001,caf\xc3\x28 \xff,abc,1\n" + good_lines("csv", 8002, 10),
                     "22021"),
    "text_bad_utf8": ("ENCODING 'UTF8'",
                      good_lines("text") + b"8001\tname\xe2\x82\tabc\t1\n", "22021"),
    "csv_unterminated_quote": ("FORMAT csv", good_lines("csv") + b'8001,"never closed,abc,1\n8002,x,y,1\n',
                               "22P04"),
    "csv_too_long": ("FORMAT csv", good_lines("csv") + b"8001,name,abcdefg,1\n", "22001"),
    "text_bad_integer": ("", good_lines("text") + b"80x1\tname\tabc\t1\n", "22P02"),
    "text_wrong_column_count": ("", good_lines("text") + b"8001\tname\n", "22P04"),
    "binary_field_count": ("FORMAT binary",
                           binary_copy(bin_good() + [struct.pack("!hii", 1, 4, 8001)]), "22P04"),
    "binary_truncated": ("FORMAT binary",
                         binary_copy(bin_good())[:-2] + struct.pack("!hi", 4, 4) + b"\x00\x00", "22P04"),
    # Row checks (as rows arrive) and the unique index (after the batch).
    "csv_not_null": ("FORMAT csv", good_lines("csv") + b",name,abc,1\n", "23502"),
    "csv_check": ("FORMAT csv", good_lines("csv") + b"8001,name,abc,-1\n", "23514"),
    "csv_duplicate_in_input": ("FORMAT csv", good_lines("csv") + b"4242,name,abc,1\n", "23505"),
    "csv_duplicate_existing": ("FORMAT csv", good_lines("csv") + b"-7,name,abc,1\n", "23505"),
    # A duplicate within the first batch: found when that batch's index
    # entries are made, after its pages are written.
    "csv_duplicate_first_batch": ("FORMAT csv", good_lines("csv", 1, 20) + b"10,dup,abc,1\n"
                                  + good_lines("csv", 21, N_GOOD - 20), "23505"),
    # A last line without its newline is a complete row in CSV.
    "csv_no_final_newline": ("FORMAT csv", good_lines("csv") + b"8001,last,abc,1", None),
    "text_no_final_newline": ("", good_lines("text") + b"8001\tlast\tabc\t1", None),
}


def copy_bytes(conn, statement, data, chunk=32 * 1024):
    """COPY FROM STDIN of raw bytes: None, or the error as a comparable tuple."""
    try:
        with conn.cursor() as cur:
            with cur.copy(statement) as cp:
                for i in range(0, len(data), chunk):
                    cp.write(data[i:i + chunk])
    except psycopg.Error as e:
        d = e.diag
        return (e.sqlstate, d.message_primary, d.message_detail, d.message_hint, d.context)
    return None


@pytest.mark.reliability
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_corrupted_input_fails_like_plain_copy(cluster, case):
    opts, data, sqlstate = BAD_INPUTS[case]
    with_opts = f" WITH ({opts})" if opts else ""
    # Two tables named e_t in two schemas: COPY's context line names the
    # table without its schema, so both loads must report the same text.
    with cluster.conn() as conn:
        for s in ("e_plain", "e_direct"):
            conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
            conn.execute(f"CREATE SCHEMA {s}")
            conn.execute(f"CREATE TABLE {s}.e_t {ERR_COLUMNS}")
            conn.execute(f"CREATE UNIQUE INDEX e_t_id_key ON {s}.e_t (id)")
            # Existing rows: the storage is not new, index entries go in per batch.
            conn.execute(f"INSERT INTO {s}.e_t SELECT -g, 'old', 'o', 0 FROM generate_series(1, 100) g")

        conn.execute("SET directpath.mode = off")
        plain = copy_bytes(conn, f"COPY e_plain.e_t FROM STDIN{with_opts}", data)

        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        before = table_digest(conn, "e_direct.e_t")
        # Small batches, so that pages are written (and index entries made)
        # before the bad row; a NOTICE at the end of the first batch (or,
        # where the first batch holds the bad row, once its pages are
        # written) proves the load was on the direct path when it failed.
        point = "batch_written" if case == "csv_duplicate_first_batch" else "batch_done"
        for k, v in {"directpath.mode": "always", "directpath.batch_pages": "8",
                     "directpath.fault_point": point, "directpath.fault_hit": "1",
                     "directpath.fault_action": "notice"}.items():
            conn.execute("SELECT set_config(%s, %s, false)", (k, v))
        direct = copy_bytes(conn, f"COPY e_direct.e_t FROM STDIN{with_opts}", data)
        conn.execute("RESET directpath.fault_point")
        assert f'directpath: fault point "{point}"' in notices, notices

        if sqlstate is None:
            assert plain is None and direct is None, (plain, direct)
            assert last_statement(conn)["path"] == "direct"
            assert except_all_diff(conn, "e_direct.e_t", "e_plain.e_t") == (0, 0)
            assert count(conn, "e_direct.e_t") == 100 + N_GOOD + 1
            verify_table(conn, "e_direct.e_t")
            return

        assert plain is not None and plain[0] == sqlstate, plain
        assert direct == plain, f"\ndirect: {direct}\nplain:  {plain}"
        assert (plain[4] or "").startswith("COPY e_t, line "), plain

        # Nothing of the failed load is visible; the table is sound.
        assert table_digest(conn, "e_direct.e_t") == before
        verify_table(conn, "e_direct.e_t")

        # And it takes a new load (good input in the same format).
        good = (binary_copy(bin_good(N_GOOD, 1)) if "binary" in opts
                else good_lines("csv" if "csv" in opts else "text"))
        assert copy_bytes(conn, f"COPY e_direct.e_t FROM STDIN{with_opts}", good) is None
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N_GOOD, st
        conn.execute("RESET directpath.mode")
        assert conn.execute("SELECT count(*), sum(id) FILTER (WHERE id > 0) FROM e_direct.e_t"
                            ).fetchone() == (100 + N_GOOD, N_GOOD * (N_GOOD + 1) // 2)
        verify_table(conn, "e_direct.e_t")
