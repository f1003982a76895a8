"""The SIMD code paths sdcdist's numbers are computed with, pinned in every process it starts.

numpy picks at import time, per CPU, the SIMD code of its loops: on a CPU with AVX-512
its ``log``, ``exp`` and a few reductions take AVX-512 paths that round some results
differently in the last bit from the AVX2 paths; OpenBLAS likewise picks per CPU a
kernel family (SkylakeX with AVX-512, Haswell with AVX2) whose products and sums round
differently. Left alone, a cube would then depend on the CPU it was computed on, and on
a cluster of mixed node types on which worker ran which chunk.

sdcdist pins both to their AVX2 level on every x86-64 machine with AVX2 (``PIN_ENV``):

- ``NPY_DISABLE_CPU_FEATURES`` lists numpy's AVX-512 dispatch targets (numpy >= 2.4:
  ``X86_V4 AVX512_ICL AVX512_SPR``; older numpy names them ``AVX512F``, ``AVX512_SKX``,
  ...), read by numpy when it is imported;
- ``OPENBLAS_CORETYPE=Haswell``, read by OpenBLAS when numpy loads it.

Both are read once, when numpy is imported, so they must be in the environment before
that: ``import sdcdist`` sets them (:func:`pin`) when numpy is not yet imported, which
covers the ``sdcdist`` command, ``python -m sdcdist``, the service, and every process
these start (child processes inherit the environment; the CLI's LocalCluster also
hands them to its workers explicitly). Workers started outside sdcdist (``dask worker``
on a cluster) need them in their environment: ``deploy/``'s image sets them, and
``python -m sdcdist.simd --env`` prints them for any other launcher.

When numpy was imported before sdcdist (a user's own Python), the paths already chosen
cannot change: :func:`code_paths` reports which are active, the cube records them in its
``code_paths`` attribute, and :func:`check` warns when they are not the pinned ones.

This module imports only the standard library at import time (layer 1).
"""

from __future__ import annotations

import copy
import os
import platform
import shlex
import sys
import warnings
from typing import Any

__all__ = ["PIN_ENV", "pin_env", "pin_env_for", "pin", "code_paths", "is_pinned", "check", "env_line",
           "SimdWarning"]

#: numpy >= 2.4 groups the AVX-512 targets into microarchitecture levels
_NUMPY_AVX512_NEW = "X86_V4 AVX512_ICL AVX512_SPR"
#: numpy < 2.4 names each AVX-512 group
_NUMPY_AVX512_OLD = ("AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX "
                     "AVX512_CNL AVX512_ICL AVX512_SPR")
#: the OpenBLAS kernel family of AVX2 (DYNAMIC_ARCH builds, as numpy's wheels)
_BLAS_CORE = "Haswell"


class SimdWarning(UserWarning):
    """numpy or OpenBLAS run code paths other than the pinned ones in this process."""


def _numpy_version() -> tuple[int, ...]:
    """numpy's (major, minor), without importing numpy: from its installed metadata's
    folder name beside the package when there is one (``numpy-2.4.6.dist-info``: no
    ``importlib.metadata``, whose import costs a command tens of milliseconds), else
    from that metadata; not installed: the newest names."""
    text = _numpy_dist_version()
    if text is None:
        import importlib.metadata as md
        try:
            text = md.version("numpy")
        except Exception:   # not installed: the newest names
            return (99, 0)
    parts = text.split(".")[:2]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)


def _numpy_dist_version() -> str | None:
    """The version in the name of the one ``numpy-*.dist-info`` folder beside the numpy
    package that Python would import, or None."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("numpy")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    site = os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))
    try:
        found = [n for n in os.listdir(site)
                 if n.lower().startswith("numpy-") and n.endswith(".dist-info")]
    except OSError:
        return None
    return found[0][len("numpy-"):-len(".dist-info")] if len(found) == 1 else None


def _x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def _has_avx2() -> bool:
    """Whether the CPU runs AVX2 and FMA (Linux: /proc/cpuinfo; elsewhere assumed)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx2", "fma"} <= flags
    except OSError:
        pass
    return True


def pin_env_for(numpy_version: tuple[int, ...]) -> dict[str, str]:
    """The pins of an x86-64 machine with AVX2 for a numpy of ``numpy_version``."""
    names = _NUMPY_AVX512_NEW if tuple(numpy_version) >= (2, 4) else _NUMPY_AVX512_OLD
    return {"NPY_DISABLE_CPU_FEATURES": names, "OPENBLAS_CORETYPE": _BLAS_CORE}


def pin_env() -> dict[str, str]:
    """The environment variables that pin numpy's and OpenBLAS's code paths on this machine.

    Empty off x86-64 and on x86-64 CPUs without AVX2 (their paths are the only ones).
    """
    if not _x86_64() or not _has_avx2():
        return {}
    return pin_env_for(_numpy_version())


#: the pins of this machine (see :func:`pin_env`)
PIN_ENV: dict[str, str] = pin_env()


def pin(environ: Any = None) -> bool:
    """Put the pins into ``environ`` (default ``os.environ``); whether numpy can still obey.

    A value already there is kept when it pins at least as much: numpy's disabled
    targets are merged (the user's plus the pinned ones); an ``OPENBLAS_CORETYPE`` the
    user set is left alone (:func:`check` warns if it is not the pinned one). Returns
    False when numpy is already imported in this process (its paths are chosen).
    """
    env = os.environ if environ is None else environ
    for k, v in PIN_ENV.items():
        old = env.get(k, "").strip()
        if k == "NPY_DISABLE_CPU_FEATURES" and old:
            names = old.replace(",", " ").split()
            v = " ".join(names + [n for n in v.split() if n not in names])
        elif old:
            continue
        env[k] = v
    return environ is not None or "numpy" not in sys.modules


def code_paths() -> dict[str, Any]:
    """The code paths numpy and its BLAS use in this process (imports numpy).

    Computed once per process (they cannot change once numpy is loaded); a copy each call.

    ``numpy_simd``: the dispatch targets numpy's loops may take (``show_runtime``'s
    "found"); ``blas``: each BLAS library loaded (numpy's, scipy's once it is imported)
    and, for OpenBLAS, its kernel family (``architecture``); ``pinned``: whether both are the pinned ones (no AVX-512
    target, OpenBLAS on Haswell kernels), or True where nothing is pinned (not x86-64).
    """
    key = "scipy.linalg" in sys.modules     # scipy loads a BLAS of its own
    if key not in _CODE_PATHS:
        _CODE_PATHS[key] = _code_paths()
    return copy.deepcopy(_CODE_PATHS[key])


_CODE_PATHS: dict[bool, dict[str, Any]] = {}


def _code_paths() -> dict[str, Any]:
    import numpy as np
    try:
        from numpy._core import _multiarray_umath as mu
    except ImportError:   # numpy < 2
        from numpy.core import _multiarray_umath as mu   # type: ignore[no-redef]
    features = getattr(mu, "__cpu_features__", {})
    found = [t for t in getattr(mu, "__cpu_dispatch__", []) if features.get(t)]
    blas: list[dict[str, Any]] = []
    try:
        from threadpoolctl import threadpool_info
        blas = [{"library": lib.get("internal_api"), "architecture": lib.get("architecture"),
                 "version": lib.get("version")}
                for lib in threadpool_info() if lib.get("user_api") == "blas"]
    except Exception:   # threadpoolctl missing: the environment says what was asked
        blas = [{"library": "unknown", "architecture": os.environ.get("OPENBLAS_CORETYPE")}]
    out = {"machine": platform.machine(), "numpy": np.__version__, "numpy_simd": found,
           "blas": blas}
    out["pinned"] = is_pinned(out)
    return out


def is_pinned(paths: dict[str, Any]) -> bool:
    """Whether ``paths`` (from :func:`code_paths`) are the paths sdcdist pins."""
    if not PIN_ENV:
        return True
    avx512 = [t for t in paths.get("numpy_simd", [])
              if t.startswith("AVX512") or t == "X86_V4"]
    blas = paths.get("blas", [])
    blas_ok = all(b.get("library") != "openblas" or
                  str(b.get("architecture", "")).lower() == _BLAS_CORE.lower()
                  for b in (blas if isinstance(blas, list) else [blas]))
    return not avx512 and blas_ok


def check(stacklevel: int = 2) -> dict[str, Any]:
    """:func:`code_paths`, with a :class:`SimdWarning` when they are not the pinned ones."""
    paths = code_paths()
    if not paths["pinned"]:
        warnings.warn(
            f"numpy runs the SIMD paths {paths['numpy_simd']} and its BLAS the kernels "
            f"{[b.get('architecture') for b in paths['blas']]}: "
            "numbers can differ in their last bits from the pinned AVX2 paths, so cubes "
            "written here record these paths (attribute 'code_paths'); import sdcdist before "
            f"numpy, or start Python with {env_line()}", SimdWarning, stacklevel=stacklevel)
    return paths


def env_line(environ: dict[str, str] | None = None) -> str:
    """The pins as ``NAME=value`` words for a shell or a Makefile."""
    env = PIN_ENV if environ is None else environ
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
