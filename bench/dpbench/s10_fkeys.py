"""Scenario 10: a fact table with foreign keys.

N rows (default 2M) loaded into an empty table, created in an earlier
transaction, with foreign keys to a 100k-row and a 1k-row dimension and to
a "big" dimension of N rows, by INSERT ... SELECT from a staging table and by
COPY from a CSV file, plain against direct.  Time is the load plus the
CHECKPOINT after it; ratios against the plain load of the same run.  The
report says how the direct loads checked the keys
(last_statement().foreign_keys).
"""

import time

from .measure import check_direct
from .scenario import Scenario, twin_cases

COLS = "(d100k, d1k, dbig, amount)"
GEN = ("SELECT (g::bigint * 7919 % 100000)::int + 1, g % 1000 + 1, "
       "(g::bigint * 104729 % {n})::int + 1, g % 997 FROM generate_series(1, {n}) g")
CASES = (("insert", "INSERT ... SELECT"), ("copy", "COPY from a file"))


class FkeyScenario(Scenario):
    key = "fkeys"
    number = 10
    title = "A fact table with three foreign keys"
    phases = ("replica",)
    alone = True
    default_rows = 2_000_000

    def prepare(self, ctx, phase):
        n = ctx.rows
        with ctx.server.conn() as c:
            for name, rows in (("d100k", 100_000), ("d1k", 1_000), ("dbig", n)):
                c.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
                c.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, label text)")
                c.execute(f"INSERT INTO {name} SELECT g, 'l' || g FROM generate_series(1, {rows}) g")
                c.execute(f"VACUUM ANALYZE {name}")
            c.execute("DROP TABLE IF EXISTS fk_stage")
            c.execute("CREATE UNLOGGED TABLE fk_stage (d100k int, d1k int, dbig int, amount int)")
            c.execute(f"INSERT INTO fk_stage {GEN.format(n=n)}")
            c.execute(f"COPY fk_stage TO '{ctx.workdir / 'fk.csv'}' WITH (FORMAT csv)")
            c.execute("VACUUM ANALYZE fk_stage")

    def cases(self, ctx, phase):
        return twin_cases(CASES, "fkeys")

    def run(self, ctx, case, run_no):
        kind, direct = case.params["kind"], case.params["direct"]
        rec = {"rows": ctx.rows}
        hint = "/*+ APPEND */ " if direct else ""
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS fact")
            c.execute("CREATE TABLE fact (d100k int REFERENCES d100k, d1k int REFERENCES d1k, "
                      "dbig int REFERENCES dbig, amount int)")
            c.execute("CHECKPOINT")
            time.sleep(0.5)
            t0 = time.perf_counter()
            if kind == "copy":
                c.execute(f"{hint}COPY fact {COLS} FROM '{ctx.workdir / 'fk.csv'}' "
                          "WITH (FORMAT csv)")
            else:
                c.execute(f"{hint}INSERT INTO fact {COLS} SELECT * FROM fk_stage")
            if direct:
                rec["foreign_keys"] = check_direct(c, case.id, ctx.rows).get("foreign_keys")
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            c.execute("DROP TABLE fact")
        return rec
