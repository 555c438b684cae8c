#!/usr/bin/env bash
# Where a COPY's time goes: perf profiles of one COPY per input shape, plain
# and direct serial, on a throwaway PostgreSQL 18 cluster.
#
#   bench/profile-copy.sh [--rows N] [--input seed|etl|wide] [--major M]
#                         [--set NAME=VALUE ...]
#
# Defaults: 1,000,000 rows of the ETL shape (timestamptz, int, numeric, md5
# text; csv), the shapes of bench scenario 12.  Needs perf (Debian's
# linux-perf) and root or kernel.perf_event_paranoid <= 1.  Prints, for the
# plain and the direct COPY, the functions with the most samples (self and
# with children) and writes perf.data files to a temporary directory that
# it names at the end.  --set adds a server setting (for instance
# --set directpath.copy_fast_input=off for the profile before fastin.c).  The server runs as the unprivileged user dptest
# when started as root, on a Unix socket in the temporary directory, and is
# stopped at exit.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

rows=1000000
input=etl
major=18
settings=()
while [ $# -gt 0 ]; do
	case "$1" in
	--rows) rows=$2; shift 2 ;;
	--input) input=$2; shift 2 ;;
	--major) major=$2; shift 2 ;;
	--set) settings+=("$2"); shift 2 ;;
	*) echo "usage: $0 [--rows N] [--input seed|etl|wide] [--major M] [--set NAME=VALUE]" >&2; exit 2 ;;
	esac
done
command -v perf >/dev/null || { echo "profile-copy.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }

# The shape's columns, the SELECT that makes its rows and COPY's options:
# the same as bench/dpbench/s12_parse.py's.
read -r columns select options < <(
	cd "$top/bench" && PYTHONPATH="$top" "$top/.venv/bin/python" -c "
import sys
from dpbench.s12_parse import INPUTS
i = INPUTS[sys.argv[1]]
print(i['columns'].replace(' ', '~'), i['select'].format(n=int(sys.argv[2])).replace(' ', '~'),
      (i['options'] or '~').replace(' ', '~'))" "$input" "$rows")
columns=${columns//\~/ }
select=${select//\~/ }
options=${options//\~/ }

"$top/scripts/provision.sh" "$major" >&2
bin="$top/.pg/$major/bin"
# built in a private copy of the sources (pgharness), not in the work tree
(cd "$top" && "$top/.venv/bin/python" -c "
import sys
from pathlib import Path
from pgharness.build import build_and_install
build_and_install(Path(sys.argv[1]), log=lambda m: print(m, file=sys.stderr))" "$bin")
chmod -R a+rX "$top/.pg/$major"

dp_server_user >/dev/null
work=$(mktemp -d /tmp/directpath-profile.XXXXXX)
chmod 755 "$work"
dp_user_dir "$work"
data="$work/data"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() { dp_as_user "$bin/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true; }
trap cleanup EXIT

dp_as_user "$bin/initdb" -D "$data" -U postgres >/dev/null
cat >>"$data/postgresql.conf" <<EOF
shared_preload_libraries = 'directpath'
listen_addresses = ''
unix_socket_directories = '$work'
port = $port
shared_buffers = 1GB
max_wal_size = 8GB
checkpoint_timeout = 1h
EOF
for s in "${settings[@]}"; do echo "${s%%=*} = '${s#*=}'" >>"$data/postgresql.conf"; done
dp_as_user "$bin/pg_ctl" -D "$data" -l "$work/server.log" -w start >/dev/null
psql() { dp_as_user "$bin/psql" -X -q -h "$work" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
psql -c "CREATE EXTENSION directpath"
file="$work/input.dat"
psql -c "COPY ($select) TO '$file'$options"
echo "profile-copy.sh: $rows rows of '$input', $(du -h "$file" | cut -f1) of input"

for how in plain direct; do
	hint=""
	[ $how = direct ] && hint="/*+ APPEND */ "
	psql -c "DROP TABLE IF EXISTS prof_t" -c "CREATE TABLE prof_t ($columns)" -c "CHECKPOINT"
	# one session: its backend pid first, then the COPY once perf is attached
	fifo="$work/fifo.$how"
	mkfifo "$fifo"
	chmod 666 "$fifo"
	(psql -At <"$fifo" >"$work/out.$how") &
	client=$!
	exec 3>"$fifo"
	echo "SELECT pg_backend_pid();" >&3
	for _ in $(seq 100); do [ -s "$work/out.$how" ] && break; sleep 0.1; done
	pid=$(head -n1 "$work/out.$how")
	perf record -q -g -o "$work/perf.$how.data" -p "$pid" 2>/dev/null &
	perfpid=$!
	sleep 1
	t0=$(date +%s.%N)
	echo "\\timing on" >&3
	echo "${hint}COPY prof_t FROM '$file'$options;" >&3
	echo "SELECT 'copy done';" >&3
	for _ in $(seq 6000); do grep -q '^copy done$' "$work/out.$how" && break; sleep 0.1; done
	kill -INT "$perfpid"
	wait "$perfpid" || true
	exec 3>&-
	wait "$client" || true
	echo
	echo "==== $how COPY: $(grep -m1 '^Time:' "$work/out.$how" || echo '?') ===="
	perf report -i "$work/perf.$how.data" --no-children --percent-limit 1.5 --stdio \
		--sort symbol 2>/dev/null | grep -E '^ +[0-9]' | head -n 25
	echo "---- with children ----"
	perf report -i "$work/perf.$how.data" --children --percent-limit 4 --stdio \
		--sort symbol 2>/dev/null | grep -E '^ +[0-9]' | head -n 25
done
echo
echo "profile-copy.sh: perf data in $work (perf report -i $work/perf.direct.data)"
trap - EXIT
cleanup
