"""Compare methods at equal risk (or equal utility) [DRS §3].

For each dataset and method of a spec, find the parameter at which the mean
of a metric over replicates equals a target:

1. evaluate the metric on the method's coarse grid (the spec's ``params``);
2. take the first pair of neighbouring grid values whose means straddle the
   target (a grid value within the tolerance is taken as it is);
3. continuous parameters: bisection inside the bracket, each probe masked and
   measured ``replicates`` times (seeds as in an audit, so a probe at a grid
   value reproduces the audit's cells), until the mean is within the
   tolerance; integer parameters: bisection down to two neighbouring
   integers, then the one whose mean is nearest to the target;
4. evaluate every metric of the spec at the calibrated parameter.

A method whose curve never reaches the target on its grid is reported as
``unreachable`` with the range it does reach; nothing is clipped to an end of
the grid. All probes of a round (every method and dataset, every replicate)
run on the cluster at once, through the audit's cell executor: a probe is a
whole task on small files, and spreads its masking and metric pieces over the
cluster on large ones (the ``cell_mode`` and ``task_cell_limit`` options, as
in an audit; the results are the same bit for bit).

The results form a small cube (Zarr): ``calibrated_param`` and
``achieved_risk`` (``achieved_utility`` in the dual) per (dataset, method),
``achieved_sd`` (sd over replicates), ``status``, ``reach_low``/``reach_high``,
``value`` (dataset, method, metric) with every metric at the calibrated
parameter, and the probes (``probe_param``, ``probe_value``) behind each
curve.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .. import cube as cubemod
from ..data.staging import check_replaceable
from ..errors import SdcInputError, check_choice, param_error, unreadable_error
from ..masking import get_method
from ..metrics import expand_requirements, get_metric
from .plan import Cell, cell_seed
from ..parallel import CellExecutor, Runner
from .run import (input_paths, spec_method_options, library_versions, load_data, load_holdouts,
                  options_cell_mode, run_cells)
from .spec import AuditSpec, load_spec, stored_spec

__all__ = ["calibrate", "CalibrationResult", "calibration_table", "open_calibration",
           "calibrate_rules"]

STATUS = {
    "ok": "mean within the tolerance of the target",
    "nearest": "integer parameter: the feasible value nearest to the target",
    "unreachable": "the curve never reaches the target on the method's grid",
    "not converged": "bisection stopped (iterations or parameter resolution) outside the "
                     "tolerance; the closest probe is reported",
}


@dataclass
class CalibrationResult:
    """Where the calibration cube is, its table, and how much work it took."""

    cube: str | None
    table: pd.DataFrame
    probes: int
    seconds: float


@dataclass
class _Curve:
    """The calibration state of one (dataset, method)."""

    d: int
    method: str
    kind: str
    points: dict[float, tuple[float, float]]   # param -> (mean, sd)
    lo: float = np.nan
    hi: float = np.nan
    param: float = np.nan
    status: str = ""

    def closest(self, target: float, among: Sequence[float] | None = None) -> float:
        ps = list(among) if among is not None else list(self.points)
        return min(ps, key=lambda p: (abs(self.points[p][0] - target), p))


def check_request(spec: AuditSpec, metric: str, mode: str, target: float) -> None:
    """Raise :class:`SdcInputError` for a calibration that cannot be run as asked."""
    m = get_metric(metric)
    if mode == "risk" and m.kind != "risk":
        raise SdcInputError(f"--risk needs a risk metric; {metric!r} is a {m.kind} metric "
                            "(use --utility for loss and utility metrics)")
    if mode == "utility" and m.kind not in ("utility", "loss"):
        raise SdcInputError(f"--utility needs a utility or loss metric; {metric!r} is a "
                            f"{m.kind} metric (use --risk for risk metrics)")
    if not np.isfinite(target):
        raise param_error("target", "calibrate", "a finite number", target)
    for i, ms in enumerate(spec.methods):
        if get_method(ms.name).kind != "none" and len(ms.params) < 2:
            raise SdcInputError(
                f"calibration brackets the target on each method's grid, and methods[{i}] "
                f"({ms.name}) has {len(ms.params)} parameter value; give at least two values "
                "spanning the range to search")


def calibrate(spec: AuditSpec | str | Path, *, metric: str, target: float,
              mode: str = "risk", out: str | Path | None = None, client: Any = None,
              tol: float | None = None, max_iter: int = 20, overwrite: bool = False,
              on_round: Callable[[str, int], None] | None = None,
              data: list | None = None) -> CalibrationResult:
    """Find each method's parameter giving ``metric == target`` and measure the spec there.

    Parameters
    ----------
    spec : AuditSpec or path
        Datasets, methods (their ``params`` are the coarse grid), replicates,
        metrics (measured at the calibrated parameters), seed and options.
    metric : str
        The metric to calibrate on (a risk metric, or a utility/loss metric
        when ``mode="utility"``).
    target : float
        The level to reach (mean over replicates).
    mode : {"risk", "utility"}
        Equal risk (compare utilities) or equal utility (compare risks).
    out : path or URL, optional
        Zarr store for the calibration cube.
    client : distributed.Client, optional
        Run the probes there; ``None`` runs them here.
    tol : float, optional
        Absolute tolerance on the mean; default 1 % of ``|target|`` (1e-3 if 0).
    max_iter : int
        Bisection rounds at most.
    overwrite : bool
        Replace an existing ``out``.
    on_round : callable, optional
        Called before each round of probes with its name ("grid", "bisection 1",
        ..., "final") and how many (dataset, method, parameter) probes it runs.
    data : list, optional
        The spec's datasets as :func:`sdcdist.audit.run.load_data` returns them
        (read and checked here if not given).

    Returns
    -------
    CalibrationResult
    """
    t0 = time.perf_counter()
    check_choice("calibration mode", mode, ("risk", "utility"))
    if not isinstance(spec, AuditSpec):
        spec = load_spec(spec)
    target = float(target)
    check_request(spec, metric, mode, target)
    tol = float(tol) if tol is not None else (0.01 * abs(target) if target != 0 else 1e-3)
    if not tol > 0:
        raise param_error("tol", "calibrate", "a number > 0", tol)
    if out is not None:
        out = str(out)
        check_replaceable(out, what="out", kind="calibration", inputs=input_paths(spec))
        if Path(out).exists() and not overwrite:
            raise SdcInputError(f"{out!r} exists; choose another --out or pass --overwrite")
    if data is None:
        data = load_data(spec)
    probe_metrics = tuple(expand_requirements([metric]))
    final_metrics = tuple(expand_requirements([*spec.metrics, metric]))
    ev = _Evaluator(spec, data, client)

    curves = [_Curve(d, ms.name, get_method(ms.name).kind, {})
              for d in range(len(data)) for ms in spec.methods]
    grids = {ms.name: list(ms.params) for ms in spec.methods}
    rounds = 0
    pending = [(c, p) for c in curves for p in grids[c.method]]
    if on_round:
        on_round("grid", len(pending))
    _measure(ev, pending, probe_metrics, metric)
    for c in curves:
        _start(c, grids[c.method], target, tol)
    while True:
        active = [c for c in curves if not c.status]
        if not active or rounds >= max_iter:
            break
        rounds += 1
        mids = []
        for c in active:
            mid = _midpoint(c)
            if mid is None:
                c.param = c.closest(target, [c.lo, c.hi])
                c.status = "ok" if abs(c.points[c.param][0] - target) <= tol else (
                    "nearest" if c.kind == "int" else "not converged")
            else:
                mids.append((c, mid))
        if not mids:
            break
        if on_round:
            on_round(f"bisection {rounds}", len(mids))
        _measure(ev, mids, probe_metrics, metric)
        for c, mid in mids:
            v = c.points[mid][0]
            if abs(v - target) <= tol:
                c.param, c.status = mid, "ok"
            elif (v - target) * (c.points[c.lo][0] - target) > 0:
                c.lo = mid
            else:
                c.hi = mid
    for c in curves:
        if not c.status:
            c.param = c.closest(target, [c.lo, c.hi])
            c.status = "ok" if abs(c.points[c.param][0] - target) <= tol else "not converged"

    finals = {(c.d, c.method, c.param): c for c in curves if np.isfinite(c.param)}
    if on_round:
        on_round("final", len(finals))
    values = ev.evaluate(list(finals), final_metrics)
    ds_out = _result_dataset(spec, data, curves, values, final_metrics, metric=metric,
                             target=target, tol=tol, mode=mode, max_iter=max_iter)
    if out is not None:
        if Path(out).exists():   # with overwrite (checked above): replaced only now
            shutil.rmtree(out)
        from .. import checksums, integrity
        encoding = {name: {"compressors": checksums.compressors()} for name in ds_out.variables}
        ds_out.to_zarr(out, mode="w-", consolidated=False, encoding=encoding)
        import zarr
        g = zarr.open_group(out, mode="r+")
        integrity.seal(g, arrays_sha256={name: integrity.array_sha256(a)
                                         for name, a in sorted(g.arrays())})
    table = calibration_table(ds_out)
    return CalibrationResult(out, table, ev.probes, time.perf_counter() - t0)


def _start(c: _Curve, grid: list[float], target: float, tol: float) -> None:
    """Bracket the target on the coarse grid (or settle the curve at once)."""
    ps = np.array(sorted(grid), dtype=float)
    vs = np.array([c.points[p][0] for p in ps])
    near = [p for p, v in zip(ps, vs) if abs(v - target) <= tol]
    hit = cubemod.crossing(ps, vs, target)
    if near:
        c.param, c.status = c.closest(target, near), "ok"
    elif hit is None:
        c.status = "unreachable"
    else:
        c.lo, c.hi = float(ps[hit[0]]), float(ps[hit[1]])


def _midpoint(c: _Curve) -> float | None:
    """The next probe inside the bracket, or None when the bracket cannot shrink."""
    if c.kind == "int":
        if c.hi - c.lo <= 1:
            return None
        return float(np.floor((c.lo + c.hi) / 2))
    mid = (c.lo + c.hi) / 2
    if not c.lo < mid < c.hi or abs(c.hi - c.lo) <= 1e-9 * max(abs(c.lo), abs(c.hi), 1.0):
        return None
    return mid


def _measure(ev: "_Evaluator", probes: list[tuple[_Curve, float]], metrics: tuple[str, ...],
             metric: str) -> None:
    res = ev.evaluate([(c.d, c.method, p) for c, p in probes], metrics)
    for c, p in probes:
        reps = res[c.d, c.method, p][metric]
        c.points[p] = (float(np.mean(reps)), float(np.std(reps, ddof=1)) if len(reps) > 1
                       else 0.0)


class _Evaluator:
    """Runs probes (mask + measure, replicates) here or on a cluster, memoised."""

    def __init__(self, spec: AuditSpec, data: list, client: Any):
        self.spec, self.data = spec, data
        self.options = dict(spec.options)
        self.mode = options_cell_mode(self.options, max(md.values.shape[0] for md, _ in data))
        self.executor = CellExecutor(Runner(client),
                                     {d: md.values for d, (md, _) in enumerate(data)})
        self.mopts = {(d, m.name): spec_method_options(spec, data[d][0].columns,
                                                   data[d][0].roles, m.name,
                                                   categorical=data[d][0].categories)
                      for d in range(len(data)) for m in spec.methods}
        self.holdouts = load_holdouts(spec, data)     # the dcr_* metrics read them
        self.cache: dict[tuple, dict[str, list[float]]] = {}
        self.probes = 0

    def _cells(self, d: int, method: str, param: float) -> list[Cell]:
        reps = self.spec.replicates if get_method(method).random else 1
        name = self.spec.datasets[d].name
        out = []
        for r in range(reps):
            ent, key = cell_seed(self.spec.seed, name, method, param, r)
            out.append(Cell(method, float(param), r, -1, -1, ent, key, name, d))
        return out

    def evaluate(self, probes: list[tuple[int, str, float]], metrics: tuple[str, ...]
                 ) -> dict[tuple[int, str, float], dict[str, list[float]]]:
        """probe -> metric -> values over replicates."""
        todo = [p for p in dict.fromkeys(probes)
                if not all(m in self.cache.get((p, metrics), {}) for m in metrics)]
        jobs = [(p, c) for p in todo for c in self._cells(*p)]
        self.probes += len(jobs)
        cells = [c for _, c in jobs]
        slot_of = {id(c): i for i, c in enumerate(cells)}
        results: list[Any] = [None] * len(cells)

        def keep(c: Cell, res: dict[str, np.ndarray]) -> None:
            results[slot_of[id(c)]] = res
        run_cells(self.executor, cells, self.data, self.mopts, metrics, self.options,
                  mode=self.mode, on_done=keep, holdouts=self.holdouts)
        for (p, c), res in zip(jobs, results):
            slot = self.cache.setdefault((p, metrics), {m: [] for m in metrics})
            for i, m in enumerate(metrics):
                slot[m].append(float(res["values"][i]))
        return {p: self.cache[p, metrics] for p in probes}


def _result_dataset(spec: AuditSpec, data: list, curves: list[_Curve], values: dict,
                    metrics: tuple[str, ...], *, metric: str, target: float, tol: float,
                    mode: str, max_iter: int) -> xr.Dataset:
    names = [d.name for d in spec.datasets]
    methods = [m.name for m in spec.methods]
    D, M, K = len(names), len(methods), len(metrics)
    P = max(len(c.points) for c in curves)
    cal = np.full((D, M), np.nan)
    ach = np.full((D, M), np.nan)
    sd = np.full((D, M), np.nan)
    lo = np.full((D, M), np.nan)
    hi = np.full((D, M), np.nan)
    status = np.empty((D, M), dtype=object)
    val = np.full((D, M, K), np.nan)
    pp = np.full((D, M, P), np.nan)
    pv = np.full((D, M, P), np.nan)
    for c in curves:
        mi = methods.index(c.method)
        pts = sorted(c.points)
        pp[c.d, mi, :len(pts)] = pts
        pv[c.d, mi, :len(pts)] = [c.points[p][0] for p in pts]
        means = [c.points[p][0] for p in pts]
        lo[c.d, mi], hi[c.d, mi] = min(means), max(means)
        status[c.d, mi] = c.status
        if np.isfinite(c.param):
            cal[c.d, mi] = c.param
            ach[c.d, mi], sd[c.d, mi] = c.points[c.param]
            v = values[c.d, c.method, c.param]
            val[c.d, mi] = [np.mean(v[m]) for m in metrics]
    kinds = [get_metric(m) for m in metrics]
    achieved = "achieved_risk" if mode == "risk" else "achieved_utility"
    dm = ("dataset", "method")
    return xr.Dataset(
        {"calibrated_param": (dm, cal), achieved: (dm, ach), "achieved_sd": (dm, sd),
         "status": (dm, status.astype(str).astype(object)),
         "reach_low": (dm, lo), "reach_high": (dm, hi),
         "value": (dm + ("metric",), val),
         "probe_param": (dm + ("probe",), pp), "probe_value": (dm + ("probe",), pv)},
        coords={"dataset": np.array(names, dtype=object),
                "method": np.array(methods, dtype=object),
                "metric": np.array(metrics, dtype=object), "probe": np.arange(P),
                "param_name": ("method", np.array([get_method(m).param for m in methods],
                                                  dtype=object)),
                "metric_kind": ("metric", np.array([k.kind for k in kinds], dtype=object)),
                "ascending": ("metric", np.array([k.ascending for k in kinds], np.int8))},
        attrs={"calibration": json.dumps({"mode": mode, "metric": metric, "target": target,
                                          "tolerance": tol, "max_iter": max_iter,
                                          "replicates": spec.replicates}),
               "spec": json.dumps(stored_spec(spec.raw), sort_keys=True),
               "spec_sha256": spec.sha256,
               "datasets": json.dumps([{"name": d.name, "sha256": md.sha256,
                                        "shape": list(md.values.shape)}
                                       for d, (md, _) in zip(spec.datasets, data)]),
               "versions": json.dumps(library_versions()),
               "conventions": json.dumps(cubemod.conventions(spec.options), sort_keys=True),
               "status_meaning": json.dumps(STATUS),
               "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def open_calibration(url: str) -> cubemod.Cube:
    """Open (and load) a calibration cube written by :func:`calibrate`.

    Like the audit cube, ``sel(method=...)`` selects methods.
    """
    try:
        ds = xr.open_zarr(str(url), consolidated=False, chunks=None)   # read here, as a cube
    except Exception as exc:
        raise unreadable_error("a calibration cube", url, type(exc).__name__) from None
    if "calibrated_param" not in ds:
        raise SdcInputError(f"{str(url)!r} is not a calibration cube (no calibrated_param)")
    return cubemod.as_cube(ds.load())


def calibration_table(ds: xr.Dataset, dataset: str | None = None) -> pd.DataFrame:
    """Methods at the calibrated parameters, like Table 1 of Domingo-Ferrer, Ricci and Soria.

    One row per (dataset, method): the parameter, the achieved level of the
    calibrated metric (mean and sd over replicates), every other metric at
    that parameter with its rank among the methods (1 = best), and the
    status. Rows are sorted by the rank of the first compared metric.
    """
    info = json.loads(ds.attrs["calibration"])
    achieved = "achieved_risk" if info["mode"] == "risk" else "achieved_utility"
    metrics = [str(m) for m in ds["metric"].values]
    kinds = dict(zip(metrics, [str(k) for k in ds["metric_kind"].values]))
    asc = dict(zip(metrics, [bool(a) for a in ds["ascending"].values]))
    wanted = ("utility", "loss") if info["mode"] == "risk" else ("risk",)
    compare = [m for m in metrics if kinds[m] in wanted and m != info["metric"]]
    rows = []
    datasets = [str(d) for d in ds["dataset"].values]
    for di, dname in enumerate(datasets):
        if dataset is not None and dname != dataset:
            continue
        for mi, m in enumerate(ds["method"].values):
            row = {"dataset": dname, "method": str(m),
                   "param_name": str(ds["param_name"].values[mi]),
                   "param": float(ds["calibrated_param"].values[di, mi]),
                   info["metric"]: float(ds[achieved].values[di, mi]),
                   f"{info['metric']} sd": float(ds["achieved_sd"].values[di, mi])}
            for ki, k in enumerate(metrics):
                if k in compare:
                    row[k] = float(ds["value"].values[di, mi, ki])
            row["status"] = str(ds["status"].values[di, mi])
            row["reach"] = (f"{ds['reach_low'].values[di, mi]:.4g}.."
                            f"{ds['reach_high'].values[di, mi]:.4g}")
            rows.append(row)
    t = pd.DataFrame(rows)
    if t.empty:
        return t
    for k in compare:
        t[f"{k} rank"] = t.groupby("dataset")[k].rank(ascending=asc[k], method="average",
                                                      na_option="keep")
    if compare:
        t = t.sort_values(["dataset", f"{compare[0]} rank"], kind="stable", na_position="last")
    t = t.set_index(["dataset", "method"])
    if len(datasets) == 1:
        t = t.droplevel("dataset")
    return t


# ---------------------------------------------------------------------------
# calibration to release rules


def calibrate_rules(spec: AuditSpec | str | Path, rules: Sequence[str], *,
                    loss: str | None = None, client: Any = None, max_iter: int = 20,
                    on_round: Callable[[str, int], None] | None = None,
                    data: list | None = None) -> CalibrationResult:
    """Per dataset and method, the parameter that meets every rule with the least loss.

    1. Each method is probed on its grid (the spec's ``params``), every replicate; a
       probe is acceptable when every replicate meets every rule (as in
       :mod:`sdcdist.rules`); the least mean ``loss`` among acceptable probes is the
       candidate (ties: the smaller parameter).
    2. Where a grid neighbour of the candidate has a smaller loss but breaks a rule, the
       boundary between them is bisected (integer parameters down to neighbouring
       integers; continuous ones to 1/1000 of the grid's range or ``max_iter`` rounds):
       an acceptable midpoint becomes the candidate's end, a breaking one the other end.
    3. The answer is the acceptable probe of least loss; a method with no acceptable
       probe is ``none acceptable`` with its closest probe (the smallest total normalised
       violation, spreads over all the calibration's probes).

    ``loss`` defaults to IL_S2 if the spec measures it, else IL1s, else the spec's first
    loss metric. Returns a :class:`CalibrationResult` without a cube (``cube`` None).
    """
    from ..rules import parse_rules
    t0 = time.perf_counter()
    if not isinstance(spec, AuditSpec):
        spec = load_spec(spec)
    rule_list = parse_rules([*spec.require, *rules], list(spec.metrics))
    if not rule_list:
        raise SdcInputError("no rules to calibrate to: give --require (e.g. --require "
                            "'DLD <= 5') or a spec with 'require:'")
    if loss is None:
        from ..metrics import preferred_loss
        loss = preferred_loss(list(spec.metrics))
        if loss is None:
            raise SdcInputError("the spec measures no loss metric to minimise; name one "
                                "with --loss")
    elif loss not in spec.metrics:
        raise SdcInputError(f"--loss {loss!r} is not a metric of the spec; metrics: "
                            f"{', '.join(spec.metrics)}")
    sign = 1.0 if get_metric(loss).ascending else -1.0
    if data is None:
        data = load_data(spec)
    names = list(dict.fromkeys([loss, *(r.name for r in rule_list)]))
    metrics = tuple(expand_requirements(names))
    ev = _Evaluator(spec, data, client)
    pts: dict[tuple[int, str], dict[float, dict[str, list[float]]]] = {}

    def measure(probes: list[tuple[int, str, float]], stage: str) -> None:
        if on_round:
            on_round(stage, len(probes))
        res = ev.evaluate(probes, metrics)
        for d, m, p in probes:
            pts.setdefault((d, m), {})[p] = res[d, m, p]

    def ok(v: dict[str, list[float]]) -> bool:
        return all(bool(r.holds(np.asarray(v[r.name], float)).all()) for r in rule_list)

    def mean_loss(v: dict[str, list[float]]) -> float:
        x = np.asarray(v[loss], float)
        return float(np.nanmean(x)) * sign if np.isfinite(x).any() else np.inf

    keys = [(d, ms.name) for d in range(len(data)) for ms in spec.methods]
    grids = {ms.name: sorted(ms.params) for ms in spec.methods}
    measure([(d, m, p) for d, m in keys for p in grids[m]], "grid")
    brackets: dict[tuple[int, str], list[float]] = {}      # [acceptable end, breaking end]
    for d, m in keys:
        g, P = grids[m], pts[d, m]
        good = [p for p in g if ok(P[p])]
        if not good:
            continue
        best = min(good, key=lambda p: (mean_loss(P[p]), p))
        i = g.index(best)
        nb = [g[j] for j in (i - 1, i + 1) if 0 <= j < len(g) and not ok(P[g[j]])
              and mean_loss(P[g[j]]) < mean_loss(P[best])]
        if nb and get_method(m).kind != "none":
            brackets[d, m] = [best, min(nb, key=lambda p: (mean_loss(P[p]), p))]
    rounds = 0
    while brackets and rounds < max_iter:
        rounds += 1
        mids = {}
        for (d, m), (a, b) in list(brackets.items()):
            span = max(grids[m]) - min(grids[m])
            if get_method(m).kind == "int":
                mid = float(np.floor((a + b) / 2)) if abs(b - a) > 1 else None
                if mid is not None and mid in (a, b):
                    mid = None
            else:
                mid = (a + b) / 2
                if abs(b - a) <= 1e-3 * span or not min(a, b) < mid < max(a, b):
                    mid = None
            if mid is None:
                del brackets[d, m]
            else:
                mids[d, m] = mid
        if not mids:
            break
        measure([(d, m, p) for (d, m), p in mids.items()], f"bisection {rounds}")
        for (d, m), mid in mids.items():
            a, b = brackets[d, m]
            brackets[d, m] = [mid, b] if ok(pts[d, m][mid]) else [a, mid]
    # the spreads of the normalised violation, over every probe of the calibration
    spread = {}
    for r in rule_list:
        vals = np.array([x for P in pts.values() for v in P.values() for x in v[r.name]],
                        float)
        vals = vals[np.isfinite(vals)]
        s = float(vals.max() - vals.min()) if vals.size else 0.0
        spread[r.name] = s if s > 0 else 1.0

    def violation(v: dict[str, list[float]]) -> float:
        total = 0.0
        for r in rule_list:
            x = np.asarray(v[r.name], float)
            if r.holds(x).all():
                continue
            g = r.gap(x)
            total += 1.0 if np.isnan(g).any() else max(0.0, float(g.max())) / spread[r.name]
        return total

    rows = []
    for d, m in keys:
        P = pts[d, m]
        good = [p for p in P if ok(P[p])]
        if good:
            p = min(good, key=lambda q: (mean_loss(P[q]), q))
            status, broken = "acceptable", ""
        else:
            p = min(P, key=lambda q: (violation(P[q]), mean_loss(P[q]), q))
            status = "none acceptable (closest)"
            broken = "; ".join(str(r) for r in rule_list
                               if not r.holds(np.asarray(P[p][r.name], float)).all())
        row: dict[str, Any] = {"dataset": spec.datasets[d].name, "method": m,
                               "param_name": get_method(m).param, "param": float(p),
                               "status": status, "breaks": broken, "probes": len(P)}
        for n in names:
            x = np.asarray(P[p][n], float)
            row[n] = float(np.nanmean(x)) if np.isfinite(x).any() else np.nan
        rows.append(row)
    table = pd.DataFrame(rows).set_index(["dataset", "method"])
    table.attrs.update(loss=loss, rules=[str(r) for r in rule_list])
    return CalibrationResult(None, table, ev.probes, time.perf_counter() - t0)
