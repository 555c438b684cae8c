#!/usr/bin/env bash
# The Debian package, tested as installed (as root: it installs packages).
#
#   1. apt-get build-dep for debian/control (only when dpkg-checkbuilddeps
#      says something is missing), in a scratch copy of the tree under /tmp;
#   2. dpkg-buildpackage -us -uc -b there (debian/rules: pg_buildext, with
#      PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config);
#   3. apt-get install of postgresql-15-directpath_<version>_<arch>.deb, and
#      the files it owns (dpkg -L) where Debian's pg_config says they go,
#      unchanged (dpkg --verify);
#   4. the pg_regress suites (the Makefile's REGRESS) on Debian's PostgreSQL
#      15 as the server user: "make installcheck", so pg_regress starts a
#      throwaway instance (--temp-instance, --temp-config=tests/regress.conf)
#      from /usr/lib/postgresql/15/bin that loads the package's library;
#   5. on a server of its own (temporary directory, Unix socket only, the
#      library preloaded and tests/regress.conf's settings): CREATE EXTENSION,
#      ALTER EXTENSION ... UPDATE, extversion = default_version, a direct path
#      INSERT, and each update path pg_extension_update_paths() knows.
#
# This is the distro-built target: the extension built by Debian's own
# toolchain against Debian's postgresql-15, and what runs is what the package
# installed.  Ends with "test-package: N passed, N failed".
#
#   scripts/test-package.sh          DP_KEEP_WORK=1 keeps the scratch directory
set -euo pipefail
. "$(dirname "$0")/lib.sh"
major=15
pkg=postgresql-$major-directpath
bindir=/usr/lib/postgresql/$major/bin
pgc=$bindir/pg_config
ext=directpath

dp_as_root || { dp_log "run as root (installs the build dependencies and the package)"; exit 1; }
dp_server_user >/dev/null
export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -q -o DPkg::Lock::Timeout=600 "$@"; }

passed=0 failed=0
pass() { passed=$((passed + 1)); dp_log "ok      $*"; }
fail() { failed=$((failed + 1)); dp_log "FAILED  $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
summary() { echo "test-package: $passed passed, $failed failed"; }
phase() { dp_log "--- $* (${SECONDS}s)"; }

work=$(mktemp -d /tmp/directpath-package.XXXXXX)
chmod 755 "$work"
cd "$work"
data=$work/server/data sock=$work/socket
cleanup() {
	local pid
	if [ -f "$data/postmaster.pid" ]; then
		pid=$(head -1 "$data/postmaster.pid")
		dp_as_user "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 ||
			kill "$pid" 2>/dev/null || true
	fi
	[ "${DP_KEEP_WORK:-0}" = 1 ] && dp_log "kept $work" || rm -rf "$work"
}
trap cleanup EXIT

# -- 1. build dependencies, in a copy of the tree ----------------------------
version=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$top/debian/changelog")
src=$work/$ext-$version
mkdir "$src"
tar -C "$top" -cf - --exclude=./.git --exclude=./.pg --exclude=./.venv \
	--exclude=./.cache --exclude=./results --exclude=./tmp_check \
	--exclude=./log --exclude=./bench/results --exclude='./build-*' \
	--exclude='*.o' --exclude='*.so' --exclude='*.bc' \
	--exclude=__pycache__ --exclude=.pytest_cache \
	--exclude=./regression.diffs --exclude=./regression.out . | tar -xf - -C "$src"

phase "build dependencies"
if ! (cd "$src" && dpkg-checkbuilddeps) >/dev/null 2>&1; then
	apt_get update >/dev/null
	apt_get build-dep -y --no-install-recommends "$src" >/dev/null
fi
(cd "$src" && dpkg-checkbuilddeps)

# -- 2. the package ----------------------------------------------------------
phase "dpkg-buildpackage -us -uc -b"
if ! (cd "$src" && dpkg-buildpackage -us -uc -b -jauto) >"$work/build.log" 2>&1; then
	tail -n 60 "$work/build.log"
	fail "dpkg-buildpackage (log above)"; summary; exit 1
fi
deb=$work/${pkg}_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || { ls "$work"; fail "built $deb"; summary; exit 1; }
pass "dpkg-buildpackage: $(basename "$deb")"

# -- 3. installed, and where the files are -----------------------------------
phase "install $(basename "$deb")"
# --reinstall: the same version may be installed already, and files that a
# plain "make install" wrote over since.
apt_get install -y --reinstall --no-install-recommends "$deb" >/dev/null
check "dpkg: $pkg $version installed" \
	test "$(dpkg-query -W -f '${Status} ${Version}' "$pkg")" = "install ok installed $version"
owned=$(dpkg -L "$pkg")
want=("$("$pgc" --pkglibdir)/$ext.so" "$("$pgc" --sharedir)/extension/$ext.control")
for f in "$src/$ext"--*.sql; do
	want+=("$("$pgc" --sharedir)/extension/$(basename "$f")")
done
for f in "${want[@]}"; do
	check "dpkg -L $pkg: $f" eval 'grep -qxF "$f" <<<"$owned" && [ -s "$f" ]'
done
check "dpkg --verify $pkg (files as packaged)" eval '[ -z "$(dpkg --verify "$pkg")" ]'

# -- 4. the suites, on Debian's server with the package's library ------------
regress=$(make -s -C "$src" -f Makefile -f - PG_CONFIG="$pgc" dp-print-regress \
	<<<'dp-print-regress: ; @echo $(REGRESS)')
phase "pg_regress: $regress"
chown -R "$DP_TEST_USER" "$src"
rc=0 bad=0
dp_as_user make -C "$src" PG_CONFIG="$pgc" installcheck >"$work/regress.log" 2>&1 || rc=$?
cat "$work/regress.log"
for t in $regress; do
	# pg_regress 15: "test NAME ... ok"; 16 and later (TAP): "ok N - NAME"
	if grep -Eq "^(test +)?$t +\.\.\. +ok|^ok +[0-9]+ +[-+] +$t( |$)" "$work/regress.log"; then
		pass "pg_regress $t"
	else
		fail "pg_regress $t"; bad=1
	fi
done
if [ "$rc" -ne 0 ]; then
	cat "$src/regression.diffs" 2>/dev/null || true
	[ "$bad" = 1 ] || fail "make installcheck exited $rc"
fi

# -- 5. CREATE EXTENSION and ALTER EXTENSION UPDATE on a server of its own ----
phase "server: CREATE EXTENSION, ALTER EXTENSION UPDATE"
dp_user_dir "$work/server"
dp_user_dir "$sock"
chmod 700 "$sock"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dp_as_user "$bindir/initdb" -D "$data" -A trust --no-sync >"$work/initdb.log" 2>&1 ||
	{ cat "$work/initdb.log"; fail "initdb"; summary; exit 1; }
{
	echo "# scripts/test-package.sh"
	echo "port = $port"
	echo "listen_addresses = ''"
	echo "unix_socket_directories = '$sock'"
	echo "shared_preload_libraries = '$ext'"
	cat "$src/tests/regress.conf"
} >>"$data/postgresql.conf"
if ! dp_as_user "$bindir/pg_ctl" -D "$data" -l "$work/server/log" -w -t 60 start >/dev/null; then
	cat "$work/server/log"; fail "server start"; summary; exit 1
fi
dp_log "server pid $(head -1 "$data/postmaster.pid"), port $port, socket $sock"
sql() { # sql DATABASE STATEMENTS: the last statement's result, unaligned
	dp_as_user "$bindir/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -d "$1" -c "$2"
}
is() { # is WHAT EXPECTED DATABASE SQL
	local got
	if got=$(sql "$3" "$4" 2>"$work/sql.err") && [ "$got" = "$2" ]; then pass "$1"
	else fail "$1: got '$got', want '$2'"; cat "$work/sql.err"; fi
}
default=$(sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" "$src/$ext.control")
is "shared_preload_libraries" "$ext" postgres "SHOW shared_preload_libraries"
is "pg_available_extensions: $ext $default" "$default" postgres \
	"SELECT default_version FROM pg_available_extensions WHERE name = '$ext'"
sql postgres "CREATE DATABASE dp_upgrade" || fail "CREATE DATABASE dp_upgrade"
is "CREATE EXTENSION $ext" "$default" dp_upgrade \
	"CREATE EXTENSION $ext; SELECT extversion FROM pg_extension WHERE extname = '$ext'"
is "ALTER EXTENSION $ext UPDATE: extversion $default" "$default" dp_upgrade \
	"ALTER EXTENSION $ext UPDATE; SELECT extversion FROM pg_extension WHERE extname = '$ext'"
is "direct path INSERT with the package's library" "direct|1000" dp_upgrade \
	"SET directpath.min_bytes = 0; CREATE TABLE t (a int, b text);
	 /*+ APPEND */ INSERT INTO t SELECT g, 'x' FROM generate_series(1, 1000) g;
	 SELECT path, (SELECT count(*) FROM t) FROM $ext.last_statement()"
# Every older version with an update path to the default (none while 0.1 is
# the only version): installed at it, then ALTER EXTENSION UPDATE.
for from in $(sql postgres "SELECT source FROM pg_extension_update_paths('$ext')
		WHERE target = '$default' AND path IS NOT NULL ORDER BY source"); do
	db=dp_from_$(tr -c 'a-zA-Z0-9\n' _ <<<"$from")
	sql postgres "CREATE DATABASE $db" || fail "CREATE DATABASE $db"
	is "CREATE EXTENSION $ext VERSION '$from'; ALTER EXTENSION $ext UPDATE" "$default" "$db" \
		"CREATE EXTENSION $ext VERSION '$from'; ALTER EXTENSION $ext UPDATE;
		 SELECT extversion FROM pg_extension WHERE extname = '$ext'"
done
dp_as_user "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null && pass "server stop"

phase "done"
summary
[ "$failed" -eq 0 ]
