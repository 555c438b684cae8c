#!/usr/bin/env bash
# Create .venv (git-ignored) with the pytest harness dependencies from
# requirements-test.txt.  Idempotent: when the venv already matches the
# requirements file it returns at once.
#
#   scripts/setup-python.sh          PYTHON=/path/to/python3 to pick another
#                                    interpreter (default: python3)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
venv="$top/.venv"
req="$top/requirements-test.txt"
python=${PYTHON:-python3}

stamp="$venv/.requirements.sha256"
want=$( { sha256sum "$req" | cut -d' ' -f1; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] &&
	"$venv/bin/python" -c 'import pytest, psycopg, pytest_timeout, xdist' 2>/dev/null; then
	chmod -R a+rX "$venv"
	exit 0
fi

dp_log "creating $venv"
if [ -e "$venv" ] && ! [ -x "$venv/bin/python" ]; then
	rm -rf "$venv"
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
"$venv/bin/python" -c 'import pytest, psycopg, pytest_timeout, xdist; print("setup-python: pytest", pytest.__version__, "psycopg", psycopg.__version__, "libpq", psycopg.pq.version())'
echo "$want" > "$stamp"
# The tests run as an unprivileged user when scripts/test.sh is started as root.
chmod -R a+rX "$venv"
