"""Scenario 13: pg_restore with the setting only.

A pgbench database (pgbench -i -s S, S = rows / 200,000: accounts,
branches, tellers, their primary keys) is dumped once per suite run in
pg_dump's custom format, then restored into a new database by pg_restore,
plain and with PGOPTIONS='-c directpath.mode=always' (no other change: its
COPYs take the direct path, read by the row former), each both as separate
transactions (pg_restore's default) and with --single-transaction (the
tables are new in the COPY's transaction, so the direct path writes them
frozen and all-visible; checked with pg_visibility_map_summary).

Time is pg_restore's whole run (tables, COPYs, primary keys) plus a
CHECKPOINT; ratios against the plain restore of the same form in the same
run.  This is the pg_restore goal of issue 24.
"""

import subprocess
import time

from .scenario import Case, Scenario
from .util import BenchError

# (key, label, directpath.mode = always, --single-transaction)
MODES = (("plain", "pg_restore", False, False),
         ("always", "pg_restore, directpath.mode = always", True, False),
         ("plain_1x", "pg_restore --single-transaction", False, True),
         ("always_1x", "pg_restore --single-transaction, directpath.mode = always", True, True))


class RestoreScenario(Scenario):
    key = "restore"
    number = 13
    title = "pg_restore of a pgbench database: plain vs directpath.mode = always"
    phases = ("replica",)
    alone = True
    default_rows = 10_000_000

    def prepare(self, ctx, phase):
        self.scale = ctx.pgbench_scale
        self.dump = ctx.workdir / f"restore_s{self.scale}.dump"
        if self.dump.exists():
            return
        with ctx.server.conn() as c:
            c.execute("DROP DATABASE IF EXISTS restore_src")
            c.execute("CREATE DATABASE restore_src")
        self.tool(ctx, ["pgbench", "-i", "-q", "-s", str(self.scale), "restore_src"])
        self.tool(ctx, ["pg_dump", "-Fc", "-f", str(self.dump), "restore_src"])

    def tool(self, ctx, args, pgoptions=None):
        r = subprocess.run([str(ctx.server.bin(args[0]))] + args[1:],
                           env=ctx.server.client_env(pgoptions), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=3600,
                           cwd=str(ctx.workdir))
        if r.returncode != 0:
            raise BenchError(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout[-3000:]}")
        return r.stdout

    def cases(self, ctx, phase):
        return [Case(key, label, "direct" if always else "plain",
                     twin=("plain_1x" if single else "plain") if always else None,
                     group="restore", params={"always": always, "single": single})
                for key, label, always, single in MODES]

    def run(self, ctx, case, run_no):
        always, single = case.params["always"], case.params["single"]
        rec = {"rows": self.scale * 100000, "scale": self.scale}
        with ctx.server.conn() as c:
            c.execute("DROP DATABASE IF EXISTS restore_dst")
            c.execute("CREATE DATABASE restore_dst")
            c.execute("CHECKPOINT")
        time.sleep(0.5)
        t0 = time.perf_counter()
        self.tool(ctx, ["pg_restore", "-d", "restore_dst"]
                  + (["--single-transaction"] if single else []) + [str(self.dump)],
                  pgoptions="-c directpath.mode=always" if always else None)
        with ctx.server.conn("restore_dst") as c:
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            n = c.execute("SELECT count(*) FROM pgbench_accounts").fetchone()[0]
            if n != self.scale * 100000:
                raise AssertionError(f"{case.id}: {n} accounts restored")
            if single:
                c.execute("CREATE EXTENSION IF NOT EXISTS pg_visibility")
                pages = c.execute("SELECT pg_relation_size('pgbench_accounts') / "
                                  "current_setting('block_size')::int").fetchone()[0]
                frozen = c.execute("SELECT all_frozen FROM pg_visibility_map_summary("
                                   "'pgbench_accounts')").fetchone()[0]
                rec["frozen_pages"] = f"{frozen}/{pages}"
                if always and frozen != pages:
                    raise AssertionError(f"{case.id}: {frozen} of {pages} pages frozen: "
                                         "the COPY did not take the direct path")
        return rec
