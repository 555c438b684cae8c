"""Scenario 19: bulk UPDATE and DELETE (issue 47).

A settled table of N rows (default 5M: id bigint primary key, ts
timestamptz, grp int, v text, n int; btrees on ts and on grp), built,
vacuumed and analyzed before every run (not timed), takes one of four
statements, plain against `/*+ APPEND */`:

  - backfill: UPDATE of 30% of the rows setting n, a column no index has;
  - change set: UPDATE ... FROM a staging table of N/5 rows (one row in
    five of the table, random order), setting ts, grp and v: two indexed
    columns change;
  - purge: DELETE of the 30% oldest rows (a range of ts);
  - DELETE ... USING the same staging table;
  - the backfill, the purge and DELETE ... USING again on the same rows in
    a table range-partitioned by ts into 8 leaves (primary key (id, ts)),
    which the bulk path changes leaf by leaf.

Time is the statement plus the CHECKPOINT after it; WAL from before the
statement to after the CHECKPOINT, and how much of it is page images
(pg_walinspect): with full_page_writes on, one image of each page changed
after a checkpoint is the floor both paths pay, and what remains beyond
the images is what a per-row record costs; then the VACUUM that follows
(time and WAL), since what a bulk change leaves for VACUUM is part of its
cost.
Every case must change the rows the plain statement changes, and leave
the table's contents equal to it (compared by digest).
"""

import time

from .measure import check_direct, insert_lsn, wal_diff
from .scenario import Scenario, twin_cases
from .util import BenchError

TABLE = ("SELECT g, timestamptz '2025-01-01' + g * interval '1 s', g % 1000, md5(g::text), 0 "
         "FROM generate_series(1, {n}) g")
STAGE = ("SELECT g * 5, timestamptz '2027-01-01' + g * interval '1 s', (g * 7) % 1000, "
         "md5((g + 1)::text) FROM generate_series(1, {n} / 5) g ORDER BY hashint4(g)")
STATEMENTS = {
    "backfill": ("backfill: UPDATE 30% of the rows, no indexed column",
                 "UPDATE bd_t SET n = id % 97 WHERE id % 10 < 3", 0.3),
    "changeset": ("change set: UPDATE ... FROM N/5 staged rows, indexed columns",
                  "UPDATE bd_t t SET ts = s.ts, grp = s.grp, v = s.v FROM bd_stage s "
                  "WHERE t.id = s.id", 0.2),
    "purge": ("purge: DELETE of the 30% oldest rows",
              "DELETE FROM bd_t WHERE ts < timestamptz '2025-01-01' + ({n} * 3 / 10 + 1) "
              "* interval '1 s'", 0.3),
    "using": ("DELETE ... USING N/5 staged rows",
              "DELETE FROM bd_t t USING bd_stage s WHERE t.id = s.id", 0.2),
}
# the same statements on the table partitioned into PARTS ranges of ts
PARTS = 8
for _key in ("backfill", "purge", "using"):
    _label, _sql, _share = STATEMENTS[_key]
    STATEMENTS[_key + "_part"] = (f"{_label}, {PARTS} partitions", _sql, _share)


def create_table(c, n, partitioned):
    """bd_t, plain or range-partitioned by ts into PARTS leaves of equal rows."""
    if not partitioned:
        c.execute("CREATE TABLE bd_t (id bigint PRIMARY KEY, ts timestamptz, grp int, "
                  "v text, n int)")
    else:
        c.execute("CREATE TABLE bd_t (id bigint, ts timestamptz, grp int, v text, n int, "
                  "PRIMARY KEY (id, ts)) PARTITION BY RANGE (ts)")
        step = -(-n // PARTS)
        for i in range(PARTS):
            lo = "MINVALUE" if i == 0 else f"'2025-01-01'::timestamptz + {i * step + 1} * interval '1 s'"
            hi = ("MAXVALUE" if i == PARTS - 1 else
                  f"'2025-01-01'::timestamptz + {(i + 1) * step + 1} * interval '1 s'")
            c.execute(f"CREATE TABLE bd_t_{i} PARTITION OF bd_t FOR VALUES FROM ({lo}) TO ({hi})")
    c.execute("CREATE INDEX ON bd_t (ts)")
    c.execute("CREATE INDEX ON bd_t (grp)")


class BulkDmlScenario(Scenario):
    key = "bulk-dml"
    number = 19
    title = "Bulk UPDATE and DELETE"
    phases = ("replica",)
    alone = True
    default_rows = 5_000_000

    def settings(self, phase):
        # the statement's WAL stays readable for pg_walinspect until it is read
        return {"wal_keep_size": "4GB"}

    def prepare(self, ctx, phase):
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS bd_stage")
            c.execute("CREATE TABLE bd_stage (id bigint, ts timestamptz, grp int, v text)")
            c.execute(f"INSERT INTO bd_stage {STAGE.format(n=ctx.rows)}")
            c.execute("VACUUM ANALYZE bd_stage")
            c.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")

    def cases(self, ctx, phase):
        return twin_cases(((key, label) for key, (label, _sql, _share) in STATEMENTS.items()),
                          "bulk-dml", param="statement", direct_label=", /*+ APPEND */")

    def run(self, ctx, case, run_no):
        n = ctx.rows
        _label, sql, share = STATEMENTS[case.params["statement"]]
        sql = sql.format(n=n)
        if case.params["direct"]:
            sql = "/*+ APPEND */ " + sql
        rec = {"rows": n}
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS bd_t")
            create_table(c, n, case.params["statement"].endswith("_part"))
            c.execute(f"/*+ APPEND */ INSERT INTO bd_t {TABLE.format(n=n)}")
            c.execute("VACUUM ANALYZE bd_t")
            c.execute("CHECKPOINT")
            time.sleep(ctx.settle_s)
            l0 = insert_lsn(c)
            t0 = time.perf_counter()
            changed = c.execute(sql).rowcount
            if case.params["direct"]:
                ls = check_direct(c, case.id, None)
                rec["updates"] = ls.get("updates")
                if "in bulk" not in (ls.get("updates") or ""):
                    raise BenchError(f"{case.id}: not made in bulk: {ls.get('updates')}")
            rec["load_s"] = time.perf_counter() - t0
            l_stmt = insert_lsn(c)
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            rec["wal_bytes"] = wal_diff(c, l0, insert_lsn(c))
            # the statement's page images: one per changed page is what both pay
            rec["wal_fpi_bytes"] = int(c.execute(
                "SELECT coalesce(sum(fpi_size), 0) FROM pg_get_wal_stats(%s, %s)",
                (str(l0), str(l_stmt))).fetchone()[0])
            rec["wal_beyond_images_bytes"] = rec["wal_bytes"] - rec["wal_fpi_bytes"]
            expect = round(n * share)
            if abs(changed - expect) > n // 100:
                raise BenchError(f"{case.id}: changed {changed} rows, expected about {expect}")
            rec["changed"] = changed
            l1 = insert_lsn(c)
            t1 = time.perf_counter()
            c.execute("VACUUM bd_t")
            rec["vac_s"] = time.perf_counter() - t1
            rec["vac_wal_bytes"] = wal_diff(c, l1, insert_lsn(c))
            rec["digest"] = c.execute("SELECT count(*), sum(hashtext(t::text)) "
                                      "FROM bd_t t").fetchone()[1]
        return rec
