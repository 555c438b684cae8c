"""Scenario 16: sharded loads, postgres_fdw partitions fed by COPY streams.

N rows (default 2M) of 5 columns (int, int, md5 text, timestamptz, numeric)
from a settled unlogged staging table (INSERT ... SELECT) or from a text
file written from it (COPY FROM file), into a table hash-partitioned three
ways:

  local   three local partitions (the reference: directpath's best);
  shard   two postgres_fdw foreign partitions on two other servers (both
          with directpath preloaded) and one local partition, batch_size
          1000; loaded plain, hinted with directpath.foreign_copy off (the
          wrapper's batched INSERTs), hinted with the default (each
          shard's rows streamed as one COPY, src/load/shard.c) and the same
          with directpath.shard_two_phase on (the shards prepared before
          the local commit and committed after it, src/load/shardcommit.c).

Then the same COPY streams into tables with 1, 2 and 4 foreign partitions
(one server each) plus one local partition, to show how the time grows with
the number of shards.  Time is the statement plus a CHECKPOINT on every
server it wrote; ratios against the plain load of the same run, and (the
"/ local direct" column) against the direct load into local partitions.
Issue 26's goals: the COPY-stream load <= 1.0 of the local direct load,
<= 0.25 of the plain sharded load.
"""

import time

from .measure import check_direct
from .scenario import Case, Scenario
from .server import server_settings
from .util import BenchError, log

COLUMNS = "(id int, grp int, payload text, ts timestamptz, amount numeric)"
SOURCE = ("SELECT g, g % 97, md5(g::text), timestamptz '2026-01-01' + g * interval '1 s', "
          "(g % 100000)::numeric / 100 FROM generate_series(1, {n}) g")
SERVERS = 4
GROWTH = (1, 2, 4)


class ShardScenario(Scenario):
    key = "shard"
    number = 16
    title = "Sharded loads: postgres_fdw partitions fed by COPY streams"
    phases = ("replica",)
    alone = True
    default_rows = 2_000_000

    def prepare(self, ctx, phase):
        self.remotes = []
        for i in range(SERVERS):
            r = ctx.server.peer(ctx.workdir, f"shard{i + 1}")
            log(f"starting shard server {i + 1} on port {r.port}")
            r.initdb(sync=True)
            r.configure(server_settings("replica", {"shared_buffers": "512MB",
                                                    "max_prepared_transactions": "4"}))
            r.start(timeout=300)
            with r.conn() as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS directpath")
            self.remotes.append(r)
        self.file = f"{ctx.workdir}/shard_src.txt"
        with ctx.server.conn() as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
            c.execute("DROP TABLE IF EXISTS sh_src")
            c.execute(f"CREATE UNLOGGED TABLE sh_src {COLUMNS}")
            c.execute(f"INSERT INTO sh_src {SOURCE.format(n=ctx.rows)}")
            c.execute("VACUUM ANALYZE sh_src")
            c.execute(f"COPY sh_src TO '{self.file}'")
            for i, r in enumerate(self.remotes):
                c.execute(f"DROP SERVER IF EXISTS sh_s{i} CASCADE")
                c.execute(f"CREATE SERVER sh_s{i} FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
                          f"(host '127.0.0.1', port '{r.port}', dbname 'postgres', "
                          f"batch_size '1000')")
                c.execute(f"CREATE USER MAPPING FOR postgres SERVER sh_s{i} "
                          f"OPTIONS (user 'postgres')")
            # three local partitions, the reference
            self.make_table(c, "sh_local", 0)
            for k in GROWTH:
                self.make_table(c, f"sh_{k}", k)

    def make_table(self, c, name, shards):
        """'name' hash-partitioned over 'shards' foreign partitions (one per
        server) and the rest (3 - shards, at least 1) local ones."""
        parts = max(3, shards + 1)
        c.execute(f"DROP TABLE IF EXISTS {name}")
        c.execute(f"CREATE TABLE {name} {COLUMNS} PARTITION BY HASH (id)")
        for p in range(parts):
            if p < shards:
                rt = f"{name}_p{p}"
                with self.remotes[p].conn() as r:
                    r.execute(f"DROP TABLE IF EXISTS {rt}")
                    r.execute(f"CREATE TABLE {rt} {COLUMNS}")
                c.execute(f"CREATE FOREIGN TABLE {name}_p{p} PARTITION OF {name} FOR VALUES "
                          f"WITH (MODULUS {parts}, REMAINDER {p}) SERVER sh_s{p} "
                          f"OPTIONS (table_name '{rt}')")
            else:
                c.execute(f"CREATE TABLE {name}_p{p} PARTITION OF {name} FOR VALUES "
                          f"WITH (MODULUS {parts}, REMAINDER {p})")

    def finish(self, ctx, phase):
        for r in getattr(self, "remotes", []):
            r.stop(check=False)
            r.cleanup()
        self.remotes = []

    def cases(self, ctx, phase):
        out = []
        for how in ("insert", "copy"):
            word = "INSERT ... SELECT" if how == "insert" else "COPY FROM file"
            out += [
                Case(f"{how}_local_plain", f"{word}, 3 local partitions, plain", "plain",
                     group=how, params={"how": how, "table": "sh_local", "mode": "plain"}),
                Case(f"{how}_local_direct", f"{word}, 3 local partitions, direct", "direct",
                     twin=f"{how}_local_plain", group=how,
                     params={"how": how, "table": "sh_local", "mode": "direct"}),
                Case(f"{how}_shard_plain", f"{word}, 2 shards + 1 local, plain", "plain",
                     group=how, params={"how": how, "table": "sh_2", "mode": "plain"}),
                Case(f"{how}_shard_batched", f"{word}, 2 shards + 1 local, direct, "
                     "foreign_copy off (batched)", "direct", twin=f"{how}_shard_plain",
                     group=how, params={"how": how, "table": "sh_2", "mode": "batched"}),
                Case(f"{how}_shard_copy", f"{word}, 2 shards + 1 local, direct (COPY streams)",
                     "direct", twin=f"{how}_shard_plain", group=how,
                     params={"how": how, "table": "sh_2", "mode": "direct",
                             "local": f"{how}_local_direct"}),
                Case(f"{how}_shard_2pc", f"{word}, 2 shards + 1 local, direct (COPY streams), "
                     "shard_two_phase", "direct", twin=f"{how}_shard_plain", group=how,
                     params={"how": how, "table": "sh_2", "mode": "two_phase",
                             "local": f"{how}_local_direct"}),
            ]
        for k in GROWTH:
            out.append(Case(f"grow_{k}", f"INSERT ... SELECT, {k} shard(s) + "
                            f"{max(3, k + 1) - k} local, direct (COPY streams)", "direct",
                            twin="insert_local_direct", group="growth",
                            params={"how": "insert", "table": f"sh_{k}", "mode": "direct"}))
        return out

    def servers_of(self, table):
        k = int(table.split("_")[1]) if table != "sh_local" else 0
        return self.remotes[:k]

    def run(self, ctx, case, run_no):
        n = ctx.rows
        p = case.params
        table = p["table"]
        remotes = self.servers_of(table)
        hint = "" if p["mode"] == "plain" else "/*+ APPEND */ "
        if p["how"] == "insert":
            sql = f"{hint}INSERT INTO {table} SELECT * FROM sh_src"
        else:
            sql = f"{hint}COPY {table} FROM '{self.file}'"
        rec = {"rows": n}
        with ctx.server.conn() as c:
            c.execute(f"TRUNCATE {table}")     # through the wrapper for the shards
            if p["mode"] == "batched":
                c.execute("SET directpath.foreign_copy = off")
            if p["mode"] == "two_phase":
                c.execute("SET directpath.shard_two_phase = on")
            for r in remotes:
                with r.conn() as rc:
                    rc.execute("CHECKPOINT")
            c.execute("CHECKPOINT")
            time.sleep(ctx.settle_s)
            t0 = time.perf_counter()
            c.execute(sql)
            rec["load_s"] = time.perf_counter() - t0
            if p["mode"] != "plain":
                st = check_direct(c, case.id, n)
                rec["foreign_partitions"] = st.get("foreign_partitions") if isinstance(st, dict) else None
            c.execute("CHECKPOINT")
            for r in remotes:
                with r.conn() as rc:
                    rc.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            got = c.execute(f"SELECT count(*), sum(hashtext(t::text)) FROM "
                            f"(SELECT id, grp, payload, ts, amount FROM {table}) t").fetchone()
        if got[0] != n:
            raise BenchError(f"scenario 16 {case.id}: {got[0]} rows arrived, expected {n}")
        rec["digest"] = got[1]
        rec["shards"] = len(remotes)
        return rec
