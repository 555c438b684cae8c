"""The report's sections of the seed experiments' scenarios (1-5)."""

from . import plots, seeds
from .report_base import dp_text, mrows, per_row, rel, run_ratios, titled_table, vm_text
from .util import MiB, fmt_mb, fmt_num, fmt_ratio, fmt_stat, md_table, ratio


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
    cases = [a for a in agg.cases(sc, "replica") if a.first("tps") is not None]
    batch = update_batch_cases(agg)
    if not cases:
        return update_batch_section(agg, batch)
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
    return md + update_batch_section(agg, batch)


UPDATE_BATCH_HEADER = ["statement", "statement + CHECKPOINT s", "/ plain UPDATE", "WAL MB",
                       "WAL / plain UPDATE", "accounts heap growth MB", "index growth MB",
                       "VACUUM after s", "balances as plain UPDATE"]


def update_batch_cases(agg):
    """Scenario 4's batch cases (those that record a change set)."""
    return [a for a in agg.cases("update", "replica") if a.first("changes") is not None]


def update_batch_rows(agg, batch):
    ref = agg.get("update", "replica", "update_batch_plain")

    def ratio(a, metric):
        return fmt_stat(run_ratios(a, ref, metric)) if ref and a is not ref else "1"

    return [[a.label, fmt_stat(a.st("load_ckpt_s")), ratio(a, "load_ckpt_s"),
             fmt_mb(a.med("wal_bytes")), ratio(a, "wal_bytes"),
             fmt_mb(a.med("accounts_heap_growth_bytes")),
             fmt_mb(a.med("accounts_index_growth_bytes")), fmt_stat(a.st("vac_s")),
             ("yes" if a.first("digest") == ref.first("digest") else "NO") if ref else "–"]
            for a in batch]


def update_batch_section(agg, batch):
    if not batch:
        return []
    c0 = batch[0]
    return ["### The same in batch: a change set in one statement", "",
            f"`pgbench -i -s {c0.first('scale')}` ({c0.first('accounts'):,} accounts), then "
            f"{c0.first('changes'):,} balance changes (random order, a staging table) applied "
            "by one statement: `UPDATE ... FROM` the change set, or the insert-only model's "
            "`INSERT ... SELECT` of each changed account's next version; each plain and "
            "`/*+ APPEND */`. Time is the statement plus the CHECKPOINT after it; the last "
            "column compares the current balances (their sum, read the model's way).", "",
            md_table(UPDATE_BATCH_HEADER, update_batch_rows(agg, batch)), ""]


def update_batch_text(agg):
    batch = update_batch_cases(agg)
    return titled_table("Insert-only vs UPDATE in batch", UPDATE_BATCH_HEADER,
                        update_batch_rows(agg, batch)) if batch else []


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


