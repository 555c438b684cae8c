#!/usr/bin/env bash
# The main job, end to end, on the embedded PostgreSQL, in about a minute on
# the project's 2-vCPU machine (once PostgreSQL is provisioned):
#
#   scripts/demo.sh [--rows N] [--csv-rows N] [--watch-rows N] [--runs R] [--major M]
#                   [--workers W] [--plot PATH]
#
# 1. Provision PostgreSQL (scripts/provision.sh), build and install
#    directpath, make sure .venv has matplotlib (bench/requirements.txt), and
#    start a throwaway cluster with the settings of docs/baseline.md in a
#    temporary directory (as root, the server runs as the unprivileged user
#    'dptest'; the cluster is stopped and removed at exit).
# 2. Bare table: N rows (--rows, default 1,000,000) of four integers loaded
#    by INSERT ... SELECT from generate_series, plain and /*+ APPEND */, with
#    three references (producing the rows only, COPY FREEZE and a direct
#    INSERT into a table truncated in the load's transaction); printed: load,
#    the CHECKPOINT after it, WAL, and a later VACUUM (FREEZE).
# 3. What users load: an orders CSV file of N rows (--csv-rows, default
#    200,000; written once by the server with COPY ... TO) loaded by
#    COPY ... FROM the file (FORMAT csv) into an existing table with a
#    primary key, a secondary btree index and a foreign key to a customers
#    table: plain COPY, /*+ APPEND */ COPY and /*+ APPEND PARALLEL(W) */
#    COPY (--workers, default 2).  directpath.last_statement() tells whether the direct loads took
#    the direct path and whether the parallel one really ran in parallel
#    (its foreign key is checked by the leader as a set at the end); if
#    not, the reason is printed and the row is labelled serial.
# 4. Watching a load: a /*+ APPEND */ INSERT ... SELECT of --watch-rows
#    rows (default 10,000,000) into a bare table, its row of
#    directpath.progress printed every half second from a second session
#    (phase, rows done, the total, pages written, elapsed time and ETA).
# 5. A summary: time (load + CHECKPOINT), ratio to plain and WAL per case
#    and method, and a PNG bar chart of the ratios (scripts/demo_plot.py),
#    default docs/img/demo.png (--plot PATH); its path is printed last.
#
# Every run starts from the same state: the target is dropped and created
# again (a committed transaction before the load), then CHECKPOINT.  The runs
# go round-robin over the methods, R times (--runs, default 3), and the run
# with the median time (load + CHECKPOINT) of each method is printed; ratios
# are between medians of the same invocation, since the machine is noisy.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rows=1000000
csv_rows=200000
watch_rows=10000000
major=18
runs=3
par_workers=2
plot="$top/docs/img/demo.png"
usage="usage: $0 [--rows N] [--csv-rows N] [--watch-rows N] [--runs R] [--major M] [--workers W] [--plot PATH]"
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
	case "$1" in
	--rows) rows=$2 ;;
	--csv-rows) csv_rows=$2 ;;
	--watch-rows) watch_rows=$2 ;;
	--major) major=$2 ;;
	--runs) runs=$2 ;;
	--workers) par_workers=$2 ;;
	--plot) plot=$2 ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
	shift 2
done
for n in "$rows" "$csv_rows" "$watch_rows" "$runs"; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$usage (positive integers)" >&2; exit 2; }
done
case "$plot" in /*) ;; *) plot="$PWD/$plot" ;; esac

"$top/scripts/provision.sh" "$major" >&2
bin="$top/.pg/$major/bin"
make -C "$top" -s clean >/dev/null
make -C "$top" -s PG_CONFIG="$bin/pg_config" install >&2
chmod -R a+rX "$top/.pg/$major"

# matplotlib for the chart: not a test dependency, so it is not in
# requirements-test.txt; bench/requirements.txt (shared with bench/run.py)
# is installed into .venv when it is missing.  Without it the demo still
# runs and prints its tables.
py="$top/.venv/bin/python"
plot_env() {
	"$top/scripts/setup-python.sh" >&2 || return 1
	"$py" -c 'import matplotlib' 2>/dev/null && return 0
	dp_log "installing bench/requirements.txt (matplotlib) into .venv" >&2
	"$py" -m pip install -q --disable-pip-version-check -r "$top/bench/requirements.txt" >&2
}
have_plot=yes
if ! plot_env; then
	dp_log "no matplotlib in .venv: the tables, but no chart" >&2
	have_plot=no
fi

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

# --- the inputs -------------------------------------------------------------

# Bare table: four integers per row.
gen="SELECT a % 50, a % 10000, a, a FROM generate_series(1, $rows) a"
ddl="CREATE TABLE t (timeid int, insid int, indid int, value int)"
psql -c "COPY ($gen) TO '$work/seed.copy'"

# Orders: a customers table (the foreign key's target) and the CSV file,
# written by the server.  Rows come in id order (the primary key grows),
# customers at random (the secondary index does not); notes are 30-60
# characters, some with commas, so CSV quotes them.
customers=50000
csv="$work/orders.csv"
# (one line: the scenario lists below are read a line at a time)
orders_ddl="CREATE TABLE orders (id bigint PRIMARY KEY, ordered_at timestamptz NOT NULL,"
orders_ddl+=" customer_id int NOT NULL REFERENCES customers, amount numeric(12,2) NOT NULL,"
orders_ddl+=" note text); CREATE INDEX orders_customer_id ON orders (customer_id);"
psql <<EOF
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO customers SELECT c, 'customer ' || c FROM generate_series(1, $customers) c;
VACUUM ANALYZE customers;
COPY (SELECT g,
             timestamptz '2025-01-01 00:00:00+00' + g * interval '2 seconds',
             (g * 7919) % $customers + 1,
             ((g * 104729) % 5000000) / 100.0,
             (ARRAY['leave at the front door, ring twice', 'gift wrap, no invoice',
                    'deliver after 5 pm', 'fragile: glass inside',
                    'express shipping'])[g % 5 + 1]
             || ' ref ' || left(md5(g::text), 10 + (g % 11)::int)
      FROM generate_series(1, $csv_rows::bigint) g)
  TO '$csv' WITH (FORMAT csv);
EOF
csv_mb=$(awk -v b="$(stat -c %s "$csv")" 'BEGIN {printf "%.1f", b / 1048576}')

# --- one run ----------------------------------------------------------------

# run TABLE SETUP LOAD VACUUM: drop TABLE, run SETUP, CHECKPOINT, then LOAD
# and a CHECKPOINT, timed apart; with VACUUM=yes a VACUUM (FREEZE) after.
# Prints one line (the last; a load's own output, as the count of "rows
# only", is dropped):
#   total_s|load_s|ckpt_s|wal_mb|vac_s|vacwal_mb|frozen|pages|path|workers|parallel|reason|fkeys
# (wal_mb: the load and its CHECKPOINT; path .. fkeys: last_statement()).
run() {
	local table=$1 setup=$2 load=$3 vacuum=$4 vac=
	if [ "$vacuum" = yes ]; then
		vac="VACUUM (FREEZE) $table;"
	fi
	(psql -At <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS $table;
$setup
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS l0, clock_timestamp() AS t0 \\gset
$load
SELECT extract(epoch FROM clock_timestamp() - :'t0') AS load_s, clock_timestamp() AS t1 \\gset
CHECKPOINT;
SELECT extract(epoch FROM clock_timestamp() - :'t1') AS ckpt_s \\gset
SELECT pg_current_wal_insert_lsn() AS l2, clock_timestamp() AS t2 \\gset
SELECT coalesce(path, '-') AS path, coalesce(parallel_workers, 0) AS workers,
       translate(coalesce(parallel, ''), '|', '/') AS parallel,
       translate(coalesce(reason, ''), '|', '/') AS reason,
       translate(coalesce(foreign_keys, ''), '|', '/') AS fkeys
  FROM directpath.last_statement() \\gset
$vac
SELECT extract(epoch FROM clock_timestamp() - :'t2') AS vac_s,
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l2') / 1048576.0 AS vacwal \\gset
SELECT round(:load_s::numeric + :ckpt_s::numeric, 3),
       round(:load_s::numeric, 3), round(:ckpt_s::numeric, 3),
       round(pg_wal_lsn_diff(:'l2', :'l0') / 1048576.0, 1),
       round(:vac_s::numeric, 3), round(:vacwal::numeric, 1),
       (SELECT all_frozen FROM pg_visibility_map_summary('$table')),
       pg_relation_size('$table') / 8192,
       :'path', :'workers', :'parallel', :'reason', :'fkeys';
EOF
	) | tail -n 1
}

# id|name|table|setup|load|vacuum
bare=(
	"gen|rows only|t|CREATE TABLE t (x int);|SELECT count(*) FROM ($gen) s;|yes"
	"plain|plain INSERT, existing table|t|$ddl;|INSERT INTO t $gen;|yes"
	"direct|direct INSERT, existing table|t|$ddl;|/*+ APPEND */ INSERT INTO t $gen;|yes"
	"freeze|COPY FREEZE, new in xact|t|$ddl;|BEGIN; TRUNCATE t; COPY t FROM '$work/seed.copy' WITH (FREEZE); COMMIT;|yes"
	"newxact|direct INSERT, new in xact|t|$ddl;|BEGIN; TRUNCATE t; /*+ APPEND */ INSERT INTO t $gen; COMMIT;|yes"
)
orders=(
	"plain|plain COPY|orders|$orders_ddl|COPY orders FROM '$csv' WITH (FORMAT csv);|no"
	"direct|/*+ APPEND */ COPY|orders|$orders_ddl|/*+ APPEND */ COPY orders FROM '$csv' WITH (FORMAT csv);|no"
	"parallel|/*+ APPEND PARALLEL($par_workers) */ COPY|orders|$orders_ddl|/*+ APPEND PARALLEL($par_workers) */ COPY orders FROM '$csv' WITH (FORMAT csv);|no"
)

# measure GROUP SCENARIO...: R rounds over the scenarios; the runs of
# scenario ID go to $work/GROUP.ID, one line each.
measure() {
	local group=$1 sc id name table setup load vacuum
	shift
	for _ in $(seq "$runs"); do
		for sc in "$@"; do
			IFS='|' read -r id name table setup load vacuum <<<"$sc"
			run "$table" "$setup" "$load" "$vacuum" >>"$work/$group.$id"
		done
	done
}

# median GROUP ID: the run with the median time (load + CHECKPOINT).
median() {
	sort -t'|' -k1,1n "$work/$1.$2" | awk -v n="$runs" 'NR == int((n + 1) / 2)'
}
# 1234567 -> 1,234,567
commas() { sed ':a; s/\B[0-9]\{3\}\>/,&/; ta' <<<"$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

# how GROUP ID PATH WORKERS PARALLEL REASON: how a median run ran, as
# "MARK|text" (MARK: ok, fallback or serial, for the chart).
how() {
	local group=$1 id=$2 path=$3 workers=$4 parallel=$5 reason=$6 all
	case "$id" in
	plain) echo "ok|normal path"; return ;;
	gen | freeze) echo "ok|"; return ;;
	esac
	if [ "$path" != direct ]; then
		echo "fallback|FELL BACK to the normal path: $reason"
	elif [ "$id" != parallel ]; then
		echo "ok|direct, serial"
	elif [ "$workers" -gt 0 ]; then
		# the worker counts of all runs, not only the median one's
		all=$(cut -d'|' -f10 "$work/$group.$id" | sort -n | uniq | paste -sd/)
		echo "ok|direct, parallel: $all worker(s) (last_statement().parallel_workers)"
	else
		echo "serial|direct, but ran SERIALLY, not in parallel: $parallel"
	fi
}

# The summary and the chart's input, one line per case and method:
#   case|method|seconds|ratio to plain|WAL MB|mark|how it ran
: >"$work/summary"
summary() { echo "$1|$2|$3|$(ratio "$3" "$4")|$5|$6" >>"$work/summary"; }

# --- bare table -------------------------------------------------------------

printf '\ndirectpath demo: PostgreSQL %s, median of %s runs\n' "$major" "$runs"
printf '\n1. Bare table, %s rows of four integers (INSERT ... SELECT generate_series)\n\n' "$(commas "$rows")"
measure bare "${bare[@]}"
printf '%-32s %8s %8s %9s %8s %9s %12s\n' scenario "load s" "ckpt s" "WAL MB" "vac s" "vacWAL MB" "frozen/pages"
declare -A total load
for sc in "${bare[@]}"; do
	IFS='|' read -r id name _ <<<"$sc"
	IFS='|' read -r tot load_s ckpt_s wal vac_s vacwal frozen pages path workers parallel reason _ \
		<<<"$(median bare "$id")"
	total[$id]=$tot
	load[$id]=$load_s
	if [ "$id" = gen ]; then wal=-; ckpt_s=-; fi
	printf '%-32s %8s %8s %9s %8s %9s %12s\n' "$name" "$load_s" "$ckpt_s" "$wal" "$vac_s" "$vacwal" "$frozen/$pages"
	h=$(how bare "$id" "$path" "$workers" "$parallel" "$reason")
	case "$id" in
	plain) summary bare "plain INSERT" "$tot" "${total[plain]}" "$wal" "$h" ;;
	direct) summary bare "/*+ APPEND */ INSERT" "$tot" "${total[plain]}" "$wal" "$h" ;;
	esac
	if [ "${h%%|*}" = fallback ]; then echo "  ^ ${h#*|}"; fi
done
echo
echo "direct / plain INSERT (both incl. checkpoint): $(ratio "${total[direct]}" "${total[plain]}")"
echo "direct / producing the rows:                   $(ratio "${load[direct]}" "${load[gen]}")"
echo "direct new-in-xact / COPY FREEZE:              $(ratio "${load[newxact]}" "${load[freeze]}")"

# --- orders from a CSV file ---------------------------------------------------

printf '\n2. Orders CSV file, %s rows (%s MB), COPY FROM into a table with a primary key,\n' "$(commas "$csv_rows")" "$csv_mb"
printf '   a secondary btree index and a foreign key to %s customers\n\n' "$(commas "$customers")"
measure orders "${orders[@]}"
printf '%-30s %8s %8s %9s %9s  %s\n' method "load s" "ckpt s" "total s" "WAL MB" "how it ran"
fkeys_note=
for sc in "${orders[@]}"; do
	IFS='|' read -r id name _ <<<"$sc"
	IFS='|' read -r tot load_s ckpt_s wal _ _ _ _ path workers parallel reason fkeys \
		<<<"$(median orders "$id")"
	[ "$id" = plain ] && total[orders]=$tot
	h=$(how orders "$id" "$path" "$workers" "$parallel" "$reason")
	printf '%-30s %8s %8s %9s %9s  %s\n' "$name" "$load_s" "$ckpt_s" "$tot" "$wal" "${h#*|}"
	summary orders "$name" "$tot" "${total[orders]}" "$wal" "$h"
	if [ "$id" = direct ] && [ -n "$fkeys" ]; then fkeys_note=$fkeys; fi
done
if [ -n "$fkeys_note" ]; then
	printf '\nforeign key checks of the direct load (last_statement().foreign_keys): %s\n' "$fkeys_note"
fi

# --- watching a load ------------------------------------------------------------

# The largest load of the demo, --watch-rows rows of the bare table's shape
# by a hinted INSERT ... SELECT, watched from a second session: its row in
# directpath.progress every half second (docs/progress.md).
printf '\n3. Watching a load: /*+ APPEND */ INSERT of %s rows, directpath.progress every 0.5 s\n\n' "$(commas "$watch_rows")"
psql -c "CREATE TABLE watched (timeid int, insid int, indid int, value int);"
psql -c "/*+ APPEND */ INSERT INTO watched SELECT a % 50, a % 10000, a, a FROM generate_series(1, $watch_rows) a;" &
loading=$!
printf '%-9s %-14s %11s %16s %7s %9s %6s\n' time phase "rows done" total "pages" "elapsed s" "eta s"
polls=0
while kill -0 "$loading" 2>/dev/null; do
	"$bin/psql" -h "$work" -p "$port" -U postgres -X -q -At -F'|' -c "
		SELECT to_char(clock_timestamp(), 'MI:SS.MS'), phase, rows_done,
		       coalesce(total::text, '-') || CASE WHEN total_is_estimate THEN '(est.)' ELSE '' END,
		       pages_written, round(extract(epoch FROM elapsed)::numeric, 1),
		       coalesce(round(extract(epoch FROM eta)::numeric, 1)::text, '-')
		FROM directpath.progress WHERE relation = 'watched'::regclass" |
		while IFS='|' read -r t ph done tot pages el eta; do
			printf '%-9s %-14s %11s %16s %7s %9s %6s\n' "$t" "$ph" "$(commas "$done")" \
				"$(commas "$tot")" "$(commas "$pages")" "$el" "$eta"
		done
	polls=$((polls + 1))
	sleep 0.5
done
wait "$loading"
echo "(the load ended after $polls polls; its row left the view with it)"

# --- summary and chart --------------------------------------------------------

printf '\nSummary: time = load + CHECKPOINT, median of %s runs; ratio to plain in the same run\n\n' "$runs"
printf '%-32s %8s %8s %9s  %s\n' "" "time s" "x plain" "WAL MB" "how it ran"
last=
while IFS='|' read -r case method tot r wal _ h; do
	if [ "$case" != "$last" ]; then
		case "$case" in
		bare) echo "bare table, $(commas "$rows") rows, INSERT ... SELECT" ;;
		orders) echo "orders CSV, $(commas "$csv_rows") rows, COPY into a table with PK, index, FK" ;;
		esac
		last=$case
	fi
	printf '  %-30s %8s %8s %9s  %s\n' "$method" "$tot" "$r" "$wal" "$h"
done <"$work/summary"

echo
if [ "$have_plot" = yes ]; then
	mkdir -p "$(dirname "$plot")"
	if MPLBACKEND=Agg "$py" "$top/scripts/demo_plot.py" "$work/summary" "$plot" \
		--title "directpath demo, PostgreSQL $major: bare table $(commas "$rows") rows, orders CSV $(commas "$csv_rows") rows; median of $runs runs"; then
		echo "chart: $plot"
	else
		echo "chart: not written (scripts/demo_plot.py failed)"
	fi
else
	echo "chart: not written (no matplotlib in $top/.venv)"
fi
