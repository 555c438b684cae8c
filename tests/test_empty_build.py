"""A load into a table that starts empty builds its btrees once, at the end.

When a leaf has no block as its load begins (and the load has no ON
CONFLICT), its unique btrees' entries wait for the end of the statement as
the non-unique ones' do, and each index is then built by one append at its
right edge (sorted.c).  Against the plain statement, for key types and
orders a per-batch load handles differently (random int, text, uuid,
numeric, bigint in order), NULLs in unique columns, a partial and a
NULLS NOT DISTINCT unique index, INSERT ... SELECT and COPY: the same rows;
every index read in full by a forced index scan agrees with a sequential
scan; amcheck's heapallindexed is clean; the report says "append" and
nothing else.  A duplicate anywhere in the load fails with the plain
statement's SQLSTATE, message and DETAIL and leaves nothing (a COPY's
error names no line, as documented).  A table with a block, ON CONFLICT,
a self-reference or a user's row trigger keep the per-batch work.
"""

import psycopg
import pytest

from conftest import errors_of_both, last_statement, set_gucs, table_digest, verify_table

pytestmark = pytest.mark.directpath

SET = {"directpath.min_bytes": "0", "directpath.batch_pages": "8"}
ROWS = 40000

KEYS = {
    # name: (column type, expression of g; distinct for distinct g)
    "int random": ("int", "(g * 7919) % 1000003"),
    "bigint in order": ("bigint", "g::bigint * 3"),
    "text": ("text", "md5(g::text)"),
    "uuid": ("uuid", "md5(g::text)::uuid"),
    "numeric": ("numeric(20,4)", "(g * 7919 % 1000003) / 7.0"),
}


def make_table(conn, t, typ, nnd):
    conn.execute(f"CREATE TABLE {t} (k {typ} PRIMARY KEY, u int, p int, v text)")
    conn.execute(f"CREATE UNIQUE INDEX {t}_u ON {t} (u)")
    conn.execute(f"CREATE UNIQUE INDEX {t}_p ON {t} (p) WHERE p % 3 = 0")
    conn.execute(f"CREATE INDEX {t}_v ON {t} (v)")
    if nnd:
        conn.execute(f"CREATE UNIQUE INDEX {t}_nnd ON {t} (p, u) NULLS NOT DISTINCT")


def rows_sql(expr, dup=None):
    """ROWS rows; u NULL for every 7th (NULLs never conflict), p unique;
    with 'dup' = (a, b) row b repeats row a's key."""
    k = expr if dup is None else \
        expr.replace("g", f"(CASE WHEN g = {dup[1]} THEN {dup[0]} ELSE g END)")
    return (f"SELECT {k}, CASE WHEN g % 7 = 0 THEN NULL ELSE ROWS_ - g END, g, "
            f"'v' || (g % 1000) FROM generate_series(1, {ROWS}) g").replace("ROWS_", str(ROWS))


def index_agrees(conn, t):
    """Each index read in full by a forced index scan agrees with the heap."""
    cols = {"pkey": "k", "u": "u", "p": "p", "v": "v", "nnd": "p"}
    for suffix, col in cols.items():
        idx = f"{t}_{suffix}"
        if conn.execute("SELECT to_regclass(%s)", (idx,)).fetchone()[0] is None:
            continue
        where = {"p": "p % 3 = 0", "u": "u IS NOT NULL"}.get(suffix, "true")
        q = f"SELECT count(*), sum(hashtext({col}::text)) FROM {t} WHERE {where}"
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT {col} FROM {t} WHERE {where} ORDER BY {col}").fetchall())
        by_index = conn.execute(q).fetchone()
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")
        conn.execute("SET enable_indexscan = off")
        conn.execute("SET enable_indexonlyscan = off")
        conn.execute("SET enable_bitmapscan = off")
        by_heap = conn.execute(q).fetchone()
        conn.execute("RESET enable_indexscan")
        conn.execute("RESET enable_indexonlyscan")
        conn.execute("RESET enable_bitmapscan")
        assert "Index" in plan, plan
        assert by_index == by_heap, (idx, by_index, by_heap)



@pytest.mark.parametrize("how", ["insert", "copy"])
@pytest.mark.parametrize("key", list(KEYS))
def test_built_once_like_plain(cluster, tmp_path, key, how):
    n = 2 * list(KEYS).index(key) + (how == "copy")
    typ, expr = KEYS[key]
    tp, td = f"eb_plain{n}", f"eb_direct{n}"
    path = tmp_path / "rows.csv"
    with cluster.conn() as conn:
        for t in (tp, td):
            make_table(conn, t, typ, nnd=(n % 3 == 0))
        set_gucs(conn, SET)
        conn.execute(f"INSERT INTO {tp} {rows_sql(expr)}")
        if how == "copy":
            conn.execute(f"COPY ({rows_sql(expr)}) TO '{path}' WITH (FORMAT csv)")
            conn.execute(f"/*+ APPEND */ COPY {td} FROM '{path}' WITH (FORMAT csv)")
        else:
            conn.execute(f"/*+ APPEND */ INSERT INTO {td} {rows_sql(expr)}")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert st["index_maintenance"] == "append", st
        assert table_digest(conn, td) == table_digest(conn, tp)
        index_agrees(conn, td)
        verify_table(conn, td)


@pytest.mark.parametrize("how", ["insert", "copy"])
@pytest.mark.parametrize("index", ["pkey", "u", "p", "nnd"])
def test_duplicate_like_plain(cluster, tmp_path, index, how):
    n = 2 * ["pkey", "u", "p", "nnd"].index(index) + (how == "copy")
    tp, td = f"ed_plain{n}", f"ed_direct{n}"
    path = tmp_path / "rows.csv"
    typ, expr = KEYS["int random"]
    if index == "pkey":
        rows = rows_sql(expr, dup=(1234, 35000))
    elif index == "u":
        rows = rows_sql(expr).replace("ELSE 40000 - g END", "ELSE 40000 - (CASE WHEN g = 30001 "
                                      "THEN 2 ELSE g END) END")
    elif index == "p":
        rows = rows_sql(expr).replace(", g, 'v'", ", CASE WHEN g = 33000 THEN 300 ELSE g END, 'v'")
    else:
        # u NULL in both rows, p equal: NULLS NOT DISTINCT makes them equal
        rows = rows_sql(expr).replace(", g, 'v'", ", CASE WHEN g = 35007 THEN 7 ELSE g END, 'v'")
    with cluster.conn() as conn:
        for t in (tp, td):
            make_table(conn, t, typ, nnd=True)
        set_gucs(conn, SET)
        plain, direct = errors_of_both(conn, how, rows, tp, td, path)
        assert plain is not None and plain[0] == "23505", plain
        assert direct[:3] == plain[:3]
        # found at the end: no input line (the plain COPY names one)
        assert "line" not in (direct[3] or ""), direct
        assert conn.execute(f"SELECT count(*) FROM {td}").fetchone()[0] == 0
        verify_table(conn, td)


KEPT = {
    "a block already": "INSERT INTO {t} VALUES (-1, -1, -1, 'x')",
    "on conflict": None,
    "row trigger": "CREATE TRIGGER tr AFTER INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION ek_noop()",
    "self reference": "ALTER TABLE {t} ADD FOREIGN KEY (u) REFERENCES {t} (u)",
}


@pytest.mark.parametrize("case", list(KEPT))
def test_what_keeps_batches(cluster, case):
    n = list(KEPT).index(case)
    t = f"ek_{n}"
    typ, expr = KEYS["int random"]
    with cluster.conn() as conn:
        conn.execute("CREATE OR REPLACE FUNCTION ek_noop() RETURNS trigger LANGUAGE plpgsql "
                     "AS 'BEGIN RETURN NULL; END'")
        make_table(conn, t, typ, nnd=False)
        set_gucs(conn, SET)
        if KEPT[case]:
            conn.execute(KEPT[case].format(t=t))
        rows = rows_sql(expr)
        if case == "on conflict":
            conn.execute(f"/*+ APPEND */ INSERT INTO {t} {rows} ON CONFLICT DO NOTHING")
        else:
            conn.execute(f"/*+ APPEND */ INSERT INTO {t} {rows}")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert st["index_maintenance"] != "append", st
        index_agrees(conn, t)
        verify_table(conn, t)


@pytest.mark.parametrize("how", ["insert", "copy"])
@pytest.mark.parametrize("fkey", [False, True])
def test_entries_taken_as_rows_are_placed(cluster, tmp_path, how, fkey):
    """Every index of a table that started empty waits for the end, so each
    row's entries are taken from its values as it is placed (sorted.c
    dp_sorted_spool_row): an expression index, a partial one, a BRIN
    summarized at the end, with and without a foreign key (whose check
    keeps the rows for their batch): the same rows as plain, every btree
    agreeing with the heap (amcheck heapallindexed); an index expression
    that fails on one row fails both loads alike."""
    n = 2 * fkey + (how == "copy")
    tp, td = f"ep_plain{n}", f"ep_direct{n}"
    path = tmp_path / "rows.csv"
    rows = (f"SELECT g, g % 500, md5(g::text), timestamptz '2026-01-01 UTC' - g * interval '1 min' "
            f"FROM generate_series(1, {ROWS}) g")
    with cluster.conn() as conn:
        if fkey:
            conn.execute(f"CREATE TABLE ep_ref{n} (r int PRIMARY KEY)")
            conn.execute(f"INSERT INTO ep_ref{n} SELECT generate_series(0, 499)")
        for t in (tp, td):
            conn.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, r int, v text, ts timestamptz"
                         + (f", FOREIGN KEY (r) REFERENCES ep_ref{n}" if fkey else "") + ")")
            conn.execute(f"CREATE INDEX ON {t} (lower(v), (k % 7))")
            conn.execute(f"CREATE INDEX ON {t} (r) WHERE r > 250")
            conn.execute(f"CREATE INDEX ON {t} USING brin (ts)")
        set_gucs(conn, SET)
        conn.execute(f"INSERT INTO {tp} {rows}")
        if how == "copy":
            conn.execute(f"COPY ({rows}) TO '{path}' WITH (FORMAT csv)")
            conn.execute(f"/*+ APPEND */ COPY {td} FROM '{path}' WITH (FORMAT csv)")
        else:
            conn.execute(f"/*+ APPEND */ INSERT INTO {td} {rows}")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert "append" in st["index_maintenance"], st
        assert table_digest(conn, td) == table_digest(conn, tp)
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        for q in ("SELECT count(*) FROM {t} WHERE lower(v) > 'c' AND k % 7 = 3",
                  "SELECT count(*), sum(k) FROM {t} WHERE r > 400"):
            assert conn.execute(q.format(t=td)).fetchone() == \
                conn.execute(q.format(t=tp)).fetchone()
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")
        verify_table(conn, td)

        # an index expression failing on row 30000: the same error
        ep, ed = f"ee_plain{n}", f"ee_direct{n}"
        for t, src in ((ep, tp), (ed, td)):
            conn.execute(f"CREATE TABLE {t} (LIKE {src} INCLUDING ALL)")
            conn.execute(f"CREATE INDEX ON {t} ((100 / (k - 30000)))")
        plain, direct = errors_of_both(conn, how, rows, ep, ed, path)
        assert plain is not None and plain[0] == "22012", plain
        assert direct[:3] == plain[:3]
        if how == "copy":
            # formed as the row is placed: the line, and here its text too
            assert plain[3] == f"COPY {ep}, line 30000", plain
            assert direct[3].startswith(f"COPY {ep}, line 30000: \"30000,"), direct
        assert conn.execute(f"SELECT count(*) FROM {ed}").fetchone()[0] == 0


@pytest.mark.parametrize("typ,expr", [
    ("int", "{g}"), ("bigint", "({g})::bigint * 1000000007"),
    ("date", "date '2000-01-01' + {g}"), ("uuid", "md5(({g})::text)::uuid"),
    ("int, k2 smallint", "({g}) / 4, (({g}) % 4)::smallint")])
def test_duplicate_in_new_storage_like_plain(cluster, typ, expr):
    """Storage new in the transaction builds its unique index from the
    entries sorted on sort words (keysort.c): one duplicated key among
    60,000 fails as the plain INSERT fails, message and DETAIL, and the
    same load without it builds an index amcheck accepts."""
    cols = "k, k2" if "k2" in typ else "k"
    dup = "CASE WHEN g = 45000 THEN 124 ELSE g END"
    rows = f"SELECT {expr.format(g=dup)}, 'v' || g FROM generate_series(1, 60000) g"
    clean = f"SELECT {expr.format(g='g')}, 'v' || g FROM generate_series(1, 60000) g"
    with cluster.conn() as conn:
        errs = []
        for hint, t in (("", "nd_plain"), ("/*+ APPEND */ ", "nd_direct")):
            conn.execute("BEGIN")
            conn.execute(f"CREATE TABLE {t} (k {typ}, v text, PRIMARY KEY ({cols}))")
            try:
                conn.execute(f"{hint}INSERT INTO {t} {rows}")
                errs.append(None)
            except psycopg.Error as e:
                errs.append((e.sqlstate, e.diag.message_primary.replace(t, "T"),
                             e.diag.message_detail))
            conn.execute("ROLLBACK")
        assert errs[0] is not None and errs[0][0] == "23505", errs
        assert errs[1] == errs[0]
        # without the duplicate: built, and as plain
        conn.execute("BEGIN")
        conn.execute(f"CREATE TABLE nd_ok (k {typ}, v text, PRIMARY KEY ({cols}))")
        conn.execute(f"/*+ APPEND */ INSERT INTO nd_ok {clean}")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["index_maintenance"] == "build", st
        conn.execute("COMMIT")
        conn.execute("SELECT bt_index_parent_check('nd_ok_pkey'::regclass, true, true)")
        assert conn.execute("SELECT count(*) FROM nd_ok").fetchone()[0] == 60000
        conn.execute("DROP TABLE nd_ok")
