"""The report's sections of the loads' own scenarios: WAL formats, index
maintenance, fallbacks, ETL, foreign keys, TPC-H, parallel and partitioned
loads (6-11, 17, 18)."""

from .report_base import load_rows, run_ratios, titled_table
from .util import MiB, fmt_stat, md_table, stat, text_table


# ------------------------------------------------------ WAL formats (6) ----

def wal_rows(agg):
    """{phase: [(case, ratio and WAL stats)]}, ratios against the same run's
    plain INSERT and COPY."""
    out = {}
    for phase in agg.phases("wal"):
        base, copy = agg.get("wal", phase, "insert"), agg.get("wal", phase, "copy")
        out[phase] = [{
            "case": a.case, "label": a.label, "load_s": a.st("load_s"),
            "load_vs_insert": run_ratios(a, base, "load_s"),
            "load_vs_copy": run_ratios(a, copy, "load_s"),
            "wal_mb": stat([r["wal_bytes"] / MiB for r in a.recs]),
            "heap_mb": stat([r["heap_bytes"] / MiB for r in a.recs]),
            "wal_per_heap": a.st("wal_per_heap"),
            "wal_per_row": stat([r["wal_bytes"] / r["rows"] for r in a.recs]),
            "replay_s": a.st("replay_s"),
            "replay_vs_insert": run_ratios(a, base, "replay_s"),
        } for a in agg.cases("wal", phase)]
    return out


WAL_HEADER = ["case", "load s", "load / INSERT", "load / COPY", "WAL MB", "heap MB",
              "WAL / heap", "WAL B/row", "replay s", "replay / INSERT"]


def wal_table_rows(rows):
    return [[r["label"], fmt_stat(r["load_s"]), fmt_stat(r["load_vs_insert"]),
             fmt_stat(r["load_vs_copy"]), fmt_stat(r["wal_mb"], 0, show_range=False),
             fmt_stat(r["heap_mb"], 0, show_range=False),
             fmt_stat(r["wal_per_heap"], 3, show_range=False),
             fmt_stat(r["wal_per_row"], 1, show_range=False), fmt_stat(r["replay_s"]),
             fmt_stat(r["replay_vs_insert"])] for r in rows]


def wal_verdict(summary):
    """The goal: records' WAL per heap byte <= COPY's, its load time no worse
    than image's.  WAL per row is shown too: COPY's pages are less full than
    ours, which flatters its per-heap-byte ratio."""
    def med(st):
        return st["med"] if st else None
    lines = []
    for phase, rows in summary.items():
        by = {r["case"]: r for r in rows}
        rec, copy, img = by.get("direct_records"), by.get("copy"), by.get("direct_image")
        if rec and copy:
            a, b = med(rec["wal_per_heap"]), med(copy["wal_per_heap"])
            ra, rb = med(rec["wal_per_row"]), med(copy["wal_per_row"])
            ha, hb = med(rec["heap_mb"]), med(copy["heap_mb"])
            lines.append(f"{phase}: WAL per heap byte, records {a:.3f} vs COPY {b:.3f} "
                         f"({'met' if a <= b else 'not met'}); per row {ra:.1f} vs {rb:.1f} B "
                         f"({'met' if ra <= rb else 'not met'}); heap {ha:.0f} vs {hb:.0f} MB")
        if rec and img:
            a, b = med(rec["load_vs_insert"]), med(img["load_vs_insert"])
            lines.append(f"{phase}: load time / INSERT, records {a:.2f} vs image {b:.2f} "
                         f"({'met' if a <= b * 1.02 else 'not met'}, 2% noise allowed)")
    return lines


def section_wal(agg, meta, out, figs):
    summary = wal_rows(agg)
    if not summary:
        return []
    rows = agg.cases("wal", next(iter(summary)))[0].first("rows")
    md = ["## 6. WAL formats against INSERT and COPY, with standby replay", "",
          f"{rows:,} seed rows into an existing table without indexes; per wal_level a fresh "
          "primary with baseline.md's settings (and `max_wal_senders = 4`, `hot_standby = on`, "
          "`wal_keep_size = 32GB`) and a streaming standby made from it. WAL is the bytes "
          "between the insert LSNs around the load; the standby's replay is paused during the "
          "load, then resumed and timed until it reaches the load's end. Ratios divide each "
          "run by the plain INSERT (and COPY) of the same run. At wal_level = logical the "
          "table is logically logged and always gets records: no image cases.", ""]
    for phase, r in summary.items():
        md += [f"### wal_level = {phase}", "", md_table(WAL_HEADER, wal_table_rows(r)), ""]
    md += ["Goal (records: no more WAL per heap byte than COPY, no slower than images):", ""]
    md += [f"- {x}" for x in wal_verdict(summary)] + [""]
    return md


def wal_text(agg):
    summary = wal_rows(agg)
    out = []
    for phase, rows in summary.items():
        out += ["", f"WAL formats, wal_level = {phase}",
                text_table(WAL_HEADER, wal_table_rows(rows))]
    return out + wal_verdict(summary)


# -------------------------------------------------- index maintenance (7) ----

INDEX_HEADER = ["indexes", "path", "load + CHECKPOINT s", "/ plain", "heap in shared buffers",
                "index maintenance"]


def index_rows(agg):
    return [[a.first("indexes"), a.first("mode"), fmt_stat(a.st("load_ckpt_s")),
             fmt_stat(run_ratios(a, agg.get("indexes", "replica", a.twin or a.case),
                                 "load_ckpt_s")),
             "–" if a.first("heap_in_buffers") is None else f"{100 * a.first('heap_in_buffers'):.1f}%",
             a.first("index_maintenance") or "–"]
            for a in agg.cases("indexes", "replica")]


def section_indexes(agg, meta, out, figs):
    cases = agg.cases("indexes", "replica")
    if not cases:
        return []
    return ["## 7. Index maintenance on existing tables", "",
            f"{cases[0].first('rows'):,} seed rows into a table created and indexed in an "
            "earlier transaction, on a fresh cluster with baseline.md's settings: plain INSERT "
            "against the direct path with entries inserted row by row "
            "(`directpath.index_sort = off`), sorted per batch and inserted "
            "(`index_append`, `index_runs`, `index_leaf_merge` and `index_merge` off) and by "
            "default (appended at the right edge, written as runs inside the tree, merged into "
            "leaves or a rewrite, or inserted sorted). *Retry*: the same load after the same "
            "load failed at its end (on the same path). Time is "
            "the load plus the CHECKPOINT after it; ratios against the plain INSERT of the "
            "same run; the share of the table's heap pages in shared buffers after the load.",
            "", md_table(INDEX_HEADER, index_rows(agg)), ""]


def index_text(agg):
    return titled_table("Index maintenance", INDEX_HEADER, index_rows(agg))


# ------------------------------------------------ fallback cost (8) ----

FALLBACK_HEADER = ["statement", "path", "µs per statement", "/ plain (goal <= 1.05)"]


def fallback_rows(agg):
    return [[a.first("shape"), a.first("mode"), fmt_stat(a.st("us_per_stmt"), 0),
             fmt_stat(run_ratios(a, agg.get("fallback", "replica", a.twin), "us_per_stmt"))
             if a.twin else "1"]
            for a in agg.cases("fallback", "replica")]


def section_fallback(agg, meta, out, figs):
    if not agg.cases("fallback", "replica"):
        return []
    return ["## 8. Small statements left on the normal path", "",
            "pgbench, one client, simple protocol, a fresh table (bigserial primary key) per "
            "run. Every statement here ends on the normal path; the ratio is its time against "
            "the plain statement of the same run (a size fallback reports at DEBUG1, so no "
            "NOTICE per statement reaches the client).", "", md_table(FALLBACK_HEADER, fallback_rows(agg)), ""]


def fallback_text(agg):
    return titled_table("Small statements left on the normal path", FALLBACK_HEADER,
                        fallback_rows(agg))


# ------------------------------------------------------- ETL append (9) ----

ETL_HEADER = ["load", "load + CHECKPOINT s", "/ plain", "index maintenance",
              "heap pages in shared buffers", "index size / fresh build"]


def etl_rows(agg):
    rows = []
    for a in agg.cases("etl", "replica"):
        base = agg.get("etl", "replica", a.twin) if a.twin else None
        pct = a.st("heap_in_buffers_pct")
        rows.append([a.label, fmt_stat(a.st("load_ckpt_s")),
                     fmt_stat(run_ratios(a, base, "load_ckpt_s")) if base else "1",
                     a.first("index_maintenance") or "–",
                     f"{fmt_stat(pct, 1)} %" if pct else "–",
                     fmt_stat(a.st("index_size_ratio_max"), 3)])
    return rows


def section_etl(agg, meta, out, figs):
    cases = agg.cases("etl", "replica")
    if not cases:
        return []
    return ["## 9. ETL append and new storage with indexes", "",
            f"{cases[0].first('rows'):,} rows. *ETL append*: into a table already holding as "
            "many, with a bigserial primary key, a timestamptz btree and a btree on "
            "hashint4(acct), by COPY from a CSV file and by INSERT ... SELECT from a staging "
            "table. *New storage*: the same table and indexes created in the loading "
            "transaction. Time is the load plus the CHECKPOINT after it; ratios against the "
            "plain load of the same run. Heap pages in shared buffers after the load "
            "(pg_buffercache) and the largest index's size against REINDEX of the same rows "
            "are for new storage.", "", md_table(ETL_HEADER, etl_rows(agg)), ""]


def etl_text(agg):
    return titled_table("ETL append and new storage", ETL_HEADER, etl_rows(agg))


# ------------------------------------------------ foreign keys (10) ----

FKEY_HEADER = ["load", "load + CHECKPOINT s", "/ plain", "foreign keys"]


def fkey_rows(agg):
    return load_rows(agg, "fkeys", lambda a: a.first("foreign_keys") or "–")


def section_fkeys(agg, meta, out, figs):
    cases = agg.cases("fkeys", "replica")
    if not cases:
        return []
    return ["## 10. A fact table with foreign keys", "",
            f"{cases[0].first('rows'):,} rows into an empty table (created in an earlier "
            "transaction) with foreign keys to a 100k-row, a 1k-row and an "
            f"{cases[0].first('rows'):,}-row table, by INSERT ... SELECT from a staging table "
            "and by COPY from a CSV file. Time is the load plus the CHECKPOINT after it; "
            "ratios against the plain load of the same run.", "",
            md_table(FKEY_HEADER, fkey_rows(agg)), ""]


def fkey_text(agg):
    return titled_table("Foreign keys", FKEY_HEADER, fkey_rows(agg))


# ------------------------------------------------------------ tpch (18) ----

TPCH_HEADER = ["load", "load + CHECKPOINT s", "/ plain recipe", "/ plain keys first",
               "/ serial direct keys first", "lineitem s", "keys s", "WAL MB", "frozen pages", "tables with stats"]
TPCH_TABLES = ("region", "nation", "supplier", "part", "partsupp", "customer", "orders",
               "lineitem")


def tpch_rows(agg):
    recipe = agg.get("tpch", "replica", "recipe_plain")
    keys = agg.get("tpch", "replica", "keys_plain")
    month = agg.get("tpch", "replica", "month_plain")
    serial = agg.get("tpch", "replica", "keys_direct")
    rows = []
    for a in agg.cases("tpch", "replica"):
        first = a.case.startswith("month")
        base = month if first else recipe
        lineitem = stat([r["tables_s"].get("lineitem") for r in a.recs if r.get("tables_s")])
        frozen = a.first("all_frozen_pages")
        rows.append([a.label, fmt_stat(a.st("load_ckpt_s")),
                     fmt_stat(run_ratios(a, base, "load_ckpt_s")) if base else "–",
                     "–" if first or keys is None else
                     fmt_stat(run_ratios(a, keys, "load_ckpt_s")),
                     fmt_stat(run_ratios(a, serial, "load_ckpt_s"))
                     if serial and a.case.startswith("keys_par1") else "–",
                     fmt_stat(lineitem), fmt_stat(a.st("keys_s")),
                     fmt_stat(a.st("wal_bytes"), 0, MiB),
                     "–" if frozen is None else f"{frozen:,} of {a.first('heap_pages'):,}",
                     "–" if first else str(a.first("tables_with_stats"))])
    return rows


def tpch_table_rows(agg):
    """Each table's COPY seconds (median) per way of loading."""
    rows = []
    for a in agg.cases("tpch", "replica", "tpch"):
        cells = []
        for t in TPCH_TABLES:
            cells.append(fmt_stat(stat([r["tables_s"].get(t) for r in a.recs]),
                                  show_range=False))
        rows.append([a.label] + cells)
    return rows


def section_tpch(agg, meta, out, figs):
    cases = agg.cases("tpch", "replica")
    if not cases:
        return []
    sf = cases[0].first("sf")
    fks = next((a.first("foreign_keys") for a in cases if a.first("foreign_keys")), None)
    md = ["## 18. TPC-H", "",
          f"The eight TPC-H tables at scale factor {sf:g} (tpchgen-cli, CSV), loaded by COPY "
          "into a new database in the order of their foreign keys, with the standard keys "
          "(primary keys, eight foreign keys, indexes on l_shipdate and o_orderdate) declared "
          "first or added after the data (the recipe); and July 1998's orders and lineitems "
          "appended to the database without them, every key in place. Time is the whole load "
          "(and the keys, for the recipe) plus the CHECKPOINT after it; ratios against the "
          "plain recipe (the month: against its plain append) and against the plain keys-first "
          "load of the same run.", "",
          md_table(TPCH_HEADER, tpch_rows(agg)), "",
          "Each table's COPY (seconds, median):", "",
          md_table(["load"] + list(TPCH_TABLES), tpch_table_rows(agg)), ""]
    if fks:
        md += ["How the direct keys-first load checked the foreign keys: "
               + "; ".join(f"{t}: {v}" for t, v in fks.items() if v), ""]
    return md


def tpch_text(agg):
    return titled_table("TPC-H", TPCH_HEADER, tpch_rows(agg))


# ------------------------------------------------------- parallel (11) ----

PARALLEL_HEADER = ["load", "load + CHECKPOINT s", "/ plain", "workers"]


def workers_column(a):
    """The parallel workers a load had, or – for a plain one."""
    n = a.first("parallel_workers")
    return "–" if n is None else str(n)


def parallel_rows(agg):
    return load_rows(agg, "parallel", workers_column)


def section_parallel(agg, meta, out, figs):
    cases = agg.cases("parallel", "replica")
    if not cases:
        return []
    return ["## 11. Parallel direct path", "",
            f"{cases[0].first('rows'):,} seed rows by INSERT ... SELECT from a staging table "
            "and by COPY from a server-side text file into an empty table without indexes "
            "(created in an earlier transaction): plain, the serial direct path and "
            "`/*+ APPEND PARALLEL(n) */`. Time is the load plus the CHECKPOINT after it; "
            "ratios against the plain INSERT or COPY of the same run; *workers*: those the "
            "load had.", "", md_table(PARALLEL_HEADER, parallel_rows(agg)), ""]


PARPART_HEADER = ["load", "load + CHECKPOINT s", "/ plain", "rows", "workers"]


def parpart_rows(agg):
    return load_rows(agg, "parpart", lambda a: f"{a.first('rows'):,}", workers_column)


def section_parpart(agg, meta, out, figs):
    if not agg.cases("parpart", "replica"):
        return []
    return ["## 17. Parallel loads into partitioned tables", "",
            "Time-series rows into 8 monthly range partitions with a (dev, ts) btree each, by "
            "INSERT ... SELECT from a staging table partitioned the same way and by COPY from a "
            "server-side text file; seed rows into 64 hash partitions by INSERT ... SELECT. "
            "Each target is created in an earlier transaction. Plain, the serial direct path and "
            "`/*+ APPEND PARALLEL(1) */`; time is the load plus the CHECKPOINT after it, ratios "
            "against the plain load of the same run; *workers*: those the load had.", "",
            md_table(PARPART_HEADER, parpart_rows(agg)), ""]


def parpart_text(agg):
    return titled_table("Parallel loads into partitioned tables", PARPART_HEADER,
                        parpart_rows(agg))


def parallel_text(agg):
    return titled_table("Parallel direct path", PARALLEL_HEADER, parallel_rows(agg))


