"""Structured logs: one JSON object per line, Dask's loggers included; no tracebacks."""

from __future__ import annotations

import io
import json
import logging

import pytest

from sdcdist.logs import event, setup_logging


@pytest.fixture
def restore_logging():
    saved = {n: (lg.handlers[:], lg.level, lg.propagate)
             for n, lg in logging.root.manager.loggerDict.items()
             if isinstance(lg, logging.Logger) and n.startswith(("sdcdist", "distributed"))}
    yield
    for n, (h, level, prop) in saved.items():
        lg = logging.getLogger(n)
        lg.handlers[:] = h
        lg.setLevel(level)
        lg.propagate = prop


def test_json_lines_for_sdcdist_and_dask_loggers(restore_logging):
    buf = io.StringIO()
    setup_logging("json", "INFO", stream=buf)
    event(logging.getLogger("sdcdist.audit"), "cell written", method="noise", param=0.1,
          replicate=0, seconds=0.25)
    logging.getLogger("distributed.client").warning("lost %d keys", 3)
    try:
        raise KeyError("private detail")
    except KeyError:
        logging.getLogger("distributed.worker").exception("task failed")
    lines = buf.getvalue().splitlines()
    recs = [json.loads(ln) for ln in lines]  # every line is JSON
    assert recs[0]["event"] == "cell written" and recs[0]["param"] == 0.1
    assert recs[0]["level"] == "info" and recs[0]["time"].endswith("Z")
    assert recs[1] == {**recs[1], "logger": "distributed.client", "event": "lost 3 keys"}
    assert recs[2]["exception"] == "KeyError" and "private detail" not in buf.getvalue()
    assert len(lines) == 3  # no traceback lines


def test_text_format_and_idempotence(restore_logging):
    buf = io.StringIO()
    setup_logging("text", "INFO", stream=buf)
    setup_logging("text", "INFO", stream=buf)  # a second call does not double lines
    event(logging.getLogger("sdcdist.audit"), "audit finished", computed=4)
    out = buf.getvalue().splitlines()
    assert len(out) == 1 and out[0].endswith("sdcdist.audit: audit finished computed=4")
    with pytest.raises(ValueError):
        setup_logging("xml")


def test_a_silenced_local_cluster_keeps_sdcdist_lines(restore_logging):
    """LocalCluster(silence_logs=ERROR) raises distributed's handlers to ERROR while it
    runs; sdcdist's own info lines (connected, cell written) must still come out."""
    from distributed.utils import silence_logging_cmgr
    buf = io.StringIO()
    setup_logging("json", "INFO", stream=buf)
    with silence_logging_cmgr(logging.ERROR):
        event(logging.getLogger("sdcdist.audit"), "cell written", method="noise")
        logging.getLogger("distributed.worker").warning("silenced")
    recs = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    assert [r["event"] for r in recs] == ["cell written"]

