"""The report's sections of the statements beyond plain loads: COPY's parsing,
pg_restore, upserts, bulk UPDATE and DELETE, tables born ready, sharded
loads (12-16, 19)."""

from .report_base import load_rows, run_ratios, titled_table
from .util import MiB, fmt_stat, md_table


# ---------------------------------------------------------- parse (12) ----

PARSE_HEADER = ["input: load", "load + CHECKPOINT s", "/ plain", "input MB/s"]


def parse_rows(agg):
    def mbps(a):
        t = a.st("load_ckpt_s")
        size = a.first("input_bytes")
        if not t or not size:
            return "–"
        return f"{size / t['med'] / 1e6:.0f}"

    return load_rows(agg, "parse", mbps)


def section_parse(agg, meta, out, figs):
    cases = agg.cases("parse", "replica")
    if not cases:
        return []
    return ["## 12. COPY's input parsing", "",
            f"{cases[0].first('rows'):,} rows of three shapes (seed rows: 4 int, text; ETL "
            "rows: timestamptz, int, numeric, md5 text, csv; wide rows: 16 columns of 12 "
            "types, csv, and the same in binary format) by COPY from a server-side file into an empty table without "
            "indexes (created in an earlier transaction): plain, the serial direct path "
            "(core's COPY reader without and with the exact fast input, then the row "
            "former, and the row former with `directpath.load_statistics = off`: what "
            "gathering the statistics costs) and `/*+ APPEND PARALLEL(1) */` (the leader and "
            "one worker parse). "
            "Time is the COPY "
            "plus the CHECKPOINT after it; ratios against the plain COPY of the same input "
            "in the same run; *input MB/s*: the file's size over that time.", "",
            md_table(PARSE_HEADER, parse_rows(agg)), ""]


def parse_text(agg):
    return titled_table("COPY's input parsing", PARSE_HEADER, parse_rows(agg))


# -------------------------------------------------------- restore (13) ----

RESTORE_HEADER = ["restore", "pg_restore + CHECKPOINT s", "/ plain",
                  "data / post-data s, or frozen pages"]


def restore_rows(agg):
    def last(a):
        if a.first("frozen_pages"):
            return a.first("frozen_pages")
        d, p = a.st("data_s"), a.st("post-data_s")
        return f"{d['med']:.2f} / {p['med']:.2f}" if d and p else "–"

    return load_rows(agg, "restore", last)


def section_restore(agg, meta, out, figs):
    cases = agg.cases("restore", "replica")
    if not cases:
        return []
    return ["## 13. pg_restore with the setting only", "",
            f"A pgbench database of scale {cases[0].first('scale')} (its accounts, branches, "
            "tellers and primary keys), dumped once in pg_dump's custom format, restored "
            "into a new database by pg_restore, plain and with "
            "`PGOPTIONS='-c directpath.mode=always'`, as separate transactions and with "
            "`--single-transaction`. Time is pg_restore's run plus a CHECKPOINT; ratios "
            "against the plain restore of the same form in the same run; the last column: "
            "the median time of the data section (the COPYs) and of the post-data section "
            "(the primary keys), or pgbench_accounts' all-frozen pages after a "
            "single-transaction restore.", "",
            md_table(RESTORE_HEADER, restore_rows(agg)), ""]


def restore_text(agg):
    return titled_table("pg_restore", RESTORE_HEADER, restore_rows(agg))


# --------------------------------------------------------- upsert (14) ----

UPSERT_HEADER = ["statement", "statement + CHECKPOINT s", "/ plain", "/ serial direct",
                 "rows as plain"]


def upsert_rows(agg):
    def same(a):
        # every case leaves the table the plain INSERT of its kind leaves
        ref = next((k + "_plain" for k in ("update", "merge", "copy_update", "text", "uuid", "two")
                    if a.case.startswith(k)), "plain")
        plain = agg.get("upsert", "replica", ref)
        if a.case == ref or plain is None:
            return "–"
        return "yes" if a.first("digest") == plain.first("digest") else "NO"

    def against_serial(a):
        # a parallel case against its serial direct one
        if "parallel" not in a.case:
            return "–"
        return fmt_stat(run_ratios(a, agg.get("upsert", "replica",
                                              a.case.replace("parallel", "direct")),
                                   "load_ckpt_s")) or "–"

    return load_rows(agg, "upsert", against_serial, same)


def section_upsert(agg, meta, out, figs):
    cases = agg.cases("upsert", "replica")
    if not cases:
        return []
    n = cases[0].first("rows")
    return ["## 14. An upsert load: INSERT ... ON CONFLICT", "",
            f"{n:,} staged rows into a settled (vacuumed) {n:,}-row table with a bigint "
            "primary key and two more btrees; half the staged keys are new, half already in "
            "the table, in random order (and, in the rows so marked, sorted by key); from a "
            "table, or from a file (plain: COPY into a "
            "staging table, then the INSERT). DO NOTHING skips the rows whose key is taken; "
            "DO UPDATE updates them (SET ts, v WHERE the table's row is older: all of them), "
            "and so does the MERGE; COPY's ON_CONFLICT 'update' gives them the new row's "
            "ts, grp and v. "
            "Time is the statement(s) plus the CHECKPOINT after them; ratio against the "
            "plain form of the same run; the last column compares the table's contents "
            "with the plain INSERT's of the same kind.", "",
            md_table(UPSERT_HEADER, upsert_rows(agg)), ""]


def upsert_text(agg):
    return titled_table("Upsert", UPSERT_HEADER, upsert_rows(agg))


# ------------------------------------------------------ bulk DML (19) ----

BULKDML_HEADER = ["statement", "statement + CHECKPOINT s", "/ plain", "WAL MB", "WAL / plain",
                  "WAL beyond page images MB", "/ plain", "VACUUM after s", "VACUUM / plain",
                  "rows as plain"]


def bulkdml_rows(agg):
    def twin(a):
        return agg.get("bulk-dml", "replica", a.twin) if a.twin else None

    def ratio(metric):
        return lambda a: fmt_stat(run_ratios(a, twin(a), metric)) if twin(a) else "1"

    return load_rows(agg, "bulk-dml",
                     lambda a: fmt_stat(a.st("wal_bytes"), 0, MiB), ratio("wal_bytes"),
                     lambda a: fmt_stat(a.st("wal_beyond_images_bytes"), 0, MiB),
                     ratio("wal_beyond_images_bytes"),
                     lambda a: fmt_stat(a.st("vac_s")), ratio("vac_s"),
                     lambda a: ("yes" if a.first("digest") == twin(a).first("digest")
                                else "NO") if twin(a) else "–")


def section_bulkdml(agg, meta, out, figs):
    cases = agg.cases("bulk-dml", "replica")
    if not cases:
        return []
    n = cases[0].first("rows")
    return ["## 19. Bulk UPDATE and DELETE", "",
            f"A settled (vacuumed) {n:,}-row table with a bigint primary key and btrees on "
            "ts and grp. Backfill: UPDATE of 30% of the rows setting a column no index has; "
            f"change set: UPDATE ... FROM {n // 5:,} staged rows setting ts, grp and v; purge: "
            "DELETE of the 30% oldest rows; DELETE ... USING the staged rows. Time is the "
            "statement plus the CHECKPOINT after it, WAL up to the CHECKPOINT's end, and "
            "the part of it beyond page images (pg_walinspect: one image per changed page "
            "is the floor both pay); then "
            "the VACUUM that follows. Ratios against the plain statement of the same run; "
            "the last column compares the table's contents with the plain statement's.", "",
            md_table(BULKDML_HEADER, bulkdml_rows(agg)), ""]


def bulkdml_text(agg):
    return titled_table("Bulk UPDATE and DELETE", BULKDML_HEADER, bulkdml_rows(agg))


# ----------------------------------------------------------- born (15) ----

BORN_HEADER = ["statement", "statement + CHECKPOINT s", "/ plain", "WAL / plain",
               "all-frozen pages", "rows as plain", "/ serial direct", "/ without statistics",
               "q-error median (max), no ANALYZE", "after ANALYZE"]


def born_rows(agg):
    def twin(a):
        return agg.get("born", "replica", a.twin) if a.twin else None

    def wal(a):
        return fmt_stat(run_ratios(a, twin(a), "wal_bytes")) if twin(a) else "1"

    def same(a):
        if twin(a) is None:
            return "–"
        return "yes" if a.first("digest") == twin(a).first("digest") else "NO"

    def serial(a):
        ref = agg.get("born", "replica", a.case.replace("_par1", "_direct"))
        if not a.case.endswith("_par1") or ref is None:
            return "–"
        return fmt_stat(run_ratios(a, ref, "load_ckpt_s"))

    def nostats(a):
        ref = agg.get("born", "replica", "ctas_nostats")
        if a.case != "ctas_direct" or ref is None:
            return "–"
        return fmt_stat(run_ratios(a, ref, "load_ckpt_s"))

    def qerror(metric):
        def column(a):
            q = a.first(metric)
            return f"{q[0]:.2f} ({q[1]:.2f})" if q else "–"
        return column

    return load_rows(agg, "born", wal, lambda a: a.first("frozen_pages"), same,
                     serial, nostats, qerror("qerror"), qerror("qerror_analyze"))


# ---------------------------------------------------------- shard (16) ----

SHARD_HEADER = ["load", "statement + CHECKPOINTs s", "/ plain", "/ local direct",
                "foreign partitions", "rows as plain"]


def shard_rows(agg):
    def local(a):
        ref = agg.get("shard", "replica", f"{a.case.split('_')[0]}_local_direct")
        if a.case.startswith("grow_"):
            ref = agg.get("shard", "replica", "insert_local_direct")
        if ref is None or a.case.endswith("_local_direct") or a.case.endswith("_local_plain"):
            return "–"
        return fmt_stat(run_ratios(a, ref, "load_ckpt_s"))

    def paths(a):
        return a.first("foreign_partitions") or "–"

    def same(a):
        plain = agg.get("shard", "replica", a.twin) if a.twin else None
        if plain is None or a.case.startswith("grow_"):
            return "–"
        return "yes" if a.first("digest") == plain.first("digest") else "NO"

    return load_rows(agg, "shard", local, paths, same)


def section_shard(agg, meta, out, figs):
    cases = agg.cases("shard", "replica")
    if not cases:
        return []
    n = cases[0].first("rows")
    return ["## 16. Sharded loads: postgres_fdw partitions fed by COPY streams", "",
            f"{n:,} rows of 5 columns by INSERT ... SELECT from an unlogged staging table and "
            "by COPY from a text file, into a table hash-partitioned three ways: three local "
            "partitions, or two postgres_fdw partitions on two other servers on this machine "
            "(directpath preloaded, batch_size 1000) and one local. Plain; hinted with "
            "`directpath.foreign_copy = off` (the wrapper's batched INSERTs); hinted (each "
            "shard's rows as one COPY), and the same with `directpath.shard_two_phase = on` "
            "(two-phase commit across the shards). Then 1, 2 and 4 shards (INSERT). Time is the "
            "statement plus a CHECKPOINT on every server written; ratios against the plain "
            "load of the same run (growth rows: against the local direct INSERT), and "
            "against the direct load into three local partitions.", "",
            md_table(SHARD_HEADER, shard_rows(agg)), ""]


def shard_text(agg):
    return titled_table("Sharded loads", SHARD_HEADER, shard_rows(agg))


def section_born(agg, meta, out, figs):
    cases = agg.cases("born", "replica")
    if not cases:
        return []
    n = cases[0].first("rows")
    return ["## 15. Tables born ready: CREATE TABLE AS, REFRESH MATERIALIZED VIEW", "",
            f"{n:,} rows of 5 columns from an unlogged source table, by CREATE TABLE AS and by "
            "REFRESH MATERIALIZED VIEW (from WITH NO DATA), plain and hinted. Time is the "
            "statement plus the CHECKPOINT after it; ratios (time, WAL) against the plain form "
            "of the same run; then the visibility map's all-frozen pages, the contents against "
            "the plain statement's, the `PARALLEL(1)` statements against the serial direct "
            "ones of the same run, the hinted CREATE TABLE AS against itself with "
            "`directpath.load_statistics = off` (the cost of gathering statistics), and the "
            "planner's row estimates of eleven predicates right after the statement, before any "
            "ANALYZE, against their actual counts (q-error: larger over smaller; median and max "
            "of the first run), and the same after an ANALYZE.", "",
            md_table(BORN_HEADER, born_rows(agg)), ""]


def born_text(agg):
    return titled_table("Tables born ready", BORN_HEADER, born_rows(agg))


