#!/usr/bin/env bash
# Build directpath against each PostgreSQL major and run its test suites.
#
#   scripts/test.sh [--no-regress] [--no-pytest] [--spread] [-k EXPR] [-j N] [MAJOR ...]
#
# MAJOR defaults to 15 16 17 18.  For each major:
#   1. scripts/provision.sh MAJOR            (PostgreSQL into .pg/MAJOR)
#   2. make clean; make install              (as the invoking user; log shown
#                                             on failure)
#   3. regress: make installcheck            (pg_regress --temp-instance, run in
#                                             a scratch directory of the test user)
#   4. pytest:  pytest tests/ -p no:cacheprovider  with DP_PG_BINDIR=.pg/MAJOR/bin,
#               in N processes (pytest-xdist; a test file stays in one process,
#               so its module's cluster is made once)
#
# PostgreSQL refuses to run as root: when started as root, 3 and 4 run as the
# system user $DP_TEST_USER (default dptest; created if missing) and the tree
# is made readable to it.
#
#   --no-regress   skip the pg_regress suites
#   --no-pytest    skip the pytest suites
#   --spread       every pytest file on the first and the last MAJOR named;
#                  the majors between share half of the files: of the
#                  sorted tests/test_*.py the even-numbered ones on even
#                  days of the year, the odd-numbered ones on odd days
#                  (DP_SPREAD_HALF=0 or 1 chooses), the j-th of that half
#                  on the (j mod M)th of the M majors between; so CI's four
#                  majors fit its time, and two days' runs put every file on
#                  a major between.  pg_regress runs in full on every major
#                  either way.
#   -k EXPR        passed to pytest (select tests)
#   -j N           pytest processes (default $DP_PYTEST_JOBS or 2; 1: no xdist).
#                  The tests wait on servers and disks more than on the CPU:
#                  two processes take a major's suite from 15 to 8-10
#                  minutes on the 2-core machine.
#
# Ends with one line per major and then "N passed, N failed" counting
# majors x suites; exits non-zero when anything failed.  Scratch files go to a
# /tmp/directpath-test.* directory, removed when all passed, and each major's
# pytest clusters (about 15 GB) as soon as its tests passed (DP_KEEP_WORK=1
# keeps them).
set -uo pipefail

. "$(dirname "$0")/lib.sh"
venv="$top/.venv"
test_user=$DP_TEST_USER

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

majors=()
run_regress=1
run_pytest=1
spread=0
kexpr=""
jobs=${DP_PYTEST_JOBS:-2}
while [ $# -gt 0 ]; do
	case "$1" in
	--no-regress) run_regress=0 ;;
	--no-pytest) run_pytest=0 ;;
	--spread) spread=1 ;;
	-k)
		[ $# -ge 2 ] || { echo "test.sh: -k needs an expression" >&2; exit 2; }
		kexpr=$2
		shift
		;;
	-k*) kexpr=${1#-k} ;;
	-j)
		[ $# -ge 2 ] || { echo "test.sh: -j needs a number" >&2; exit 2; }
		jobs=$2
		shift
		;;
	-h | --help) usage; exit 0 ;;
	[0-9]*) majors+=("$1") ;;
	*) echo "test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
[ ${#majors[@]} -gt 0 ] || majors=(15 16 17 18)
spread_half=${DP_SPREAD_HALF:-$((10#$(date -u +%j) % 2))}

work=$(mktemp -d /tmp/directpath-test.XXXXXX)
chmod 755 "$work"

# --- who runs the servers -----------------------------------------------
as_root=0
dp_as_root && as_root=1

if [ $as_root -eq 1 ]; then
	dp_server_user >/dev/null
	# The disk-full tests need a small filesystem: a 64 MB tmpfs, unmounted
	# at exit (only as root, only when none was given in DP_SMALL_FS).
	if [ -z "${DP_SMALL_FS:-}" ] && [ $run_pytest -eq 1 ]; then
		small_fs="$work/small_fs"
		mkdir -p "$small_fs"
		if mount -t tmpfs -o size=64m,mode=0755 tmpfs "$small_fs" 2>/dev/null; then
			chown "$test_user" "$small_fs"
			export DP_SMALL_FS="$small_fs"
			trap 'umount "$small_fs" 2>/dev/null || true' EXIT
		else
			dp_log "could not mount a small tmpfs: the disk-full tests will be skipped"
		fi
	fi
	# The repo (sources, .pg, .venv) must be readable by the test user.
	chmod -R a+rX "$top"
	dp_traversable "$top"
fi

# --- python ---------------------------------------------------------------
pytest_ok=1
if [ $run_pytest -eq 1 ]; then
	if ! dp_venv; then
		dp_log "scripts/setup-python.sh failed: pytest suites cannot run"
		pytest_ok=0
	elif [ $as_root -eq 1 ] && ! (cd "$work" && dp_as_user "$venv/bin/python" -c 'import pytest, psycopg'); then
		dp_log "$test_user cannot use $venv (python base: $("$venv/bin/python" -c 'import sys; print(sys.base_prefix)'))"
		pytest_ok=0
	fi
fi

# --- per major ------------------------------------------------------------
npass=0
nfail=0
summary=()
declare -A status

# The pytest targets of the major at index $1 of majors: the tests
# directory, or with --spread on a major between the first and the last,
# its share of the test files.
pytest_targets() {
	local idx=$1 n=${#majors[@]} i=0 j=0 f
	if [ $spread -eq 0 ] || [ "$idx" -eq 0 ] || [ "$idx" -eq $((n - 1)) ]; then
		echo "$top/tests"
		return
	fi
	for f in "$top"/tests/test_*.py; do
		if [ $((i % 2)) -eq "$spread_half" ]; then
			[ $((j % (n - 2))) -eq $((idx - 1)) ] && echo "$f"
			j=$((j + 1))
		fi
		i=$((i + 1))
	done
}

suite_result() { # major suite ok|FAILED|skipped
	status[$1.$2]=$3
	case $3 in
	ok) npass=$((npass + 1)) ;;
	FAILED) nfail=$((nfail + 1)) ;;
	esac
}

for idx in "${!majors[@]}"; do
	m=${majors[$idx]}
	targets=()
	echo
	echo "================ PostgreSQL $m ================"
	t0=$(date +%s)
	pgdir="$top/.pg/$m"
	pgc="$pgdir/bin/pg_config"
	mdir="$work/pg$m"
	mkdir -p "$mdir"
	build="ok"

	if ! "$top/scripts/provision.sh" "$m"; then
		dp_log "provision of PostgreSQL $m failed"
		build="FAILED (provision)"
	else
		buildlog="$mdir/build.log"
		dp_log "building against $("$pgc" --version) (log: $buildlog)"
		if ! { make -C "$top" PG_CONFIG="$pgc" clean &&
			make -C "$top" PG_CONFIG="$pgc" -j2 all &&
			make -C "$top" PG_CONFIG="$pgc" install; } >"$buildlog" 2>&1; then
			echo "---------------- build log (PostgreSQL $m) ----------------"
			cat "$buildlog"
			echo "------------------------------------------------------------"
			dp_log "build against PostgreSQL $m FAILED"
			build="FAILED"
		fi
		[ $as_root -eq 1 ] && chmod -R a+rX "$pgdir"
	fi

	if [ $run_regress -eq 1 ]; then
		if [ "$build" != ok ]; then
			suite_result "$m" regress FAILED
		else
			# pg_regress puts its --temp-instance (tmp_check) in the current
			# directory: run the repo's Makefile from a scratch directory of
			# the test user (PGXS takes srcdir from the Makefile's location).
			rdir="$mdir/regress"
			dp_user_dir "$rdir"
			dp_log "pg_regress (installcheck) for PostgreSQL $m in $rdir"
			if (cd "$rdir" && dp_as_user env LD_LIBRARY_PATH="$pgdir/lib" \
				make -f "$top/Makefile" PG_CONFIG="$pgc" installcheck \
				REGRESS_OUTPUTDIR="$rdir"); then
				suite_result "$m" regress ok
			else
				if [ -f "$rdir/regression.diffs" ]; then
					echo "---------------- regression.diffs (PostgreSQL $m) ----------------"
					head -n 400 "$rdir/regression.diffs"
					n=$(wc -l <"$rdir/regression.diffs")
					[ "$n" -le 400 ] || echo "... ($n lines, see $rdir/regression.diffs)"
					echo "------------------------------------------------------------------"
				fi
				if [ ! -s "$rdir/regression.diffs" ]; then
					# No diffs: the instance itself failed; show why.
					for f in "$rdir"/log/*.log "$rdir"/tmp_check/log/*.log; do
						if [ -f "$f" ]; then
							echo "---------------- $f (tail) ----------------"
							tail -n 60 "$f"
						fi
					done
				fi
				suite_result "$m" regress FAILED
			fi
		fi
	fi

	if [ $run_pytest -eq 1 ]; then
		if [ "$build" != ok ] || [ $pytest_ok -ne 1 ]; then
			suite_result "$m" pytest FAILED
		else
			pdir="$mdir/pytest"
			dp_user_dir "$pdir"
			mapfile -t targets < <(pytest_targets "$idx")
			dp_log "pytest for PostgreSQL $m (${#targets[@]} target(s): ${targets[0]##*/} ...)"
			args=("${targets[@]}" -p no:cacheprovider --basetemp="$pdir/tmp" --durations=40)
			[ -n "$kexpr" ] && args+=(-k "$kexpr")
			[ "$jobs" -gt 1 ] && args+=(-n "$jobs" --dist loadfile)
			(cd "$pdir" && dp_as_user env DP_PG_BINDIR="$pgdir/bin" \
				DP_SMALL_FS="${DP_SMALL_FS:-}" \
				LD_LIBRARY_PATH="$pgdir/lib" PYTHONDONTWRITEBYTECODE=1 \
				"$venv/bin/python" -m pytest "${args[@]}")
			rc=$?
			if [ $rc -eq 0 ] || { [ $rc -eq 5 ] && [ -n "$kexpr" ]; }; then
				suite_result "$m" pytest ok
				# a major's clusters take ~15 GB: gone once its tests passed
				[ "${DP_KEEP_WORK:-0}" = 0 ] && rm -rf "$pdir/tmp"
			else
				dp_log "pytest for PostgreSQL $m exited $rc"
				suite_result "$m" pytest FAILED
				# in CI a failed major's clusters (50 GB for a full 15) would
				# fill the disk for the majors after it: their logs stay
				if [ "${CI:-}" = true ] && [ "${DP_KEEP_WORK:-0}" = 0 ]; then
					find "$pdir/tmp" -type f -path '*/data/*' \
						! -name server.log -delete 2>/dev/null
				fi
			fi
		fi
	fi

	line="PostgreSQL $m: build $build"
	[ $run_regress -eq 1 ] && line+=", regress ${status[$m.regress]}"
	[ $run_pytest -eq 1 ] && line+=", pytest ${status[$m.pytest]}"
	[ $spread -eq 1 ] && [ ${#targets[@]} -gt 0 ] &&
		[ "${targets[0]}" != "$top/tests" ] &&
		line+=" (${#targets[@]} of the test files, half $spread_half)"
	line+=" ($(($(date +%s) - t0))s)"
	summary+=("$line")
done

echo
echo "================ summary ================"
for l in "${summary[@]}"; do echo "$l"; done
[ -n "${small_fs:-}" ] && umount "$small_fs" 2>/dev/null
if [ $nfail -eq 0 ] && [ "${DP_KEEP_WORK:-0}" = 0 ]; then
	rm -rf "$work"
else
	echo "scratch files kept in $work"
fi
echo "$npass passed, $nfail failed"
[ $nfail -eq 0 ]
