"""Scenario 17: parallel loads into (and out of) partitioned tables.

Two shapes, each loaded plain, by the serial direct path and by
/*+ APPEND PARALLEL(1) */ (issue 28's goals):

  month   N time-series rows (default 3M: dev int, ts timestamp, v float8,
          note text) into a table range-partitioned by month in 8
          partitions, a (dev, ts) btree on each, by INSERT ... SELECT from a
          staging table partitioned the same way, by the same INSERT with
          the staging table joined to a 1000-row device table (a hash
          join: parplan.c), and by COPY from a server-side text file;
  rollup  a summary of the month rows per device (GROUP BY device: 1,000
          rows) into a plain table by INSERT ... SELECT: core's parallel
          query runs the SELECT, the leader loads its rows (pargather.c;
          core estimates a GROUP BY on an expression such as date_trunc
          at one group per row, and plans that serially);
  hash64  10/3 N seed rows (default 10M) into a table hash-partitioned on
          insid in 64 partitions, no index, by INSERT ... SELECT from a
          plain staging table.

The target is created (with its indexes) in an earlier transaction and
dropped after each run.  Time is the load plus the CHECKPOINT after it;
ratios against the plain load of the same statement in the same run.  A
direct case must say `direct` and a PARALLEL case must have had a worker
(else the suite fails).
"""

import time

from pgharness.sql import seed_select

from .s11_parallel import check_workers, worker_cases, worker_hint
from .scenario import Scenario

MONTHS = 8
MONTH_COLS = "(dev int, ts timestamp, v float8, note text)"
MONTH_ROWS = ("SELECT g % 1000, timestamp '2026-01-01' + ((g::bigint * 7919) % ({days} * 86400)) "
              "* interval '1 s', (g % 100003) / 7.0, substr(md5(g::text), 1, 12) "
              "FROM generate_series(1, {n}) g")
SEED_COLS = "(timeid int, insid int, indid int, value int)"
MODES = (("plain", "plain", None), ("serial", "direct, serial", 0),
         ("p1", "direct, PARALLEL(1)", 1))
# (case key prefix, label, target shape, statement after the hint)
LOADS = (("ins_", "8 monthly partitions + btree, INSERT ... SELECT from a partitioned table",
          "month", "INSERT INTO pp_t SELECT * FROM pp_stage"),
         ("copy_", "8 monthly partitions + btree, COPY from a file",
          "month", "COPY pp_t FROM '{file}'"),
         ("join_", "8 monthly partitions + btree, INSERT ... SELECT joining the partitioned table to a device table",
          "month", "INSERT INTO pp_t SELECT s.dev, s.ts, s.v * d.scale, d.site || s.note "
                   "FROM pp_stage s JOIN pp_dev d USING (dev)"),
         ("agg_", "a summary per device (1,000 groups) of the partitioned table, INSERT ... SELECT ... GROUP BY",
          "rollup", "INSERT INTO pp_t SELECT dev, max(ts), count(*), avg(v) "
                    "FROM pp_stage GROUP BY dev"),
         ("hash_", "64 hash partitions, INSERT ... SELECT (seed rows)",
          "hash64", "INSERT INTO pp_t SELECT * FROM pp_seed"))


def month_bounds(i):
    return f"'2026-01-01'::timestamp + interval '{i} month'"


def create_month(c, table):
    c.execute(f"CREATE TABLE {table} {MONTH_COLS} PARTITION BY RANGE (ts)")
    for i in range(MONTHS):
        c.execute(f"CREATE TABLE {table}_{i} PARTITION OF {table} "
                  f"FOR VALUES FROM ({month_bounds(i)}) TO ({month_bounds(i + 1)})")


def create_target(c, shape):
    if shape == "rollup":
        c.execute("CREATE TABLE pp_t (dev int, day timestamp, n bigint, v float8)")
    elif shape == "month":
        create_month(c, "pp_t")
        c.execute("CREATE INDEX ON pp_t (dev, ts)")
    else:
        c.execute(f"CREATE TABLE pp_t {SEED_COLS} PARTITION BY HASH (insid)")
        for i in range(64):
            c.execute(f"CREATE TABLE pp_t_{i} PARTITION OF pp_t "
                      f"FOR VALUES WITH (MODULUS 64, REMAINDER {i})")


class ParPartScenario(Scenario):
    key = "parpart"
    number = 17
    title = "Parallel loads into partitioned tables"
    phases = ("replica",)
    alone = True
    default_rows = 3_000_000

    def hash_rows(self, ctx):
        return ctx.rows * 10 // 3

    def prepare(self, ctx, phase):
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS pp_stage, pp_seed, pp_t, pp_dev")
            c.execute("CREATE TABLE pp_dev AS SELECT g AS dev, 1.0::float8 AS scale, "
                      "'s' || g % 40 || ':' AS site FROM generate_series(0, 999) g")
            c.execute("VACUUM ANALYZE pp_dev")
            create_month(c, "pp_stage")
            # 8 months of about 30 days: every row falls in a partition
            c.execute(f"INSERT INTO pp_stage {MONTH_ROWS.format(n=ctx.rows, days=MONTHS * 30)}")
            c.execute(f"CREATE TABLE pp_seed {SEED_COLS}")
            c.execute(f"INSERT INTO pp_seed {seed_select(self.hash_rows(ctx))}")
            c.execute("VACUUM ANALYZE pp_stage")
            self.groups = c.execute("SELECT count(DISTINCT dev) FROM pp_stage").fetchone()[0]
            c.execute("VACUUM ANALYZE pp_seed")
            self.file = ctx.workdir / f"pp_month_{ctx.rows}.txt"
            if not self.file.exists():
                c.execute(f"COPY (SELECT * FROM pp_stage) TO '{self.file}'")

    def cases(self, ctx, phase):
        return worker_cases("parpart", [
            (prefix, what, {"statement": statement, "shape": shape})
            for prefix, what, shape, statement in LOADS], MODES)

    def run(self, ctx, case, run_no):
        shape = case.params["shape"]
        n = {"month": ctx.rows, "rollup": self.groups}.get(shape) or self.hash_rows(ctx)
        rec = {"rows": n}
        hint = worker_hint(case.params["workers"])
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS pp_t")
            create_target(c, shape)
            c.execute("CHECKPOINT")
            time.sleep(ctx.settle_s)
            t0 = time.perf_counter()
            c.execute(hint + case.params["statement"].format(file=self.file))
            check_workers(c, case, n, rec)
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            rec["digest"] = c.execute("SELECT count(*), sum(hashtext(t::text)) "
                                      "FROM pp_t t").fetchone()[1]
            c.execute("DROP TABLE pp_t")
        return rec
