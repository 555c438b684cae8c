"""Scenario 14: an upsert load, INSERT ... SELECT ... ON CONFLICT DO NOTHING.

A target of N rows (default 2M: id bigint primary key, ts timestamptz,
grp int, v text, with two more btrees, on ts and on grp), vacuumed and
analyzed as a table that has settled, takes N staged rows: half with new
keys (above every key of the target), half with keys already in the
target, in random order.  Plain `INSERT ... ON CONFLICT (id) DO NOTHING`
against the hinted one, and the same from the staged rows sorted by key
(a staging table written in key order, as an export often is); and the same rows from a file: plain COPY into a
staging table followed by that INSERT, against one
`COPY ... WITH (ON_CONFLICT 'nothing')`.  Every case must insert exactly
N/2 rows, and leave the table as the plain INSERT does.  Time is the
statement(s) plus the CHECKPOINT after them; ratios against the plain form
of the same run.  The target is rebuilt before every run (not timed).
And `INSERT ... ON CONFLICT (id) DO UPDATE SET ts, v WHERE the target's
row is older` (every staged row: N/2 inserted, N/2 updated), plain against
hinted: the new keys take the direct path, the updates are core's
(src/load/upsert.c).  And a MERGE with the same effect (WHEN MATCHED AND
older THEN UPDATE, WHEN NOT MATCHED THEN INSERT), plain against hinted: its
inserts take the direct path, its updates are core's.  And the same rows
from the file keeping the new row: plain COPY into a staging table
followed by INSERT ... ON CONFLICT (id) DO UPDATE SET (ts, grp, v) =
EXCLUDED, against one `COPY ... WITH (ON_CONFLICT 'update')` (every staged
row: N/2 inserted, N/2 updated).  These are issue 25's goals for DO
NOTHING, DO UPDATE, MERGE and a COPY that upserts.  DO NOTHING also with
`PARALLEL(1)` (the INSERT from either staging table, and the COPY), and DO
UPDATE and COPY's 'update' with `PARALLEL(1)`, reported against the serial
direct statement of the same run too.  And DO NOTHING with the same keys
as text ('customer-' and 12 digits) and as uuids (md5 of the number):
plain, serial and `PARALLEL(1)`.  And DO NOTHING without a conflict
target into the table with a second unique btree, (grp, id) (a tenant's
key beside the surrogate one): two arbiter indexes probed for every row,
plain, serial and `PARALLEL(1)`.  And DO UPDATE and MERGE into the
target range-partitioned by id into 8 leaves (`pupdate`, `pmerge`), and DO
UPDATE into the target hash-partitioned into 64 (`hupdate`): their
updates made in bulk leaf by leaf.
"""

import time

from .measure import check_direct
from .scenario import Case, Scenario
from .util import BenchError

STAGE = ("SELECT CASE WHEN g % 2 = 0 THEN {n} + g ELSE (g::bigint * 7919) % {n} + 1 END, "
         "timestamptz '2026-01-01' + g * interval '1 s', g % 1000, md5(g::text) "
         "FROM generate_series(1, {n}) g")
TARGET = ("SELECT g, timestamptz '2025-01-01' + g * interval '1 s', g % 1000, md5(g::text) "
          "FROM generate_series(1, {n}) g")
UPSERT = "INSERT INTO up_target SELECT * FROM up_stage ON CONFLICT (id) DO NOTHING"
# other key types (the same keys spelled as text, or hashed to a uuid)
KEYS = {"text": "'customer-' || lpad(({x})::text, 12, '0')", "uuid": "md5(({x})::text)::uuid"}
UPDATE = ("INSERT INTO up_target AS t SELECT * FROM up_stage ON CONFLICT (id) DO UPDATE "
          "SET ts = excluded.ts, v = excluded.v WHERE t.ts < excluded.ts")
MERGE = ("MERGE INTO up_target t USING up_stage s ON t.id = s.id "
         "WHEN MATCHED AND t.ts < s.ts THEN UPDATE SET ts = s.ts, v = s.v "
         "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.ts, s.grp, s.v)")
# case: (label, path, twin, statements; {f} the staged rows' file)
CASES = {
    "plain": ("INSERT ... ON CONFLICT (id) DO NOTHING, plain", "plain", None, [UPSERT]),
    "direct": ("INSERT ... ON CONFLICT (id) DO NOTHING, /*+ APPEND */", "direct", "plain",
               ["/*+ APPEND */ " + UPSERT]),
    "parallel": ("INSERT ... ON CONFLICT (id) DO NOTHING, /*+ APPEND PARALLEL(1) */", "direct",
                 "plain", ["/*+ APPEND PARALLEL(1) */ " + UPSERT]),
    "sorted_plain": ("the same, staged rows in key order, plain", "plain", None,
                     [UPSERT.replace("up_stage", "up_stage_sorted")]),
    "sorted_direct": ("the same, staged rows in key order, /*+ APPEND */", "direct",
                      "sorted_plain",
                      ["/*+ APPEND */ " + UPSERT.replace("up_stage", "up_stage_sorted")]),
    "sorted_parallel": ("the same, staged rows in key order, /*+ APPEND PARALLEL(1) */",
                        "direct", "sorted_plain",
                        ["/*+ APPEND PARALLEL(1) */ " +
                         UPSERT.replace("up_stage", "up_stage_sorted")]),
    "copy_plain": ("COPY into a staging table, then INSERT ... ON CONFLICT DO NOTHING, plain",
                   "plain", None,
                   ["CREATE UNLOGGED TABLE up_stage2 (LIKE up_stage)",
                    "COPY up_stage2 FROM '{f}'",
                    "INSERT INTO up_target SELECT * FROM up_stage2 ON CONFLICT (id) DO NOTHING",
                    "DROP TABLE up_stage2"]),
    "copy_direct": ("COPY ... WITH (ON_CONFLICT 'nothing')", "direct", "copy_plain",
                    ["COPY up_target FROM '{f}' WITH (ON_CONFLICT 'nothing')"]),
    "copy_parallel": ("COPY ... WITH (ON_CONFLICT 'nothing'), /*+ APPEND PARALLEL(1) */",
                      "direct", "copy_plain",
                      ["/*+ APPEND PARALLEL(1) */ COPY up_target FROM '{f}' "
                       "WITH (ON_CONFLICT 'nothing')"]),
    "copy_update_plain": ("COPY into a staging table, then INSERT ... ON CONFLICT DO UPDATE "
                          "SET (ts, grp, v) = EXCLUDED, plain", "plain", None,
                          ["CREATE UNLOGGED TABLE up_stage2 (LIKE up_stage)",
                           "COPY up_stage2 FROM '{f}'",
                           "INSERT INTO up_target SELECT * FROM up_stage2 ON CONFLICT (id) "
                           "DO UPDATE SET (ts, grp, v) = ROW(excluded.ts, excluded.grp, excluded.v)",
                           "DROP TABLE up_stage2"]),
    "copy_update_direct": ("COPY ... WITH (ON_CONFLICT 'update')", "direct",
                           "copy_update_plain",
                           ["COPY up_target FROM '{f}' WITH (ON_CONFLICT 'update')"]),
    "copy_update_parallel": ("COPY ... WITH (ON_CONFLICT 'update'), /*+ APPEND PARALLEL(1) */",
                             "direct", "copy_update_plain",
                             ["/*+ APPEND PARALLEL(1) */ COPY up_target FROM '{f}' "
                              "WITH (ON_CONFLICT 'update')"]),
    "update_plain": ("INSERT ... ON CONFLICT (id) DO UPDATE SET ts, v WHERE older, plain",
                     "plain", None, [UPDATE]),
    "update_direct": ("INSERT ... ON CONFLICT (id) DO UPDATE SET ts, v WHERE older, "
                      "/*+ APPEND */", "direct", "update_plain", ["/*+ APPEND */ " + UPDATE]),
    "update_parallel": ("INSERT ... ON CONFLICT (id) DO UPDATE SET ts, v WHERE older, "
                        "/*+ APPEND PARALLEL(1) */", "direct", "update_plain",
                        ["/*+ APPEND PARALLEL(1) */ " + UPDATE]),
    "merge_plain": ("MERGE with the same effect, plain", "plain", None, [MERGE]),
    "merge_direct": ("MERGE with the same effect, /*+ APPEND */", "direct", "merge_plain",
                     ["/*+ APPEND */ " + MERGE]),
}
for _k in KEYS:
    _u = UPSERT.replace("up_stage", f"up_stage_{_k}")
    CASES[f"{_k}_plain"] = (f"the same, {_k} keys, plain", "plain", None, [_u])
    CASES[f"{_k}_direct"] = (f"the same, {_k} keys, /*+ APPEND */", "direct", f"{_k}_plain",
                             ["/*+ APPEND */ " + _u])
    CASES[f"{_k}_parallel"] = (f"the same, {_k} keys, /*+ APPEND PARALLEL(1) */", "direct",
                               f"{_k}_plain", ["/*+ APPEND PARALLEL(1) */ " + _u])
# DO UPDATE and MERGE into the target partitioned by id: 8 range leaves;
# DO UPDATE into 64 hash leaves too (each leaf's index work small)
PART_LAYOUTS = {"pupdate": ("range", 8), "pmerge": ("range", 8), "hupdate": ("hash", 64)}
PART_KEYS = tuple(PART_LAYOUTS)
for _k, (_how, _parts) in PART_LAYOUTS.items():
    _what, _sql = ("MERGE", MERGE) if _k == "pmerge" else ("DO UPDATE", UPDATE)
    CASES[f"{_k}_plain"] = (f"{_what}, {_parts} {_how} partitions, plain", "plain", None,
                            [_sql])
    CASES[f"{_k}_direct"] = (f"{_what}, {_parts} {_how} partitions, /*+ APPEND */", "direct",
                             f"{_k}_plain", ["/*+ APPEND */ " + _sql])
# two arbiters: every unique index of the target, (id) and (grp, id)
_u = "INSERT INTO up_target SELECT * FROM up_stage ON CONFLICT DO NOTHING"
CASES["two_plain"] = ("the same, two arbiters ((id) and (grp, id)), plain", "plain", None, [_u])
CASES["two_direct"] = ("the same, two arbiters, /*+ APPEND */", "direct", "two_plain",
                       ["/*+ APPEND */ " + _u])
CASES["two_parallel"] = ("the same, two arbiters, /*+ APPEND PARALLEL(1) */", "direct",
                         "two_plain", ["/*+ APPEND PARALLEL(1) */ " + _u])


def create_leaves(c, n, how, parts):
    """up_target's leaves: 'parts' ranges of id over the 2n keys, or hash."""
    step = (2 * n) // parts + 1
    for i in range(parts):
        bounds = (f"FROM ({i * step + 1}) TO ({(i + 1) * step + 1})" if how == "range" else
                  f"WITH (MODULUS {parts}, REMAINDER {i})")
        c.execute(f"CREATE TABLE up_target_{i} PARTITION OF up_target FOR VALUES {bounds}")


class UpsertScenario(Scenario):
    key = "upsert"
    number = 14
    title = "An upsert load: INSERT ... ON CONFLICT"
    phases = ("replica",)
    alone = True
    default_rows = 2_000_000

    def prepare(self, ctx, phase):
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS up_stage")
            c.execute("CREATE UNLOGGED TABLE up_stage (id bigint, ts timestamptz, grp int, "
                      "v text)")
            c.execute(f"INSERT INTO up_stage {STAGE.format(n=ctx.rows)}")
            c.execute("VACUUM ANALYZE up_stage")
            c.execute(f"COPY up_stage TO '{ctx.workdir / 'upsert.dat'}'")
            c.execute("DROP TABLE IF EXISTS up_stage_sorted")
            c.execute("CREATE UNLOGGED TABLE up_stage_sorted AS SELECT * FROM up_stage ORDER BY id")
            c.execute("VACUUM ANALYZE up_stage_sorted")
            for k, expr in KEYS.items():
                c.execute(f"DROP TABLE IF EXISTS up_stage_{k}")
                c.execute(f"CREATE UNLOGGED TABLE up_stage_{k} AS SELECT {expr.format(x='id')} "
                          "AS id, ts, grp, v FROM up_stage")
                c.execute(f"VACUUM ANALYZE up_stage_{k}")

    def cases(self, ctx, phase):
        return [Case(key, label, path, twin=twin, group="upsert",
                     params={"direct": path == "direct", "sql": sql})
                for key, (label, path, twin, sql) in CASES.items()]

    def run(self, ctx, case, run_no):
        n = ctx.rows
        rec = {"rows": n}
        with ctx.server.conn() as c:
            key = case.id.split("_")[0]
            c.execute("DROP TABLE IF EXISTS up_target")
            c.execute("CREATE TABLE up_target (id {} PRIMARY KEY, ts timestamptz, "
                      "grp int, v text){}".format(key if key in KEYS else "bigint",
                                                  f" PARTITION BY {PART_LAYOUTS[key][0]} (id)"
                                                  if key in PART_KEYS else ""))
            if key in PART_KEYS:
                create_leaves(c, n, *PART_LAYOUTS[key])
            c.execute("CREATE INDEX ON up_target (ts)")
            c.execute("CREATE INDEX ON up_target (grp)")
            if key == "two":
                c.execute("CREATE UNIQUE INDEX ON up_target (grp, id)")
            target = TARGET.format(n=n)
            if key in KEYS:
                target = target.replace("SELECT g,", "SELECT " + KEYS[key].format(x="g") + ",")
            c.execute(f"/*+ APPEND */ INSERT INTO up_target {target}")
            c.execute("VACUUM ANALYZE up_target")
            c.execute("CHECKPOINT")
            time.sleep(ctx.settle_s)
            inserted = None
            t0 = time.perf_counter()
            for sql in case.params["sql"]:
                cur = c.execute(sql.format(f=ctx.workdir / "upsert.dat"))
                if sql.startswith(("INSERT", "/*+", "COPY up_target", "MERGE")):
                    inserted = cur.rowcount
            if case.params["direct"]:
                ls = check_direct(c, case.id, n // 2)
                rec["workers"] = ls["parallel_workers"]
                rec["updates"] = ls["updates"]
                if key in PART_KEYS and "by core" in (ls["updates"] or "by core"):
                    raise BenchError(f"{case.id}: updates not all in bulk: {ls['updates']}")
                if "parallel" in case.id and not ls["parallel_workers"]:
                    raise BenchError(f"{case.id}: ran serially: {ls['parallel']}")
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            # DO UPDATE and MERGE count the updated rows too: every staged row
            expect = n if case.id.startswith(("update", "merge", "copy_update") +
                                             PART_KEYS) else n // 2
            if inserted != expect:
                raise BenchError(f"{case.id}: inserted {inserted} rows, expected {expect}")
            rec["inserted"] = inserted
            rec["digest"] = c.execute("SELECT count(*), sum(hashtext(t::text)) "
                                      "FROM up_target t").fetchone()[1]
        return rec
