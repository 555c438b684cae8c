"""Processes and ports: the small system helpers every cluster needs."""

import os
import socket
import subprocess


class HarnessError(RuntimeError):
    """A cluster or a command did not do what it was asked to."""


def run(cmd, *, timeout=300, check=False, capture=True, env=None, cwd=None):
    """Run cmd (stdout and stderr together in .stdout when capture);
    with check, a non-zero exit raises HarnessError with the output."""
    cmd = [str(c) for c in cmd]
    r = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.STDOUT if capture else None, text=True,
                       timeout=timeout, env=env, cwd=cwd)
    if check and r.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} exited {r.returncode}:\n{(r.stdout or '')[-4000:]}")
    return r


_USED_PORTS = set()


def free_port():
    """A free 127.0.0.1 TCP port not handed out before in this process."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _USED_PORTS:
            _USED_PORTS.add(port)
            return port
    raise HarnessError("no free port")


def pid_alive(pid):
    """Whether process pid exists and is not a zombie."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
