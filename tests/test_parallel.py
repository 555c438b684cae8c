"""Parallel direct path (parallel.c, placer.c, parcopy.c, parplan.c):
workers build pages, the leader writes; each case for INSERT ... SELECT of
a scan, for INSERT ... SELECT of a join and for COPY from a file, into a
plain table and into a partitioned one (rows routed by the
workers to per-leaf pages: a default partition and a leaf whose columns are
in another order among its leaves).

What SQL alone cannot show: a streaming standby replays a parallel load
into the same rows (existing and new storage, the latter frozen); a worker
terminated or killed mid-load, the leader killed, an immediate stop, and
the statement cancelled, each while the leader sleeps after its first
batch with the workers' queues full: the statement fails (or the cluster
recovers), nothing of the load is visible, the heap passes verify_heapam,
and the same load then succeeds in parallel; a committed parallel load
survives an immediate stop.  Stored generated columns computed by the
workers give the plain statement's rows.
"""

import hashlib
import time

import psycopg
import pytest

from conftest import (Background, crash_backend, crash_immediate, fault_gucs,
                      last_statement, table_digest, verify_table, wait_fault_sleep)

pytestmark = pytest.mark.directpath

ROWS = 300_000
LOADS = {"insert": ("/*+ APPEND PARALLEL(2) */ INSERT INTO {t} "
                    "SELECT id, v, k FROM par_src WHERE k <> 3"),
         "copy": "/*+ APPEND PARALLEL(2) */ COPY {t} FROM 'dp_par_src.dat'",
         # the same rows from a join (parplan.c): par_dim lacks k = 3
         "join": ("/*+ APPEND PARALLEL(2) */ INSERT INTO {t} "
                  "SELECT s.id, s.v, s.k FROM par_src s JOIN par_dim d USING (k)")}
LOAD_KINDS = pytest.mark.parametrize("kind", list(LOADS))
SHAPES = pytest.mark.parametrize("shape", ["plain", "partitioned", "held"])


def make_source(conn):
    """The source table and, in the data directory, the file COPY reads:
    the same rows whenever a test of the shared cluster makes them again."""
    if conn.execute("SELECT to_regclass('par_src')").fetchone()[0] is None:
        conn.execute("CREATE TABLE par_src AS SELECT g AS id, md5(g::text) AS v, g % 7 AS k "
                     f"FROM generate_series(1, {ROWS}) g")
        conn.execute("VACUUM ANALYZE par_src")
    if conn.execute("SELECT to_regclass('par_dim')").fetchone()[0] is None:
        conn.execute("CREATE TABLE par_dim AS SELECT k FROM generate_series(0, 6) k WHERE k <> 3")
        conn.execute("VACUUM ANALYZE par_dim")
    if conn.execute("SELECT pg_stat_file('dp_par_src.dat', true) IS NULL").fetchone()[0]:
        conn.execute("COPY (SELECT id, v, k FROM par_src WHERE k <> 3) "
                     "TO PROGRAM 'cat > dp_par_src.dat'")


def make_target(conn, t, indexed=False, shape="plain"):
    """A plain table, or one range-partitioned on id: two ranges (the second
    a table whose columns are in another order, attached), and a default
    partition taking the rest.  "held": partitioned, the first range's k
    referencing par_ref (its keys checked by the leader as a set at the
    end), and the default partition's rows, logged by a row trigger into
    {t}_log whose WHEN condition is not parallel safe, held: the leader
    loads them after the workers."""
    cols = "(id int NOT NULL, v text, k int CHECK (k >= 0))"
    if shape == "plain":
        conn.execute(f"CREATE TABLE {t} {cols}")
    else:
        conn.execute(f"CREATE TABLE {t} {cols} PARTITION BY RANGE (id)")
        conn.execute(f"CREATE TABLE {t}_a PARTITION OF {t} FOR VALUES FROM (1) TO (100001)")
        conn.execute(f"CREATE TABLE {t}_b (k int CONSTRAINT {t}_k_check CHECK (k >= 0), v text, "
                     "id int NOT NULL)")
        conn.execute(f"ALTER TABLE {t} ATTACH PARTITION {t}_b "
                     "FOR VALUES FROM (100001) TO (200001)")
        conn.execute(f"CREATE TABLE {t}_d PARTITION OF {t} DEFAULT")
    if shape == "held":
        conn.execute("CREATE TABLE IF NOT EXISTS par_ref (k int PRIMARY KEY)")
        conn.execute("INSERT INTO par_ref SELECT generate_series(0, 6) ON CONFLICT DO NOTHING")
        conn.execute(f"ALTER TABLE {t}_a ADD FOREIGN KEY (k) REFERENCES par_ref")
        conn.execute(f"CREATE TABLE {t}_log (id int)")
        conn.execute(f"CREATE FUNCTION {t}_log() RETURNS trigger LANGUAGE plpgsql AS "
                     f"$$BEGIN INSERT INTO {t}_log VALUES (NEW.id); RETURN NULL; END$$")
        # a WHEN condition that is not parallel safe holds the partition
        conn.execute(f"CREATE FUNCTION {t}_any(int) RETURNS bool LANGUAGE plpgsql "
                     "PARALLEL UNSAFE AS 'BEGIN RETURN true; END'")
        conn.execute(f"CREATE TRIGGER log AFTER INSERT ON {t}_d FOR EACH ROW "
                     f"WHEN ({t}_any(NEW.id)) EXECUTE FUNCTION {t}_log()")
    if indexed:
        conn.execute(f"ALTER TABLE {t} ADD PRIMARY KEY (id)")
        conn.execute(f"CREATE INDEX ON {t} (v)")


def heaps(conn, t):
    """The tables that hold a target's rows: itself, or its leaves."""
    return [r[0] for r in conn.execute(
        "SELECT relid::regclass::text FROM pg_partition_tree(%s) "
        "WHERE isleaf ORDER BY 1", (t,)).fetchall()] or [t]


def verify_target(conn, t, frozen_expected=None):
    for h in heaps(conn, t):
        verify_table(conn, h, frozen_expected=frozen_expected)


def expected_digest(conn):
    return tuple(conn.execute(
        "SELECT count(*), coalesce(sum(hashtext(x::text)), 0) FROM "
        "(SELECT id, v, k FROM par_src WHERE k <> 3) x").fetchone())


def assert_parallel(conn, t=None):
    """The last load ran in parallel; a "held" target's held partition was
    loaded by the leader, its trigger fired once per row, and its foreign
    key checked as a set."""
    st = last_statement(conn)
    assert st["path"] == "direct" and st["parallel_workers"] > 0, st
    if t is not None and conn.execute("SELECT to_regclass(%s)", (f"{t}_log",)).fetchone()[0]:
        assert st["parallel"].startswith("the rows of 1 partition loaded by the leader"), st
        assert f"\"{t}_a\"" not in st["parallel"] and "as a set" in st["foreign_keys"], st
        assert (conn.execute(f"SELECT count(*) FROM {t}_log").fetchone()
                == conn.execute(f"SELECT count(*) FROM {t}_d").fetchone()), t
    return st


@SHAPES
@LOAD_KINDS
def test_parallel_load_replayed_by_standby(make_cluster, tmp_path, kind, shape):
    """Existing storage (its indexes maintained per batch by the leader) and
    new storage (frozen, its indexes built at the end): the standby has the
    same rows and sound indexes."""
    p = make_cluster(name="primary")
    with p.conn() as conn:
        make_source(conn)
        make_target(conn, "par_e", indexed=True, shape=shape)
        want = expected_digest(conn)
    sb = p.make_standby(tmp_path)
    with p.conn() as conn:
        conn.execute(LOADS[kind].format(t="par_e"))
        assert_parallel(conn, "par_e")
        conn.execute("BEGIN")
        make_target(conn, "par_n", indexed=True, shape=shape)
        conn.execute(LOADS[kind].format(t="par_n"))
        st = assert_parallel(conn, "par_n")
        assert st["frozen"] and st["index_maintenance"] == "build", st
        conn.execute("COMMIT")
        for t in ("par_e", "par_n"):
            assert table_digest(conn, t) == want, t
            verify_target(conn, t, frozen_expected=(t == "par_n"))
        if shape != "plain":
            # every leaf got rows
            assert all(table_digest(conn, h)[0] > 0 for h in heaps(conn, "par_n"))
    p.wait_replay(sb)
    with sb.conn() as conn:
        for t in ("par_e", "par_n"):
            assert table_digest(conn, t) == want, t
            verify_target(conn, t)
    sb.stop()


def paused_parallel_load(cluster, t, kind):
    """Start the parallel load ('kind') of 't' and return (Background, worker pids)
    once the leader sleeps after its first batch."""
    off = cluster.log_size()
    settings = dict(fault_gucs("first_batch", 1, sleep_ms=60_000),
                    **{"directpath.batch_pages": 50})
    bg = Background(cluster, [LOADS[kind].format(t=t)], settings, name="loader")
    bg.start()
    wait_fault_sleep(cluster, bg, "first_batch", off)
    # The leader can take its first batch before every worker is in
    # pg_stat_activity (a loaded machine starts them late): wait for one.
    deadline = time.monotonic() + 30
    with cluster.conn() as conn:
        while True:
            workers = [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE leader_pid = %s AND pid <> %s",
                (bg.pid, bg.pid)).fetchall()]
            if workers or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert workers, ("the load runs without parallel workers:\n"
                     + cluster.log_tail(30, off))
    return bg, workers


@SHAPES
@LOAD_KINDS
@pytest.mark.parametrize("how", ["terminate-worker", "kill-worker", "kill-leader",
                                 "immediate-stop"])
def test_process_stopped_mid_load(cluster, how, kind, shape):
    """A worker terminated (the statement fails with its error), a worker
    or the leader killed, or the server stopped in immediate mode (crash
    recovery): nothing of the load is visible, and the same load then
    succeeds in parallel."""
    t = f"par_{kind}_{shape[:4]}_" + how.replace("-", "_")
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t, shape=shape)
        want = expected_digest(conn)
    bg, workers = paused_parallel_load(cluster, t, kind)
    with bg:
        if how == "terminate-worker":
            with cluster.conn() as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (workers[0],))
        elif how == "immediate-stop":
            crash_immediate(cluster)
        else:
            crash_backend(cluster, workers[0] if how == "kill-worker" else bg.pid)
        bg.join()
        assert bg.error is not None, bg.results
    with cluster.conn() as conn:
        assert table_digest(conn, t) == (0, 0)
        if shape == "held":
            assert table_digest(conn, f"{t}_log") == (0, 0)     # the trigger's rows too
        verify_target(conn, t)
        conn.execute(LOADS[kind].format(t=t))
        assert_parallel(conn, t)
        assert table_digest(conn, t) == want


@SHAPES
@LOAD_KINDS
def test_cancel_fails_the_statement(cluster, kind, shape):
    t = f"par_c_{kind}_{shape[:4]}"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t, shape=shape)
    bg, _ = paused_parallel_load(cluster, t, kind)
    with bg:
        with cluster.conn() as conn:
            conn.execute("SELECT pg_cancel_backend(%s)", (bg.pid,))
        bg.join()
        assert bg.sqlstate == "57014", bg.error
    with cluster.conn() as conn:
        assert table_digest(conn, t) == (0, 0)
        verify_target(conn, t)
        # no worker is left behind
        deadline = time.monotonic() + 30
        while conn.execute("SELECT count(*) FROM pg_stat_activity "
                           "WHERE backend_type = 'parallel worker'").fetchone()[0] > 0:
            assert time.monotonic() < deadline, "parallel workers outlived the statement"
            time.sleep(0.1)


@LOAD_KINDS
def test_committed_load_survives_immediate_stop(cluster, kind):
    """A committed parallel load, then an immediate stop: crash recovery
    replays the leader's WAL into the same rows."""
    t = f"par_after_commit_{kind}"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t)
        want = expected_digest(conn)
        conn.execute(LOADS[kind].format(t=t))
        assert_parallel(conn)
    crash_immediate(cluster)
    with cluster.conn() as conn:
        assert table_digest(conn, t) == want
        verify_table(conn, t)


def test_copy_progress_reported(cluster):
    """pg_stat_progress_copy shows a parallel COPY's leader: a file read
    FROM, bytes read out of the file's size, rows written."""
    t = "par_progress"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t)
    bg, _ = paused_parallel_load(cluster, t, "copy")
    with bg:
        with cluster.conn() as conn:
            row = conn.execute(
                "SELECT command, type, bytes_processed, bytes_total, tuples_processed "
                "FROM pg_stat_progress_copy WHERE pid = %s", (bg.pid,)).fetchone()
            conn.execute("SELECT pg_cancel_backend(%s)", (bg.pid,))
        bg.join()
    assert row is not None, "no progress row for the leader"
    command, typ, done, total, rows = row
    assert (command, typ) == ("COPY FROM", "FILE"), row
    assert 0 < done <= total, row
    assert rows > 0, row


def stdin_rows(bad_line=None):
    """par_src's rows with k <> 3 as COPY text, in id order; the row on
    line 'bad_line' gets a k that is not a number."""
    out = []
    for i in range(1, ROWS + 1):
        if i % 7 == 3:
            continue
        k = "x" if len(out) + 1 == bad_line else str(i % 7)
        out.append(f"{i}\t{hashlib.md5(str(i).encode()).hexdigest()}\t{k}\n")
    return "".join(out).encode()


def copy_stdin(conn, t, data):
    with conn.cursor() as cur:
        with cur.copy(f"/*+ APPEND PARALLEL(2) */ COPY {t} FROM STDIN") as cp:
            for at in range(0, len(data), 65536):
                cp.write(data[at:at + 65536])


def test_copy_from_stdin(cluster):
    """COPY FROM STDIN through a driver's copy API, in parallel: the leader
    reads the client's CopyData messages into chunks.  The same rows as
    the source, in text and in binary; a bad row fails the statement
    naming its line; a client that gives up (CopyFail) fails it too;
    nothing of either is visible."""
    t = "par_stdin"
    with cluster.conn() as conn:
        make_source(conn)
        make_target(conn, t)
        want = expected_digest(conn)
        copy_stdin(conn, t, stdin_rows())
        assert_parallel(conn)
        assert table_digest(conn, t) == want
        verify_table(conn, t)
        conn.execute(f"TRUNCATE {t}")
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
            copy_stdin(conn, t, stdin_rows(bad_line=200_000))
        assert "line 200000" in str(e.value.diag.context), e.value.diag.context
        # psycopg sends CopyFail and raises the client's own exception
        off = cluster.log_size()
        with pytest.raises(RuntimeError, match="gives up"):
            with conn.cursor() as cur:
                with cur.copy(f"/*+ APPEND PARALLEL(2) */ COPY {t} FROM STDIN") as cp:
                    cp.write(stdin_rows()[:5_000_000])
                    raise RuntimeError("the client gives up")
        assert "COPY from stdin failed" in cluster.log(off)
        assert table_digest(conn, t) == (0, 0)
        verify_table(conn, t)
        # binary, as drivers' binary copy APIs send it: chunks of whole tuples
        with conn.cursor() as cur:
            with cur.copy(f"/*+ APPEND PARALLEL(2) */ COPY {t} FROM STDIN "
                          "WITH (FORMAT binary)") as cp:
                cp.set_types(["int4", "text", "int4"])
                for i in range(1, ROWS + 1):
                    if i % 7 != 3:
                        cp.write_row((i, hashlib.md5(str(i).encode()).hexdigest(), i % 7))
        assert_parallel(conn)
        assert table_digest(conn, t) == want
        verify_table(conn, t)


@pytest.mark.parametrize("shape", ["plain", "partitioned"])
@LOAD_KINDS
def test_generated_columns_computed_by_workers(cluster, kind, shape):
    """A stored generated column is computed where the row is placed, in
    the workers too, before NOT NULL and CHECK (ExecInsert's order): the
    load runs in parallel and gives the plain statement's rows."""
    t, tp = f"par_gen_{kind}_{shape}", f"par_genp_{kind}_{shape}"
    cols = ("(id int NOT NULL, v text, k int CHECK (k >= 0), g text GENERATED ALWAYS AS "
            "(v || ':' || k::text) STORED NOT NULL CHECK (length(g) > 33))")
    with cluster.conn() as conn:
        make_source(conn)
        for name in (t, tp):
            if shape == "plain":
                conn.execute(f"CREATE TABLE {name} {cols}")
            else:
                conn.execute(f"CREATE TABLE {name} {cols} PARTITION BY RANGE (id)")
                conn.execute(f"CREATE TABLE {name}_a PARTITION OF {name} "
                             "FOR VALUES FROM (1) TO (150001)")
                conn.execute(f"CREATE TABLE {name}_d PARTITION OF {name} DEFAULT")
        load = LOADS[kind]
        conn.execute(load.replace("/*+ APPEND PARALLEL(2) */ ", "").format(t=f"{tp} (id, v, k)"))
        conn.execute(load.format(t=f"{t} (id, v, k)"))
        assert_parallel(conn)
        assert table_digest(conn, t) == table_digest(conn, tp)
        assert conn.execute(f"SELECT count(*) FROM {t} WHERE g IS DISTINCT FROM "
                            "v || ':' || k::text").fetchone()[0] == 0
        verify_target(conn, t)
