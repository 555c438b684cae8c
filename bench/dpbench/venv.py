"""Run a benchmark script under the repository's .venv.

Only the standard library is used here: this runs before the virtual
environment does.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv"


def ensure(script, modules=(), requirements=None):
    """Re-exec 'script' under .venv/bin/python (created by
    scripts/setup-python.sh if missing); then install 'requirements' when
    one of 'modules' cannot be imported."""
    venv_py = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() != VENV.resolve():
        if not venv_py.exists():
            subprocess.run([str(REPO / "scripts" / "setup-python.sh")], check=True)
        os.execv(str(venv_py), [str(venv_py), str(Path(script).resolve()), *sys.argv[1:]])
    if requirements and any(importlib.util.find_spec(m) is None for m in modules):
        print(f"bench: installing {requirements} into .venv", file=sys.stderr)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        "-r", str(requirements)], check=True)
