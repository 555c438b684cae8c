"""The per-run measurement procedure of docs/baseline.md, section 2:

 1. setup (drop/create, indexes) committed, CHECKPOINT, settle;
 2. insert LSN, client wall clock around the load statement(s) (COMMIT
    included), insert LSN again: time and WAL;
 3. directpath.last_statement() for direct-path cases (a fallback fails the
    suite), sizes, shared buffers holding the relations (pg_buffercache),
    visibility map (pg_visibility_map_summary);
 4. a timed CHECKPOINT (writes what the load left dirty);
 5. the VACUUM (FREEZE) a user would eventually need, after that
    checkpoint: time and WAL, and the visibility map afterwards.
"""

import os
import re
import subprocess
import time

from pgharness import sql
from pgharness.sql import insert_lsn, last_statement, wal_diff

from .util import BenchError, FellBack, log

def handled(conn):
    """directpath.last_statement(), or None when it handled no statement."""
    ls = last_statement(conn)
    return ls if ls is not None and ls["path"] is not None else None


def check_direct(conn, what, expect_rows=None):
    """Fail loudly unless the last statement took the direct path."""
    ls = handled(conn)
    if ls is None:
        raise FellBack(f"{what}: directpath.last_statement() is empty: the statement was not "
                       f"handled by directpath at all (library not loaded, or directpath.mode = off?)")
    if ls["path"] != "direct":
        raise FellBack(f"{what}: expected the direct path, but it fell back to the normal "
                       f"path: {ls['reason']}")
    if expect_rows is not None and ls["rows_inserted"] != expect_rows:
        log(f"WARNING {what}: last_statement().rows_inserted = {ls['rows_inserted']}, "
            f"expected {expect_rows}")
    return ls


def leaf_tables(conn, names):
    """Regular tables behind the given names (partitioned tables expand to leaves)."""
    return [leaf for n in names for leaf in sql.leaf_tables(conn, n, local_only=True)]


def rel_facts(conn, tables):
    """Heap and index sizes, shared buffers and VM state of the tables."""
    f = {"heap_bytes": 0, "heap_pages": 0, "index_bytes": 0, "toast_bytes": 0,
         "buffers_heap": 0, "buffers_heap_dirty": 0, "buffers_index": 0,
         "buffers_index_dirty": 0, "vm_all_visible": 0, "vm_all_frozen": 0}
    if not tables:
        return f
    for t in tables:
        heap, idx, toast = conn.execute(
            "SELECT pg_relation_size(c.oid), pg_indexes_size(c.oid), "
            "coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) "
            "FROM pg_class c WHERE c.oid = %s::regclass", (t,)).fetchone()
        f["heap_bytes"] += heap
        f["index_bytes"] += idx
        f["toast_bytes"] += toast
        v = sql.vm_summary(conn, t)
        f["vm_all_visible"] += v[0]
        f["vm_all_frozen"] += v[1]
    f["heap_pages"] = f["heap_bytes"] // 8192
    row = conn.execute(
        """
        WITH rels AS (
            SELECT pg_relation_filenode(c.oid) AS fn, false AS is_index
              FROM pg_class c WHERE c.oid = ANY(%(t)s::regclass[])
            UNION ALL
            SELECT pg_relation_filenode(i.indexrelid), true
              FROM pg_index i WHERE i.indrelid = ANY(%(t)s::regclass[]))
        SELECT count(*) FILTER (WHERE NOT r.is_index),
               count(*) FILTER (WHERE NOT r.is_index AND b.isdirty),
               count(*) FILTER (WHERE r.is_index),
               count(*) FILTER (WHERE r.is_index AND b.isdirty)
          FROM pg_buffercache b JOIN rels r ON b.relfilenode = r.fn
         WHERE b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
        """, {"t": list(tables)}).fetchone()
    (f["buffers_heap"], f["buffers_heap_dirty"], f["buffers_index"],
     f["buffers_index_dirty"]) = row
    return f


def vm_summary(conn, tables):
    """(all_visible, all_frozen) pages summed over the tables."""
    vms = [sql.vm_summary(conn, t) for t in tables]
    return sum(v[0] for v in vms), sum(v[1] for v in vms)


def timed(conn, statement):
    t0 = time.perf_counter()
    conn.execute(statement)
    return time.perf_counter() - t0


def checkpoint_settle(ctx, conn):
    conn.execute("CHECKPOINT")
    time.sleep(ctx.settle_s)


def measure_load(ctx, *, setup, load, tables, rows, expect=None, freeze_vacuum=True,
                 cleanup=(), conn_options=(), what="load", remote=None):
    """Run one load the baseline way; returns the run's record.

    setup, load: lists of SQL statements (load may hold BEGIN ... COMMIT);
    tables: the loaded tables (partitioned tables are expanded to leaves);
    expect: 'direct' to require directpath's direct path, or None;
    conn_options: statements run first on the load's fresh connection (SET ...);
    remote: a Cluster whose WAL is measured as well (postgres_fdw)."""
    notices = []
    rec = {"rows": rows, "loadavg_before": os.getloadavg()[0]}
    with ctx.server.conn(notices=notices) as conn:
        for s in conn_options:
            conn.execute(s)
        for s in setup:
            conn.execute(s)
        rconn = remote.conn() if remote else None
        try:
            if rconn:
                rconn.execute("CHECKPOINT")
            checkpoint_settle(ctx, conn)
            l0 = insert_lsn(conn)
            r0 = insert_lsn(rconn) if rconn else None
            t0 = time.perf_counter()
            try:
                for s in load:
                    conn.execute(s)
            except Exception:
                if not conn.closed:
                    try:
                        conn.execute("ROLLBACK")
                    except Exception:
                        pass
                raise
            rec["load_s"] = time.perf_counter() - t0
            l1 = insert_lsn(conn)
            rec["wal_bytes"] = wal_diff(conn, l0, l1)
            if rconn:
                rec["remote_wal_bytes"] = wal_diff(rconn, r0, insert_lsn(rconn))
        finally:
            if rconn:
                rconn.close()
        rec["rows_per_s"] = rows / rec["load_s"] if rec["load_s"] > 0 else None
        if expect == "direct":
            rec["directpath"] = check_direct(conn, what, expect_rows=rows)
        else:
            ls = handled(conn)
            if ls is not None:
                rec["directpath"] = ls
        rec["notices"] = notices[:20]
        leaves = leaf_tables(conn, tables) if tables else []
        rec.update(rel_facts(conn, leaves))
        rec["vm_pages"] = rec["heap_pages"]
        # 4. the checkpoint that writes what the load left dirty
        t1 = time.perf_counter()
        conn.execute("CHECKPOINT")
        rec["ckpt_s"] = time.perf_counter() - t1
        rec["load_ckpt_s"] = rec["load_s"] + rec["ckpt_s"]
        # 5. the VACUUM (FREEZE) a user would eventually need
        if freeze_vacuum and leaves:
            l2 = insert_lsn(conn)
            t2 = time.perf_counter()
            for t in leaves:
                conn.execute(f"VACUUM (FREEZE) {t}")
            rec["vac_s"] = time.perf_counter() - t2
            rec["vac_wal_bytes"] = wal_diff(conn, l2, insert_lsn(conn))
            rec["vm_after_vac_all_visible"], rec["vm_after_vac_all_frozen"] = vm_summary(conn, leaves)
            rec["to_frozen_s"] = rec["load_ckpt_s"] + rec["vac_s"]
            rec["wal_to_frozen_bytes"] = rec["wal_bytes"] + rec["vac_wal_bytes"]
        for s in cleanup:
            conn.execute(s)
    return rec


def measure_query(ctx, query, rows):
    """Time a statement that writes nothing (e.g. producing the rows only)."""
    with ctx.server.conn() as conn:
        checkpoint_settle(ctx, conn)
        l0 = insert_lsn(conn)
        t0 = time.perf_counter()
        conn.execute(query).fetchall()
        el = time.perf_counter() - t0
        wal = wal_diff(conn, l0, insert_lsn(conn))
    return {"rows": rows, "load_s": el, "load_ckpt_s": el, "ckpt_s": 0.0, "wal_bytes": wal,
            "rows_per_s": rows / el if el > 0 else None, "loadavg_before": os.getloadavg()[0]}


# pgbench ------------------------------------------------------------------

DONE_RE = re.compile(r"done in ([\d.]+) s \(([^)]*)\)")
STEP_RE = re.compile(r"([a-z][a-z -]*?) ([\d.]+) s")


def parse_pgbench_init(output):
    """'done in 3.42 s (drop tables 0.00 s, ..., primary keys 0.97 s).' -> dict."""
    m = DONE_RE.search(output)
    if not m:
        raise BenchError(f"pgbench -i printed no 'done in' line:\n{output[-2000:]}")
    steps = {}
    for part in m.group(2).split(","):
        sm = STEP_RE.search(part.strip())
        if sm:
            steps[sm.group(1).strip()] = float(sm.group(2))
    return {"total_s": float(m.group(1)), "steps": steps, "done_line": m.group(0)}


def parse_pgbench_run(output):
    def grab(pat, conv=float):
        m = re.search(pat, output, re.M)
        return conv(m.group(1)) if m else None
    r = {"transactions": grab(r"number of transactions actually processed: (\d+)", int),
         "failed": grab(r"number of failed transactions: (\d+)", int),
         "latency_ms": grab(r"latency average = ([\d.]+) ms"),
         "latency_stddev_ms": grab(r"latency stddev = ([\d.]+) ms"),
         "tps": grab(r"tps = ([\d.]+) \((?:without|excluding)")}
    if r["tps"] is None:
        r["tps"] = grab(r"tps = ([\d.]+)")
    if r["tps"] is None or r["transactions"] is None:
        raise BenchError(f"could not parse pgbench output:\n{output[-2000:]}")
    return r


def pgbench(ctx, args, *, pgoptions=None, timeout=3600):
    cmd = [ctx.server.bin("pgbench"), *args]
    r = subprocess.run([str(c) for c in cmd], env=ctx.server.client_env(pgoptions),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, cwd=str(ctx.workdir))
    if r.returncode != 0:
        raise BenchError(f"pgbench {' '.join(map(str, args))} exited {r.returncode}:\n"
                         f"{r.stdout[-3000:]}")
    return r.stdout
