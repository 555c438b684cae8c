#!/usr/bin/env bash
# The distro-built target: Debian 12's postgresql-15 (as root: installed
# with apt; otherwise it must be installed already).  Builds directpath
# from a copy of the tree against Debian's pg_config, installs it there and
# runs the pg_regress suites on a temporary instance as an unprivileged user.
#
#   scripts/test-distro.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
pgc=/usr/lib/postgresql/15/bin/pg_config
test_user=${DP_TEST_USER:-dptest}

if [ "$(id -u)" -eq 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		postgresql-15 postgresql-server-dev-15 >/dev/null
	id -u "$test_user" >/dev/null 2>&1 || useradd -r -m -s /bin/bash "$test_user"
fi
[ -x "$pgc" ] || { echo "test-distro: $pgc not found (apt-get install postgresql-server-dev-15)"; exit 1; }

work=$(mktemp -d /tmp/directpath-distro.XXXXXX)
trap '[ "${DP_KEEP_WORK:-0}" = 1 ] || rm -rf "$work"' EXIT
(cd "$top" && tar cf - --exclude='*.o' --exclude='*.so' --exclude='*.bc' Makefile directpath.control directpath--*.sql src sql expected test) | tar xf - -C "$work"
make -s -C "$work" PG_CONFIG="$pgc" >/dev/null
make -s -C "$work" PG_CONFIG="$pgc" install >/dev/null
if [ "$(id -u)" -eq 0 ]; then
	chown -R "$test_user" "$work"
	runuser -u "$test_user" -- make -s -C "$work" PG_CONFIG="$pgc" installcheck || {
		cat "$work/regression.diffs" 2>/dev/null; exit 1; }
else
	make -s -C "$work" PG_CONFIG="$pgc" installcheck || {
		cat "$work/regression.diffs" 2>/dev/null; exit 1; }
fi
echo "test-distro: Debian $("$pgc" --version) ok"
