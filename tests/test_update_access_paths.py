"""Bulk updates seen through every access path.

A bulk update (src/load/versions.c) writes new row versions on pages of
its own and adds their index entries itself.  A version left out of an
index is invisible to every query that reads that index while a
sequential scan still returns it: wrong results that a table digest,
which reads the heap, cannot see.  So after every bulk-updating statement
(INSERT ... ON CONFLICT DO UPDATE, MERGE, COPY ... ON_CONFLICT 'update')
these tests

  - compare the table with the same statements run plain on a twin table;
  - read every index in full, in index order, by a forced index scan, and
    compare what it returns with a sequential scan of the same rows
    (index_scans_agree);
  - run amcheck's bt_index_parent_check with heapallindexed on every btree,
    verify_heapam, and pg_visibility's checks (verify_table);

on tables vacuumed, frozen and fresh, with the statements in autocommit,
chained in one transaction, in a savepoint rolled back and in one released.
The shapes are drawn at random from fixed seeds: key types (int, bigint,
text, uuid, two columns), one to four other columns of several types with
NULL shares, secondary, partial, expression and two-column indexes, small
and default batches.

The regressions they guard: a MERGE that inserts nothing left its new
versions out of every index (the target's indexes were not open); a key
new to the table met twice by ON CONFLICT DO UPDATE, the two rows a flush
apart, updated the statement's own row instead of raising 21000.
"""

import random

import psycopg
import pytest

from conftest import last_statement, set_gucs, sqlstate_of, table_digest, verify_table

pytestmark = pytest.mark.directpath

# name: (columns DDL, key columns, one SQL expression per key column of g)
KEYS = {
    "int": ("k int", ["k"], ["g"]),
    "bigint": ("k bigint", ["k"], ["g::bigint * 1000003"]),
    "text": ("k text", ["k"], ["'key-' || lpad(g::text, 7, '0')"]),
    "uuid": ("k uuid", ["k"], ["md5(g::text)::uuid"]),
    "int, text": ("k int, k2 text", ["k", "k2"], ["g / 3", "'p' || (g % 3)"]),
}

# type: (value of g at stage st, index expressions it allows)
COLUMNS = {
    "int": ("(g * 7 + {st} * 13) % 1000", ["({c} + 1)"]),
    "numeric": ("((g * 11 + {st} * 17) % 10000) / 100.0", ["({c} * 2)"]),
    "text": ("md5((g + {st})::text)", ["lower({c})", "substr({c}, 1, 4)"]),
    "timestamptz": ("timestamptz '2026-01-01' + (g + {st}) * interval '1 min'", []),
    "toasted": ("CASE WHEN g % 41 = 0 THEN repeat(md5((g + {st})::text), 300) "
                "ELSE md5(g::text) END", []),
}

STATEMENTS = ["do update", "do update where", "merge", "merge, every row matched",
              "copy update"]
STATES = ["vacuumed", "frozen", "fresh"]
CONTEXTS = ["autocommit", "chained", "savepoint rolled back", "savepoint released"]


class Shape:
    """A table shape and a statement drawn from one seed."""

    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.statement = STATEMENTS[seed % len(STATEMENTS)]
        self.state = STATES[seed % len(STATES)]
        self.context = CONTEXTS[seed % len(CONTEXTS)]
        self.key = rng.choice(list(KEYS))
        if self.statement == "copy update" and self.key == "int, text":
            self.key = "int"
        self.key_ddl, self.key_cols, self.key_exprs = KEYS[self.key]
        ncols = rng.randint(1, 4)
        self.types = [rng.choice(list(COLUMNS)) for _ in range(ncols)]
        self.cols = [f"c{i}" for i in range(ncols)]
        self.nulls = [rng.choice([0, 0, 10, 50]) for _ in range(ncols)]
        self.indexes = self._indexes(rng)
        self.batch = rng.choice([{"directpath.batch_pages": "1"},
                                 {"directpath.batch_pages": "8"}, {}])
        self.rows = rng.choice([3000, 6000])

    def _indexes(self, rng):
        """Secondary indexes, each with a leading expression of its own
        (so that an ordered, forced index scan names one index)."""
        out = []
        for c, t in zip(self.cols, self.types):
            if t == "toasted" or rng.random() < 0.25:
                continue
            kind = rng.choice(["plain", "partial", "expression", "two columns"])
            exprs = COLUMNS[t][1]
            if kind == "expression" and exprs:
                out.append(f"(({rng.choice(exprs).format(c=c)}))")
            elif kind == "partial":
                out.append(f"({c}) WHERE {c} IS NOT NULL")
            elif kind == "two columns" and len(self.cols) > 1:
                other = rng.choice([o for o in self.cols if o != c])
                out.append(f"({c}, {other})")
            else:
                out.append(f"({c})")
        return out

    def __repr__(self):
        return (f"seed {self.seed}: {self.statement}, {self.state}, {self.context}; "
                f"key {self.key}, columns {self.types}, nulls {self.nulls}, "
                f"indexes {self.indexes}, {self.batch or 'default batches'}, {self.rows} rows")

    def values(self, stage):
        """The SELECT list of a row of g at a stage (0: the table's)."""
        out = list(self.key_exprs)
        for t, pct in zip(self.types, self.nulls):
            v = COLUMNS[t][0].format(st=stage)
            out.append(f"CASE WHEN abs(hashint4(g + {stage})) % 100 < {pct} THEN NULL "
                       f"ELSE {v} END" if pct else v)
        names = self.key_cols + self.cols
        return ", ".join(f"{e} AS {n}" for e, n in zip(out, names))

    def create(self, conn, t):
        defs = ", ".join(f"{c} {'text' if ty == 'toasted' else ty}"
                         for c, ty in zip(self.cols, self.types))
        conn.execute(f"CREATE TABLE {t} ({self.key_ddl}, {defs}, "
                     f"PRIMARY KEY ({', '.join(self.key_cols)}))")
        for i, ix in enumerate(self.indexes):
            conn.execute(f"CREATE INDEX {t}_i{i} ON {t} {ix}")
        # every other g: half of each source meets a row, half is new
        conn.execute(f"INSERT INTO {t} SELECT {self.values(0)} "
                     f"FROM generate_series(2, {2 * self.rows}, 2) g")
        if self.state == "vacuumed":
            conn.execute(f"VACUUM ANALYZE {t}")
        elif self.state == "frozen":
            conn.execute(f"VACUUM (FREEZE, ANALYZE) {t}")

    def source(self, conn, s, stage):
        """Source rows of a stage, in a scattered order: every key met by
        the merge that matches every row, else about half new keys."""
        if self.statement == "merge, every row matched":
            gs = f"generate_series(2, {2 * self.rows}, 2) g WHERE g % {2 + stage} <> 1"
        else:
            gs = f"generate_series({stage}, {2 * self.rows + 200 * stage}, {stage}) g"
        conn.execute(f"CREATE TABLE {s} AS SELECT {self.values(stage)} FROM {gs} "
                     f"ORDER BY hashint4(g + {self.seed})")

    def sql(self, t, s):
        keys = ", ".join(self.key_cols)
        sets = ", ".join(f"{c} = excluded.{c}" for c in self.cols)
        if self.statement.startswith("merge"):
            on = " AND ".join(f"x.{k} = s.{k}" for k in self.key_cols)
            msets = ", ".join(f"{c} = s.{c}" for c in self.cols)
            vals = ", ".join(f"s.{c}" for c in self.key_cols + self.cols)
            return (f"MERGE INTO {t} x USING {s} s ON {on} "
                    f"WHEN MATCHED THEN UPDATE SET {msets} "
                    f"WHEN NOT MATCHED THEN INSERT VALUES ({vals})")
        where = (" WHERE abs(hashtext(x::text)) % 3 <> 0"
                 if self.statement == "do update where" else "")
        return (f"INSERT INTO {t} AS x SELECT * FROM {s} ON CONFLICT ({keys}) "
                f"DO UPDATE SET {sets}{where}")


def run_statement(conn, shape, t, s, direct, path):
    """One statement of the shape on 't' from source 's'; a direct one
    must take the direct path (and, but for COPY, make its updates in
    bulk when it has any)."""
    if shape.statement == "copy update":
        if direct:
            conn.execute(f"/*+ APPEND */ COPY {t} FROM '{path}' WITH (ON_CONFLICT 'update')")
            assert last_statement(conn)["path"] == "direct"
        else:
            conn.execute(shape.sql(t, s))
        return
    if not direct:
        conn.execute(shape.sql(t, s))
        return
    plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) /*+ APPEND */ " +
                        shape.sql(t, s)).fetchone()[0][0]["Plan"]
    assert last_statement(conn)["path"] == "direct"
    assert "in bulk" in plan.get("Updates", ""), (shape, plan.get("Updates"))


def run_steps(conn, shape, t, sources, paths, direct):
    """The shape's two statements on 't' in its transaction context."""
    def one(i):
        run_statement(conn, shape, t, sources[i], direct, paths[i])

    ctx = shape.context
    if ctx == "autocommit":
        one(0)
        one(1)
        return
    conn.execute("BEGIN")
    if ctx == "chained":
        one(0)
        one(1)
    elif ctx == "savepoint rolled back":
        one(0)
        conn.execute("SAVEPOINT a")
        one(1)
        conn.execute("ROLLBACK TO SAVEPOINT a")
        one(1)
    else:
        conn.execute("SAVEPOINT a")
        one(0)
        conn.execute("RELEASE SAVEPOINT a")
        one(1)
    conn.execute("COMMIT")


def index_scans_agree(conn, table):
    """Every index of 'table' read in full by a forced, ordered index scan
    returns what a sequential scan returns for the same predicate."""
    rows = conn.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid, 1, true), "
        "pg_get_expr(i.indpred, i.indrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass "
        "ORDER BY 1", (table,)).fetchall()
    assert rows
    for name, lead, pred in rows:
        where = f"WHERE {pred}" if pred else ""
        q = (f"SELECT count(*), coalesce(sum(hashtext(r::text)), 0) FROM "
             f"(SELECT r FROM {table} r {where} ORDER BY {lead}) q")
        seen = {}
        for how, gucs in (("index", "enable_seqscan = off, enable_bitmapscan = off, "
                                    "enable_sort = off"),
                          ("seq", "enable_indexscan = off, enable_indexonlyscan = off, "
                                  "enable_bitmapscan = off")):
            conn.execute("BEGIN")
            for g in gucs.split(", "):
                conn.execute(f"SET LOCAL {g}")
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + q).fetchall())
            if how == "index":
                assert f"Index Scan using {name} " in plan, plan
            else:
                assert "Seq Scan" in plan, plan
            seen[how] = conn.execute(q).fetchone()
            conn.execute("COMMIT")
        assert seen["index"] == seen["seq"], (table, name, seen)


def check_table(conn, table):
    index_scans_agree(conn, table)
    verify_table(conn, table)


@pytest.mark.parametrize("seed", range(20))
def test_random_shapes_against_plain(cluster, tmp_path, seed):
    shape = Shape(seed)
    tp, td = f"ap_p_{seed}", f"ap_d_{seed}"
    sources = [f"ap_s_{seed}_{i}" for i in (1, 2)]
    paths = [tmp_path / f"source{i}.txt" for i in (1, 2)]
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0", **shape.batch})
        for t in (tp, td):
            shape.create(conn, t)
        for i, s in enumerate(sources):
            shape.source(conn, s, i + 1)
            conn.execute(f"COPY {s} TO '{paths[i]}'")
        run_steps(conn, shape, tp, sources, paths, direct=False)
        run_steps(conn, shape, td, sources, paths, direct=True)
        assert table_digest(conn, td) == table_digest(conn, tp), shape
        for t in (tp, td):
            check_table(conn, t)
        # and once more after VACUUM: the old versions are dead, the index
        # entries of the new ones must still lead to them
        conn.execute(f"VACUUM {td}")
        check_table(conn, td)


def test_merge_that_inserts_nothing(cluster):
    """The reported MERGE: every source row matches, so the load inserts
    nothing and opened no index; its new versions must be in every index."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute("CREATE TABLE ap_m (k int PRIMARY KEY, c1 numeric, c2 int, c3 text)")
        conn.execute("CREATE INDEX ON ap_m (c2)")
        conn.execute("CREATE INDEX ON ap_m (c3, c2)")
        conn.execute("INSERT INTO ap_m SELECT a * 2, a, a % 100, md5(a::text) "
                     "FROM generate_series(1, 20000) a")
        conn.execute("VACUUM ap_m")
        conn.execute("CREATE TABLE ap_ms AS SELECT a * 2 AS k, a + 1 AS c1, (a + 7) % 100 AS c2, "
                     "md5((a + 1)::text) AS c3 FROM generate_series(10000, 16000) a")
        conn.execute("/*+ APPEND */ MERGE INTO ap_m USING ap_ms s ON ap_m.k = s.k "
                     "WHEN MATCHED THEN UPDATE SET c1 = s.c1, c2 = s.c2, c3 = s.c3 "
                     "WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.c1, s.c2, s.c3)")
        assert last_statement(conn)["path"] == "direct"
        check_table(conn, "ap_m")
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        assert conn.execute("SELECT count(*) FROM ap_m WHERE k > 0").fetchone()[0] == 20000
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")
        # the primary key still guards the updated keys
        assert sqlstate_of(conn, "INSERT INTO ap_m VALUES (20000, 0, 0, '')") == "23505"


# The same key twice in the input: the first row new to the table, the
# second 'gap' rows later.  batch_pages = 1 puts flushes between them.
REPEATS = {
    "do update": ("INSERT INTO {t} AS x SELECT * FROM {s} ON CONFLICT (k) "
                  "DO UPDATE SET v = excluded.v"),
    "do nothing": "INSERT INTO {t} SELECT * FROM {s} ON CONFLICT (k) DO NOTHING",
    "merge": ("MERGE INTO {t} x USING {s} s ON x.k = s.k WHEN MATCHED THEN UPDATE "
              "SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v, s.n)"),
    "copy update": "COPY {t} FROM '{path}' WITH (ON_CONFLICT 'update')",
    "copy nothing": "COPY {t} FROM '{path}' WITH (ON_CONFLICT 'nothing')",
}
REFERENCE = {
    "copy update": REPEATS["do update"],
    "copy nothing": REPEATS["do nothing"],
}


@pytest.mark.parametrize("kind", list(REPEATS))
@pytest.mark.parametrize("gap", [3, 5000])
@pytest.mark.parametrize("key", ["new", "in the table"])
def test_key_met_twice(cluster, tmp_path, kind, gap, key):
    """Core's outcome whether the two rows are close or a flush apart:
    21000 for DO UPDATE (and MERGE when the key is in the table), 23505
    for MERGE inserting a new key twice, the later row skipped by DO
    NOTHING; the table unchanged after an error, its indexes sound."""
    n = 10 * list(REPEATS).index(kind) + (gap > 3) + 2 * (key == "new")
    tp, td, s = f"ap_kp_{n}", f"ap_kd_{n}", f"ap_ks_{n}"
    path = tmp_path / "rows.txt"
    first = 100001 if key == "new" else 4
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0", "directpath.batch_pages": "1"})
        for t in (tp, td):
            conn.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, v int, n text)")
            conn.execute(f"INSERT INTO {t} SELECT g * 2, 0, 'old' FROM generate_series(1, 500) g")
            conn.execute(f"VACUUM {t}")
        conn.execute(f"CREATE TABLE {s} (o int, k int, v int, n text)")
        conn.execute(f"INSERT INTO {s} SELECT 0, {first}, 1, 'first' UNION ALL "
                     f"SELECT g, 200000 + g, 1, repeat('x', 40) FROM generate_series(1, {gap}) g "
                     f"UNION ALL SELECT {gap + 1}, {first}, 2, 'second'")
        conn.execute(f"CREATE VIEW {s}_v AS SELECT k, v, n FROM {s} ORDER BY o")
        conn.execute(f"COPY (SELECT * FROM {s}_v) TO '{path}'")
        ref = REFERENCE.get(kind, REPEATS[kind])
        before = table_digest(conn, td)
        plain = sqlstate_of(conn, ref.format(t=tp, s=f"{s}_v", path=path))
        direct = sqlstate_of(conn, "/*+ APPEND */ " +
                             REPEATS[kind].format(t=td, s=f"{s}_v", path=path))
        assert direct == plain, (kind, gap, key, direct, plain)
        if direct is None:
            assert table_digest(conn, td) == table_digest(conn, tp)
        else:
            assert table_digest(conn, td) == before
        check_table(conn, td)


def test_statement_own_rows_and_an_earlier_commands(cluster):
    """A row an earlier command of the transaction inserted is a row of the
    table to DO UPDATE (updated, flush or not); only the statement's own rows
    raise 21000."""
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0", "directpath.batch_pages": "1"})
        conn.execute("CREATE TABLE ap_e (k int PRIMARY KEY, v int)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO ap_e VALUES (9001, 1)")
        conn.execute("/*+ APPEND */ INSERT INTO ap_e SELECT g, 1 FROM generate_series(1, 5000) g "
                     "UNION ALL SELECT 9001, 2 ON CONFLICT (k) DO UPDATE SET v = excluded.v")
        assert conn.execute("SELECT v FROM ap_e WHERE k = 9001").fetchone() == (2,)
        with pytest.raises(psycopg.errors.CardinalityViolation):
            conn.execute("/*+ APPEND */ INSERT INTO ap_e SELECT g, 3 FROM "
                         "generate_series(10001, 15000) g UNION ALL SELECT 10001, 4 "
                         "ON CONFLICT (k) DO UPDATE SET v = excluded.v")
        conn.execute("ROLLBACK")


UNIQUE_STATEMENTS = {
    "update from": "UPDATE {t} x SET v = s.v, grp = s.grp FROM {s} s WHERE x.id = s.id",
    "do update": ("INSERT INTO {t} AS x SELECT * FROM {s} ON CONFLICT (id) DO UPDATE "
                  "SET v = excluded.v, grp = excluded.grp"),
    "merge": ("MERGE INTO {t} x USING {s} s ON x.id = s.id "
              "WHEN MATCHED THEN UPDATE SET v = s.v, grp = s.grp "
              "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.a, s.b, s.code, s.flag, s.v, s.grp)"),
}


@pytest.mark.parametrize("statement", list(UNIQUE_STATEMENTS))
def test_unique_keys_repeated_by_new_versions(cluster, statement):
    """A bulk update assigns no column of a unique index, so each new
    version repeats its old version's keys there and its entries are added
    without core's uniqueness check (dp_indexes_keys_repeat).  Unique indexes
    of every kind (a primary key, two columns with INCLUDE, an expression,
    a partial one) must still hold every new version, found by every
    access path, and still refuse a duplicate of an updated row's key."""
    n = 30000
    with cluster.conn() as conn:
        set_gucs(conn, {"directpath.min_bytes": "0"})
        conn.execute("DROP TABLE IF EXISTS uk_s")
        conn.execute(f"CREATE TABLE uk_s AS SELECT g::bigint AS id, g % 97 AS a, g AS b, "
                     f"'C' || g AS code, g % 5 = 0 AS flag, 'new' || g AS v, g % 11 AS grp "
                     f"FROM generate_series(1, {n}) g WHERE g % 3 <> 0 ORDER BY hashint4(g)")
        for t in ("uk_p", "uk_d"):
            conn.execute(f"DROP TABLE IF EXISTS {t}")
            conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, a int, b int, code text, "
                         f"flag bool, v text, grp int)")
            conn.execute(f"CREATE UNIQUE INDEX ON {t} (a, b) INCLUDE (code)")
            conn.execute(f"CREATE UNIQUE INDEX ON {t} (lower(code))")
            conn.execute(f"CREATE UNIQUE INDEX ON {t} (b) WHERE flag")
            conn.execute(f"CREATE INDEX ON {t} (grp)")
            conn.execute(f"INSERT INTO {t} SELECT g, g % 97, g, 'C' || g, g % 5 = 0, "
                         f"'old' || g, 0 FROM generate_series(2, {n}, 2) g")
            conn.execute(f"VACUUM ANALYZE {t}")
        sql = UNIQUE_STATEMENTS[statement]
        plain = conn.execute(sql.format(t="uk_p", s="uk_s")).rowcount
        direct = conn.execute("/*+ APPEND */ " + sql.format(t="uk_d", s="uk_s")).rowcount
        rep = last_statement(conn)
        assert "in bulk" in rep["updates"] and "by core" not in rep["updates"], rep
        assert direct == plain
        assert table_digest(conn, "uk_d") == table_digest(conn, "uk_p")
        updated = conn.execute("SELECT count(*) FROM uk_d WHERE left(v, 3) = 'new' "
                               "AND id % 2 = 0").fetchone()[0]
        assert updated > n // 4
        check_table(conn, "uk_d")
        # id 4 was updated (4 % 3 <> 0); 20 is updated and in the partial index
        dups = {
            "pkey": "INSERT INTO {t} VALUES (4, -1, -4, 'x4', false, '', 0)",
            "a, b": "INSERT INTO {t} VALUES (-4, 4, 4, 'x-4', false, '', 0)",
            "lower(code)": "INSERT INTO {t} VALUES (-5, -1, -5, 'c4', false, '', 0)",
            "partial": "INSERT INTO {t} VALUES (-20, -1, 20, 'x-20', true, '', 0)",
        }
        for what, ins in dups.items():
            for t in ("uk_p", "uk_d"):
                assert sqlstate_of(conn, ins.format(t=t)) == "23505", (statement, what, t)
        # after VACUUM the old versions are gone: the new entries still lead
        conn.execute("VACUUM uk_d")
        check_table(conn, "uk_d")
