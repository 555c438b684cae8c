#!/usr/bin/env bash
# PostgreSQL's own regression suite (src/test/regress, parallel_schedule)
# with the direct path forced, compared with a checked-in list of expected
# differences.
#
#   scripts/core-regress.sh [MAJOR ...]          default: 15 18
#
# For each major:
#   1. scripts/provision.sh MAJOR, and directpath built (in a scratch copy of
#      the tree) and installed into .pg/MAJOR.
#   2. The suite's sources from Debian's source package postgresql-MAJOR
#      (apt-get source, with a private apt configuration whose only sources
#      are the deb-src lines of the suite that carries that major: bookworm
#      for 15, trixie for 17, sid for 18; the lines live in a temporary
#      directory that is removed when the fetch ends or fails, and the
#      system's apt sources and lists are never touched).  Of the versions on offer the one equal to the server's minor
#      is taken, else the newest older one, else the newest.  Downloads and
#      the unpacked tree are cached in .cache/core-regress/ (git-ignored);
#      DP_CORE_REGRESS_REFRESH=1 fetches again.
#   3. regress.so (and contrib/spi's autoinc.so, refint.so) built from that
#      tree against the installed server headers (PGXS), for pg_regress
#      --dlpath.
#   4. The suite run three times by the wheel's pg_regress, each on its own
#      --temp-instance (unix socket in a temporary directory) with
#      shared_preload_libraries = 'directpath', directpath.min_bytes = 0 and
#      directpath.load_statistics = off (statistics gathered at load time
#      are what an ANALYZE after the load would store: with them, tests
#      whose tables a load fills from empty plan as after an ANALYZE, 12
#      tests on 18 differ in EXPLAIN output, row order and last_analyze
#      flags; tests/test_load_statistics.py checks them against ANALYZE):
#        baseline:  directpath.mode = off
#        direct:    directpath.mode = always
#        parallel:  directpath.mode = always, directpath.parallel_workers = 2
#   5. A test is a *directpath difference* when it fails in a direct run
#      and its output there differs from its output in the baseline run.
#      Failures that both runs share identically (tests of a Debian minor
#      that is not the server's, the locale, the machine) are not ours and
#      are only counted.  Directpath differences are compared with a list:
#      tests/core-regress/expected-differences.txt for the direct run,
#      tests/core-regress/expected-differences-parallel.txt for the parallel
#      one (the same format, its own reasons):
#        - a difference not listed for this major fails (its diff, baseline
#          output -> direct output, is printed);
#        - a difference listed as "order" (row order only) whose direct
#          output no longer has the baseline's lines, sorted, fails, and so
#          does one listed as "context" whose direct output is not the
#          baseline's once the "parallel worker" context lines core adds to
#          a worker's error are left out;
#        - a listed difference that no longer shows is reported (warning), so
#          the list stays honest;
#        - whether listed or not, a direct-run diff that adds an ERROR,
#          WARNING, PANIC, FATAL, assertion failure or lost connection fails,
#          and so does a crash in the direct run's server log.
#
# DP_CORE_EXTRA, when set, is one more line of every run's configuration
# (an experiment: DP_CORE_EXTRA='directpath.bulk_dml_min_rows = 0' sends
# every UPDATE and DELETE of the direct runs to the bulk path; the list of
# differences is for the defaults).
#
# PostgreSQL refuses to run as root: as root, the servers run as the system
# user $DP_TEST_USER (default dptest; created if missing, scripts/lib.sh) and
# what it needs is made readable to it.  Installs dpkg-dev when run as root without it.
#
# Ends with "core-regress.sh: N passed, N failed" counting majors.  Scratch
# files go to a /tmp/directpath-core-regress.* directory, removed when all
# passed (DP_KEEP_WORK=1 keeps it).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

cache=${DP_CORE_REGRESS_CACHE:-$top/.cache/core-regress}
list="$top/tests/core-regress/expected-differences.txt"
list_parallel="$top/tests/core-regress/expected-differences-parallel.txt"
mirror=${DP_DEBIAN_MIRROR:-http://deb.debian.org}
# Lines that never count as an explained difference when the direct run
# adds them (and does not merely move them).
never_re='ERROR:|WARNING:|PANIC:|FATAL:|TRAP:|server closed the connection|connection to server was lost|terminated by signal'

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

majors=()
for a in "$@"; do
	case "$a" in
	-h | --help) usage; exit 0 ;;
	[0-9]*) majors+=("$a") ;;
	*) dp_log "unknown argument '$a'" >&2; usage >&2; exit 2 ;;
	esac
done
[ ${#majors[@]} -gt 0 ] || majors=(15 18)


# Debian suites (archive:suite) whose sources carry postgresql-MAJOR.
debian_suites() {
	case $1 in
	15) echo "debian:bookworm debian:bookworm-updates debian-security:bookworm-security" ;;
	17) echo "debian:trixie debian:trixie-updates debian-security:trixie-security" ;;
	*) echo "debian:sid" ;;
	esac
}

work=$(mktemp -d /tmp/directpath-core-regress.XXXXXX)
chmod 755 "$work"
aptdir=""
keep_work=1
cleanup() {
	# The deb-src lines exist only in this private apt directory.
	[ -z "$aptdir" ] || rm -rf "$aptdir"
	[ $keep_work = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# As root: the servers run as the server user ($DP_TEST_USER), which must
# reach the server binaries, the suite's tree and the scratch directory.
share_with_user() { :; }
if dp_as_root; then
	dp_server_user >/dev/null
	command -v dpkg-source >/dev/null ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends dpkg-dev >/dev/null
	share_with_user() {
		local p
		for p in "$@"; do
			chmod -R a+rX "$p"
			dp_traversable "$p"
		done
	}
fi

# fetch_source MAJOR SERVER_VERSION: the unpacked Debian source tree of
# postgresql-MAJOR in $cache/postgresql-MAJOR (cached), its path in $src.
# (Not in a subshell: the EXIT trap must see $aptdir.)
fetch_source() {
	src="$cache/postgresql-$1"
	if [ -f "$src/.debian-version" ] && [ "${DP_CORE_REGRESS_REFRESH:-0}" != 1 ]; then
		return 0
	fi
	local rc=0
	fetch_with_apt "$1" "$2" "$src" || rc=$?
	# The deb-src lines go with the private apt directory, success or not.
	[ -z "$aptdir" ] || rm -rf "$aptdir"
	aptdir=""
	return $rc
}
fetch_with_apt() {
	local m=$1 want=$2 tree=$3 dl="$cache/downloads"
	command -v dpkg-source >/dev/null || { dp_log "dpkg-source missing (apt-get install dpkg-dev)"; return 1; }
	mkdir -p "$dl"
	aptdir=$(mktemp -d "$cache/apt.XXXXXX")
	mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial"
	local s
	for s in $(debian_suites "$m"); do
		echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror/${s%%:*} ${s#*:} main"
	done >"$aptdir/sources.list"
	local opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache"
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null)
	if ! apt-get "${opts[@]}" -q update >"$aptdir/update.log" 2>&1; then
		cat "$aptdir/update.log"
		dp_log "apt-get update (deb-src $(debian_suites "$m")) failed"
		return 1
	fi
	# The version equal to the server's minor, else the newest older one,
	# else the newest.
	local v up pick="" older="" newest=""
	for v in $(apt-cache "${opts[@]}" showsrc "postgresql-$m" 2>/dev/null |
		awk -v p="postgresql-$m" '/^Package: /{pk=$2} /^Version: /{if (pk==p) print $2}' | sort -u); do
		up=${v#*:}
		up=${up%-*}
		[ "$up" = "$want" ] && pick=$v
		if dpkg --compare-versions "$up" lt "$want"; then
			[ -z "$older" ] || dpkg --compare-versions "$v" gt "$older" && older=$v
		fi
		[ -z "$newest" ] || dpkg --compare-versions "$v" gt "$newest" && newest=$v
	done
	[ -n "$pick" ] || pick=${older:-$newest}
	if [ -z "$pick" ]; then
		grep -E '^(W|E|Err):' "$aptdir/update.log"
		dp_log "no source package postgresql-$m in $(debian_suites "$m")"
		return 1
	fi
	dp_log "Debian source postgresql-$m $pick (server $want)"
	local x
	x=$(mktemp -d "$dl/x.XXXXXX")
	if ! (cd "$dl" && apt-get "${opts[@]}" -q --only-source --download-only source "postgresql-$m=$pick" >"$aptdir/source.log" 2>&1 &&
		dpkg-source -x "postgresql-${m}_${pick#*:}.dsc" "$x/tree" >>"$aptdir/source.log" 2>&1); then
		cat "$aptdir/source.log"
		rm -rf "$x"
		dp_log "apt-get source postgresql-$m=$pick failed"
		return 1
	fi
	echo "$pick" >"$x/tree/.debian-version"
	rm -rf "$tree"
	mv "$x/tree" "$tree"
	rm -rf "$x"
}

# Test statuses from pg_regress's output: "NAME ok|FAILED" lines (the
# "test NAME ... ok" format of 15 and the TAP format of 16+).
statuses() {
	awk '
	/^(ok|not ok) +[0-9]+ +[-+] +[^ ]/ {
		st = ($1 == "ok") ? "ok" : "FAILED"
		sub(/^(ok|not ok) +[0-9]+ +[-+] +/, "")
		print $1, st
		next
	}
	/ \.\.\. / {
		line = $0
		sub(/^ *(test +)?/, "", line)
		split(line, f, / +\.\.\. */)
		st = (f[2] ~ /^ok/) ? "ok" : "FAILED"
		if (f[1] ~ /^[A-Za-z0-9_]+$/) print f[1], st
	}' "$1"
}

# listed MAJOR LIST: LIST's tests for MAJOR, "test<TAB>kind<TAB>reason" lines.  Entry format,
# one per line: TEST MAJORS KIND REASON; MAJORS a comma list of majors or
# ranges (15-18); KIND "order" (checked: the direct run's output has the
# baseline's lines, in another order), "context" (checked: the direct run's
# output is the baseline's with "parallel worker" context lines added) or
# "plan" / "other" (not checked beyond the test's name).  "order" also
# allows "parallel worker" lines.
listed() {
	awk -v m="$1" '
	/^[ \t]*(#|$)/ { next }
	{
		n = split($2, parts, ",")
		hit = 0
		for (i = 1; i <= n; i++) {
			if (split(parts[i], r, "-") == 2) { if (m + 0 >= r[1] + 0 && m + 0 <= r[2] + 0) hit = 1 }
			else if (parts[i] + 0 == m + 0) hit = 1
		}
		if (!hit) next
		reason = $0
		sub(/^[ \t]*[^ \t]+[ \t]+[^ \t]+[ \t]+[^ \t]+[ \t]+/, "", reason)
		print $1 "\t" $3 "\t" reason
	}' "$2"
}

# The lines of a diff (baseline -> direct) matching $never_re that the
# direct run adds, leaving out those it only moves (removed elsewhere).
added_never() {
	awk -v re="$never_re" '
	NR <= 2 { next }
	/^-/ { removed[substr($0, 2)]++; next }
	/^\+/ && $0 ~ re { added[++n] = substr($0, 2) }
	END { for (i = 1; i <= n; i++) if (removed[added[i]]-- <= 0) print "+" added[i] }' "$1"
}

# A test's output without the context line core's leader adds to an error
# that a parallel worker raised ("parallel worker").
no_worker_context() { grep -vx 'parallel worker' "$1"; }

# compare_run MAJOR DIR WHAT LIST: the run in DIR/results against the
# baseline run ($base), its differences checked against LIST.  Appends to
# problems[]; sets run_line to its one-line summary.
compare_run() {
	local m=$1 dp=$2 what=$3 list=$4
	local cdir="$dp.compare" t kind reason
	mkdir -p "$cdir"
	# Directpath differences.
	: >"$cdir/differences"
	: >"$cdir/shared-failures"
	while read -r t st; do
		[ "$st" = FAILED ] || continue
		if grep -qx "$t FAILED" "$base/status" && cmp -s "$base/results/$t.out" "$dp/results/$t.out"; then
			echo "$t" >>"$cdir/shared-failures"
			continue
		fi
		echo "$t" >>"$cdir/differences"
		diff -U3 --label "$t (directpath.mode = off)" --label "$t ($what)" \
			"$base/results/$t.out" "$dp/results/$t.out" >"$cdir/$t.diff" 2>&1
	done <"$dp/status"
	listed "$m" "$list" >"$cdir/listed"

	new=()
	gone=()
	known=()
	bad=()
	misordered=()
	while read -r t; do
		kind=$(awk -F'\t' -v t="$t" '$1 == t { print $2 }' "$cdir/listed")
		if [ -z "$kind" ]; then
			new+=("$t")
		elif [ "$kind" = order ] && ! cmp -s <(no_worker_context "$base/results/$t.out" | sort) \
			<(no_worker_context "$dp/results/$t.out" | sort); then
			misordered+=("$t")
		elif [ "$kind" = context ] && ! cmp -s <(no_worker_context "$base/results/$t.out") \
			<(no_worker_context "$dp/results/$t.out"); then
			misordered+=("$t")
		else
			known+=("$t")
		fi
		[ -z "$(added_never "$cdir/$t.diff")" ] || bad+=("$t")
	done <"$cdir/differences"
	while IFS=$'\t' read -r t kind reason; do
		grep -qx "$t" "$cdir/differences" || gone+=("$t")
	done <"$cdir/listed"
	crash=$(grep -E 'TRAP:|PANIC:|terminated by signal' "$dp"/log/postmaster.log 2>/dev/null | head -n 5)

	nshared=$(wc -l <"$cdir/shared-failures")
	if [ "$nshared" -gt 0 ]; then
		dp_log "not counted (fail identically with directpath.mode = off: Debian's $(cat "$src/.debian-version") vs server $server, or the environment): $(tr '\n' ' ' <"$cdir/shared-failures")"
	fi
	for t in "${known[@]}"; do
		dp_log "expected difference: $t ($(grep "^$t	" "$cdir/listed" | cut -f3-))"
	done
	for t in "${gone[@]}"; do
		dp_log "WARNING: listed difference no longer shows: $t ($(grep "^$t	" "$cdir/listed" | cut -f3-)); remove it from ${list#$top/}"
	done
	for t in "${new[@]}"; do
		echo "---------------- NEW difference: $t (PostgreSQL $m, $what) ----------------"
		cat "$cdir/$t.diff"
		problems+=("new difference $t")
	done
	for t in "${misordered[@]}"; do
		echo "---------------- $t (PostgreSQL $m, $what): listed as row order or context lines only, but the direct run's output has other lines ----------------"
		diff <(no_worker_context "$base/results/$t.out" | sort) <(no_worker_context "$dp/results/$t.out" | sort) | head -n 100
		echo "---- (the diff, baseline -> direct) ----"
		cat "$cdir/$t.diff"
		problems+=("$t differs in more than row order or context lines")
	done
	for t in "${bad[@]}"; do
		echo "---------------- $t (PostgreSQL $m, $what): the direct run adds an ERROR, WARNING, FATAL/PANIC, assertion failure or lost connection ----------------"
		added_never "$cdir/$t.diff"
		problems+=("$t adds an error, warning or crash")
	done
	missing=$(join -v1 <(cut -d' ' -f1 "$base/status" | sort) <(cut -d' ' -f1 "$dp/status" | sort) | tr '\n' ' ')
	if [ -n "$missing" ]; then
		echo "---------------- tests the direct run did not report (PostgreSQL $m, $what): $missing----------------"
		tail -n 20 "$dp/pg_regress.log"
		problems+=("the direct run did not report $missing")
	fi
	if [ -n "$crash" ]; then
		echo "---------------- server log of the direct run (PostgreSQL $m, $what) ----------------"
		echo "$crash"
		problems+=("server crashed")
	fi
	ndiff=$(wc -l <"$cdir/differences")
	run_line="$what: $ndiff differ (${#known[@]} as listed, ${#new[@]} new, ${#misordered[@]} more than listed), ${#gone[@]} listed ones gone, $nshared fail in both runs"
}

npass=0
nfail=0
summary=()
for m in "${majors[@]}"; do
	echo
	echo "================ core regress, PostgreSQL $m ================"
	t0=$(date +%s)
	mdir="$work/pg$m"
	mkdir -p "$mdir"
	pgdir="$top/.pg/$m"
	pgc="$pgdir/bin/pg_config"
	fail_major() { dp_log "PostgreSQL $m: $*"; summary+=("PostgreSQL $m: FAILED ($*) ($(($(date +%s) - t0))s)"); nfail=$((nfail + 1)); }

	if ! "$top/scripts/provision.sh" "$m"; then
		fail_major "provision failed"
		continue
	fi
	server=$("$pgc" --version | sed 's/^PostgreSQL \([0-9.]*\).*/\1/')
	# The installation's pg_regress, beside PGXS's makefiles.
	pg_regress="$(dirname "$("$pgc" --pgxs)")/../test/regress/pg_regress"

	# directpath, built from a scratch copy of the tree (leaves the tree's
	# objects alone) and installed.
	b="$mdir/build"
	mkdir -p "$b"
	(cd "$top" && tar cf - --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
		Makefile directpath.control directpath--*.sql src) | tar xf - -C "$b"
	if ! { make -C "$b" PG_CONFIG="$pgc" -j2 && make -C "$b" PG_CONFIG="$pgc" install; } >"$mdir/build.log" 2>&1; then
		cat "$mdir/build.log"
		fail_major "build of directpath failed"
		continue
	fi

	if ! fetch_source "$m" "$server"; then
		fail_major "no Debian source"
		continue
	fi
	rsrc="$src/src/test/regress"
	dp_log "suite: Debian postgresql-$m $(cat "$src/.debian-version"), server $server"

	# regress.so from the same tree, against the installed headers, and
	# contrib/spi's autoinc.so and refint.so, which the triggers test of 15
	# to 17 loads from the same --dlpath.
	lib="$mdir/lib"
	mkdir -p "$lib"
	modules=(regress)
	cp "$rsrc/regress.c" "$lib/"
	for f in autoinc refint; do
		if [ -f "$src/contrib/spi/$f.c" ]; then
			cp "$src/contrib/spi/$f.c" "$lib/"
			modules+=("$f")
		fi
	done
	# REFINT_VERBOSE as in contrib/spi/Makefile: the test expects its NOTICEs.
	printf 'MODULES = %s\nPG_CPPFLAGS = -DREFINT_VERBOSE\nPGXS := $(shell $(PG_CONFIG) --pgxs)\ninclude $(PGXS)\n' "${modules[*]}" >"$lib/Makefile"
	if ! make -C "$lib" PG_CONFIG="$pgc" >"$mdir/regress-build.log" 2>&1; then
		cat "$mdir/regress-build.log"
		fail_major "build of ${modules[*]} failed"
		continue
	fi

	share_with_user "$pgdir" "$src" "$mdir"

	# The two runs.
	ok_runs=1
	for run in off always parallel; do
		rd="$mdir/$run"
		dp_user_dir "$rd"
		mode=$run workers=0
		[ $run = parallel ] && mode=always workers=2
		cat >"$rd/extra.conf" <<-EOF
			shared_preload_libraries = 'directpath'
			directpath.mode = $mode
			directpath.parallel_workers = $workers
			directpath.min_bytes = 0
			directpath.load_statistics = off
			fsync = off
			${DP_CORE_EXTRA:-}
		EOF
		dp_log "pg_regress parallel_schedule, directpath.mode = $mode, parallel_workers = $workers ($rd)"
		t1=$(date +%s)
		(cd "$rd" && dp_as_user env LD_LIBRARY_PATH="$pgdir/lib" \
			"$pg_regress" \
			--temp-instance="$rd/tmp_check" --temp-config="$rd/extra.conf" \
			--bindir="$pgdir/bin" --dlpath="$lib" --inputdir="$rsrc" \
			--outputdir="$rd" --schedule="$rsrc/parallel_schedule" \
			--max-concurrent-tests=20 --encoding=UTF8 --no-locale) >"$rd/pg_regress.log" 2>&1
		statuses "$rd/pg_regress.log" >"$rd/status"
		nt=$(wc -l <"$rd/status")
		nf=$(grep -c ' FAILED$' "$rd/status")
		dp_log "  $nt tests, $nf differ from Debian's expected output ($(($(date +%s) - t1))s)"
		if [ "$nt" -eq 0 ]; then
			tail -n 40 "$rd/pg_regress.log"
			for f in "$rd"/log/*.log; do [ -f "$f" ] && tail -n 40 "$f"; done
			ok_runs=0
		fi
	done
	if [ $ok_runs -eq 0 ]; then
		fail_major "pg_regress did not run"
		continue
	fi
	base="$mdir/off"

	problems=()
	compare_run "$m" "$mdir/always" "directpath.mode = always" "$list"
	line="PostgreSQL $m: $(wc -l <"$mdir/always/status") tests; $run_line"
	compare_run "$m" "$mdir/parallel" "directpath.mode = always, parallel_workers = 2" "$list_parallel"
	line="$line; $run_line"
	if [ ${#problems[@]} -eq 0 ]; then
		npass=$((npass + 1))
		summary+=("$line: ok ($(($(date +%s) - t0))s)")
	else
		nfail=$((nfail + 1))
		summary+=("$line: FAILED: $(printf '%s; ' "${problems[@]}")($(($(date +%s) - t0))s)")
	fi
done

echo
echo "================ core regress summary ================"
printf '%s\n' "${summary[@]}"
[ $nfail -eq 0 ] && [ "${DP_KEEP_WORK:-0}" = 0 ] && keep_work=0 || echo "scratch files kept in $work"
dp_log "$npass passed, $nfail failed"
[ $nfail -eq 0 ]
