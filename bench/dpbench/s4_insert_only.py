"""Scenario 4 (seed 001): insert-only data model against UPDATE, with pgbench and in batch.

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

The same comparison in batch (issue 47: the bulk UPDATE beside it): after
`pgbench -i`, one statement applies a change set of A/5 balance changes
(A accounts; random order, from a staging table) either as an UPDATE ...
FROM (the update model) or as an INSERT ... SELECT of the accounts' next
versions (the insert-only model), each plain and `/*+ APPEND */`. Time is
the statement plus the CHECKPOINT after it; WAL up to the CHECKPOINT's
end; growth; the VACUUM that follows. Every case must leave the same
current balances (their sum, read the model's way, is compared).
autovacuum stays off (baseline settings), as everywhere but scenario 5.
"""

import os
import time
from pathlib import Path

from .measure import check_direct, checkpoint_settle, insert_lsn, parse_pgbench_run, pgbench, \
    wal_diff
from .scenario import Case, Scenario
from .util import BenchError

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"
TABLES = ("pgbench_accounts", "pgbench_history")


STAGE = ("CREATE TABLE io_changes AS SELECT g * 5 AS aid, (g * 37) % 10001 - 5000 AS delta "
         "FROM generate_series(1, {accounts} / 5) g ORDER BY hashint4(g)")
BATCH = {
    "update": "UPDATE pgbench_accounts a SET abalance = a.abalance + c.delta "
              "FROM io_changes c WHERE a.aid = c.aid",
    "insert_only": "INSERT INTO pgbench_accounts (aid, version, bid, abalance, filler) "
                   "SELECT a.aid, a.version + 1, a.bid, a.abalance + c.delta, a.filler "
                   "FROM pgbench_accounts a JOIN io_changes c ON a.aid = c.aid",
}
# the current balances, read the model's way
BALANCES = {
    "update": "SELECT sum(abalance) FROM pgbench_accounts",
    "insert_only": "SELECT sum(abalance) FROM (SELECT DISTINCT ON (aid) abalance "
                   "FROM pgbench_accounts ORDER BY aid, version DESC) v",
}


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
        ] + [
            Case(f"{model}_batch_{'direct' if direct else 'plain'}",
                 f"{label}{', /*+ APPEND */' if direct else ', plain'}",
                 "direct" if direct else "plain", group="batch",
                 twin=None if (model, direct) == ("update", False) else "update_batch_plain",
                 params={"batch": model, "direct": direct})
            for model, label in (("update", "UPDATE ... FROM the change set"),
                                 ("insert_only", "insert-only: INSERT ... SELECT of the next versions"))
            for direct in (False, True)
        ]

    def run(self, ctx, case, run_no):
        if case.params.get("batch"):
            return self.run_batch(ctx, case)
        s = ctx.pgbench_scale
        pgbench(ctx, ["-i", "-q", "-s", s])
        with ctx.server.conn() as conn:
            if case.id == "insert_only":
                insert_only_schema(conn)
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
            rec.update(accounts_growth(before, after))
            rec["history_growth_bytes"] = (after["pgbench_history"]["heap_bytes"]
                                           - before["pgbench_history"]["heap_bytes"])
            rec["total_growth_bytes"] = sum(after[t]["heap_bytes"] + after[t]["index_bytes"]
                                            - before[t]["heap_bytes"] - before[t]["index_bytes"]
                                            for t in TABLES)
            rec["pgbench_tail"] = out[-1500:]
            conn.execute("DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, "
                         "pgbench_tellers, pgbench_history")
        return rec

    def run_batch(self, ctx, case):
        """One change set applied in one statement, the update or the insert-only way."""
        s = ctx.pgbench_scale
        model = case.params["batch"]
        accounts = 100000 * s
        pgbench(ctx, ["-i", "-q", "-s", s])
        with ctx.server.conn() as conn:
            if model == "insert_only":
                insert_only_schema(conn)
            conn.execute("DROP TABLE IF EXISTS io_changes")
            conn.execute(STAGE.format(accounts=accounts))
            conn.execute("VACUUM ANALYZE")
            before = sizes(conn)
            checkpoint_settle(ctx, conn)
            sql = ("/*+ APPEND */ " if case.params["direct"] else "") + BATCH[model]
            rec = {"scale": s, "accounts": accounts, "changes": accounts // 5}
            l0 = insert_lsn(conn)
            t0 = time.perf_counter()
            changed = conn.execute(sql).rowcount
            if case.params["direct"]:
                ls = check_direct(conn, case.id, None)
                if model == "update" and "in bulk" not in (ls.get("updates") or ""):
                    raise BenchError(f"{case.id}: not made in bulk: {ls.get('updates')}")
            rec["load_s"] = time.perf_counter() - t0
            conn.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            rec["wal_bytes"] = wal_diff(conn, l0, insert_lsn(conn))
            if changed != accounts // 5:
                raise BenchError(f"{case.id}: changed {changed} rows, expected {accounts // 5}")
            rec.update(accounts_growth(before, sizes(conn)))
            l1 = insert_lsn(conn)
            t1 = time.perf_counter()
            conn.execute("VACUUM pgbench_accounts")
            rec["vac_s"] = time.perf_counter() - t1
            rec["vac_wal_bytes"] = wal_diff(conn, l1, insert_lsn(conn))
            rec["digest"] = int(conn.execute(BALANCES[model]).fetchone()[0])
            conn.execute("DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, "
                         "pgbench_tellers, pgbench_history, io_changes")
        return rec


def accounts_growth(before, after):
    """pgbench_accounts' heap and index growth between two sizes()."""
    b, a = before["pgbench_accounts"], after["pgbench_accounts"]
    return {"accounts_heap_growth_bytes": a["heap_bytes"] - b["heap_bytes"],
            "accounts_index_growth_bytes": a["index_bytes"] - b["index_bytes"]}


def insert_only_schema(conn):
    """pgbench_accounts converted to the insert-only model (the seed's schema)."""
    text = "\n".join(l for l in (WORKLOADS / "insert_only_schema.sql").read_text().splitlines()
                     if not l.strip().startswith("--"))
    for stmt in text.split(";"):
        if stmt.strip():
            conn.execute(stmt)
