"""Sharded loads: a partitioned table whose partitions are postgres_fdw
foreign tables on other servers.  Under the direct path each postgres_fdw
partition's rows go to its server as one COPY over postgres_fdw's own
connection (src/remote/shard.c), all shards at once, while the local partition
is written directly.  Two shards run directpath, one does not; every test
compares with the same rows loaded on the plain path, and checks what the
remote servers hold and logged."""

import re
import threading
import time

import pytest

from conftest import (last_statement, set_gucs, table_digest, verify_table)

pytestmark = pytest.mark.directpath

N = 30_000
COLUMNS = "(id int, grp int, payload text, ts timestamptz, f float8)"


def rows_select(first, last):
    return (f"SELECT a, a % 4, md5(a::text) || E'\\t\\\\x\\n' || a, "
            f"timestamptz '2024-01-01 00:00+00' + a * interval '1 minute', a / 7.0 "
            f"FROM generate_series({first}, {last}) a")


class Shards:
    """A local server and three shard servers (shard1, shard2 with directpath,
    plain without), one foreign partition on each shard: grp 1, 2, 3; grp 0
    is a local partition."""

    def __init__(self, make_cluster, prepared=0):
        # 'prepared': max_prepared_transactions of shard1 and shard2
        conf = {"log_statement": "all", "max_prepared_transactions": str(prepared)}
        self.remotes = {
            1: make_cluster(name="shard1", extra_conf=conf),
            2: make_cluster(name="shard2", extra_conf=conf),
            3: make_cluster(name="plain", extensions=False,
                            extra_conf={"log_statement": "all",
                                        "shared_preload_libraries": ""}),
        }
        self.local = make_cluster(name="local")
        for g, r in self.remotes.items():
            with r.conn() as c:
                # shard 3's f is numeric: another type, so its COPY is text
                c.execute(f"CREATE TABLE data_{g} "
                          f"{COLUMNS if g != 3 else COLUMNS.replace('f float8', 'f numeric')}")
        with self.local.conn() as c:
            c.execute("CREATE EXTENSION postgres_fdw")
            for g, r in self.remotes.items():
                c.execute(f"CREATE SERVER s{g} FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
                          f"(host '{r.sockdir}', port '{r.port}', dbname 'postgres', "
                          f"batch_size '1000')")
                c.execute(f"CREATE USER MAPPING FOR CURRENT_USER SERVER s{g} "
                          f"OPTIONS (user 'postgres')")
            c.execute(f"CREATE TABLE sh {COLUMNS} PARTITION BY LIST (grp)")
            c.execute("CREATE TABLE sh_0 PARTITION OF sh FOR VALUES IN (0)")
            for g in self.remotes:
                c.execute(f"CREATE FOREIGN TABLE sh_{g} PARTITION OF sh FOR VALUES IN ({g}) "
                          f"SERVER s{g} OPTIONS (table_name 'data_{g}')")
            c.execute(f"CREATE TABLE ref {COLUMNS}")

    def remote_count(self, g):
        with self.remotes[g].conn() as c:
            return c.execute(f"SELECT count(*) FROM data_{g}").fetchone()[0]

    def copies_logged(self, g, offset):
        return len(re.findall(r"statement: /\*\+ APPEND \*/ COPY public\.data_\w+",
                              self.remotes[g].log(offset)))

    def inserts_logged(self, g, offset):
        return len(re.findall(r"INSERT INTO public\.data_\w+", self.remotes[g].log(offset)))

    def offsets(self):
        return {g: r.log_size() for g, r in self.remotes.items()}


@pytest.fixture
def shards(make_cluster):
    return Shards(make_cluster)


def copy_in(conn, table, rows, options=""):
    """/*+ APPEND */ COPY table FROM STDIN [options], the rows by psycopg."""
    with conn.cursor() as cur:
        with cur.copy(f"/*+ APPEND */ COPY {table} FROM STDIN {options}") as cp:
            for r in rows:
                cp.write_row(r)


DIGEST_SETTINGS = {"TimeZone": "UTC", "DateStyle": "ISO", "extra_float_digits": "1"}


def check_same_as_plain(s, conn):
    """Every partition (local and remote) holds exactly the reference rows
    (digests taken under the same output settings on every server)."""
    set_gucs(conn, DIGEST_SETTINGS)
    for g in (0, 1, 2, 3):
        assert table_digest(conn, f"sh_{g}") == table_digest(
            conn, f"(SELECT * FROM ref WHERE grp = {g})"), g
    for g in (1, 2, 3):
        with s.remotes[g].conn() as rc:
            set_gucs(rc, DIGEST_SETTINGS)
            assert table_digest(rc, f"data_{g}") == table_digest(
                conn, f"(SELECT * FROM ref WHERE grp = {g})"), g


def test_insert_select_streams_every_shard(shards):
    s = shards
    off = s.offsets()
    with s.local.conn() as conn:
        # the session's output settings must not reach the remote text
        set_gucs(conn, {"DateStyle": "SQL, DMY", "extra_float_digits": "-3",
                        "TimeZone": "Asia/Kolkata", "IntervalStyle": "sql_standard"})
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, N)}")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        assert st["foreign_partitions"] is not None
        for g in (1, 2):
            assert f"sh_{g}: COPY binary" in st["foreign_partitions"], st
        assert "sh_3: COPY text" in st["foreign_partitions"], st
        conn.execute(f"INSERT INTO ref {rows_select(1, N)}")
        check_same_as_plain(s, conn)
        verify_table(conn, "sh_0")
        assert conn.execute("SELECT count(*) FROM sh").fetchone()[0] == N
    for g in (1, 2, 3):
        assert s.copies_logged(g, off[g]) == 1, g
        assert s.inserts_logged(g, off[g]) == 0, g


def test_copy_from_stdin_streams(shards):
    s = shards
    with s.local.conn() as conn:
        conn.execute(f"INSERT INTO ref {rows_select(1, N)}")
        rows = conn.execute("SELECT * FROM ref ORDER BY id").fetchall()
        copy_in(conn, "sh", rows)
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        assert "sh_1: COPY" in st["foreign_partitions"], st
        check_same_as_plain(s, conn)


def test_new_remote_storage_is_frozen(shards):
    """TRUNCATE through the wrapper gives the shard new storage in the remote
    transaction: a shard with directpath writes it frozen."""
    s = shards
    with s.remotes[1].conn() as rc:
        rc.execute("CREATE EXTENSION IF NOT EXISTS pg_visibility")
    with s.local.conn() as conn:
        conn.execute(f"INSERT INTO sh {rows_select(1, 100)}")
        conn.execute("BEGIN")
        conn.execute("TRUNCATE sh")
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, N)}")
        conn.execute("COMMIT")
    with s.remotes[1].conn() as rc:
        pages, frozen = rc.execute(
            "SELECT count(*), count(*) FILTER (WHERE all_frozen) "
            "FROM pg_visibility_map('data_1')").fetchone()
        assert pages > 0 and frozen == pages, (pages, frozen)
    assert s.remote_count(3) == N // 4


def test_remote_error_fails_statement_and_leaves_nothing(shards):
    s = shards
    with s.remotes[2].conn() as rc:
        rc.execute("ALTER TABLE data_2 ADD CONSTRAINT no_big CHECK (id < 20000)")
    with s.local.conn() as conn:
        with pytest.raises(Exception) as e:
            conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, N)}")
        assert getattr(e.value, "sqlstate", None) == "23514", e.value
        msg = str(e.value)
        assert "no_big" in msg and "foreign partition \"sh_2\"" in msg, msg
        for g in (0, 1, 2, 3):
            assert conn.execute(f"SELECT count(*) FROM sh_{g}").fetchone()[0] == 0, g
        # the same session's connections still work: a query and a load
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, 1000)}")
        assert conn.execute("SELECT count(*) FROM sh").fetchone()[0] == 1000
    for g in (1, 2, 3):
        assert s.remote_count(g) == 250, g


def test_savepoint_rollback_keeps_earlier_rows(shards):
    s = shards
    with s.local.conn() as conn:
        conn.execute("BEGIN")
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, 4000)}")
        conn.execute("SAVEPOINT a")
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(4001, 8000)}")
        conn.execute("ROLLBACK TO SAVEPOINT a")
        conn.execute("SAVEPOINT b")
        # a local error mid-stream: the shards' COPYs are abandoned
        with pytest.raises(Exception) as e:
            conn.execute(f"/*+ APPEND */ INSERT INTO sh SELECT * FROM ({rows_select(8001, 20000)}) x "
                         "UNION ALL SELECT 1 / 0, 0, '', now(), 0")
        assert getattr(e.value, "sqlstate", None) == "22012", e.value
        conn.execute("ROLLBACK TO SAVEPOINT b")
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(20001, 24000)}")
        conn.execute("COMMIT")
        conn.execute(f"INSERT INTO ref {rows_select(1, 4000)}")
        conn.execute(f"INSERT INTO ref {rows_select(20001, 24000)}")
        check_same_as_plain(s, conn)


def test_cancel_reaches_a_blocked_shard(shards):
    """A shard that stops reading (its table locked by another session) does
    not hang the load: statement_timeout cancels it, the shard's COPY ends,
    the lock holder sees nothing, and the next load works."""
    s = shards
    hold = s.remotes[1].conn(autocommit=False)
    hold.execute("LOCK TABLE data_1 IN ACCESS EXCLUSIVE MODE")
    try:
        with s.local.conn() as conn:
            set_gucs(conn, {"statement_timeout": "3s"})
            t0 = time.monotonic()
            with pytest.raises(Exception) as e:
                conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, N)}")
            assert getattr(e.value, "sqlstate", None) == "57014", e.value
            assert time.monotonic() - t0 < 60
            hold.rollback()
            set_gucs(conn, {"statement_timeout": "0"})
            conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, N)}")
            assert conn.execute("SELECT count(*) FROM sh").fetchone()[0] == N
    finally:
        hold.close()
    assert s.remote_count(1) == N // 4


def test_shard_dies_mid_load(shards):
    """A shard backend terminated mid-stream fails the statement; the other
    shards and the local partition keep nothing."""
    s = shards
    with s.remotes[2].conn() as rc:
        rc.execute("CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
                   "$$ BEGIN IF NEW.id = 2 THEN PERFORM pg_sleep(3); END IF; RETURN NEW; END $$")
        rc.execute("CREATE TRIGGER slow BEFORE INSERT ON data_2 FOR EACH ROW EXECUTE FUNCTION slow()")

    def kill_later():
        time.sleep(1.5)
        with s.remotes[2].conn() as rc:
            rc.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE query LIKE '%COPY public.data_2%' AND pid <> pg_backend_pid()")

    killer = threading.Thread(target=kill_later)
    killer.start()
    with s.local.conn() as conn:
        with pytest.raises(Exception) as e:
            conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, N)}")
        killer.join()
        assert getattr(e.value, "sqlstate", None) in ("08006", "08000", "57P01"), e.value
    with s.local.conn() as conn:
        assert conn.execute("SELECT count(*) FROM sh_0").fetchone()[0] == 0
    for g in (1, 3):
        assert s.remote_count(g) == 0, g


@pytest.mark.parametrize("case", ["returning", "setting_off", "on_conflict", "reads_same_server",
                                  "remote_view"])
def test_batched_path_kept_with_reason(shards, case):
    s = shards
    off = s.offsets()
    stmt = f"/*+ APPEND */ INSERT INTO sh {rows_select(1, 8000)}"
    want = {"returning": "needs each row back",
            "setting_off": "directpath.foreign_copy is off",
            "on_conflict": "ON CONFLICT",
            "reads_same_server": "reads \"src_1\" through the same server",
            "remote_view": "the remote object public.data_1 is not a table"}[case]
    with s.local.conn() as conn:
        if case == "returning":
            stmt += " RETURNING id"
        elif case == "setting_off":
            set_gucs(conn, {"directpath.foreign_copy": "off"})
        elif case == "on_conflict":
            stmt += " ON CONFLICT DO NOTHING"
        elif case == "remote_view":
            with s.remotes[1].conn() as rc:
                rc.execute("ALTER TABLE data_1 RENAME TO data_1_t")
                rc.execute("CREATE VIEW data_1 AS SELECT * FROM data_1_t")
        else:
            with s.remotes[1].conn() as rc:
                rc.execute("CREATE TABLE src AS SELECT * FROM generate_series(1, 10) g")
            conn.execute("CREATE FOREIGN TABLE src_1 (g int) SERVER s1 OPTIONS (table_name 'src')")
            stmt = (f"/*+ APPEND */ INSERT INTO sh SELECT * FROM ({rows_select(1, 8000)}) x "
                    "WHERE x.a > (SELECT count(*) - 10 FROM src_1)")
        conn.execute(stmt)
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert "sh_1: batched" in st["foreign_partitions"] and want in st["foreign_partitions"], st
        conn.execute(f"INSERT INTO ref {rows_select(1, 8000)}")
        check_same_as_plain(s, conn)
    assert s.copies_logged(1, off[1]) == 0
    assert s.inserts_logged(1, off[1]) > 0


def test_explain_analyze_names_the_paths(shards):
    with shards.local.conn() as conn:
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN (ANALYZE, COSTS OFF) /*+ APPEND */ INSERT INTO sh {rows_select(1, 4000)}"))
        assert "Foreign Partitions:" in plan and "sh_1: COPY" in plan, plan


@pytest.mark.parametrize("variant", ["both_copy", "one_has_rules"])
def test_partitions_sharing_a_server(shards, variant):
    """Two partitions on one server share postgres_fdw's connection, which
    carries one COPY at a time: they take turns (each COPY logged), and
    every row arrives once.  A remote table with rules (which COPY would not
    apply) keeps the wrapper's INSERTs, on the same connection, between the
    other partition's COPYs."""
    s = shards
    n = 100_000
    with s.remotes[1].conn() as rc:
        rc.execute(f"CREATE TABLE data_a {COLUMNS}")
        rc.execute(f"CREATE TABLE data_b {COLUMNS}")
        if variant == "one_has_rules":
            rc.execute("CREATE TABLE ruled (id int)")
            rc.execute("CREATE RULE also_log AS ON INSERT TO data_b DO ALSO "
                       "INSERT INTO ruled VALUES (NEW.id)")
    off = s.offsets()
    with s.local.conn() as conn:
        conn.execute(f"CREATE TABLE hs {COLUMNS} PARTITION BY HASH (id)")
        conn.execute("CREATE TABLE hs_0 PARTITION OF hs FOR VALUES WITH (MODULUS 4, REMAINDER 0)")
        for r, (srv, t) in enumerate((("s1", "data_a"), ("s1", "data_b"), ("s2", "data_2")), 1):
            conn.execute(f"CREATE FOREIGN TABLE hs_{r} PARTITION OF hs FOR VALUES WITH "
                         f"(MODULUS 4, REMAINDER {r}) SERVER {srv} OPTIONS (table_name '{t}')")
        conn.execute(f"/*+ APPEND */ INSERT INTO hs {rows_select(1, n)}")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == n, st
        if variant == "both_copy":
            assert st["foreign_partitions"].count(": COPY") == 3, st
        else:
            assert st["foreign_partitions"].count(": COPY") == 2, st
            assert "hs_2: batched (the remote table public.data_b has rules" in \
                st["foreign_partitions"], st
        conn.execute(f"INSERT INTO ref {rows_select(1, n)}")
        set_gucs(conn, DIGEST_SETTINGS)
        assert table_digest(conn, "hs") == table_digest(conn, "ref")
        for p in range(4):
            assert table_digest(conn, f"hs_{p}") == table_digest(
                conn, f"(SELECT r.* FROM ref r WHERE satisfies_hash_partition("
                      f"'hs'::regclass, 4, {p}, r.id))"), p
    # data_a and data_b took turns on shard1's one connection
    assert s.copies_logged(1, off[1]) > 2
    assert s.copies_logged(2, off[2]) == 1
    if variant == "both_copy":
        assert s.inserts_logged(1, off[1]) == 0
    else:
        assert s.inserts_logged(1, off[1]) > 0
        with s.remotes[1].conn() as rc:
            # the rule ran for every row, as with the plain INSERT
            assert rc.execute("SELECT count(*) FROM ruled").fetchone()[0] == \
                rc.execute("SELECT count(*) FROM data_b").fetchone()[0] > 0


def test_standby_of_a_shard_replays_the_stream(shards, tmp_path):
    """A shard's streaming standby replays what the remote direct COPY wrote
    (into storage new in the remote transaction: frozen pages too)."""
    s = shards
    standby = s.remotes[1].make_standby(tmp_path)
    with s.local.conn() as conn:
        conn.execute("BEGIN")
        conn.execute("TRUNCATE sh")
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {rows_select(1, N)}")
        conn.execute("COMMIT")
        conn.execute(f"INSERT INTO ref {rows_select(1, N)}")
        set_gucs(conn, DIGEST_SETTINGS)
        want = table_digest(conn, "(SELECT * FROM ref WHERE grp = 1)")
    s.remotes[1].wait_replay(standby)
    with standby.conn() as sc:
        set_gucs(sc, DIGEST_SETTINGS)
        assert table_digest(sc, "data_1") == want
        assert sc.execute("SELECT count(*) FROM data_1 WHERE id % 4 <> 1").fetchone()[0] == 0


WIDE = ("(id int, b bool, s smallint, l bigint, f4 real, f8 float8, n numeric(12,3), "
        "t text, vc varchar(10), c char(5), d date, tm time, ts timestamp, tz timestamptz, "
        "u uuid, by bytea, j jsonb, iv interval, arr int[])")


def wide_select(n):
    nul = "CASE WHEN g % 7 = 0 THEN NULL ELSE {} END"
    cols = ["g % 2 = 0", "(g % 30000)::smallint", "g::bigint * 1000003",
            "(g / 3.0)::real", "g / 7.0 * 1e-3", "(g * 1.0005)::numeric(12,3)",
            "E'a\\tb\\\\c\\nd\\r' || g", "('v' || g)::varchar(10)", "('c' || g % 100)::char(5)",
            "date '2000-02-29' + g", "time '00:00:01' + g * interval '1 s'",
            "timestamp '1999-12-31 23:59:59.5' + g * interval '1 min'",
            "timestamptz '2024-03-10 01:30+00' + g * interval '17 min'",
            "md5(g::text)::uuid", "decode(md5(g::text), 'hex')",
            "jsonb_build_object('k', g, 's', 'x' || g)", "g * interval '1 day 3 min'",
            "ARRAY[g, -g, NULL]"]
    return "SELECT g, " + ", ".join(nul.format(c) for c in cols) + \
        f" FROM generate_series(1, {n}) g"


@pytest.mark.parametrize("fmt", ["binary", "text"])
def test_every_type_arrives_as_with_plain(shards, fmt):
    """Values of many types, NULLs and COPY's special characters arrive as
    a plain load writes them, in binary (same types remotely) and in text
    (a remote column of another type: the session's DateStyle and
    extra_float_digits must not reach the remote text)."""
    s = shards
    remote_cols = WIDE if fmt == "binary" else WIDE.replace("s smallint", "s int")
    with s.remotes[1].conn() as rc:
        rc.execute(f"CREATE TABLE wide_r {remote_cols}")
    with s.local.conn() as conn:
        set_gucs(conn, {"DateStyle": "SQL, DMY", "extra_float_digits": "-3",
                        "TimeZone": "America/Sao_Paulo", "IntervalStyle": "iso_8601",
                        "bytea_output": "escape"})
        conn.execute(f"CREATE TABLE wide {WIDE} PARTITION BY RANGE (id)")
        conn.execute("CREATE FOREIGN TABLE wide_f PARTITION OF wide FOR VALUES FROM (1) TO (100000) "
                     "SERVER s1 OPTIONS (table_name 'wide_r')")
        conn.execute(f"CREATE TABLE wide_ref {WIDE}")
        conn.execute(f"/*+ APPEND */ INSERT INTO wide {wide_select(5000)}")
        st = last_statement(conn)
        assert st["rows_inserted"] == 5000, st
        assert f"wide_f: COPY {fmt}" in st["foreign_partitions"], st
        conn.execute(f"INSERT INTO wide_ref {wide_select(5000)}")
        settings = dict(DIGEST_SETTINGS, IntervalStyle="postgres", bytea_output="hex")
        set_gucs(conn, settings)
        want = table_digest(conn, "wide_ref")
        assert table_digest(conn, "wide") == want
    with s.remotes[1].conn() as rc:
        set_gucs(rc, settings)
        assert table_digest(rc, "wide_r") == want


@pytest.mark.parametrize("fmt", ["binary", "text"])
def test_remote_error_names_the_input_line(shards, fmt):
    """A row a shard refuses during a COPY is named by its input line (the
    remote names its position in what that shard received)."""
    s = shards
    g = 1 if fmt == "binary" else 3      # shard 3's COPY is text
    bad = 20_001 + (g - 20_001) % 4       # the first id >= 20001 routed to shard g
    with s.remotes[g].conn() as rc:
        rc.execute(f"ALTER TABLE data_{g} ADD CONSTRAINT small CHECK (id <> {bad})")
    with s.local.conn() as conn:
        conn.execute(f"INSERT INTO ref {rows_select(1, N)}")
        rows = conn.execute("SELECT * FROM ref ORDER BY id").fetchall()
        with pytest.raises(Exception) as e:
            copy_in(conn, "sh", rows)
        msg = str(e.value.diag.context or "")
        assert getattr(e.value, "sqlstate", None) == "23514", e.value
        assert f"the row of input line {bad}" in msg, msg
        assert f"COPY data_{g}, line {(bad - g) // 4 + 1}" in msg, msg


@pytest.mark.parametrize("how", ["insert", "copy"])
def test_foreign_table_targeted_directly(shards, how):
    """A postgres_fdw table targeted itself (not through a parent) gets its
    rows as a COPY stream too, under core's RowExclusive lock only."""
    s = shards
    with s.local.conn() as conn:
        conn.execute(f"CREATE FOREIGN TABLE ft1 {COLUMNS} SERVER s1 OPTIONS (table_name 'data_1')")
        conn.execute(f"INSERT INTO ref {rows_select(1, N)}")
        conn.execute("BEGIN")
        if how == "insert":
            conn.execute(f"/*+ APPEND */ INSERT INTO ft1 SELECT * FROM ref")
        else:
            copy_in(conn, "ft1", conn.execute("SELECT * FROM ref").fetchall())
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        assert st["foreign_partitions"] == "ft1: COPY binary", st
        modes = [r[0] for r in conn.execute(
            "SELECT mode FROM pg_locks WHERE relation = 'ft1'::regclass "
            "AND pid = pg_backend_pid()").fetchall()]
        assert "ShareRowExclusiveLock" not in modes and "RowExclusiveLock" in modes, modes
        conn.execute("COMMIT")
        set_gucs(conn, DIGEST_SETTINGS)
        assert table_digest(conn, "ft1") == table_digest(conn, "ref")
        # COPY FREEZE stays core's error
        with pytest.raises(Exception) as e:
            copy_in(conn, "ft1", [(1, 1, "x", None, 1.0)], "WITH (FREEZE)")
        assert "COPY FREEZE on a foreign table" in str(e.value), e.value
