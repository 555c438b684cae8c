"""Scenario 13: pg_restore with the setting only.

A pgbench database (pgbench -i -s S, S = rows / 200,000: accounts,
branches, tellers, their primary keys) is dumped once per suite run in
pg_dump's custom format, then restored into a new database by pg_restore,
plain and with PGOPTIONS='-c directpath.mode=always' (no other change: its
COPYs take the direct path, read by the row former), each both as separate
transactions (pg_restore's default) and with --single-transaction (the
tables are new in the COPY's transaction, so the direct path writes them
frozen and all-visible; checked with pg_visibility_map_summary).  A
second dump made with -Z 0 (no compression) shows what pg_restore's own
decompression, in the client on the same two cores, costs the restore.

Time is pg_restore's whole run (tables, COPYs, primary keys) plus a
CHECKPOINT; ratios against the plain restore of the same form in the same
run.  Without --single-transaction the restore runs as pg_restore's three
sections one after the other (--section=pre-data, data, post-data: the
same statements as one run), and the record keeps the data section's time
(the COPYs) and the post-data section's (the primary keys' index builds)
apart.  This is the pg_restore goal of issue 24.
"""

import subprocess
import time

from .scenario import Case, Scenario
from .util import BenchError

# (key, label, directpath.mode = always, --single-transaction, dump compressed)
MODES = (("plain", "pg_restore", False, False, True),
         ("always", "pg_restore, directpath.mode = always", True, False, True),
         ("plain_1x", "pg_restore --single-transaction", False, True, True),
         ("always_1x", "pg_restore --single-transaction, directpath.mode = always", True, True,
          True),
         ("plain_z0", "pg_restore of a dump made with -Z 0", False, False, False),
         ("always_z0", "pg_restore of a dump made with -Z 0, directpath.mode = always", True,
          False, False))


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
        self.dump_z0 = ctx.workdir / f"restore_s{self.scale}_z0.dump"
        if self.dump_z0.exists():
            return
        with ctx.server.conn() as c:
            c.execute("DROP DATABASE IF EXISTS restore_src")
            c.execute("CREATE DATABASE restore_src")
        self.tool(ctx, ["pgbench", "-i", "-q", "-s", str(self.scale), "restore_src"])
        self.tool(ctx, ["pg_dump", "-Fc", "-f", str(self.dump), "restore_src"])
        self.tool(ctx, ["pg_dump", "-Fc", "-Z", "0", "-f", str(self.dump_z0), "restore_src"])

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
                     twin=key.replace("always", "plain") if always else None,
                     group="restore", params={"always": always, "single": single,
                                              "compressed": compressed})
                for key, label, always, single, compressed in MODES]

    def run(self, ctx, case, run_no):
        always, single = case.params["always"], case.params["single"]
        dump = self.dump if case.params["compressed"] else self.dump_z0
        rec = {"rows": self.scale * 100000, "scale": self.scale}
        with ctx.server.conn() as c:
            c.execute("DROP DATABASE IF EXISTS restore_dst")
            c.execute("CREATE DATABASE restore_dst")
            c.execute("CHECKPOINT")
        time.sleep(0.5)
        t0 = time.perf_counter()
        opts = "-c directpath.mode=always" if always else None
        if single:
            self.tool(ctx, ["pg_restore", "-d", "restore_dst", "--single-transaction",
                            str(dump)], pgoptions=opts)
        else:
            for section in ("pre-data", "data", "post-data"):
                t1 = time.perf_counter()
                self.tool(ctx, ["pg_restore", "-d", "restore_dst", f"--section={section}",
                                str(dump)], pgoptions=opts)
                rec[f"{section}_s"] = time.perf_counter() - t1
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
