#!/usr/bin/env bash
# The distro-built target: Debian 12's postgresql-15 (as root: installed
# with apt; otherwise it must be installed already).  Builds directpath
# from a copy of the tree against Debian's pg_config, installs it there and
# runs the pg_regress suites on a temporary instance as an unprivileged user.
#
#   scripts/test-distro.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pgc=/usr/lib/postgresql/15/bin/pg_config

if dp_as_root; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		postgresql-15 postgresql-server-dev-15 >/dev/null
	dp_server_user >/dev/null
fi
[ -x "$pgc" ] || { dp_log "$pgc not found (apt-get install postgresql-server-dev-15)"; exit 1; }

work=$(mktemp -d /tmp/directpath-distro.XXXXXX)
trap '[ "${DP_KEEP_WORK:-0}" = 1 ] || rm -rf "$work"' EXIT
(cd "$top" && tar cf - --exclude='*.o' --exclude='*.so' --exclude='*.bc' Makefile directpath.control directpath--*.sql src sql expected test) | tar xf - -C "$work"
make -s -C "$work" PG_CONFIG="$pgc" >/dev/null
make -s -C "$work" PG_CONFIG="$pgc" install >/dev/null
dp_as_root && chown -R "$DP_TEST_USER" "$work"
dp_as_user make -s -C "$work" PG_CONFIG="$pgc" installcheck || {
	cat "$work/regression.diffs" 2>/dev/null; exit 1; }
dp_log "Debian $("$pgc" --version) ok"
