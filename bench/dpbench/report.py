"""report.md, summary.md, plots and the terminal summary, from the raw records."""

from pathlib import Path

from . import s20_sessions, s21_keys
from .report_base import Agg, rel
from .report_seeds import (section_copy, section_fdw, section_hot, section_insert, section_update,
                           update_batch_text)
from .report_loads import (etl_text, fallback_text, fkey_text, index_text, parallel_text,
                           parpart_text, section_etl, section_fallback, section_fkeys,
                           section_indexes, section_parallel, section_parpart, section_tpch,
                           section_wal, tpch_text, wal_text)
from .report_statements import (born_text, bulkdml_text, parse_text, restore_text, section_born,
                                section_bulkdml, section_parse, section_restore, section_shard,
                                section_upsert, shard_text, upsert_text)
from .util import fmt_mb, fmt_num, fmt_ratio, fmt_stat, md_table, text_table


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
            tpch_text(agg) + bulkdml_text(agg) + update_batch_text(agg) +
            s20_sessions.text(agg) + s21_keys.text(agg))
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
    md += s20_sessions.section(agg) + s21_keys.section(agg)
    md += ["## Files", "",
           "- `raw/*.json`: one record per case and run (every measured field)",
           "- `results.json`: all records and the run's metadata",
           "- `summary.md`: the summary table above",
           "- " + ", ".join(f"`{p.name}`" for p in figs) + ": plots (bars: median; whiskers: "
           "min–max)", "- `server.log`: the server log (`server-*.log`: the clusters of scenarios 6 and 7)", ""]
    (out / "report.md").write_text("\n".join(md))
    (out / "summary.md").write_text(summary_md(agg, meta))
    return summary_text(agg, meta)
