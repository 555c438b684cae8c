"""Foreign keys checked per batch (fkeys.c) against concurrent parents.

The batch check locks the referenced rows FOR KEY SHARE as core's per-row
check does: a DELETE of a parent referenced by a batch already checked
waits for the load (here: fails on its lock_timeout), and once the load
commits it fails as referenced; nothing is ever left orphaned.  A parent
deleted and committed before the load reaches its rows makes the load fail
with core's error, as a plain INSERT does.
"""

from contextlib import contextmanager

import psycopg
import pytest

from conftest import (SMALL_BATCHES, Background, fault_gucs, last_statement,
                      wait_fault_sleep)

pytestmark = pytest.mark.directpath

LOAD = ("/*+ APPEND */ INSERT INTO {t} SELECT g, g % 100 + 1, g "
        "FROM generate_series(1, 30000) g")


def make_tables(conn, t):
    conn.execute(f"CREATE TABLE {t}_dim (id int PRIMARY KEY)")
    conn.execute(f"INSERT INTO {t}_dim SELECT generate_series(1, 100)")
    conn.execute(f"CREATE TABLE {t} (id int, d int REFERENCES {t}_dim, v int)")


def orphans(conn, t):
    return conn.execute(f"SELECT count(*) FROM {t} f WHERE NOT EXISTS "
                        f"(SELECT FROM {t}_dim d WHERE d.id = f.d)").fetchone()[0]


@contextmanager
def paused_load(cluster, statements, hit, sleep_ms):
    """A load running in the background, paused at the fault point after its
    batch number 'hit'; yields it and a second connection."""
    off = cluster.log_size()
    settings = dict(SMALL_BATCHES, **fault_gucs("batch_done", hit, sleep_ms=sleep_ms))
    with Background(cluster, statements, settings, name="loader") as bg, \
            cluster.conn() as other:
        bg.start()
        wait_fault_sleep(cluster, bg, "batch_done", off)
        yield bg, other


def test_parent_delete_waits_for_the_load(cluster):
    t = "fk_wait"
    with cluster.conn() as conn:
        make_tables(conn, t)
    with paused_load(cluster, ["BEGIN", LOAD.format(t=t)], 2, 4000) as (bg, other):
        # the first batch referenced every parent: its rows are locked
        other.execute("SET lock_timeout = '500ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute(f"DELETE FROM {t}_dim WHERE id = 7")
        bg.join()
        assert bg.error is None, bg.error
        st = last_statement(bg.conn)
        assert st["path"] == "direct" and st["foreign_keys"] == f"per batch: {t}_d_fkey", st
        bg.execute("COMMIT")
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            other.execute(f"DELETE FROM {t}_dim WHERE id = 7")
        assert orphans(other, t) == 0
        assert other.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 30000


def test_parent_deleted_before_its_batch(cluster):
    """A parent deleted (committed) while the load runs, before the batch
    that references it: that batch's check fails with core's error."""
    t = "fk_gone"
    with cluster.conn() as conn:
        make_tables(conn, t)
        conn.execute(f"INSERT INTO {t}_dim VALUES (1000)")
    load = (f"/*+ APPEND */ INSERT INTO {t} SELECT g, CASE WHEN g = 29000 THEN 1000 "
            f"ELSE g % 100 + 1 END, g FROM generate_series(1, 30000) g")
    with paused_load(cluster, [load], 1, 3000) as (bg, other):
        other.execute(f"DELETE FROM {t}_dim WHERE id = 1000")
        bg.join()
        assert isinstance(bg.error, psycopg.errors.ForeignKeyViolation), bg.error
        assert bg.error.diag.message_detail == \
            f'Key (d)=(1000) is not present in table "{t}_dim".'
        assert other.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0
        assert orphans(other, t) == 0


def test_parent_updates_during_the_load(cluster):
    """FOR KEY SHARE, as core's check: while the load holds the referenced
    rows, an UPDATE of a parent's other columns goes through at once, an
    UPDATE of its key waits (here: fails on its lock_timeout); after the
    commit the key update fails as referenced (NO ACTION), as it would
    after a plain INSERT."""
    t = "fk_upd"
    with cluster.conn() as conn:
        make_tables(conn, t)
        conn.execute(f"ALTER TABLE {t}_dim ADD label text")
    with paused_load(cluster, ["BEGIN", LOAD.format(t=t)], 2, 4000) as (bg, other):
        other.execute("SET lock_timeout = '500ms'")
        other.execute(f"UPDATE {t}_dim SET label = 'seven' WHERE id = 7")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute(f"UPDATE {t}_dim SET id = 1007 WHERE id = 7")
        bg.join()
        assert bg.error is None, bg.error
        bg.execute("COMMIT")
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            other.execute(f"UPDATE {t}_dim SET id = 1007 WHERE id = 7")
        assert other.execute(f"SELECT label FROM {t}_dim WHERE id = 7").fetchone()[0] == "seven"
        assert orphans(other, t) == 0
        assert other.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 30000
