"""Scenario 12: COPY's input parsing, the part of a direct COPY that is
still core's.

Four inputs, each written once per run of the suite by the server into a
server-side file, loaded into an empty table without indexes (created in
an earlier transaction) by plain COPY, the serial direct path (with core's
COPY reader and without the exact fast input of common types, as before
issue 24; core's reader with the fast input, src/input/fastin.c; the row
former, src/input/rowform.c, with the fast input; the same without the
statistics gathered at load time, directpath.load_statistics = off, their
cost) and /*+ APPEND PARALLEL(1) */ (row former and fast input):

  seed  the seed rows: 4 int columns, text format
  etl   ETL rows: timestamptz, int, numeric(12,2), md5 text; csv
  wide  16 columns of 12 types (int2, int4, int8, float4, float8, numeric,
        bool, date, timestamp, timestamptz, text, varchar(40), bpchar(8),
        uuid, and two more text and int8); csv
  wide_bin  the same rows in binary format (fixed-width fields converted
        without their receive functions)
  nulls  NULL-heavy rows (40-60% NULLs in most columns) with full-precision
        floats (17 digits) and 20-digit numerics; csv (issue 45)
  nulls_text  the same in text format, NULLs as \\N (pg_dump's format)

Time is the COPY plus the CHECKPOINT after it; ratios against the plain
COPY of the same input in the same run.  Each record also has the input's
size, so the report shows input MB per second of the load (for PARALLEL(1)
the leader and one worker share the parsing: two processes).  This is the
measure of the COPY row former of issue 24; a load with the row former on
checks that it formed every row (directpath.last_copy_reader()).
"""

import time

from .measure import check_direct
from .scenario import Case, Scenario

# (key, label, workers: None plain, 0 serial; directpath.copy_fast_input,
# directpath.copy_row_former, directpath.load_statistics)
MODES = (("plain", "plain", None, "on", "on", "on"),
         ("serial_nofast", "direct, serial, core's reader, copy_fast_input off", 0, "off", "off",
          "on"),
         ("serial_core", "direct, serial, core's reader", 0, "on", "off", "on"),
         ("serial", "direct, serial", 0, "on", "on", "on"),
         ("serial_nostats", "direct, serial, load_statistics off", 0, "on", "on", "off"),
         ("p1", "direct, PARALLEL(1)", 1, "on", "on", "on"))

INPUTS = {
    "seed": {
        "label": "seed rows (4 int, text)",
        "columns": "timeid int, insid int, indid int, value int",
        "select": "SELECT g % 50, g % 10000, g, g FROM generate_series(1, {n}) g",
        "options": "",
    },
    "etl": {
        "label": "ETL rows (timestamptz, int, numeric, md5 text; csv)",
        "columns": "ts timestamptz, customer int, amount numeric(12,2), note text",
        "select": ("SELECT timestamptz '2026-01-01 00:00+00' + g * interval '1 second', "
                   "g % 100000, (g % 1000000) / 100.0, md5(g::text) "
                   "FROM generate_series(1, {n}) g"),
        "options": " WITH (FORMAT csv)",
    },
    "wide": {
        "label": "wide rows (16 columns of 12 types; csv)",
        "columns": ("a int2, b int4, c int8, d float4, e float8, f numeric(14,4), g bool, "
                    "h date, i timestamp, j timestamptz, k text, l varchar(40), m char(8), "
                    "n uuid, o text, p int8"),
        "select": ("SELECT (g % 30000)::int2, g, g::int8 * 1000003, g / 7.0::float4, "
                   "g / 13.0::float8, (g % 100000) / 10000.0, g % 2 = 0, "
                   "date '2000-01-01' + g % 9000, timestamp '2020-01-01' + g * interval '1 min', "
                   "timestamptz '2020-01-01 00:00+00' + g * interval '1 s', md5(g::text), "
                   "'customer ' || g, 'c' || g % 1000, "
                   "md5(g::text)::uuid, repeat('x', g % 20), g::int8 * g "
                   "FROM generate_series(1, {n}) g"),
        "options": " WITH (FORMAT csv)",
    },
    "nulls": {
        "label": "NULL-heavy rows, 17-digit floats, 20-digit numerics (csv)",
        "columns": "id int8, f float8, n numeric, t text, d date, i int4, c varchar(20)",
        "select": ("SELECT g, CASE WHEN g % 5 < 2 THEN NULL ELSE g / 7.0::float8 END, "
                   "CASE WHEN g % 3 = 0 THEN NULL ELSE g * 1234567.8901234567 END, "
                   "CASE WHEN g % 2 = 0 THEN NULL ELSE md5(g::text) END, "
                   "CASE WHEN g % 4 = 0 THEN NULL ELSE date '2000-01-01' + g % 9000 END, "
                   "CASE WHEN g % 5 = 1 THEN NULL ELSE g * 7 END, "
                   "CASE WHEN g % 10 < 6 THEN NULL ELSE 'code ' || g % 977 END "
                   "FROM generate_series(1, {n}) g"),
        "options": " WITH (FORMAT csv)",
    },
    "nulls_text": {
        "label": "the same NULL-heavy rows in text format (\\N, as pg_dump writes them)",
        "columns": "id int8, f float8, n numeric, t text, d date, i int4, c varchar(20)",
        "select": None,                 # the "nulls" SELECT, set below
        "options": "",
    },
}
INPUTS["nulls_text"]["select"] = INPUTS["nulls"]["select"]
# the wide rows again in binary format: the same SELECT, each column cast
# to its type (binary input is read by the column's type)
_wide = [c.split(" ", 1) for c in INPUTS["wide"]["columns"].split(", ")]
INPUTS["wide_bin"] = dict(
    INPUTS["wide"], label="wide rows in binary format", options=" WITH (FORMAT binary)",
    select=("SELECT " + ", ".join(f"{n}::{t}" for n, t in _wide) + " FROM ("
            + INPUTS["wide"]["select"] + ") AS w(" + ", ".join(n for n, _ in _wide) + ")"))


class ParseScenario(Scenario):
    key = "parse"
    number = 12
    title = "COPY's input parsing: plain, direct serial and PARALLEL(1) COPY by input shape"
    phases = ("replica",)
    alone = True
    default_rows = 3_000_000

    def prepare(self, ctx, phase):
        self.files = {}
        with ctx.server.conn() as c:
            for key, inp in INPUTS.items():
                f = ctx.workdir / f"parse_{key}_{ctx.rows}.dat"
                if not f.exists():
                    c.execute(f"COPY ({inp['select'].format(n=ctx.rows)}) TO '{f}'"
                              + inp["options"])
                self.files[key] = f

    def cases(self, ctx, phase):
        return [Case(f"{inp}_{key}", f"{INPUTS[inp]['label']}: {label}",
                     "plain" if workers is None else "direct",
                     twin=None if workers is None else f"{inp}_plain", group="parse",
                     params={"input": inp, "workers": workers, "mode": label, "fast": fast,
                             "former": former, "stats": stats})
                for inp in INPUTS for key, label, workers, fast, former, stats in MODES]

    def run(self, ctx, case, run_no):
        inp = INPUTS[case.params["input"]]
        f = self.files[case.params["input"]]
        workers = case.params["workers"]
        hint = ("" if workers is None else "/*+ APPEND */ " if workers == 0
                else f"/*+ APPEND PARALLEL({workers}) */ ")
        rec = {"rows": ctx.rows, "mode": case.params["mode"], "input": case.params["input"],
               "input_bytes": f.stat().st_size}
        with ctx.server.conn() as c:
            c.execute("DROP TABLE IF EXISTS parse_t")
            c.execute(f"CREATE TABLE parse_t ({inp['columns']})")
            c.execute(f"SET directpath.copy_fast_input = {case.params['fast']}")
            c.execute(f"SET directpath.copy_row_former = {case.params['former']}")
            c.execute(f"SET directpath.load_statistics = {case.params['stats']}")
            c.execute("CHECKPOINT")
            time.sleep(0.5)
            t0 = time.perf_counter()
            c.execute(f"{hint}COPY parse_t FROM '{f}'{inp['options']}")
            if workers is not None:
                ls = check_direct(c, case.id, ctx.rows)
                rec["parallel_workers"] = ls.get("parallel_workers")
                if workers > 0 and not ls.get("parallel_workers"):
                    raise AssertionError(f"{case.id}: ran serially: {ls.get('parallel')}")
                formed, core, why = c.execute(
                    "SELECT formed, core, reason FROM directpath.last_copy_reader()").fetchone()
                if case.params["former"] == "on" and (formed != ctx.rows or why):
                    raise AssertionError(f"{case.id}: row former formed {formed} rows, "
                                         f"core's reader read {core} ({why})")
            c.execute("CHECKPOINT")
            rec["load_ckpt_s"] = time.perf_counter() - t0
            c.execute("DROP TABLE parse_t")
        return rec
