"""Privileges and security around direct path loads: what a role may do on
the direct path is exactly what it may do with a plain INSERT.

Roles (cluster-wide, made by the module fixture):
  dp_loader  LOGIN, no superuser; privileges granted per test
  dp_owner   LOGIN, owns the SECURITY DEFINER case's table and function
  dp_nopriv  LOGIN, SELECT at most
"""

import time

import psycopg
import pytest

from conftest import (SMALL_BATCHES, TABLE_COLUMNS, Background, connect_as,
                      last_statement, seed_insert, set_gucs, table_digest,
                      verify_table)

pytestmark = [pytest.mark.directpath, pytest.mark.reliability]

N = 20_000
HINT = "/*+ APPEND */ "


@pytest.fixture(scope="module")
def roles(cluster):
    with cluster.conn() as conn:
        for r in ("dp_loader", "dp_owner", "dp_nopriv"):
            conn.execute(f"DROP ROLE IF EXISTS {r}")
            conn.execute(f"CREATE ROLE {r} LOGIN")
        conn.execute("GRANT CREATE ON SCHEMA public TO dp_owner")
    return cluster


def fresh_table(conn, t, ddl=TABLE_COLUMNS, owner=None):
    conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
    conn.execute(f"CREATE TABLE {t} {ddl}")
    if owner:
        conn.execute(f"ALTER TABLE {t} OWNER TO {owner}")


def as_role(cluster, role, autocommit=True):
    c = connect_as(cluster, role, autocommit=autocommit)
    set_gucs(c, SMALL_BATCHES)
    return c


def outcome(conn, sql):
    try:
        conn.execute(sql)
        return None
    except psycopg.Error as e:
        if not conn.autocommit:
            conn.rollback()
        return e.sqlstate


def test_nonsuperuser_with_insert_privilege_uses_direct_path(roles):
    c = roles
    with c.conn() as conn:
        fresh_table(conn, "sec_ins")
        conn.execute("CREATE INDEX ON sec_ins (indid)")
        conn.execute("GRANT INSERT, TRUNCATE ON sec_ins TO dp_loader")
        fresh_table(conn, "sec_ins_ref")
        conn.execute(seed_insert("sec_ins_ref", 2 * N, hint=False))
    with as_role(c, "dp_loader") as ld:
        assert ld.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                          ).fetchone() == (False,)
        ld.execute(seed_insert("sec_ins", N))
        st = last_statement(ld)
        assert st["path"] == "direct" and st["rows_inserted"] == N, st
        # INSERT privilege only: no SELECT on the table, yet a frozen load
        # into the storage the role truncated in its transaction.
        ld.execute("BEGIN")
        ld.execute("TRUNCATE sec_ins")
        ld.execute(seed_insert("sec_ins", 2 * N))
        st = last_statement(ld)
        ld.execute("COMMIT")
        assert st["path"] == "direct" and st["frozen"] is True, st
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            ld.execute("SELECT count(*) FROM sec_ins")
    with c.conn() as conn:
        assert table_digest(conn, "sec_ins") == table_digest(conn, "sec_ins_ref")
        verify_table(conn, "sec_ins", frozen_expected=True)


def test_no_privilege_same_error_as_plain(roles):
    c = roles
    with c.conn() as conn:
        fresh_table(conn, "sec_nop")
        conn.execute("GRANT SELECT ON sec_nop TO dp_nopriv")
        conn.execute(seed_insert("sec_nop", 100, hint=False))
        before = table_digest(conn, "sec_nop")
    with as_role(c, "dp_nopriv") as x:
        plain = outcome(x, seed_insert("sec_nop", N, hint=False))
        direct = outcome(x, seed_insert("sec_nop", N))
        trunc = outcome(x, "TRUNCATE sec_nop")
    assert plain == direct == trunc == "42501", (plain, direct, trunc)
    with c.conn() as conn:
        assert table_digest(conn, "sec_nop") == before
        verify_table(conn, "sec_nop")


def test_no_privilege_takes_no_strong_lock(roles):
    c = roles
    with c.conn() as conn:
        fresh_table(conn, "sec_lock")
        conn.execute("GRANT SELECT ON sec_lock TO dp_nopriv")
    writer = c.conn(autocommit=False)
    res = {}
    try:
        writer.execute("INSERT INTO sec_lock VALUES (1, 1, 1, 1)")      # RowExclusive, open
        for mode, hint in (("plain", False), ("direct", True)):
            x = as_role(c, "dp_nopriv")
            try:
                x.execute("SET lock_timeout = '1s'")
                res[mode] = outcome(x, seed_insert("sec_lock", N, hint=hint))
            finally:
                x.close()
        # While an unprivileged hinted INSERT waits, other writers are not
        # held up (they only need RowExclusiveLock).
        with Background(c, seed_insert("sec_lock", N), SMALL_BATCHES, user="dp_nopriv",
                        name="unprivileged") as bad, \
                Background(c, ["SET lock_timeout = '3s'", "INSERT INTO sec_lock VALUES (2, 2, 2, 2)"],
                           name="writer2") as w2:
            bad.start()
            time.sleep(0.5)
            w2.start()
            w2.join(30)
            res["writer2"] = w2.sqlstate
            writer.rollback()
            bad.join(30)
            res["unprivileged-after"] = bad.sqlstate
    finally:
        writer.close()
    assert res == {"plain": "42501", "direct": "42501", "writer2": None,
                   "unprivileged-after": "42501"}, res


def test_rls_with_check_same_as_plain(roles):
    c = roles
    results = {}
    for mode in ("plain", "direct"):
        t = f"sec_rls_{mode}"
        with c.conn() as conn:
            fresh_table(conn, t)
            conn.execute(f"GRANT SELECT, INSERT, TRUNCATE ON {t} TO dp_loader")
            conn.execute(f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY")
            conn.execute(f"CREATE POLICY sel ON {t} FOR SELECT USING (true)")
            conn.execute(f"CREATE POLICY ins ON {t} FOR INSERT WITH CHECK (value < 15000)")
            # a policy reading the target: the statement's own rows must stay
            # invisible to it (here: "no earlier row has value = value - 1")
            conn.execute(f"CREATE POLICY ins2 ON {t} AS RESTRICTIVE FOR INSERT WITH CHECK "
                         f"(NOT EXISTS (SELECT 1 FROM {t} x WHERE x.value = {t}.value - 1))")
        hint = mode == "direct"
        with as_role(c, "dp_loader") as ld:
            r = []
            r.append(outcome(ld, seed_insert(t, N, hint=hint)))         # value 15000 fails
            r.append(outcome(ld, seed_insert(t, 10_000, hint=hint)))    # passes
            if hint:
                st = last_statement(ld)
                assert st["path"] == "direct", st
            r.append(outcome(ld, seed_insert(t, 14_000, start=12_000, hint=hint)))
            ld.execute("BEGIN")
            ld.execute(f"TRUNCATE {t}")
            r.append(outcome(ld, seed_insert(t, 12_000, hint=hint)))    # frozen? still invisible
            if hint:
                st = last_statement(ld)
                assert st["path"] == "direct", st
            ld.execute("COMMIT")
            r.append(ld.execute(f"SELECT count(*), sum(value::bigint) FROM {t}").fetchone())
            results[mode] = r
        with c.conn() as conn:
            verify_table(conn, t)
    assert results["plain"][:2] == ["42501", None], results
    assert results["direct"] == results["plain"], results


def test_column_privileges(roles):
    c = roles
    results = {}
    for mode in ("plain", "direct"):
        t = f"sec_col_{mode}"
        with c.conn() as conn:
            fresh_table(conn, t, "(timeid int, insid int, indid int, value int DEFAULT -1)")
            conn.execute(f"GRANT INSERT (timeid, insid, indid) ON {t} TO dp_loader")
        hint = HINT if mode == "direct" else ""
        with as_role(c, "dp_loader") as ld:
            ok = outcome(ld, f"{hint}INSERT INTO {t} (timeid, insid, indid) "
                             f"SELECT g % 50, g % 10000, g FROM generate_series(1, {N}) g")
            if mode == "direct":
                st = last_statement(ld)
                assert st["path"] == "direct" and st["rows_inserted"] == N, st
            bad = outcome(ld, f"{hint}INSERT INTO {t} SELECT g % 50, g % 10000, g, g "
                              f"FROM generate_series(1, {N}) g")
            bad2 = outcome(ld, f"{hint}INSERT INTO {t} (indid, value) "
                               f"SELECT g, g FROM generate_series(1, {N}) g")
            results[mode] = (ok, bad, bad2)
        with c.conn() as conn:
            results[mode] += (table_digest(conn, t)[0],
                              conn.execute(f"SELECT count(*) FROM {t} WHERE value = -1"
                                           ).fetchone()[0])
            verify_table(conn, t)
    assert results["plain"] == (None, "42501", "42501", N, N), results
    assert results["direct"] == results["plain"], results


def test_security_definer_function(roles):
    """A SECURITY DEFINER function loads with its owner's rights: into the
    owner's table (the caller has no privilege on it), not into a table the
    owner may not write."""
    c = roles
    with c.conn() as conn:
        for t in ("sd_own", "sd_other"):
            conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute("DROP FUNCTION IF EXISTS sd_load(text, bool)")
        conn.execute("CREATE TABLE sd_other (a int, who text)")
        conn.execute("GRANT SELECT ON sd_other TO dp_owner")
    with as_role(c, "dp_owner") as ow:
        ow.execute("CREATE TABLE sd_own (a int, who text)")
        ow.execute("""
            CREATE FUNCTION sd_load(target text, hint bool) RETURNS bigint
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
            DECLARE n bigint;
            BEGIN
                EXECUTE format('INSERT %s INTO %I SELECT g, current_user::text '
                               'FROM generate_series(1, 20000) g',
                               CASE WHEN hint THEN '/*+ APPEND */' ELSE '' END, target);
                GET DIAGNOSTICS n = ROW_COUNT;
                RETURN n;
            END $$""")
        ow.execute("REVOKE ALL ON FUNCTION sd_load(text, bool) FROM PUBLIC")
        ow.execute("GRANT EXECUTE ON FUNCTION sd_load(text, bool) TO dp_loader")
    results = {}
    with as_role(c, "dp_loader") as ld:
        # no privilege of its own on the owner's table
        assert outcome(ld, HINT + "INSERT INTO sd_own SELECT g, 'x' "
                               "FROM generate_series(1, 20000) g") == "42501"
        for hint in (False, True):
            r = []
            r.append(ld.execute("SELECT sd_load('sd_own', %s)", (hint,)).fetchone()[0])
            if hint:
                st = last_statement(ld)
                assert st["path"] == "direct" and st["rows_inserted"] == N, st
            r.append(outcome(ld, f"SELECT sd_load('sd_other', {hint})"))
            # the definer's rights do not include the test-only settings
            r.append(outcome(ld, "SELECT set_config('directpath.fault_point', 'finish', false)"))
            results[hint] = r
    assert results[False] == [N, "42501", "42501"], results
    assert results[True] == results[False], results
    with c.conn() as conn:
        assert conn.execute("SELECT who, count(*) FROM sd_own GROUP BY who").fetchall() == \
            [("dp_owner", 2 * N)]
        assert conn.execute("SELECT count(*) FROM sd_other").fetchone()[0] == 0
        verify_table(conn, "sd_own")


EVIL_FUNCS = [
    # name(args) returns            (user functions named like built-ins)
    ("abs(integer)", "integer", "IMMUTABLE", "$1"),
    ("int4pl(integer, integer)", "integer", "IMMUTABLE", "$1 + $2"),
    ("hashtext(text)", "integer", "IMMUTABLE", "0"),
    ("lower(text)", "text", "IMMUTABLE", "$1"),
    ("now()", "timestamptz", "STABLE", "'2000-01-01'::timestamptz"),
    ("random()", "double precision", "VOLATILE", "(SELECT count(*) FROM public.sp_target)"),
    ("count_rows()", "bigint", "VOLATILE", "(SELECT count(*) FROM public.sp_target)"),
    ("pg_relation_size(regclass)", "bigint", "VOLATILE", "0"),
    ("nextval(regclass)", "bigint", "VOLATILE", "0"),
    ("txid_current()", "bigint", "VOLATILE", "0"),
]


def test_search_path_shadowing_like_plain(roles):
    """User functions in a schema ahead of pg_catalog on search_path named
    like built-ins: a hinted INSERT runs exactly what the plain INSERT runs
    (no more calls, no other results), and a volatile user function named
    like a built-in one does not pass for the built-in."""
    c = roles
    with c.conn() as conn:
        conn.execute("DROP SCHEMA IF EXISTS evil CASCADE")
        conn.execute("CREATE SCHEMA evil AUTHORIZATION dp_loader")
    with as_role(c, "dp_loader") as ev:
        for sig, ret, vol, body in EVIL_FUNCS:
            ev.execute(f"""
                CREATE FUNCTION evil.{sig} RETURNS {ret} LANGUAGE plpgsql {vol} AS $$
                BEGIN
                    RAISE NOTICE 'evil {sig.split('(')[0]} called';
                    RETURN {body};
                END $$""")
        ev.execute("CREATE FUNCTION evil.int4eq_evil(integer, integer) RETURNS boolean "
                   "LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RAISE NOTICE 'evil = called'; "
                   "RETURN $1 OPERATOR(pg_catalog.=) $2; END $$")
        ev.execute("CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, "
                   "FUNCTION = evil.int4eq_evil)")
    statements = [
        # nothing shadowed is named: only what a plain INSERT calls may run
        "{hint}INSERT INTO {t} SELECT g % 50, g % 10000, g, g FROM generate_series(1, 20000) g",
        # shadowed names used in the statement itself
        "{hint}INSERT INTO {t} SELECT abs(g) % 50, g % 10000, g, g "
        "FROM generate_series(1, 20000) g WHERE g % 1000 = 7 OR g > 15000",
        # volatile user functions reading the target (one shadows random()):
        # they see the rows the statement inserted so far, as with a plain
        # INSERT, so the load must not take the direct path
        "{hint}INSERT INTO {t} SELECT g % 50, random()::int, g, g FROM generate_series(1, 3000) g",
        "{hint}INSERT INTO {t} SELECT g % 50, count_rows(), g, g FROM generate_series(1, 3000) g",
    ]
    results = {}
    for mode in ("plain", "direct"):
        res = []
        with c.conn() as conn:
            for tt in ("sp_target", f"sp_{mode}"):
                fresh_table(conn, tt)
                conn.execute(f"CREATE INDEX ON {tt} (indid)")
                conn.execute(f"CREATE INDEX ON {tt} ((timeid + insid))")
                conn.execute(f"GRANT INSERT, SELECT, TRUNCATE ON {tt} TO dp_loader")
        with c.conn() as victim:
            notices = []
            victim.add_notice_handler(lambda d: notices.append(d.message_primary))
            set_gucs(victim, SMALL_BATCHES)
            victim.execute("SET directpath.fallback_message_level = debug")
            victim.execute("SET search_path = evil, pg_catalog, public")
            for i, s in enumerate(statements):
                t = "sp_target" if i >= 2 else f"sp_{mode}"
                del notices[:]
                for step in (["BEGIN", f"TRUNCATE {t}"] if i == 0 else []):
                    victim.execute(step)
                victim.execute(s.format(t=t, hint=HINT if mode == "direct" else ""))
                st = last_statement(victim) if mode == "direct" else None
                if i == 0:
                    victim.execute("COMMIT")
                calls = sorted(n for n in notices if n.startswith("evil"))
                res.append((calls[:3], len(calls),
                            table_digest(victim, t)))
                if mode == "direct":
                    if i < 2:
                        assert st["path"] == "direct", (s, st)
                    else:
                        # a volatile function that is not built in: normal path
                        assert st["path"] == "normal", (s, st)
        results[mode] = res
        with c.conn() as conn:
            verify_table(conn, f"sp_{mode}")
            verify_table(conn, "sp_target")
    assert results["plain"][0][1] == 0, results["plain"][0]
    # the shadowing functions do run where the statement names them
    assert results["plain"][1][0][:1] == ["evil = called"], results["plain"][1]
    assert results["plain"][2][1] == 3000 and results["plain"][3][1] == 3000, results["plain"]
    assert results["direct"] == results["plain"], results


def test_fault_settings_are_superuser_only(roles):
    c = roles
    gucs = {"directpath.fault_point": "finish", "directpath.fault_action": "sleep",
            "directpath.fault_hit": "2", "directpath.fault_sleep_ms": "1"}
    with as_role(c, "dp_loader") as ld:
        for k, v in gucs.items():
            assert outcome(ld, f"SET {k} = '{v}'") == "42501", k
            assert outcome(ld, f"SELECT set_config('{k}', '{v}', false)") == "42501", k
            assert outcome(ld, f"SET LOCAL {k} = '{v}'") == "42501", k
            assert outcome(ld, f"ALTER ROLE dp_loader SET {k} = '{v}'") == "42501", k
        # nothing was set
        for k in gucs:
            assert ld.execute("SELECT setting = boot_val FROM pg_settings WHERE name = %s",
                              (k,)).fetchone() == (True,), k
    # not at connection time either
    with pytest.raises(psycopg.OperationalError, match="permission denied"):
        connect_as(c, "dp_loader", options="-c directpath.fault_point=finish").close()
    # and a superuser's setting is not inherited by a role's function
    with c.conn() as conn:
        conn.execute("DROP FUNCTION IF EXISTS f_fault()")
        conn.execute("CREATE FUNCTION f_fault() RETURNS void LANGUAGE sql "
                     "AS $$ SELECT set_config('directpath.fault_point', 'finish', false) $$")
        conn.execute("ALTER FUNCTION f_fault() OWNER TO dp_loader")
    with as_role(c, "dp_loader") as ld:
        assert outcome(ld, "SELECT f_fault()") == "42501"
