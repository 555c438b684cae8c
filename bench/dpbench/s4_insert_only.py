"""Scenario 4 (seed 001): insert-only data model against UPDATE, with pgbench.

pgbench -i -s S (S = rows / 200,000, at least 1) before every run, then for
D seconds (30, quick 5; --duration) with 2 clients / 2 threads, prepared
protocol, one of:
  - simple_update: pgbench's built-in simple-update (the seed's
    --skip-some-updates: UPDATE accounts, SELECT, INSERT INTO history);
  - update_only:   the same without the history insert (workloads/update_only.sql);
  - insert_only:   the seed's model (workloads/insert_only_schema.sql): a new
    version row per change, latest version read through the
    (aid, version) index (workloads/insert_only.sql).
Recorded: TPS, latency, WAL per transaction, table and index growth.
autovacuum stays off (baseline settings), as everywhere but scenario 5.
"""

import os
import time
from pathlib import Path

from .measure import checkpoint_settle, insert_lsn, parse_pgbench_run, pgbench, wal_diff
from .scenario import Case, Scenario

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"
TABLES = ("pgbench_accounts", "pgbench_history")


def sizes(conn):
    out = {}
    for t in TABLES:
        heap, idx = conn.execute("SELECT pg_relation_size(%s), pg_indexes_size(%s)",
                                 (t, t)).fetchone()
        out[t] = {"heap_bytes": heap, "index_bytes": idx}
    return out


class InsertOnlyScenario(Scenario):
    key = "update"
    number = 4
    seed = "001"
    title = "Insert-only data model vs UPDATE, pgbench (seed 001)"
    phases = ("replica",)

    def cases(self, ctx, phase):
        return [
            Case("simple_update", "UPDATE: pgbench -b simple-update (the seed's -N)", "update",
                 params={"script": None}),
            Case("update_only", "UPDATE only pgbench_accounts (no history insert)", "update",
                 twin="simple_update", params={"script": "update_only.sql"}),
            Case("insert_only", "insert-only: a new version row per change", "insert-only",
                 twin="simple_update", params={"script": "insert_only.sql"}),
        ]

    def run(self, ctx, case, run_no):
        s = ctx.pgbench_scale
        pgbench(ctx, ["-i", "-q", "-s", s])
        with ctx.server.conn() as conn:
            if case.id == "insert_only":
                text = "\n".join(l for l in (WORKLOADS / "insert_only_schema.sql")
                                 .read_text().splitlines() if not l.strip().startswith("--"))
                for stmt in text.split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
            conn.execute("VACUUM ANALYZE")
            before = sizes(conn)
            checkpoint_settle(ctx, conn)
            rec = {"scale": s, "duration_s": ctx.duration, "clients": 2,
                   "loadavg_before": os.getloadavg()[0]}
            args = ["-n", "-c", "2", "-j", "2", "-T", ctx.duration, "-M", "prepared", "-s", s]
            args += ["-b", "simple-update"] if case.params["script"] is None else \
                ["-f", WORKLOADS / case.params["script"]]
            l0 = insert_lsn(conn)
            t0 = time.perf_counter()
            out = pgbench(ctx, args)
            rec["wall_s"] = time.perf_counter() - t0
            rec["wal_bytes"] = wal_diff(conn, l0, insert_lsn(conn))
            rec.update(parse_pgbench_run(out))
            after = sizes(conn)
            rec["wal_per_tx"] = rec["wal_bytes"] / rec["transactions"] if rec["transactions"] else None
            rec["sizes_before"], rec["sizes_after"] = before, after
            rec["accounts_heap_growth_bytes"] = (after["pgbench_accounts"]["heap_bytes"]
                                                 - before["pgbench_accounts"]["heap_bytes"])
            rec["accounts_index_growth_bytes"] = (after["pgbench_accounts"]["index_bytes"]
                                                  - before["pgbench_accounts"]["index_bytes"])
            rec["history_growth_bytes"] = (after["pgbench_history"]["heap_bytes"]
                                           - before["pgbench_history"]["heap_bytes"])
            rec["total_growth_bytes"] = sum(after[t]["heap_bytes"] + after[t]["index_bytes"]
                                            - before[t]["heap_bytes"] - before[t]["index_bytes"]
                                            for t in TABLES)
            rec["pgbench_tail"] = out[-1500:]
            conn.execute("DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, "
                         "pgbench_tellers, pgbench_history")
        return rec
