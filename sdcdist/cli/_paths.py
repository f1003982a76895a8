"""Path, URL and name arguments of the command line, checked before any work.

One rule for every command:

- Every path or URL argument, input and output, goes through :class:`PathOrURL`
  when the command line is parsed: a URL with credentials in it
  (``s3://user:secret@...``) is refused, and a URL whose scheme needs an
  extra library (``s3://`` needs s3fs) says ``pip install 'sdcdist[cloud]'``.
- Outputs are checked up front (:func:`check_output`), before any data is
  read or a cluster started: **missing parent folders are created**; a file
  where a folder is needed, a folder where a file is needed, an unwritable
  folder, or an existing output without ``--overwrite`` is refused (exit 2).
  ``--overwrite`` replaces only an earlier output of the same kind that sdcdist
  wrote: never the working directory, a path that is or holds an input of the
  command, or a folder that is not such an output (the rule is
  :func:`sdcdist.data.staging.check_replaceable`, which the writers apply too).
  Two outputs of one command at the same path are refused too
  (:func:`distinct_outputs`).
- No message ever shows the user-info part of a URL (:func:`redact`).
- Names that go into file names (datasets of a multi-dataset report) are made
  safe with :func:`slug`.
- An option given an empty or blank value is refused (:class:`StrictCommand`), and a
  number option is finite (:data:`FINITE`: ``nan`` and ``inf`` are refused).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from ..errors import (SdcInputError, empty_error, exists_error, unwritable_error,
                      value_error)
from ..text import redact, slug, unique_slugs

__all__ = ["PathOrURL", "check_output", "redact", "slug", "unique_slugs", "check_host",
           "StrictCommand", "RETIRED", "FINITE", "distinct_outputs"]

def _is_url(value: str) -> bool:
    return "://" in value


def _check_url(value: str, what: str) -> None:
    from ..storage import check_url
    check_url(value, what=what)


class PathOrURL(click.ParamType):
    """A path or fsspec URL argument, checked when the command line is parsed.

    Parameters
    ----------
    kind : {"input", "output"}
        An input must exist when it is a local path (``exists=True``); an
        output is only checked for credentials and libraries here (its folder
        is checked by the command with :func:`check_output`, which knows
        ``--overwrite``).
    exists : bool
        Inputs: refuse a local path that does not exist.
    """

    name = "path"

    def __init__(self, kind: str = "input", *, exists: bool = True) -> None:
        if kind not in ("input", "output"):
            raise ValueError(kind)
        self.kind, self.exists = kind, exists

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        value = os.fspath(value) if not isinstance(value, str) else value
        what = _what(param)
        if _is_url(value):
            try:
                _check_url(value, what)
            except SdcInputError as exc:
                self.fail(redact(str(exc)), param, ctx)
            return value
        if not value:
            self.fail(f"{what} is empty; give a file name", param, ctx)
        if self.kind == "input" and self.exists and not os.path.exists(value):
            self.fail(f"{what} {value!r} does not exist; check the path", param, ctx)
        return value


def _what(param: Any) -> str:
    if param is None:
        return "the path"
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return (param.human_readable_name or param.name or "path").upper()


def distinct_outputs(outputs: Iterable[tuple[str, str | None]]) -> None:
    """Refuse two outputs of one command at the same place (``--markdown x.md --csv x.md``):
    the second would replace the first. ``outputs``: (option, path) pairs, None not asked
    for; local paths are compared resolved (``./a.csv`` is ``a.csv``), URLs as written.
    Called before :func:`check_output`, so that nothing is prepared for a refused command."""
    seen: dict[str, str] = {}
    for what, path in outputs:
        if path is None:
            continue
        key = str(path)
        if key.startswith("file://") or not _is_url(key):
            from ..storage import local_path
            key = os.path.normcase(os.path.realpath(local_path(key) if _is_url(key) else key))
        if key in seen:
            raise SdcInputError(f"{seen[key]} and {what} both name {redact(str(path))!r}, and "
                                "the second would replace the first; give each output its "
                                "own path")
        seen[key] = what


#: The kinds of output that are folders: one written into, and the stores.
_FOLDERS = ("dir", "store", "cube", "calibration")


def check_output(path: str | None, *, what: str, overwrite: bool = False,
                 kind: str = "file", exists_ok: bool = False,
                 inputs: Sequence[str | None] = ()) -> None:
    """Check (and prepare) an output before any work; raise :class:`SdcInputError`.

    Missing parent folders are created. Refused: credentials in a URL, a file
    where a folder is needed (on the way to the output, or as a folder
    output), a folder in place of a ``file`` output, a folder that cannot be
    written to, an existing output that may not be replaced even with
    ``overwrite`` (:func:`~sdcdist.data.staging.check_replaceable`: the working
    directory, a path that is or holds one of ``inputs``, a folder that is not
    an earlier output of this ``kind``), and an existing output without
    ``overwrite`` (unless ``exists_ok``: an audit cube is resumed).

    Parameters
    ----------
    path : str or None
        The output (None: not asked for, nothing to check).
    what : str
        The option naming it, for the messages (``"--out"``).
    kind : {"file", "dir", "store", "cube", "calibration"}
        A single file, a folder written into (never replaced), a dataset store, an
        audit cube or a calibration cube (Zarr stores, folders).
    inputs : sequence of str
        Every path the command reads (None and URLs are skipped).
    """
    if path is None:
        return
    path = str(path)
    if _is_url(path):
        _check_url(path, what)
        if not path.startswith("file://"):
            return           # remote: the store library checks the rest
        from ..storage import local_path
        path = local_path(path)
    if not path:
        raise empty_error(what, "give a file name")
    p = Path(path)
    shown = redact(path)
    from ..data.staging import check_outside_stores
    check_outside_stores(path, what=what)
    if p.exists():
        if kind == "file" and p.is_dir():
            raise SdcInputError(f"{what} {shown!r} is a folder; give a file name (e.g. "
                                f"{os.path.join(shown, 'out' + (p.suffix or '.txt'))!r})")
        if kind in _FOLDERS and not p.is_dir():
            raise SdcInputError(f"{what} {shown!r} is a file; give the name of a folder "
                                "(or a new name)")
        if kind != "dir":
            from ..data.staging import check_replaceable
            check_replaceable(path, what=what, kind=kind, inputs=inputs)
        if not exists_ok and not overwrite and kind != "dir":
            raise exists_error(what, shown)
        target = p if kind in _FOLDERS else p.parent
        if not os.access(target if str(target) else ".", os.W_OK | os.X_OK):
            raise unwritable_error(what, str(target) or ".")
        _probe(Path(str(target) or "."), what)
        return
    parent = p.parent if str(p.parent) else Path(".")
    ancestor = parent
    while not ancestor.exists():
        if ancestor.is_symlink():          # a dangling link
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SdcInputError(f"{what} {shown!r}: {str(ancestor)!r} is a file, not a folder; "
                            "choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise unwritable_error(what, ancestor)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable_error(what, parent, f"cannot create the folder, "
                               f"{type(exc).__name__}") from None
    _probe(parent, what)


def _probe(folder: Path, what: str) -> None:
    """Create and remove a file in ``folder``: permissions alone do not tell (``/proc``, a
    read-only mount, a full disk, root's access to everything), so try it."""
    import tempfile
    try:
        fd, name = tempfile.mkstemp(prefix=".sdcdist-probe-", dir=folder)
    except OSError as exc:
        raise unwritable_error(what, folder, type(exc).__name__
                               + (f": {exc.strerror}" if exc.strerror else "")) from None
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:
        pass


_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def check_host(host: str) -> str:
    """A DNS name (optionally ``*.`` wildcard) or IP address for a certificate; else raise."""
    h = host.strip()
    try:
        ipaddress.ip_address(h)
        return h
    except ValueError:
        pass
    name = h[2:] if h.startswith("*.") else h
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > 253 or not all(_LABEL.match(x) for x in name.split(".")):
        raise value_error("--host", "a DNS name (letters, digits, '-', dot-separated) or an "
                          "IP address", host)
    return h


#: Short flags that once meant something else in a command: command -> flag -> (what it
#: was, what to write now). Short flags mean one thing in every command: ``-o`` is
#: ``--option`` (``--out`` has no short form) and ``-m`` is ``--method``.
RETIRED = {
    "risk": {"-m": "--metric"},
    "measure": {"-m": "--metric"},
    "plot": {"-o": "--out"},
}


class StrictCommand(click.Command):
    """A command that refuses an option given twice unless it is repeatable, and an old
    short flag (:data:`RETIRED`) with the spelling to use now.

    Click keeps the last value of a repeated single-value option, so
    ``--keys A --keys B`` would silently mean ``--keys B``.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        retired = RETIRED.get(self.name or "", {})
        option_o = any(isinstance(p, click.Option) and "-o" in p.opts and "--option" in p.opts
                       for p in self.get_params(ctx))
        for k, tok in enumerate(args):
            if tok == "--":
                break
            if option_o and tok.startswith("-o") and not tok.startswith("--"):
                value = tok[2:] or (args[k + 1] if k + 1 < len(args) else "")
                if "=" not in value:
                    raise click.UsageError(
                        f"-o is short for --option KEY=VALUE, and {value!r} is not one; an "
                        "output file is given with --out FILE (-o no longer means --out)", ctx)
            flag = tok[:2] if tok.startswith("-") and not tok.startswith("--") else tok
            if flag in retired:
                new = retired[flag]
                short = {"-o": "--option", "-m": "--method"}.get(flag)
                raise click.UsageError(
                    f"{flag} no longer means {new} in `sdcdist {self.name}`; write {new} "
                    f"instead (short flags mean one thing in every command"
                    + (f": {flag} is {short} where a command has one)" if short else ")"),
                    ctx)
        single: dict[str, click.Option] = {}
        takes_value: set[str] = set()
        for p in self.get_params(ctx):
            if not isinstance(p, click.Option):
                continue
            names = list(p.opts) + list(p.secondary_opts)
            for n in names:
                if not p.is_flag and not p.count:
                    takes_value.add(n)
                if not p.multiple and not p.count and p.name not in ("help",):
                    single[n] = p
        seen: dict[str, str] = {}
        i = 0
        while i < len(args):
            tok = args[i]
            if tok == "--":
                break
            name = tok.split("=", 1)[0] if tok.startswith("--") else tok
            if tok.startswith("-") and not tok.startswith("--") and len(tok) > 2 \
                    and tok[:2] in single:
                name = tok[:2]           # -mVALUE
            p = single.get(name)
            if p is not None:
                if p.name in seen:
                    raise click.UsageError(
                        f"{seen[p.name]} was given more than once; give it once (a "
                        f"comma-separated list where it takes several names)", ctx)
                seen[p.name] = max(p.opts, key=len)
            if name in takes_value and name == tok:
                i += 1                   # skip the option's value
            i += 1
        rest = super().parse_args(ctx, args)
        _refuse_empty(self, ctx)
        return rest


def _refuse_empty(cmd: click.Command, ctx: click.Context) -> None:
    """Refuse an option given an empty or blank value on the command line (``--metrics ''``,
    ``--weight ' '``): it never means "the default", which leaving the option out gives."""
    from click.core import ParameterSource
    for p in cmd.get_params(ctx):
        if not isinstance(p, click.Option) or p.name is None or p.is_flag or \
                ctx.get_parameter_source(p.name) is not ParameterSource.COMMANDLINE:
            continue
        v = ctx.params.get(p.name)
        if any(isinstance(x, str) and not x.strip()
               for x in (v if isinstance(v, tuple) else (v,))):
            flag = max(p.opts, key=len)
            raise empty_error(flag, f"give a value, or leave {flag} out")


class FiniteFloat(click.ParamType):
    """A number option that must be finite: ``nan``, ``inf`` (which Python's ``float``
    reads) are refused when the command line is parsed, naming the option."""

    name = "float"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        x = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(x):
            raise value_error(_what(param), "a finite number", x)
        return x


#: The type of every number option (``--target``, ``--tol``, ``-p``).
FINITE = FiniteFloat()


_SCHEDULER = re.compile(r"^(?:(?P<proto>[a-z][a-z0-9+.-]*)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|"
                        r"[A-Za-z0-9._-]+)(?::(?P<port>[0-9]{1,5}))?/?$")
_PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx", "inproc")


def check_scheduler(address: str | None, security: Any) -> None:
    """Refuse a scheduler address that is not one, holds credentials, or asks for
    ``tls://`` without certificates; before any data is read."""
    if address is None:
        return
    a = address.strip()
    if "@" in a:
        raise SdcInputError("--scheduler has credentials in its address; Dask schedulers "
                            "authenticate with TLS certificates (--tls-ca/--tls-cert/"
                            "--tls-key), never with a user name or password in the URL")
    if re.fullmatch(r"inproc://[A-Za-z0-9._:-]+(/[0-9]+)*", a):
        return                                   # an in-process cluster of this interpreter
    m = _SCHEDULER.match(a)
    if not m or (m.group("proto") and m.group("proto") not in _PROTOCOLS) or \
            not m.group("port") or not 0 < int(m.group("port")) < 65536:
        # a port is part of every address a client connects to (Dask has no default)
        raise value_error("--scheduler", "an address with a port, like tcp://HOST:8786 or "
                          f"tls://HOST:8786 (protocols {', '.join(_PROTOCOLS)})",
                          redact(address))
    if m.group("proto") in ("tls", "wss") and security is None:
        import dask.config
        if not dask.config.get("distributed.comm.tls.ca-file", None):
            raise SdcInputError(f"--scheduler {redact(address)!r} is {m.group('proto')}:// "
                                "but no certificates were given: pass --tls-ca, --tls-cert "
                                "and --tls-key (make a test set with 'sdcdist certs'), or "
                                "set Dask's distributed.comm.tls config")
