"""Dask preload hook of the worker processes the command line starts (its LocalCluster,
``preload=[..., "sdcdist.parallel.preload"]``): Ctrl-C is the command's to handle.

A terminal sends SIGINT to every process of its foreground group, the worker processes
too. Each would print a KeyboardInterrupt traceback of Dask's nanny code while the
command itself stops and closes the cluster (which ends the workers). The workers ignore
SIGINT instead; the command says what happened.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["dask_setup"]


def dask_setup(worker: Any = None) -> None:
    """Ignore SIGINT in this worker process (signals can only be set from its main
    thread, where Dask runs the preload; elsewhere nothing changes)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
