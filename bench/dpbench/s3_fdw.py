"""Scenario 3 (seed 004): INSERT ... SELECT into postgres_fdw foreign tables.

A second local server (same binaries, another port) holds the targets
(id int primary key, t text).  The load is the baseline's
    INSERT INTO <target> SELECT g, md5(g::text) FROM generate_series(1, n) g
with n = rows / 10 (20,000 in quick mode), into:
  - a foreign table with batch_size 1, 10, 100, 1000 (batch_size 1 is
    capped at 100,000 rows: it runs at ~13k rows/s);
  - a table hash-partitioned three ways, two foreign partitions on the
    second server and one local partition, same batch sizes;
  - the same table locally (plain and /*+ APPEND */), unpartitioned and
    with three local partitions, for reference.
With /*+ APPEND */ the partitioned table's local partition takes the
direct path and the foreign ones get their rows either through
postgres_fdw, batched as core batches them (directpath.foreign_copy off),
or as one COPY per foreign partition (the default; the second server has
no directpath, so it runs a plain COPY); those cases must take the direct
path.
"""

from .measure import measure_load
from .scenario import Case, Scenario
from .server import BASELINE_SETTINGS
from .util import BenchError, log

BATCHES = (1, 10, 100, 1000)
B1_CAP = 100000


def gen(n):
    return f"SELECT g, md5(g::text) FROM generate_series(1, {int(n)}) g"


class FdwScenario(Scenario):
    key = "fdw"
    number = 3
    seed = "004"
    title = "Batch insert into postgres_fdw foreign tables (seed 004)"
    phases = ("replica",)

    def rows(self, ctx):
        return 20000 if ctx.quick else max(1000, ctx.rows // 10)

    def rows_for(self, ctx, batch):
        n = self.rows(ctx)
        return min(n, B1_CAP) if batch == 1 else n

    def prepare(self, ctx, phase):
        self.remote = ctx.server.peer(ctx.workdir, "remote")
        ctx.remote = self.remote
        log(f"starting the postgres_fdw target server on port {self.remote.port}")
        self.remote.initdb(sync=True)
        conf = dict(BASELINE_SETTINGS, shared_buffers="512MB", wal_level="replica")
        self.remote.configure(conf)
        self.remote.start(timeout=300)
        with self.remote.conn() as r:
            for t in ("fdw_target", "fdw_p0", "fdw_p1"):
                r.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, t text)")
        with ctx.server.conn() as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
            c.execute("DROP SERVER IF EXISTS remote CASCADE")
            c.execute("CREATE SERVER remote FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
                      f"(host '127.0.0.1', port '{self.remote.port}', dbname 'postgres')")
            c.execute("CREATE USER MAPPING FOR postgres SERVER remote OPTIONS (user 'postgres')")
            for b in BATCHES:
                c.execute(f"CREATE FOREIGN TABLE ft_b{b} (id int, t text) SERVER remote "
                          f"OPTIONS (table_name 'fdw_target', batch_size '{b}')")
                c.execute(f"CREATE TABLE pt_b{b} (id int, t text) PARTITION BY HASH (id)")
                for i in (0, 1):
                    c.execute(f"CREATE FOREIGN TABLE pt_b{b}_f{i} PARTITION OF pt_b{b} FOR VALUES "
                              f"WITH (MODULUS 3, REMAINDER {i}) SERVER remote "
                              f"OPTIONS (table_name 'fdw_p{i}', batch_size '{b}')")
                c.execute(f"CREATE TABLE pt_b{b}_l PARTITION OF pt_b{b} FOR VALUES "
                          f"WITH (MODULUS 3, REMAINDER 2)")
                c.execute(f"ALTER TABLE pt_b{b}_l ADD PRIMARY KEY (id)")

    def finish(self, ctx, phase):
        rem = getattr(self, "remote", None)
        if rem is not None:
            try:
                with ctx.server.conn() as c:
                    c.execute("DROP SERVER IF EXISTS remote CASCADE")
                    for b in BATCHES:
                        c.execute(f"DROP TABLE IF EXISTS pt_b{b}")
            except Exception as e:  # the server may be gone after a failure
                log(f"cleanup of the postgres_fdw objects failed: {e}")
            rem.stop(check=False)
            rem.cleanup()
            self.remote = None
            ctx.remote = None

    def cases(self, ctx, phase):
        out = [
            Case("local_plain", "local table, INSERT", "plain", group="single"),
            Case("local_direct", "local table, /*+ APPEND */ INSERT", "direct",
                 twin="local_plain", group="single"),
        ]
        out += [Case(f"ft_b{b}", f"foreign table, batch_size {b}", "fdw", twin="local_plain",
                     params={"batch": b}, group="single") for b in BATCHES]
        out += [
            Case("pt_local_plain", "3 local partitions, INSERT", "plain", group="partitioned"),
            Case("pt_local_direct", "3 local partitions, /*+ APPEND */ INSERT", "direct",
                 twin="pt_local_plain", group="partitioned"),
        ]
        out += [Case(f"pt_fdw_b{b}", f"2 foreign + 1 local partitions, batch_size {b}", "fdw",
                     twin="pt_local_plain", params={"batch": b}, group="partitioned")
                for b in BATCHES]
        out.append(Case("pt_fdw_b1000_append", "2 foreign + 1 local partitions, batch_size "
                        "1000, /*+ APPEND */, foreign_copy off", "fdw_direct",
                        twin="pt_fdw_b1000", params={"batch": 1000, "foreign_copy": "off"},
                        group="partitioned"))
        out.append(Case("pt_fdw_copy_append", "2 foreign + 1 local partitions, /*+ APPEND */, "
                        "COPY streams", "fdw_direct",
                        twin="pt_fdw_b1000", params={"batch": 1000}, group="partitioned"))
        return out

    def run(self, ctx, case, run_no):
        rem = self.remote
        with rem.conn() as r:
            r.execute("TRUNCATE fdw_target, fdw_p0, fdw_p1")
        hint = "/*+ APPEND */ " if case.path in ("direct", "fdw_direct") else ""
        expect = "direct" if case.path in ("direct", "fdw_direct") else None
        what = f"scenario 3 {case.id}"
        if case.id in ("local_plain", "local_direct"):
            n = self.rows(ctx)
            return measure_load(
                ctx, setup=["DROP TABLE IF EXISTS fdw_local",
                            "CREATE TABLE fdw_local (id int PRIMARY KEY, t text)"],
                load=[f"{hint}INSERT INTO fdw_local {gen(n)}"], tables=["fdw_local"], rows=n,
                expect=expect, freeze_vacuum=False, cleanup=["DROP TABLE fdw_local"], what=what)
        if case.id in ("pt_local_plain", "pt_local_direct"):
            n = self.rows(ctx)
            setup = ["DROP TABLE IF EXISTS fdw_plocal",
                     "CREATE TABLE fdw_plocal (id int PRIMARY KEY, t text) PARTITION BY HASH (id)"]
            setup += [f"CREATE TABLE fdw_plocal_{i} PARTITION OF fdw_plocal FOR VALUES WITH "
                      f"(MODULUS 3, REMAINDER {i})" for i in range(3)]
            return measure_load(
                ctx, setup=setup, load=[f"{hint}INSERT INTO fdw_plocal {gen(n)}"],
                tables=["fdw_plocal"], rows=n, expect=expect, freeze_vacuum=False,
                cleanup=["DROP TABLE fdw_plocal"], what=what)
        b = case.params["batch"]
        n = self.rows_for(ctx, b)
        if case.id.startswith("ft_"):
            rec = measure_load(ctx, setup=[], load=[f"INSERT INTO ft_b{b} {gen(n)}"], tables=[],
                               rows=n, freeze_vacuum=False, remote=rem, what=what)
        else:
            opts = [f"SET directpath.foreign_copy = {case.params['foreign_copy']}"] \
                if "foreign_copy" in case.params else []
            rec = measure_load(ctx, setup=[f"TRUNCATE pt_b{b}_l"],
                               load=[f"{hint}INSERT INTO pt_b{b} {gen(n)}"],
                               tables=[f"pt_b{b}"], rows=n, freeze_vacuum=False, remote=rem,
                               conn_options=opts, what=what)
        with rem.conn() as r:
            got = sum(r.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("fdw_target", "fdw_p0", "fdw_p1"))
        with ctx.server.conn() as c:
            if case.id.startswith("pt_"):
                got += c.execute(f"SELECT count(*) FROM pt_b{b}_l").fetchone()[0]
                c.execute(f"TRUNCATE pt_b{b}_l")
        with rem.conn() as r:
            r.execute("TRUNCATE fdw_target, fdw_p0, fdw_p1")
        if got != n:
            raise BenchError(f"{what}: {got} rows arrived, expected {n}")
        rec["rows_per_s"] = n / rec["load_s"]
        rec["batch_size"] = b
        return rec
