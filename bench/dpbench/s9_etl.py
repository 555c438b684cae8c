"""Scenario 9: an ETL append into an indexed table, and a load into new
storage with indexes.

ETL append: N rows appended to a table that already holds N rows, with a
bigserial primary key, a timestamptz btree and a btree on hashint4(acct)
(a random key), by COPY from a CSV file and by INSERT ... SELECT from a
staging table, plain against direct.  New storage: the same three indexes on
a table created in the loading transaction (BEGIN; CREATE TABLE; CREATE
INDEX x3; INSERT; COMMIT), plain against direct; afterwards the heap pages
found in shared buffers (pg_buffercache) and each index's size against a
fresh CREATE INDEX on the same rows (REINDEX).  Time is the load plus the
CHECKPOINT after it; ratios against the plain load of the same run.
"""

import time

from .measure import check_direct
from .scenario import Case, Scenario

INDEXES = ["CREATE INDEX ON {t} (ts)", "CREATE INDEX ON {t} (hashint4(acct))"]
TABLE = "(id bigserial PRIMARY KEY, ts timestamptz, acct int, amount numeric, note text)"
GEN = ("SELECT '2026-01-01'::timestamptz + g * interval '1 second', "
       "(g * 7919) % 100000, g % 1000, 'note ' || (g % 97) FROM generate_series({a}, {b}) g")
COLS = "(ts, acct, amount, note)"

CASES = (("copy", "ETL append, COPY from a file", "etl"),
         ("insert", "ETL append, INSERT ... SELECT", "etl"),
         ("new", "new storage + 3 btrees, INSERT ... SELECT", "new"))


class EtlScenario(Scenario):
    key = "etl"
    number = 9
    title = "ETL append into an indexed table; new storage with indexes"
    phases = ("replica",)
    alone = True
    default_rows = 2_000_000

    def prepare(self, ctx, phase):
        n = ctx.rows
        with ctx.server.conn() as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
            c.execute("DROP TABLE IF EXISTS etl_stage")
            c.execute("CREATE UNLOGGED TABLE etl_stage "
                      "(ts timestamptz, acct int, amount numeric, note text)")
            c.execute(f"INSERT INTO etl_stage {GEN.format(a=n + 1, b=2 * n)}")
            c.execute(f"COPY etl_stage TO '{ctx.workdir / 'etl.csv'}' WITH (FORMAT csv)")
            c.execute("VACUUM ANALYZE etl_stage")

    def cases(self, ctx, phase):
        out = []
        for key, label, group in CASES:
            out.append(Case(f"{key}_plain", f"{label}, plain", "plain", group=group,
                            params={"kind": key, "direct": False}))
            out.append(Case(f"{key}_direct", f"{label}, direct", "direct",
                            twin=f"{key}_plain", group=group,
                            params={"kind": key, "direct": True}))
        return out

    def _load(self, ctx, c, kind, direct):
        hint = "/*+ APPEND */ " if direct else ""
        if kind == "copy":
            c.execute(f"{hint}COPY etl {COLS} FROM '{ctx.workdir / 'etl.csv'}' WITH (FORMAT csv)")
        else:
            c.execute(f"{hint}INSERT INTO etl {COLS} SELECT * FROM etl_stage")

    def run(self, ctx, case, run_no):
        kind, direct = case.params["kind"], case.params["direct"]
        n = ctx.rows
        rec = {"rows": n}
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS etl")
            if kind != "new":
                c.execute(f"CREATE TABLE etl {TABLE}")
                for ddl in INDEXES:
                    c.execute(ddl.format(t="etl"))
                c.execute(f"INSERT INTO etl {COLS} {GEN.format(a=1, b=n)}")
                c.execute("VACUUM ANALYZE etl")
            c.execute("CHECKPOINT")
            time.sleep(0.5)
            t0 = time.perf_counter()
            if kind == "new":
                c.execute("BEGIN")
                c.execute(f"CREATE TABLE etl {TABLE}")
                for ddl in INDEXES:
                    c.execute(ddl.format(t="etl"))
            self._load(ctx, c, kind, direct)
            if direct:
                ls = check_direct(c, case.id, n)
                rec["index_maintenance"] = ls.get("index_maintenance")
            if kind == "new":
                c.execute("COMMIT")
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            if kind == "new":
                rec.update(_new_storage_facts(c))
            c.execute("DROP TABLE etl")
        return rec


def _new_storage_facts(c):
    """Heap pages in shared buffers, and index sizes against a fresh build."""
    heap_pages, in_buffers = c.execute(
        "SELECT pg_relation_size('etl') / 8192, "
        "(SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('etl') "
        "AND relforknumber = 0)").fetchone()
    sizes = dict(c.execute(
        "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
        "WHERE indrelid = 'etl'::regclass").fetchall())
    c.execute("REINDEX TABLE etl")
    fresh = dict(c.execute(
        "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
        "WHERE indrelid = 'etl'::regclass").fetchall())
    return {"heap_pages": heap_pages, "heap_pages_in_buffers": in_buffers,
            "heap_in_buffers_pct": 100.0 * in_buffers / heap_pages if heap_pages else 0.0,
            "index_size_ratio_max": max(sizes[i] / fresh[i] for i in sizes)}
