"""Benchmark: PRL's counting path against all pairs at 200,000 and 1,000,000 records.

Synthetic files (:func:`sdcdist.data.synth.generate`, 8 numeric key columns,
seed 1), masked by additive noise with variance 0.1 var (``noise``, p = 0.1);
one key set of all 8 columns; the papers' binary ``l`` comparison at t = 0.05.
On a LocalCluster of ``--workers`` processes (1 thread each) it prints, per size:

- the counting path (``prl_counting=count``): B's index, the exact pattern
  counts, the KD-tree of A and the top-c candidates (branch and bound). With
  ``--full N`` the whole linkage (EM, sparse assignment, PLD) runs end to end
  at sizes <= N; above, the counting and candidate passes run on a sample of
  row blocks spread over the file and are extrapolated (EM then fits on the
  sampled counts, which only sets the weights the candidate search uses);
- the all-pairs path on sampled blocks (the same A rows for the counts, the
  same B rows for the candidates), extrapolated to the whole file, and whether
  its counts and candidates equal the counting path's on those blocks bit for
  bit (equal counts and candidates give the same EM, assignment and PLD);
- peak resident memory of every process, and a 10,000,000-record estimate
  from the measured scaling.

The end-to-end run reports wall and CPU time; the pieces report CPU time of the tasks
divided by the workers, i.e. the wall time on otherwise idle cores (the machine this ran
on was shared: the load average is printed). A multi-level comparison (t = 0.02, 0.05,
0.2) is timed on one sampled block per size.

    python benchmarks/prl_scale.py [--sizes 200000,1000000] [--workers 2] [--full 200000]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

KEYS = 8
T = 0.05
LEVELS = (0.02, 0.05, 0.2)


def make_files(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    from sdcdist.data import synth
    from sdcdist.masking import REGISTRY
    A = synth.generate(n, columns=KEYS, seed=seed).values
    B = REGISTRY["noise"](A, 0.1, rng=np.random.default_rng(seed))
    return A, B


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _blocks(n: int, rows: int, count: int) -> list[tuple[int, int]]:
    """``count`` blocks of ``rows`` rows spread evenly over ``n`` rows."""
    starts = np.linspace(0, n - rows, count).astype(int)
    return [(int(s), int(s) + rows) for s in starts]


def _built_in(fn, *args) -> float:
    """CPU seconds ``fn(*args)`` takes on a worker (the result stays there)."""
    t0 = time.thread_time()
    fn(*args)
    return time.thread_time() - t0


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _sub(side: dict, s: int, e: int) -> dict:
    return {k: v[s:e] for k, v in side.items()}


# tasks (module level so that worker processes can import them)

def _count_sample(A: dict, index: dict, cmp, s: int, e: int):
    from sdcdist.linkage.prl import counting, topc
    t0 = time.thread_time()
    c, enum = counting.count_block(_sub(A, s, e), index, cmp)
    return c, enum, time.thread_time() - t0


def _pairs_count_sample(A: dict, B: dict, cmp, s: int, e: int):
    from sdcdist.linkage import prl
    t0 = time.thread_time()
    codes, counts = prl.pattern_counts(_sub(A, s, e), B, cmp)
    t = time.thread_time() - t0
    dense = np.zeros(cmp.n_patterns, dtype=np.int64)   # as the counting path returns them
    dense[codes] = counts
    return dense, t


def _topc_sample(tree: dict, B: dict, cmp, wp, c: int, s: int, e: int):
    from sdcdist.linkage.prl import counting, topc
    t0 = time.thread_time()
    out = topc.topc_search(tree, _sub(B, s, e), cmp, wp, c)
    return out, time.thread_time() - t0


def _pairs_topc_sample(A: dict, B: dict, cmp, wp, c: int, s: int, e: int):
    from sdcdist.linkage import prl
    t0 = time.thread_time()
    out = prl.topc_block(A, _sub(B, s, e), cmp, wp, c)
    return out, time.thread_time() - t0


def _warm() -> None:
    """Compile (or load) every kernel the samples time, on a tiny problem."""
    from sdcdist.linkage import prl
    from sdcdist.linkage.prl import counting, topc
    A, B = make_files(300)
    for t in (T, LEVELS):
        cmp = prl.comparison(KEYS, method="l", t=t)
        a = prl.prepare_side(A, tuple(range(KEYS)), cmp, side="a")
        b = prl.prepare_side(B, tuple(range(KEYS)), cmp, side="b")
        counting.count_block(a, counting.build_index(b, cmp), cmp)
        counts = prl.pattern_counts(a, b, cmp)
        wp = prl.weight_params(prl.em(counts, cmp, p_start=1 / 300, p_max=1 / 300), cmp)
        topc.topc_search(topc.build_tree(a, scale=topc.split_scale(wp, cmp)),
                              b, cmp, wp, 20)
        prl.topc_block(a, b, cmp, wp, 20)


def _load() -> str:
    try:
        return "load average %.1f %.1f %.1f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def bench(n: int, workers: int, full: bool, sample_rows: int, samples: int) -> dict:
    from distributed import Client, LocalCluster

    from sdcdist.linkage import prl
    from sdcdist.linkage.prl import counting, topc
    from sdcdist.linkage.prl.counting import build_index as _index
    from sdcdist.linkage.prl.topc import build_tree as _tree
    from sdcdist.linkage.prl import probabilistic_linkage
    from sdcdist.parallel import Runner

    A, B = make_files(n)
    cols = tuple(range(KEYS))
    cmp = prl.comparison(KEYS, method="l", t=T)
    out: dict = {"n": n, "load_start": _load()}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=40) as cluster, \
            Client(cluster) as client:
        runner = Runner(client)
        client.run(_warm)
        _warm()
        Ah, Bh = runner.share(A), runner.share(B)
        Ap = runner.task(prl.prepare_side, Ah, cols, cmp, side="a")
        Bp = runner.task(prl.prepare_side, Bh, cols, cmp, side="b")
        runner.result(Ap), runner.result(Bp)
        if full:
            cpu0 = sum(client.run(_cpu_s).values()) + _cpu_s()
            t0 = time.perf_counter()
            res = probabilistic_linkage(runner, Ah, Bh, n, n, cols, method="l", t=T,
                                        counting="count")
            out["wall_count"] = time.perf_counter() - t0
            out["cpu_count"] = sum(client.run(_cpu_s).values()) + _cpu_s() - cpu0
            out["pld"] = 100.0 * res.correct / n
            out["pld20"] = 100.0 * res.correct20 / n
            out["info"] = {k: res.info.get(k) for k in ("counting", "pairs_enumerated",
                                                    "pairs_weighed", "timings",
                                                    "assignment", "em_iterations")}
            wp = prl.weight_params(res.fit, cmp)
            out["rss_workers_full"] = max(client.run(_maxrss_mib).values())
            # printed at once: the pieces below take a while on a busy machine
            print(f"{n:,} records end to end: {out['wall_count']:.0f} s wall, "
                  f"{out['cpu_count']:.0f} CPU s, PLD {out['pld']:.2f} %, peak RSS worker "
                  f"{out['rss_workers_full']:.0f} MiB ({_load()}); {out['info']}", flush=True)
        # the counting path's pieces, timed one by one
        out["t_index"] = runner.call(_built_in, _index, Bp, cmp)
        ixh = runner.task(_index, Bp, cmp)
        blocks = _blocks(n, sample_rows, samples)
        cparts = runner.result([runner.task(_count_sample, Ap, ixh, cmp, s, e)
                                for s, e in blocks])
        pparts = runner.result([runner.task(_pairs_count_sample, Ap, Bp, cmp, s, e)
                                for s, e in blocks])
        sampled = samples * sample_rows
        out["counts_equal"] = all(np.array_equal(c[0], p[0]) for c, p in zip(cparts, pparts))
        out["share_enumerated"] = sum(c[1] for c in cparts) / (sampled * n)
        scale = n / sampled / workers
        out["t_counts"] = sum(c[2] for c in cparts) * scale
        out["t_pairs_counts"] = sum(p[1] for p in pparts) * scale
        if not full:
            counts = sum(c[0] for c in cparts)
            p0 = sampled / (sampled * float(n))
            fit = prl.em(counts, cmp, p_start=p0, p_max=p0)
            wp = prl.weight_params(fit, cmp)
        sscale = topc.split_scale(wp, cmp)
        out["t_tree"] = runner.call(_built_in, _tree, Ap, sscale)
        treeh = runner.task(_tree, Ap, sscale)
        tparts = runner.result([runner.task(_topc_sample, treeh, Bp, cmp, wp, 20, s, e)
                                for s, e in blocks])
        qparts = runner.result([runner.task(_pairs_topc_sample, Ap, Bp, cmp, wp, 20, s, e)
                                for s, e in blocks])
        out["topc_equal"] = all(np.array_equal(t[0]["idx"], q[0]["idx"])
                                and np.array_equal(t[0]["w"], q[0]["w"])
                                for t, q in zip(tparts, qparts))
        out["share_weighed"] = sum(t[0]["visited"] for t in tparts) / (sampled * n)
        out["t_topc"] = sum(t[1] for t in tparts) * scale
        out["t_pairs_topc"] = sum(q[1] for q in qparts) * scale
        # a multi-level comparison on one block
        cmp3 = prl.comparison(KEYS, method="l", t=LEVELS)
        A3 = runner.task(prl.prepare_side, Ah, cols, cmp3, side="a")
        B3 = runner.task(prl.prepare_side, Bh, cols, cmp3, side="b")
        ix3 = runner.task(_index, B3, cmp3)
        s, e = blocks[len(blocks) // 2]
        c3 = runner.call(_count_sample, A3, ix3, cmp3, s, e)
        p3 = runner.call(_pairs_count_sample, A3, B3, cmp3, s, e)
        out["ml_equal"] = bool(np.array_equal(c3[0], p3[0]))
        out["ml_t_counts"] = c3[2] * n / sample_rows / workers
        out["ml_t_pairs"] = p3[1] * n / sample_rows / workers
        out["ml_share"] = c3[1] / (sample_rows * n)
        out["rss_workers"] = max(client.run(_maxrss_mib).values())
        out["rss_scheduler"] = client.run_on_scheduler(_maxrss_mib)
        out["rss_client"] = _maxrss_mib()
        out["index_mib"] = counting.index_bytes(n, KEYS) / 2**20
    out["load_end"] = _load()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="200000,1000000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full", type=int, default=200_000,
                    help="run the whole linkage end to end up to this size")
    ap.add_argument("--sample-rows", type=int, default=2048)
    ap.add_argument("--samples", type=int, default=4)
    args = ap.parse_args()
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        r = bench(n, args.workers, n <= args.full, args.sample_rows, args.samples)
        rows.append(r)
        print(flush=True)
        print(f"\n== {n:,} records x {KEYS} keys, l method, t = {T} ({r['load_start']})")
        if "wall_count" in r:
            print(f"counting path end to end: {r['wall_count']:.0f} s wall, "
                  f"{r['cpu_count']:.0f} CPU s (client + workers), PLD {r['pld']:.2f} %, "
                  f"PLD20 {r['pld20']:.2f} %; {r['info']}")
        print(f"counting path pieces, CPU s / {args.workers} workers = wall on idle cores "
              f"(sampled "
              f"{args.samples} x {args.sample_rows} rows, extrapolated): index "
              f"{r['t_index']:.1f} s, counts {r['t_counts']:.0f} s (enumerates "
              f"{100 * r['share_enumerated']:.1f} % of pairs), KD-tree {r['t_tree']:.1f} s, "
              f"top-20 {r['t_topc']:.0f} s (weighs {100 * r['share_weighed']:.2f} % of pairs)")
        print(f"all pairs on the same blocks, extrapolated: counts {r['t_pairs_counts']:.0f} s, "
              f"top-20 {r['t_pairs_topc']:.0f} s")
        print(f"bit for bit on the sampled blocks: counts {r['counts_equal']}, "
              f"candidates and weights {r['topc_equal']} (so the same EM, assignment, PLD)")
        print(f"multi-level t = {LEVELS}: counts {r['ml_t_counts']:.0f} s vs all pairs "
              f"{r['ml_t_pairs']:.0f} s (enumerates {100 * r['ml_share']:.1f} %), equal "
              f"{r['ml_equal']}")
        print(f"peak RSS: worker {r['rss_workers']:.0f} MiB, scheduler "
              f"{r['rss_scheduler']:.0f} MiB, client {r['rss_client']:.0f} MiB (B index "
              f"{r['index_mib']:.0f} MiB); {r['load_end']}", flush=True)
    big = rows[-1]
    n1 = big["n"]
    f = 10_000_000 / n1
    # counts: enumerated share constant in n -> n^2; top-c: weighed share measured
    # between the two sizes -> n^(2 - gamma)
    if len(rows) > 1 and rows[0]["share_weighed"] > 0:
        gamma = np.log(rows[0]["share_weighed"] / big["share_weighed"]) / \
            np.log(n1 / rows[0]["n"])
    else:
        gamma = 0.0
    est = big["t_counts"] * f**2 + big["t_topc"] * f**(2 - gamma) + \
        (big["t_index"] + big["t_tree"]) * f * np.log(10_000_000) / np.log(n1)
    pairs = (big["t_pairs_counts"] + big["t_pairs_topc"]) * f**2
    print(f"\n10,000,000 records on {args.workers} workers, estimated from {n1:,}: counting "
          f"path {est / 3600:.0f} h (counts x{f**2:.0f}, top-20 x{f**(2 - gamma):.0f} with "
          f"the weighed share falling as n^-{gamma:.2f}), all pairs {pairs / 3600:.0f} h; "
          "before assignment", flush=True)


if __name__ == "__main__":
    main()
