"""Results of an audit: its cells as records, queries, ranking tables, plots, a summary and
the cube itself (zipped). Answers are cached by the audit's state (:meth:`Service.cached`)."""

from __future__ import annotations

import asyncio
import math
import zipfile
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import FileResponse, Response
from starlette.background import BackgroundTask

from ...errors import SdcInputError, value_error
from ..helpers import Service, clean, json_answer, records
from ..results import BALANCED, balanced_table, default_ranking, metric_info
from ..store import deleted_message, new_id

__all__ = ["router"]


def _json_safe(v: Any) -> Any:
    """``v`` with every NaN or infinity (a figure not measured) as null, at any depth."""
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return clean(v)


def router(svc: Service) -> APIRouter:
    """The routes of an audit's results (``/v1/audits/{id}/cube``, ``query``, ``report``,
    ``plot``, ``summary``, ``cube.zarr.zip``), on the shared state ``svc``."""
    r = APIRouter()
    store = svc.store
    Who = Depends(svc.principal)

    @r.get("/v1/audits/{audit_id}/cube", tags=["results"])
    def cuberecords(audit_id: str, method: list[str] | None = Query(None),
                     param: list[float] | None = Query(None),
                     metric: list[str] | None = Query(None),
                     dataset: list[str] | None = Query(None),
                     who: str = Who) -> dict[str, Any]:
        """The finished cells as labelled records {dataset, method, param, replicate,
        metric, value}; filters may repeat (`?metric=DLD&metric=IL1s`) or list
        comma-separated names, each name once (a name given twice, or a filter that
        names nothing, is 422, as `query`'s `metrics`)."""
        import numpy as np

        from ...errors import check_choice
        from ...text import name_list, repeated
        asked = {"dataset": name_list(dataset, "dataset", kind="dataset"),
                 "method": name_list(method, "method", kind="method"),
                 "metric": name_list(metric, "metric", kind="metric")}
        dup = repeated(param or ())
        if dup:
            raise SdcInputError(f"param gives {', '.join(f'{p:g}' for p in dup)} more than "
                                "once; give each param value once")
        c = svc.loaded_cube(audit_id, who, squeeze=False)
        names = {k: [str(x) for x in np.atleast_1d(c[k].values)]
                 for k in ("dataset", "method", "metric")}
        params = [float(p) for p in c["param"].values]

        def pick(kind: str) -> list[int]:
            if asked[kind] is None:
                return list(range(len(names[kind])))
            return [names[kind].index(check_choice(kind, x, names[kind]))
                    for x in asked[kind]]
        di, mi, ki = pick("dataset"), pick("method"), pick("metric")
        if param:
            bad = [p for p in param if p not in params]
            if bad:
                raise SdcInputError(f"the cube has no param value {bad[0]:g}. Values in this "
                                    f"cube: {', '.join(f'{p:g}' for p in params)}.")
            pi = [params.index(p) for p in param]
        else:
            pi = list(range(len(params)))
        value = np.asarray(c["value"].values)      # (dataset, method, param, metric, rep)
        done = np.asarray(c["done"].values)        # (dataset, method, param, rep)
        out = []
        for d in di:
            for m in mi:
                for p in pi:
                    for r in np.flatnonzero(done[d, m, p]):
                        for k in ki:
                            out.append({"dataset": names["dataset"][d],
                                        "method": names["method"][m], "param": params[p],
                                        "replicate": int(r), "metric": names["metric"][k],
                                        "value": clean(float(value[d, m, p, k, r]))})
        a = store.audit(audit_id)
        return {"audit": audit_id, "status": a["status"], "records": out}

    @r.get("/v1/audits/{audit_id}/query", tags=["results"])
    async def query(audit_id: str, where: str | None = None, sort: str | None = None,
              top: int | None = Query(None, ge=1), metrics: str | None = None,
              dataset: str | None = None, who: str = Who) -> Response:
        """Cells (replicate means) matching a filter, as `sdcdist query`: `where` compares
        metric names with numbers joined by and/or (`DLD < 5 and IL1s < 20`)."""
        from ...text import name_list
        from ...cube import check_metrics
        from ...query import query as run_query
        shown = name_list(metrics, "metrics", kind="metric")

        def make() -> tuple[bytes, str]:
            c = svc.loaded_cube(audit_id, who)
            t = run_query(c, where_=where, sort=sort, top=top, dataset=dataset)
            if shown:
                check_metrics(c, shown)
                t = t[["param_name", "replicates", *shown]]
            return json_answer({"audit": audit_id, "rows": records(t) if len(t) else []})
        return await svc.cached(audit_id, who, ("query", where, sort, top, metrics, dataset), make)

    @r.get("/v1/audits/{audit_id}/report", tags=["results"])
    async def report(audit_id: str, by: str | None = Query(
                   None, description="A metric or score to rank by, or `balanced`; default: "
                                     "Score2 when the cube has its parts, else another "
                                     "score, else `balanced` (the mean of the risk rank and "
                                     "the loss rank)"),
               format: str = "csv",
               metrics: str | None = None, top: int | None = Query(None, ge=1),
               dataset: str | None = None,
               require: list[str] | None = Query(None, description="release rules METRIC "
                                                 "OP NUMBER, as `sdcdist report --require` "
                                                 "(added to the spec's `require:`)"),
               loss: str | None = None, who: str = Who) -> Response:
        """The ranking table of `sdcdist report`, as csv, md, html or json (which also says
        what it was ranked by and why, and explains each metric: unit, which end is
        better, definition). With rules (`require`, repeatable, and the spec's), each row
        says whether the cell is acceptable and which rules it breaks, and json carries
        the recommendation (`docs/release.md`)."""
        from ...text import name_list
        from ...errors import check_choice
        from ...report import html_table, markdown_table, ranking_table
        check_choice("format", format, ["csv", "md", "html", "json"])
        shown_metrics = name_list(metrics, "metrics", kind="metric")

        def make() -> tuple[bytes, str]:
            from ...cube import check_metrics
            c = svc.loaded_cube(audit_id, who)
            if shown_metrics:
                # first, whatever the ranking: a name the cube lacks is named, never dropped
                check_metrics(c, shown_metrics)
            default = default_ranking(c)
            use = by or default["by"]
            chosen = default if use == default["by"] else None
            if use == BALANCED:
                kinds = dict(zip([str(m) for m in c["metric"].values],
                                 [str(k) for k in c["metric_kind"].values]))
                names = shown_metrics or list(kinds)
                t = balanced_table(c, risks=[m for m in names if kinds.get(m) == "risk"],
                                   losses=[m for m in names
                                           if kinds.get(m) in ("loss", "utility")],
                                   dataset=dataset)
            else:
                t = ranking_table(c, by=use, metrics=shown_metrics, dataset=dataset)
            from ...rules import cube_rules, recommend
            rules = cube_rules(c, require or ())
            rec = None
            if rules:
                from ...report import with_rules
                rec = recommend(c, rules, loss=loss, dataset=dataset)
                t = with_rules(t, rec.table)
            if top:
                t = t.head(top)
            if format == "csv":
                return t.to_csv().encode(), "text/csv; charset=utf-8"
            if format == "md":
                return markdown_table(t).encode(), "text/markdown; charset=utf-8"
            if format == "html":
                a = store.audit(audit_id)
                return (html_table(t, title=f"{a['name']}: cells ranked by {use}").encode(),
                        "text/html; charset=utf-8")
            shown = [col for col in t.columns if col not in ("param_name", "replicates")
                     and not col.endswith(" rank")]
            return json_answer({"audit": audit_id, "by": use, "default": by is None,
                          "why": chosen["why"] if chosen else None,
                          "warning": chosen["warning"] if chosen else None,
                          "risk": chosen["risk"] if chosen else None,
                          "loss": chosen["loss"] if chosen else None,
                          "metrics": metric_info([m for m in shown if m != BALANCED
                                                  and m not in ("acceptable", "breaks")]),
                          "recommendation": rec.as_dict() if rec is not None else None,
                          "rows": records(t)})
        return await svc.cached(audit_id, who, ("report", by, format, metrics, top, dataset,
                                                tuple(require or ()), loss), make)

    @r.get("/v1/audits/{audit_id}/plot", tags=["results"],
           response_class=Response, responses={200: {"content": {"image/png": {}}}})
    async def plot(audit_id: str, kind: str = "tradeoff", risk: str | None = None,
             loss: str | None = None, metric: str | None = None,
             target: float | None = None, metrics: str | None = None,
             by: str | None = None, top: int | None = Query(None, ge=1),
             dataset: str | None = None, who: str = Who) -> Response:
        """A PNG plot as `sdcdist plot`: tradeoff (risk against loss, the better corner
        marked; default: the risk and loss measures of the default ranking, e.g. DLD and
        IL_S2 for Score2), curves (a metric against each parameter) or ranks (heatmap)."""
        from ...errors import check_choice
        from ...text import name_list
        check_choice("kind", kind, ["tradeoff", "curves", "ranks"])
        name_list(metrics, "metrics", kind="metric")
        if target is not None and not math.isfinite(target):
            raise value_error("target", "a finite number", target)
        return await svc.cached(
            audit_id, who, ("plot", kind, risk, loss, metric, target, metrics, by, top, dataset),
            lambda: _plot(audit_id, who, kind, risk, loss, metric, target, metrics, by, top,
                          dataset))

    def _plot(audit_id: str, who: str, kind: str, risk: str | None, loss: str | None,
              metric: str | None, target: float | None, metrics: str | None,
              by: str | None, top: int | None, dataset: str | None) -> tuple[bytes, str]:
        from ... import report as rp
        from ...text import name_list
        c = svc.loaded_cube(audit_id, who)
        tmp = store.root / "tmp" / f"{new_id('plot')}.png"
        try:
            with svc.plot_lock:
                if kind == "tradeoff":
                    # the measures of the default ranking's table, so plot and table agree
                    default = default_ranking(c)
                    risk = risk or default["risk"]
                    loss = loss or default["loss"]
                    if risk is None or loss is None:
                        raise SdcInputError("kind=tradeoff needs risk=METRIC and loss=METRIC "
                                            "(the cube has no default pair)")
                    rp.plot_tradeoff(c, risk=risk, loss=loss, out=str(tmp), dataset=dataset)
                elif kind == "curves":
                    if metric is None:
                        raise SdcInputError("kind=curves needs metric=NAME (e.g. metric=DLD)")
                    rp.plot_risk_curves(c, metric=metric, out=str(tmp), target=target,
                                        dataset=dataset)
                else:
                    rp.plot_rank_heatmap(c, out=str(tmp), metrics=name_list(
                                             metrics, "metrics", kind="metric"), by=by,
                                         top=top, dataset=dataset)
            data = tmp.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        return data, "image/png"

    @r.get("/v1/audits/{audit_id}/summary", tags=["results"])
    async def summary(audit_id: str, who: str = Who) -> Response:
        """What the cube holds and how the page shows it: its datasets, its metrics (kind,
        unit, which end is better, definition) and the default ranking (what it ranks by,
        why, and the risk and loss measures of its trade-off plot)."""
        import numpy as np

        def make() -> tuple[bytes, str]:
            c = svc.loaded_cube(audit_id, who, squeeze=False)
            names = [str(m) for m in c["metric"].values]
            a = store.audit(audit_id)
            return json_answer({"audit": audit_id, "status": a["status"],
                          "datasets": [str(d) for d in np.atleast_1d(c["dataset"].values)],
                          "methods": [str(m) for m in c["method"].values],
                          "metrics": metric_info(names),
                          "ranking": default_ranking(c)})
        return await svc.cached(audit_id, who, ("summary",), make)

    @r.get("/v1/audits/{audit_id}/cube.zarr.zip", tags=["results"],
           response_class=FileResponse)
    def cube_zip(audit_id: str, who: str = Who) -> FileResponse:
        """The cube itself, a zipped Zarr store (open it with `sdcdist.connect(...).cube()`,
        or unzip it and use `sdcdist.cube.open_cube`)."""
        svc.own_audit(audit_id, who)
        path = store.cube_path(audit_id)
        if not path.exists():
            raise HTTPException(409, "the audit has not written its cube yet")
        tmp = store.root / "tmp" / f"{new_id('zip')}.zip"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
            for f in sorted(path.rglob("*")):
                if f.is_file():
                    z.write(f, f.relative_to(path).as_posix())
        return FileResponse(tmp, media_type="application/zip",
                            filename=f"{audit_id}.zarr.zip",
                            background=BackgroundTask(tmp.unlink, missing_ok=True))

    @r.get("/v1/audits/{audit_id}/release", tags=["results"], response_class=FileResponse)
    def release(audit_id: str, method: str, param: float, replicate: int = Query(0, ge=0),
                format: str = "csv", dataset: str | None = None,
                who: str = Who) -> FileResponse:
        """The masked file of one finished cell (the release), as `sdcdist release`:
        regenerated from the audit's spec and the cell's seed, checked against the
        masked-file fingerprint the audit recorded (422 if it differs, or if the cell is
        not in the cube), written chunk by chunk; `format` csv or parquet."""
        import json

        from ...audit.spec import parse_spec
        from ...errors import check_choice
        from ...release import release as run_release
        check_choice("format", format, ["csv", "parquet"])
        a = svc.own_audit(audit_id, who)
        path = store.cube_path(audit_id)
        if not path.exists():
            raise HTTPException(409, "the audit has not written its cube yet")
        gone = store.deleted_uploads(a["spec"], who)
        if gone:
            raise HTTPException(409, deleted_message(gone))
        spec = parse_spec(json.loads(a["spec"]) if isinstance(a["spec"], str) else a["spec"],
                          base_dir=store.root)
        (store.root / "tmp").mkdir(parents=True, exist_ok=True)
        tmp = store.root / "tmp" / f"{new_id('release')}.{format}"
        try:
            rel = run_release(str(path), str(tmp), method=method, param=param,
                              replicate=replicate, dataset=dataset, spec=spec)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        name = f"{audit_id}-{rel.method}-{rel.param:g}-r{rel.replicate}.{format}"
        return FileResponse(tmp, media_type="text/csv; charset=utf-8" if format == "csv"
                            else "application/vnd.apache.parquet", filename=name,
                            headers={"X-Sdcdist-Fingerprint": rel.fingerprint},
                            background=BackgroundTask(tmp.unlink, missing_ok=True))

    def _needs_data(audit_id: str, who: str) -> None:
        """409 when a dataset the audit reads was deleted (checked before an answer made
        earlier is served from the cache: a deleted dataset's figures are not shown)."""
        gone = store.deleted_uploads(svc.own_audit(audit_id, who)["spec"], who)
        if gone:
            raise HTTPException(409, deleted_message(gone))

    def _audit_spec(audit_id: str, who: str) -> tuple[Any, Any]:
        """The audit's parsed spec and its cube's path (409 while it has no cube, or when
        a dataset it reads was deleted)."""
        import json

        from ...audit.spec import parse_spec
        a = svc.own_audit(audit_id, who)
        path = store.cube_path(audit_id)
        if not path.exists():
            raise HTTPException(409, "the audit has not written its cube yet")
        gone = store.deleted_uploads(a["spec"], who)
        if gone:
            raise HTTPException(409, deleted_message(gone))
        spec = parse_spec(json.loads(a["spec"]) if isinstance(a["spec"], str) else a["spec"],
                          base_dir=store.root)
        return spec, path

    @r.get("/v1/audits/{audit_id}/compare", tags=["results"])
    async def compare(audit_id: str, method: str, param: float,
                      replicate: int = Query(0, ge=0), dataset: str | None = None,
                      require: list[str] | None = Query(None),
                      loss: str | None = None, who: str = Who) -> Response:
        """Original against released for one finished cell, as the release report shows
        it: each variable's distribution in both files (PNG, base64), the difference of
        the association matrices (numbers and a PNG) and each risk family's figures (the
        chosen replicate, the cell's mean, the recommended cell's mean, the grid's range).
        The release is regenerated and checked against the cube's fingerprint (422 if it
        differs or the cell is not in the cube). Aggregates only."""
        from ...releasereport import comparison
        await asyncio.to_thread(_needs_data, audit_id, who)

        def make() -> tuple[bytes, str]:
            spec, path = _audit_spec(audit_id, who)
            with svc.plot_lock:
                out = comparison(str(path), method=method, param=param,
                                 replicate=replicate, require=require or (), loss=loss,
                                 dataset=dataset, spec=spec)
            return json_answer(_json_safe({"audit": audit_id, **out}))
        return await svc.cached(audit_id, who, ("compare", method, param, replicate, dataset,
                                                tuple(require or ()), loss), make)

    @r.get("/v1/audits/{audit_id}/release-report", tags=["results"],
           response_class=Response, responses={200: {"content": {"text/html": {}}}})
    async def release_report(audit_id: str, method: str, param: float,
                             replicate: int = Query(0, ge=0), variant: str = "internal",
                             dataset: str | None = None,
                             require: list[str] | None = Query(None),
                             loss: str | None = None, who: str = Who) -> Response:
        """The release report of one finished cell, as `sdcdist report CUBE --html R.html
        --chosen METHOD:PARAM:REPLICATE`: one self-contained HTML file (no network, plots
        embedded); `variant` internal (lists the riskiest records) or external (no
        record-level content); `require` adds rules to the spec's."""
        from ...errors import check_choice
        from ...releasereport import VARIANTS, build_report
        check_choice("variant", variant, list(VARIANTS))
        await asyncio.to_thread(_needs_data, audit_id, who)

        def make() -> tuple[bytes, str]:
            spec, path = _audit_spec(audit_id, who)
            with svc.plot_lock:
                text, _ = build_report(str(path), chosen=f"{method}:{param!r}:{replicate}",
                                       variant=variant, require=require or (), loss=loss,
                                       dataset=dataset, spec=spec)
            return text.encode("utf-8"), "text/html; charset=utf-8"
        resp = await svc.cached(audit_id, who, ("release-report", method, param, replicate,
                                                variant, dataset, tuple(require or ()), loss),
                                make)
        name = f"{audit_id}-{method}-{param:g}-r{replicate}-{variant}.html"
        return Response(resp.body, media_type="text/html; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    return r
