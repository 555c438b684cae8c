"""Unique btrees of a table with rows, merged into a rewrite at the end of a
large load (sorted.c, can_spool_late; btmerge.c's groups).

A COPY of scattered keys (uuid, text under "C" and the database's
collation, numeric, a two-column key with NULLs) into a table that already
holds rows, some of them deleted, is compared with the plain COPY of the
same file into a twin table: the same rows, amcheck clean with
heapallindexed, index scans against sequential scans.  A duplicate of a
live row, of another loaded row, or of a NULL under NULLS NOT DISTINCT
fails as the plain COPY fails (SQLSTATE, message, DETAIL) and leaves
nothing of the load visible.  The rewrite replays on a standby, and a crash
before the commit leaves the old index.
"""

import pytest

from conftest import (crash_backend, error_of, last_statement, table_digest,
                      verify_table)

pytestmark = pytest.mark.directpath

OLD, NEW = 30_000, 70_000

COLUMNS = ("(id uuid PRIMARY KEY, code text COLLATE \"C\" UNIQUE, name text UNIQUE, "
           "amount numeric(14, 2) UNIQUE, grp int, seq int, w int UNIQUE NULLS NOT DISTINCT, "
           "UNIQUE (grp, seq))")


def rows(first, last):
    """Rows first..last, their keys scattered (ordered by a hash)."""
    return (f"SELECT md5(g::text)::uuid, 'C-' || md5(g::text), 'n' || md5((g * 7)::text), "
            f"(g::numeric * 7919 % 1000000007) / 100, g % 50, "
            f"CASE WHEN g % 4 = 0 THEN NULL ELSE g END, g "
            f"FROM generate_series({first}, {last}) g ORDER BY hashint4(g)")


def make(conn, t):
    conn.execute(f"DROP TABLE IF EXISTS {t}")
    conn.execute(f"CREATE TABLE {t} {COLUMNS}")
    conn.execute(f"INSERT INTO {t} {rows(1, OLD)}")
    # dead rows whose keys the load brings back
    conn.execute(f"DELETE FROM {t} WHERE w % 1000 = 0")


def scans_agree(conn, t):
    """Counts through each unique index against a sequential scan's."""
    preds = ["id = md5('4242')::uuid OR id = md5('77777')::uuid",
             "code BETWEEN 'C-0' AND 'C-3'", "name > 'nf'",
             "amount < 5000", "grp = 7 AND seq IS NULL", "w % 1000 = 0"]
    out = []
    for p in preds:
        q = f"SELECT count(*) FROM {t} WHERE {p}"
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        by_index = conn.execute(q).fetchone()[0]
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_bitmapscan")
        conn.execute("SET enable_indexscan = off")
        conn.execute("SET enable_bitmapscan = off")
        conn.execute("SET enable_indexonlyscan = off")
        by_seq = conn.execute(q).fetchone()[0]
        conn.execute("RESET enable_indexscan")
        conn.execute("RESET enable_bitmapscan")
        conn.execute("RESET enable_indexonlyscan")
        assert by_index == by_seq, (p, by_index, by_seq)
        out.append(by_seq)
    return out


def load_file(conn, tmp_path, name, extra=""):
    path = tmp_path / f"{name}.csv"
    q = rows(OLD - 999, OLD + NEW)
    if extra:
        q = f"({q}) UNION ALL ({extra})"
    conn.execute(f"COPY ({q}) TO '{path}' WITH (FORMAT csv)")
    return path


def test_large_copy_matches_plain(cluster, tmp_path):
    with cluster.conn() as conn:
        make(conn, "um_plain")
        make(conn, "um_direct")
        # the load's first 999 rows are the deleted ones and live ones: only
        # the deleted ones may come back, so take them out of the live set
        conn.execute(f"DELETE FROM um_plain WHERE w >= {OLD - 999}")
        conn.execute(f"DELETE FROM um_direct WHERE w >= {OLD - 999}")
        path = load_file(conn, tmp_path, "ok")
        conn.execute(f"COPY um_plain FROM '{path}' WITH (FORMAT csv)")
        conn.execute(f"/*+ APPEND */ COPY um_direct FROM '{path}' WITH (FORMAT csv)")
        st = last_statement(conn)
        assert st["path"] == "direct" and "merge" in st["index_maintenance"], st
        assert st["indexes_rebuilt"] >= 6, st
        assert table_digest(conn, "um_plain") == table_digest(conn, "um_direct")
        verify_table(conn, "um_direct")
        assert scans_agree(conn, "um_direct") == scans_agree(conn, "um_plain")


@pytest.mark.parametrize("extra", [
    # a live row's key, last in the file (so it waits for the merge)
    "SELECT md5('5')::uuid, 'x1', 'y1', 1.5, 1, NULL::int, -1",
    # a key the load itself repeats
    f"SELECT md5('{OLD + 500}')::uuid, 'x2', 'y2', 2.5, 1, NULL::int, -2",
    # the text key under the database's collation
    "SELECT md5('-3')::uuid, 'x3', 'n' || md5((5 * 7)::text), 3.5, 1, NULL::int, -3",
    # a second NULL where NULLs are not distinct
    "SELECT md5('-4')::uuid, 'x4', 'y4', 4.5, 1, NULL::int, NULL::int UNION ALL "
    "SELECT md5('-5')::uuid, 'x5', 'y5', 5.5, 1, NULL::int, NULL::int",
], ids=["live", "repeated", "collated", "nulls-not-distinct"])
def test_duplicates_fail_as_plain(cluster, tmp_path, extra):
    with cluster.conn() as conn:
        make(conn, "ud_plain")
        make(conn, "ud_direct")
        conn.execute(f"DELETE FROM ud_plain WHERE w >= {OLD - 999}")
        conn.execute(f"DELETE FROM ud_direct WHERE w >= {OLD - 999}")
        before = table_digest(conn, "ud_direct")
        path = load_file(conn, tmp_path, "dup", extra)
        plain = error_of(conn, f"COPY ud_plain FROM '{path}' WITH (FORMAT csv)")
        direct = error_of(conn, f"/*+ APPEND */ COPY ud_direct FROM '{path}' WITH (FORMAT csv)")
        assert plain is not None and direct is not None
        # SQLSTATE, message and DETAIL as the plain COPY's; the direct
        # error names the key, not the input line
        assert direct[:3] == (plain[0], plain[1].replace("ud_plain", "ud_direct"),
                              plain[2]), (plain, direct)
        assert direct[0] == "23505"
        assert table_digest(conn, "ud_direct") == before
        verify_table(conn, "ud_direct")


def test_merge_replays_and_crash_keeps_old_index(make_cluster, tmp_path):
    p = make_cluster(name="primary")
    with p.conn() as conn:
        make(conn, "ur")
        conn.execute(f"DELETE FROM ur WHERE w >= {OLD - 999}")
        path = load_file(conn, tmp_path, "rep")
    sb = p.make_standby(tmp_path)
    # killed after the merge, before the commit: the old indexes stay
    conn = p.conn()
    pid = conn.info.backend_pid
    with p.conn() as c2:
        want = scans_agree(c2, "ur")
        digest = table_digest(c2, "ur")
    conn.execute("BEGIN")
    conn.execute(f"/*+ APPEND */ COPY ur FROM '{path}' WITH (FORMAT csv)")
    assert "merge" in last_statement(conn)["index_maintenance"]
    crash_backend(p, pid)
    with p.conn() as conn:
        assert table_digest(conn, "ur") == digest
        assert scans_agree(conn, "ur") == want
        verify_table(conn, "ur")
        # the retry meets the killed load's entries (an aborted row's)
        conn.execute(f"/*+ APPEND */ COPY ur FROM '{path}' WITH (FORMAT csv)")
        assert "merge" in last_statement(conn)["index_maintenance"]
        verify_table(conn, "ur")
        want = scans_agree(conn, "ur")
        digest = table_digest(conn, "ur")
        assert digest[0] == OLD - OLD // 1000 - 1000 + 1 + NEW + 1000
    p.wait_replay(sb)
    with sb.conn() as conn:
        assert table_digest(conn, "ur") == digest
        assert scans_agree(conn, "ur") == want
        verify_table(conn, "ur")
    sb.stop()
