"""Scenario 6: the direct path's WAL formats against plain INSERT and COPY.

For each wal_level (replica, then logical) a fresh primary with the settings
of docs/baseline.md and a streaming standby made from it.  Cases, all
loading the seed table of seed 000 (10M rows by default) into an existing
table without indexes:

  insert          INSERT ... SELECT, plain
  copy            COPY FROM a server file, plain
  direct_records  /*+ APPEND */ INSERT, directpath.wal_format = records
  direct_image    /*+ APPEND */ INSERT, directpath.wal_format = image
  dcopy_records   /*+ APPEND */ COPY, records
  dcopy_image     /*+ APPEND */ COPY, image

At wal_level = logical the table is logically logged, and a logically
logged table always gets records (wal.c), so the image cases are left out
there.  Per run:

  1. CREATE TABLE, CHECKPOINT, wait for the standby to replay everything,
     pause its replay (pg_wal_replay_pause);
  2. the load, timed on the client (COMMIT included), WAL bytes between the
     insert LSNs before and after, heap bytes after: WAL per heap byte;
  3. wait until the standby has received the load's WAL, resume replay and
     time it until the standby's replay LSN reaches the load's end.

The report gives medians with min-max, and ratios against the plain INSERT
(and COPY) of the same run.
"""

import time

from pgharness.sql import TABLE_COLUMNS, insert_lsn, seed_select, wait_lsn, wal_diff

from .measure import check_direct
from .scenario import Case, Scenario
from .util import BenchError, log

CASES = [
    # id, label, kind, wal_format
    ("insert", "INSERT ... SELECT", "insert", None),
    ("copy", "COPY FROM file", "copy", None),
    ("direct_records", "/*+ APPEND */ INSERT, records", "insert", "records"),
    ("direct_image", "/*+ APPEND */ INSERT, image", "insert", "image"),
    ("dcopy_records", "/*+ APPEND */ COPY, records", "copy", "records"),
    ("dcopy_image", "/*+ APPEND */ COPY, image", "copy", "image"),
]


def replayed(conn, fn, lsn, timeout=1800):
    if not wait_lsn(conn, fn, lsn, timeout):
        raise BenchError(f"standby: {fn}() did not reach {lsn} in {timeout}s")


class WalScenario(Scenario):
    key = "wal"
    number = 6
    seed = "000"
    title = "WAL formats against INSERT and COPY, with standby replay"
    phases = ("replica", "logical")
    alone = True

    def settings(self, phase):
        return {"max_wal_senders": "4", "hot_standby": "on", "wal_keep_size": "32GB"}

    def prepare(self, ctx, phase):
        self.standby = ctx.server.make_standby(ctx.workdir, f"standby_{phase}", sync=True)
        self.datafile = ctx.workdir / "wal_seed.txt"
        with ctx.server.conn() as c:
            if not self.datafile.exists():
                c.execute(f"COPY ({seed_select(ctx.rows)}) TO '{self.datafile}'")

    def warm_up(self, ctx):
        """Fault in both servers' shared buffers and WAL segments."""
        log(f"warm-up: {2 * ctx.rows:,} rows, replayed by the standby")
        with ctx.server.conn() as c, self.standby.conn() as sc:
            c.execute("DROP TABLE IF EXISTS warm")
            c.execute(f"CREATE TABLE warm {TABLE_COLUMNS}")
            c.execute(f"INSERT INTO warm {seed_select(2 * ctx.rows)}")
            c.execute("DROP TABLE warm")
            c.execute("CHECKPOINT")
            replayed(sc, "pg_last_wal_replay_lsn", insert_lsn(c))

    def finish(self, ctx, phase):
        sb = getattr(self, "standby", None)
        if sb is not None:
            sb.stop(check=False)
            sb.cleanup()
            self.standby = None

    def cases(self, ctx, phase):
        return [Case(cid, label, "direct" if fmt else "plain",
                     twin=None if cid == "insert" else "insert",
                     params={"kind": kind, "fmt": fmt}, group=phase)
                for cid, label, kind, fmt in CASES
                if not (phase == "logical" and fmt == "image")]

    def run(self, ctx, case, run_no):
        kind, fmt = case.params["kind"], case.params["fmt"]
        rows = ctx.rows
        with ctx.server.conn() as c, self.standby.conn() as sc:
            c.execute("DROP TABLE IF EXISTS t")
            c.execute(f"CREATE TABLE t {TABLE_COLUMNS}")
            c.execute("CHECKPOINT")
            replayed(sc, "pg_last_wal_replay_lsn", insert_lsn(c))
            sc.execute("SELECT pg_wal_replay_pause()")
            time.sleep(0.5)
            if fmt:
                c.execute(f"SET directpath.wal_format = {fmt}")
            hint = "/*+ APPEND */ " if fmt else ""
            sql = (f"{hint}INSERT INTO t {seed_select(rows)}" if kind == "insert"
                   else f"{hint}COPY t FROM '{self.datafile}'")
            lsn0 = insert_lsn(c)
            t0 = time.perf_counter()
            c.execute(sql)
            load_s = time.perf_counter() - t0
            lsn1 = insert_lsn(c)
            if fmt:
                check_direct(c, f"{case.id} ({ctx.phase})", rows)
            heap = c.execute("SELECT pg_relation_size('t')").fetchone()[0]
            wal = wal_diff(c, lsn0, lsn1)
            # the standby has the WAL; replay it, timed
            replayed(sc, "pg_last_wal_receive_lsn", lsn1)
            t2 = time.perf_counter()
            sc.execute("SELECT pg_wal_replay_resume()")
            replayed(sc, "pg_last_wal_replay_lsn", lsn1)
            replay_s = time.perf_counter() - t2
            n = sc.execute("SELECT count(*) FROM t").fetchone()[0]
            if n != rows:
                raise BenchError(f"{case.id} ({ctx.phase}): the standby has {n} rows, want {rows}")
            c.execute("DROP TABLE t")
        return {"rows": rows, "load_s": load_s, "wal_bytes": wal, "heap_bytes": heap,
                "wal_per_heap": wal / heap, "replay_s": replay_s}
