"""RETURNING under PARALLEL(n): `/*+ APPEND PARALLEL(n) */ INSERT ...
SELECT ... RETURNING` whose SELECT is a scan of heap tables, into a plain
table.  The leader projects each row's RETURNING row as it takes the row's
page (load/queue.c), in the order the pages reach it, which is the scan's
(parorder.c); a row that needs TOAST is handed on after the page holding
the rows before it (placer.c, toast_in_order), so the rows come back in
the scan's order, as the plain statement returns them.

Each case runs the plain statement and the parallel one on tables made
alike and compares the RETURNING rows in their order (one width and
several, rows that need TOAST among them, a WHERE clause, two sources
appended, ON CONFLICT DO NOTHING with one arbiter), that the parallel one
launched workers, the tables' contents, and amcheck.  Under DO UPDATE the
inserted rows come back in the plain statement's order, the updated ones
after them (as serially).  What stays serial says why: a partitioned
target, ON CONFLICT with two arbiter indexes, a SELECT that joins, a
RETURNING list that calls a function that is not parallel safe; its rows
are the plain statement's.  A row that fails a CHECK constraint fails the
parallel statement with plain's error, and nothing of it stays.
"""

import pytest

from conftest import error_of, last_statement, renamed, set_gucs, table_digest, verify_table

pytestmark = pytest.mark.directpath

ROWS = 120_000
COLS = "(id int NOT NULL, v text, k int CHECK (k >= 0))"
SET = {"directpath.min_bytes": "0", "synchronize_seqscans": "off"}


def make_sources(conn):
    """pr_src: ids in a scattered order, one row in 4,000 wide enough to
    need TOAST (3.2 kB of md5s); pr_src2: more rows of one width."""
    if conn.execute("SELECT to_regclass('pr_src')").fetchone()[0] is not None:
        return
    conn.execute(f"CREATE TABLE pr_src {COLS}")
    conn.execute("INSERT INTO pr_src SELECT (g * 7919) % 1000003, "
                 "CASE WHEN g % 4000 = 17 THEN (SELECT string_agg(md5((g * 100 + i)::text), '') "
                 "FROM generate_series(1, 100) i) ELSE md5(g::text) || repeat('y', g % 30) END, "
                 f"g % 7 FROM generate_series(1, {ROWS}) g")
    conn.execute(f"CREATE TABLE pr_src2 {COLS}")
    conn.execute("INSERT INTO pr_src2 SELECT 2000000 + g, md5(g::text), g % 5 "
                 "FROM generate_series(1, 40000) g")
    conn.execute("VACUUM ANALYZE pr_src")
    conn.execute("VACUUM ANALYZE pr_src2")


def make_target(conn, t, extra=""):
    conn.execute(f"DROP TABLE IF EXISTS {t}")
    conn.execute(f"CREATE TABLE {t} {COLS}")
    for stmt in extra.split(";") if extra else ():
        conn.execute(stmt.format(t=t))


def returned(conn, sql):
    return conn.execute(sql).fetchall()


def both(conn, select, returning, n, workers=1, extra="", tail=""):
    """The plain and the parallel statement on targets made alike: their
    RETURNING rows, and the parallel one's report."""
    tp, td = f"pr_p{n}", f"pr_d{n}"
    out = {}
    for t, hint in ((tp, ""), (td, f"/*+ APPEND PARALLEL({workers}) */ ")):
        make_target(conn, t, extra)
        out[t] = returned(conn, f"{hint}INSERT INTO {t} AS t {select} {tail} "
                                f"RETURNING {returning}")
    st = last_statement(conn)
    return out[tp], out[td], st, tp, td


CASES = {
    "every column": ("SELECT * FROM pr_src", "*"),
    "expressions": ("SELECT id, v, k FROM pr_src WHERE k <> 3",
                    "id, length(v), k * 2, v LIKE '%y' AS tail"),
    "two sources": ("SELECT * FROM pr_src UNION ALL SELECT * FROM pr_src2", "id, k"),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_returning_in_scan_order(cluster, case, workers):
    n = list(CASES).index(case) * 10 + workers
    with cluster.conn() as conn:
        set_gucs(conn, SET)
        make_sources(conn)
        select, returning = CASES[case]
        plain, par, st, tp, td = both(conn, select, returning, n, workers)
        assert st["path"] == "direct" and st["parallel_workers"] >= 1, st
        assert len(par) == len(plain) > 100_000
        assert par == plain
        assert table_digest(conn, td) == table_digest(conn, tp)
        verify_table(conn, td)


def test_returning_ctid_names_each_row(cluster):
    """RETURNING ctid gives each row's final place."""
    with cluster.conn() as conn:
        set_gucs(conn, SET)
        make_sources(conn)
        make_target(conn, "pr_ctid")
        got = returned(conn, "/*+ APPEND PARALLEL(2) */ INSERT INTO pr_ctid "
                             "SELECT * FROM pr_src RETURNING ctid::text, id")
        assert last_statement(conn)["parallel_workers"] >= 1
        table = dict(conn.execute("SELECT ctid::text, id FROM pr_ctid").fetchall())
        assert len(got) == len(table) == ROWS
        assert all(table[c] == i for c, i in got)


@pytest.mark.parametrize("workers", [1, 2])
def test_returning_on_conflict(cluster, workers):
    """DO NOTHING: the inserted rows in the scan's order.  DO UPDATE: the
    inserted rows in the scan's order, then the updated ones."""
    old = "INSERT INTO {t} SELECT id, 'old', k FROM pr_src WHERE id % 3 = 0; " \
          "ALTER TABLE {t} ADD PRIMARY KEY (id)"
    with cluster.conn() as conn:
        set_gucs(conn, SET)
        make_sources(conn)
        n_old = conn.execute("SELECT count(*) FROM pr_src WHERE id % 3 = 0").fetchone()[0]
        plain, par, st, tp, td = both(conn, "SELECT * FROM pr_src", "id, k", 40 + workers,
                                      workers, old, "ON CONFLICT (id) DO NOTHING")
        assert st["parallel_workers"] >= 1, st
        assert len(plain) == ROWS - n_old
        assert par == plain
        assert table_digest(conn, td) == table_digest(conn, tp)

        plain, par, st, tp, td = both(conn, "SELECT * FROM pr_src", "id, k, v",
                                      50 + workers, workers, old,
                                      "ON CONFLICT (id) DO UPDATE SET v = excluded.v || '!'")
        assert st["parallel_workers"] >= 1, st
        assert sorted(par) == sorted(plain) and len(par) == ROWS
        inserted = [r for r in plain if r[0] % 3 != 0]
        assert par[:len(inserted)] == inserted
        assert table_digest(conn, td) == table_digest(conn, tp)
        verify_table(conn, td)


REFUSED = {
    "partitioned": ("SELECT * FROM pr_src", "id",
                    "DROP TABLE {t}; CREATE TABLE {t} (id int NOT NULL, v text, k int) "
                    "PARTITION BY HASH (id); CREATE TABLE {t}_0 PARTITION OF {t} "
                    "FOR VALUES WITH (MODULUS 2, REMAINDER 0); CREATE TABLE {t}_1 PARTITION OF {t} "
                    "FOR VALUES WITH (MODULUS 2, REMAINDER 1)", "",
                    "its RETURNING needs the rows in the input's order"),
    "two arbiters": ("SELECT * FROM pr_src", "id",
                     "CREATE UNIQUE INDEX ON {t} (id); CREATE UNIQUE INDEX ON {t} (k, id)",
                     "ON CONFLICT DO NOTHING",
                     "ON CONFLICT with more than one arbiter index"),
    "join": ("SELECT s.* FROM pr_src s JOIN pr_src2 d ON d.k = s.k AND d.id = 2000001", "id",
             "", "", "its SELECT is not a scan of tables"),
    "volatile": ("SELECT * FROM pr_src", "id, nextval('pr_seq')", "", "",
                 "not parallel safe"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_says_why(cluster, case):
    select, returning, extra, tail, why = REFUSED[case]
    n = 60 + list(REFUSED).index(case)
    with cluster.conn() as conn:
        set_gucs(conn, SET)
        make_sources(conn)
        conn.execute("DROP SEQUENCE IF EXISTS pr_seq")
        conn.execute("CREATE SEQUENCE pr_seq")
        plain, par, st, tp, td = both(conn, select, returning, n, 2, extra, tail)
        assert st["path"] == "direct" and st["parallel_workers"] == 0, st
        assert why in st["parallel"], st
        if case == "volatile":
            # each statement took its own values of the sequence
            assert [r[0] for r in par] == [r[0] for r in plain]
        else:
            assert par == plain
        assert table_digest(conn, td) == table_digest(conn, tp)


def test_error_leaves_nothing(cluster):
    """A late row that fails the CHECK: plain's error, no row left."""
    with cluster.conn() as conn:
        set_gucs(conn, SET)
        make_sources(conn)
        sql = ("INSERT INTO {t} SELECT id, v, CASE WHEN id = 7919 * 119000 % 1000003 "
               "THEN -1 ELSE k END FROM pr_src RETURNING id")
        errs = {}
        for t, hint in (("pr_ep", ""), ("pr_ed", "/*+ APPEND PARALLEL(2) */ ")):
            make_target(conn, t)
            errs[t] = error_of(conn, hint + sql.format(t=t))
            assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0
        assert errs["pr_ep"] is not None and errs["pr_ed"] is not None, errs
        assert renamed(errs["pr_ed"], "pr_ed", "pr_ep")[:3] == errs["pr_ep"][:3], errs
