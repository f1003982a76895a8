"""Benchmark: all-pairs probabilistic record linkage on Dask vs recordlinkage and splink.

For synthetic files of 10,000, 59,315 and 200,000 records (8 key columns, the
masked file = ``noise`` with p = 0.1) it prints, for sdcdist's PRL over ALL
pairs: wall time of each pass (patterns, EM, candidates, assignment), peak
memory of every process (client, scheduler, workers), pairs compared and PLD
(and PLD20). Beside it, on the same files: the ``recordlinkage`` package (ECM
classifier; full index where it fits in memory, else sorted-neighbourhood
blocking) and ``splink`` on DuckDB (its EM, with OR-ed blocking rules), with
time, peak memory and re-identification rate (share of masked records whose
best-scored link is their own record). A peer that is not installed is skipped
with a note: they are not sdcdist dependencies (``pip install recordlinkage
splink duckdb``).

Every tool and size runs in a fresh process, so peak RSS is per run. Both
tools compare on the same scale: l-method agreement
``|g(a) - g(b)| <= t max(|g(a)|, 0.1)``, t = 0.05, ``g(v) = sign(v) log(1+|v|)``.

    python benchmarks/prl.py [--sizes 10000,59315,200000] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time
import traceback

import numpy as np

T = 0.05
KEYS = 8
PEER_PAIR_BUDGET = 10_000_000     # pairs recordlinkage may hold in memory (pandas)


def make_files(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from sdcdist.data import synth
    from sdcdist.masking import REGISTRY
    A = synth.generate(n, columns=KEYS, seed=seed).values
    B = REGISTRY["noise"](A, 0.1, rng=np.random.default_rng(seed + 1))
    return A, B


def _g(X: np.ndarray) -> np.ndarray:
    return np.sign(X) * np.log1p(np.abs(X))


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu_s() -> float:
    """CPU seconds used by this process (all threads): a load-independent cost."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- sdcdist -----------------------------------------------------------------

def run_sdcdist(n: int, workers: int) -> dict:
    from distributed import Client, LocalCluster

    from sdcdist.linkage.prl_drivers import probabilistic_linkage
    from sdcdist.parallel import Runner
    A, B = make_files(n)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=40) as cluster, \
            Client(cluster) as client:
        runner = Runner(client)
        Ah, Bh = runner.share(A), runner.share(B)
        t0 = time.perf_counter()
        res = probabilistic_linkage(runner, Ah, Bh, n, n, tuple(range(KEYS)), t=T)
        wall = time.perf_counter() - t0
        rss_w = client.run(_maxrss_mib)
        rss_s = client.run_on_scheduler(_maxrss_mib)
        cpu = sum(client.run(_cpu_s).values()) + client.run_on_scheduler(_cpu_s) + _cpu_s()
    i = res.info
    return {"tool": "sdcdist PRL (all pairs)", "n": n, "wall": wall, "cpu": cpu,
            "timings": i["timings"],
            "pairs": i["pairs_compared"], "reid": 100.0 * res.correct / n,
            "pld20": 100.0 * res.correct20 / n,
            # the LocalCluster's scheduler lives in the client process
            "mem": {"client+scheduler": max(_maxrss_mib(), rss_s),
                    **{f"worker{k}": v for k, v in enumerate(rss_w.values())}},
            "note": f"{i['assignment']} assignment, EM {i['em_iterations']} it, "
                    f"P(M)={i['p_match']:.2e}, true in top-20 {i['true_in_candidates']}"}


# -- recordlinkage -------------------------------------------------------------

def run_recordlinkage(n: int) -> dict:
    import pandas as pd
    import recordlinkage as rl
    from recordlinkage.base import BaseCompareFeature

    class Tolerance(BaseCompareFeature):
        def __init__(self, left, right, t, label=None):
            super().__init__(left, right, label=label)
            self.t = t

        def _compute_vectorized(self, s1, s2):
            return ((s1 - s2).abs() <= self.t * np.maximum(s1.abs(), 0.1)).astype(np.int8)

    A, B = make_files(n)
    cols = [f"k{j}" for j in range(KEYS)]
    dfa = pd.DataFrame(_g(A), columns=cols)
    dfb = pd.DataFrame(_g(B), columns=cols)
    t0 = time.perf_counter()
    idx = rl.Index()
    if n * n <= PEER_PAIR_BUDGET:
        idx.full()
        how = "full index"
    else:
        w = max(3, int(PEER_PAIR_BUDGET // n) | 1)
        idx.sortedneighbourhood("k0", window=w)
        how = f"sorted neighbourhood on k0, window {w}"
    pairs = idx.index(dfa, dfb)
    t_index = time.perf_counter() - t0
    cmp = rl.Compare([Tolerance(c, c, T, label=c) for c in cols])
    feats = cmp.compute(pairs, dfa, dfb)
    t_cmp = time.perf_counter() - t0 - t_index
    ecm = rl.ECMClassifier(binarize=None)
    ecm.fit(feats)
    prob = pd.Series(ecm.prob(feats), index=feats.index)
    best = prob.groupby(level=1).idxmax()
    a_rows = np.array([p[0] for p in best.values])
    b_rows = best.index.to_numpy()
    reid = 100.0 * np.count_nonzero(a_rows == b_rows) / n
    wall = time.perf_counter() - t0
    return {"tool": "recordlinkage ECM", "n": n, "wall": wall, "cpu": _cpu_s(),
            "timings": {"index": t_index, "compare": t_cmp, "ecm+best": wall - t_index - t_cmp},
            "pairs": len(pairs), "reid": reid, "mem": {"process": _maxrss_mib()}, "note": how}


# -- splink ----------------------------------------------------------------------

def run_splink(n: int) -> dict:
    import pandas as pd
    import splink.comparison_level_library as cll
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    A, B = make_files(n)
    cols = [f"k{j}" for j in range(KEYS)]

    # bins for blocking, narrower for larger files to keep the pairs near 5e7
    width = min(1.0, 0.5 * 59_315 / n)

    def frame(X: np.ndarray) -> pd.DataFrame:
        df = pd.DataFrame(_g(X), columns=cols)
        for c in cols:
            df[f"bin_{c}"] = np.floor(df[c] / width).astype(np.int64)
        df.insert(0, "unique_id", np.arange(len(df)))
        return df

    t0 = time.perf_counter()
    api = DuckDBAPI()
    sa = api.register(frame(A), dataset_display_name="a")
    sb = api.register(frame(B), dataset_display_name="b")
    comparisons = [cl.CustomComparison(
        [cll.CustomLevel(f"abs({c}_l - {c}_r) <= {T} * greatest(abs({c}_l), 0.1)",
                         label_for_charts="agree"), cll.ElseLevel()],
        output_column_name=c) for c in cols]
    rules = [block_on(f"bin_k{j}", f"bin_k{j + 1}") for j in (6, 4, 0, 2)]
    settings = SettingsCreator(link_type="link_only", comparisons=comparisons,
                               blocking_rules_to_generate_predictions=rules,
                               probability_two_random_records_match=1.0 / n,
                               retain_matching_columns=False)
    linker = Linker([sa, sb], settings, log_level=40)
    linker.training.estimate_u_using_random_sampling(max_pairs=2e6, seed=1)
    linker.training.estimate_parameters_using_expectation_maximisation(
        block_on("bin_k6", "bin_k7"))
    t_train = time.perf_counter() - t0
    pred = linker.inference.predict().as_pandas_dataframe()
    t_pred = time.perf_counter() - t0 - t_train
    # each masked record's best-scored link
    left_is_a = pred["source_dataset_l"] == "a"
    a_id = np.where(left_is_a, pred["unique_id_l"], pred["unique_id_r"])
    b_id = np.where(left_is_a, pred["unique_id_r"], pred["unique_id_l"])
    df = pd.DataFrame({"a": a_id, "b": b_id, "w": pred["match_weight"].to_numpy()})
    best = df.sort_values(["b", "w"], ascending=[True, False]).drop_duplicates("b")
    reid = 100.0 * np.count_nonzero(best["a"].to_numpy() == best["b"].to_numpy()) / n
    wall = time.perf_counter() - t0
    return {"tool": "splink (DuckDB)", "n": n, "wall": wall, "cpu": _cpu_s(),
            "timings": {"train": t_train, "predict": t_pred, "best": wall - t_train - t_pred},
            "pairs": len(pred), "reid": reid, "mem": {"process": _maxrss_mib()},
            "note": f"blocking: equal bins of (k6,k7) OR (k4,k5) OR (k0,k1) OR (k2,k3), "
                    f"bin width {width:.2f} in g"}


# -- driver ------------------------------------------------------------------------

RUNNERS = {"sdcdist": run_sdcdist, "recordlinkage": run_recordlinkage, "splink": run_splink}
MODULES = {"recordlinkage": "recordlinkage", "splink": "splink"}


def _child(name: str, n: int, workers: int, conn) -> None:
    try:
        fn = RUNNERS[name]
        conn.send(fn(n, workers) if name == "sdcdist" else fn(n))
    except BaseException as exc:  # report, never hang the parent
        conn.send({"error": f"{type(exc).__name__}: {exc}",
                   "trace": traceback.format_exc(limit=3)})


def run_isolated(name: str, n: int, workers: int, timeout: float) -> dict:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(name, n, workers, child))
    p.start()
    if parent.poll(timeout):
        out = parent.recv()
    else:
        out = {"error": f"did not finish within {timeout:.0f} s (stopped)"}
        p.terminate()
    p.join(30)
    return out


def fmt(r: dict) -> str:
    if "error" in r:
        return f"  {r.get('tool', '?'):26s} FAILED/SKIPPED: {r['error']}"
    mem = ", ".join(f"{k} {v:,.0f}" for k, v in r["mem"].items())
    tim = ", ".join(f"{k} {v:.1f}" for k, v in r["timings"].items())
    extra = f"  PLD20 {r['pld20']:.2f}" if "pld20" in r else ""
    return (f"  {r['tool']:26s} wall {r['wall']:8.1f} s  [{tim}]  "
            f"CPU of all its processes {r.get('cpu', float('nan')):.0f} s\n"
            f"  {'':26s} pairs {r['pairs']:,}  re-identified {r['reid']:.2f} %{extra}\n"
            f"  {'':26s} peak RSS MiB: {mem}\n"
            f"  {'':26s} {r['note']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,59315,200000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--peers", default="recordlinkage,splink")
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    import importlib.util
    print(f"PRL benchmark: {KEYS} key columns, noise p = 0.1, l method t = {T}, "
          f"{args.workers} workers; timings on a shared machine are noisy")
    for n in (int(s) for s in args.sizes.split(",")):
        print(f"\n== {n:,} records x {n:,} records ({n * n:.3g} pairs) ==")
        results = [run_isolated("sdcdist", n, args.workers, args.timeout)]
        results[0].setdefault("tool", "sdcdist PRL (all pairs)")
        print(fmt(results[0]), flush=True)
        for name in peers:
            if importlib.util.find_spec(MODULES[name]) is None:
                print(f"  {name:26s} skipped: not installed (pip install {name})")
                continue
            r = run_isolated(name, n, args.workers, args.timeout)
            r.setdefault("tool", name)
            results.append(r)
            print(fmt(r), flush=True)
        ok = [r for r in results[1:] if "error" not in r]
        if "error" not in results[0] and ok:
            best = max(ok, key=lambda r: r["reid"])
            print(f"  ratio: sdcdist re-identification / best peer ({best['tool']}) = "
                  f"{results[0]['reid'] / max(best['reid'], 1e-9):.2f}; "
                  f"time ratio {results[0]['wall'] / best['wall']:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
