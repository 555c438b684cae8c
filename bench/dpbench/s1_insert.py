"""Scenario 1 (seed 000): direct path INSERT ... SELECT against plain INSERT.

The seed table and load of seed 000 (docs/baseline.md):
    desttable (timeid int, insid int, indid int, value int)
    SELECT a % 50, a % 10000, a, a FROM generate_series(1, N) a

Matrix, at wal_level replica and minimal: plain INSERT vs /*+ APPEND */,
into an existing table (created in an earlier transaction), a table created
in the loading transaction (no index only) and a table truncated in the
loading transaction; with no index, one unique btree, three btrees (one on a
random key) and a BRIN index.  References: producing the rows only,
INSERT into an UNLOGGED table (plain and direct), CREATE TABLE AS.
"""

from pgharness.sql import TABLE_COLUMNS as COLUMNS
from pgharness.sql import seed_select

from .measure import measure_load, measure_query
from .scenario import Case, Scenario

INDEXES = {
    "none": [],
    "unique": ["CREATE UNIQUE INDEX t_uniq ON t (timeid, indid, insid)"],
    # one on a deterministic random key: hashint4 scatters the inserts
    "btree3": ["CREATE UNIQUE INDEX t_uniq ON t (timeid, indid, insid)",
               "CREATE INDEX t_insid ON t (insid)",
               "CREATE INDEX t_rand ON t (hashint4(value))"],
    "brin": ["CREATE INDEX t_brin ON t USING brin (value)"],
}
INDEX_LABEL = {
    "none": "no index",
    "unique": "1 unique btree",
    "btree3": "3 btrees (1 on a random key)",
    "brin": "BRIN",
}
STORAGE_LABEL = {
    "existing": "existing table",
    "created": "CREATE TABLE in the tx",
    "truncated": "TRUNCATE in the tx",
}


class InsertScenario(Scenario):
    key = "insert"
    number = 1
    seed = "000"
    title = "Direct path INSERT ... SELECT (seed 000)"
    phases = ("replica", "minimal")

    def cases(self, ctx, phase):
        out = [Case("rows_only", "producing the rows only: SELECT count(*) FROM (...)",
                    "reference", twin="plain_existing_none", group="reference")]
        for idx in ("none", "unique", "btree3", "brin"):
            storages = ("existing", "created", "truncated") if idx == "none" else \
                ("existing", "truncated")
            for st in storages:
                plain = f"plain_{st}_{idx}"
                out.append(Case(plain, f"INSERT, {STORAGE_LABEL[st]}, {INDEX_LABEL[idx]}",
                                "plain", twin="plain_existing_none" if plain != "plain_existing_none"
                                else None, params={"storage": st, "idx": idx}, group=idx))
                out.append(Case(f"direct_{st}_{idx}",
                                f"/*+ APPEND */ INSERT, {STORAGE_LABEL[st]}, {INDEX_LABEL[idx]}",
                                "direct", twin=plain, params={"storage": st, "idx": idx},
                                group=idx))
        out.append(Case("plain_unlogged", "INSERT into an UNLOGGED table", "unlogged",
                        twin="plain_existing_none", params={"storage": "unlogged", "idx": "none"},
                        group="reference"))
        out.append(Case("direct_unlogged", "/*+ APPEND */ INSERT into an UNLOGGED table", "direct",
                        twin="plain_unlogged", params={"storage": "unlogged", "idx": "none"},
                        group="reference"))
        out.append(Case("ctas", "CREATE TABLE AS SELECT", "reference", twin="plain_existing_none",
                        params={"storage": "ctas", "idx": "none"}, group="reference"))
        return out

    def run(self, ctx, case, run_no):
        n = ctx.rows
        sel = seed_select(n, named=True)
        if case.id == "rows_only":
            return measure_query(ctx, f"SELECT count(*) FROM ({sel}) s", n)
        st, idx = case.params["storage"], case.params["idx"]
        hint = "/*+ APPEND */ " if case.path == "direct" else ""
        insert = f"{hint}INSERT INTO t {sel}"
        setup = ["DROP TABLE IF EXISTS t"]
        if st == "existing":
            setup += [f"CREATE TABLE t {COLUMNS}"] + INDEXES[idx]
            load = [insert]
        elif st == "created":
            load = ["BEGIN", f"CREATE TABLE t {COLUMNS}"] + INDEXES[idx] + [insert, "COMMIT"]
        elif st == "truncated":
            setup += [f"CREATE TABLE t {COLUMNS}"] + INDEXES[idx]
            load = ["BEGIN", "TRUNCATE t", insert, "COMMIT"]
        elif st == "unlogged":
            setup += [f"CREATE UNLOGGED TABLE t {COLUMNS}"]
            load = [insert]
        elif st == "ctas":
            load = [f"CREATE TABLE t AS {sel}"]
        else:
            raise ValueError(st)
        rec = measure_load(ctx, setup=setup, load=load, tables=["t"], rows=n,
                           expect="direct" if case.path == "direct" else None,
                           cleanup=["DROP TABLE t"], what=f"scenario 1 {case.id} ({ctx.phase})")
        rec["indexes"] = INDEXES[idx]
        return rec
