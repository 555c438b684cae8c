"""Scenario 2 (seed 002): COPY, COPY FREEZE, direct COPY and pgbench -i.

COPY reads a server-side text file written once with COPY ... TO.  Direct
COPY is COPY with directpath.mode = always; whether directpath handles COPY
yet is detected (a COPY, then directpath.last_statement() must report
path = 'direct'): where it does not, those rows read "not available".

pgbench -i -s S (S = rows / 200,000, at least 1): default steps (dtgvp,
client-side COPY ... FREEZE) and server-side generation (dtGvp, one
INSERT ... SELECT in the truncating transaction), each plain and with
PGOPTIONS='-c directpath.mode=always'; pgbench's own step timings, WAL,
and pgbench_accounts' visibility map after it.
"""

import os
import re
import time

from pgharness.sql import TABLE_COLUMNS as COLUMNS
from pgharness.sql import seed_select

from .measure import (checkpoint_settle, handled, insert_lsn, measure_load,
                      parse_pgbench_init, pgbench, vm_summary, wal_diff)
from .scenario import Case, Scenario
from .util import FellBack, log

ALWAYS = "SET directpath.mode = always"
FALLBACK = re.compile(r"directpath: (\w+) uses the normal path: (.*)")
NOT_YET = re.compile(r"not (yet )?(supported|implemented|available|handled)", re.I)


class CopyScenario(Scenario):
    key = "copy"
    number = 2
    seed = "002"
    title = "COPY, COPY FREEZE, direct COPY and pgbench -i (seed 002)"
    phases = ("replica", "minimal")

    def prepare(self, ctx, phase):
        self.file = ctx.workdir / f"seed_{ctx.rows}.txt"
        with ctx.server.conn() as conn:
            if not self.file.exists():
                log(f"writing the COPY file {self.file}")
                conn.execute(f"COPY ({seed_select(ctx.rows)}) TO '{self.file}'")
            ctx.facts.setdefault("copy", {})[phase] = self.probe_direct_copy(ctx, conn)
        avail = ctx.facts["copy"][phase]
        if not avail["available"]:
            ctx.note(self.key, f"Direct COPY not available ({phase}): {avail['why']}.")

    def probe_direct_copy(self, ctx, conn):
        """Does COPY take the direct path?  A fresh session, mode=always."""
        probe = ctx.workdir / "probe.txt"
        n = 20000
        conn.execute(f"COPY ({seed_select(n)}) TO '{probe}'")
        with ctx.server.conn() as c2:
            c2.execute(ALWAYS)
            c2.execute("DROP TABLE IF EXISTS dp_copy_probe")
            c2.execute(f"CREATE TABLE dp_copy_probe {COLUMNS}")
            c2.execute(f"COPY dp_copy_probe FROM '{probe}'")
            ls = handled(c2)
            c2.execute("DROP TABLE dp_copy_probe")
        if ls is None:
            return {"available": False, "why": "directpath.last_statement() is empty after a "
                    "COPY with directpath.mode = always (COPY is not handled yet)"}
        if ls["path"] == "direct":
            return {"available": True, "why": None, "probe": ls}
        if ls["reason"] and NOT_YET.search(ls["reason"]):
            return {"available": False, "why": f"COPY used the normal path: {ls['reason']}",
                    "probe": ls}
        raise FellBack(f"direct COPY probe: a COPY into a plain new table with "
                       f"directpath.mode = always fell back: {ls['reason']}")

    def cases(self, ctx, phase):
        out = [
            Case("copy", "COPY into existing table", "plain", group="copy"),
            Case("copy_truncated", "BEGIN; TRUNCATE; COPY; COMMIT", "plain", twin="copy",
                 group="copy"),
            Case("copy_freeze", "BEGIN; TRUNCATE; COPY (FREEZE); COMMIT", "plain", twin="copy",
                 group="copy"),
            Case("direct_copy", "direct COPY (mode=always), existing table", "direct",
                 twin="copy", group="copy"),
            Case("direct_copy_truncated", "direct COPY (mode=always), BEGIN; TRUNCATE; COPY; "
                 "COMMIT", "direct", twin="copy_truncated", group="copy"),
        ]
        if phase == "replica":
            out += [
                Case("pgbench_i", "pgbench -i (dtgvp: client-side COPY FREEZE)", "plain",
                     params={"steps": None, "always": False}, group="pgbench"),
                Case("pgbench_i_always", "pgbench -i (dtgvp), mode=always",
                     "direct", twin="pgbench_i", params={"steps": None, "always": True},
                     group="pgbench"),
                Case("pgbench_i_G", "pgbench -i -I dtGvp (server-side INSERT…SELECT)",
                     "plain", params={"steps": "dtGvp", "always": False}, group="pgbench"),
                Case("pgbench_i_G_always", "pgbench -i -I dtGvp, mode=always", "direct",
                     twin="pgbench_i_G", params={"steps": "dtGvp", "always": True},
                     group="pgbench"),
            ]
        return out

    def run(self, ctx, case, run_no):
        if case.group == "pgbench":
            return self.run_pgbench(ctx, case)
        n = ctx.rows
        direct = case.path == "direct"
        if direct and not ctx.facts["copy"][ctx.phase]["available"]:
            return {"status": "not available", "why": ctx.facts["copy"][ctx.phase]["why"]}
        copy = f"COPY t FROM '{self.file}'"
        setup = ["DROP TABLE IF EXISTS t", f"CREATE TABLE t {COLUMNS}"]
        if case.id in ("copy", "direct_copy"):
            load = [copy]
        elif case.id in ("copy_truncated", "direct_copy_truncated"):
            load = ["BEGIN", "TRUNCATE t", copy, "COMMIT"]
        elif case.id == "copy_freeze":
            load = ["BEGIN", "TRUNCATE t", copy + " WITH (FREEZE)", "COMMIT"]
        else:
            raise ValueError(case.id)
        return measure_load(ctx, setup=setup, load=load, tables=["t"], rows=n,
                            expect="direct" if direct else None,
                            conn_options=[ALWAYS] if direct else [], cleanup=["DROP TABLE t"],
                            what=f"scenario 2 {case.id} ({ctx.phase})")

    def run_pgbench(self, ctx, case):
        s = ctx.pgbench_scale
        args = ["-i", "-s", s]
        if case.params["steps"]:
            args += ["-I", case.params["steps"]]
        # DEBUG1 shows directpath's fallback messages for unhinted statements
        pgopt = "-c directpath.mode=always -c client_min_messages=debug1" \
            if case.params["always"] else None
        rec = {"scale": s, "rows": s * 100000, "loadavg_before": os.getloadavg()[0]}
        with ctx.server.conn() as conn:
            conn.execute("DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, "
                         "pgbench_tellers, pgbench_history")
            checkpoint_settle(ctx, conn)
            l0 = insert_lsn(conn)
            t0 = time.perf_counter()
            out = pgbench(ctx, args, pgoptions=pgopt)
            rec["wall_s"] = time.perf_counter() - t0
            rec["wal_bytes"] = wal_diff(conn, l0, insert_lsn(conn))
            rec.update(parse_pgbench_init(out))
            rec["load_s"] = rec["total_s"]
            steps = rec["steps"]
            rec["generate_s"] = steps.get("client-side generate", steps.get("server-side generate"))
            rec["vacuum_s"] = steps.get("vacuum")
            rec["pkeys_s"] = steps.get("primary keys")
            pages = conn.execute("SELECT pg_relation_size('pgbench_accounts') / 8192").fetchone()[0]
            rec["heap_pages"] = pages
            rec["heap_bytes"] = pages * 8192
            rec["vm_all_visible"], rec["vm_all_frozen"] = vm_summary(conn, ["pgbench_accounts"])
            # the freeze a user would eventually need, after a checkpoint
            t1 = time.perf_counter()
            conn.execute("CHECKPOINT")
            rec["ckpt_s"] = time.perf_counter() - t1
            l2 = insert_lsn(conn)
            t2 = time.perf_counter()
            conn.execute("VACUUM (FREEZE) pgbench_accounts")
            rec["vac_s"] = time.perf_counter() - t2
            rec["vac_wal_bytes"] = wal_diff(conn, l2, insert_lsn(conn))
            rec["load_ckpt_s"] = rec["load_s"] + rec["ckpt_s"]
            conn.execute("DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, "
                         "pgbench_tellers, pgbench_history")
        if case.params["always"]:
            falls = FALLBACK.findall(out)
            rec["fallbacks"] = [f"{k}: {why}" for k, why in falls]
            bad = [f for f in rec["fallbacks"] if "min_bytes" not in f]
            if bad:
                raise FellBack(f"scenario 2 {case.id}: with directpath.mode=always pgbench -i's "
                               f"load fell back: {'; '.join(bad)}")
            if case.params["steps"] == "dtGvp":
                # Server-side generation is one INSERT ... SELECT in the
                # truncating transaction: on the direct path its rows go out
                # frozen; the normal path (then the v step, with no
                # checkpoint between) leaves them all-visible, unfrozen.
                if rec["vm_all_frozen"] < rec["heap_pages"]:
                    raise FellBack(
                        f"scenario 2 {case.id}: pgbench_accounts has {rec['vm_all_frozen']} of "
                        f"{rec['heap_pages']} pages all-frozen after server-side generation "
                        f"with directpath.mode=always: its INSERT did not take the direct path")
                rec["direct_check"] = "pgbench_accounts all-frozen after G (direct INSERT)"
            elif not ctx.facts["copy"][ctx.phase]["available"]:
                rec["direct_check"] = "COPY not handled by directpath yet: same as default"
                ctx.note(self.key, "pgbench -i (client-side COPY) with directpath.mode=always "
                         "measures plain COPY FREEZE while direct COPY is not available.")
            else:
                rec["direct_check"] = ("no fallback reported at DEBUG1 (except tables under "
                                       "directpath.min_bytes)" if rec["fallbacks"] else
                                       "no fallback reported at DEBUG1")
        return rec
