"""Logging for the command line: plain text, or one JSON object per line.

Log records carry event names, counts, cell labels (method, parameter,
replicate), durations and addresses; never record values. Structured fields
go in ``extra={"fields": {...}}`` so the JSON lines stay machine-readable::

    log.info("cell done", extra={"fields": {"method": "noise", "param": 0.1}})
"""

from __future__ import annotations

import io
import json
import logging
import sys
import time
from typing import Any, TextIO

from .errors import check_choice
from .text import escape_controls

__all__ = ["setup_logging", "JsonFormatter", "TextFormatter", "JsonLines", "json_stderr",
           "event", "escape_controls", "LOG_FORMATS"]

LOG_FORMATS = ("text", "json")
_HANDLER_NAME = "sdcdist-cli"


def _text_value(v: Any) -> str:
    """A field's value in a text line: control characters escaped, and in double quotes
    (``\\`` and ``"`` escaped inside) when empty or holding a space, a quote or ``=``, so
    that a value cannot pass for further fields.

    >>> print(_text_value("/v1/x status=200"), _text_value(4), _text_value("a\\nb"))
    "/v1/x status=200" 4 "a\\nb"
    """
    s = str(v)
    if s == "" or any(c in s for c in ' "=\\') or any(c.isspace() for c in s):
        return '"' + escape_controls(s.replace("\\", "\\\\").replace('"', '\\"')) + '"'
    return escape_controls(s)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, event, fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            # the first line only: Dask's "Compute Failed" message goes on with the task's
            # arguments and exception text, which may hold record values
            "event": record.getMessage().split("\n", 1)[0].rstrip(),
        }
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info and record.exc_info[0] is not None:
            out["exception"] = record.exc_info[0].__name__
        # json.dumps escapes every control character (ASCII output), \u2028 too
        return json.dumps(out, default=str, sort_keys=False)


class TextFormatter(logging.Formatter):
    """``time level logger: event key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None) or {}
        tail = "".join(f" {escape_controls(str(k))}={_text_value(v)}"
                       for k, v in fields.items())
        msg = escape_controls(record.getMessage().split("\n", 1)[0].rstrip())
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        return f"{stamp} {record.levelname.lower():7s} {record.name}: {msg}{tail}"


def _stamp(created: float) -> str:
    return (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
            + f".{int((created % 1) * 1000):03d}Z")


class JsonLines(io.TextIOBase):
    """A text stream that passes JSON lines through and wraps every other line in one.

    In JSON-log mode stderr is replaced by this wrapper, so that whatever writes
    to it (an ``Error:`` line of the command line, a message of a command, a
    warning, a traceback, a third-party print) comes out as one JSON object
    per line: ``{"time", "level", "logger": "stderr", "event": <the line>}``.
    Lines that already are JSON objects (the log handlers' output) go through
    unchanged; carriage returns (progress bars) end a line too, and empty
    lines are dropped.
    """

    def __init__(self, stream: TextIO):
        super().__init__()
        self.stream = stream
        self._buf = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False    # no terminal tricks (progress bars, colours) in JSON mode

    def fileno(self) -> int:
        return self.stream.fileno()

    def write(self, s: str) -> int:
        self._buf += s.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" in self._buf:
            *lines, self._buf = self._buf.split("\n")
            for line in lines:
                self._emit(line)
            self.stream.flush()
        return len(s)

    def flush(self) -> None:
        self.stream.flush()

    def close_line(self) -> None:
        """Emit a pending partial line."""
        if self._buf:
            line, self._buf = self._buf, ""
            try:
                self._emit(line)
                self.stream.flush()
            except (ValueError, OSError):   # the stream is closed already
                pass

    def _emit(self, line: str) -> None:
        if not line.strip():
            return
        if line.startswith("{") and line.endswith("}"):
            try:
                if isinstance(json.loads(line), dict):
                    self.stream.write(line + "\n")
                    return
            except ValueError:
                pass
        low = line.lstrip().lower()
        level = ("error" if low.startswith(("error", "traceback", "exception"))
                 else "warning" if low.startswith("warning") else "info")
        self.stream.write(json.dumps({"time": _stamp(time.time()), "level": level,
                                      "logger": "stderr", "event": line.rstrip()}) + "\n")


def json_stderr() -> JsonLines:
    """Replace ``sys.stderr`` by a :class:`JsonLines` wrapper (once) and return it."""
    if not isinstance(sys.stderr, JsonLines):
        import atexit
        sys.stderr = JsonLines(sys.stderr)
        atexit.register(sys.stderr.close_line)
    return sys.stderr


def setup_logging(fmt: str = "text", level: str | int = "INFO",
                  stream: TextIO | None = None, *, import_dask: bool = True) -> None:
    """Send ``sdcdist`` and ``distributed`` logs to ``stream`` (stderr) in one format.

    Idempotent: a second call replaces the handler the first one installed.

    Importing ``distributed`` installs Dask's own log handlers, so this function
    imports it first (``import_dask=False``: only if it is already imported, for a
    fast start; call again once Dask is imported, as the command line's cluster
    helper does).
    """
    check_choice("log format", fmt, LOG_FORMATS)
    # JSON: warnings.warn(...) -> the "py.warnings" logger, formatted below (off and on
    # again: someone may have replaced warnings.showwarning since an earlier call); text:
    # Python shows them on stderr. Either way as one line without a file path.
    logging.captureWarnings(False)
    logging.captureWarnings(fmt == "json")
    _own_warnings()
    if import_dask:
        import distributed.config  # noqa: F401  (installs Dask's handlers: replace them now)
    for name, lvl in (("sdcdist", level), ("distributed", "WARNING"),
                      ("py.warnings", "WARNING")):
        # one format for every line, but a handler each: a LocalCluster started with
        # silence_logs raises the level of distributed's handlers while it runs, which
        # must not silence sdcdist's own lines
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.addHandler(handler)
        logger.setLevel(lvl)
        logger.propagate = False
    # Dask gives some child loggers (distributed.client, ...) handlers of their own
    for name, obj in list(logging.root.manager.loggerDict.items()):
        if name.startswith(("distributed.", "sdcdist.")) and isinstance(obj, logging.Logger):
            for h in list(obj.handlers):
                obj.removeHandler(h)
            obj.propagate = True


def _format_warning(message: Any, category: type, filename: str, lineno: int,
                    line: str | None = None) -> str:
    """``warnings.formatwarning`` of the command line: the message and category on one
    line, without the file path and source line (a site-packages path tells a user
    nothing)."""
    text = str(message).strip().split("\n", 1)[0]
    return f"warning: {text} ({category.__name__})\n"


def _own_warnings() -> None:
    """Format warnings with :func:`_format_warning`; drop numpy's floating-point
    RuntimeWarnings ("overflow encountered in ...", "invalid value encountered in ..."):
    they come from inside a kernel whose result is checked, and a user cannot act on
    them (a value that makes a result meaningless is refused with a message)."""
    import warnings
    warnings.formatwarning = _format_warning
    warnings.filterwarnings("ignore", message=r".* encountered in ", category=RuntimeWarning)
    warnings.filterwarnings("ignore", message=r"(Mean of empty slice|Degrees of freedom <= 0)",
                            category=RuntimeWarning)


def dask_setup(worker: Any = None) -> None:
    """Dask preload hook: a worker process logs in the command line's format.

    The cluster helper of the command line starts its LocalCluster with
    ``preload=["sdcdist.logs"]`` and the format in Dask's config
    (``sdcdist.log-format``, ``sdcdist.log-level``), which the nanny hands to
    each worker process.
    """
    import dask.config
    fmt = dask.config.get("sdcdist.log-format", None)
    if fmt in LOG_FORMATS:
        setup_logging(fmt, dask.config.get("sdcdist.log-level", "WARNING"))


def event(logger: logging.Logger, message: str, level: int = logging.INFO,
          **fields: Any) -> None:
    """Log ``message`` with structured ``fields`` (names, counts, durations only)."""
    logger.log(level, message, extra={"fields": fields})
