#!/usr/bin/env python3
"""directpath benchmark suite: the five seed experiments, plain against direct,
and the direct path's WAL formats and index maintenance.

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
  6 wal      WAL formats (records, image) vs INSERT and COPY, with a streaming
             standby's replay time, wal_level replica and logical
  7 indexes  index maintenance on existing tables, row by row vs sorted
             (default 2M rows)
  8 fallback small statements left on the normal path: plain vs hinted vs
             mode = always (1 and 100 rows, pgbench)
  9 etl      ETL append (N rows into N, bigserial key + 2 btrees) by COPY and
             INSERT ... SELECT; new storage + 3 btrees (shared buffers,
             index size against a fresh build) (default 2M rows)
 10 fkeys    a fact table with foreign keys to 100k-row, 1k-row and N-row
             tables, by INSERT ... SELECT and COPY (default 2M rows)
 11 parallel INSERT ... SELECT from a staging table: plain, serial direct,
             PARALLEL(1), (2), (4) (default 2M rows)
 12 parse    COPY's input parsing: seed (text), ETL (csv) and wide (csv) rows
             by plain, serial direct and PARALLEL(1) COPY, input MB/s
             (default 3M rows)
 13 restore  pg_restore of a pgbench database (scale = rows / 200,000), plain
             vs PGOPTIONS='-c directpath.mode=always', with and without
             --single-transaction (default 10M rows: scale 50)
 14 upsert   INSERT ... ON CONFLICT DO NOTHING / DO UPDATE and MERGE, half new
             keys (default 2M rows)
 15 born     CREATE TABLE AS and REFRESH MATERIALIZED VIEW (default 5M rows)
 16 shard    a table with postgres_fdw partitions on 2 other servers: plain,
             batched, COPY streams; 1, 2, 4 shards (default 2M rows)
 17 parpart  parallel loads into partitioned tables: 8 monthly partitions +
             btree by INSERT from a partitioned table and by COPY; 64 hash
             partitions; plain, serial direct, PARALLEL(1) (default 3M rows)
 18 tpch     TPC-H at --sf (default 1) from tpchgen-cli: keys first or the
             load-then-keys recipe, plain, direct and PARALLEL(1); a month
             of orders and lineitems appended with every key

It provisions the embedded PostgreSQL (scripts/provision.sh), builds and
installs directpath, runs a throwaway cluster with the settings of
docs/baseline.md (as user dptest when run as root), repeats every case
--runs times round-robin and writes bench/results/<UTC time>-<host>/: raw
JSON per run, results.json, report.md, summary.md and PNG plots.  Scenarios
1-5 share one cluster per wal_level; 6 and 7 get a fresh one of their own
(with a standby for 6).  It fails (exit 1) when a case errors or a
direct-path statement fell back.

Runs from anywhere with any python3: it re-executes itself with the
repository's .venv and installs bench/requirements.txt there if needed.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

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

from pgharness.build import build_and_install, provision  # noqa: E402
from pgharness.cluster import CLIENT_ENV  # noqa: E402
from pgharness.proc import HarnessError  # noqa: E402
from pgharness.sql import TABLE_COLUMNS, seed_select  # noqa: E402
from pgharness.user import ensure_server_user  # noqa: E402

from dpbench import report  # noqa: E402
from dpbench.s1_insert import InsertScenario  # noqa: E402
from dpbench.s2_copy import CopyScenario  # noqa: E402
from dpbench.s3_fdw import FdwScenario  # noqa: E402
from dpbench.s4_insert_only import InsertOnlyScenario  # noqa: E402
from dpbench.s5_hot import HotScenario  # noqa: E402
from dpbench.s6_wal import WalScenario  # noqa: E402
from dpbench.s7_indexes import IndexScenario  # noqa: E402
from dpbench.s8_fallback import FallbackScenario  # noqa: E402
from dpbench.s9_etl import EtlScenario  # noqa: E402
from dpbench.s10_fkeys import FkeyScenario  # noqa: E402
from dpbench.s11_parallel import ParallelScenario  # noqa: E402
from dpbench.s12_parse import ParseScenario  # noqa: E402
from dpbench.s13_restore import RestoreScenario  # noqa: E402
from dpbench.s14_upsert import UpsertScenario  # noqa: E402
from dpbench.s15_born import BornScenario  # noqa: E402
from dpbench.s16_shard import ShardScenario  # noqa: E402
from dpbench.s17_parpart import ParPartScenario  # noqa: E402
from dpbench.s18_tpch import TpchScenario  # noqa: E402
from dpbench.s19_bulkdml import BulkDmlScenario  # noqa: E402
from dpbench.s20_sessions import SessionsScenario  # noqa: E402
from dpbench.s21_keys import KeysScenario  # noqa: E402
from dpbench.scenario import Context  # noqa: E402
from dpbench.server import (BASELINE_SETTINGS, PHASE_SETTINGS, git_facts,  # noqa: E402
                            make_workdir, new_server, server_settings)
from dpbench.util import BenchError, log, parse_count  # noqa: E402

SCENARIOS = [InsertScenario, CopyScenario, FdwScenario, InsertOnlyScenario, HotScenario,
             WalScenario, IndexScenario, FallbackScenario, EtlScenario, FkeyScenario,
             ParallelScenario, ParseScenario, RestoreScenario, UpsertScenario,
             BornScenario, ShardScenario, ParPartScenario, TpchScenario, BulkDmlScenario,
             SessionsScenario, KeysScenario]


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n")[2])
    p.add_argument("--rows", type=parse_count, default=None,
                   help="rows of the seed table (default 10M; --quick: 200k); accepts 2M, 200k")
    p.add_argument("--runs", type=int, default=None, help="runs per case (default 3; --quick: 1)")
    p.add_argument("--major", type=int, choices=(18, 15), default=18,
                   help="PostgreSQL major (default 18)")
    p.add_argument("--quick", action="store_true",
                   help="smoke mode: 200k rows, 1 run, 5 s pgbench runs (whole suite < 5 min)")
    p.add_argument("--only", default=None,
                   help="comma-separated scenarios: insert, copy, fdw, update, hot, wal, "
                        "indexes (or 1-7)")
    p.add_argument("--cases", default=None,
                   help="comma-separated parts of case ids: run only the cases whose id "
                        "contains one (e.g. text_,uuid_ in scenario 14)")
    p.add_argument("--out", default=None,
                   help="output directory (default bench/results/<UTC time>-<hostname>)")
    p.add_argument("--sf", type=float, default=1.0,
                   help="TPC-H scale factor of scenario 18 (default 1)")
    p.add_argument("--duration", type=int, default=None,
                   help="seconds per pgbench run in scenarios 4 and 5 (default 30; --quick: 5)")
    p.add_argument("--no-build", action="store_true",
                   help="use the directpath already installed in the PostgreSQL tree")
    p.add_argument("--keep-workdir", action="store_true",
                   help="keep the temporary cluster directory (for debugging)")
    p.add_argument("--report-only", metavar="DIR", default=None,
                   help="rewrite report.md, summary.md and the plots from DIR/results.json")
    a = p.parse_args(argv)
    a.rows_given = a.rows is not None or a.quick
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


def warm_up(ctx):
    """baseline.md: fault in shared memory with an unlogged insert and have
    later runs recycle WAL segments rather than create them."""
    rows = min(45_000_000, int(ctx.rows * 4.5))
    wal_mb = min(3072, max(256, ctx.rows * 300 // (1024 * 1024)))
    log(f"warm-up: {rows:,} unlogged rows, {wal_mb} MB of WAL")
    with ctx.server.conn() as c:
        c.execute("DROP TABLE IF EXISTS dp_warm")
        c.execute(f"CREATE UNLOGGED TABLE dp_warm {TABLE_COLUMNS}")
        c.execute(f"INSERT INTO dp_warm {seed_select(rows)}")
        c.execute("DROP TABLE dp_warm")
        c.execute("SELECT count(pg_logical_emit_message(false, 'dpbench-warm-up', "
                  "repeat('x', 1048576))) FROM generate_series(1, %s)", (wal_mb,))
        c.execute("CHECKPOINT")
        c.execute("CHECKPOINT")


def server_facts(server):
    with server.conn() as c:
        names = sorted(set(BASELINE_SETTINGS) | {
            "wal_level", "max_wal_senders", "wal_keep_size", "hot_standby", "data_checksums", "wal_buffers", "wal_compression",
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


def sessions(scenarios):
    """[(phase, scenarios)] in the order they run: each phase's shared
    scenarios round-robin on the one cluster, then every `alone` scenario's
    phases, each on a fresh cluster."""
    out = []
    for phase in PHASE_SETTINGS:
        shared = [s for s in scenarios if phase in s.phases and not s.alone]
        if shared:
            out.append((phase, shared))
    for s in scenarios:
        if s.alone:
            out += [(phase, [s]) for phase in s.phases]
    return out


def session_rows(args, active):
    """--rows, or the one scenario's own default when --rows was not given."""
    own = active[0].default_rows if len(active) == 1 else None
    return own if own and not args.rows_given else args.rows


def run_case(ctx, s, case, phase, run_no, out):
    """Measure one case once; returns the full record (also in out/raw/)."""
    try:
        rec = s.run(ctx, case, run_no)
    except BenchError:
        raise
    except Exception as e:
        raise BenchError(f"scenario {s.number} ({s.key}) case {case.id}, "
                         f"{phase}, run {run_no}: {type(e).__name__}: {e}") from e
    full = {"scenario": s.key, "phase": phase, "case": case.id, "label": case.label,
            "path": case.path, "twin": case.twin, "group": case.group, "run": run_no, **rec}
    name = f"{s.number}-{s.key}--{phase}--{case.id}--run{run_no}.json"
    (out / "raw" / name).write_text(json.dumps(full, indent=1, default=str))
    summarize_line(full)
    return full


def run_session(ctx, phase, active, out, meta, records):
    """Start ctx.server, warm up, prepare, every case --runs times round-robin,
    finish, stop."""
    server = ctx.server
    alone = active[0].alone
    label = f"{phase} ({active[0].key})" if alone else phase
    log(f"phase wal_level={label}: starting the server (port {server.port})")
    server.start(timeout=300)
    prepared = []
    try:
        with server.conn() as c:
            for e in ("directpath", "pg_visibility", "pg_buffercache"):
                c.execute(f"CREATE EXTENSION IF NOT EXISTS {e}")
        meta["phases"][label] = server_facts(server)
        if not alone:
            warm_up(ctx)
        for s in active:
            s.prepare(ctx, phase)
            prepared.append(s)
        if alone:
            active[0].warm_up(ctx)
        wanted = ctx.args.cases.split(",") if ctx.args.cases else None
        plan = [(s, [c for c in s.cases(ctx, phase)
                     if wanted is None or any(w in c.id for w in wanted)])
                for s in active]
        total = sum(len(cs) for _, cs in plan) * ctx.args.runs
        done = 0
        for run_no in range(1, ctx.args.runs + 1):
            for s, cases in plan:
                for case in cases:
                    done += 1
                    log(f"[{done}/{total}] {label} run {run_no}: scenario {s.number} {case.id}")
                    records.append(run_case(ctx, s, case, phase, run_no, out))
    finally:
        for s in reversed(prepared):
            try:
                s.finish(ctx, phase)
            except Exception as e:
                log(f"cleanup of scenario {s.key} failed: {e}")
        server.stop(check=False, timeout=300)


def main():
    args = parse_args()
    if args.report_only:
        return report_only(args.report_only)
    # libpq reads these: a stray PGOPTIONS would change every measured session
    for k in CLIENT_ENV:
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
            "machine": machine_facts(), "git": git_facts(), "output": str(out), "phases": {}}
    log(f"directpath bench: {args.rows:,} rows, {args.runs} run(s), PostgreSQL {args.major}, "
        f"scenarios {', '.join(meta['scenarios'])} -> {out}")

    records = []
    failure = None
    servers = {}
    workdir = None
    ctx = None
    t_start = time.monotonic()
    try:
        ensure_server_user()
        bindir = provision(args.major, log=log)
        meta["build"] = {"skipped": True} if args.no_build else build_and_install(bindir, log=log)
        workdir = make_workdir()
        ctx = Context(args, None, workdir, bindir)
        ctx.remote = None
        meta["duration_s"] = ctx.duration
        meta["pgbench_scale"] = ctx.pgbench_scale
        for phase, active in sessions(args.scenarios):
            name = f"{active[0].key}_{phase}" if active[0].alone else "primary"
            settings = server_settings(phase, active[0].settings(phase) if active[0].alone else None)
            if name in servers:
                servers[name].configure(settings)
            else:
                servers[name] = new_server(bindir, workdir, name, settings)
            ctx.server = servers[name]
            ctx.phase = phase
            ctx.rows = session_rows(args, active)
            run_session(ctx, phase, active, out, meta, records)
    except HarnessError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure = "interrupted"
    finally:
        if ctx is not None and getattr(ctx, "remote", None) is not None:
            ctx.remote.stop(check=False)
            ctx.remote.cleanup()
        for name, server in servers.items():
            server.stop(check=False)
            if server.logfile.exists():
                shutil.copy(server.logfile, out / ("server.log" if name == "primary"
                                                   else f"server-{name}.log"))
            server.cleanup()
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
    elif r.get("load_ckpt_s") is not None:
        parts.append(f"load + ckpt {r['load_ckpt_s']:.3f} s")
    if r.get("ckpt_s") is not None and r.get("ckpt_s"):
        parts.append(f"ckpt {r['ckpt_s']:.3f} s")
    if r.get("wal_bytes") is not None:
        parts.append(f"WAL {r['wal_bytes'] / 1048576:.1f} MB")
    if r.get("vac_s") is not None:
        parts.append(f"freeze {r['vac_s']:.2f} s/{r['vac_wal_bytes'] / 1048576:.1f} MB")
    if r.get("replay_s") is not None:
        parts.append(f"replay {r['replay_s']:.2f} s")
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
