"""Scenario 8: what a statement pays for being considered and then left on
the normal path.

Small statements cannot fill a page, so they end on the normal path; the
question is what the hint or directpath.mode = always costs them on the way.
Three statement shapes into a table with a bigserial primary key: one row of
VALUES, 100 rows of VALUES (both known to be small at plan time) and
INSERT ... SELECT of 100 rows from generate_series (small only at run time).
Each is run with pgbench (one client, simple protocol, a fresh table per
run) as a plain INSERT, with the hint, and unhinted under mode = always.
(A statement left on the normal path only for its size reports at DEBUG1:
no NOTICE per statement reaches the client.)  The figure is the time per statement against
the plain one of the same run (plain tps / tps); the goal is <= 1.05.
"""

from .measure import pgbench
from .scenario import Case, Scenario
from .util import BenchError

ROWS100 = ", ".join(f"({i % 7}, 'row text {i}')" for i in range(100))
SHAPES = {
    "values1": ("1 row of VALUES",
                "INSERT INTO fb (a, b) VALUES (1, 'row text 1');"),
    "values100": ("100 rows of VALUES", f"INSERT INTO fb (a, b) VALUES {ROWS100};"),
    "select100": ("INSERT ... SELECT of 100 rows",
                  "INSERT INTO fb (a, b) SELECT g % 7, 'row text ' || g "
                  "FROM generate_series(1, 100) g;"),
}
# (id, label, hint, settings)
MODES = (("plain", "plain", False, None),
         ("hinted", "/*+ APPEND */", True, None),
         ("always", "directpath.mode = always", False, "-c directpath.mode=always"))


class FallbackScenario(Scenario):
    key = "fallback"
    number = 8
    title = "Small statements left on the normal path: the cost of being considered"
    phases = ("replica",)

    def cases(self, ctx, phase):
        return [Case(f"{shape}_{mode}", f"{slabel}, {mlabel}",
                     "plain" if mode == "plain" else "direct",
                     twin=None if mode == "plain" else f"{shape}_plain",
                     params={"shape": shape, "hint": hint, "options": opts,
                             "shape_label": slabel, "mode_label": mlabel},
                     group=shape)
                for shape, (slabel, _) in SHAPES.items()
                for mode, mlabel, hint, opts in MODES]

    def run(self, ctx, case, run_no):
        p = case.params
        sql = SHAPES[p["shape"]][1]
        if p["hint"]:
            sql = "/*+ APPEND */ " + sql
        script = ctx.workdir / f"fallback_{case.id}.sql"
        script.write_text(sql + "\n")
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS fb")
            c.execute("CREATE TABLE fb (id bigserial PRIMARY KEY, a int, b text)")
            c.execute("CHECKPOINT")
        duration = max(2, min(ctx.duration, 10))
        out = pgbench(ctx, ["-n", "-c", "1", "-T", duration, "-M", "simple", "-f", script],
                      pgoptions=p["options"])
        tps = _tps(out)
        with ctx.server.conn() as c:
            ls = c.execute("SELECT path FROM directpath.last_statement()").fetchone()
            c.execute("DROP TABLE fb")
        if ls is not None and ls[0] == "direct":
            raise BenchError(f"{case.id}: a small statement took the direct path")
        return {"tps": tps, "us_per_stmt": 1e6 / tps, "shape": p["shape_label"],
                "mode": p["mode_label"], "duration_s": duration}


def _tps(out):
    for line in out.splitlines():
        if line.startswith("tps = "):
            return float(line.split()[2])
    raise BenchError(f"could not parse pgbench output:\n{out[-2000:]}")
