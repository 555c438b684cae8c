"""Parallel ON CONFLICT DO NOTHING: `/*+ APPEND PARALLEL(n) */ INSERT ...
SELECT ... ON CONFLICT DO NOTHING` from a heap table and `COPY ... WITH
(ON_CONFLICT 'nothing')` into a plain table.  The workers parse or scan
their share, probe the unique indexes and decide their own rows; the
leader drops the rows whose key another process inserted earlier in the
input.  What must come out is exactly the plain statement's result: a row
is inserted iff its key (in any arbiter index) is neither in the table nor
in a row inserted before it in the input's order (the file's lines for
COPY, the scanned blocks for INSERT ... SELECT), so of two rows with one
key the first is kept, and its other columns are the ones stored.

The input (pu_src, and the same rows as text and CSV files in line order)
has 400,000 lines whose key repeats about three times, 150,000 lines apart
(in other chunks, so in other processes), with every seventh line repeating
the line before's key (a duplicate inside a chunk or across a chunk's
edge); a second column with its own repeats and a third of NULLs; and a
payload that names the line, so that the row kept shows which line won.

Differential, per case: the table, the command's count, the NOTICE of
skipped rows and EXPLAIN ANALYZE's `Conflicting Tuples` against the plain
statement (and, for COPY, the serial direct one): core's INSERT ... ON CONFLICT
DO NOTHING, row by row (for COPY: from pu_src ORDER BY the line number,
the staging-table way), itself checked once against the result computed
in SQL (DISTINCT ON the key ordered by line, where one index arbitrates).
Targets: empty; a third of the keys there with other payloads; a named
constraint; two unique indexes; NULLs in a unique column (they never
conflict); storage created in the transaction.  After each parallel load
the heap and every btree pass amcheck (heapallindexed) and an index scan
finds what a sequential scan finds.  MERGE, a partitioned target and a
SELECT that is not a scan still run serially and say why, with the plain
statement's rows; a CHECK violated by a line in the middle fails the
parallel statement and leaves the table as it was.  (DO UPDATE in parallel:
test_parallel_do_update.py.)
"""

import re

import pytest

from conftest import (Background, crash_backend, error_of, fault_gucs, last_statement, set_gucs,
                      table_digest, verify_table, wait_fault_sleep)

pytestmark = pytest.mark.directpath

ROWS = 400_000
COLS = "k, n, u, v"
# line g: key g % 150000, but every seventh line repeats the key of the line
# before; u repeats every 130001 lines, NULL on every third line; v names g
SOURCE = ("SELECT CASE WHEN g % 7 = 0 THEN (g - 1) % 150000 ELSE g % 150000 END, g, "
          "CASE WHEN g % 3 = 0 THEN NULL ELSE g % 130001 END, md5(g::text) "
          f"FROM generate_series(1, {ROWS}) g")
# a third of the keys, with payloads no line has ('old', n negative)
OLD = "SELECT g AS k, -g AS n, g AS u, 'old' AS v FROM generate_series(0, 149999, 3) g"
OLD_ROWS = 50_000

ONE_KEY = "(k int PRIMARY KEY, n int NOT NULL, u int, v text)"
# kind: (columns, a third of the keys there first, arbiter named by its
# constraint, the expected table computed in SQL or None)
FIRST_K = "SELECT DISTINCT ON (k) {c} FROM pu_src {w} ORDER BY k, n"
TARGETS = {
    "empty": (ONE_KEY, False, False, FIRST_K.format(c=COLS, w="")),
    "a third of the keys there": (
        ONE_KEY, True, False,
        f"{OLD} UNION ALL ({FIRST_K.format(c=COLS, w='WHERE k % 3 <> 0')})"),
    "named constraint": (
        ONE_KEY, True, True,
        f"{OLD} UNION ALL ({FIRST_K.format(c=COLS, w='WHERE k % 3 <> 0')})"),
    # a row skipped for its u leaves its k free for a later row, and back
    "two unique indexes": ("(k int PRIMARY KEY, n int NOT NULL, u int UNIQUE, v text)",
                           True, False, None),
    "NULLs in a unique column": (
        "(k int, n int NOT NULL, u int UNIQUE, v text)", False, False,
        f"SELECT {COLS} FROM pu_src WHERE u IS NULL UNION ALL "
        f"(SELECT DISTINCT ON (u) {COLS} FROM pu_src WHERE u IS NOT NULL ORDER BY u, n)"),
    "partitioned": ("(k int PRIMARY KEY, n int NOT NULL, u int, v text) PARTITION BY HASH (k)",
                    True, False, None),
}
# a partitioned target stays serial: test_still_serial_says_why
COPY_KINDS = [k for k in TARGETS if k != "partitioned"]


def make_source(conn):
    """pu_src, stored in line order (n), and its files dp_pu.text and
    dp_pu.csv in the data directory; made once per cluster."""
    if conn.execute("SELECT to_regclass('pu_src')").fetchone()[0] is not None:
        return
    conn.execute("CREATE TABLE pu_src (k int, n int, u int, v text)")
    conn.execute(f"INSERT INTO pu_src {SOURCE}")
    # the heap in line order: the scan's order is the file's
    assert conn.execute("SELECT count(*) FROM (SELECT n, lag(n) OVER (ORDER BY ctid) AS b "
                        "FROM pu_src) s WHERE n < b").fetchone()[0] == 0
    for fmt in ("text", "csv"):
        conn.execute(f"COPY (SELECT {COLS} FROM pu_src ORDER BY n) TO PROGRAM "
                     f"'cat > dp_pu.{fmt}' WITH (FORMAT {fmt})")


def session(conn):
    """The test settings on 'conn'; returns the list its NOTICEs go to."""
    # the plain statement's scan must start at block 0, as the load's order
    set_gucs(conn, {"synchronize_seqscans": "off"})
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    return notices


def make_target(conn, t, kind):
    """Table 't' of 'kind' (TARGETS), with its old rows."""
    cols, old = TARGETS[kind][:2]
    conn.execute(f"DROP TABLE IF EXISTS {t}")
    conn.execute(f"CREATE TABLE {t} {cols}")
    if kind == "partitioned":
        for r in range(4):
            conn.execute(f"CREATE TABLE {t}_{r} PARTITION OF {t} "
                         f"FOR VALUES WITH (MODULUS 4, REMAINDER {r})")
    if old:
        conn.execute(f"INSERT INTO {t} {OLD}")


def on_conflict(kind, t):
    return (f"ON CONFLICT ON CONSTRAINT {t}_pkey DO NOTHING" if TARGETS[kind][2]
            else "ON CONFLICT DO NOTHING")


def copy_stmt(kind, t, fmt):
    opts = f"FORMAT {fmt}, ON_CONFLICT 'nothing'"
    if TARGETS[kind][2]:
        opts += f", ON_CONFLICT_CONSTRAINT '{t}_pkey'"
    return f"COPY {t} FROM 'dp_pu.{fmt}' WITH ({opts})"


def unique_columns(kind):
    cols = TARGETS[kind][0]
    return (["k"] if "PRIMARY KEY" in cols else []) + (["u"] if "UNIQUE" in cols else [])


def new_rows(conn, t):
    """Rows of 't' that came from the input (not the old ones)."""
    return conn.execute(f"SELECT count(*) FROM {t} WHERE v <> 'old'").fetchone()[0]


def oracle(conn, kind):
    """pu_o_<kind>: the plain statement's table, core inserting the input
    row by row in line order (the staging table pu_src, ORDER BY its line
    number); checked once against the SQL of TARGETS.  Made once."""
    t = f"pu_o_{list(TARGETS).index(kind)}"
    if conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0] is None:
        make_target(conn, t, kind)
        conn.execute(f"INSERT INTO {t} SELECT {COLS} FROM pu_src ORDER BY n "
                     f"{on_conflict(kind, t)}")
        expected = TARGETS[kind][3]
        if expected:
            assert table_digest(conn, t) == table_digest(conn, f"({expected})"), kind
    return t


def skipped(notices):
    """The counts of COPY's 'rows were skipped' NOTICEs."""
    return [int(m.group(1)) for m in
            (re.match(r"(\d+) rows were skipped: ", n) for n in notices) if m]


def scans_agree(conn, t, cols):
    """For each unique column: an index scan and a sequential scan find the
    same rows (count, hash of the whole rows: the index scan reads the heap)."""
    q = f"SELECT count(*), sum(hashtext(x::text)) FROM {t} x WHERE {{c}} >= 0"
    for c in cols:
        seen = {}
        for how, off in (("Index Scan", "enable_seqscan"), ("Seq Scan", "enable_indexscan")):
            conn.execute(f"SET {off} = off")
            conn.execute("SET enable_bitmapscan = off")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN (COSTS OFF) " + q.format(c=c)).fetchall())
            assert how in plan, plan
            seen[how] = conn.execute(q.format(c=c)).fetchone()
            conn.execute(f"RESET {off}")
            conn.execute("RESET enable_bitmapscan")
        assert seen["Index Scan"] == seen["Seq Scan"], (t, c, seen)
        assert seen["Seq Scan"][0] > 0


def check_loaded(conn, t, kind):
    verify_table(conn, t)
    scans_agree(conn, t, unique_columns(kind))


def first_wins(conn, t, col):
    """Rows of 't' from the input whose key an earlier line had: none, where
    'col' is the only arbiter."""
    return conn.execute(f"SELECT count(*) FROM {t} x JOIN pu_src s ON s.{col} = x.{col} "
                        f"AND s.n < x.n WHERE x.v <> 'old'").fetchone()[0]


def parallel_report(conn):
    st = last_statement(conn)
    assert st["path"] == "direct" and st["parallel_workers"] >= 1, st
    return st


# -- COPY ... WITH (ON_CONFLICT 'nothing') -----------------------------------

# (kind, fmt) -> (rows inserted, skipped NOTICE counts) of the serial load
SERIAL_COPY = {}


def serial_copy(conn, notices, kind, fmt):
    """pu_cs_<kind>_<fmt>: the serial direct COPY's table; made once."""
    t = f"pu_cs_{list(TARGETS).index(kind)}_{fmt}"
    if (kind, fmt) not in SERIAL_COPY:
        make_target(conn, t, kind)
        notices.clear()
        cur = conn.execute("/*+ APPEND */ " + copy_stmt(kind, t, fmt))
        st = last_statement(conn)
        assert st["path"] == "direct" and st["parallel_workers"] == 0, st
        SERIAL_COPY[kind, fmt] = (cur.rowcount, skipped(notices))
    return t, SERIAL_COPY[kind, fmt]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("fmt", ["text", "csv"])
@pytest.mark.parametrize("kind", COPY_KINDS)
def test_copy_on_conflict_nothing(cluster, kind, fmt, workers):
    """The parallel COPY keeps the rows, count and skipped-rows NOTICE of
    the serial direct COPY and of core's row-by-row INSERT in line order;
    of each key, the first line's row."""
    t = f"pu_cp_{list(TARGETS).index(kind)}_{fmt}_{workers}"
    with cluster.conn() as conn:
        notices = session(conn)
        make_source(conn)
        want = oracle(conn, kind)
        serial, (serial_rows, serial_skipped) = serial_copy(conn, notices, kind, fmt)
        make_target(conn, t, kind)
        notices.clear()
        cur = conn.execute(f"/*+ APPEND PARALLEL({workers}) */ " + copy_stmt(kind, t, fmt))
        st = parallel_report(conn)
        assert cur.rowcount == st["rows_inserted"] == serial_rows == new_rows(conn, want)
        assert 0 < cur.rowcount < ROWS
        assert skipped(notices) == serial_skipped == [ROWS - cur.rowcount], notices
        assert table_digest(conn, t) == table_digest(conn, serial) == table_digest(conn, want)
        cols = unique_columns(kind)
        if len(cols) == 1:
            assert first_wins(conn, t, cols[0]) == 0
        if kind == "NULLs in a unique column":
            assert conn.execute(f"SELECT count(*) FROM {t} WHERE u IS NULL").fetchone()[0] \
                == ROWS // 3
        check_loaded(conn, t, kind)


# -- INSERT ... SELECT ... ON CONFLICT DO NOTHING ----------------------------

# case: (target kind, the SELECT's WHERE clause, the ON CONFLICT clause)
INSERTS = {
    "no conflict target": ("a third of the keys there", "", None),
    "conflict target": ("a third of the keys there", "", "ON CONFLICT (k) DO NOTHING"),
    "on constraint": ("named constraint", "", None),
    "WHERE clause": ("a third of the keys there", "WHERE n % 5 <> 2 AND v NOT LIKE 'a%'", None),
    "NULLs in a unique column": ("NULLs in a unique column", "WHERE n % 11 <> 0", None),
    # a row skipped for its u frees its k for a later row (the leader
    # decides again the rows a process skipped for its own rows' keys)
    "two unique indexes": ("two unique indexes", "", None),
}


def insert_stmt(case, t):
    kind, w, tail = INSERTS[case]
    return f"INSERT INTO {t} SELECT {COLS} FROM pu_src {w} {tail or on_conflict(kind, t)}"


def both_ways(conn, case, tp, td, hint, run):
    """The plain statement of 'case' into 'tp' and the one with 'hint' into
    'td', each target made alike: what run(conn, sql) gives, by table."""
    session(conn)
    make_source(conn)
    got = {}
    for t, h in ((tp, ""), (td, hint)):
        make_target(conn, t, INSERTS[case][0])
        got[t] = run(conn, h + insert_stmt(case, t))
    return got


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", list(INSERTS))
def test_insert_select_on_conflict_nothing(cluster, case, workers):
    """Against the plain statement on a target made alike: the same rows
    (of each key, the one scanned first) and the same count."""
    kind = INSERTS[case][0]
    n = list(INSERTS).index(case)
    tp, td = f"pu_ip_{n}_{workers}", f"pu_id_{n}_{workers}"
    with cluster.conn() as conn:
        counts = both_ways(conn, case, tp, td, f"/*+ APPEND PARALLEL({workers}) */ ",
                           lambda c, sql: c.execute(sql).rowcount)
        st = parallel_report(conn)
        assert counts[td] == counts[tp] == st["rows_inserted"], counts
        assert 0 < counts[tp] < ROWS
        assert table_digest(conn, td) == table_digest(conn, tp)
        if case == "conflict target":
            assert first_wins(conn, td, "k") == 0
        check_loaded(conn, td, kind)


def explain_counts(conn, sql):
    """EXPLAIN ANALYZE's Tuples Inserted, Conflicting Tuples and Parallel
    Workers of 'sql' (which runs)."""
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql).fetchall())
    out = {}
    for name in ("Tuples Inserted", "Conflicting Tuples", "Parallel Workers"):
        m = re.search(rf"{name}: (\d+)", plan)
        out[name] = int(m.group(1)) if m else None
    return out, plan


@pytest.mark.parametrize("case", ["WHERE clause", "conflict target"])
def test_explain_analyze_counts_conflicts(cluster, case):
    """EXPLAIN ANALYZE of the parallel statement shows core's Tuples
    Inserted and Conflicting Tuples, the plain statement's numbers."""
    kind = INSERTS[case][0]
    n = list(INSERTS).index(case)
    tp, td = f"pu_xp_{n}", f"pu_xd_{n}"
    with cluster.conn() as conn:
        got = both_ways(conn, case, tp, td, "/*+ APPEND PARALLEL(2) */ ", explain_counts)
        (plain, plain_plan), (par, par_plan) = got[tp], got[td]
        assert plain["Conflicting Tuples"] is not None and plain["Conflicting Tuples"] > 0, \
            plain_plan
        assert par["Tuples Inserted"] == plain["Tuples Inserted"], par_plan
        assert par["Conflicting Tuples"] == plain["Conflicting Tuples"], par_plan
        assert par["Parallel Workers"] is not None and par["Parallel Workers"] >= 1, par_plan
        assert plain["Tuples Inserted"] + plain["Conflicting Tuples"] == \
            conn.execute(f"SELECT count(*) FROM pu_src {INSERTS[case][1]}").fetchone()[0]
        assert table_digest(conn, td) == table_digest(conn, tp)
        check_loaded(conn, td, kind)


# -- storage new in the transaction -------------------------------------------

@pytest.mark.parametrize("how", ["insert", "copy"])
def test_target_created_in_the_transaction(cluster, how):
    """BEGIN; CREATE TABLE; its old rows; the parallel statement; COMMIT:
    the plain statement's rows (for COPY, core's INSERT in line order),
    written frozen as a serial load into new storage writes them."""
    kind = "a third of the keys there"
    tp, td = f"pu_np_{how}", f"pu_nd_{how}"
    with cluster.conn() as conn:
        make_source(conn)
        for t in (tp, td):
            conn.execute(f"DROP TABLE IF EXISTS {t}")
    with cluster.conn(autocommit=False) as conn:
        session(conn)
        counts = {}
        for t in (tp, td):
            make_target(conn, t, kind)
            if t == tp:
                sql = (insert_stmt("no conflict target", t) if how == "insert"
                       else f"INSERT INTO {t} SELECT {COLS} FROM pu_src ORDER BY n "
                            f"ON CONFLICT DO NOTHING")
            else:
                sql = "/*+ APPEND PARALLEL(2) */ " + (
                    insert_stmt("no conflict target", t) if how == "insert"
                    else copy_stmt(kind, t, "csv"))
            counts[t] = conn.execute(sql).rowcount
            if t == td:
                st = parallel_report(conn)
                assert st["frozen"], st
            conn.commit()
        assert counts[td] == counts[tp] > 0, counts
        assert table_digest(conn, td) == table_digest(conn, tp)
        conn.commit()
        conn.autocommit = True
        check_loaded(conn, td, kind)


# -- what still runs serially --------------------------------------------------

# rows whose keys are all different (for DO UPDATE and MERGE)
DISTINCT = f"SELECT {COLS} FROM pu_src WHERE n <= 150000 AND n % 7 <> 0"
# case: (target kind, the hinted statement, the plain one, the reason's words)
SERIAL = {
    "DO UPDATE, SELECT sorted": ("a third of the keys there",
                                 f"INSERT INTO {{t}} {DISTINCT} ORDER BY v "
                                 "ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                                 None, "not a scan"),
    "DO UPDATE, partitioned": ("partitioned",
                               f"INSERT INTO {{t}} {DISTINCT} ON CONFLICT (k) DO UPDATE "
                               "SET v = excluded.v", None, "partition"),
    "MERGE": ("a third of the keys there",
              f"MERGE INTO {{t}} t USING ({DISTINCT}) s ON t.k = s.k "
              "WHEN MATCHED THEN UPDATE SET v = s.v "
              "WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.n, s.u, s.v)",
              None, "MERGE"),
    "partitioned, INSERT": ("partitioned",
                            f"INSERT INTO {{t}} SELECT {COLS} FROM pu_src ON CONFLICT DO NOTHING",
                            None, "partition"),
    "partitioned, COPY": ("partitioned", "COPY {t} FROM 'dp_pu.csv' WITH (FORMAT csv, "
                          "ON_CONFLICT 'nothing')",
                          f"INSERT INTO {{t}} SELECT {COLS} FROM pu_src ORDER BY n "
                          "ON CONFLICT DO NOTHING", "partition"),
}


@pytest.mark.parametrize("case", list(SERIAL))
def test_still_serial_says_why(cluster, case):
    """PARALLEL(2) on what cannot run in parallel: a serial direct load,
    the reason in last_statement().parallel, the plain statement's rows."""
    kind, stmt, plain, why = SERIAL[case]
    n = list(SERIAL).index(case)
    tp, td = f"pu_sp_{n}", f"pu_sd_{n}"
    with cluster.conn() as conn:
        session(conn)
        make_source(conn)
        counts = {}
        for t, sql in ((tp, (plain or stmt).format(t=tp)),
                       (td, "/*+ APPEND PARALLEL(2) */ " + stmt.format(t=td))):
            make_target(conn, t, kind)
            counts[t] = conn.execute(sql).rowcount
        st = last_statement(conn)
        assert st["path"] == "direct" and st["parallel_workers"] == 0, st
        assert why.lower() in (st["parallel"] or "").lower(), st
        assert counts[td] == counts[tp] > 0, counts
        assert table_digest(conn, td) == table_digest(conn, tp)


# -- errors --------------------------------------------------------------------

CHECKED = "(k int PRIMARY KEY, n int NOT NULL CONSTRAINT pu_chk CHECK (n <> 200001), " \
          "u int, v text)"


@pytest.mark.parametrize("how", ["insert", "copy"])
def test_check_violation_mid_input_leaves_the_table(cluster, how):
    """Line 200001 violates a CHECK.  Its key (50001) is an old row's, so
    DO NOTHING would skip it, but the CHECK comes first, as in core: the
    parallel statement fails as the reference does (core's INSERT; for COPY
    the serial direct one, both naming the line), and both tables are as
    before, sound.  Without that line the same statement runs in parallel
    and gives the reference's rows."""
    tp, td = f"pu_ep_{how}", f"pu_ed_{how}"
    if how == "insert":
        stmt, ref = ("INSERT INTO {t} SELECT k, n, u, v FROM pu_src {w} "
                     "ON CONFLICT DO NOTHING"), ""
    else:
        stmt, ref = ("COPY {t} FROM 'dp_pu.csv' WITH (FORMAT csv, ON_CONFLICT 'nothing') "
                     "{w}"), "/*+ APPEND */ "
    with cluster.conn() as conn:
        session(conn)
        make_source(conn)
        for t in (tp, td):
            conn.execute(f"DROP TABLE IF EXISTS {t}")
            conn.execute(f"CREATE TABLE {t} {CHECKED}")
            conn.execute(f"INSERT INTO {t} {OLD}")
        before = table_digest(conn, td)
        errors = [error_of(conn, ref + stmt.format(t=tp, w="")),
                  error_of(conn, "/*+ APPEND PARALLEL(2) */ " + stmt.format(t=td, w=""))]
        for e in errors:
            assert e is not None and e[0] == "23514" and '"pu_chk"' in e[1], errors
            if how == "copy":
                assert "line 200001" in (e[3] or ""), errors
        assert table_digest(conn, tp) == table_digest(conn, td) == before
        assert conn.execute(f"SELECT count(*) FROM {td}").fetchone()[0] == OLD_ROWS
        verify_table(conn, td)
        counts = [conn.execute(ref + stmt.format(t=tp, w="WHERE n <> 200001")).rowcount,
                  conn.execute("/*+ APPEND PARALLEL(2) */ " +
                               stmt.format(t=td, w="WHERE n <> 200001")).rowcount]
        parallel_report(conn)
        assert counts[0] == counts[1] > 0, counts
        assert table_digest(conn, td) == table_digest(conn, tp)
        check_loaded(conn, td, "a third of the keys there")


# -- REPEATABLE READ, and rows that need TOAST ---------------------------------

def test_repeatable_read(cluster):
    """Under REPEATABLE READ a parallel DO NOTHING loads as the plain
    statement while the rows it meets are visible to its snapshot; one
    that meets a row committed after its snapshot fails as core does
    (could not serialize access, ExecCheckTupleVisible), for the plain
    and the parallel statement alike, and leaves the table as it was."""
    kind = "a third of the keys there"
    with cluster.conn() as conn:
        make_source(conn)
        for t in ("pu_rr_p", "pu_rr_d"):
            make_target(conn, t, kind)
    results = {}
    for t, hint in (("pu_rr_p", ""), ("pu_rr_d", "/*+ APPEND PARALLEL(2) */ ")):
        sql = f"{hint}INSERT INTO {t} SELECT {COLS} FROM pu_src ON CONFLICT DO NOTHING"
        with cluster.conn(autocommit=False) as a, cluster.conn() as b:
            a.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            session(a)
            before = a.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            # key 1 (line 1's) committed after a's snapshot
            b.execute(f"INSERT INTO {t} VALUES (1, -1, NULL, 'later')")
            results[t] = error_of(a, sql)
            a.rollback()
            assert a.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == before + 1
        with cluster.conn(autocommit=False) as a:
            a.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            session(a)
            a.execute(f"SELECT count(*) FROM {t}")
            results[t + " visible"] = a.execute(sql).rowcount
            if hint:
                parallel_report(a)
            a.commit()
    assert results["pu_rr_p"] is not None and results["pu_rr_p"][0] == "40001", results
    assert results["pu_rr_d"] is not None and results["pu_rr_d"][0] == "40001", results
    assert results["pu_rr_d visible"] == results["pu_rr_p visible"] > 0, results
    with cluster.conn() as conn:
        assert table_digest(conn, "pu_rr_d") == table_digest(conn, "pu_rr_p")
        check_loaded(conn, "pu_rr_d", kind)


def test_rows_that_need_toast(cluster):
    """Every 50th line too wide for a page without TOAST: the workers send
    such a row to the leader with its key, and the leader's check holds
    for it as for a page (some of them repeat an earlier line's key, some
    are repeated by a later line)."""
    wide = "(SELECT string_agg(md5((g * 1000 + i)::text), '') FROM generate_series(1, 200) i)"
    with cluster.conn() as conn:
        session(conn)
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute("DROP TABLE IF EXISTS pu_wide")
        conn.execute("CREATE TABLE pu_wide (k int, n int, u int, v text)")
        conn.execute("INSERT INTO pu_wide SELECT g % 60000, g, NULL, "
                     f"CASE WHEN g % 50 = 0 THEN {wide} ELSE md5(g::text) END "
                     "FROM generate_series(1, 200000) g")
        counts = {}
        for t, hint in (("pu_wide_p", ""), ("pu_wide_d", "/*+ APPEND PARALLEL(2) */ ")):
            make_target(conn, t, "a third of the keys there")
            counts[t] = conn.execute(f"{hint}INSERT INTO {t} SELECT {COLS} FROM pu_wide "
                                     "ON CONFLICT DO NOTHING").rowcount
        parallel_report(conn)
        assert counts["pu_wide_d"] == counts["pu_wide_p"] > 0, counts
        assert table_digest(conn, "pu_wide_d") == table_digest(conn, "pu_wide_p")
        wide_rows = conn.execute("SELECT count(*) FROM pu_wide_d WHERE length(v) > 1000"
                                 ).fetchone()[0]
        assert wide_rows > 0
        check_loaded(conn, "pu_wide_d", "a third of the keys there")


# -- a standby, and a worker killed mid-load -----------------------------------

def test_standby_replays_the_pages_taken_off_rows(make_cluster, tmp_path):
    """The leader's rebuilt pages (rows taken off) and the rest reach a
    streaming standby: the same rows, sound indexes, index scans agreeing
    with sequential scans there too."""
    kind = "a third of the keys there"
    p = make_cluster(name="primary")
    with p.conn() as conn:
        make_source(conn)
        make_target(conn, "pu_sb", kind)
    sb = p.make_standby(tmp_path)
    with p.conn() as conn:
        session(conn)
        conn.execute("/*+ APPEND PARALLEL(2) */ " + copy_stmt(kind, "pu_sb", "csv"))
        parallel_report(conn)
        want = table_digest(conn, "pu_sb")
        assert want == table_digest(conn, oracle(conn, kind))
    p.wait_replay(sb)
    with sb.conn() as conn:
        assert table_digest(conn, "pu_sb") == want
        check_loaded(conn, "pu_sb", kind)
    sb.stop()


def kill_at_fault(cluster, bg, point, off, worker, has_workers):
    """Start 'bg', wait until it sleeps at fault 'point' (its workers there
    or not, as 'has_workers' says), SIGKILL a worker of it or itself, and
    wait for the crash restart: the statement must have failed."""
    bg.start()
    with bg:
        wait_fault_sleep(cluster, bg, point, off)
        with cluster.conn() as conn:
            workers = [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE leader_pid = %s AND pid <> %s",
                (bg.pid, bg.pid)).fetchall()]
        assert bool(workers) == has_workers, cluster.log_tail(30, off)
        crash_backend(cluster, workers[0] if worker else bg.pid)
        bg.join()
        assert bg.error is not None, bg.results


@pytest.mark.parametrize("how", ["kill-worker", "kill-leader"])
def test_process_killed_mid_load_leaves_nothing(cluster, how):
    """A worker or the leader killed while the leader sleeps after its first
    batch: nothing of the load is visible after crash recovery, and the
    same load then succeeds in parallel with the plain statement's rows."""
    kind = "a third of the keys there"
    t = "pu_kill_" + how.replace("-", "_")
    sql = f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT {COLS} FROM pu_src " \
          "ON CONFLICT DO NOTHING"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t, kind)
        before = table_digest(conn, t)
    off = cluster.log_size()
    settings = dict(fault_gucs("first_batch", 1, sleep_ms=60_000),
                    **{"directpath.batch_pages": 50, "synchronize_seqscans": "off"})
    bg = Background(cluster, [sql], settings, name="loader")
    kill_at_fault(cluster, bg, "first_batch", off, how == "kill-worker", True)
    with cluster.conn() as conn:
        session(conn)
        assert table_digest(conn, t) == before
        verify_table(conn, t)
        conn.execute(sql)
        parallel_report(conn)
        assert table_digest(conn, t) == table_digest(conn, oracle(conn, kind))
        check_loaded(conn, t, kind)


def test_more_keys_than_a_process_keeps(cluster):
    """1.2M lines, each key twice (600,000 lines apart) and the line after
    every fifth repeating it: each process accepts more keys than it keeps
    (262,144), so it empties its set mid-load and meets twins it had
    accepted again; the rows are still the plain statement's, by INSERT
    ... SELECT and by COPY."""
    n = 1_200_000
    with cluster.conn() as conn:
        notices = session(conn)
        conn.execute("DROP TABLE IF EXISTS pu_big")
        conn.execute("CREATE TABLE pu_big (k int, n int, u int, v text)")
        conn.execute("INSERT INTO pu_big SELECT CASE WHEN g % 5 = 0 THEN (g - 1) % 600000 "
                     f"ELSE g % 600000 END, g, NULL, md5(g::text) FROM generate_series(1, {n}) g")
        conn.execute("COPY (SELECT k, n, u, v FROM pu_big ORDER BY n) TO PROGRAM "
                     "'cat > dp_pu_big.csv' WITH (FORMAT csv)")
        make_target(conn, "pu_big_p", "empty")
        want = conn.execute("INSERT INTO pu_big_p SELECT k, n, u, v FROM pu_big ORDER BY n "
                            "ON CONFLICT DO NOTHING").rowcount
        for t, sql in (("pu_big_i", "INSERT INTO {t} SELECT k, n, u, v FROM pu_big "
                                    "ON CONFLICT DO NOTHING"),
                       ("pu_big_c", "COPY {t} FROM 'dp_pu_big.csv' WITH (FORMAT csv, "
                                    "ON_CONFLICT 'nothing')")):
            make_target(conn, t, "empty")
            notices.clear()
            conn.execute("SET client_min_messages = debug1")
            cur = conn.execute("/*+ APPEND PARALLEL(1) */ " + sql.format(t=t))
            conn.execute("RESET client_min_messages")
            parallel_report(conn)
            assert any("empties its" in m for m in notices), (t, notices[-5:])
            assert cur.rowcount == want, t
            assert table_digest(conn, t) == table_digest(conn, "pu_big_p"), t
            check_loaded(conn, t, "empty")
