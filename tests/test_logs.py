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



# -- JSON mode: every stderr line is one JSON object (issue 14, item 10) ----------------------

def test_json_lines_wraps_plain_lines_and_passes_json_through():
    from sdcdist.logs import JsonLines
    buf = io.StringIO()
    s = JsonLines(buf)
    s.write('{"time": "t", "event": "cell written"}\n')
    s.write("Error: something ")
    s.write("went wrong\nWarning: careful\n\n")
    s.write("cells  1/4\rcells  2/4\r")          # a progress bar's carriage returns
    s.write("Traceback (most recent call last):\n  File x\n")
    s.close_line()
    recs = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    assert recs[0] == {"time": "t", "event": "cell written"}
    assert recs[1]["event"] == "Error: something went wrong" and recs[1]["level"] == "error"
    assert recs[2]["level"] == "warning" and recs[2]["logger"] == "stderr"
    assert [r["event"] for r in recs[3:5]] == ["cells  1/4", "cells  2/4"]
    assert recs[5]["level"] == "error" and len(recs) == 7
    assert not s.isatty()


def test_warnings_are_logged_in_the_format(restore_logging):
    import warnings
    buf = io.StringIO()
    setup_logging("json", "INFO", stream=buf)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("careful now", UserWarning)
    finally:
        logging.captureWarnings(False)
    recs = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    assert len(recs) == 1 and recs[0]["logger"] == "py.warnings"
    assert "careful now" in recs[0]["event"]


def test_multiline_messages_keep_their_first_line_only(restore_logging):
    """Dask's "Compute Failed" message goes on with the task's exception text."""
    buf = io.StringIO()
    setup_logging("json", "INFO", stream=buf)
    logging.getLogger("distributed.worker").error(
        "Compute Failed\nKey: f-1\nException: \"ValueError('7919.123456')\"")
    recs = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    assert recs == [{**recs[0], "event": "Compute Failed"}]
    assert "7919" not in buf.getvalue()


def test_cli_error_lines_are_json(tmp_path):
    from click.testing import CliRunner

    from sdcdist.cli import main
    res = CliRunner().invoke(main, ["--log-format", "json", "report",
                                    str(tmp_path / "missing.zarr"), "--by", "IL1s"])
    assert res.exit_code == 2
    lines = res.stderr.splitlines()
    recs = [json.loads(ln) for ln in lines]
    assert any(r["level"] == "error" and r["event"].startswith("Error: ") for r in recs)


WORKER_SCRIPT = """
import warnings
from sdcdist.cli._common import ClusterOptions, cluster, main

@main.command("boom")
def boom():
    warnings.warn("a warning")
    with cluster(ClusterOptions(workers=1)) as c:
        def f(x):
            raise ValueError("secret 7919.123456")
        try:
            c.submit(f, 1).result()
        except ValueError:
            pass

if __name__ == "__main__":
    main()
"""


def test_local_cluster_workers_log_json_and_no_dashboard_text(tmp_path):
    """Workers of the LocalCluster are other processes writing to the same stderr: their
    "Compute Failed" lines are JSON too, without the exception text; the dashboard
    address is in the "connected" JSON line instead of a plain "Dask dashboard:" line."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    script = tmp_path / "boom.py"
    script.write_text(WORKER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("SDCDIST_LOG_FORMAT", None)
    p = subprocess.run([sys.executable, str(script), "--log-format", "json", "boom"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    recs = [json.loads(ln) for ln in p.stderr.splitlines()]  # every line is JSON
    events = [r["event"] for r in recs]
    assert "connected" in events and "Compute Failed" in events
    assert any(r["logger"] == "py.warnings" for r in recs)
    assert "7919" not in p.stderr and "Dask dashboard" not in p.stderr


FORGED = ("/v1/datasets/\n17:00:00 info    sdcdist.service: FAKE audit finished"
          "\r\x1b[31m\x00\x7f\x85\u2028\u2029 status=200")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_control_characters_of_a_field_or_message_are_escaped(restore_logging, fmt):
    """A value taken from a request (a URL path) cannot end its line and forge another,
    nor write a raw escape, NUL, DEL, C1 or Unicode separator, at any level; in text lines
    a value with a space is quoted, so it cannot pass for further fields."""
    buf = io.StringIO()
    setup_logging(fmt, "DEBUG", stream=buf)
    log = logging.getLogger("sdcdist.service")
    for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR):
        event(log, "request", level, path=FORGED, status=404)
    log.warning("odd name %s", "a\x1bb\u2028c\rd")
    out = buf.getvalue()
    lines = out.split("\n")
    assert lines[-1] == "" and len(lines) == 6, out
    assert not any(c in out for c in "\r\x1b\x00\x7f\x85\u2028\u2029"), repr(out)
    if fmt == "json":
        recs = [json.loads(ln) for ln in lines[:-1]]
        assert all(r["path"] == FORGED and r["status"] == 404 for r in recs[:4])
        assert recs[4]["event"] == "odd name a\x1bb\u2028c\rd"
    else:
        assert all(ln.endswith(" status=404") for ln in lines[:4]), out
        assert ('path="/v1/datasets/\\n17:00:00 info    sdcdist.service: FAKE audit finished'
                '\\r\\x1b[31m\\x00\\x7f\\x85\\u2028\\u2029 status=200"') in lines[0], out
        assert lines[4].endswith("odd name a\\x1bb\\u2028c\\rd"), out


def test_the_access_log_escapes_a_forged_path(restore_logging, tmp_path):
    """The service's request line: a path with an encoded line feed, escape or NUL stays
    one line, its characters shown escaped."""
    import warnings

    from sdcdist.service.app import ServiceConfig, create_app
    from sdcdist.service.store import Store
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    buf = io.StringIO()
    setup_logging("text", "DEBUG", stream=buf, import_dask=False)
    app = create_app(ServiceConfig(root=tmp_path / "root"), store=Store(tmp_path / "root"))
    with TestClient(app) as c:
        r = c.get("/v1/datasets/%0A17:00:00%20info%20%20%20%20sdcdist.service:%20FAKE%20audit"
                  "%20finished%1b[31m%00")
        assert r.status_code == 404
    lines = [ln for ln in buf.getvalue().splitlines() if " request " in ln]
    assert len(lines) == 1 and "FAKE" in lines[0], buf.getvalue()
    assert not any("FAKE" in ln and ln.startswith("17:00:00")
                   for ln in buf.getvalue().splitlines())
    assert '/v1/datasets/\\n17:00:00 info' in lines[0] and "\\x1b[31m\\x00" in lines[0]
    assert "\x1b" not in buf.getvalue() and "\x00" not in buf.getvalue()
