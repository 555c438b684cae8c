"""Scenario 18: a TPC-H database, loaded the ways people load it.

The eight TPC-H tables at scale factor --sf (default 1: 8.7M rows, 1.1 GB
of CSV), generated once per suite run by tpchgen-cli (installed from PyPI
into the repository's .venv), loaded by COPY ... (FORMAT csv, HEADER) into
a new database per run, in the order of their foreign keys (region,
nation, supplier, part, partsupp, customer, orders, lineitem).  The schema
is the standard one: the primary keys, the eight foreign keys, an index on
l_shipdate and one on o_orderdate.  Ways:

  keys_plain     the schema with its keys first, then plain COPYs
  recipe_plain   bare tables, plain COPYs, then the keys (pg_restore's and
                 every DBA's recipe: ADD PRIMARY KEY, ADD FOREIGN KEY,
                 CREATE INDEX)
  keys_direct    keys first, COPYs with directpath.mode = always
  keys_par1      keys first, /*+ APPEND PARALLEL(1) */ COPYs
  recipe_direct  the recipe with directpath.mode = always
  keys_direct_lock  keys first, directpath.mode = always and
                 directpath.fkey_table_lock = on (the referenced tables
                 locked SHARE instead of each referenced row)
  keys_par1_behind, keys_direct_behind  keys_par1 and keys_direct with
                 directpath.fkey_sets_ahead = off (the foreign key sets
                 found by the leader after the indexes, not by a worker
                 beside them)

Time is the whole load (every COPY, and the keys where they come last)
plus the CHECKPOINT after it; the record keeps each table's COPY time and
the keys' time apart, the WAL written, and the state after the load (heap
pages all-frozen, tables with statistics).  Ratios: against the plain
recipe of the same run (the record also has the ratio against the plain
keys-first load).

The nightly append ("month"): the orders of the last full month of the
data (July 1998) and their lineitems are left out of the base database,
which is built once by the plain recipe and copied for each run from a
template; each run appends that month by COPY into the tables with every
key in place, plain and with directpath.mode = always (and with
directpath.fkey_table_lock too).  This is issue 45's TPC-H goal.
"""

import csv
import subprocess
import sys
import time
from pathlib import Path

from .scenario import Case, Scenario
from .util import BenchError, log

TPCHGEN = "tpchgen-cli==4.0.0"
ORDER = ("region", "nation", "supplier", "part", "partsupp", "customer", "orders", "lineitem")

TABLES = {
    "region": "r_regionkey integer NOT NULL, r_name char(25) NOT NULL, r_comment varchar(152)",
    "nation": "n_nationkey integer NOT NULL, n_name char(25) NOT NULL, "
              "n_regionkey integer NOT NULL, n_comment varchar(152)",
    "supplier": "s_suppkey integer NOT NULL, s_name char(25) NOT NULL, "
                "s_address varchar(40) NOT NULL, s_nationkey integer NOT NULL, "
                "s_phone char(15) NOT NULL, s_acctbal numeric(15,2) NOT NULL, "
                "s_comment varchar(101) NOT NULL",
    "part": "p_partkey integer NOT NULL, p_name varchar(55) NOT NULL, p_mfgr char(25) NOT NULL, "
            "p_brand char(10) NOT NULL, p_type varchar(25) NOT NULL, p_size integer NOT NULL, "
            "p_container char(10) NOT NULL, p_retailprice numeric(15,2) NOT NULL, "
            "p_comment varchar(23) NOT NULL",
    "partsupp": "ps_partkey integer NOT NULL, ps_suppkey integer NOT NULL, "
                "ps_availqty integer NOT NULL, ps_supplycost numeric(15,2) NOT NULL, "
                "ps_comment varchar(199) NOT NULL",
    "customer": "c_custkey integer NOT NULL, c_name varchar(25) NOT NULL, "
                "c_address varchar(40) NOT NULL, c_nationkey integer NOT NULL, "
                "c_phone char(15) NOT NULL, c_acctbal numeric(15,2) NOT NULL, "
                "c_mktsegment char(10) NOT NULL, c_comment varchar(117) NOT NULL",
    "orders": "o_orderkey integer NOT NULL, o_custkey integer NOT NULL, "
              "o_orderstatus char(1) NOT NULL, o_totalprice numeric(15,2) NOT NULL, "
              "o_orderdate date NOT NULL, o_orderpriority char(15) NOT NULL, "
              "o_clerk char(15) NOT NULL, o_shippriority integer NOT NULL, "
              "o_comment varchar(79) NOT NULL",
    "lineitem": "l_orderkey integer NOT NULL, l_partkey integer NOT NULL, "
                "l_suppkey integer NOT NULL, l_linenumber integer NOT NULL, "
                "l_quantity numeric(15,2) NOT NULL, l_extendedprice numeric(15,2) NOT NULL, "
                "l_discount numeric(15,2) NOT NULL, l_tax numeric(15,2) NOT NULL, "
                "l_returnflag char(1) NOT NULL, l_linestatus char(1) NOT NULL, "
                "l_shipdate date NOT NULL, l_commitdate date NOT NULL, "
                "l_receiptdate date NOT NULL, l_shipinstruct char(25) NOT NULL, "
                "l_shipmode char(10) NOT NULL, l_comment varchar(44) NOT NULL",
}

# per table: its primary key, then (columns, referenced table, its columns)
KEYS = {
    "region": ("r_regionkey", []),
    "nation": ("n_nationkey", [("n_regionkey", "region", "r_regionkey")]),
    "supplier": ("s_suppkey", [("s_nationkey", "nation", "n_nationkey")]),
    "part": ("p_partkey", []),
    "partsupp": ("ps_partkey, ps_suppkey", [("ps_partkey", "part", "p_partkey"),
                                            ("ps_suppkey", "supplier", "s_suppkey")]),
    "customer": ("c_custkey", [("c_nationkey", "nation", "n_nationkey")]),
    "orders": ("o_orderkey", [("o_custkey", "customer", "c_custkey")]),
    "lineitem": ("l_orderkey, l_linenumber",
                 [("l_orderkey", "orders", "o_orderkey"),
                  ("l_partkey, l_suppkey", "partsupp", "ps_partkey, ps_suppkey")]),
}
INDEXES = {"lineitem": "l_shipdate", "orders": "o_orderdate"}

# key: (label, keys first, direct: None | "always" | "always+lock" |
#       "always+behind" | "parallel" | "parallel+behind")
WAYS = (("recipe_plain", "plain COPY into bare tables, then the keys", False, None),
        ("keys_plain", "plain COPY, keys declared first", True, None),
        ("keys_direct", "directpath.mode = always, keys declared first", True, "always"),
        ("keys_par1", "/*+ APPEND PARALLEL(1) */ COPY, keys declared first", True, "parallel"),
        ("recipe_direct", "directpath.mode = always into bare tables, then the keys", False,
         "always"),
        ("keys_direct_lock", "directpath.mode = always, keys declared first, "
         "directpath.fkey_table_lock = on", True, "always+lock"),
        ("keys_par1_behind", "/*+ APPEND PARALLEL(1) */ COPY, keys declared first, "
         "directpath.fkey_sets_ahead = off", True, "parallel+behind"),
        ("keys_direct_behind", "directpath.mode = always, keys declared first, "
         "directpath.fkey_sets_ahead = off", True, "always+behind"))

MONTH = ("1998-07-01", "1998-08-01")


def set_direct(c, direct):
    """A way's session settings: "always" (directpath.mode), "always+lock"
    (and directpath.fkey_table_lock)."""
    if direct in ("always", "always+lock", "always+behind"):
        c.execute("SET directpath.mode = always")
    if direct == "always+lock":
        c.execute("SET directpath.fkey_table_lock = on")
    if direct in ("parallel+behind", "always+behind"):
        c.execute("SET directpath.fkey_sets_ahead = off")


def key_ddl(table):
    """The primary key, foreign keys and index statements of a table."""
    pk, fks = KEYS[table]
    out = [f"ALTER TABLE {table} ADD PRIMARY KEY ({pk})"]
    out += [f"ALTER TABLE {table} ADD FOREIGN KEY ({cols}) REFERENCES {ref} ({refcols})"
            for cols, ref, refcols in fks]
    if table in INDEXES:
        out.append(f"CREATE INDEX ON {table} ({INDEXES[table]})")
    return out


def schema_ddl(keys_first):
    out = [f"CREATE TABLE {t} ({TABLES[t]})" for t in ORDER]
    if keys_first:
        out += [s for t in ORDER for s in key_ddl(t)]
    return out


class TpchScenario(Scenario):
    key = "tpch"
    number = 18
    title = "TPC-H: keys first, the load-then-keys recipe, and a month appended"
    phases = ("replica",)
    alone = True
    default_rows = None     # rows do not apply: --sf sets the size

    def prepare(self, ctx, phase):
        self.sf = ctx.args.sf
        self.data = ctx.workdir / f"tpch_sf{self.sf:g}"
        if not (self.data / "lineitem.csv").exists():
            self.generate(ctx)
        self.split_month()
        log(f"tpch: building the base database for the month's append (SF {self.sf:g})")
        self.build_template(ctx, "tpch_base", ORDER, "base")

    def build_template(self, ctx, db, tables, part):
        """Database 'db' by the plain recipe: 'tables' (their 'part' of the
        data) loaded into bare tables, then every table's keys; settled."""
        with ctx.server.conn() as c:
            c.execute(f"DROP DATABASE IF EXISTS {db}")
            c.execute(f"CREATE DATABASE {db}")
        with ctx.server.conn(db) as c:
            c.execute("CREATE EXTENSION directpath")
            for s in schema_ddl(False):
                c.execute(s)
            for t in tables:
                c.execute(f"COPY {t} FROM '{self.file(t, part)}' WITH (FORMAT csv, HEADER)")
            for t in ORDER:
                for s in key_ddl(t):
                    c.execute(s)
            c.execute("VACUUM (FREEZE, ANALYZE)")
        with ctx.server.conn() as c:
            c.execute("CHECKPOINT")

    def generate(self, ctx):
        exe = Path(sys.prefix) / "bin" / "tpchgen-cli"
        if not exe.exists():
            log(f"tpch: installing {TPCHGEN} into .venv")
            subprocess.run([str(Path(sys.prefix) / "bin" / "pip"), "install", "-q",
                            "--disable-pip-version-check", TPCHGEN], check=True)
        log(f"tpch: generating SF {self.sf:g} as CSV")
        self.data.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([str(exe), "csv", "-s", f"{self.sf:g}", f"--output-dir={self.data}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise BenchError(f"tpchgen-cli exited {r.returncode}: {r.stdout[-2000:]}")
        for f in self.data.iterdir():
            f.chmod(0o644)

    def file(self, table, part="all"):
        if part == "all" or table not in ("orders", "lineitem"):
            return self.data / f"{table}.csv"
        return self.data / f"{table}.{part}.csv"

    def split_month(self):
        """orders and lineitem cut into the base and the month (by o_orderdate)."""
        if self.file("lineitem", "month").exists():
            return
        month = set()
        with open(self.file("orders")) as src, open(self.file("orders", "base"), "w") as base, \
                open(self.file("orders", "month"), "w") as mon:
            header = src.readline()
            base.write(header)
            mon.write(header)
            for line in src:
                date = next(csv.reader([line]))[4]
                if MONTH[0] <= date < MONTH[1]:
                    month.add(line.split(",", 1)[0])
                    mon.write(line)
                else:
                    base.write(line)
        with open(self.file("lineitem")) as src, \
                open(self.file("lineitem", "base"), "w") as base, \
                open(self.file("lineitem", "month"), "w") as mon:
            header = src.readline()
            base.write(header)
            mon.write(header)
            for line in src:
                (mon if line.split(",", 1)[0] in month else base).write(line)
        for t in ("orders", "lineitem"):
            for part in ("base", "month"):
                self.file(t, part).chmod(0o644)

    def cases(self, ctx, phase):
        out = []
        for key, label, keys_first, direct in WAYS:
            out.append(Case(key, label, "direct" if direct else "plain",
                            twin="recipe_plain" if direct else None, group="tpch",
                            params={"keys_first": keys_first, "direct": direct}))
        out.append(Case("month_plain", "a month appended with every key, plain", "plain",
                        group="month", params={"month": True, "direct": None}))
        out.append(Case("month_direct", "a month appended with every key, "
                        "directpath.mode = always", "direct", twin="month_plain",
                        group="month", params={"month": True, "direct": "always"}))
        out.append(Case("month_direct_lock", "the same, directpath.fkey_table_lock = on",
                        "direct", twin="month_plain", group="month",
                        params={"month": True, "direct": "always+lock"}))
        return out

    def run(self, ctx, case, run_no):
        if case.params.get("month"):
            return self.run_month(ctx, case)
        keys_first, direct = case.params["keys_first"], case.params["direct"]
        with ctx.server.conn() as c:
            c.execute("DROP DATABASE IF EXISTS tpch_run")
            c.execute("CREATE DATABASE tpch_run")
        rec = {"sf": self.sf, "tables_s": {}, "paths": {}}
        with ctx.server.conn("tpch_run") as c:
            c.execute("CREATE EXTENSION directpath")
            c.execute("CREATE EXTENSION pg_visibility")
            for s in schema_ddl(keys_first):
                c.execute(s)
            set_direct(c, direct)
            hint = "/*+ APPEND PARALLEL(1) */ " if (direct or "").startswith("parallel") else ""
            c.execute("CHECKPOINT")
            time.sleep(ctx.settle_s)
            lsn0 = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            t0 = time.perf_counter()
            for t in ORDER:
                t1 = time.perf_counter()
                c.execute(f"{hint}COPY {t} FROM '{self.file(t)}' WITH (FORMAT csv, HEADER)")
                rec["tables_s"][t] = time.perf_counter() - t1
                if direct:
                    self.check(c, case, t, rec)
            if not keys_first:
                t1 = time.perf_counter()
                c.execute("SET maintenance_work_mem = '1GB'")
                for t in ORDER:
                    for s in key_ddl(t):
                        c.execute(s)
                rec["keys_s"] = time.perf_counter() - t1
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            rec["wal_bytes"] = int(c.execute(
                "SELECT pg_current_wal_lsn() - %s::pg_lsn", (lsn0,)).fetchone()[0])
            rec.update(self.state(c))
        return rec

    def check(self, c, case, table, rec):
        """What a direct COPY did; the large tables must take the direct path
        (region and nation are below directpath.min_bytes)."""
        ls = c.execute("SELECT path, reason, foreign_keys, parallel, index_maintenance "
                       "FROM directpath.last_statement()").fetchone()
        if ls is None:
            raise BenchError(f"tpch {case.id}: COPY {table}: no last_statement()")
        rec["paths"][table] = ls[0] if ls[0] == "direct" else f"{ls[0]}: {ls[1]}"
        rec.setdefault("foreign_keys", {})[table] = ls[2]
        rec.setdefault("parallel", {})[table] = ls[3]
        rec.setdefault("index_maintenance", {})[table] = ls[4]
        if ls[0] != "direct" and table in ("partsupp", "orders", "lineitem"):
            raise BenchError(f"tpch {case.id}: COPY {table} was not direct: {ls[1]}")

    def state(self, c):
        """Heap pages all-frozen, and tables with column statistics."""
        pages, frozen = c.execute(
            "SELECT sum(pg_relation_size(oid) / 8192)::bigint, "
            "sum((SELECT all_frozen FROM pg_visibility_map_summary(oid)))::bigint "
            "FROM pg_class WHERE relname = ANY(%s) AND relkind = 'r'", (list(ORDER),)).fetchone()
        with_stats = c.execute("SELECT count(DISTINCT tablename) FROM pg_stats "
                               "WHERE tablename = ANY(%s)", (list(ORDER),)).fetchone()[0]
        return {"heap_pages": pages, "all_frozen_pages": frozen, "tables_with_stats": with_stats}

    def run_month(self, ctx, case):
        with ctx.server.conn() as c:
            c.execute("DROP DATABASE IF EXISTS tpch_month")
            c.execute("CREATE DATABASE tpch_month TEMPLATE tpch_base")
        rec = {"sf": self.sf, "tables_s": {}, "paths": {}}
        with ctx.server.conn("tpch_month") as c:
            set_direct(c, case.params["direct"])
            c.execute("CHECKPOINT")
            time.sleep(ctx.settle_s)
            lsn0 = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            t0 = time.perf_counter()
            for t in ("orders", "lineitem"):
                t1 = time.perf_counter()
                c.execute(f"COPY {t} FROM '{self.file(t, 'month')}' WITH (FORMAT csv, HEADER)")
                rec["tables_s"][t] = time.perf_counter() - t1
                if case.params["direct"]:
                    self.check(c, case, t, rec)
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            rec["wal_bytes"] = int(c.execute(
                "SELECT pg_current_wal_lsn() - %s::pg_lsn", (lsn0,)).fetchone()[0])
        with ctx.server.conn() as c:
            c.execute("DROP DATABASE tpch_month")
        return rec

    def finish(self, ctx, phase):
        with ctx.server.conn() as c:
            for db in ("tpch_run", "tpch_month", "tpch_base"):
                c.execute(f"DROP DATABASE IF EXISTS {db}")
