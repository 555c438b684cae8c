#!/usr/bin/env python3
"""directpath benchmark suite: the five seed experiments, plain against direct.

    python bench/run.py [--rows N] [--runs R] [--major 18|15] [--quick]
                        [--only SCENARIO[,...]] [--out DIR]

Scenarios (--only takes the name or the number):
  1 insert   seed 000: INSERT ... SELECT vs /*+ APPEND */ (existing / created /
             truncated table, 0, 1 unique, 3 btrees, BRIN; UNLOGGED, CTAS,
             producing the rows only), wal_level replica and minimal
  2 copy     seed 002: COPY, COPY FREEZE, direct COPY; pgbench -i plain vs
             directpath.mode=always
  3 fdw      seed 004: postgres_fdw batch_size 1/10/100/1000, partitioned over
             foreign partitions, vs local
  4 update   seed 001: insert-only data model vs UPDATE (pgbench)
  5 hot      seed 003: HOT updates with and without an expression index,
             autovacuum on and off

It provisions the embedded PostgreSQL (scripts/provision.sh), builds and
installs directpath, runs a throwaway cluster with the settings of
shared/design/baseline.md (as user dptest when run as root), repeats every
case --runs times round-robin and writes bench/results/<UTC time>-<host>/:
raw JSON per run, results.json, report.md, summary.md and PNG plots.  It
fails (exit 1) when a case errors or a direct-path statement fell back.

Runs from anywhere with any python3: it re-executes itself with the
repository's .venv and installs bench/requirements.txt there if needed.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    from dpbench import venv
    venv.ensure(__file__, modules=("matplotlib", "psycopg"),
                requirements=HERE / "requirements.txt")

import argparse  # noqa: E402
import os  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

from dpbench import report  # noqa: E402
from dpbench.s1_insert import InsertScenario  # noqa: E402
from dpbench.s2_copy import CopyScenario  # noqa: E402
from dpbench.s3_fdw import FdwScenario  # noqa: E402
from dpbench.s4_insert_only import InsertOnlyScenario  # noqa: E402
from dpbench.s5_hot import HotScenario  # noqa: E402
from dpbench.scenario import Context  # noqa: E402
from dpbench.server import (BASELINE_SETTINGS, PHASE_SETTINGS, Server, build_and_install,  # noqa: E402
                            ensure_server_user, git_facts, make_workdir, provision)
from dpbench.util import BenchError, log, parse_count  # noqa: E402

SCENARIOS = [InsertScenario, CopyScenario, FdwScenario, InsertOnlyScenario, HotScenario]
PHASES = ("replica", "minimal")


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[4:17]))
    p.add_argument("--rows", type=parse_count, default=None,
                   help="rows of the seed table (default 10M; --quick: 200k); accepts 2M, 200k")
    p.add_argument("--runs", type=int, default=None, help="runs per case (default 3; --quick: 1)")
    p.add_argument("--major", type=int, choices=(18, 15), default=18,
                   help="PostgreSQL major (default 18)")
    p.add_argument("--quick", action="store_true",
                   help="smoke mode: 200k rows, 1 run, 5 s pgbench runs (whole suite < 5 min)")
    p.add_argument("--only", default=None,
                   help="comma-separated scenarios: insert, copy, fdw, update, hot (or 1-5)")
    p.add_argument("--out", default=None,
                   help="output directory (default bench/results/<UTC time>-<hostname>)")
    p.add_argument("--duration", type=int, default=None,
                   help="seconds per pgbench run in scenarios 4 and 5 (default 30; --quick: 5)")
    p.add_argument("--no-build", action="store_true",
                   help="use the directpath already installed in the PostgreSQL tree")
    p.add_argument("--keep-workdir", action="store_true",
                   help="keep the temporary cluster directory (for debugging)")
    p.add_argument("--report-only", metavar="DIR", default=None,
                   help="rewrite report.md, summary.md and the plots from DIR/results.json")
    a = p.parse_args(argv)
    if a.rows is None:
        a.rows = 200_000 if a.quick else 10_000_000
    if a.runs is None:
        a.runs = 1 if a.quick else 3
    if a.runs < 1:
        p.error("--runs must be at least 1")
    if a.rows < 1000:
        p.error("--rows must be at least 1000")
    a.scenarios = select_scenarios(p, a.only)
    return a


def select_scenarios(p, only):
    if not only:
        return [S() for S in SCENARIOS]
    chosen = []
    for word in only.split(","):
        w = word.strip().lower()
        if not w:
            continue
        for S in SCENARIOS:
            if w in (S.key, str(S.number), S.seed, f"s{S.number}"):
                if S not in chosen:
                    chosen.append(S)
                break
        else:
            p.error(f"unknown scenario {word!r}: choose from "
                    + ", ".join(f"{S.number}/{S.key}" for S in SCENARIOS))
    return [S() for S in SCENARIOS if S in chosen]


def command_line():
    return "python bench/run.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])


def server_settings(phase):
    s = dict(BASELINE_SETTINGS)
    s.update(PHASE_SETTINGS[phase])
    s["shared_preload_libraries"] = "directpath"
    return s


def warm_up(ctx):
    """baseline.md: fault in shared memory with an unlogged insert and have
    later runs recycle WAL segments rather than create them."""
    rows = min(45_000_000, int(ctx.rows * 4.5))
    wal_mb = min(3072, max(256, ctx.rows * 300 // (1024 * 1024)))
    log(f"warm-up: {rows:,} unlogged rows, {wal_mb} MB of WAL")
    with ctx.server.connect() as c:
        c.execute("DROP TABLE IF EXISTS dp_warm")
        c.execute("CREATE UNLOGGED TABLE dp_warm (timeid int, insid int, indid int, value int)")
        c.execute(f"INSERT INTO dp_warm SELECT a % 50, a % 10000, a, a "
                  f"FROM generate_series(1, {rows}) a")
        c.execute("DROP TABLE dp_warm")
        c.execute("SELECT count(pg_logical_emit_message(false, 'dpbench-warm-up', "
                  "repeat('x', 1048576))) FROM generate_series(1, %s)", (wal_mb,))
        c.execute("CHECKPOINT")
        c.execute("CHECKPOINT")


def server_facts(server):
    with server.connect() as c:
        names = sorted(set(BASELINE_SETTINGS) | {
            "wal_level", "max_wal_senders", "data_checksums", "wal_buffers", "wal_compression",
            "wal_skip_threshold", "wal_sync_method", "io_method", "max_parallel_maintenance_workers",
            "shared_preload_libraries", "autovacuum_naptime", "huge_pages",
            "directpath.mode", "directpath.batch_pages", "directpath.min_bytes",
            "directpath.index_rebuild"})
        rows = c.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s) "
                         "ORDER BY name", (names,)).fetchall()
        settings = {n: (f"{s} ({u})" if u else s) for n, s, u in rows}
        for n in ("shared_buffers", "max_wal_size", "maintenance_work_mem", "wal_buffers",
                  "checkpoint_timeout", "wal_skip_threshold"):
            if n in settings:
                settings[n] = c.execute(f"SHOW {n}").fetchone()[0]
        return {"version": c.execute("SELECT version()").fetchone()[0],
                "server_version": c.execute("SHOW server_version").fetchone()[0],
                "settings": settings}


def machine_facts():
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "cpu": cpu, "cpus": os.cpu_count(),
            "memory": mem, "kernel": platform.release(), "python": platform.python_version(),
            "loadavg_start": os.getloadavg()}


def report_only(d):
    d = Path(d).resolve()
    data = json.loads((d / "results.json").read_text())
    print(report.write_all(d, data["meta"], data["records"]))
    print(f"\nrewrote {d / 'report.md'}")
    return 0


def main():
    args = parse_args()
    if args.report_only:
        return report_only(args.report_only)
    # libpq reads these: a stray PGOPTIONS would change every measured session
    for k in ("PGOPTIONS", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE",
              "PGSERVICEFILE", "PGCONNECT_TIMEOUT"):
        if os.environ.pop(k, None) is not None:
            log(f"ignoring {k} from the environment")
    started = datetime.datetime.now(datetime.timezone.utc)
    host = socket.gethostname()
    out = Path(args.out).resolve() if args.out else \
        HERE / "results" / f"{started:%Y%m%dT%H%M%SZ}-{host}"
    (out / "raw").mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    meta = {"command": command_line(), "started_utc": started.isoformat(timespec="seconds"),
            "rows": args.rows, "runs": args.runs, "major": args.major, "quick": args.quick,
            "duration_s": None, "scenarios": [s.key for s in args.scenarios],
            "machine": machine_facts(), "git": git_facts(), "output": str(out)}
    log(f"directpath bench: {args.rows:,} rows, {args.runs} run(s), PostgreSQL {args.major}, "
        f"scenarios {', '.join(meta['scenarios'])} -> {out}")

    records = []
    failure = None
    server = None
    workdir = None
    ctx = None
    t_start = time.monotonic()
    try:
        ensure_server_user()
        bindir = provision(args.major)
        meta["build"] = {"skipped": True} if args.no_build else build_and_install(bindir)
        workdir = make_workdir()
        server = Server(bindir, workdir, "primary")
        ctx = Context(args, server, workdir, bindir)
        ctx.remote = None
        meta["duration_s"] = ctx.duration
        meta["pgbench_scale"] = ctx.pgbench_scale
        server.initdb()
        meta["phases"] = {}
        for phase in PHASES:
            active = [s for s in args.scenarios if phase in s.phases]
            if not active:
                continue
            ctx.phase = phase
            server.configure(server_settings(phase))
            log(f"phase wal_level={phase}: starting the server (port {server.port})")
            server.start()
            prepared = []
            try:
                with server.connect() as c:
                    for e in ("directpath", "pg_visibility", "pg_buffercache"):
                        c.execute(f"CREATE EXTENSION IF NOT EXISTS {e}")
                meta["phases"][phase] = server_facts(server)
                warm_up(ctx)
                for s in active:
                    s.prepare(ctx, phase)
                    prepared.append(s)
                plan = [(s, s.cases(ctx, phase)) for s in active]
                total = sum(len(cs) for _, cs in plan) * args.runs
                done = 0
                for run_no in range(1, args.runs + 1):
                    for s, cases in plan:
                        for case in cases:
                            done += 1
                            log(f"[{done}/{total}] {phase} run {run_no}: scenario {s.number} "
                                f"{case.id}")
                            try:
                                rec = s.run(ctx, case, run_no)
                            except BenchError:
                                raise
                            except Exception as e:
                                raise BenchError(f"scenario {s.number} ({s.key}) case {case.id}, "
                                                 f"{phase}, run {run_no}: "
                                                 f"{type(e).__name__}: {e}") from e
                            full = {"scenario": s.key, "phase": phase, "case": case.id,
                                    "label": case.label, "path": case.path, "twin": case.twin,
                                    "group": case.group, "run": run_no, **rec}
                            records.append(full)
                            name = f"{s.number}-{s.key}--{phase}--{case.id}--run{run_no}.json"
                            (out / "raw" / name).write_text(json.dumps(full, indent=1,
                                                                       default=str))
                            summarize_line(full)
            finally:
                for s in reversed(prepared):
                    try:
                        s.finish(ctx, phase)
                    except Exception as e:
                        log(f"cleanup of scenario {s.key} failed: {e}")
                server.stop()
    except BenchError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure = "interrupted"
    finally:
        if ctx is not None and getattr(ctx, "remote", None) is not None:
            ctx.remote.stop()
        if server is not None:
            server.stop()
            if server.logfile.exists():
                shutil.copy(server.logfile, out / "server.log")
        if workdir is not None and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        elif workdir is not None:
            log(f"kept {workdir}")

    meta["elapsed_s"] = round(time.monotonic() - t_start, 1)
    meta["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds")
    meta["machine"]["loadavg_end"] = os.getloadavg()
    meta["failure"] = failure
    meta["notes"] = ctx.notes if ctx else []
    meta["facts"] = ctx.facts if ctx else {}
    (out / "results.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1,
                                                 default=str))
    try:
        summary = report.write_all(out, meta, records)
    except Exception as e:  # a broken report must not hide the measurements
        import traceback
        traceback.print_exc()
        summary = None
        failure = failure or f"writing the report failed: {e}"
    if summary:
        print(summary)
    print(f"\nresults: {out}  ({meta['elapsed_s']:.0f} s)")
    if failure:
        print(f"\nBENCH FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


def summarize_line(r):
    if r.get("status") == "not available":
        log(f"    not available: {r.get('why')}")
        return
    parts = []
    if "load_s" in r:
        parts.append(f"load {r['load_s']:.3f} s")
    if r.get("ckpt_s") is not None and r.get("ckpt_s"):
        parts.append(f"ckpt {r['ckpt_s']:.3f} s")
    if r.get("wal_bytes") is not None:
        parts.append(f"WAL {r['wal_bytes'] / 1048576:.1f} MB")
    if r.get("vac_s") is not None:
        parts.append(f"freeze {r['vac_s']:.2f} s/{r['vac_wal_bytes'] / 1048576:.1f} MB")
    if r.get("tps") is not None:
        parts.append(f"tps {r['tps']:.0f}")
    if r.get("hot_ratio") is not None:
        parts.append(f"HOT {r['hot_ratio']:.3f}")
    if r.get("directpath"):
        d = r["directpath"]
        parts.append(f"path={d['path']}" + (f" frozen={d['frozen']}" if d['path'] == 'direct'
                                              else f" ({d['reason']})"))
    log("    " + ", ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
