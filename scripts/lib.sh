# Shell library of directpath's scripts: source it (". scripts/lib.sh"),
# or run "scripts/lib.sh FUNCTION [ARG ...]" to call one function (pgharness
# creates the server user that way).
#
#   top                     the repository root
#   dp_log MSG...           "<script>: MSG" on stdout
#   dp_traversable PATH     PATH and every directory above it searchable by others
#   dp_as_root              true when running as root
#   dp_server_user          as root: create $DP_TEST_USER (default dptest) if
#                           missing; prints its name
#   dp_as_user CMD...       CMD as the server user when root, else as is
#   dp_user_dir DIR         mkdir DIR, owned by the server user
#   dp_venv                 scripts/setup-python.sh, and the venv usable by
#                           the server user
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DP_TEST_USER=${DP_TEST_USER:-dptest}

dp_log() { echo "$(basename "$0"): $*"; }

dp_traversable() {
	local d=$1
	while [ -n "$d" ] && [ "$d" != "/" ]; do
		chmod a+x "$d" 2>/dev/null || true
		d=$(dirname "$d")
	done
}

dp_as_root() { [ "$(id -u)" -eq 0 ]; }

dp_server_user() {
	if dp_as_root && ! id -u "$DP_TEST_USER" >/dev/null 2>&1; then
		dp_log "creating system user $DP_TEST_USER" >&2
		useradd -r -m -s /bin/bash "$DP_TEST_USER"
	fi
	echo "$DP_TEST_USER"
}

dp_as_user() {
	if dp_as_root; then
		local home
		home=$(getent passwd "$DP_TEST_USER" | cut -d: -f6)
		[ -d "$home" ] || home=${TMPDIR:-/tmp}
		runuser -u "$DP_TEST_USER" -- env HOME="$home" USER="$DP_TEST_USER" \
			LOGNAME="$DP_TEST_USER" PATH="$PATH" "$@"
	else
		"$@"
	fi
}

dp_user_dir() {
	mkdir -p "$1"
	if dp_as_root; then chown "$DP_TEST_USER" "$1"; fi
}

dp_venv() {
	"$top/scripts/setup-python.sh" || return 1
	dp_as_root || return 0
	local venv=$top/.venv p
	chmod -R a+rX "$venv"
	# The venv's interpreter lives in its base installation (which may be
	# under /root, e.g. pyenv): the server user has to reach it.
	for p in "$(readlink -f "$venv/bin/python")" \
		"$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')"; do
		dp_traversable "$p"
	done
}

# Executed rather than sourced: call the function named by the first argument.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	"$@"
fi
