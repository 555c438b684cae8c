"""Scenario 11: a parallel direct-path INSERT ... SELECT and COPY.

The seed rows (N, default 2M) are loaded into an empty table created in an
earlier transaction, without indexes, by INSERT ... SELECT from a staging
table and by COPY from a server-side text file: plain, the serial direct
path, and /*+ APPEND PARALLEL(n) */ with n = 1, 2, 4 and 8 workers (the
machine has the cores it has: past them the workers only share them).
The INSERT is also run into a table created, with a btree on insid, in
the load's own transaction (new storage: the direct path builds the index
at the end), and with RETURNING insid, its rows fetched by the client.
Time is the load plus the CHECKPOINT after it; ratios against the plain load of the same statement in the same run; the workers
each load actually had (last_statement().parallel_workers).
"""

import time

from pgharness.sql import seed_select

from .measure import check_direct
from .scenario import Case, Scenario

MODES = (("plain", "plain", None), ("serial", "direct, serial", 0),
         ("p1", "direct, PARALLEL(1)", 1), ("p2", "direct, PARALLEL(2)", 2),
         ("p4", "direct, PARALLEL(4)", 4), ("p8", "direct, PARALLEL(8)", 8))
# (case key prefix, label prefix, statement after the hint, new storage
# with a btree: the table and its index created in the load's transaction)
LOADS = (("", "INSERT", "INSERT INTO par_t SELECT * FROM par_stage", False),
         ("copy_", "COPY", "COPY par_t FROM '{file}'", False),
         ("btree_", "INSERT, new storage + btree (insid)",
          "INSERT INTO par_t SELECT * FROM par_stage", True),
         ("ret_", "INSERT ... RETURNING insid (the rows fetched)",
          "INSERT INTO par_t SELECT * FROM par_stage RETURNING insid", False))
CREATE = "CREATE TABLE par_t (timeid int, insid int, indid int, value int)"


def worker_cases(group, loads, modes=MODES):
    """A case per load ((prefix, label, params)) and mode; a load's plain
    case is the twin of its others."""
    return [Case(prefix + key, f"{what}: {label}",
                 "plain" if workers is None else "direct",
                 twin=None if workers is None else prefix + "plain", group=group,
                 params=dict(params, workers=workers, mode=label))
            for prefix, what, params in loads
            for key, label, workers in modes]


def worker_hint(workers):
    """The hint of a mode: none (plain), APPEND, or APPEND PARALLEL(n)."""
    if workers is None:
        return ""
    return "/*+ APPEND */ " if workers == 0 else f"/*+ APPEND PARALLEL({workers}) */ "


def check_workers(c, case, rows, rec):
    """A direct case must have been direct, a PARALLEL case parallel."""
    workers = case.params["workers"]
    if workers is None:
        return
    ls = check_direct(c, case.id, rows)
    rec["parallel_workers"] = ls.get("parallel_workers")
    if workers > 0 and not ls.get("parallel_workers"):
        raise AssertionError(f"{case.id}: ran serially: {ls.get('parallel')}")


class ParallelScenario(Scenario):
    key = "parallel"
    number = 11
    title = "Parallel direct path: INSERT ... SELECT from a staging table"
    phases = ("replica",)
    alone = True
    default_rows = 2_000_000

    def prepare(self, ctx, phase):
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS par_stage")
            c.execute("CREATE TABLE par_stage (timeid int, insid int, indid int, value int)")
            c.execute(f"INSERT INTO par_stage {seed_select(ctx.rows)}")
            c.execute("VACUUM ANALYZE par_stage")
            self.file = ctx.workdir / f"par_seed_{ctx.rows}.txt"
            if not self.file.exists():
                c.execute(f"COPY par_stage TO '{self.file}'")

    def cases(self, ctx, phase):
        return worker_cases("parallel", [
            (prefix, what, {"statement": statement, "new_btree": new_btree})
            for prefix, what, statement, new_btree in LOADS])

    def run(self, ctx, case, run_no):
        rec = {"rows": ctx.rows, "mode": case.params["mode"]}
        hint = worker_hint(case.params["workers"])
        new_btree = case.params["new_btree"]
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS par_t")
            if not new_btree:
                c.execute(CREATE)
            c.execute("CHECKPOINT")
            time.sleep(0.5)
            t0 = time.perf_counter()
            if new_btree:
                c.execute("BEGIN")
                c.execute(CREATE)
                c.execute("CREATE INDEX ON par_t (insid)")
            cur = c.execute(hint + case.params["statement"].format(file=self.file))
            if cur.description is not None:
                rec["returned"] = len(cur.fetchall())
                if rec["returned"] != ctx.rows:
                    raise AssertionError(f"{case.id}: {rec['returned']} rows returned")
            check_workers(c, case, ctx.rows, rec)
            if new_btree:
                c.execute("COMMIT")
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            c.execute("DROP TABLE par_t")
        return rec
