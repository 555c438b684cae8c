"""Scenario 15: tables born ready, CREATE TABLE AS and REFRESH MATERIALIZED VIEW.

N rows (default 5M) of 5 columns (bigint, int, timestamptz, numeric, md5
text) from a settled unlogged source table: `CREATE TABLE ... AS SELECT`
and `REFRESH MATERIALIZED VIEW` of a view over the same query, plain
against hinted (src/statement/born.c).  Time is the statement plus the
CHECKPOINT after it, ratio against the plain form of the same run; also
the WAL the statement wrote (ratio too) and the pages left all-frozen.
The target is dropped (CTAS) or the view refreshed from its WITH NO DATA
state (REFRESH) before every run, untimed.  Issue 27's goals: <= 0.65 of
the time, WAL <= 0.6, every page frozen.

Statistics at load time: after each statement, before any ANALYZE, the
planner's row estimates of eleven predicates against their actual counts
(q-error: the larger over the smaller, median and max), then the same
after an ANALYZE (what sampling allows); the hinted CREATE TABLE AS runs
once more with directpath.load_statistics = off, so the
report gives the cost of gathering them (goals: median q-error <= 1.1,
max <= 1.5; with / without statistics <= 1.05).
"""

import time

from .measure import check_direct
from .scenario import Case, Scenario
from .util import BenchError

SOURCE = ("SELECT g::bigint AS id, g % 1000 AS grp, timestamptz '2026-01-01' + g * interval "
          "'1 s' AS ts, (g % 100000)::numeric / 100 AS amount, md5(g::text) AS v "
          "FROM generate_series(1, {n}) g")
QUERY = "SELECT * FROM born_src"
# case: (label, path, twin, statement)
CASES = {
    "ctas_plain": ("CREATE TABLE AS, plain", "plain", None,
                   "CREATE TABLE born_t AS " + QUERY),
    "ctas_direct": ("CREATE TABLE AS, /*+ APPEND */", "direct", "ctas_plain",
                    "/*+ APPEND */ CREATE TABLE born_t AS " + QUERY),
    "ctas_nostats": ("CREATE TABLE AS, /*+ APPEND */, load_statistics off", "direct",
                     "ctas_plain", "/*+ APPEND */ CREATE TABLE born_t AS " + QUERY),
    "ctas_par1": ("CREATE TABLE AS, /*+ APPEND PARALLEL(1) */", "direct", "ctas_plain",
                  "/*+ APPEND PARALLEL(1) */ CREATE TABLE born_t AS " + QUERY),
    "refresh_plain": ("REFRESH MATERIALIZED VIEW, plain", "plain", None,
                      "REFRESH MATERIALIZED VIEW born_mv"),
    "refresh_direct": ("REFRESH MATERIALIZED VIEW, /*+ APPEND */", "direct", "refresh_plain",
                       "/*+ APPEND */ REFRESH MATERIALIZED VIEW born_mv"),
    "refresh_par1": ("REFRESH MATERIALIZED VIEW, /*+ APPEND PARALLEL(1) */", "direct",
                     "refresh_plain", "/*+ APPEND PARALLEL(1) */ REFRESH MATERIALIZED VIEW born_mv"),
}


# predicates whose estimates are compared with their counts; {n} is the row count
PREDICATES = ["grp = 7", "grp < 100", "grp IN (1, 2, 3)", "id < {n} / 50",
              "id BETWEEN {n} / 2 AND {n} / 2 + {n} / 100",
              "ts < timestamptz '2026-01-01' + ({n} / 10) * interval '1 s'",
              "amount > 900", "amount BETWEEN 100 AND 200", "v LIKE 'ab%'",
              "v = md5('12345')", "grp = 7 AND id < {n} / 2"]


def q_errors(c, target, n):
    """(median, max) q-error of the planner's estimates for PREDICATES."""
    qs = []
    for p in PREDICATES:
        where = p.format(n=n)
        plan = c.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {target} WHERE {where}").fetchone()[0]
        est = plan[0]["Plan"]["Plan Rows"]
        actual = c.execute(f"SELECT count(*) FROM {target} WHERE {where}").fetchone()[0]
        qs.append(max(est, actual, 1) / max(min(est, actual), 1))
    qs.sort()
    return qs[len(qs) // 2], qs[-1]


class BornScenario(Scenario):
    key = "born"
    number = 15
    title = "Tables born ready: CREATE TABLE AS, REFRESH MATERIALIZED VIEW"
    phases = ("replica",)
    alone = True
    default_rows = 5_000_000

    def prepare(self, ctx, phase):
        with ctx.server.conn() as c:
            c.execute("DROP MATERIALIZED VIEW IF EXISTS born_mv")
            c.execute("DROP TABLE IF EXISTS born_src")
            c.execute(f"CREATE UNLOGGED TABLE born_src AS {SOURCE.format(n=ctx.rows)}")
            c.execute("VACUUM ANALYZE born_src")

    def cases(self, ctx, phase):
        return [Case(key, label, path, twin=twin, group="born",
                     params={"direct": path == "direct", "sql": sql})
                for key, (label, path, twin, sql) in CASES.items()]

    def run(self, ctx, case, run_no):
        n = ctx.rows
        rec = {"rows": n}
        target = "born_mv" if case.id.startswith("refresh") else "born_t"
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS born_t")
            c.execute("DROP MATERIALIZED VIEW IF EXISTS born_mv")
            if target == "born_mv":
                c.execute(f"CREATE MATERIALIZED VIEW born_mv AS {QUERY} WITH NO DATA")
            c.execute("CHECKPOINT")
            c.execute("SET directpath.load_statistics = %s"
                      % ("off" if case.id == "ctas_nostats" else "on"))
            time.sleep(ctx.settle_s)
            lsn = c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
            t0 = time.perf_counter()
            c.execute(case.params["sql"])
            if case.params["direct"]:
                ls = check_direct(c, case.id, n)
                rec["parallel_workers"] = ls["parallel_workers"]
                if case.id.endswith("_par1") and not ls["parallel_workers"]:
                    raise BenchError(f"born {case.id}: ran serially: {ls['parallel']}")
            rec["wal_bytes"] = int(c.execute("SELECT pg_current_wal_insert_lsn() - %s::pg_lsn",
                                             (lsn,)).fetchone()[0])
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            frozen, pages = c.execute(
                f"SELECT count(*) FILTER (WHERE all_frozen), count(*) "
                f"FROM pg_visibility_map('{target}')").fetchone()
            rec["frozen_pages"] = f"{frozen} of {pages}"
            rec["digest"] = c.execute(f"SELECT count(*), sum(hashtext(t::text)) "
                                      f"FROM {target} t").fetchone()[1]
            rec["statistics"] = c.execute(
                "SELECT statistics FROM directpath.last_statement()").fetchone()[0] \
                if case.params["direct"] else None
            rec["qerror"] = list(q_errors(c, target, n))
            c.execute(f"ANALYZE {target}")
            rec["qerror_analyze"] = list(q_errors(c, target, n))
        return rec
