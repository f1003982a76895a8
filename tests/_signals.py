"""Helpers of the tests of Ctrl-C: a command in its own process group, as a terminal runs
it, and a terminal's Ctrl-C sent to that group."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def start(args: list[str], **kw: Any) -> subprocess.Popen:
    """``args`` in a session of its own (stdout and stderr as text pipes), with SIGINT's
    default handling (a test runner's worker may ignore SIGINT, and a child would inherit
    that)."""
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **kw)


def interrupt(p: subprocess.Popen, timeout: float = 120) -> str:
    """Ctrl-C to ``p``'s whole group (the command and its worker processes); waits for it
    to end (killed if it has not within ``timeout``) and returns its stderr."""
    try:
        os.killpg(p.pid, signal.SIGINT)
        return p.communicate(timeout=timeout)[1]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)


def kill(p: subprocess.Popen) -> None:
    """SIGKILL to ``p``'s group if it still runs (a test that failed before interrupting)."""
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
