#!/usr/bin/env python3
"""The direct path's WAL formats against plain INSERT and COPY.

    python bench/wal.py [--rows N] [--runs R] [--major M] [--quick]
                        [--out DIR] [--no-build]

For each wal_level (replica, then logical) a fresh primary with the settings
of shared/design/baseline.md and a streaming standby made from it.  Cases,
all loading the seed table of seed 000 (10M rows by default) into an
existing table without indexes:

  insert          INSERT ... SELECT, plain
  copy            COPY FROM a server file, plain
  direct_records  /*+ APPEND */ INSERT, directpath.wal_format = records
  direct_image    /*+ APPEND */ INSERT, directpath.wal_format = image
  dcopy_records   /*+ APPEND */ COPY, records
  dcopy_image     /*+ APPEND */ COPY, image

At wal_level = logical the table is logically logged, and a logically
logged table always gets records (wal.c), so the image cases are left out
there.  Every case runs --runs times, round-robin.  Per run:

  1. CREATE TABLE, CHECKPOINT, wait for the standby to replay everything,
     pause its replay (pg_wal_replay_pause);
  2. the load, timed on the client (COMMIT included), WAL bytes between the
     insert LSNs before and after, heap bytes after: WAL per heap byte;
  3. wait until the standby has received the load's WAL, resume replay and
     time it until the standby's replay LSN reaches the load's end.

Figures are medians with min-max, and ratios against the plain INSERT (and
COPY) of the same run.  Prints a table and writes results.json and
report.md to bench/results/<UTC time>-wal-<host>/ (or --out).
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    from dpbench import venv
    venv.ensure(__file__)

import datetime  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

from dpbench.measure import check_direct, insert_lsn, wal_diff  # noqa: E402
from dpbench.server import (BASELINE_SETTINGS, Server, as_server_user,  # noqa: E402
                            build_and_install, ensure_server_user, git_facts,
                            make_workdir, provision, run)
from dpbench.util import (BenchError, fmt_stat, log, md_table, standalone_args,  # noqa: E402
                          stat, text_table)

COLUMNS = "(timeid int, insid int, indid int, value int)"

CASES = [
    # id, label, kind, wal_format
    ("insert", "INSERT ... SELECT", "insert", None),
    ("copy", "COPY FROM file", "copy", None),
    ("direct_records", "/*+ APPEND */ INSERT, records", "insert", "records"),
    ("direct_image", "/*+ APPEND */ INSERT, image", "insert", "image"),
    ("dcopy_records", "/*+ APPEND */ COPY, records", "copy", "records"),
    ("dcopy_image", "/*+ APPEND */ COPY, image", "copy", "image"),
]
PHASES = ("replica", "logical")


def seed_select(n):
    return f"SELECT a % 50, a % 10000, a, a FROM generate_series(1, {int(n)}) a"


def parse_args():
    return standalone_args(__doc__, 10_000_000)


def settings(phase):
    s = dict(BASELINE_SETTINGS)
    s.update({"wal_level": phase, "max_wal_senders": "4", "hot_standby": "on",
              "wal_keep_size": "32GB", "shared_preload_libraries": "directpath"})
    return s


def make_pair(bindir, workdir, phase):
    """A primary with the baseline settings and a streaming standby."""
    p = Server(bindir, workdir, f"primary_{phase}")
    p.initdb()
    p.configure(settings(phase))
    p.start()
    with p.connect() as c:
        c.execute("CREATE EXTENSION directpath")
    s = Server(bindir, workdir, f"standby_{phase}", port_taken=(p.port,))
    run(as_server_user([bindir / "pg_basebackup", "-D", s.datadir, "-h", p.sockdir, "-p",
                        p.port, "-U", "postgres", "-R", "-X", "stream", "-c", "fast"]),
        env=p.env, cwd=workdir, timeout=900)
    s.configure(settings(phase))
    s.start()
    return p, s


def lsn_reached(conn, fn, lsn):
    return conn.execute(f"SELECT coalesce({fn}() >= %s::pg_lsn, false)", (str(lsn),)).fetchone()[0]


def wait_lsn(conn, fn, lsn, timeout=1800, poll=0.005):
    deadline = time.monotonic() + timeout
    while not lsn_reached(conn, fn, lsn):
        if time.monotonic() > deadline:
            raise BenchError(f"standby: {fn}() did not reach {lsn} in {timeout}s")
        time.sleep(poll)


def warm_up(p, s, rows):
    """Fault in both servers' shared buffers and WAL segments."""
    log(f"warm-up: {2 * rows:,} rows, replayed by the standby")
    with p.connect() as c, s.connect() as sc:
        c.execute("DROP TABLE IF EXISTS warm")
        c.execute(f"CREATE TABLE warm {COLUMNS}")
        c.execute(f"INSERT INTO warm {seed_select(2 * rows)}")
        c.execute("DROP TABLE warm")
        c.execute("CHECKPOINT")
        wait_lsn(sc, "pg_last_wal_replay_lsn", insert_lsn(c))


def run_case(p, s, case, rows, datafile, phase):
    cid, label, kind, fmt = case
    with p.connect() as c, s.connect() as sc:
        c.execute("DROP TABLE IF EXISTS t")
        c.execute(f"CREATE TABLE t {COLUMNS}")
        c.execute("CHECKPOINT")
        wait_lsn(sc, "pg_last_wal_replay_lsn", insert_lsn(c))
        sc.execute("SELECT pg_wal_replay_pause()")
        time.sleep(0.5)
        if fmt:
            c.execute(f"SET directpath.wal_format = {fmt}")
        hint = "/*+ APPEND */ " if fmt else ""
        sql = (f"{hint}INSERT INTO t {seed_select(rows)}" if kind == "insert"
               else f"{hint}COPY t FROM '{datafile}'")
        lsn0 = insert_lsn(c)
        t0 = time.perf_counter()
        c.execute(sql)
        load_s = time.perf_counter() - t0
        lsn1 = insert_lsn(c)
        if fmt:
            check_direct(c, f"{cid} ({phase})", rows)
        heap = c.execute("SELECT pg_relation_size('t')").fetchone()[0]
        wal = wal_diff(c, lsn0, lsn1)
        # the standby has the WAL; replay it, timed
        wait_lsn(sc, "pg_last_wal_receive_lsn", lsn1)
        t2 = time.perf_counter()
        sc.execute("SELECT pg_wal_replay_resume()")
        wait_lsn(sc, "pg_last_wal_replay_lsn", lsn1)
        replay_s = time.perf_counter() - t2
        n = sc.execute("SELECT count(*) FROM t").fetchone()[0]
        if n != rows:
            raise BenchError(f"{cid} ({phase}): the standby has {n} rows, want {rows}")
        c.execute("DROP TABLE t")
    return {"phase": phase, "case": cid, "label": label, "rows": rows, "load_s": load_s,
            "wal_bytes": wal,
            "heap_bytes": heap, "wal_per_heap": wal / heap, "replay_s": replay_s}


def summarize(records):
    """{phase: [(case, label, stats...)]} with ratios against the same run's
    plain INSERT."""
    out = {}
    for phase in PHASES:
        recs = [r for r in records if r["phase"] == phase]
        if not recs:
            continue
        rows = []
        by = {}
        for r in recs:
            by.setdefault(r["case"], []).append(r)
        for cid, label, _, _ in CASES:
            if cid not in by:
                continue
            rs = by[cid]
            base = {r["run"]: r for r in by["insert"]}
            copy = {r["run"]: r for r in by["copy"]}
            rows.append({
                "case": cid, "label": label,
                "load_s": stat([r["load_s"] for r in rs]),
                "load_vs_insert": stat([r["load_s"] / base[r["run"]]["load_s"] for r in rs]),
                "load_vs_copy": stat([r["load_s"] / copy[r["run"]]["load_s"] for r in rs]),
                "wal_mb": stat([r["wal_bytes"] / 2**20 for r in rs]),
                "heap_mb": stat([r["heap_bytes"] / 2**20 for r in rs]),
                "wal_per_heap": stat([r["wal_per_heap"] for r in rs]),
                "wal_per_row": stat([r["wal_bytes"] / r["rows"] for r in rs]),
                "replay_s": stat([r["replay_s"] for r in rs]),
                "replay_vs_insert": stat([r["replay_s"] / base[r["run"]]["replay_s"]
                                          for r in rs]),
            })
        out[phase] = rows
    return out


def med(st):
    return st["med"] if st else None


def table_rows(rows):
    return [[r["label"], fmt_stat(r["load_s"]), fmt_stat(r["load_vs_insert"]),
             fmt_stat(r["load_vs_copy"]), fmt_stat(r["wal_mb"], 0, show_range=False),
             fmt_stat(r["heap_mb"], 0, show_range=False),
             fmt_stat(r["wal_per_heap"], 3, show_range=False),
             fmt_stat(r["wal_per_row"], 1, show_range=False), fmt_stat(r["replay_s"]),
             fmt_stat(r["replay_vs_insert"])] for r in rows]


HEADER = ["case", "load s", "load / INSERT", "load / COPY", "WAL MB", "heap MB",
          "WAL / heap", "WAL B/row", "replay s", "replay / INSERT"]


def verdict(summary):
    """The issue's goal: records' WAL per heap byte <= COPY's, its load time
    no worse than image's.  WAL per row is shown too: COPY's pages are
    less full than ours, which flatters its per-heap-byte ratio."""
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


def main():
    args = parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    host = socket.gethostname()
    out = Path(args.out).resolve() if args.out else \
        HERE / "results" / f"{started:%Y%m%dT%H%M%SZ}-wal-{host}"
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for k in ("PGOPTIONS", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"):
        os.environ.pop(k, None)
    command = "python bench/wal.py " + " ".join(sys.argv[1:])
    meta = {"command": command.strip(), "started_utc": started.isoformat(timespec="seconds"),
            "rows": args.rows, "runs": args.runs, "major": args.major, "git": git_facts()}
    log(f"WAL formats: {args.rows:,} rows, {args.runs} run(s), PostgreSQL {args.major} -> {out}")

    ensure_server_user()
    bindir = provision(args.major)
    meta["build"] = {"skipped": True} if args.no_build else build_and_install(bindir)
    workdir = make_workdir()
    records = []
    servers = []
    try:
        datafile = workdir / "seed.txt"
        for phase in PHASES:
            p, s = make_pair(bindir, workdir, phase)
            servers += [s, p]
            with p.connect() as c:
                if not datafile.exists():
                    c.execute(f"COPY ({seed_select(args.rows)}) TO '{datafile}'")
                meta.setdefault("server", c.execute("SELECT version()").fetchone()[0])
            warm_up(p, s, args.rows)
            cases = [c for c in CASES if not (phase == "logical" and c[3] == "image")]
            for run_no in range(1, args.runs + 1):
                for case in cases:
                    log(f"{phase} run {run_no}: {case[1]}")
                    r = run_case(p, s, case, args.rows, datafile, phase)
                    r["run"] = run_no
                    records.append(r)
                    log(f"  load {r['load_s']:.2f} s, WAL {r['wal_bytes'] / 2**20:.0f} MB "
                        f"({r['wal_per_heap']:.3f} x heap), replay {r['replay_s']:.2f} s")
            s.stop()
            p.stop()
    finally:
        for srv in servers:
            srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    summary = summarize(records)
    (out / "results.json").write_text(json.dumps(
        {"meta": meta, "records": records, "summary": summary}, indent=1, default=str))
    md = [f"# directpath WAL formats, {args.rows:,} rows, PostgreSQL {args.major}", "",
          f"Command: `{meta['command']}`, {args.runs} run(s) per case, medians; ratios "
          f"against the plain INSERT and COPY of the same run.  Server: {meta.get('server')}.",
          f"Commit {meta['git']['commit']}.", ""]
    text = []
    for phase, rows in summary.items():
        md += [f"## wal_level = {phase}", "", md_table(HEADER, table_rows(rows)), ""]
        text += [f"wal_level = {phase}", text_table(HEADER, table_rows(rows)), ""]
    v = verdict(summary)
    md += ["## Goal", ""] + [f"- {x}" for x in v] + [""]
    (out / "report.md").write_text("\n".join(md))
    print("\n".join(text + v))
    print(f"\nreport: {out / 'report.md'}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        log(f"FAILED: {e}")
        sys.exit(1)
