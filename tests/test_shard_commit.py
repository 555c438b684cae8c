"""Two-phase commit across shards (src/remote/shardcommit.c).

With directpath.shard_two_phase on, the remote transactions of the shards a
load streamed to are prepared before the local commit and committed after
it; directpath.resolve_shards() settles what a crash left in doubt.  The
Shards fixture of test_shard.py (a local server, shard1 and shard2 with
max_prepared_transactions, shard "plain" without): rows of grp 0 are local,
grp 1-3 go to the shards.  Each test checks what every server holds, what
the shards logged, and which prepared transactions are left."""

import re

import pytest

from conftest import Background, crash_backend, fault_gucs, wait_fault_sleep
from test_shard import N, Shards

pytestmark = pytest.mark.directpath

ON = {"directpath.shard_two_phase": "on"}


def select_groups(groups, n=N):
    """n rows spread over the given grp values."""
    g = "(ARRAY[" + ",".join(str(x) for x in groups) + f"])[1 + a % {len(groups)}]"
    return (f"SELECT a, {g}, md5(a::text), timestamptz '2024-01-01 00:00+00' "
            f"+ a * interval '1 minute', a / 7.0 FROM generate_series(1, {n}) a")


@pytest.fixture
def shards(make_cluster):
    return Shards(make_cluster, prepared=4)


def prepared(s, g):
    with s.remotes[g].conn() as c:
        return [r[0] for r in c.execute("SELECT gid FROM pg_prepared_xacts ORDER BY gid")]


def counts(s):
    with s.local.conn() as c:
        local = c.execute("SELECT count(*) FROM sh_0").fetchone()[0]
    return local, s.remote_count(1), s.remote_count(2)


def test_two_phase_commit(shards):
    """Each shard's transaction is prepared, then committed after ours; the
    rows are those of a plain load; nothing stays prepared."""
    s = shards
    off = s.offsets()
    with s.local.conn() as conn:
        for k, v in ON.items():
            conn.execute(f"SET {k} = {v}")
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {select_groups([0, 1, 2])}")
        conn.execute(f"INSERT INTO ref {select_groups([0, 1, 2])}")
        for g in (0, 1, 2):
            assert conn.execute(f"SELECT count(*), sum(id) FROM sh_{g}").fetchone() == \
                conn.execute(f"SELECT count(*), sum(id) FROM ref WHERE grp = {g}").fetchone()
    assert counts(s) == (N // 3, N // 3, N // 3)
    for g in (1, 2):
        log = s.remotes[g].log(off[g])
        gids = re.findall(r"statement: PREPARE TRANSACTION '(dp_\d+_\d+_\d+_\d)'", log)
        assert len(gids) == 1, log[-2000:]
        assert f"COMMIT PREPARED '{gids[0]}'" in log
        assert prepared(s, g) == []


def test_setting_off_commits_one_phase(shards):
    s = shards
    off = s.offsets()
    with s.local.conn() as conn:
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {select_groups([0, 1, 2])}")
    assert counts(s) == (N // 3, N // 3, N // 3)
    for g in (1, 2):
        assert "PREPARE TRANSACTION" not in s.remotes[g].log(off[g])


def test_shard_that_cannot_prepare_fails_the_commit(shards):
    """A shard without max_prepared_transactions fails the commit with its
    error and a hint; the shards prepared already are rolled back: nothing
    is visible anywhere, nothing stays prepared."""
    s = shards
    with s.local.conn() as conn:
        for k, v in ON.items():
            conn.execute(f"SET {k} = {v}")
        with pytest.raises(Exception) as e:
            conn.execute(f"/*+ APPEND */ INSERT INTO sh {select_groups([0, 1, 2, 3])}")
        assert e.value.sqlstate == "55000", e.value
        assert "could not prepare the transaction on server \"s3\"" in str(e.value)
        assert "max_prepared_transactions" in (e.value.diag.message_hint or "")
    assert counts(s) == (0, 0, 0)
    assert s.remote_count(3) == 0
    assert prepared(s, 1) == [] and prepared(s, 2) == []


def test_rollback_prepares_nothing(shards):
    s = shards
    off = s.offsets()
    with s.local.conn(autocommit=False) as conn:
        for k, v in ON.items():
            conn.execute(f"SET {k} = {v}")
        conn.execute(f"/*+ APPEND */ INSERT INTO sh {select_groups([0, 1, 2])}")
        conn.rollback()
    assert counts(s) == (0, 0, 0)
    for g in (1, 2):
        assert "PREPARE TRANSACTION" not in s.remotes[g].log(off[g])


@pytest.mark.parametrize("point,committed", [("shard_prepared", False), ("shard_commit", True)])
def test_crash_between_the_phases_is_resolved(shards, point, committed):
    """The coordinator's backend is killed after the shards prepared: before
    the local commit (shard_prepared) or after it (shard_commit).  The
    shards' rows stay invisible, prepared; while the coordinator has not
    committed, resolve_shards() leaves them; after the crash it commits them
    when the local transaction committed and rolls them back when it did
    not."""
    s = shards
    off = s.local.log_size()
    stmt = f"/*+ APPEND */ INSERT INTO sh {select_groups([0, 1, 2])}"
    with Background(s.local, stmt, settings={**ON, **fault_gucs(point)}) as bg:
        bg.start()
        wait_fault_sleep(s.local, bg, point, off)
        if not committed:
            with s.local.conn() as c:
                left = c.execute("SELECT server, outcome FROM directpath.resolve_shards() "
                                 "ORDER BY 1").fetchall()
            assert left == [("s1", "left: in progress here"),
                            ("s2", "left: in progress here")]
        crash_backend(s.local, bg.pid)
    gids = {g: prepared(s, g) for g in (1, 2)}
    assert all(len(v) == 1 for v in gids.values()), gids
    assert (s.remote_count(1), s.remote_count(2)) == (0, 0)
    with s.local.conn() as c:
        assert c.execute("SELECT count(*) FROM sh_0").fetchone()[0] == (N // 3 if committed else 0)
        done = c.execute("SELECT server, transaction, outcome FROM directpath.resolve_shards() "
                         "ORDER BY 1").fetchall()
        outcome = "committed" if committed else "rolled back"
        assert done == [("s1", gids[1][0], outcome), ("s2", gids[2][0], outcome)]
        assert c.execute("SELECT count(*) FROM directpath.resolve_shards()").fetchone()[0] == 0
    assert counts(s) == ((N // 3,) * 3 if committed else (0, 0, 0))
    assert prepared(s, 1) == [] and prepared(s, 2) == []


def test_resolve_shards_is_not_for_public(shards):
    s = shards
    with s.local.conn() as c:
        c.execute("DROP ROLE IF EXISTS sc_user")
        c.execute("CREATE ROLE sc_user LOGIN")
        assert c.execute("SELECT has_function_privilege('sc_user', "
                         "'directpath.resolve_shards()', 'EXECUTE')").fetchone()[0] is False
