"""Partitioned targets with postgres_fdw partitions on another server: the
local partitions take the direct path, the foreign ones receive their rows
through postgres_fdw in batches of batch_size (directpath.foreign_copy off)
or as one COPY each (the default; test_shard.py has the rest), in the
loading transaction."""

import re

import pytest

from conftest import (SMALL_BATCHES, last_statement, set_gucs, table_digest,
                      verify_table)

pytestmark = pytest.mark.directpath

N = 40_000
COLUMNS = "(id int, grp int, payload text)"


def rows_select(first, last):
    return (f"SELECT a, a % 4, md5(a::text) FROM generate_series({first}, {last}) a")


def setup_pair(make_cluster, batch_size):
    remote = make_cluster(name="remote", extensions=False,
                          extra_conf={"log_statement": "all"})
    local = make_cluster(name="local")
    with remote.conn() as conn:
        for r in (2, 3):
            conn.execute(f"CREATE TABLE hp_{r}_data {COLUMNS}")
    with local.conn() as conn:
        conn.execute("CREATE EXTENSION postgres_fdw")
        conn.execute(f"CREATE SERVER rsrv FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
                     f"(host '{remote.sockdir}', port '{remote.port}', dbname 'postgres', "
                     f"batch_size '{batch_size}')")
        conn.execute("CREATE USER MAPPING FOR CURRENT_USER SERVER rsrv OPTIONS (user 'postgres')")
        conn.execute(f"CREATE TABLE hp {COLUMNS} PARTITION BY LIST (grp)")
        for r in (0, 1):
            conn.execute(f"CREATE TABLE hp_{r} PARTITION OF hp FOR VALUES IN ({r})")
        for r in (2, 3):
            conn.execute(f"CREATE FOREIGN TABLE hp_{r} PARTITION OF hp FOR VALUES IN ({r}) "
                         f"SERVER rsrv OPTIONS (table_name 'hp_{r}_data')")
        conn.execute(f"CREATE TABLE ref {COLUMNS}")
    return local, remote


def remote_executions(remote, offset):
    """INSERT executions the remote server logged since 'offset'."""
    return len(re.findall(r"(?:execute [^:]*|statement): INSERT INTO public\.hp_\d_data",
                          remote.log(offset)))


@pytest.mark.parametrize("batch_size", [100, 1])
def test_foreign_partitions_batched(make_cluster, batch_size):
    local, remote = setup_pair(make_cluster, batch_size)
    off = remote.log_size()
    with local.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        set_gucs(conn, {"directpath.foreign_copy": "off"})
        conn.execute(f"/*+ APPEND */ INSERT INTO hp {rows_select(1, N)}")
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        assert st["pages_written"] > 0 and st["relations"] == 4, st
        # the same rows through the plain path, for reference
        conn.execute(f"INSERT INTO ref {rows_select(1, N)}")
        for r in (0, 1, 2, 3):
            assert table_digest(conn, f"hp_{r}") == table_digest(
                conn, f"(SELECT * FROM ref WHERE grp = {r})"), r
        for r in (0, 1):
            verify_table(conn, f"hp_{r}")
    # each foreign partition got N/4 rows in batches of batch_size
    execs = remote_executions(remote, off)
    per_part = N // 4
    want = 2 * -(-per_part // batch_size)
    assert execs == want, (execs, want)
    with remote.conn() as conn:
        assert conn.execute("SELECT count(*) FROM hp_2_data").fetchone()[0] == per_part
        assert conn.execute("SELECT count(*) FROM hp_3_data").fetchone()[0] == per_part
    local.stop()
    local.pg_checksums_check()


def test_foreign_partitions_copy_and_rollback(make_cluster):
    local, remote = setup_pair(make_cluster, 100)
    with local.conn() as conn:
        set_gucs(conn, SMALL_BATCHES)
        with conn.cursor() as cur:
            with cur.copy("/*+ APPEND */ COPY hp FROM STDIN") as cp:
                for i in range(1, N + 1):
                    cp.write_row((i, i % 4, f"c{i}"))
        st = last_statement(conn)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        # a load rolled back leaves nothing, here or on the remote server
        conn.execute("BEGIN")
        conn.execute(f"/*+ APPEND */ INSERT INTO hp {rows_select(N + 1, 2 * N)}")
        assert last_statement(conn)["path"] == "direct"
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT count(*), count(DISTINCT id) FROM hp").fetchone() == (N, N)
        # an error on the remote side fails the statement as a whole
        with remote.conn() as rc:
            rc.execute("ALTER TABLE hp_3_data ADD CHECK (id <> 2 * 40000 + 3)")
        with pytest.raises(Exception) as e:
            conn.execute(f"/*+ APPEND */ INSERT INTO hp {rows_select(N + 1, 2 * N + 10)}")
        assert getattr(e.value, "sqlstate", None) == "23514", e.value
        assert conn.execute("SELECT count(*) FROM hp").fetchone()[0] == N
        for r in (0, 1):
            verify_table(conn, f"hp_{r}")
    with remote.conn() as conn:
        assert conn.execute("SELECT count(*) FROM hp_2_data").fetchone()[0] == N // 4
        assert conn.execute("SELECT count(*) FROM hp_3_data").fetchone()[0] == N // 4
