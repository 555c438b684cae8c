#!/usr/bin/env python3
"""Index maintenance on existing tables: plain INSERT against the direct
path with entries inserted row by row (directpath.index_sort = off) and
sorted per batch (on, the default).

    python bench/indexes.py [--rows N] [--runs R] [--major M] [--quick]
                            [--out DIR] [--no-build]

One cluster with the settings of shared/design/baseline.md.  The seed rows
of seed 000 (2M by default) go into a table created and indexed in an
earlier transaction, for each index set below; every case runs --runs
times, round-robin.  Time is the load plus the CHECKPOINT after it, on the
client.  Prints medians with min-max and ratios against the plain INSERT of
the same run, and writes results.json and report.md to
bench/results/<UTC time>-indexes-<host>/ (or --out).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    from dpbench import venv
    venv.ensure(__file__)

import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

from dpbench.measure import check_direct  # noqa: E402
from dpbench.server import (BASELINE_SETTINGS, Server, build_and_install,  # noqa: E402
                            ensure_server_user, git_facts, make_workdir, provision)
from dpbench.util import (fmt_stat, log, md_table, standalone_args, stat,  # noqa: E402
                          text_table)

COLUMNS = "(timeid int, insid int, indid int, value int)"
INDEX_SETS = {
    "3 btrees (1 on a random key)": ["CREATE UNIQUE INDEX ON t (timeid, indid, insid)",
                                     "CREATE INDEX ON t (insid)",
                                     "CREATE INDEX ON t (hashint4(value))"],
    "1 btree on a random key": ["CREATE INDEX ON t (hashint4(value))"],
    "1 unique btree, keys in 50 streams": ["CREATE UNIQUE INDEX ON t (timeid, indid, insid)"],
    "primary key, sequential": ["ALTER TABLE t ADD PRIMARY KEY (indid)"],
}
MODES = (("plain", None), ("direct, row by row", "off"), ("direct, sorted", "on"))


def parse_args():
    return standalone_args(__doc__, 2_000_000)


def run_case(server, indexes, sort, rows):
    with server.connect() as c:
        c.execute("DROP TABLE IF EXISTS t")
        c.execute(f"CREATE TABLE t {COLUMNS}")
        for ddl in indexes:
            c.execute(ddl)
        c.execute("CHECKPOINT")
        time.sleep(0.5)
        hint = ""
        if sort is not None:
            c.execute(f"SET directpath.index_sort = {sort}")
            hint = "/*+ APPEND */ "
        t0 = time.perf_counter()
        c.execute(f"{hint}INSERT INTO t SELECT a % 50, a % 10000, a, a "
                  f"FROM generate_series(1, {rows}) a")
        if sort is not None:
            check_direct(c, f"index_sort={sort}", rows)
        c.execute("CHECKPOINT")
        elapsed = time.perf_counter() - t0
        c.execute("DROP TABLE t")
    return elapsed


def main():
    args = parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    out = Path(args.out).resolve() if args.out else \
        HERE / "results" / f"{started:%Y%m%dT%H%M%SZ}-indexes-{socket.gethostname()}"
    out.mkdir(parents=True, exist_ok=True)
    for k in ("PGOPTIONS", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"):
        os.environ.pop(k, None)
    command = ("python bench/indexes.py " + " ".join(sys.argv[1:])).strip()
    ensure_server_user()
    bindir = provision(args.major)
    build = {"skipped": True} if args.no_build else build_and_install(bindir)
    workdir = make_workdir()
    server = Server(bindir, workdir, "primary")
    records = []
    try:
        server.initdb()
        settings = dict(BASELINE_SETTINGS, shared_preload_libraries="directpath")
        server.configure(settings)
        server.start()
        with server.connect() as c:
            c.execute("CREATE EXTENSION directpath")
            version = c.execute("SELECT version()").fetchone()[0]
        for run_no in range(1, args.runs + 1):
            for label, indexes in INDEX_SETS.items():
                for mode, sort in MODES:
                    s = run_case(server, indexes, sort, args.rows)
                    log(f"run {run_no}: {label}, {mode}: {s:.2f} s")
                    records.append({"run": run_no, "indexes": label, "mode": mode, "s": s})
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    rows = []
    for label in INDEX_SETS:
        base = {r["run"]: r["s"] for r in records
                if r["indexes"] == label and r["mode"] == "plain"}
        for mode, _ in MODES:
            rs = [r for r in records if r["indexes"] == label and r["mode"] == mode]
            rows.append([label, mode, fmt_stat(stat([r["s"] for r in rs])),
                         fmt_stat(stat([r["s"] / base[r["run"]] for r in rs]))])
    header = ["indexes", "path", "load + CHECKPOINT s", "/ plain"]
    meta = {"command": command, "rows": args.rows, "runs": args.runs, "server": version,
            "git": git_facts(), "build": build, "started_utc": started.isoformat()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1))
    (out / "report.md").write_text("\n".join([
        f"# directpath index maintenance, {args.rows:,} rows, PostgreSQL {args.major}", "",
        f"Command: `{command}`, {args.runs} run(s), medians [min-max]; ratios against the "
        f"plain INSERT of the same run. Server: {version}. Commit {meta['git']['commit']}.", "",
        md_table(header, rows), ""]))
    print(text_table(header, rows))
    print(f"\nreport: {out / 'report.md'}")


if __name__ == "__main__":
    main()
