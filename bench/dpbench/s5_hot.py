"""Scenario 5 (seed 003): HOT updates and expression indexes.

The seed's table t5 (c1 jsonb, c2 int, c3 int) with two rows and its
two-UPDATE pgbench script (workloads/hot.sql): each UPDATE rewrites c1 but
keeps c1->>'prenom'.  Configurations:
  - expr_idx:   indexes on (c1->>'prenom') and on c2 (the seed's);
  - noexpr_idx: only the index on c2 (the expression's column not indexed);
each with autovacuum off and on.  The seed ran PostgreSQL 11.0, whose
recheck_on_update (default on) let an UPDATE stay HOT when the indexed
expression's value did not change; 11.1 removed it.  Since then any change
to a column an expression index reads makes the UPDATE non-HOT, so
expr_idx shows current behaviour and noexpr_idx the best case.
pgbench: simple protocol (as the seed), 2 clients / 2 threads (the seed: 6
clients, 1 thread, 120 s).  With autovacuum on, autovacuum_naptime is scaled
to the run length (duration / 6, at least 1 s; the seed's runs lasted two
default naptimes).
"""

import os
import time
from pathlib import Path

from .measure import checkpoint_settle, insert_lsn, parse_pgbench_run, pgbench, wal_diff
from .scenario import Case, Scenario

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"

STAT_COLS = ("n_tup_upd", "n_tup_hot_upd", "n_dead_tup", "n_live_tup", "autovacuum_count",
             "autoanalyze_count")


class HotScenario(Scenario):
    key = "hot"
    number = 5
    seed = "003"
    title = "HOT updates and expression indexes (seed 003)"
    phases = ("replica",)

    def cases(self, ctx, phase):
        out = []
        for av in ("off", "on"):
            out.append(Case(f"expr_idx_av_{av}", f"indexes on c1->>'prenom' and c2, autovacuum {av}",
                            "expr-index", params={"expr": True, "autovacuum": av}, group=av))
            out.append(Case(f"noexpr_idx_av_{av}", f"index on c2 only, autovacuum {av}",
                            "no-expr-index", twin=f"expr_idx_av_{av}",
                            params={"expr": False, "autovacuum": av}, group=av))
        return out

    def naptime(self, ctx):
        return max(1, int(ctx.duration) // 6)

    def run(self, ctx, case, run_no):
        av = case.params["autovacuum"]
        with ctx.server.conn() as conn:
            try:
                if av == "on":
                    conn.execute("ALTER SYSTEM SET autovacuum = on")
                    conn.execute(f"ALTER SYSTEM SET autovacuum_naptime = '{self.naptime(ctx)}s'")
                    conn.execute("SELECT pg_reload_conf()")
                conn.execute("DROP TABLE IF EXISTS t5")
                conn.execute("CREATE TABLE t5 (c1 jsonb, c2 int, c3 int)")
                if case.params["expr"]:
                    conn.execute("CREATE INDEX t5_expr_idx ON t5 ((c1->>'prenom'))")
                conn.execute("CREATE INDEX t5_c2_idx ON t5 (c2)")
                conn.execute("""INSERT INTO t5 VALUES ('{ "prenom":"adrien" , "valeur" : "1"}'::jsonb,1,1)""")
                conn.execute("""INSERT INTO t5 VALUES ('{ "prenom":"guillaume" , "valeur" : "2"}'::jsonb,2,2)""")
                checkpoint_settle(ctx, conn)
                setting = conn.execute("SHOW autovacuum").fetchone()[0]
                rec = {"duration_s": ctx.duration, "clients": 2, "autovacuum": setting,
                       "autovacuum_naptime": conn.execute("SHOW autovacuum_naptime").fetchone()[0],
                       "loadavg_before": os.getloadavg()[0]}
                l0 = insert_lsn(conn)
                t0 = time.perf_counter()
                out = pgbench(ctx, ["-n", "-c", "2", "-j", "2", "-T", ctx.duration, "-M", "simple",
                                    "-f", WORKLOADS / "hot.sql"])
                rec["wall_s"] = time.perf_counter() - t0
                rec["wal_bytes"] = wal_diff(conn, l0, insert_lsn(conn))
                rec.update(parse_pgbench_run(out))
                rec["wal_per_tx"] = rec["wal_bytes"] / rec["transactions"]
                # the pgbench backends flush their statistics as they exit
                time.sleep(1.5)
                conn.execute("SELECT pg_stat_clear_snapshot()")
                row = conn.execute(f"SELECT {', '.join(STAT_COLS)} FROM pg_stat_user_tables "
                                   "WHERE relid = 't5'::regclass").fetchone()
                rec.update(dict(zip(STAT_COLS, row)))
                rec["hot_ratio"] = (rec["n_tup_hot_upd"] / rec["n_tup_upd"]) if rec["n_tup_upd"] else None
                rec["table_bytes"] = conn.execute("SELECT pg_relation_size('t5')").fetchone()[0]
                rec["c2_idx_bytes"] = conn.execute("SELECT pg_relation_size('t5_c2_idx')").fetchone()[0]
                rec["expr_idx_bytes"] = conn.execute(
                    "SELECT pg_relation_size('t5_expr_idx')").fetchone()[0] \
                    if case.params["expr"] else None
                rec["pgbench_tail"] = out[-1200:]
                conn.execute("DROP TABLE t5")
            finally:
                if av == "on":
                    conn.execute("ALTER SYSTEM RESET autovacuum")
                    conn.execute("ALTER SYSTEM RESET autovacuum_naptime")
                    conn.execute("SELECT pg_reload_conf()")
        return rec
