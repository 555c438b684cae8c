#!/usr/bin/env bash
# The main job, end to end, on the embedded PostgreSQL:
#   provision PostgreSQL, build and install directpath, start a throwaway
#   cluster, load the seed table plain and direct, and print time, WAL and
#   the post-load VACUUM side by side.
#
#   scripts/demo.sh [--rows N] [--major M] [--runs R]
#
# Defaults: 10,000,000 rows, PostgreSQL 18, 3 runs per scenario (the median
# is printed).  Server settings follow docs/baseline.md.  The
# cluster lives in a temporary directory and is stopped at exit; as root,
# the server runs as the unprivileged user 'dptest'.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rows=10000000
major=18
runs=3
while [ $# -gt 0 ]; do
	case "$1" in
	--rows) rows=$2; shift 2 ;;
	--major) major=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	*) echo "usage: $0 [--rows N] [--major M] [--runs R]" >&2; exit 2 ;;
	esac
done

"$top/scripts/provision.sh" "$major" >&2
bin="$top/.pg/$major/bin"
make -C "$top" -s clean >/dev/null
make -C "$top" -s PG_CONFIG="$bin/pg_config" install >&2
chmod -R a+rX "$top/.pg/$major"

dp_server_user >/dev/null
work=$(mktemp -d /tmp/directpath-demo.XXXXXX)
chmod 755 "$work"
dp_user_dir "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data="$work/data"

cleanup() {
	if [ -f "$data/postmaster.pid" ]; then
		dp_as_user "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

dp_as_user "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C -k >/dev/null
cat >> "$data/postgresql.conf" <<EOF
port = $port
listen_addresses = ''
unix_socket_directories = '$work'
shared_preload_libraries = 'directpath'
shared_buffers = 2GB
max_wal_size = 20GB
checkpoint_timeout = 30min
autovacuum = off
maintenance_work_mem = 1GB
EOF
dp_as_user "$bin/pg_ctl" -D "$data" -l "$work/server.log" -w start >/dev/null
psql() { "$bin/psql" -h "$work" -p "$port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -c "CREATE EXTENSION directpath; CREATE EXTENSION pg_visibility;"

gen="SELECT a % 50, a % 10000, a, a FROM generate_series(1, $rows) a"
ddl="CREATE TABLE t (timeid int, insid int, indid int, value int)"
psql -c "COPY ($gen) TO '$work/seed.copy'"

# One scenario run: prints "load_s ckpt_s wal_mb vac_s vacwal_mb frozen_pages pages"
run() {
	local setup=$1 load=$2
	psql -At <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS t;
$setup
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS l0, clock_timestamp() AS t0 \\gset
$load
SELECT extract(epoch FROM clock_timestamp() - :'t0') AS load_s \\gset
SELECT pg_current_wal_insert_lsn() AS l1, clock_timestamp() AS t1 \\gset
CHECKPOINT;
SELECT extract(epoch FROM clock_timestamp() - :'t1') AS ckpt_s \\gset
SELECT pg_current_wal_insert_lsn() AS l2, clock_timestamp() AS t2 \\gset
VACUUM (FREEZE) t;
SELECT extract(epoch FROM clock_timestamp() - :'t2') AS vac_s,
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l2') / 1048576.0 AS vacwal \\gset
SELECT round(:load_s::numeric, 3), round(:ckpt_s::numeric, 3),
       round(pg_wal_lsn_diff(:'l1', :'l0') / 1048576.0, 1),
       round(:vac_s::numeric, 3), round(:vacwal::numeric, 1),
       (SELECT all_frozen FROM pg_visibility_map_summary('t')),
       pg_relation_size('t') / 8192;
EOF
}

# name | setup | load
scenarios=(
	"rows only|CREATE TABLE t (x int);|SELECT count(*) FROM ($gen) s;"
	"plain INSERT, existing table|$ddl;|INSERT INTO t $gen;"
	"direct INSERT, existing table|$ddl;|/*+ APPEND */ INSERT INTO t $gen;"
	"COPY FREEZE, new in xact|$ddl;|BEGIN; TRUNCATE t; COPY t FROM '$work/seed.copy' WITH (FREEZE); COMMIT;"
	"direct INSERT, new in xact|$ddl;|BEGIN; TRUNCATE t; /*+ APPEND */ INSERT INTO t $gen; COMMIT;"
)

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '\ndirectpath demo: %s rows, PostgreSQL %s, median of %s runs\n\n' "$rows" "$major" "$runs"
printf '%-32s %8s %8s %9s %8s %9s %12s\n' scenario "load s" "ckpt s" "WAL MB" "vac s" "vacWAL MB" "frozen/pages"
declare -A result
for sc in "${scenarios[@]}"; do
	IFS='|' read -r name setup load <<<"$sc"
	: >"$work/runs"
	for _ in $(seq "$runs"); do
		run "$setup" "$load" | tr '|' ' ' >>"$work/runs"
	done
	# the run with the median load time
	m=$(cut -d' ' -f1 "$work/runs" | median)
	line=$(awk -v m="$m" '$1 == m {print; exit}' "$work/runs")
	read -r load_s ckpt_s wal vac_s vacwal frozen pages <<<"$line"
	result[$name]="$load_s $ckpt_s"
	printf '%-32s %8s %8s %9s %8s %9s %12s\n' "$name" "$load_s" "$ckpt_s" "$wal" "$vac_s" "$vacwal" "$frozen/$pages"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
read -r pl pc <<<"${result[plain INSERT, existing table]}"
read -r dl dc <<<"${result[direct INSERT, existing table]}"
read -r gl _ <<<"${result[rows only]}"
read -r fl _ <<<"${result[COPY FREEZE, new in xact]}"
read -r nl _ <<<"${result[direct INSERT, new in xact]}"
echo
echo "direct / plain INSERT (both incl. checkpoint): $(ratio "$(awk -v a="$dl" -v b="$dc" 'BEGIN{print a+b}')" "$(awk -v a="$pl" -v b="$pc" 'BEGIN{print a+b}')")"
echo "direct / producing the rows:                   $(ratio "$dl" "$gl")"
echo "direct new-in-xact / COPY FREEZE:               $(ratio "$nl" "$fl")"
