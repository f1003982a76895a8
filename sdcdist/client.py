"""``sdcdist.connect(url)``: the audit service from Python, a remote cube read like a local one.

>>> svc = sdcdist.connect("https://sdc.example.org", token="...")   # doctest: +SKIP
>>> ds = svc.upload("people.csv", keys="AGE,INCOME")                 # doctest: +SKIP
>>> audit = svc.submit("spec.yaml", dataset=ds)                      # doctest: +SKIP
>>> audit.wait()                                                     # doctest: +SKIP
>>> cube = audit.cube()            # the xarray cube open_cube gives  # doctest: +SKIP
>>> cube.sel(method="rankswap", metric="DLD").mean("replicate")      # doctest: +SKIP

Errors the service reports for your input (HTTP 4xx) raise
:class:`~sdcdist.errors.SdcInputError` with the service's one-line message;
``PermissionError`` for 401, ``LookupError`` for 404.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import SdcInputError

__all__ = ["connect", "Service", "RemoteAudit"]


def connect(url: str, *, token: str | None = None, timeout: float = 60.0,
            verify: bool | str = True) -> "Service":
    """A connection to an ``sdcdist serve`` service.

    Parameters
    ----------
    url : str
        The service's address, e.g. ``http://127.0.0.1:8000``.
    token : str, optional
        The bearer token (default: the ``SDCDIST_TOKEN`` environment variable).
    timeout : float
        Seconds to wait for one request.
    verify : bool or str
        TLS verification: True, False, or a CA bundle file.
    """
    return Service(url, token=token if token is not None else os.environ.get("SDCDIST_TOKEN"),
                   timeout=timeout, verify=verify)


class Service:
    """The service's datasets and audits (see :func:`connect`)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0,
                 verify: bool | str = True):
        import httpx
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout,
                                 verify=verify)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Service":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"sdcdist.connect({self.url!r})"

    # -- plumbing ------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; an error status raises (see the module docstring)."""
        if method != "GET" and "authorization" not in self.http.headers \
                and "x-sdcdist-csrf" not in self.http.headers:
            # a service without tokens wants its per-start token on uploads
            got = self.http.get("/v1/csrf")
            if got.status_code == 200:
                self.http.headers["X-Sdcdist-Csrf"] = got.json()["token"]
        r = self.http.request(method, path, **kwargs)
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except (ValueError, AttributeError):
                detail = r.text
            if r.status_code == 401:
                raise PermissionError(f"the service refused the token: {detail}")
            if r.status_code == 404:
                raise LookupError(str(detail))
            if r.status_code < 500:
                raise SdcInputError(str(detail))
            raise RuntimeError(f"the service failed ({r.status_code}): {detail}")
        return r

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items()
                                                 if v is not None}).json()

    # -- datasets -------------------------------------------------------------------
    def upload(self, path: str | os.PathLike, *, name: str | None = None,
               keys: str | list[str] | None = None,
               confidential: str | list[str] | None = None,
               columns: str | list[str] | None = None,
               categorical: str | list[str] | None = None,
               weight: str | None = None,
               household: str | None = None) -> dict[str, Any]:
        """Upload a CSV or Parquet file with its columns' roles, as ``sdcdist ingest``.

        Parameters
        ----------
        path : the file (.csv, .csv.gz, .tsv, .parquet)
        name : the dataset's name (default: the file name without extension)
        keys, confidential : columns of those roles (a list, or comma-separated)
        columns : keep only these columns
        categorical : integer-coded columns to store as categorical (text columns are
            categorical anyway)
        weight : the sampling-weight column (positive values)
        household : the household id column (for the household risks HR_*; never a key,
            the weight or confidential)

        Returns
        -------
        dict
            ``{id, rows, columns, sha256, name, roles, schema}``; ``schema`` lists each
            column's ``type`` (numeric or categorical), number of ``categories`` and
            ``roles``, so a column read as categorical by accident shows at once.
        """
        def csv(v: Any) -> str | None:
            return ",".join(v) if isinstance(v, (list, tuple)) else v
        form = {k: v for k, v in {"name": name, "keys": csv(keys),
                                  "confidential": csv(confidential),
                                  "columns": csv(columns),
                                  "categorical": csv(categorical),
                                  "weight": weight,
                                  "household": household}.items() if v}
        p = Path(path)
        with p.open("rb") as f:
            return self.request("POST", "/v1/datasets", files={"file": (p.name, f)},
                                data=form).json()

    def datasets(self) -> list[dict[str, Any]]:
        return self.get("/v1/datasets")

    def methods(self) -> list[dict[str, Any]]:
        return self.get("/v1/methods")

    def metrics(self) -> list[dict[str, Any]]:
        return self.get("/v1/metrics")

    # -- audits ---------------------------------------------------------------------
    def submit(self, spec: str | os.PathLike | Mapping[str, Any], *,
               dataset: str | Mapping[str, Any] | None = None) -> "RemoteAudit":
        """Submit a spec: a mapping, a YAML file's path, or YAML text.

        ``dataset`` (an uploaded dataset or its id) replaces the spec's
        ``dataset`` by ``{id: ...}``, keeping its ``name`` and ``keys``.
        """
        if isinstance(spec, Mapping):
            doc: Any = dict(spec)
        else:
            from .yamlsafe import load_yaml
            text = str(spec)
            if "\n" not in text and Path(text).is_file():
                text = Path(text).read_text(encoding="utf-8")
            doc = load_yaml(text, what="the spec")
        if dataset is not None:
            ds_id = dataset["id"] if isinstance(dataset, Mapping) else str(dataset)
            old = doc.get("dataset") if isinstance(doc.get("dataset"), Mapping) else {}
            doc["dataset"] = {"id": ds_id, **{k: v for k, v in old.items()
                                              if k in ("name", "keys", "columns", "roles")}}
        r = self.request("POST", "/v1/audits", content=json.dumps(doc),
                         headers={"Content-Type": "application/json"}).json()
        return RemoteAudit(self, r["id"])

    def audits(self) -> list["RemoteAudit"]:
        return [RemoteAudit(self, a["id"]) for a in self.get("/v1/audits")]

    def audit(self, audit_id: str) -> "RemoteAudit":
        return RemoteAudit(self, audit_id)


class RemoteAudit:
    """An audit on the service: its status, results and cube."""

    def __init__(self, service: Service, audit_id: str):
        self.service, self.id = service, audit_id

    def __repr__(self) -> str:
        return f"<RemoteAudit {self.id}>"

    def status(self) -> dict[str, Any]:
        """``{status, cells_done, cells_total, started, finished, error, ...}``."""
        return self.service.get(f"/v1/audits/{self.id}")

    def wait(self, *, progress: bool | None = None, poll: float = 0.5,
             timeout: float | None = None) -> dict[str, Any]:
        """Wait until the audit ends (a progress bar on stderr when it is a terminal).

        Raises :class:`SdcInputError` if it failed, ``TimeoutError`` after ``timeout``
        seconds; returns its final status.
        """
        show = sys.stderr.isatty() if progress is None else progress
        t0 = time.monotonic()
        bar = None
        shown = 0
        try:
            while True:
                s = self.status()
                if show:
                    if bar is None and s["cells_total"]:
                        import click
                        bar = click.progressbar(length=s["cells_total"], label=self.id,
                                                show_pos=True, file=sys.stderr)
                        bar.__enter__()
                    if bar is not None and s["cells_done"] > shown:
                        bar.update(s["cells_done"] - shown)
                        shown = s["cells_done"]
                if s["status"] in ("done", "failed", "cancelled"):
                    break
                if timeout is not None and time.monotonic() - t0 > timeout:
                    raise TimeoutError(f"audit {self.id} not finished after {timeout:g} s "
                                       f"({s['cells_done']} of {s['cells_total']} cells)")
                time.sleep(poll)
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)
        if s["status"] == "failed":
            raise SdcInputError(f"audit {self.id} failed: {s['error']}")
        return s

    def cancel(self) -> dict[str, Any]:
        return self.service.request("DELETE", f"/v1/audits/{self.id}").json()

    def records(self, **filters: Any) -> list[dict[str, Any]]:
        """The finished cells' values as records (filters: method, param, metric, dataset)."""
        return self.service.get(f"/v1/audits/{self.id}/cube", **filters)["records"]

    def query(self, where: str | None = None, *, sort: str | None = None,
              top: int | None = None) -> Any:
        """``sdcdist query`` on the service, as a pandas table indexed by (method, param)."""
        import pandas as pd
        rows = self.service.get(f"/v1/audits/{self.id}/query", where=where, sort=sort,
                                top=top)["rows"]
        df = pd.DataFrame(rows)
        return df.set_index(["method", "param"]) if len(df) else df

    def report(self, by: str | None = None, *, format: str = "csv",
               dataset: str | None = None) -> str:
        """The ranking table (csv, md, html or json text). ``by`` defaults to the
        service's risk-utility default: Score2 when the cube has its parts, else another
        score, else ``balanced`` (the mean of the risk rank and the loss rank)."""
        params = {k: v for k, v in {"by": by, "format": format, "dataset": dataset}.items()
                  if v is not None}
        r = self.service.request("GET", f"/v1/audits/{self.id}/report", params=params)
        return r.text

    def summary(self) -> dict[str, Any]:
        """``{datasets, methods, metrics, ranking}``: the cube's datasets and methods, each
        metric's unit, better end and definition, and the default ranking (what it ranks
        by and why, and the risk and loss measures of its trade-off plot)."""
        return self.service.get(f"/v1/audits/{self.id}/summary")

    def cube(self, *, squeeze: bool = True, cache: str | os.PathLike | None = None) -> Any:
        """The audit's cube: downloaded (``cube.zarr.zip``), unpacked into ``cache``
        (default ``$XDG_CACHE_HOME/sdcdist/cubes``, else ``~/.cache/sdcdist/cubes``;
        each download replaces the last of this audit) and opened lazily with
        :func:`sdcdist.cube.open_cube`, as a local cube is."""
        from urllib.parse import urlsplit

        from .cube import open_cube
        base = Path(cache) if cache is not None else Path(
            os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sdcdist" / "cubes"
        where = urlsplit(self.service.url)
        folder = base / f"{where.hostname}-{where.port or 0}"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{self.id}.zarr"
        with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
            zpath = Path(tmp) / "cube.zip"
            with self.service.http.stream("GET", f"/v1/audits/{self.id}/cube.zarr.zip") as r:
                if r.status_code >= 400:
                    r.read()
                    self.service.request("GET", f"/v1/audits/{self.id}")  # raises the reason
                    raise SdcInputError(f"the service has no cube for audit {self.id} yet")
                with zpath.open("wb") as f:
                    for chunk in r.iter_bytes():
                        f.write(chunk)
            unpacked = Path(tmp) / "cube.zarr"
            with zipfile.ZipFile(zpath) as z:
                for info in z.infolist():
                    if not (unpacked / info.filename).resolve().is_relative_to(
                            unpacked.resolve()):
                        raise SdcInputError("the cube archive holds a path outside its "
                                            "folder")
                z.extractall(unpacked)
            if target.exists():
                shutil.rmtree(target)
            os.replace(unpacked, target)
        return open_cube(str(target), squeeze=squeeze)
