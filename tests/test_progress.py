"""directpath.progress (src/common/progress.c): a row per process for every
running direct statement, polled from another session while the load runs.

A hinted INSERT ... SELECT of 3M rows (slowed by a few pg_sleep calls in its
select list) shows increasing rows, pages and index entries, its phases,
the planner's estimate as its total and an ETA; a COPY from a file shows its
bytes against the file's size while pg_stat_progress_copy still advances; a
role without pg_read_all_stats sees only the pid of another role's load;
with directpath.progress off, or without shared_preload_libraries, there is
no row; a parallel load's workers have rows of their own with their leader's
pid; each statement kind is named, and the phases at the end; no row is left
after the statement, after an error, or after a savepoint's rollback.
"""

import os
import re

import psycopg
import pytest

from conftest import (SMALL_BATCHES, Background, connect_as, fault_gucs,
                      last_statement, wait_fault_sleep)

pytestmark = pytest.mark.directpath

N = 3_000_000
# every 500,000th row sleeps: the load takes a few seconds whatever the machine
SLOW = "CASE WHEN g % 500000 = 0 THEN (pg_sleep(0.4) IS NULL)::int ELSE g END"
INSERT = "/*+ APPEND */ INSERT INTO {t} SELECT g, " + SLOW + " FROM generate_series(1, %d) g" % N

PHASES = {"reading input", "writing pages", "index entries", "building indexes",
          "merging indexes", "checking foreign keys", "statistics", "updating rows",
          "finishing"}
COLUMNS = ("pid, leader_pid, datname, relid, relation::text AS relation, kind, phase, rows_done, "
           "bytes_done, pages_written, index_entries, total, total_unit, total_is_estimate, "
           "extract(epoch FROM elapsed) AS elapsed, extract(epoch FROM eta) AS eta, process")


def progress(conn, where="pid = %s", params=()):
    cur = conn.execute(f"SELECT {COLUMNS} FROM directpath.progress WHERE {where} ORDER BY pid",
                       params)
    names = [d.name for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def poll(conn, bg, every=0.1, query=None):
    """The rows of bg's pid in directpath.progress (with `query`, its row
    instead), every `every` seconds until bg is done."""
    seen = []
    while not bg.done.wait(every):
        if query:
            cur = conn.execute(query, (bg.pid,))
            names = [d.name for d in cur.description]
            seen += [dict(zip(names, r)) for r in cur.fetchall()]
        else:
            seen += progress(conn, params=(bg.pid,))
    return seen


def new_table(conn, t, index=True):
    conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
    conn.execute(f"CREATE TABLE {t} (a int, b int)")
    if index:
        conn.execute(f"CREATE INDEX ON {t} (a)")


def no_row_left(conn, pid):
    return progress(conn, "pid = %s OR leader_pid = %s", (pid, pid)) == []


def watch(cluster, statement, query=None):
    """Run `statement` in another session, polling directpath.progress
    (or `query`) until it ends: what was seen, and its last_statement().
    No row is left."""
    with Background(cluster, statement, name="loader") as bg, cluster.conn() as mon:
        bg.start()
        seen = poll(mon, bg, query=query)
        bg.join()
        assert bg.error is None, bg.error
        assert no_row_left(mon, bg.pid)
        return seen, last_statement(bg.conn)


def increasing(values):
    """At least three distinct values, never decreasing."""
    return len(set(values)) >= 3 and values == sorted(values)


def test_insert_select(cluster):
    t = "pr_insert"
    with cluster.conn() as conn:
        new_table(conn, t)
    seen, st = watch(cluster, INSERT.format(t=t))
    assert st["path"] == "direct" and st["rows_inserted"] == N, st
    assert len(seen) >= 5, seen
    rows = [s["rows_done"] for s in seen]
    assert increasing(rows) and 0 < rows[-1] <= N, rows
    assert increasing([s["pages_written"] for s in seen]), seen
    assert max(s["pages_written"] for s in seen) <= st["pages_written"]
    # one btree on existing storage: an entry per row whose batch is written
    assert increasing([s["index_entries"] for s in seen]), seen
    assert all(s["index_entries"] <= s["rows_done"] for s in seen), seen
    for s in seen:
        assert (s["kind"], s["relation"], s["datname"], s["leader_pid"], s["process"]) == \
            ("INSERT", t, "postgres", None, "statement"), s
        assert (s["total"], s["total_unit"], s["total_is_estimate"]) == (N, "rows", True), s
        assert s["phase"] in PHASES and s["bytes_done"] is None, s
    assert "reading input" in {s["phase"] for s in seen}
    # the ETA: the time left at the rate so far, while rows are read
    etas = [s for s in seen if s["eta"] is not None]
    assert len(etas) >= 2, seen
    for s in etas:
        left = float(s["elapsed"]) * (N - s["rows_done"]) / s["rows_done"]
        assert abs(float(s["eta"]) - left) <= 0.25 * left + 0.5, s
    elapsed = [float(s["elapsed"]) for s in seen]
    assert elapsed == sorted(elapsed) and elapsed[-1] > 1.0, elapsed


def test_copy_from_file(cluster, tmp_path):
    t = "pr_copy"
    path = str(tmp_path / "pr_copy.csv")
    with cluster.conn() as conn:
        new_table(conn, t, index=False)
        conn.execute(f"COPY (SELECT g, g FROM generate_series(1, {N}) g) TO '{path}' "
                     "WITH (FORMAT csv)")
    size = os.path.getsize(path)
    copy = (f"/*+ APPEND */ COPY {t} FROM '{path}' WITH (FORMAT csv) "
            "WHERE a % 500000 <> 0 OR pg_sleep(0.4) IS NOT NULL")
    query = ("SELECT p.kind, p.rows_done, p.bytes_done, p.total, p.total_unit, "
             "p.total_is_estimate, p.eta, c.bytes_processed, c.bytes_total, "
             "c.tuples_processed FROM directpath.progress p "
             "JOIN pg_stat_progress_copy c USING (pid) WHERE pid = %s")
    seen, st = watch(cluster, copy, query)
    assert st["path"] == "direct" and st["rows_inserted"] == N, st
    assert len(seen) >= 5, seen
    for s in seen:
        assert (s["kind"], s["total"], s["total_unit"], s["total_is_estimate"]) == \
            ("COPY", size, "bytes", False), s
        assert s["bytes_total"] == size and 0 <= s["bytes_done"] <= size, s
    assert increasing([s["bytes_done"] for s in seen]), seen
    assert increasing([s["rows_done"] for s in seen]), seen
    # core's view goes on as for a plain COPY
    assert increasing([s["bytes_processed"] for s in seen]), seen
    assert increasing([s["tuples_processed"] for s in seen]), seen
    assert any(s["eta"] is not None for s in seen), seen


def test_other_roles(cluster):
    """A role sees its own load; pg_read_all_stats sees every load; any
    other role sees the pid and NULLs."""
    t = "pr_roles"
    with cluster.conn() as conn:
        for r in ("pr_loader", "pr_peer", "pr_stats"):
            conn.execute(f"DROP ROLE IF EXISTS {r}")
        conn.execute("CREATE ROLE pr_loader LOGIN")
        conn.execute("CREATE ROLE pr_peer LOGIN")
        conn.execute("CREATE ROLE pr_stats LOGIN IN ROLE pg_read_all_stats")
        new_table(conn, t)
        conn.execute(f"ALTER TABLE {t} OWNER TO pr_loader")
    with Background(cluster, INSERT.format(t=t), user="pr_loader", name="loader") as bg, \
            connect_as(cluster, "pr_loader") as own, connect_as(cluster, "pr_peer") as peer, \
            connect_as(cluster, "pr_stats") as stats:
        bg.start()
        views = {"own": [], "peer": [], "stats": []}
        while not bg.done.wait(0.2):
            for who, conn in (("own", own), ("peer", peer), ("stats", stats)):
                views[who] += progress(conn, params=(bg.pid,))
        bg.join()
        assert bg.error is None, bg.error
        for conn in (own, peer, stats):
            assert no_row_left(conn, bg.pid)
    for who in ("own", "stats"):
        assert len(views[who]) >= 3, views
        assert all(s["kind"] == "INSERT" and s["relation"] == t and s["rows_done"] >= 0
                   for s in views[who]), views[who]
        assert increasing([s["rows_done"] for s in views[who]]), views[who]
    assert len(views["peer"]) >= 3, views
    for s in views["peer"]:
        assert s["pid"] == bg.pid and s["process"] == "statement", s
        assert all(v is None for k, v in s.items() if k not in ("pid", "process")), s


def test_progress_off(cluster):
    """directpath.progress = off: the load runs direct, with no row."""
    t = "pr_off"
    with cluster.conn() as conn:
        new_table(conn, t)
    with Background(cluster, INSERT.format(t=t), {"directpath.progress": "off"},
                    name="loader") as bg, cluster.conn() as mon:
        bg.start()
        active = 0
        while not bg.done.wait(0.2):
            state = mon.execute("SELECT state FROM pg_stat_activity WHERE pid = %s",
                                (bg.pid,)).fetchone()
            rows = progress(mon, params=(bg.pid,))
            assert rows == [], rows
            active += state == ("active",)
        bg.join()
        assert bg.error is None, bg.error
        assert last_statement(bg.conn)["path"] == "direct"
    assert active >= 5


def test_error_leaves_no_row(cluster):
    """A load that fails, alone or in a savepoint of an open transaction,
    leaves no row once the error is raised."""
    t = "pr_error"
    failing = INSERT.format(t=t).replace(SLOW, f"CASE WHEN g = {N - 500000} THEN g / 0 ELSE {SLOW} END")
    with cluster.conn() as conn:
        new_table(conn, t)
    for statements in ([failing], ["BEGIN", "SAVEPOINT s", failing]):
        with Background(cluster, statements, name="loader") as bg, cluster.conn() as mon:
            bg.start()
            seen = poll(mon, bg)
            bg.join()
            assert bg.sqlstate == "22012", bg.error
            assert len(seen) >= 3 and seen[-1]["rows_done"] > 0, seen
            state = mon.execute("SELECT state FROM pg_stat_activity WHERE pid = %s",
                                (bg.pid,)).fetchone()[0]
            if len(statements) > 1:
                # the subtransaction aborted; the transaction is still open
                assert state == "idle in transaction (aborted)", state
            assert no_row_left(mon, bg.pid)
            if len(statements) > 1:
                bg.execute("ROLLBACK TO SAVEPOINT s")
                bg.execute("ROLLBACK")
    with cluster.conn() as conn:
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0


def test_parallel_workers(cluster):
    """A PARALLEL(2) load: the leader's own row, a row per worker, with the
    leader's pid, its statement and relation, and the statement's total
    row: the leader's pid, the total and every process's rows (the leader's
    own and those of the workers' pages it has taken; a worker counts its
    pages when it sends them, so the workers' rows are at least those)."""
    t = "pr_par"
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS pr_src")
        conn.execute("CREATE TABLE pr_src AS SELECT g AS a, g AS b FROM generate_series(1, 2000000) g")
        conn.execute("ANALYZE pr_src")
        new_table(conn, t, index=False)
    off = cluster.log_size()
    stmt = f"/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT * FROM pr_src"
    with Background(cluster, stmt, fault_gucs("batch_done", 2, sleep_ms=4000),
                    name="leader") as bg, cluster.conn() as mon:
        bg.start()
        wait_fault_sleep(cluster, bg, "batch_done", off)
        where = "pid = %s OR leader_pid = %s"
        rows = progress(mon, where, (bg.pid, bg.pid))
        # the workers go on while the leader sleeps: wait for their pages
        for _ in range(20):
            if any(r["leader_pid"] == bg.pid and r["rows_done"] > 0 for r in rows):
                break
            bg.done.wait(0.1)
            rows = progress(mon, where, (bg.pid, bg.pid))
        bg.join()
        assert bg.error is None, bg.error
        assert no_row_left(mon, bg.pid)
        st = last_statement(bg.conn)
    assert st["parallel_workers"] >= 1, st
    leader = [r for r in rows if r["pid"] == bg.pid and r["process"] == "leader"]
    total = [r for r in rows if r["pid"] == bg.pid and r["process"] == "total"]
    workers = [r for r in rows if r["leader_pid"] == bg.pid]
    assert len(leader) == 1 and len(total) == 1 and len(rows) == 2 + len(workers), rows
    leader, total = leader[0], total[0]
    assert leader["leader_pid"] is None and total["leader_pid"] is None, rows
    assert leader["pages_written"] > 0 and leader["total"] is None and leader["eta"] is None, rows
    assert total["total_is_estimate"] is True and abs(total["total"] - 2000000) < 200000, rows
    assert (total["kind"], total["relation"], total["pages_written"], total["index_entries"]) == \
        ("INSERT", t, leader["pages_written"], leader["index_entries"]), rows
    assert 1 <= len(workers) <= st["parallel_workers"], rows
    for w in workers:
        assert (w["kind"], w["relation"], w["total"], w["process"]) == ("INSERT", t, None, "worker"), w
        assert w["pid"] != bg.pid
    assert any(w["rows_done"] > 0 and w["pages_written"] > 0 for w in workers), workers
    from_workers = total["rows_done"] - leader["rows_done"]
    assert 0 <= from_workers <= sum(w["rows_done"] for w in workers), rows
    assert total["rows_done"] > 0, rows


# statement kinds: setup, statement, fault point, kind, whether the table is
# new (other sessions see its OID only), phase; the planner's estimate of the
# input's rows, where it is exact
KINDS = {
    "on conflict": (
        ["CREATE TABLE pr_k (a int PRIMARY KEY, b int)"],
        "/*+ APPEND */ INSERT INTO pr_k SELECT g, g FROM generate_series(1, 200000) g "
        "ON CONFLICT DO NOTHING",
        "batch_done", "INSERT ON CONFLICT DO NOTHING", False, "reading input", 200000),
    "do update": (
        ["CREATE TABLE pr_k (a int PRIMARY KEY, b int)",
         "INSERT INTO pr_k SELECT g, 0 FROM generate_series(1, 200000, 2) g"],
        "/*+ APPEND */ INSERT INTO pr_k SELECT g, g FROM generate_series(1, 200000) g "
        "ON CONFLICT (a) DO UPDATE SET b = excluded.b",
        "versions_page", "INSERT ON CONFLICT DO UPDATE", False, "updating rows", 200000),
    "merge": (
        ["CREATE TABLE pr_k (a int, b int)"],
        "/*+ APPEND */ MERGE INTO pr_k t USING (SELECT g AS id FROM generate_series(1, 200000) g) s "
        "ON t.a = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.id)",
        "batch_done", "MERGE", False, "reading input", None),
    "create table as": (
        [],
        "/*+ APPEND */ CREATE TABLE pr_k AS SELECT g AS a, g AS b FROM generate_series(1, 200000) g",
        "batch_done", "CREATE TABLE AS", True, "reading input", 200000),
    "refresh": (
        ["CREATE MATERIALIZED VIEW pr_k AS SELECT g AS a, g AS b "
         "FROM generate_series(1, 200000) g WITH NO DATA"],
        "/*+ APPEND */ REFRESH MATERIALIZED VIEW pr_k",
        "batch_done", "REFRESH MATERIALIZED VIEW", False, "reading input", 200000),
    "update": (
        ["CREATE TABLE pr_k (a int PRIMARY KEY, b int)",
         "INSERT INTO pr_k SELECT g, 0 FROM generate_series(1, 200000) g", "VACUUM ANALYZE pr_k"],
        "/*+ APPEND */ UPDATE pr_k SET b = a", "versions_page", "UPDATE", False,
        "reading input", 200000),
    "delete": (
        ["CREATE TABLE pr_k (a int PRIMARY KEY, b int)",
         "INSERT INTO pr_k SELECT g, 0 FROM generate_series(1, 200000) g", "VACUUM ANALYZE pr_k"],
        "/*+ APPEND */ DELETE FROM pr_k", "versions_page", "DELETE", False,
        "reading input", 200000),
    "index build": (
        [],
        ["BEGIN", "CREATE TABLE pr_k (a int, b int)", "CREATE INDEX ON pr_k (a)",
         "/*+ APPEND */ INSERT INTO pr_k SELECT g, g FROM generate_series(1, 200000) g", "COMMIT"],
        "before_index_rebuild", "INSERT", True, "building indexes", 200000),
}


@pytest.mark.parametrize("case", list(KINDS))
def test_statement_kinds(cluster, case):
    setup, stmt, point, kind, new, phase, total = KINDS[case]
    with cluster.conn() as conn:
        if conn.execute("SELECT relkind FROM pg_class WHERE relname = 'pr_k'").fetchone() == ("m",):
            conn.execute("DROP MATERIALIZED VIEW pr_k")
        conn.execute("DROP TABLE IF EXISTS pr_k")
        for s in setup:
            conn.execute(s)
    off = cluster.log_size()
    settings = dict(SMALL_BATCHES, **fault_gucs(point, 1, sleep_ms=1500))
    with Background(cluster, stmt, settings, name="loader") as bg, cluster.conn() as mon:
        bg.start()
        wait_fault_sleep(cluster, bg, point, off)
        rows = progress(mon, params=(bg.pid,))
        bg.join()
        assert bg.error is None, bg.error
        assert no_row_left(mon, bg.pid)
        assert last_statement(bg.conn)["path"] == "direct"
        relid = mon.execute("SELECT 'pr_k'::regclass::oid").fetchone()[0]
    assert len(rows) == 1, rows
    r = rows[0]
    # REFRESH: the view's, not the new heap's that it fills
    assert (r["kind"], r["relid"], r["phase"]) == (kind, relid, phase), r
    assert r["relation"] == (str(relid) if new else "pr_k"), r
    # an UPDATE's or DELETE's first old pages change before any new page
    assert r["rows_done"] > 0 and (r["pages_written"] > 0 or kind in ("UPDATE", "DELETE")), r
    assert (r["total_unit"], r["total_is_estimate"]) == ("rows", True), r
    assert total is None or r["total"] == total, r
    if case == "index build":
        # every row's entry sorted for the build
        assert r["index_entries"] == r["rows_done"] == 200000, r


def test_not_preloaded(make_cluster):
    """Loaded by LOAD, the library has no shared memory: the load runs
    direct, the view is empty."""
    c = make_cluster(extra_conf={"shared_preload_libraries": ""})
    with c.conn() as conn:
        new_table(conn, "pr_load")
    off = c.log_size()
    statements = ["LOAD 'directpath'", "SET directpath.fault_point = 'batch_done'",
                  "SET directpath.fault_action = 'sleep'", "SET directpath.fault_sleep_ms = 1500",
                  "SET directpath.batch_pages = 8",
                  "/*+ APPEND */ INSERT INTO pr_load SELECT g, g FROM generate_series(1, 200000) g"]
    with Background(c, statements, name="loader") as bg, c.conn() as mon:
        bg.start()
        wait_fault_sleep(c, bg, "batch_done", off)
        assert progress(mon, "true") == []
        bg.join()
        assert bg.error is None, bg.error
        assert last_statement(bg.conn)["path"] == "direct"
    # the log line needs no shared memory
    with c.conn() as conn:
        conn.execute("LOAD 'directpath'")
        conn.execute("SET directpath.log_min_rows = 1000")
        off = c.log_size()
        conn.execute("/*+ APPEND */ INSERT INTO pr_load SELECT g, g FROM generate_series(1, 5000) g")
        assert 'directpath: INSERT "public.pr_load": 5000 rows' in c.log(off)


LOG_LINE = re.compile(r'LOG:  directpath: (?P<kind>[A-Z ]+) "public\.(?P<rel>\w+)": (?P<rows>\d+) rows, '
                      r'(?P<pages>\d+) pages written, (?P<entries>\d+) index entries, '
                      r'WAL (?P<wal>\d+) bytes, (?P<secs>[0-9.]+) s: (?P<phases>.*)')


def test_log_line(cluster):
    """directpath.log_min_rows: one LOG line at the end of a direct
    statement of at least that many rows, with its rows, pages, index
    entries, WAL and time per phase (the phases' times adding up to the
    total); none below it, none when -1 (the default), none for a
    statement that fails; a superuser's setting."""
    with cluster.conn() as conn:
        conn.execute("DROP TABLE IF EXISTS pr_log")
        conn.execute("CREATE TABLE pr_log (a int PRIMARY KEY, b text)")
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("SET directpath.log_min_rows = 1000")
        conn.execute("DROP ROLE IF EXISTS pr_nobody_log")
        conn.execute("CREATE ROLE pr_nobody_log LOGIN")
        off = cluster.log_size()
        conn.execute("/*+ APPEND */ INSERT INTO pr_log SELECT g, md5(g::text) "
                     "FROM generate_series(1, 50000) g")
        conn.execute("/*+ APPEND */ INSERT INTO pr_log SELECT g, 'x' "
                     "FROM generate_series(50001, 50010) g")
        conn.execute("/*+ APPEND */ UPDATE pr_log SET b = 'y' WHERE a % 2 = 0")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("/*+ APPEND */ INSERT INTO pr_log SELECT g, 'z' "
                         "FROM generate_series(1, 5000) g")
        conn.execute("RESET directpath.log_min_rows")
        conn.execute("/*+ APPEND */ DELETE FROM pr_log WHERE a % 3 = 0")
        lines = [m.groupdict() for m in LOG_LINE.finditer(cluster.log(off))]
    assert [(x["kind"], x["rel"], int(x["rows"])) for x in lines] == \
        [("INSERT", "pr_log", 50000), ("UPDATE", "pr_log", 25005)], lines
    ins, upd = lines
    assert int(ins["pages"]) > 0 and int(ins["entries"]) == 50000 and int(ins["wal"]) > 0, ins
    assert int(upd["pages"]) > 0 and int(upd["entries"]) == 25005, upd
    for x in lines:
        times = {p.rsplit(" ", 2)[0]: float(p.rsplit(" ", 2)[1])
                 for p in x["phases"].split(", ")}
        assert set(times) <= PHASES and "reading input" in times, x
        assert abs(sum(times.values()) - float(x["secs"])) < 0.01, x
    with connect_as(cluster, "pr_nobody_log") as other:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            other.execute("SET directpath.log_min_rows = 0")


def test_pg_stat_io(cluster, tmp_path):
    """pg_stat_io (16+) counts a direct load's appended pages as extends of
    relations in the bulkwrite context, as it counts a plain COPY's: the
    pages extended grow by the pages written (the heap's alone: no index),
    within 1%, as they do by a plain COPY's pages.  (Before 18 'extends'
    counts pages; from 18 it counts calls, and 'extend_bytes' the bytes.)"""
    with cluster.conn() as conn:
        if conn.info.server_version < 160000:
            pytest.skip("pg_stat_io is PostgreSQL 16's")
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("SET stats_fetch_consistency = none")

        pages = "extend_bytes / 8192" if conn.info.server_version >= 180000 else "extends"

        def extends(obj, ctx):
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT 1")        # a transaction's end flushes
            return conn.execute(
                f"SELECT sum({pages}) FROM pg_stat_io WHERE backend_type = 'client backend' "
                "AND object = %s AND context = %s", (obj, ctx)).fetchone()[0] or 0

        conn.execute("CREATE TABLE pr_io (a int, b text)")
        before = extends("relation", "bulkwrite")
        conn.execute("/*+ APPEND */ INSERT INTO pr_io SELECT g, md5(g::text) "
                     "FROM generate_series(1, 200000) g")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["pages_written"] > 1000, st
        grown = extends("relation", "bulkwrite") - before
        assert abs(grown - st["pages_written"]) <= st["pages_written"] / 100, \
            (grown, st["pages_written"])
        # the plain COPY of the same rows: its ring's extends, one a page
        conn.execute(f"COPY pr_io TO '{tmp_path / 'rows.txt'}'")
        conn.execute("CREATE TABLE pr_io_plain (LIKE pr_io)")
        conn.execute("SET directpath.mode = off")
        before = extends("relation", "bulkwrite")
        conn.execute(f"COPY pr_io_plain FROM '{tmp_path / 'rows.txt'}'")
        size = conn.execute("SELECT pg_relation_size('pr_io_plain') / 8192").fetchone()[0]
        grown = extends("relation", "bulkwrite") - before
        assert abs(grown - size) <= size / 100, (grown, size)


def test_explain_buffers(cluster):
    """The pages a direct statement appends count as blocks written in its
    buffer usage (EXPLAIN's BUFFERS, pg_stat_statements): heap and index
    pages alike, as many as pg_relation_size says it has (the table was
    empty), where before they counted nowhere."""
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("CREATE TABLE pr_buf (a int PRIMARY KEY, b text)")
        # no dirty buffer that the statement could write to reuse it
        conn.execute("CHECKPOINT")
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) /*+ APPEND */ INSERT INTO pr_buf "
            "SELECT g, md5(g::text) FROM generate_series(1, 200000) g").fetchone()[0][0]["Plan"]
        st = last_statement(conn)
        assert st["path"] == "direct" and st["pages_written"] > 1000, st
        heap, index = conn.execute(
            "SELECT pg_relation_size('pr_buf') / 8192, "
            "pg_relation_size('pr_buf_pkey') / 8192").fetchone()
        written = plan["Shared Written Blocks"]
        # the appended pages, and at most a few pages written through shared buffers
        assert heap + index <= written <= heap + index + 64, (written, heap, index)
        assert plan["Local Written Blocks"] == 0, plan


def test_explain_phases(cluster):
    """EXPLAIN ANALYZE's DirectPath node names the time spent in each phase,
    with the view's names, in the pipeline's order: times that add up to
    about the node's time; none with TIMING OFF (times differ run to run)."""
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("CREATE TABLE pr_ph (a int PRIMARY KEY, b text)")
        plan = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) /*+ APPEND */ INSERT INTO pr_ph "
            "SELECT g, md5(g::text) FROM generate_series(1, 200000) g").fetchone()[0][0]["Plan"]
        assert plan["Direct Path"] == "on", plan
        phases = [re.fullmatch(r"(.+) (\d+\.\d{3}) s", p).groups()
                  for p in plan["Phases"].split(", ")]
        names = [n for n, _ in phases]
        order = ["reading input", "writing pages", "index entries", "building indexes",
                 "merging indexes", "checking foreign keys", "statistics", "updating rows",
                 "finishing"]
        assert set(names) <= PHASES and names == sorted(names, key=order.index), names
        assert names[0] == "reading input" and "writing pages" in names, names
        took = sum(float(t) for _, t in phases)
        assert 0 < took <= plan["Actual Total Time"] / 1000 + 0.01, (took, plan)
        plan = conn.execute(
            "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) /*+ APPEND */ INSERT INTO pr_ph "
            "SELECT g, md5(g::text) FROM generate_series(200001, 400000) g"
        ).fetchone()[0][0]["Plan"]
        assert plan["Direct Path"] == "on" and "Phases" not in plan, plan
