"""Statistics gathered while a load writes (src/stats/stats.c).

A direct load that fills a table from empty stores the statistics ANALYZE
would: checked against ANALYZE on the same rows.  Up to the sample size
(300 x the statistics target) the sample is every row, so pg_stats, and
pg_class's relpages, reltuples and relallvisible, must equal what ANALYZE
stores, value for value; above it, within sampling error.  Also: serial,
parallel and partitioned loads, CREATE TABLE AS, the setting, a table that
was not empty, a rolled-back load, a user who may not ANALYZE the table,
what EXPLAIN ANALYZE and last_statement() say, and the planner's estimates
right after a load.
"""

import bisect
import re

import pytest

from conftest import last_statement

pytestmark = pytest.mark.directpath

COLUMNS = ("id int, grp int, name text, amount numeric(12,2), ts timestamptz, flag bool, "
           "tags int[], span int4range, doc jsonb, sparse text, nostats int, fixed_nd int")

SELECT = """
SELECT g, g % 17, 'name ' || (g % 251), (g % 1000) / 7.0,
       timestamptz '2026-01-01 00:00+00' + (g % 5000) * interval '1 minute',
       g % 3 = 0, ARRAY[g % 5, g % 7], int4range(g % 100, g % 100 + 10),
       jsonb_build_object('k', g % 13), CASE WHEN g % 10 = 0 THEN 'x' || g END,
       g % 4, g % 9
FROM generate_series(1, {n}) g
"""

# every column of pg_stats but the names (the range columns are 17+)
STATS = """
SELECT attname::text, to_jsonb(s) - 'schemaname' - 'tablename' - 'attname'
FROM pg_stats s WHERE schemaname = 'public' AND tablename = %s ORDER BY attname
"""


EXT = """
SELECT statistics_name::text, attnames::text, n_distinct::text, dependencies::text,
       most_common_vals::text, most_common_freqs
FROM pg_stats_ext WHERE schemaname = 'public' AND tablename = %s ORDER BY 1
"""


def stats(conn, table):
    """pg_stats of the table, of its indexes' expressions, and pg_stats_ext."""
    out = conn.execute(STATS, (table,)).fetchall()
    for (index,) in conn.execute("SELECT indexrelid::regclass::text FROM pg_index "
                                 "WHERE indrelid = %s::regclass ORDER BY 1", (table,)).fetchall():
        out += [("index " + index,) + r for r in conn.execute(STATS, (index,)).fetchall()]
    return out + conn.execute(EXT, (table,)).fetchall()


def relstats(conn, table):
    """relpages, reltuples and relallvisible of the table, then of each index."""
    return conn.execute("SELECT relpages, reltuples, relallvisible FROM pg_class "
                        "WHERE oid = %s::regclass", (table,)).fetchone() + tuple(
        conn.execute("SELECT c.relpages, c.reltuples FROM pg_index i JOIN pg_class c "
                     "ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass ORDER BY 1, 2",
                     (table,)).fetchall())


def make_table(conn, table, indexes=True):
    conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    conn.execute(f"CREATE TABLE {table} ({COLUMNS})")
    conn.execute(f"ALTER TABLE {table} ALTER nostats SET STATISTICS 0")
    conn.execute(f"ALTER TABLE {table} ALTER fixed_nd SET (n_distinct = 42)")
    conn.execute(f"ALTER TABLE {table} ADD dropped int")
    conn.execute(f"ALTER TABLE {table} DROP dropped")
    if indexes:
        conn.execute(f"CREATE INDEX {table}_lower ON {table} (lower(name), (grp % 5))")
        conn.execute(f"CREATE INDEX {table}_part ON {table} (grp) WHERE flag")
        conn.execute(f"CREATE STATISTICS {table}_ext (ndistinct, dependencies, mcv) "
                     f"ON grp, fixed_nd FROM {table}")


def after_analyze(conn, table):
    conn.execute(f"ANALYZE {table}")
    return stats(conn, table), relstats(conn, table)


LOADS = {
    "insert": "/*+ APPEND */ INSERT INTO {t} " + SELECT,
    "parallel": "/*+ APPEND PARALLEL(2) */ INSERT INTO {t} SELECT * FROM ls_src",
    "copy": "/*+ APPEND */ COPY {t} FROM '{f}'",
    "parallel_copy": "/*+ APPEND PARALLEL(2) */ COPY {t} FROM '{f}'",
}


@pytest.mark.parametrize("how", list(LOADS))
@pytest.mark.parametrize("new", [False, True], ids=["empty_table", "new_in_transaction"])
def test_small_load_stores_what_analyze_stores(cluster, tmp_path, how, new):
    """20000 rows (all of them the sample): pg_stats and pg_class equal ANALYZE's."""
    n = 20000
    t = f"ls_{how}_{'new' if new else 'empty'}"
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        if how.startswith("parallel"):
            conn.execute("DROP TABLE IF EXISTS ls_src")
            conn.execute(f"CREATE TABLE ls_src ({COLUMNS})")
            conn.execute(f"INSERT INTO ls_src {SELECT.format(n=n)}")
        path = tmp_path / "rows.txt"
        conn.execute(f"COPY ({SELECT.format(n=n)}) TO '{path}'")
        if not new:
            make_table(conn, t)
        conn.execute("BEGIN")
        if new:
            make_table(conn, t)
        conn.execute(LOADS[how].format(t=t, n=n, f=path))
        st = last_statement(conn)
        assert st["path"] == "direct", st
        if how.startswith("parallel"):
            assert st["parallel_workers"] > 0, st
        assert st["statistics"] == "gathered for 1 relation from 20000 sample rows", st
        conn.execute("COMMIT")
        got, got_rel = stats(conn, t), relstats(conn, t)
        names = [r[0] for r in got]
        assert "nostats" not in names and "dropped" not in names
        assert len([x for x in names if not x.startswith(("index ", "ls_"))]) == 11, names
        assert len([x for x in names if x.startswith("index ")]) == 2, names  # the expressions
        assert [x for x in names if x.startswith("ls_")] == [f"{t}_ext"], names
        assert got_rel[1] == n and got_rel[0] > 0
        assert got_rel[3:] != () and all(r[1] > 0 for r in got_rel[3:]), got_rel
        assert got_rel[2] == (got_rel[0] if new else 0), got_rel
        assert dict(r[:2] for r in got)["fixed_nd"]["n_distinct"] == 42
        want, want_rel = after_analyze(conn, t)
        assert got == want
        assert got_rel == want_rel
        conn.execute(f"DROP TABLE {t}")


def test_large_load_within_sampling_error(cluster):
    """400000 rows, a sample of 30000: close to ANALYZE's, and exact where a
    sample cannot differ (null fraction of a column without nulls, a unique
    column's n_distinct, a perfectly ordered column's correlation)."""
    n = 400000
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        make_table(conn, "ls_large")
        conn.execute(LOADS["insert"].format(t="ls_large", n=n))
        st = last_statement(conn)
        assert st["statistics"] == "gathered for 1 relation from 30000 sample rows", st
        got = {r[0]: r[1] for r in stats(conn, "ls_large")}
        assert relstats(conn, "ls_large")[1] == n
        want = {r[0]: r[1] for r in after_analyze(conn, "ls_large")[0]}
        assert got.keys() == want.keys()
        assert got["id"]["n_distinct"] == want["id"]["n_distinct"] == -1      # unique
        assert got["id"]["correlation"] == pytest.approx(1.0, abs=1e-6)     # loaded in id order
        assert got["grp"]["null_frac"] == 0
        assert got["grp"]["n_distinct"] == want["grp"]["n_distinct"] == 17
        assert got["sparse"]["null_frac"] == pytest.approx(0.9, abs=0.02)
        assert set(got["grp"]["most_common_vals"]) == set(want["grp"]["most_common_vals"])
        assert got["flag"]["most_common_freqs"] == pytest.approx(
            want["flag"]["most_common_freqs"], abs=0.02)
        conn.execute("DROP TABLE ls_large")


def test_partitioned_load_gathers_per_leaf(cluster):
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP TABLE IF EXISTS ls_part")
        conn.execute("CREATE TABLE ls_part (id int, grp int, name text) PARTITION BY HASH (id)")
        for i in range(3):
            conn.execute(f"CREATE TABLE ls_part_{i} PARTITION OF ls_part "
                         f"FOR VALUES WITH (MODULUS 3, REMAINDER {i})")
        conn.execute("/*+ APPEND */ INSERT INTO ls_part SELECT g, g % 17, 'n' || g "
                     "FROM generate_series(1, 30000) g")
        st = last_statement(conn)
        assert st["statistics"].startswith("gathered for 3 relations from "), st
        for i in range(3):
            got = stats(conn, f"ls_part_{i}")
            assert [r[0] for r in got] == ["grp", "id", "name"]
            want = after_analyze(conn, f"ls_part_{i}")[0]
            assert got == want
        assert stats(conn, "ls_part") == []     # the parent's are ANALYZE's to make
        conn.execute("DROP TABLE ls_part")


def rank_errors(conn, leaf):
    """For each histogram bound of the leaf's id column: the share of the
    leaf's rows at or below it, less the share a uniform sample puts it at
    (bound k of 100 at k/100)."""
    ids = [r[0] for r in conn.execute(f"SELECT id FROM {leaf} ORDER BY id")]
    bounds = conn.execute("SELECT histogram_bounds::text::int[] FROM pg_stats "
                          "WHERE tablename = %s AND attname = 'id'", (leaf,)).fetchone()[0]
    last = len(bounds) - 1
    return [bisect.bisect_right(ids, b) / len(ids) - k / last for k, b in enumerate(bounds)]


@pytest.mark.parametrize("kind", ["range", "hash"])
def test_many_partitions_share_the_sample(cluster, kind):
    """400000 rows into 8 empty partitions: the leaves share one sample's
    worth (3750 rows each, their part of 30000; not 8 x 30000), drawn
    uniformly from each leaf's rows whether they arrive leaf after leaf
    (range, in id order: each leaf's first rows came when the load was
    small) or spread over all leaves (hash); exact sizes in pg_class; and as
    the samples are smaller than ANALYZE's, the leaves stay counted as
    changed, for autovacuum to analyze."""
    n, parts = 400000, 8
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP TABLE IF EXISTS ls_sh")
        conn.execute(f"CREATE TABLE ls_sh (id int, grp int, name text) PARTITION BY {kind} (id)")
        for i in range(parts):
            bounds = (f"FROM ({i * n // parts + 1}) TO ({(i + 1) * n // parts + 1})"
                      if kind == "range" else f"WITH (MODULUS {parts}, REMAINDER {i})")
            conn.execute(f"CREATE TABLE ls_sh_{i} PARTITION OF ls_sh FOR VALUES {bounds}")
        conn.execute("/*+ APPEND */ INSERT INTO ls_sh SELECT g, g % 17, 'n' || g "
                     f"FROM generate_series(1, {n}) g")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        got = re.fullmatch(rf"gathered for {parts} relations from (\d+) sample rows "
                           rf"\(reduced for {parts}: autovacuum analyzes them again\); "
                           "the partitioned table's own left to ANALYZE", st["statistics"])
        # each leaf's share rounded up
        assert got and 30000 <= int(got[1]) <= 30000 + parts, st
        for i in range(parts):
            leaf = f"ls_sh_{i}"
            rows = conn.execute(f"SELECT count(*) FROM {leaf}").fetchone()[0]
            assert relstats(conn, leaf)[1] == rows
            got = {r[0]: r[1] for r in stats(conn, leaf)}
            assert got["grp"]["n_distinct"] == 17 and got["grp"]["null_frac"] == 0, got["grp"]
            assert got["id"]["n_distinct"] == -1, got["id"]
            errors = rank_errors(conn, leaf)
            assert len(errors) == 101
            # a bound of a 3750-row sample strays about 0.008 (one standard
            # deviation at the median), and the mean of the 101 errors about
            # 0.0045 (sqrt(1 / (12 * 3750)), as a simulation of uniform
            # samples confirms): the bounds below are 5.6 standard deviations
            # or more, so that 16 leaves a run, four majors a CI run, do not
            # fail by chance (0.015 did, once); a sample leaning to the leaf's
            # first or last rows moves all of them one way, by far more
            assert max(abs(e) for e in errors) < 0.045, (leaf, errors)
            assert abs(sum(errors) / len(errors)) < 0.025, (leaf, errors)
            assert analyzed_counters(conn, leaf) == (rows, rows, 0)
        conn.execute("DROP TABLE ls_sh")


def test_not_gathered_and_why(cluster):
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP TABLE IF EXISTS ls_why")
        conn.execute("CREATE TABLE ls_why (a int, b text)")
        conn.execute("SET directpath.load_statistics = off")
        conn.execute("/*+ APPEND */ INSERT INTO ls_why SELECT g, 'b' FROM generate_series(1, 5000) g")
        st = last_statement(conn)
        assert st["path"] == "direct"
        assert st["statistics"] == "left to ANALYZE: directpath.load_statistics is off"
        assert stats(conn, "ls_why") == []
        conn.execute("RESET directpath.load_statistics")
        conn.execute("/*+ APPEND */ INSERT INTO ls_why SELECT g, 'b' FROM generate_series(1, 5000) g")
        assert last_statement(conn)["statistics"] == "left to ANALYZE: the table was not empty"
        assert stats(conn, "ls_why") == []

        # rolled back: nothing stays
        conn.execute("TRUNCATE ls_why")
        conn.execute("BEGIN")
        conn.execute("/*+ APPEND */ INSERT INTO ls_why SELECT g, 'b' FROM generate_series(1, 5000) g")
        assert last_statement(conn)["statistics"].startswith("gathered")
        assert len(stats(conn, "ls_why")) == 2
        conn.execute("ROLLBACK")
        assert stats(conn, "ls_why") == []

        # EXPLAIN ANALYZE says it
        conn.execute("TRUNCATE ls_why")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) /*+ APPEND */ "
            "INSERT INTO ls_why SELECT g, 'b' FROM generate_series(1, 5000) g"))
        assert "Statistics: gathered for 1 relation from 5000 sample rows" in plan, plan
        conn.execute("DROP TABLE ls_why")


def test_user_who_may_not_analyze(cluster):
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP TABLE IF EXISTS ls_priv")
        conn.execute("DROP ROLE IF EXISTS ls_loader")
        conn.execute("CREATE ROLE ls_loader")
        conn.execute("CREATE TABLE ls_priv (a int)")
        conn.execute("GRANT INSERT ON ls_priv TO ls_loader")
        conn.execute("SET ROLE ls_loader")
        conn.execute("/*+ APPEND */ INSERT INTO ls_priv SELECT generate_series(1, 5000)")
        st = last_statement(conn)
        conn.execute("RESET ROLE")
        assert st["path"] == "direct", st
        assert st["statistics"] == "left to ANALYZE: the user may not ANALYZE the table", st
        assert stats(conn, "ls_priv") == []
        conn.execute("DROP TABLE ls_priv")
        conn.execute("DROP ROLE ls_loader")


def test_create_table_as_is_born_with_statistics(cluster):
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP TABLE IF EXISTS ls_ctas")
        conn.execute("SET directpath.mode = always")
        conn.execute("CREATE TABLE ls_ctas AS SELECT g AS id, g % 17 AS grp "
                     "FROM generate_series(1, 20000) g")
        st = last_statement(conn)
        conn.execute("RESET directpath.mode")
        assert st["path"] == "direct", st
        assert st["statistics"] == "gathered for 1 relation from 20000 sample rows", st
        got, got_rel = stats(conn, "ls_ctas"), relstats(conn, "ls_ctas")
        assert after_analyze(conn, "ls_ctas") == (got, got_rel)
        conn.execute("DROP TABLE ls_ctas")


def estimate(conn, where):
    plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM ls_est WHERE {where}").fetchone()[0]
    return plan[0]["Plan"]["Plan Rows"]


def test_estimates_right_after_a_load(cluster):
    """The planner's row estimates after a load, without ANALYZE, are within
    a small factor of the actual counts (before: the defaults)."""
    preds = ["grp = 3", "grp < 5", "id < 1000", "id BETWEEN 5000 AND 6000", "flag",
             "sparse IS NULL", "name = 'name 7'", "ts < '2026-01-01 10:00+00'"]
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        make_table(conn, "ls_est")
        conn.execute(LOADS["insert"].format(t="ls_est", n=200000))
        for p in preds:
            actual = conn.execute(f"SELECT count(*) FROM ls_est WHERE {p}").fetchone()[0]
            est = estimate(conn, p)
            q = max(est, actual) / max(min(est, actual), 1)
            assert q < 1.5, (p, est, actual)
        conn.execute("DROP TABLE ls_est")


def test_materialized_views_are_born_with_statistics(cluster):
    """CREATE MATERIALIZED VIEW and REFRESH (its new heap's statistics stored
    as the view's): pg_stats and pg_class as ANALYZE of the view leaves them."""
    q = "SELECT g AS id, g % 17 AS grp, 'n' || (g % 300) AS name FROM generate_series(1, 20000) g"
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP MATERIALIZED VIEW IF EXISTS ls_mv")
        conn.execute(f"/*+ APPEND */ CREATE MATERIALIZED VIEW ls_mv AS {q}")
        st = last_statement(conn)
        assert st["statistics"] == "gathered for 1 relation from 20000 sample rows", st
        got = (stats(conn, "ls_mv"), relstats(conn, "ls_mv"))
        assert len(got[0]) == 3
        assert after_analyze(conn, "ls_mv") == got

        conn.execute("DROP MATERIALIZED VIEW ls_mv")
        conn.execute(f"CREATE MATERIALIZED VIEW ls_mv AS {q} WITH NO DATA")
        conn.execute("ALTER MATERIALIZED VIEW ls_mv ALTER grp SET STATISTICS 0")
        conn.execute("/*+ APPEND */ REFRESH MATERIALIZED VIEW ls_mv")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert st["statistics"] == "gathered for 1 relation from 20000 sample rows", st
        got = (stats(conn, "ls_mv"), relstats(conn, "ls_mv"))
        assert [r[0] for r in got[0]] == ["id", "name"]     # the view's target kept grp out
        assert got[1][1] == 20000
        assert after_analyze(conn, "ls_mv") == got
        conn.execute("DROP MATERIALIZED VIEW ls_mv")


def test_append_brings_the_size_up_to_date(cluster):
    """A load into a table with rows (sized by an earlier ANALYZE) adds its
    rows to reltuples and sets relpages to the table's blocks; the column
    statistics stay ANALYZE's."""
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP TABLE IF EXISTS ls_app")
        conn.execute("CREATE TABLE ls_app (a int, b text)")
        conn.execute("INSERT INTO ls_app SELECT g, 'old' FROM generate_series(1, 1000) g")
        conn.execute("ANALYZE ls_app")
        before = stats(conn, "ls_app")
        assert relstats(conn, "ls_app")[1] == 1000
        conn.execute("/*+ APPEND */ INSERT INTO ls_app SELECT g, 'new' FROM generate_series(1, 7000) g")
        st = last_statement(conn)
        assert st["path"] == "direct", st
        assert st["statistics"] == ("left to ANALYZE: the table was not empty "
                                    "(its size in pg_class updated)"), st
        pages, tuples, _ = relstats(conn, "ls_app")
        blocks = conn.execute("SELECT pg_relation_size('ls_app') / "
                              "current_setting('block_size')::int").fetchone()[0]
        assert (pages, tuples) == (blocks, 8000)
        assert stats(conn, "ls_app") == before
        # never sized: left alone
        conn.execute("DROP TABLE ls_app")
        conn.execute("CREATE TABLE ls_app (a int, b text)")
        conn.execute("INSERT INTO ls_app SELECT g, 'old' FROM generate_series(1, 1000) g")
        conn.execute("/*+ APPEND */ INSERT INTO ls_app SELECT g, 'new' FROM generate_series(1, 7000) g")
        assert last_statement(conn)["statistics"] == "left to ANALYZE: the table was not empty"
        assert relstats(conn, "ls_app")[1] == -1
        conn.execute("DROP TABLE ls_app")


def analyzed_counters(conn, table):
    """n_mod_since_analyze, n_live_tup and analyze_count of the table, after
    the loading session flushed its counters."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")
    conn.execute("SET stats_fetch_consistency = none")
    return conn.execute("SELECT n_mod_since_analyze, n_live_tup, analyze_count "
                        "FROM pg_stat_user_tables WHERE relid = %s::regclass",
                        (table,)).fetchone()


def test_autovacuum_does_not_analyze_again(cluster):
    """The rows a load stored statistics for are not changes since that
    analyze once the transaction commits (autovacuum would analyze the table
    again at once); rows inserted after it still are, and a store rolled
    back with its subtransaction takes nothing off."""
    with cluster.conn() as conn:
        conn.execute("SET directpath.min_bytes = 0")
        conn.execute("DROP TABLE IF EXISTS ls_av")
        conn.execute("/*+ APPEND */ CREATE TABLE ls_av AS "
                     "SELECT g AS id, g % 17 AS grp FROM generate_series(1, 20000) g")
        assert last_statement(conn)["statistics"].startswith("gathered"), last_statement(conn)
        assert analyzed_counters(conn, "ls_av") == (0, 20000, 1)

        conn.execute("DROP TABLE ls_av")
        with conn.transaction():
            conn.execute("CREATE TABLE ls_av (id int, grp int)")
            conn.execute("/*+ APPEND */ INSERT INTO ls_av "
                         "SELECT g, g % 17 FROM generate_series(1, 20000) g")
            assert last_statement(conn)["statistics"].startswith("gathered")
            conn.execute("INSERT INTO ls_av VALUES (1, 1), (2, 2), (3, 3)")
        assert analyzed_counters(conn, "ls_av") == (3, 20003, 1)

        conn.execute("DROP TABLE ls_av")
        with conn.transaction():
            conn.execute("CREATE TABLE ls_av (id int, grp int)")
            conn.execute("SAVEPOINT s")
            conn.execute("/*+ APPEND */ INSERT INTO ls_av "
                         "SELECT g, g % 17 FROM generate_series(1, 20000) g")
            assert last_statement(conn)["statistics"].startswith("gathered")
            conn.execute("ROLLBACK TO s")
            conn.execute("INSERT INTO ls_av VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)")
        assert conn.execute("SELECT count(*) FROM pg_statistic "
                            "WHERE starelid = 'ls_av'::regclass").fetchone()[0] == 0
        assert analyzed_counters(conn, "ls_av")[0] == 5

        # a REFRESH counts its rows as the view's changes, as core's does
        conn.execute("DROP TABLE ls_av")
        conn.execute("CREATE MATERIALIZED VIEW ls_av AS SELECT g AS id "
                     "FROM generate_series(1, 20000) g WITH NO DATA")
        conn.execute("/*+ APPEND */ REFRESH MATERIALIZED VIEW ls_av")
        assert last_statement(conn)["statistics"].startswith("gathered")
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")
        conn.execute("SET stats_fetch_consistency = none")
        assert conn.execute("SELECT n_mod_since_analyze FROM pg_stat_all_tables "
                            "WHERE relid = 'ls_av'::regclass").fetchone()[0] == 0
        conn.execute("DROP MATERIALIZED VIEW ls_av")
