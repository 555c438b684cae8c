"""Scenario 7: index maintenance on existing tables: plain INSERT against
the direct path with entries inserted row by row (directpath.index_sort =
off), sorted per batch and inserted (index_append, index_runs,
index_leaf_merge and index_merge off), and the default (appended at the
right edge, written as runs inside the tree, merged into leaves or into a
rewrite, or inserted sorted).  "Retry" loads the same rows again after the
same load failed at its end (its last row repeats the first key), each path
after its own failure: its entries meet the failed load's dead ones.

One cluster of its own with the settings of docs/baseline.md.  The seed rows
of seed 000 (2M by default) go into a table created and indexed in an
earlier transaction, for each index set below.  Time is the load plus the
CHECKPOINT after it, on the client; the report gives medians with min-max
and ratios against the plain INSERT of the same run, and the share of the
table's heap pages found in shared buffers after the load.
"""

import time

from pgharness.sql import TABLE_COLUMNS, seed_select

from .measure import check_direct
from .scenario import Case, Scenario

INDEX_SETS = {
    "btree3": ("3 btrees (1 on a random key)",
               ["CREATE UNIQUE INDEX ON t (timeid, indid, insid)",
                "CREATE INDEX ON t (insid)",
                "CREATE INDEX ON t (hashint4(value))"]),
    "random": ("1 btree on a random key", ["CREATE INDEX ON t (hashint4(value))"]),
    "streams": ("1 unique btree, keys in 50 streams",
                ["CREATE UNIQUE INDEX ON t (timeid, indid, insid)"]),
    "pkey": ("primary key, sequential", ["ALTER TABLE t ADD PRIMARY KEY (indid)"]),
    "retry": ("primary key, retry of a failed load", ["ALTER TABLE t ADD PRIMARY KEY (indid)"]),
}
OFF = {"directpath.index_append": "off", "directpath.index_merge": "off",
       "directpath.index_runs": "off", "directpath.index_leaf_merge": "off"}
MODES = (("plain", "plain", None),
         ("rowwise", "direct, row by row", dict(OFF, **{"directpath.index_sort": "off"})),
         ("sorted", "direct, sorted inserts", OFF),
         ("default", "direct, default", {}))


def fail_first(c, hint, rows):
    """The same load, failing at its end (its last row repeats the first
    key), then a CHECKPOINT and an empty buffer cache for the table: what
    a retry finds."""
    try:
        c.execute(f"{hint}INSERT INTO t {seed_select(rows)} UNION ALL {seed_select(1)}")
    except Exception as e:      # the unique violation, as intended
        if "duplicate key" not in str(e):
            raise
    else:
        raise AssertionError("the load meant to fail succeeded")
    c.execute("CHECKPOINT")
    # the plain path's failure left its heap pages in shared buffers; the
    # retry is judged on what it reads itself (17+ can evict them)
    if c.execute("SELECT to_regproc('pg_buffercache_evict') IS NOT NULL").fetchone()[0]:
        c.execute("SELECT count(pg_buffercache_evict(bufferid)) FROM pg_buffercache "
                  "WHERE relfilenode = pg_relation_filenode('t')")


class IndexScenario(Scenario):
    key = "indexes"
    number = 7
    seed = "000"
    title = "Index maintenance on existing tables: row by row, sorted, appended or merged"
    phases = ("replica",)
    alone = True
    default_rows = 2_000_000

    def cases(self, ctx, phase):
        return [Case(f"{key}_{mode}", f"{label}, {mlabel}", "plain" if sort is None else "direct",
                     twin=None if sort is None else f"{key}_plain",
                     params={"indexes": ddl, "sort": sort, "set": label, "mode": mlabel},
                     group=key)
                for key, (label, ddl) in INDEX_SETS.items() for mode, mlabel, sort in MODES]

    def run(self, ctx, case, run_no):
        settings = case.params["sort"]
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS t")
            c.execute(f"CREATE TABLE t {TABLE_COLUMNS}")
            for ddl in case.params["indexes"]:
                c.execute(ddl)
            c.execute("CHECKPOINT")
            time.sleep(0.5)
            c.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
            hint = ""
            if settings is not None:
                for k, v in settings.items():
                    c.execute(f"SET {k} = {v}")
                hint = "/*+ APPEND */ "
            if case.group == "retry":
                fail_first(c, hint, ctx.rows)
            t0 = time.perf_counter()
            c.execute(f"{hint}INSERT INTO t {seed_select(ctx.rows)}")
            if settings is not None:
                check_direct(c, case.params["mode"], ctx.rows)
                maintenance = c.execute("SELECT index_maintenance FROM "
                                        "directpath.last_statement()").fetchone()[0]
            c.execute("CHECKPOINT")
            elapsed = time.perf_counter() - t0
            in_buffers = c.execute(
                "SELECT count(*)::float8 / greatest(pg_relation_size('t') / 8192, 1) "
                "FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('t') "
                "AND relforknumber = 0").fetchone()[0]
            c.execute("DROP TABLE t")
        rec = {"rows": ctx.rows, "load_ckpt_s": elapsed, "indexes": case.params["set"],
               "mode": case.params["mode"], "heap_in_buffers": in_buffers}
        if settings is not None:
            rec["index_maintenance"] = maintenance
        return rec
