"""The arrays of a load's integer sorts (common/radix.c).

An index's sort words (keysort.c), a foreign key set's integer keys
(fkset.c) and the radix sort's second array are, from 1 MB, mappings of
their own, grown by mremap and unmapped when freed or when their memory
context goes (an error, the end of the statement); smaller ones are
palloc's.  Against the plain statement, serial and PARALLEL(1), with the
default maintenance_work_mem (the arrays grow from palloc's to mappings
and on) and with 1 MB (the entries spill into sorted runs): the same rows,
every btree checked by amcheck with heapallindexed.  After loads that
fill such arrays, and after loads that fail once they are full (a
duplicate found by the end's build, a foreign key violated, a cancel), the
backend holds no more private mappings, nor memory resident in those of 1
MB or more, than after the first of them: a leaked array of one load is
tens of megabytes.
"""

import psycopg
import pytest

from conftest import error_of, last_statement, renamed, set_gucs, table_digest, verify_table

pytestmark = pytest.mark.directpath

SET = {"directpath.min_bytes": "0"}
ROWS = 300000


def make_tables(conn, names):
    conn.execute("CREATE TABLE IF NOT EXISTS sa_parent (id int PRIMARY KEY)")
    conn.execute("INSERT INTO sa_parent SELECT generate_series(1, 5000) ON CONFLICT DO NOTHING")
    for t in names:
        conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, grp int NOT NULL "
                     f"REFERENCES sa_parent, at timestamptz, note text)")
        conn.execute(f"CREATE INDEX {t}_grp_at ON {t} (grp, at)")


def rows_sql(bad=None):
    """ROWS rows, ids scattered; bad = 'dup' repeats the first id at the
    end, 'fkey' names a missing parent at the end."""
    grp = "(g * 31) % 5000 + 1"
    if bad == "fkey":
        grp = f"CASE WHEN g = {ROWS} THEN 999999 ELSE {grp} END"
    ident = "(g::bigint * 7919) % 1000003"
    if bad == "dup":
        ident = f"CASE WHEN g = {ROWS} THEN 7919 ELSE {ident} END"
    return (f"SELECT {ident}, {grp}, timestamptz '2026-01-01' + g * interval '1 minute', "
            f"'n' || (g % 100) FROM generate_series(1, {ROWS}) g")


def backend_memory(conn):
    """(kB resident in the backend's private anonymous mappings of 1 MB or
    more, other than the malloc heap; its number of mappings).  A sort
    array of a load is such a mapping; the heap, whose top malloc may keep
    after a statement, and the shared buffers the backend touched are not
    counted."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    big = maps = 0
    size = 0
    anonymous = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                maps += 1
                anonymous = len(fields) == 5 and fields[1].endswith("p")
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                size = (hi - lo) // 1024
            elif fields[0] == "Rss:" and anonymous and size >= 1024:
                big += int(fields[1])
    return big, maps


@pytest.mark.parametrize("memory", ["default", "1MB"])
@pytest.mark.parametrize("workers", [0, 1])
def test_loads_like_plain(cluster, tmp_path, memory, workers):
    n = 2 * (memory == "1MB") + workers
    tp, td = f"sa_plain{n}", f"sa_direct{n}"
    path = tmp_path / "rows.csv"
    hint = f"/*+ APPEND PARALLEL({workers}) */" if workers else "/*+ APPEND */"
    with cluster.conn() as conn:
        make_tables(conn, (tp, td))
        set_gucs(conn, SET)
        if memory != "default":
            set_gucs(conn, {"maintenance_work_mem": memory})
        conn.execute(f"COPY ({rows_sql()}) TO '{path}' WITH (FORMAT csv)")
        conn.execute(f"COPY {tp} FROM '{path}' WITH (FORMAT csv)")
        conn.execute(f"{hint} COPY {td} FROM '{path}' WITH (FORMAT csv)")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert table_digest(conn, td) == table_digest(conn, tp)
        for t in (tp, td):
            got = conn.execute(f"SELECT count(*) FROM {t} WHERE grp = 17").fetchone()
            assert got[0] == ROWS // 5000 or got[0] == ROWS // 5000 + 1
        verify_table(conn, td)


@pytest.mark.parametrize("bad", [None, "dup", "fkey"])
def test_memory_returned_after_each_load(cluster, bad):
    t = f"sa_mem_{bad or 'ok'}"
    with cluster.conn() as conn:
        make_tables(conn, (f"{t}_plain", t))
        set_gucs(conn, SET)
        set_gucs(conn, {"maintenance_work_mem": "256MB"})
        if bad is not None:
            # plain's error once; each direct load below must raise it
            plain = error_of(conn, f"INSERT INTO {t}_plain {rows_sql(bad)}")
            assert plain is not None
        seen = []
        for i in range(4):
            conn.execute(f"TRUNCATE {t}")
            if bad is None:
                conn.execute(f"/*+ APPEND */ INSERT INTO {t} {rows_sql()}")
                assert last_statement(conn)["path"] == "direct"
            else:
                direct = renamed(error_of(conn, f"/*+ APPEND */ INSERT INTO {t} {rows_sql(bad)}"),
                                 t, f"{t}_plain")
                assert direct is not None, plain
                assert direct[:3] == plain[:3], (plain, direct)
                assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0
            seen.append(backend_memory(conn))
        big0, maps0 = seen[0]
        big, maps = seen[-1]
        # each load's arrays: 300,000 entries of 32 bytes in each of two
        # indexes, the key set, the sorts' second arrays: about 30 MB, so
        # three loads after the first would leave about 90 MB
        assert big - big0 < 10 * 1024, seen
        assert maps - maps0 < 4, seen


def test_memory_returned_after_cancel(cluster):
    with cluster.conn() as conn:
        make_tables(conn, ("sa_cancel",))
        set_gucs(conn, SET)
        set_gucs(conn, {"maintenance_work_mem": "256MB"})
        seen = []
        for i in range(3):
            # the timeout falls in the load, once arrays are being filled
            conn.execute("SET statement_timeout = '400ms'")
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute("/*+ APPEND */ INSERT INTO sa_cancel "
                             "SELECT s.id + 1000003 * k, s.grp, s.at, s.note "
                             f"FROM ({rows_sql()}) s (id, grp, at, note), "
                             "generate_series(0, 19) k")
            conn.execute("RESET statement_timeout")
            assert conn.execute("SELECT count(*) FROM sa_cancel").fetchone()[0] == 0
            seen.append(backend_memory(conn))
        assert seen[-1][0] - seen[0][0] < 10 * 1024, seen
        assert seen[-1][1] - seen[0][1] < 4, seen
