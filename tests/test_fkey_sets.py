"""Foreign keys of a large load checked as one set at its end (fkset.c).

Past directpath.fkey_set_rows rows a constraint's later keys are sorted and
checked once, distinct, at the end of the load.  Against the plain
statement: the same rows; the same error (23503, message, DETAIL naming
the first violating row's key in input order, and, as core's checks at the
end of a statement, no COPY line), wherever the violations are; NULL keys
(MATCH SIMPLE) and composite keys; a partitioned target whose leaves share
the input order; the referenced rows locked FOR KEY SHARE (a parent DELETE
waits) with the headers and visibility map bits the plain statement's
checks leave, or with directpath.fkey_table_lock their tables locked SHARE
and no row; nothing left after an error.  The report names the constraints
checked so, with their distinct keys.  Integer keys (one or two columns
of int2, int4, int8, oid, date, timestamptz; two of at most 32 bits kept
in the halves of one word), which the set keeps as an array of integers,
kept in memory, compacted in a small one, moved to the tuplesort when it
overflows, or sorted by the tuplesort from the start: the same rows and
errors as plain.  The finds run in C as index scans (HOT-updated, dead
and text-keyed parents, a cross-type key): the same rows, row locks and
errors as plain; none where the parent's owner may not read it.
"""

import re

import psycopg
import pytest

from conftest import Background, errors_of_both, last_statement, set_gucs, sqlstate_of, table_digest

pytestmark = pytest.mark.directpath

SET = {"directpath.min_bytes": "0", "directpath.batch_pages": "4",
       "directpath.fkey_set_rows": "2000"}


def make_parents(conn, p):
    conn.execute(f"CREATE TABLE {p}_a (id int PRIMARY KEY)")
    conn.execute(f"INSERT INTO {p}_a SELECT generate_series(1, 5000)")
    conn.execute(f"CREATE TABLE {p}_b (x int, y text, PRIMARY KEY (x, y))")
    conn.execute(f"INSERT INTO {p}_b SELECT g, 'y' || (g % 7) FROM generate_series(1, 3000) g")


def make_child(conn, t, p, partitioned=False):
    part = " PARTITION BY RANGE (n)" if partitioned else ""
    conn.execute(f"CREATE TABLE {t} (n int, a int REFERENCES {p}_a, x int, y text, "
                 f"FOREIGN KEY (x, y) REFERENCES {p}_b){part}")
    if partitioned:
        conn.execute(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (0) TO (10000)")
        conn.execute(f"CREATE TABLE {t}_2 PARTITION OF {t} FOR VALUES FROM (10000) TO (MAXVALUE)")


def load_both_as_set(conn, rows, tp, td):
    """The rows of the SELECT 'rows' loaded by the plain INSERT into tp and
    the hinted one into td: the direct load checked its keys as a set at
    the end, and both tables hold the same rows.  Returns its report."""
    conn.execute(f"INSERT INTO {tp} {rows}")
    conn.execute(f"/*+ APPEND */ INSERT INTO {td} {rows}")
    st = last_statement(conn)
    assert st["path"] == "direct", st
    assert "then as a set at the end:" in st["foreign_keys"], st
    assert table_digest(conn, td) == table_digest(conn, tp)
    return st


def rows_sql(bad=()):
    """20,000 rows; each in 'bad' ((row, column)) gets a missing key there.
    Rows alternate between the partitions' ranges (n)."""
    a = "CASE " + " ".join(f"WHEN g = {g} THEN 900000 + g" for g, c in bad if c == "a") + \
        " ELSE (g * 7) % 5000 + 1 END" if any(c == "a" for _, c in bad) else "(g * 7) % 5000 + 1"
    x = "CASE " + " ".join(f"WHEN g = {g} THEN 800000 + g" for g, c in bad if c == "x") + \
        " ELSE (g * 13) % 3000 + 1 END" if any(c == "x" for _, c in bad) else "(g * 13) % 3000 + 1"
    return (f"SELECT CASE WHEN g % 2 = 0 THEN g ELSE 10000 + g END, "
            f"CASE WHEN g % 11 = 0 THEN NULL ELSE {a} END, {x}, "
            f"CASE WHEN g % 13 = 0 THEN NULL ELSE 'y' || (({x}) % 7) END "
            f"FROM generate_series(1, 20000) g")



@pytest.mark.parametrize("partitioned", [False, True])
def test_same_rows_as_plain(cluster, partitioned):
    n = int(partitioned)
    p, tp, td = f"fs_p{n}", f"fs_plain{n}", f"fs_direct{n}"
    with cluster.conn() as conn:
        make_parents(conn, p)
        for t in (tp, td):
            make_child(conn, t, p, partitioned)
        set_gucs(conn, SET)
        st = load_both_as_set(conn, rows_sql(), tp, td)
        assert f"{td}_a_fkey (" in st["foreign_keys"] and "keys)" in st["foreign_keys"], st


# (row, column) of the missing keys: one early (still per batch), one late,
# two in one row, the second constraint before the first, the last row
CASES = {
    "late": [(15000, "a")],
    "two late, input order": [(17000, "a"), (16000, "x")],
    "one row, both constraints": [(14000, "x"), (14000, "a")],
    "the last row": [(20000, "x")],
    "early and late": [(300, "a"), (19000, "x")],
    # partitioned: row 8001 goes to the second leaf, row 9000 to the first;
    # each leaf's keys go to its sets as its rows are placed, and the first
    # violation is still the first row's in input order across the leaves
    "two leaves, input order": [(9000, "a"), (8001, "x")],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("how", ["insert", "copy"])
def test_errors_like_plain(cluster, tmp_path, case, how):
    n = 10 * list(CASES).index(case) + (how == "copy")
    p, tp, td = f"fe_p{n}", f"fe_plain{n}", f"fe_direct{n}"
    path = tmp_path / "rows.csv"
    with cluster.conn() as conn:
        make_parents(conn, p)
        for t in (tp, td):
            make_child(conn, t, p, partitioned="leaves" in case)
        set_gucs(conn, SET)
        # the same error but for the table's (and its constraints') name
        plain, direct = errors_of_both(conn, how, rows_sql(CASES[case]), tp, td, path)
        assert plain is not None and plain[0] == "23503"
        if case == "early and late":
            # the early row fails in its batch, which names its line
            assert direct[:3] == plain[:3]
        else:
            assert direct == plain
        assert conn.execute(f"SELECT count(*) FROM {td}").fetchone()[0] == 0


def test_referenced_rows_locked(cluster):
    """The set check locks each referenced row FOR KEY SHARE: a DELETE of a
    parent the load referenced waits for it; after the commit it fails."""
    p, t = "fl_p", "fl_c"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_child(conn, t, p)
    with Background(cluster, ["BEGIN", f"/*+ APPEND */ INSERT INTO {t} {rows_sql()}"],
                    SET, name="loader") as bg, cluster.conn() as other:
        bg.start()
        bg.join()
        assert bg.error is None, bg.error
        assert "as a set" in last_statement(bg.conn)["foreign_keys"]
        other.execute("SET lock_timeout = '300ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute(f"DELETE FROM {p}_a WHERE id = 4000")
        bg.execute("COMMIT")
        assert sqlstate_of(other, f"DELETE FROM {p}_a WHERE id = 4000") == "23503"


def lock_headers(conn, t):
    """Each row of 't': its line pointer, the xmax bits a row lock sets
    (KEYSHR, EXCL, LOCK_ONLY, IS_MULTI; KEYS_UPDATED, HOT_UPDATED), whether
    the xmax is this transaction's and t_ctid the row itself; and each
    block's visibility map bits."""
    rows = conn.execute(
        "SELECT b, lp, t_infomask & (16 | 64 | 128 | 4096), t_infomask2 & (8192 | 16384), "
        "t_xmax::text = txid_current()::text, t_ctid = ('(' || b || ',' || lp || ')')::tid "
        f"FROM generate_series(0, pg_relation_size('{t}') / 8192 - 1) b, "
        f"heap_page_items(get_raw_page('{t}', b::int)) ORDER BY 1, 2").fetchall()
    vm = conn.execute(f"SELECT blkno, all_visible, all_frozen FROM pg_visibility_map('{t}') "
                      "ORDER BY 1").fetchall()
    return rows, vm


def test_rows_locked_as_core_locks_them(cluster):
    """The set's rows locked page by page (fklock.c) carry what the plain
    INSERT's checks leave, row by row, on twin parents: pages whose first
    change since the checkpoint this is (locked and logged as one image),
    pages changed since (locked by heap_lock_tuple), rows an ended
    transaction locked before (the lock taken over), frozen pages (the
    all-frozen bit cleared, all-visible kept)."""
    heads = {}
    for how in ("plain", "direct"):
        p, t = f"fh_{how}_p", f"fh_{how}_c"
        with cluster.conn() as conn:
            make_parents(conn, p)
            make_child(conn, t, p)
            conn.execute(f"VACUUM FREEZE {p}_a, {p}_b")
            conn.execute(f"SELECT FROM {p}_a WHERE id <= 300 FOR KEY SHARE")
            conn.execute("CHECKPOINT")
            conn.execute(f"SELECT FROM {p}_a WHERE id BETWEEN 2000 AND 2600 FOR KEY SHARE")
            conn.execute(f"SELECT FROM {p}_b WHERE x <= 500 FOR KEY SHARE")
            set_gucs(conn, SET)
            conn.execute("BEGIN")
            conn.execute(f"{'' if how == 'plain' else '/*+ APPEND */ '}INSERT INTO {t} {rows_sql()}")
            if how == "direct":
                assert "then as a set at the end:" in last_statement(conn)["foreign_keys"]
            heads[how] = [lock_headers(conn, f"{p}_{x}") for x in ("a", "b")]
            conn.execute("COMMIT")
    for (rows_p, vm_p), (rows_d, vm_d) in zip(heads["plain"], heads["direct"]):
        assert rows_d == rows_p
        assert vm_d == vm_p
    rows, vm = heads["direct"][0]
    assert all(r[4] and r[2] == 16 | 128 for r in rows), rows[:5]      # every row locked
    assert vm and all(v[1] and not v[2] for v in vm), vm


@pytest.mark.parametrize("set_rows", ["2000", "0"])
def test_table_lock(cluster, tmp_path, set_rows):
    """directpath.fkey_table_lock: the referenced tables locked SHARE, their
    rows not one by one, per batch and as a set.  The same rows and errors
    as plain; no referenced row carries the load's lock (xmax), where the
    default locks every one; until the commit another session can neither
    delete nor insert a parent row (the default lets it insert)."""
    n = int(set_rows != "0")
    p, tp, td = f"ft_p{n}", f"ft_plain{n}", f"ft_direct{n}"
    gucs = dict(SET, **{"directpath.fkey_set_rows": set_rows,
                        "directpath.fkey_table_lock": "on"})
    with cluster.conn() as conn:
        make_parents(conn, p)
        for t in (tp, td):
            make_child(conn, t, p)
        set_gucs(conn, gucs)
        plain, direct = errors_of_both(conn, "insert", rows_sql([(15000, "x")]), tp, td,
                                       tmp_path / "rows.csv")
        assert plain is not None and plain[0] == "23503" and direct == plain, (plain, direct)
        conn.execute(f"INSERT INTO {tp} {rows_sql()}")
        conn.execute(f"/*+ APPEND */ INSERT INTO {td} {rows_sql()}")
        st = last_statement(conn)
        assert st["path"] == "direct" and ("as a set" in st["foreign_keys"]) == (n == 1), st
        assert table_digest(conn, td) == table_digest(conn, tp)
    for lock, locked_rows in (("on", 0), ("off", None)):
        with Background(cluster, ["BEGIN", f"/*+ APPEND */ INSERT INTO {td} {rows_sql()}"],
                        dict(gucs, **{"directpath.fkey_table_lock": lock}),
                        name="loader") as bg, cluster.conn() as other:
            bg.start()
            bg.join()
            assert bg.error is None, bg.error
            xid = bg.execute("SELECT txid_current()").fetchone()[0]
            rows = other.execute(f"SELECT count(*) FROM {p}_a WHERE xmax::text = %s",
                                 (str(xid),)).fetchone()[0]
            modes = {r[0] for r in bg.execute(
                f"SELECT mode FROM pg_locks WHERE pid = pg_backend_pid() "
                f"AND relation IN ('{p}_a'::regclass, '{p}_b'::regclass)").fetchall()}
            other.execute("SET lock_timeout = '300ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute(f"DELETE FROM {p}_a WHERE id = 4000")
            if lock == "on":
                assert rows == 0 and "ShareLock" in modes, (rows, modes)
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    other.execute(f"INSERT INTO {p}_a VALUES (100001)")
            else:
                assert rows > 1000 and "ShareLock" not in modes, (rows, modes)
                other.execute(f"INSERT INTO {p}_a VALUES (100002)")
            bg.execute("ROLLBACK")


def test_setting_zero_keeps_batches(cluster):
    p, t = "fz_p", "fz_c"
    with cluster.conn() as conn:
        make_parents(conn, p)
        make_child(conn, t, p)
        set_gucs(conn, dict(SET, **{"directpath.fkey_set_rows": "0"}))
        conn.execute(f"/*+ APPEND */ INSERT INTO {t} {rows_sql()}")
        assert "as a set" not in last_statement(conn)["foreign_keys"]


@pytest.mark.parametrize("how", ["insert", "copy"])
def test_keys_in_runs(cluster, tmp_path, how):
    """Keys that repeat in a row (an order's lines) are sorted once per run:
    the same rows as plain, and with two missing keys, each repeated in a
    run, the plain statement's error (the first row in input order)."""
    n = int(how == "copy")
    p, tp, td = f"fr_p{n}", f"fr_plain{n}", f"fr_direct{n}"
    path = tmp_path / "rows.csv"
    rows = ("SELECT g, CASE WHEN g / 4 IN (4100, 4500) THEN 700000 + g / 4 "
            "WHEN g % 9 = 0 THEN NULL ELSE g / 4 % 5000 + 1 END, g / 4 % 3000 + 1, "
            "'y' || ((g / 4 % 3000 + 1) % 7) FROM generate_series(1, 20000) g")
    with cluster.conn() as conn:
        make_parents(conn, p)
        for t in (tp, td):
            make_child(conn, t, p)
        set_gucs(conn, SET)
        load_both_as_set(conn, rows.replace("IN (4100, 4500)", "IN (-1)"), tp, td)
        conn.execute(f"TRUNCATE {tp}, {td}")
        plain, direct = errors_of_both(conn, how, rows, tp, td, path)
        assert plain is not None and plain[0] == "23503"
        assert "(a)=(704100)" in plain[2], plain
        assert direct == plain
        assert conn.execute(f"SELECT count(*) FROM {td}").fetchone()[0] == 0


# Integer keys (fkset.c keeps them as integer entries): the key columns'
# types, and each key number i's values.
INT_KEYS = {
    "int4": (["int"], ["{i}"]),
    "int2, int8": (["smallint", "bigint"], ["({i} % 300 - 150)::smallint",
                                            "({i} - 20000)::bigint * 1000000007"]),
    "date, timestamptz": (["date", "timestamptz"],
                          ["date '2000-01-01' + {i} % 400",
                           "timestamptz '2020-01-01 00:00+00' + {i} * interval '1 second'"]),
    "oid": (["oid"], ["({i}::bigint + 3000000000)::oid"]),
    # two columns of at most 32 bits: kept as the halves of one word
    "int, smallint": (["int", "smallint"], ["({i} - 1500) * 7", "({i} % 300 - 150)::smallint"]),
    "oid, date": (["oid", "date"], ["({i} % 50 + 4294967000)::oid", "date '1999-12-01' + {i}"]),
}
# how the set keeps them: every entry in memory; in a small memory with
# few distinct keys (sorted and compacted in place); with more distinct
# keys than it holds (moved to the tuplesort); the tuplesort from the start
INT_MODES = {
    "memory": ({}, 3000),
    "compacted": ({"maintenance_work_mem": "1MB", "work_mem": "64kB"}, 3000),
    "spilled": ({"maintenance_work_mem": "1MB", "work_mem": "64kB"}, 50000),
    "tuplesort": ({"directpath.index_key_sort": "off"}, 3000),
}


@pytest.mark.parametrize("mode", list(INT_MODES))
@pytest.mark.parametrize("types", list(INT_KEYS))
def test_integer_keys_like_plain(cluster, types, mode):
    """60,000 rows whose keys come in a scattered order, against the plain
    INSERT: the same rows, and with two missing keys (the larger one in an
    earlier row) the plain statement's error, naming the earlier row's."""
    n = 10 * list(INT_KEYS).index(types) + list(INT_MODES).index(mode)
    p, tp, td = f"fi_p{n}", f"fi_plain{n}", f"fi_direct{n}"
    coltypes, exprs = INT_KEYS[types]
    settings, distinct = INT_MODES[mode]
    cols = ", ".join(f"k{j}" for j in range(len(coltypes)))

    def keys(i):
        return ", ".join(e.format(i=i) for e in exprs)

    with cluster.conn() as conn:
        conn.execute(f"CREATE TABLE {p} ("
                     + ", ".join(f"k{j} {t}" for j, t in enumerate(coltypes))
                     + f", PRIMARY KEY ({cols}))")
        conn.execute(f"INSERT INTO {p} SELECT {keys('i')} FROM generate_series(0, {distinct - 1}) i")
        for t in (tp, td):
            conn.execute(f"CREATE TABLE {t} (n int, "
                         + ", ".join(f"k{j} {c}" for j, c in enumerate(coltypes))
                         + f", FOREIGN KEY ({cols}) REFERENCES {p})")
        set_gucs(conn, dict(SET, **settings))
        i = f"((g * 7919) % {distinct})"
        good = f"SELECT g, {keys(i)} FROM generate_series(1, 60000) g"
        st = load_both_as_set(conn, good, tp, td)
        # "(N keys)", or "(N keys, M found by a worker ...)" (fkahead.c)
        assert f"{td}_{cols.replace(', ', '_')}_fkey ({distinct} keys" in st["foreign_keys"], st
        conn.execute(f"TRUNCATE {tp}, {td}")
        bad = (f"(CASE WHEN g = 41000 THEN {distinct} + 9 WHEN g = 52000 THEN {distinct} + 4 "
               f"ELSE {i} END)")
        rows = f"SELECT g, {keys(bad)} FROM generate_series(1, 60000) g"
        plain, direct = errors_of_both(conn, "insert", rows, tp, td, None)
        assert plain is not None and plain[0] == "23503"
        assert direct == plain
        assert conn.execute(f"SELECT count(*) FROM {td}").fetchone()[0] == 0


def test_equal_keys_of_other_bytes(cluster):
    """numeric keys 1.0 and 1.00 are equal but kept apart by the set: the
    scan that finds a chunk at once (fkset.c) finds one row for both (fewer
    rows than keys), so the chunk goes to the check query, which finds
    none missing; a key really missing then fails as the plain INSERT."""
    p, tp, td = "fn_p", "fn_plain", "fn_direct"
    with cluster.conn() as conn:
        conn.execute(f"CREATE TABLE {p} (k numeric PRIMARY KEY)")
        conn.execute(f"INSERT INTO {p} SELECT g FROM generate_series(1, 5000) g")
        for t in (tp, td):
            conn.execute(f"CREATE TABLE {t} (n int, k numeric REFERENCES {p})")
        set_gucs(conn, SET)
        rows = ("SELECT g, CASE WHEN g % 3 = 0 THEN (g % 5000 + 1)::numeric(10, 2) "
                "ELSE (g % 5000 + 1)::numeric(10, 1) END FROM generate_series(1, 20000) g")
        load_both_as_set(conn, rows, tp, td)
        conn.execute(f"TRUNCATE {tp}, {td}")
        bad = rows.replace("ELSE (g % 5000 + 1)", "WHEN g = 17000 THEN 9999.5 ELSE (g % 5000 + 1)")
        plain, direct = errors_of_both(conn, "insert", bad, tp, td, None)
        assert plain is not None and plain[0] == "23503" and "9999.5" in plain[2]
        assert direct == plain


def load_twin_locking(conn, how, p, t, rows, notes):
    """The rows of the SELECT 'rows' loaded into t (referencing p, made and
    checkpointed by the caller) in a transaction, by the plain INSERT or
    (how == "direct") the hinted one, which checks its keys as a set; the
    DEBUG2 messages go to 'notes'.  Returns p's lock_headers before the
    commit."""
    set_gucs(conn, dict(SET, client_min_messages="debug2"))
    conn.add_notice_handler(lambda d: notes.append(d.message_primary))
    conn.execute("BEGIN")
    conn.execute(f"{'' if how == 'plain' else '/*+ APPEND */ '}INSERT INTO {t} {rows}")
    if how == "direct":
        assert "then as a set at the end:" in last_statement(conn)["foreign_keys"]
    heads = lock_headers(conn, p)
    conn.execute("COMMIT")
    conn.execute("SET client_min_messages = notice")
    return heads


def same_error_as_twin(conn, bad, p, t, p_plain, t_plain):
    """Loading the SELECT 'bad' fails on t as on its plain twin t_plain
    (23503), the names of p and t mapped to the twins'."""
    plain, direct = errors_of_both(conn, "insert", bad, t_plain, t, None)
    assert plain is not None and plain[0] == "23503", plain
    assert tuple(x.replace(p, p_plain) if isinstance(x, str) else x
                 for x in direct) == plain


# parent keys (a, b) with b 1..per for each a; the child references b <= used
LEADING = {"few rows a key": (3000, 4, 2), "many rows a key": (2, 50000, 3000)}


@pytest.mark.parametrize("order", ["a, b", "b, a"])
@pytest.mark.parametrize("spread", list(LEADING))
def test_leading_column_find(cluster, spread, order):
    """A two-column integer key's chunks found by their index's leading
    column alone (fkfind.c's wide query), the rows kept to the chunk's
    keys: the same rows and row locks as the plain INSERT on twin parents
    (rows sharing a referenced leading value but not referenced stay
    unlocked), whichever column the constraint names first; a leading
    value with more rows than DP_FKFIND_SPREAD a key sends the chunks to
    probes per key; a key missing beside a present leading value fails
    as plain does."""
    na, per, used = LEADING[spread]
    n = list(LEADING).index(spread) * 2 + ["a, b", "b, a"].index(order)
    ka, kb = ("x", "y") if order == "a, b" else ("y", "x")
    rows = (f"SELECT g, (g * 7) % {na} + 1, (g * 13) % {used} + 1 "
            f"FROM generate_series(1, 20000) g")
    heads, notes = {}, []
    for how in ("plain", "direct"):
        p, t = f"fw{n}_{how}_p", f"fw{n}_{how}_c"
        with cluster.conn() as conn:
            conn.execute(f"CREATE TABLE {p} (a int, b int, PRIMARY KEY (a, b))")
            conn.execute(f"INSERT INTO {p} SELECT i, j FROM generate_series(1, {na}) i, "
                         f"generate_series(1, {per}) j")
            conn.execute(f"CREATE TABLE {t} (n int, x int, y int, "
                         f"FOREIGN KEY ({ka}, {kb}) REFERENCES {p} ({order}))")
            conn.execute(f"VACUUM FREEZE {p}")
            conn.execute("CHECKPOINT")
            heads[how] = load_twin_locking(conn, how, p, t, rows, notes)
            if how == "direct":
                assert table_digest(conn, t) == table_digest(conn, f"fw{n}_plain_c")
                bad = rows.replace("SELECT g, (g * 7)",
                                   "SELECT g, CASE WHEN g = 15000 THEN 1 ELSE (g * 7)")
                bad = bad.replace(f"% {na} + 1,", f"% {na} + 1 END,").replace(
                    f"(g * 13) % {used} + 1", f"CASE WHEN g = 15000 THEN {per} + 5 "
                    f"ELSE (g * 13) % {used} + 1 END")
                conn.execute(f"TRUNCATE {t}, fw{n}_plain_c")
                same_error_as_twin(conn, bad, p, t, f"fw{n}_plain_p", f"fw{n}_plain_c")
    assert heads["direct"] == heads["plain"]
    locked = [r for r in heads["direct"][0] if r[4]]
    assert 0 < len(locked) < len(heads["direct"][0])
    searched = [m for m in notes if "searched by their leading column" in m]
    probed = [m for m in notes if "each key probed" in m]
    if spread == "few rows a key":
        assert searched and not probed, notes
        # every chunk's keys found among more rows, which were kept to them
        counts = [[int(w) for w in re.search(r"^directpath: (\d+) keys .*: (\d+) rows read, "
                                             r"(-?\d+) kept", m).groups()] for m in searched]
        assert all(c[0] == c[2] for c in counts), searched
        assert any(c[1] > c[0] for c in counts), searched
    else:
        assert probed and not searched, notes


# twin parents made differently (fkfind.c's scan must find what the query finds)
FIND_CASES = {
    # the referenced rows' visible versions are HOT updates of the indexed ones
    "hot": ("k bigint PRIMARY KEY, v int) WITH (fillfactor = 50",
            "INSERT INTO {p} SELECT g, 0 FROM generate_series(1, 5000) g; "
            "UPDATE {p} SET v = 1 WHERE k % 3 = 0",
            "int", "(g * 7) % 5000 + 1"),
    # keys deleted and inserted again: the index holds a dead entry beside each
    "dead": ("k bigint PRIMARY KEY, v int",
             "INSERT INTO {p} SELECT g, 0 FROM generate_series(1, 5000) g; "
             "DELETE FROM {p} WHERE k % 5 = 0; "
             "INSERT INTO {p} SELECT g, 1 FROM generate_series(5, 5000, 5) g",
             "bigint", "(g * 7) % 5000 + 1"),
    # text keys under a collation of their own
    "text": ('k text COLLATE "C" PRIMARY KEY, v int',
             "INSERT INTO {p} SELECT 'k' || g, 0 FROM generate_series(1, 5000) g",
             "text", "'k' || ((g * 7) % 5000 + 1)"),
}


@pytest.mark.parametrize("case", list(FIND_CASES))
def test_find_in_c(cluster, case):
    """A one-column key's chunks found by a scan of the referenced index
    run in C (fkfind.c's scan_chunk), on parents whose rows were updated
    (HOT), deleted and inserted again, or have text keys under a collation;
    a bigint key referenced from an int column takes the cross-type
    operator.  Against the plain INSERT on a twin parent: the same rows,
    the same locks left on the parent's rows, the same error for a missing
    key."""
    cols, fill, fktype, key = FIND_CASES[case]
    heads, notes = {}, []
    for how in ("plain", "direct"):
        p, t = f"fc_{case}_{how}_p", f"fc_{case}_{how}_c"
        rows = f"SELECT g, {key} FROM generate_series(1, 20000) g"
        with cluster.conn() as conn:
            conn.execute(f"CREATE TABLE {p} ({cols})")
            for sql in fill.format(p=p).split("; "):
                conn.execute(sql)
            conn.execute(f"CREATE TABLE {t} (n int, k {fktype} REFERENCES {p})")
            conn.execute("CHECKPOINT")
            heads[how] = load_twin_locking(conn, how, p, t, rows, notes)
            if how == "direct":
                assert table_digest(conn, t) == table_digest(conn, f"fc_{case}_plain_c")
                missing = "'nokey'" if case == "text" else "0"
                bad = rows.replace(f"{key} FROM",
                                   f"CASE WHEN g = 15000 THEN {missing} ELSE {key} END FROM")
                conn.execute(f"TRUNCATE {t}, fc_{case}_plain_c")
                same_error_as_twin(conn, bad, p, t, f"fc_{case}_plain_p", f"fc_{case}_plain_c")
    assert any("found by a scan of its index" in m for m in notes), notes
    assert heads["direct"] == heads["plain"]
    assert any(r[4] for r in heads["direct"][0])


def test_find_owner_without_select(cluster):
    """A parent whose owner may not SELECT from it: no find runs (the scan
    in C would skip the privilege check, the find query would fail in its
    own words); the check query fails as the plain INSERT's check does:
    the same SQLSTATE and message (its CONTEXT names the direct path's
    query, docs/differences.md)."""
    with cluster.conn() as conn:
        conn.execute("DROP ROLE IF EXISTS fc_owner")
        conn.execute("CREATE ROLE fc_owner")
        conn.execute("CREATE TABLE fo_p (k int PRIMARY KEY)")
        conn.execute("INSERT INTO fo_p SELECT generate_series(1, 5000)")
        conn.execute("ALTER TABLE fo_p OWNER TO fc_owner")
        for t in ("fo_plain", "fo_direct"):
            conn.execute(f"CREATE TABLE {t} (n int, k int REFERENCES fo_p)")
        conn.execute("REVOKE SELECT ON fo_p FROM fc_owner")
        set_gucs(conn, SET)
        rows = "SELECT g, (g * 7) % 5000 + 1 FROM generate_series(1, 20000) g"
        plain, direct = errors_of_both(conn, "insert", rows, "fo_plain", "fo_direct", None)
        assert plain is not None and plain[0] == "42501", plain
        assert direct[:2] == plain[:2]
