"""report.md, summary.md, plots and the terminal summary, from the raw records."""

from collections import OrderedDict
from pathlib import Path

from . import plots, s20_sessions, seeds
from .util import MiB, fmt_mb, fmt_num, fmt_ratio, fmt_stat, md_table, ratio, stat, text_table

PHASES = ("replica", "minimal", "logical")


class CaseAgg:
    """All runs of one case in one phase."""

    def __init__(self, recs):
        self.recs = recs
        r0 = recs[0]
        self.case = r0["case"]
        self.label = r0["label"]
        self.path = r0["path"]
        self.twin = r0.get("twin")
        self.group = r0.get("group")
        self.available = not all(r.get("status") == "not available" for r in recs)
        self.why = next((r.get("why") for r in recs if r.get("why")), None)

    def st(self, metric):
        if not self.available:
            return None
        return stat([r.get(metric) for r in self.recs])

    def med(self, metric):
        s = self.st(metric)
        return s["med"] if s else None

    def first(self, metric):
        for r in self.recs:
            if r.get(metric) is not None:
                return r[metric]
        return None

    @property
    def n(self):
        return len(self.recs)


class Agg:
    def __init__(self, records):
        by = OrderedDict()
        for r in records:
            by.setdefault((r["scenario"], r["phase"], r["case"]), []).append(r)
        self.aggs = OrderedDict((k, CaseAgg(v)) for k, v in by.items())

    def get(self, sc, phase, case):
        return self.aggs.get((sc, phase, case))

    def cases(self, sc, phase, group=None):
        return [a for (s, p, _), a in self.aggs.items()
                if s == sc and p == phase and (group is None or a.group == group)]

    def phases(self, sc):
        return [p for p in PHASES if any(s == sc and ph == p for (s, ph, _) in self.aggs)]


def rel(a, b, metric):
    if a is None or b is None:
        return None
    if metric.endswith("wal_bytes") and (b.med(metric) or 0) < MiB:
        return None  # a ratio of two near-zero WAL volumes says nothing
    return ratio(a.med(metric), b.med(metric))


def mrows(rows_per_s):
    return "–" if rows_per_s is None else f"{rows_per_s / 1e6:.2f}"


def per_row(nbytes, rows):
    return "–" if nbytes is None or not rows else f"{nbytes / rows:.0f}"


def vm_text(a, vis="vm_all_visible", frz="vm_all_frozen", pages="heap_pages"):
    v, f, p = a.med(vis), a.med(frz), a.med(pages)
    if p is None:
        return "–"
    return f"{fmt_num(int(v or 0))} / {fmt_num(int(f or 0))} of {fmt_num(int(p))}"


def dp_text(a):
    d = a.first("directpath")
    if not d:
        return "–"
    if d["path"] != "direct":
        return f"normal: {d['reason']}"
    idx = f", {d['indexes_rebuilt']} index(es) rebuilt" if d.get("indexes_rebuilt") else ""
    return f"{fmt_num(d['pages_written'])} pages, {'frozen' if d['frozen'] else 'not frozen'}{idx}"


# ----------------------------------------------------------------- loads ----

def baseline_cell(meta, phase, case_id, rows):
    b = seeds.BASELINE.get((meta["major"], phase, case_id))
    if not b:
        return "–"
    rps = seeds.BASELINE_ROWS / b["load_s"]
    bpr = b["wal_mb"] * MiB / seeds.BASELINE_ROWS
    s = f"{'≈' if b.get('approx') else ''}{rps / 1e6:.2f} M/s, {bpr:.0f} B/row"
    if b.get("vac_s") is not None:
        s += f"; freeze {b['vac_wal_mb'] * MiB / seeds.BASELINE_ROWS:.0f} B/row"
    return s


def load_tables(agg, meta, sc, phase, cases):
    perf, state = [], []
    for a in cases:
        tw = agg.get(sc, phase, a.twin) if a.twin else None
        rows = a.first("rows")
        if not a.available:
            perf.append([a.label, "not available: " + (a.why or "")] + ["–"] * 9)
            continue
        vs = f"{fmt_ratio(rel(a, tw, 'load_s'))} / {fmt_ratio(rel(a, tw, 'load_ckpt_s'))} / " \
             f"{fmt_ratio(rel(a, tw, 'wal_bytes'))}" if tw else "1.00 / 1.00 / 1.00" \
            if a.path == "plain" else "–"
        perf.append([
            a.label, fmt_stat(a.st("load_s")), mrows(a.med("rows_per_s")),
            fmt_stat(a.st("ckpt_s")), fmt_stat(a.st("load_ckpt_s")),
            fmt_mb(a.med("wal_bytes")), per_row(a.med("wal_bytes"), rows),
            vs, tw.case if tw else "–", baseline_cell(meta, phase, a.case, rows)])
        if a.case == "rows_only":
            continue
        bufs = f"{fmt_mb((a.med('buffers_heap') or 0) * 8192)} ({fmt_mb((a.med('buffers_heap_dirty') or 0) * 8192)})"
        ibufs = f"{fmt_mb((a.med('buffers_index') or 0) * 8192)} ({fmt_mb((a.med('buffers_index_dirty') or 0) * 8192)})" \
            if a.med("index_bytes") else "–"
        state.append([
            a.label, fmt_mb(a.med("heap_bytes")), fmt_mb(a.med("index_bytes")) if a.med("index_bytes") else "–",
            bufs, ibufs, vm_text(a), fmt_stat(a.st("vac_s")), fmt_mb(a.med("vac_wal_bytes")),
            vm_text(a, "vm_after_vac_all_visible", "vm_after_vac_all_frozen"),
            fmt_stat(a.st("to_frozen_s")), fmt_ratio(rel(a, tw, "to_frozen_s")) if tw else "–",
            fmt_mb(a.med("wal_to_frozen_bytes")), dp_text(a)])
    perf_h = ["case", "load s", "M rows/s", "CHECKPOINT after s", "load + CHECKPOINT s", "WAL MB",
              "WAL B/row", "vs plain: load / load+ckpt / WAL", "plain twin",
              "baseline.md (10 M rows)"]
    state_h = ["case", "heap MB", "index MB", "shared buffers MB: heap (dirty)",
               "index (dirty)", "VM all-visible / all-frozen of pages, after load",
               "VACUUM (FREEZE) s", "its WAL MB", "VM after VACUUM", "load+ckpt+VACUUM s",
               "vs plain", "WAL until frozen MB", "directpath.last_statement()"]
    return md_table(perf_h, perf), md_table(state_h, state)


def short_label(a):
    return a.label.replace("/*+ APPEND */ INSERT", "APPEND").replace("INSERT", "INSERT") \
        .replace("CREATE TABLE in the tx", "CREATE in tx").replace("TRUNCATE in the tx", "TRUNCATE in tx") \
        .replace("existing table", "existing").replace(" (1 on a random key)", "") \
        .replace("producing the rows only: SELECT count(*) FROM (...)", "rows only (SELECT count(*))") \
        .replace("direct COPY (mode=always)", "direct COPY").replace("BEGIN; TRUNCATE; ", "TRUNCATE; ") \
        .replace("; COMMIT", "")


def section_insert(agg, meta, out, figs):
    sc = "insert"
    md = ["## 1. Direct path INSERT … SELECT (seed 000)", "",
          f"Seed table `(timeid int, insid int, indid int, value int)`, loaded by "
          f"`SELECT a % 50, a % 10000, a, a FROM generate_series(1, {meta['rows']}) a`. "
          "*Existing table*: created (with its indexes) in an earlier transaction; *CREATE / "
          "TRUNCATE in the tx*: `BEGIN; CREATE TABLE … | TRUNCATE t; INSERT …; COMMIT`. "
          "Indexes: *1 unique btree* `(timeid, indid, insid)`; *3 btrees* that one plus `(insid)` "
          "and `(hashint4(value))` (a deterministic random key); *BRIN* `(value)`. "
          "*vs plain* divides medians by the plain case's medians measured in this run "
          "(the *plain twin* column; a plain row with an index is compared with the plain "
          "INSERT without one). *load + CHECKPOINT* charges a path for the dirty buffers it "
          "leaves. *baseline.md* shows the baseline's rate and WAL per row (10 M rows, same "
          "machine type), comparable at any N.", ""]
    for phase in agg.phases(sc):
        cases = agg.cases(sc, phase)
        perf, state = load_tables(agg, meta, sc, phase, cases)
        md += [f"### 1.{1 if phase == 'replica' else 2} wal_level = {phase}", "", perf, "",
               "State after the load, and the VACUUM (FREEZE) a user would eventually need "
               "(after the CHECKPOINT):", "", state, ""]
        p = plots.load_figure(out / f"s1_insert_{phase}.png",
                              f"Scenario 1: INSERT … SELECT of {meta['rows']:,} rows, "
                              f"wal_level={phase} (median, min–max)",
                              [(short_label(a), a.path, a) for a in cases])
        if p:
            md += [f"![scenario 1, {phase}]({p.name})", ""]
            figs.append(p)
    md += seed000_table(agg, meta)
    return md


def seed000_table(agg, meta):
    s = seeds.SEED_000
    p = agg.get("insert", "replica", "plain_existing_none")
    d = agg.get("insert", "replica", "direct_existing_none")
    dt = agg.get("insert", "replica", "direct_truncated_none")
    if not (p and d):
        return []
    b = seeds.BASELINE.get((meta["major"], "replica", "plain_existing_none"))
    n = meta["rows"]
    rows = [
        ["plain INSERT: rows/s", fmt_num(round(s["rows"] / s["plain_s"])),
         fmt_num(round(seeds.BASELINE_ROWS / b["load_s"])) if b else "–",
         fmt_num(round(p.med("rows_per_s")))],
        ["plain INSERT: WAL bytes/row", f"{s['plain_wal_mb'] * MiB / s['rows']:.0f}",
         f"{b['wal_mb'] * MiB / seeds.BASELINE_ROWS:.0f}" if b else "–",
         per_row(p.med("wal_bytes"), n)],
        ["direct INSERT (existing table): rows/s", fmt_num(round(s["rows"] / s["direct_s"])),
         "target 5–7.5 M (§9)", fmt_num(round(d.med("rows_per_s")))],
        ["direct INSERT: WAL bytes/row", f"{s['direct_wal_mb'] * MiB / s['rows']:.0f}",
         "≈45 (page images, 1.01× heap)", per_row(d.med("wal_bytes"), n)],
        ["direct / plain: time", fmt_ratio(s["direct_s"] / s["plain_s"]), "target 0.26–0.40",
         fmt_ratio(rel(d, p, "load_s"))],
        ["direct / plain: time incl. CHECKPOINT", "–", "–", fmt_ratio(rel(d, p, "load_ckpt_s"))],
        ["direct / plain: WAL", fmt_ratio(s["direct_wal_mb"] / s["plain_wal_mb"]), "–",
         fmt_ratio(rel(d, p, "wal_bytes"))],
    ]
    if dt:
        rows.append(["direct INSERT, TRUNCATE in the tx: rows/s (frozen, VM set)", "–", "–",
                     fmt_num(round(dt.med("rows_per_s")))])
    return ["### 1.3 Against the seed's published figures", "",
            f"Seed 000: {s['version']}, {s['rows']:,} rows, plain {s['plain_s']} s / "
            f"{s['plain_wal_mb']} MB WAL, `/*+ APPEND */` {s['direct_s']} s / "
            f"{s['direct_wal_mb']} MB WAL (another machine). baseline.md: PG "
            f"{meta['major']}, 10 M rows, this machine type.", "",
            md_table(["wal_level = replica", "seed 000 (published)", "baseline.md", "ours"], rows),
            ""]


# ------------------------------------------------------------------ COPY ----

def section_copy(agg, meta, out, figs):
    sc = "copy"
    md = ["## 2. COPY, COPY FREEZE, direct COPY and pgbench -i (seed 002)", "",
          "COPY reads the text file written once by `COPY (SELECT …) TO` (it stays in the OS "
          "cache). *Direct COPY* is the same COPY with `SET directpath.mode = always`; "
          "directpath's support is detected (a COPY, then `directpath.last_statement()` must "
          "say `direct`).", ""]
    copy_facts = meta.get("facts", {}).get("copy", {})
    for phase, f in copy_facts.items():
        md.append(f"- Direct COPY at wal_level={phase}: "
                  + ("**available**" if f.get("available") else f"**not available** ({f.get('why')})"))
    md.append("")
    for phase in agg.phases(sc):
        cases = agg.cases(sc, phase, "copy")
        if cases:
            perf, state = load_tables(agg, meta, sc, phase, cases)
            ref = [a for a in (agg.get("insert", phase, "direct_truncated_none"),
                               agg.get("insert", phase, "direct_existing_none")) if a]
            md += [f"### 2.{1 if phase == 'replica' else 2} COPY at wal_level = {phase}", "", perf,
                   "", state, ""]
            if ref:
                md += ["For reference, from scenario 1: " + "; ".join(
                    f"{a.label}: {fmt_stat(a.st('load_s'))} s, {fmt_mb(a.med('wal_bytes'))} MB WAL"
                    for a in ref) + ".", ""]
            p = plots.load_figure(out / f"s2_copy_{phase}.png",
                                  f"Scenario 2: COPY of {meta['rows']:,} rows, wal_level={phase}",
                                  [(short_label(a), a.path, a) for a in cases])
            if p:
                md += [f"![scenario 2 COPY, {phase}]({p.name})", ""]
                figs.append(p)
    pg = agg.cases(sc, "replica", "pgbench")
    if pg:
        md += pgbench_init_section(agg, meta, pg, out, figs)
    return md


def pgbench_init_section(agg, meta, cases, out, figs):
    scale = meta.get("pgbench_scale")
    rows = []
    for a in cases:
        tw = agg.get("copy", "replica", a.twin) if a.twin else None
        b = seeds.BASELINE_PGBENCH.get((meta["major"], a.case))
        rows.append([
            a.label, fmt_stat(a.st("total_s")), fmt_stat(a.st("generate_s")),
            fmt_stat(a.st("vacuum_s")), fmt_stat(a.st("pkeys_s")), fmt_mb(a.med("wal_bytes")),
            vm_text(a), f"{fmt_stat(a.st('vac_s'))} / {fmt_mb(a.med('vac_wal_bytes'))}",
            fmt_ratio(rel(a, tw, "total_s")) if tw else "–",
            (f"{b['total_s']} s (g/G {b['generate_s']}, v {b['vacuum_s']}, p {b['pkeys_s']}), "
             f"{b['wal_mb']} MB, VM {b['vm']}") if b else "–",
            a.first("direct_check") or "–"])
    s = seeds.SEED_002
    md = ["### 2.3 pgbench -i", "",
          f"`pgbench -i -s {scale}` ({scale * 100000:,} accounts; scale = rows / 200,000). "
          "Step times are pgbench's own `done in` figures. *always*: "
          "`PGOPTIONS='-c directpath.mode=always'`. The VM columns are pgbench_accounts' right "
          "after pgbench -i; the freeze column is a `VACUUM (FREEZE) pgbench_accounts` after a "
          "CHECKPOINT.", "",
          md_table(["run", "total s", "generate s", "vacuum s", "primary keys s", "WAL MB",
                    "VM all-visible / all-frozen", "later VACUUM (FREEZE) s / WAL MB",
                    "total vs default", f"baseline.md (-s {seeds.BASELINE_PGBENCH_SCALE})",
                    "direct path check"], rows), "",
          f"Seed 002 ({s['version']}, `-s {s['scale']}`, a laptop): before pgbench used COPY "
          f"FREEZE, `done in {s['before']['total_s']} s` with vacuum {s['before']['vacuum']} s "
          f"(client-side generate {s['before']['client-side generate']} s, primary keys "
          f"{s['before']['primary keys']} s); with COPY FREEZE {s['after']['total_s']} s, vacuum "
          f"{s['after']['vacuum']} s.", ""]
    first = cases[0].first("done_line")
    if first:
        md += ["Raw `done in` lines (run 1): " + "; ".join(
            f"{a.case}: `{a.recs[0].get('done_line')}`" for a in cases), ""]
    p = plots.pgbench_init_figure(out / "s2_pgbench_init.png",
                                  f"Scenario 2: pgbench -i -s {scale}",
                                  [(a.label, a.path, a) for a in cases])
    if p:
        md += [f"![pgbench -i]({p.name})", ""]
        figs.append(p)
    return md


# ------------------------------------------------------------------- FDW ----

def section_fdw(agg, meta, out, figs):
    sc = "fdw"
    cases = agg.cases(sc, "replica")
    if not cases:
        return []
    loc = agg.get(sc, "replica", "local_plain")
    b1 = agg.get(sc, "replica", "ft_b1")
    pb1 = agg.get(sc, "replica", "pt_fdw_b1")
    rows = []
    for a in cases:
        tw = agg.get(sc, "replica", a.twin) if a.twin else None
        base1 = pb1 if a.case.startswith("pt_fdw") else b1
        speed = ratio(a.med("rows_per_s"), base1.med("rows_per_s")) if base1 and \
            a.path in ("fdw", "fdw_direct") else None
        per_row_vs = ratio(tw.med("rows_per_s"), a.med("rows_per_s")) if tw else None
        bl = seeds.BASELINE_FDW.get(a.case) if meta["major"] == 18 else None
        note = a.first("fallback_reason")
        d = a.first("directpath")
        rows.append([
            a.label + (f" — falls back: {note}" if note else ""), fmt_num(a.first("rows")),
            fmt_stat(a.st("load_s")), fmt_num(round(a.med("rows_per_s") or 0)),
            f"{speed:.1f}x" if speed else "–",
            f"{per_row_vs:.2f}x ({tw.case})" if tw else "–",
            fmt_mb(a.med("wal_bytes")), fmt_mb(a.med("remote_wal_bytes")),
            fmt_num(bl) if bl else "–",
            ("direct" if d and d["path"] == "direct" else "normal" if d else "–")])
    s = seeds.SEED_004
    n = cases[0].first("rows")
    md = ["## 3. Batch insert into postgres_fdw foreign tables (seed 004)", "",
          "A second server (same binaries, `shared_buffers=512MB`, otherwise the same settings) "
          "on 127.0.0.1 holds the targets `(id int primary key, t text)`. Load: "
          "`INSERT INTO <target> SELECT g, md5(g::text) FROM generate_series(1, n) g`. "
          f"batch_size 1 is capped at {min(n or 0, 100000):,} rows; compare rows/s. *Partitioned*: "
          "hash partitioned in three, two foreign partitions on the second server and one "
          "local. *per-row time vs local* = local rows/s ÷ this row's rows/s.", "",
          md_table(["target", "rows", "s", "rows/s", "speed-up vs batch_size 1",
                    "per-row time vs local", "local WAL MB", "remote WAL MB",
                    "baseline.md rows/s (PG 18)", "path"], rows), "",
          f"Seed 004 ({s['version']}, {s['rows']:,} rows, same host): local "
          f"{s['local_s']} s ({s['rows'] / s['local_s']:,.0f} rows/s), foreign table batch 1 "
          f"{s['fdw_b1_s']} s ({s['rows'] / s['fdw_b1_s']:,.0f} rows/s), batch_size 100 "
          f"{s['fdw_b100_s']} s ({s['rows'] / s['fdw_b100_s']:,.0f} rows/s, "
          f"{s['fdw_b1_s'] / s['fdw_b100_s']:.1f}x); {s['partitions']}: local {s['part_local_s']} s, "
          f"batch 1 {s['part_fdw_b1_s']} s, batch 100 {s['part_fdw_b100_s']} s "
          f"({s['part_fdw_b1_s'] / s['part_fdw_b100_s']:.1f}x).", ""]
    if loc and b1:
        md += [f"Ours: batch_size 1 → 1000 is "
               f"{ratio(agg.get(sc, 'replica', 'ft_b1000').med('rows_per_s'), b1.med('rows_per_s')) or 0:.1f}x; "
               f"batch_size 100 reaches {ratio(agg.get(sc, 'replica', 'ft_b100').med('rows_per_s'), loc.med('rows_per_s')) or 0:.2f} "
               "of the local rate.", ""]
    p = plots.fdw_figure(out / "s3_fdw.png", f"Scenario 3: postgres_fdw INSERT … SELECT "
                         f"({n:,} rows; batch_size 1 capped)",
                         [(short_label(a).replace("2 foreign + 1 local partitions",
                                                  "part. 2 foreign+1 local"), a.path, a)
                          for a in cases])
    if p:
        md += [f"![postgres_fdw]({p.name})", ""]
        figs.append(p)
    return md


# ------------------------------------------------------------ insert-only ---

def section_update(agg, meta, out, figs):
    sc = "update"
    cases = agg.cases(sc, "replica")
    if not cases:
        return []
    rows = []
    for a in cases:
        tw = agg.get(sc, "replica", a.twin) if a.twin else None
        rows.append([
            a.label, fmt_stat(a.st("tps"), 0), fmt_stat(a.st("latency_ms"), 3),
            fmt_num(round(a.med("transactions") or 0)), fmt_num(round(a.med("wal_per_tx") or 0)),
            fmt_mb(a.med("wal_bytes")), fmt_mb(a.med("accounts_heap_growth_bytes")),
            fmt_mb(a.med("accounts_index_growth_bytes")), fmt_mb(a.med("history_growth_bytes")),
            fmt_mb(a.med("total_growth_bytes")),
            f"{fmt_ratio(rel(a, tw, 'tps'))} / {fmt_ratio(rel(a, tw, 'wal_per_tx'))}" if tw else "–"])
    s = seeds.SEED_001
    c0 = cases[0]
    md = ["## 4. Insert-only data model vs UPDATE (seed 001)", "",
          f"`pgbench -i -s {c0.first('scale')}` before every run, then `pgbench -n -c 2 -j 2 "
          f"-T {c0.first('duration_s')} -M prepared`. Workloads: the built-in simple-update "
          "(the seed's `--skip-some-updates`), the same without the history insert "
          "(`bench/workloads/update_only.sql`), and the insert-only model "
          "(`bench/workloads/insert_only_schema.sql`, `insert_only.sql`: a new version row per "
          "change, the latest version read through an `(aid, version)` index). autovacuum off "
          "(baseline settings). Growth is over the run.", "",
          md_table(["workload", "TPS", "latency ms", "transactions", "WAL bytes/tx", "WAL MB",
                    "accounts heap growth MB", "accounts index growth MB",
                    "history growth MB", "total growth MB", "vs simple-update: TPS / WAL per tx"],
                   rows), "",
          f"Seed 001 (`-s {s['scale']}`, {s['clients']} clients, {s['duration_s']} s, prepared): "
          f"UPDATE (`--skip-some-updates`) {s['update_tps']:,} TPS, {s['update_latency_ms']} ms; "
          f"insert-only {s['insert_only_tps']:,} TPS, {s['insert_only_latency_ms']} ms "
          f"({s['tps_gain']} TPS); WAL difference {s['wal_difference']}.", ""]
    su, io = agg.get(sc, "replica", "simple_update"), agg.get(sc, "replica", "insert_only")
    if su and io:
        md += [f"Ours: insert-only / simple-update TPS = {fmt_ratio(rel(io, su, 'tps'))} "
               f"(seed: {s['insert_only_tps'] / s['update_tps']:.2f}); WAL per transaction "
               f"simple-update / insert-only = {fmt_ratio(rel(su, io, 'wal_per_tx'))} "
               "(seed: +135%, i.e. 2.35 if read as UPDATE's excess).", ""]
    p = plots.pgbench_run_figure(
        out / "s4_insert_only.png", "Scenario 4: insert-only vs UPDATE (pgbench, 2 clients)",
        [(a.label.replace(" (the seed's -N)", "").replace(": a new version row per change", ""),
          a.path, a) for a in cases],
        [("tps", 1, "transactions/s", "TPS", "{:,.0f}"),
         ("wal_per_tx", 1, "bytes", "WAL per transaction", "{:,.0f}"),
         ("total_growth_bytes", MiB, "MiB", "table + index growth", "{:.1f}")])
    if p:
        md += [f"![insert-only]({p.name})", ""]
        figs.append(p)
    return md


# ------------------------------------------------------------------- HOT ----

def section_hot(agg, meta, out, figs):
    sc = "hot"
    cases = agg.cases(sc, "replica")
    if not cases:
        return []
    s = seeds.SEED_003
    rows = []
    for a in cases:
        av = a.first("autovacuum")
        expr = a.case.startswith("expr")
        seedv = s["on" if av == "on" else "off"]["recheck_off" if expr else "recheck_on"]
        tw = agg.get(sc, "replica", a.twin) if a.twin else None
        hot = a.med("hot_ratio")
        rows.append([
            a.label, fmt_stat(a.st("tps"), 0), fmt_stat(a.st("latency_ms"), 3),
            f"{fmt_num(round(a.med('n_tup_hot_upd') or 0))} / {fmt_num(round(a.med('n_tup_upd') or 0))}"
            f" ({hot * 100:.1f}%)" if hot is not None else "–",
            fmt_num(round(a.med("n_dead_tup") or 0)), fmt_num(round(a.med("autovacuum_count") or 0)),
            fmt_num(round((a.med("table_bytes") or 0) / 1024)),
            fmt_num(round((a.med("c2_idx_bytes") or 0) / 1024)),
            fmt_num(round(a.med("expr_idx_bytes") / 1024)) if a.med("expr_idx_bytes") is not None else "–",
            fmt_num(round(a.med("wal_per_tx") or 0)),
            f"{fmt_ratio(rel(a, tw, 'tps'))}" if tw else "–",
            f"recheck_on_update={'off' if expr else 'on'}: {seedv['tps']:,} TPS, HOT "
            f"{seedv['hot'] / seedv['upd'] * 100:.1f}%, t5 {seedv['table_kb']:,} kB, "
            f"expr idx {seedv['expr_idx_kb']:,} kB"])
    c0 = cases[0]
    nap = next((a.first("autovacuum_naptime") for a in cases if a.first("autovacuum") == "on"), None)
    md = ["## 5. HOT updates and expression indexes (seed 003)", "",
          "The seed's table `t5 (c1 jsonb, c2 int, c3 int)` with two rows and its script "
          "(`bench/workloads/hot.sql`: two UPDATEs that rewrite `c1` but keep `c1->>'prenom'`), "
          f"`pgbench -n -c 2 -j 2 -T {c0.first('duration_s')} -M simple` (the seed: 6 clients, "
          f"1 thread, 120 s). With autovacuum on, autovacuum_naptime = {nap} (scaled to the "
          "run; the seed had the default 1 min over 120 s).", "",
          "**recheck_on_update.** PostgreSQL 11.0 let an UPDATE stay HOT when an expression "
          "index's *value* did not change (`recheck_on_update`, default on): that is the seed's "
          "22.9 k TPS. 11.1 removed it (it could crash the server); every release since, "
          f"including the PostgreSQL {meta.get('server_version', meta['major'])} measured here, "
          "decides HOT by *columns*: an UPDATE that changes any column an expression index "
          "reads is never HOT, whatever the expression yields. (PostgreSQL 16+ exempts only "
          "summarizing indexes such as BRIN.) So *index on c1->>'prenom'* shows today's "
          "behaviour (the seed's recheck_on_update=off), and *index on c2 only* the HOT case "
          "(the seed's recheck_on_update=on).", "",
          md_table(["configuration", "TPS", "latency ms", "HOT / all updates", "dead tuples",
                    "autovacuum runs", "t5 kB", "c2 index kB", "expression index kB",
                    "WAL bytes/tx", "TPS vs expression index", "seed 003 (PG 11.0)"], rows), ""]
    p = plots.pgbench_run_figure(
        out / "s5_hot.png", "Scenario 5: HOT updates with and without an expression index",
        [(a.label.replace(", autovacuum", ",\nautovacuum"), a.path, a) for a in cases],
        [("tps", 1, "transactions/s", "TPS", "{:,.0f}"),
         ("hot_ratio", 0.01, "% of updates", "HOT updates", "{:.1f}"),
         ("wal_per_tx", 1, "bytes", "WAL per transaction", "{:,.0f}")])
    if p:
        md += [f"![HOT]({p.name})", ""]
        figs.append(p)
    return md


# ------------------------------------------------------ WAL formats (6) ----

def run_ratios(a, base, metric):
    """median [min-max] of a's metric divided by base's of the same run."""
    if a is None or base is None:
        return None
    by = {r["run"]: r.get(metric) for r in base.recs}
    return stat([r[metric] / by[r["run"]] for r in a.recs
                 if r.get(metric) is not None and by.get(r["run"])])


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


def titled_table(title, header, rows):
    """A titled terminal table, or nothing without rows."""
    return ["", title, text_table(header, rows)] if rows else []


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


def load_rows(agg, scenario, *columns):
    """Per case of a replica-phase scenario: label, load time, ratio against
    its twin (1 for a case without one), then column(case) for each of
    'columns'."""
    rows = []
    for a in agg.cases(scenario, "replica"):
        base = agg.get(scenario, "replica", a.twin) if a.twin else None
        rows.append([a.label, fmt_stat(a.st("load_ckpt_s")),
                     fmt_stat(run_ratios(a, base, "load_ckpt_s")) if base else "1"] +
                    [column(a) for column in columns])
    return rows


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
               "lineitem s", "keys s", "WAL MB", "frozen pages", "tables with stats"]
TPCH_TABLES = ("region", "nation", "supplier", "part", "partsupp", "customer", "orders",
               "lineitem")


def tpch_rows(agg):
    recipe = agg.get("tpch", "replica", "recipe_plain")
    keys = agg.get("tpch", "replica", "keys_plain")
    month = agg.get("tpch", "replica", "month_plain")
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

UPSERT_HEADER = ["statement", "statement + CHECKPOINT s", "/ plain", "rows as plain"]


def upsert_rows(agg):
    def same(a):
        # every case leaves the table the plain INSERT of its kind leaves
        ref = next((k + "_plain" for k in ("update", "merge", "copy_update")
                    if a.case.startswith(k)), "plain")
        plain = agg.get("upsert", "replica", ref)
        if a.case == ref or plain is None:
            return "–"
        return "yes" if a.first("digest") == plain.first("digest") else "NO"

    return load_rows(agg, "upsert", same)


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


# --------------------------------------------------------------- summary ----

def summary_rows(agg, meta):
    """(label, plain, direct, ratio, ckpt, wal, freeze) rows for the headline table."""
    out = []

    def load_row(label, sc, phase, plain_id, direct_id):
        p, d = agg.get(sc, phase, plain_id), agg.get(sc, phase, direct_id)
        if not p or not d:
            return
        if not d.available:
            out.append([label, fmt_stat(p.st("load_s"), show_range=False), "not available",
                        "–", "–", "–", "–"])
            return
        out.append([
            label,
            f"{p.med('load_s'):.2f}", f"{d.med('load_s'):.2f}",
            f"{fmt_ratio(rel(d, p, 'load_s'))} ({fmt_ratio(rel(d, p, 'load_ckpt_s'))})",
            f"{fmt_mb(p.med('wal_bytes'), 0)} → {fmt_mb(d.med('wal_bytes'), 0)}",
            f"{p.med('vac_s'):.2f} s/{fmt_mb(p.med('vac_wal_bytes'), 0)} → "
            f"{d.med('vac_s'):.2f} s/{fmt_mb(d.med('vac_wal_bytes'), 0)}"
            if p.med("vac_s") is not None and d.med("vac_s") is not None else "–",
            fmt_ratio(rel(d, p, "to_frozen_s")) if p.med("to_frozen_s") else "–"])

    for phase, st, idx, lab in (
            ("replica", "existing", "none", "INSERT…SELECT, existing table"),
            ("replica", "truncated", "none", "INSERT…SELECT, TRUNCATE in tx"),
            ("minimal", "existing", "none", "INSERT…SELECT, existing table, minimal"),
            ("minimal", "created", "none", "INSERT…SELECT, CREATE in tx, minimal"),
            ("replica", "existing", "unique", "… existing, 1 unique btree"),
            ("replica", "truncated", "unique", "… TRUNCATE in tx, 1 unique btree"),
            ("replica", "existing", "btree3", "… existing, 3 btrees"),
            ("replica", "truncated", "btree3", "… TRUNCATE in tx, 3 btrees"),
            ("replica", "existing", "brin", "… existing, BRIN")):
        load_row(lab, "insert", phase, f"plain_{st}_{idx}", f"direct_{st}_{idx}")
    load_row("COPY vs direct COPY, existing table", "copy", "replica", "copy", "direct_copy")
    load_row("COPY FREEZE vs direct COPY, TRUNCATE in tx", "copy", "replica", "copy_freeze",
             "direct_copy_truncated")
    for plain_id, direct_id, lab in (("pgbench_i", "pgbench_i_always", "pgbench -i (dtgvp)"),
                                     ("pgbench_i_G", "pgbench_i_G_always", "pgbench -i -I dtGvp")):
        p, d = agg.get("copy", "replica", plain_id), agg.get("copy", "replica", direct_id)
        if p and d:
            out.append([f"{lab} -s {p.first('scale')}, default vs mode=always",
                        f"{p.med('total_s'):.2f}", f"{d.med('total_s'):.2f}",
                        fmt_ratio(rel(d, p, "total_s")),
                        f"{fmt_mb(p.med('wal_bytes'), 0)} → {fmt_mb(d.med('wal_bytes'), 0)}",
                        f"{p.med('vac_s'):.2f} s/{fmt_mb(p.med('vac_wal_bytes'), 0)} → "
                        f"{d.med('vac_s'):.2f} s/{fmt_mb(d.med('vac_wal_bytes'), 0)}", "–"])
    return out


def other_rows(agg):
    out = []
    f = {c: agg.get("fdw", "replica", c) for c in
         ("local_plain", "ft_b1", "ft_b10", "ft_b100", "ft_b1000", "pt_local_plain",
          "pt_fdw_b1", "pt_fdw_b100", "pt_fdw_b1000")}

    def rps(a):
        return fmt_num(round(a.med("rows_per_s"))) if a and a.med("rows_per_s") else "–"
    if f["ft_b1"]:
        out.append(["postgres_fdw rows/s: batch_size 1 / 10 / 100 / 1000 / local",
                    " / ".join(rps(f[c]) for c in ("ft_b1", "ft_b10", "ft_b100", "ft_b1000",
                                                   "local_plain"))])
    if f["pt_fdw_b1"]:
        out.append(["partitioned (2 foreign + 1 local) rows/s: batch_size 1 / 100 / 1000 / all local",
                    " / ".join(rps(f[c]) for c in ("pt_fdw_b1", "pt_fdw_b100", "pt_fdw_b1000",
                                                   "pt_local_plain"))])
    su, uo, io = (agg.get("update", "replica", c) for c in ("simple_update", "update_only",
                                                             "insert_only"))
    if su and io:
        out.append(["TPS simple-update / update-only / insert-only (WAL bytes/tx)",
                    " / ".join(f"{a.med('tps'):,.0f} ({a.med('wal_per_tx'):,.0f})"
                               for a in (su, uo, io) if a)])
    for av in ("off", "on"):
        e, n = agg.get("hot", "replica", f"expr_idx_av_{av}"), agg.get("hot", "replica",
                                                                       f"noexpr_idx_av_{av}")
        if e and n:
            out.append([f"HOT share / TPS, autovacuum {av}: expression index vs c2 only",
                        f"{(e.med('hot_ratio') or 0) * 100:.0f}% / {e.med('tps'):,.0f} vs "
                        f"{(n.med('hot_ratio') or 0) * 100:.0f}% / {n.med('tps'):,.0f}"])
    return out


SUMMARY_HEADER = ["case (plain vs direct)", "plain s", "direct s",
                  "direct/plain (incl. CHECKPOINT)", "WAL MB plain → direct",
                  "later VACUUM (FREEZE) plain → direct", "to all-frozen direct/plain"]


def summary_md(agg, meta):
    pgv = meta.get("server_version") or meta["major"]
    head = (f"directpath bench: PostgreSQL {pgv}, {meta['rows']:,} rows, median of "
            f"{meta['runs']} run(s), {meta['started_utc']} on {meta['machine']['hostname']} "
            f"({meta['machine']['cpus']} vCPU)")
    lines = [f"**{head}**", "", f"Command: `{meta['command']}`", ""]
    rows = summary_rows(agg, meta)
    if rows:
        lines += [md_table(SUMMARY_HEADER, rows), ""]
    other = other_rows(agg)
    if other:
        lines += [md_table(["other scenarios", "result"], other), ""]
    lines.append("Seconds are load times (wal_level replica unless marked); the ratio in "
                 "parentheses includes the CHECKPOINT that writes what the load left dirty. "
                 "Full report: report.md beside this file.")
    return "\n".join(lines) + "\n"


def summary_text(agg, meta):
    pgv = meta.get("server_version") or meta["major"]
    out = [f"\ndirectpath bench: PostgreSQL {pgv}, {meta['rows']:,} rows, median of "
           f"{meta['runs']} run(s)\n"]
    rows = summary_rows(agg, meta)
    if rows:
        out.append(text_table(SUMMARY_HEADER, rows))
    other = other_rows(agg)
    if other:
        out.append("")
        out.append(text_table(["other scenarios", "result"], other))
    out += (wal_text(agg) + index_text(agg) + fallback_text(agg) + etl_text(agg) +
            fkey_text(agg) + parallel_text(agg) + parse_text(agg) + restore_text(agg) +
            upsert_text(agg) + born_text(agg) + shard_text(agg) + parpart_text(agg) +
            tpch_text(agg) + bulkdml_text(agg) +
            s20_sessions.text(agg, load_rows, titled_table))
    return "\n".join(out)


# ---------------------------------------------------------------- report ----

def settings_table(meta):
    phases = meta.get("phases", {})
    if not phases:
        return []
    names = sorted(set().union(*(p["settings"].keys() for p in phases.values())))
    cols = list(phases)
    rows = [[n] + [phases[p]["settings"].get(n, "–") for p in cols] for n in names]
    return [md_table(["setting"] + [f"wal_level={p} phase" for p in cols], rows)]


def write_all(out, meta, records):
    out = Path(out)
    phases = meta.get("phases") or {}
    if phases:
        first = next(iter(phases.values()))
        meta["server_version"] = first.get("server_version")
        meta["version_string"] = first.get("version")
    agg = Agg(records)
    figs = []
    m = meta["machine"]
    g = meta.get("git") or {}
    build = meta.get("build") or {}
    md = ["# directpath benchmark report", ""]
    if meta.get("failure"):
        md += [f"> **FAILED:** {meta['failure']}", "> The tables below hold what was measured "
               "before the failure.", ""]
    md += [
        f"- **Command:** `{meta['command']}`",
        f"- **When:** {meta['started_utc']} → {meta.get('finished_utc')} UTC "
        f"({meta.get('elapsed_s', 0) / 60:.1f} min)",
        f"- **Machine:** {m['hostname']}, {m['cpu']}, {m['cpus']} vCPU, {m['memory']} RAM, "
        f"Linux {m['kernel']}; load average at start {m['loadavg_start'][0]:.2f}, at end "
        f"{m.get('loadavg_end', [0])[0]:.2f} (other work shares these CPUs: read small "
        "differences as noise)",
        f"- **PostgreSQL:** {meta.get('version_string') or meta['major']}",
        f"- **directpath:** commit {g.get('commit')} ({g.get('subject')})"
        + (", **with uncommitted changes in src/**" if g.get("source_modified") else "")
        + (f"; built from a copy of the work tree, source {build.get('source_sha256')}, "
           f"directpath.so {build.get('so_sha256')}" if build.get("so_sha256") else ""),
        f"- **Size:** {meta['rows']:,} rows of the seed table; {meta['runs']} run(s) per case, "
        "run round-robin (every case once, then again); pgbench runs "
        f"{meta.get('duration_s')} s; pgbench scale {meta.get('pgbench_scale')}.",
        "- **Format:** `median [min–max]`; MB = MiB (2^20 bytes); ratios divide medians.",
        ""]
    if meta.get("notes"):
        md += ["**Notes:**", ""] + [f"- scenario {k}: {t}" for k, t in meta["notes"]] + [""]
    md += ["## Summary", "", summary_md(agg, meta), "",
           "## Settings", "",
           "initdb `-U postgres --auth=trust -E UTF8 --locale=C -k` (data checksums on), "
           "server as user dptest, Unix socket and data in a temporary directory, "
           "`shared_preload_libraries = 'directpath'`. baseline.md's settings; the minimal phase "
           "restarts the same cluster with `wal_level=minimal, max_wal_senders=0`; scenarios 6 "
           "and 7 run on fresh clusters of their own (the columns marked with their name).", ""]
    md += settings_table(meta) + [""]
    md += ["## Method", "",
           "The per-run procedure of docs/baseline.md: (1) drop and create the table "
           "(and its indexes) in their own committed transaction, CHECKPOINT, settle "
           "(1 s; 0.2 s in --quick); (2) read `pg_current_wal_insert_lsn()`, time the load "
           "statement(s) with the client's wall clock, COMMIT included (psycopg 3 over the "
           "Unix socket, autocommit; same-transaction variants send BEGIN … COMMIT), read the "
           "LSN again; (3) for a direct-path case `directpath.last_statement()` must say "
           "`direct` (the suite fails otherwise), then sizes, the shared buffers holding the "
           "table and its indexes (pg_buffercache) and the visibility map "
           "(`pg_visibility_map_summary`); (4) time a CHECKPOINT (it writes what the load left "
           "dirty); (5) time `VACUUM (FREEZE)` and its WAL: the freeze a user eventually needs, "
           "after a checkpoint as in real life. After each server start an unmeasured warm-up "
           "inserts 4.5× the table into an UNLOGGED table (faults in shared memory) and writes "
           "WAL that later runs recycle.", ""]
    for fn in (section_insert, section_copy, section_fdw, section_update, section_hot,
               section_wal, section_indexes, section_fallback, section_etl,
               section_fkeys, section_parallel, section_parse, section_restore,
               section_upsert, section_born, section_shard, section_parpart,
               section_tpch, section_bulkdml):
        md += fn(agg, meta, out, figs)
    md += s20_sessions.section(agg, load_rows)
    md += ["## Files", "",
           "- `raw/*.json`: one record per case and run (every measured field)",
           "- `results.json`: all records and the run's metadata",
           "- `summary.md`: the summary table above",
           "- " + ", ".join(f"`{p.name}`" for p in figs) + ": plots (bars: median; whiskers: "
           "min–max)", "- `server.log`: the server log (`server-*.log`: the clusters of scenarios 6 and 7)", ""]
    (out / "report.md").write_text("\n".join(md))
    (out / "summary.md").write_text(summary_md(agg, meta))
    return summary_text(agg, meta)
