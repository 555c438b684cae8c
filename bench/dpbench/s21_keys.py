"""Scenario 21: the ETL append by key type (issue 45's neighbours).

N rows appended by COPY (CSV) to a table that already holds N rows and
whose primary key has one of the types real schemas use: bigint, numeric,
uuid, text under the "C" collation and under the database's, varchar
codes, char(n); each key scattered over its range (ordered by a hash, as
uuids and natural keys arrive), and once bigint keys that arrive in
order (a sequence).  The table has two more columns (an int and a short
text).  Plain COPY against /*+ APPEND */ COPY of the same file; time is the
COPY plus the CHECKPOINT after it, the table rebuilt, filled, vacuumed and
checkpointed before each run.
"""

import time

from .measure import check_direct
from .report_base import load_rows, titled_table
from .scenario import Scenario, twin_cases
from .util import MiB, fmt_stat, md_table

# key: (label, column type, key expression of g)
KEYS = (("int8", "bigint, scattered", "bigint", "g::int8 * 7919 % 1000000007"),
        ("int8_seq", "bigint, in order", "bigint", "g"),
        ("numeric", "numeric(14,2), scattered", "numeric(14,2)",
         "(g::int8 * 7919 % 1000000007) / 100.0"),
        ("uuid", "uuid, scattered", "uuid", "md5(g::text)::uuid"),
        ("text_c", "text COLLATE \"C\", scattered", "text COLLATE \"C\"", "md5(g::text)"),
        ("text_db", "text (the database's collation), scattered", "text", "md5(g::text)"),
        ("varchar", "varchar(40) codes, scattered", "varchar(40)", "'SKU-' || md5(g::text)"),
        ("bpchar", "char(32), scattered", "char(32)", "md5(g::text)"))


def gen(expr, first, last, scattered):
    order = " ORDER BY hashint4(g)" if scattered else ""
    return (f"SELECT {expr}, g::int, 'row ' || g FROM generate_series({first}, {last}) g"
            f"{order}")


class KeysScenario(Scenario):
    key = "keys"
    number = 21
    title = "ETL append by key type"
    alone = True
    default_rows = 1_000_000

    def prepare(self, ctx, phase):
        self.n = ctx.rows or self.default_rows
        with ctx.server.conn() as c:
            for key, _, _, expr in KEYS:
                c.execute(f"COPY ({gen(expr, self.n + 1, 2 * self.n, key != 'int8_seq')}) "
                          f"TO '{ctx.workdir / f'keys_{key}.csv'}' WITH (FORMAT csv)")

    def cases(self, ctx, phase):
        return twin_cases(((key, label) for key, label, _, _ in KEYS), "keys", param="key",
                          direct_label=", /*+ APPEND */")

    def run(self, ctx, case, run_no):
        key, direct = case.params["key"], case.params["direct"]
        _, _, ctype, expr = next(k for k in KEYS if k[0] == key)
        rec = {"rows": self.n}
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS keys_t")
            c.execute(f"CREATE TABLE keys_t (k {ctype} PRIMARY KEY, v int, pad text)")
            c.execute(f"INSERT INTO keys_t {gen(expr, 1, self.n, key != 'int8_seq')}")
            c.execute("VACUUM ANALYZE keys_t")
            c.execute("CHECKPOINT")
            time.sleep(ctx.settle_s)
            lsn0 = c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
            t0 = time.perf_counter()
            c.execute(("/*+ APPEND */ " if direct else "") +
                      f"COPY keys_t FROM '{ctx.workdir / f'keys_{key}.csv'}' WITH (FORMAT csv)")
            rec["load_s"] = time.perf_counter() - t0
            if direct:
                rec["index_maintenance"] = check_direct(c, case.id, self.n).get(
                    "index_maintenance")
            rec["wal_bytes"] = int(c.execute(
                "SELECT pg_current_wal_insert_lsn() - %s::pg_lsn", (lsn0,)).fetchone()[0])
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            c.execute("DROP TABLE keys_t")
        return rec


# ------------------------------------------------------------- report ----

HEADER = ["load", "load + CHECKPOINT s", "/ plain", "WAL MB", "index maintenance"]


def rows(agg):
    return load_rows(agg, "keys",
                     lambda a: fmt_stat(a.st("wal_bytes"), 0, MiB),
                     lambda a: a.first("index_maintenance") or "")


def section(agg):
    cases = agg.cases("keys", "replica")
    if not cases:
        return []
    return ["## 21. ETL append by key type", "",
            f"{cases[0].first('rows'):,} rows appended by COPY (CSV) to a table holding as "
            "many, whose primary key has the type the row names; keys scattered over their "
            "range unless the row says in order. Time is the COPY and the CHECKPOINT after "
            "it; ratio against the plain COPY of the same run.", "",
            md_table(HEADER, rows(agg)), ""]


def text(agg):
    return titled_table("ETL append by key type", HEADER, rows(agg))
