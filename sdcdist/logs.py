"""Logging for the command line: plain text, or one JSON object per line.

Log records carry event names, counts, cell labels (method, parameter,
replicate), durations and addresses; never record values. Structured fields
go in ``extra={"fields": {...}}`` so the JSON lines stay machine-readable::

    log.info("cell done", extra={"fields": {"method": "noise", "param": 0.1}})
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

from .errors import check_choice

__all__ = ["setup_logging", "JsonFormatter", "TextFormatter", "event", "LOG_FORMATS"]

LOG_FORMATS = ("text", "json")
_HANDLER_NAME = "sdcdist-cli"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, event, fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info and record.exc_info[0] is not None:
            out["exception"] = record.exc_info[0].__name__
        return json.dumps(out, default=str, sort_keys=False)


class TextFormatter(logging.Formatter):
    """``time level logger: event key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None) or {}
        tail = "".join(f" {k}={v}" for k, v in fields.items())
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        return f"{stamp} {record.levelname.lower():7s} {record.name}: {record.getMessage()}{tail}"


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
    if import_dask:
        import distributed.config  # noqa: F401  (installs Dask's handlers: replace them now)
    for name, lvl in (("sdcdist", level), ("distributed", "WARNING")):
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


def event(logger: logging.Logger, message: str, level: int = logging.INFO,
          **fields: Any) -> None:
    """Log ``message`` with structured ``fields`` (names, counts, durations only)."""
    logger.log(level, message, extra={"fields": fields})
